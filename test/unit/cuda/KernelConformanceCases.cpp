//===- KernelConformanceCases.cpp - Inputs, the case table, elementwise ---===//
//
// Random input helpers, the case table and the CUDA backend's op list, and
// the cases of the elementwise and data movement kernels.
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loom::rt::conformance {

const std::vector<std::string> kCudaBackendOps = {
    // Elementwise.cu
    "add", "sub", "mul", "div", "pow", "mod", "fmod", "neg", "exp", "log",
    "sqrt", "erf", "tanh", "relu", "sigmoid", "gelu", "relu_grad", "gelu_grad",
    "cast", "select", "cos", "sin", "abs", "reciprocal", "softplus", "mish",
    "hard_swish", "leaky_relu", "elu", "selu", "hard_sigmoid", "clip",
    "unary_grad",
    // Compare.cu
    "equal", "less", "less_equal", "greater", "greater_equal", "and", "or",
    "xor", "not", "max", "min", "trilu",
    // DataMovement.cu
    "reshape", "broadcast", "transpose", "slice", "slice_grad", "pad",
    "pad_grad", "concat", "gather", "gather_grad",
    // Reduction.cu
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_max_grad", "arg_max",
    "arg_min",
    // Normalization.cu
    "softmax", "log_softmax", "layer_norm", "layer_norm_grad", "batch_norm",
    // Loss.cu
    "softmax_cross_entropy", "softmax_cross_entropy_grad", "label_count",
    "mse_loss",
    // Optimizer.cu
    "sgd_update", "momentum_update", "adam_update",
    // Matmul.cpp
    "matmul", "fused_matmul",
    // ConvPool.cu
    "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "max_pool2d",
    "avg_pool2d", "max_pool2d_grad", "avg_pool2d_grad", "conv_transpose2d",
    // Dropout.cu
    "dropout",
    // Indexing.cu
    "gather_elements", "scatter_elements", "cumsum", "top_k", "reduce_prod",
    "reduce_prod_grad",
    // Resize.cu
    "resize", "resize_grad"};

const std::vector<CaseSpec> &conformanceCases() {
  static const std::vector<CaseSpec> cases = [] {
    std::vector<CaseSpec> all;
    addElementwiseCases(all);
    addDataMovementCases(all);
    addReductionNormalizationCases(all);
    addLossOptimizerMatmulCases(all);
    addConvPoolCases(all);
    addCompareCases(all);
    addDropoutCases(all);
    addIndexingCases(all);
    addResizeCases(all);
    return all;
  }();
  return cases;
}

Tolerance defaultTolerance(DType dtype, int64_t reduction) {
  double grow = std::sqrt(static_cast<double>(std::max<int64_t>(reduction, 1)));
  switch (dtype) {
  case DType::F32:
    return {1e-5 * grow, 1e-4};
  // f16 and bf16: about 2.5 ulps of the result, plus half an ulp of a
  // value of the size of the sum's terms, for a kernel that rounds an
  // intermediate to the element type (a separate bias pass, a rescaled
  // average) before a final step that may cancel.
  case DType::F16:
    return {5e-4 * grow, 2.5e-3};
  case DType::BF16:
    return {4e-3 * grow, 2e-2};
  default:
    return {0, 0};
  }
}

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

double elementAt(const HostBuffer &t, int64_t index) {
  const unsigned char *p = t.bytes.data() + index * dtypeSize(t.dtype);
  switch (t.dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return t.dtype == DType::F16 ? halfToFloat(v) : bf16ToFloat(v);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  }
  case DType::Bool:
    return *p;
  }
  return 0;
}

void setElement(HostBuffer &t, int64_t index, double value) {
  unsigned char *p = t.bytes.data() + index * dtypeSize(t.dtype);
  switch (t.dtype) {
  case DType::F32: {
    float v = static_cast<float>(value);
    std::memcpy(p, &v, sizeof v);
    return;
  }
  case DType::F16:
  case DType::BF16: {
    float f = static_cast<float>(value);
    uint16_t v = t.dtype == DType::F16 ? floatToHalf(f) : floatToBf16(f);
    std::memcpy(p, &v, sizeof v);
    return;
  }
  case DType::I32: {
    auto v = static_cast<int32_t>(value);
    std::memcpy(p, &v, sizeof v);
    return;
  }
  case DType::I64: {
    auto v = static_cast<int64_t>(value);
    std::memcpy(p, &v, sizeof v);
    return;
  }
  case DType::Bool:
    *p = value != 0;
    return;
  }
}

HostBuffer zeros(DType dtype, Shape shape) {
  HostBuffer t{dtype, std::move(shape), {}};
  t.bytes.assign(numElements(t.shape) * dtypeSize(dtype), 0);
  return t;
}

HostBuffer uniform(DType dtype, Shape shape, std::mt19937 &rng, double lo,
                   double hi) {
  HostBuffer t = zeros(dtype, std::move(shape));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0, n = numElements(t.shape); i < n; ++i)
    setElement(t, i, dist(rng));
  return t;
}

HostBuffer awayFromZero(DType dtype, Shape shape, std::mt19937 &rng, double lo,
                        double hi) {
  HostBuffer t = zeros(dtype, std::move(shape));
  std::uniform_real_distribution<double> dist(lo, hi);
  std::bernoulli_distribution negative(0.5);
  for (int64_t i = 0, n = numElements(t.shape); i < n; ++i)
    setElement(t, i, negative(rng) ? -dist(rng) : dist(rng));
  return t;
}

HostBuffer levels(DType dtype, Shape shape, std::mt19937 &rng, double lo,
                  double step, int count) {
  HostBuffer t = zeros(dtype, std::move(shape));
  std::uniform_int_distribution<int> dist(0, count - 1);
  for (int64_t i = 0, n = numElements(t.shape); i < n; ++i)
    setElement(t, i, lo + step * dist(rng));
  return t;
}

HostBuffer integers(DType dtype, Shape shape, std::mt19937 &rng, int64_t lo,
                    int64_t hi) {
  HostBuffer t = zeros(dtype, std::move(shape));
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (int64_t i = 0, n = numElements(t.shape); i < n; ++i)
    setElement(t, i, static_cast<double>(dist(rng)));
  return t;
}

HostBuffer scalar(DType dtype, double value) {
  HostBuffer t = zeros(dtype, {});
  setElement(t, 0, value);
  return t;
}

std::string caseName(const std::string &op, const std::string &variant,
                     DType dtype) {
  return op + (variant.empty() ? "" : "_" + variant) + "_" + dtypeName(dtype);
}

void addCase(std::vector<CaseSpec> &cases, const std::string &op,
             const std::string &variant, DType dtype,
             std::function<Case(std::mt19937 &)> make) {
  cases.push_back({caseName(op, variant, dtype), op, std::move(make)});
}

namespace {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Operand values of a binary op: divisors away from zero, pow's bases
/// positive.
HostBuffer binaryOperand(const std::string &op, int which, DType dtype,
                         const Shape &shape, std::mt19937 &rng) {
  bool integer = !isFloat(dtype);
  bool remainder = op == "mod" || op == "fmod";
  if ((op == "div" || remainder) && which == 1)
    return integer ? awayFromZero(dtype, shape, rng, 1, 9)
                   : awayFromZero(dtype, shape, rng, 0.5, 2);
  if (op == "pow")
    return which == 0 ? uniform(dtype, shape, rng, 0.1, 3)
                      : uniform(dtype, shape, rng, -2, 2);
  return integer ? integers(dtype, shape, rng, -1000, 1000)
                 : uniform(dtype, shape, rng, -2, 2);
}

void addBinaryCases(std::vector<CaseSpec> &cases) {
  struct Shapes {
    const char *name;
    Shape lhs, rhs, out;
  };
  const std::vector<Shapes> shapes = {
      {"same", {4, 5, 6}, {4, 5, 6}, {4, 5, 6}},
      // Vectors of 16 bytes and a tail shorter than one, in every type.
      {"same_tail", {3, 7}, {3, 7}, {3, 7}},
      {"bcast_rhs", {2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}},
      {"bcast_both", {3, 1, 5}, {4, 1}, {3, 4, 5}},
      {"scalar_rhs", {7, 9}, {}, {7, 9}},
      {"scalar_lhs", {}, {6, 5}, {6, 5}},
      // Leading dimensions broadcast: the indexer merges them into one, and
      // each thread computes a run of the innermost dimension.
      {"bcast_lead", {2, 3, 4, 5, 6}, {1, 1, 4, 5, 6}, {2, 3, 4, 5, 6}},
      // More dimensions than an indexer holds, all merging into one.
      {"rank10", Shape(10, 2), Shape(10, 2), Shape(10, 2)},
  };
  for (const char *op : {"add", "sub", "mul", "div", "pow", "mod", "fmod"}) {
    for (DType dtype :
         {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
      if (!isFloat(dtype) && std::string(op) == "pow")
        continue; // the CUDA kernel has no integer pow
      for (const Shapes &s : shapes) {
        // Every shape pattern in f32; one per other type.
        if (dtype != DType::F32 && std::string(s.name) != "bcast_rhs" &&
            std::string(s.name) != "same_tail" &&
            std::string(s.name) != "bcast_lead")
          continue;
        addCase(cases, op, s.name, dtype, [=](std::mt19937 &rng) {
          Case c;
          c.inputs = {binaryOperand(op, 0, dtype, s.lhs, rng),
                      binaryOperand(op, 1, dtype, s.rhs, rng)};
          c.outputs = {{dtype, s.out}};
          return c;
        });
      }
    }
  }
}

void addUnaryCases(std::vector<CaseSpec> &cases) {
  struct Unary {
    const char *op, *variant;
    double lo, hi;
    bool tanhForm;
  };
  const std::vector<Unary> unaries = {
      {"neg", "", -3, 3, false},     {"exp", "", -4, 4, false},
      {"log", "", 0.01, 8, false},   {"sqrt", "", 0, 9, false},
      {"erf", "", -3, 3, false},     {"tanh", "", -4, 4, false},
      {"relu", "", -2, 2, false},    {"sigmoid", "", -6, 6, false},
      {"gelu", "erf", -4, 4, false}, {"gelu", "tanh", -4, 4, true},
  };
  for (const Unary &u : unaries)
    for (DType dtype : kFloatTypes)
      addCase(cases, u.op, u.variant, dtype, [=](std::mt19937 &rng) {
        Case c;
        if (u.tanhForm)
          c.attrs.set("tanh_approximation", true);
        c.inputs = {uniform(dtype, {3, 5, 7}, rng, u.lo, u.hi)};
        c.outputs = {{dtype, {3, 5, 7}}};
        return c;
      });
  for (DType dtype : {DType::I32, DType::I64})
    addCase(cases, "neg", "", dtype, [=](std::mt19937 &rng) {
      Case c;
      c.inputs = {integers(dtype, {4, 9}, rng, -100000, 100000)};
      c.outputs = {{dtype, {4, 9}}};
      return c;
    });

  // Activation gradients: relu_grad's input includes exact zeros (the
  // boundary, where the gradient is 0).
  for (DType dtype : kFloatTypes) {
    addCase(cases, "relu_grad", "", dtype, [=](std::mt19937 &rng) {
      Case c;
      c.inputs = {levels(dtype, {6, 11}, rng, -2, 0.25, 17),
                  uniform(dtype, {6, 11}, rng)};
      c.outputs = {{dtype, {6, 11}}};
      return c;
    });
    for (bool tanhForm : {false, true})
      addCase(cases, "gelu_grad", tanhForm ? "tanh" : "erf", dtype,
              [=](std::mt19937 &rng) {
                Case c;
                if (tanhForm)
                  c.attrs.set("tanh_approximation", true);
                c.inputs = {uniform(dtype, {5, 13}, rng, -5, 5),
                            uniform(dtype, {5, 13}, rng)};
                c.outputs = {{dtype, {5, 13}}};
                return c;
              });
  }
}

/// The activations of common/ops/ElementwiseMath.h and their unary_grad.
/// Each one's inputs span its kinks; the gradient's are on a grid of
/// levels that holds them exactly (hard_swish's -3 and 3, clip's bounds,
/// hard_sigmoid's -2.5 and 2.5, 0 for the rest).
void addActivationCases(std::vector<CaseSpec> &cases) {
  struct Activation {
    const char *op, *variant;
    double lo, step; ///< levels lo, lo + step, ... (17 of them)
    /// The op's attributes, and the same as unary_grad's alpha and beta.
    std::vector<std::pair<const char *, double>> params;
  };
  const double inf = INFINITY;
  const std::vector<Activation> activations = {
      {"cos", "", -6, 0.75, {}},
      {"sin", "", -6, 0.75, {}},
      {"abs", "", -2, 0.25, {}},
      {"reciprocal", "", 0.25, 0.5, {}},
      {"softplus", "", -32, 4, {}},
      {"mish", "", -6, 0.75, {}},
      {"hard_swish", "", -4, 0.5, {}},
      {"leaky_relu", "", -2, 0.25, {{"alpha", 0.01}}},
      {"elu", "", -4, 0.5, {{"alpha", 1.0}}},
      {"selu", "", -4, 0.5, {{"alpha", 1.6732632}, {"gamma", 1.050701}}},
      {"hard_sigmoid", "", -4, 0.5, {{"alpha", 0.2}, {"beta", 0.5}}},
      {"clip", "", -2, 0.25, {{"min", -0.5}, {"max", 0.75}}},
      {"clip", "max_only", -2, 0.25, {{"min", -inf}, {"max", 0.75}}},
  };
  for (const Activation &a : activations)
    for (DType dtype : kFloatTypes) {
      addCase(cases, a.op, a.variant, dtype, [=](std::mt19937 &rng) {
        Case c;
        for (const auto &[name, value] : a.params)
          c.attrs.set(name, value);
        double hi = a.lo + 16 * a.step;
        c.inputs = {a.lo > 0 ? awayFromZero(dtype, {3, 5, 7}, rng, a.lo, hi)
                             : uniform(dtype, {3, 5, 7}, rng, a.lo, hi)};
        c.outputs = {{dtype, {3, 5, 7}}};
        return c;
      });
      std::string fn = a.op;
      addCase(cases, "unary_grad", *a.variant ? fn + "_" + a.variant : fn,
              dtype, [=](std::mt19937 &rng) {
                Case c;
                c.attrs.set("fn", std::string(a.op));
                c.attrs.set("alpha",
                            a.params.size() > 0 ? a.params[0].second : 0.0);
                c.attrs.set("beta",
                            a.params.size() > 1 ? a.params[1].second : 0.0);
                c.inputs = {a.lo > 0
                                ? awayFromZero(dtype, {6, 11}, rng, a.lo,
                                               a.lo + 16 * a.step)
                                : levels(dtype, {6, 11}, rng, a.lo, a.step, 17),
                            uniform(dtype, {6, 11}, rng)};
                c.outputs = {{dtype, {6, 11}}};
                return c;
              });
    }
  for (DType dtype : {DType::I32, DType::I64})
    addCase(cases, "abs", "", dtype, [=](std::mt19937 &rng) {
      Case c;
      c.inputs = {integers(dtype, {4, 9}, rng, -100000, 100000)};
      c.outputs = {{dtype, {4, 9}}};
      return c;
    });
}

/// cast's source values: within every type's range, with exact zeros and
/// whole numbers among fractions (truncation toward zero, bool).
HostBuffer castSource(DType dtype, const Shape &shape, std::mt19937 &rng) {
  if (dtype == DType::Bool)
    return integers(dtype, shape, rng, 0, 1);
  if (!isFloat(dtype))
    return integers(dtype, shape, rng, -3000, 3000);
  HostBuffer t = uniform(dtype, shape, rng, -100, 100);
  for (int64_t i = 0, n = numElements(shape); i < n; ++i) {
    if (i % 5 == 0)
      setElement(t, i, std::trunc(elementAt(t, i)));
    if (i % 7 == 0)
      setElement(t, i, 0);
  }
  return t;
}

void addCastSelectCases(std::vector<CaseSpec> &cases) {
  const std::vector<std::pair<DType, DType>> casts = {
      {DType::F32, DType::F32},  {DType::F32, DType::F16},
      {DType::F32, DType::BF16}, {DType::F32, DType::I32},
      {DType::F32, DType::I64},  {DType::F32, DType::Bool},
      {DType::F16, DType::F32},  {DType::BF16, DType::F32},
      {DType::F16, DType::BF16}, {DType::BF16, DType::I32},
      {DType::I32, DType::F32},  {DType::I32, DType::F16},
      {DType::I32, DType::I64},  {DType::I64, DType::I32},
      {DType::I64, DType::BF16}, {DType::I64, DType::Bool},
      {DType::Bool, DType::F32}, {DType::Bool, DType::I32},
  };
  for (auto [from, to] : casts)
    addCase(cases, "cast", std::string("from_") + dtypeName(from), to,
            [from = from, to = to](std::mt19937 &rng) {
              Case c;
              c.inputs = {castSource(from, {4, 6, 5}, rng)};
              c.outputs = {{to, {4, 6, 5}}};
              c.tolerance = exact();
              return c;
            });

  struct Shapes {
    const char *name;
    Shape cond, onTrue, onFalse, out;
  };
  const std::vector<Shapes> shapes = {
      {"same", {3, 4, 5}, {3, 4, 5}, {3, 4, 5}, {3, 4, 5}},
      {"bcast", {4, 1}, {3, 4, 5}, {5}, {3, 4, 5}},
      {"scalar_false", {2, 3, 4}, {1, 3, 4}, {}, {2, 3, 4}},
      // An attention mask: one [rows, cols] condition for every head.
      // (Rows of 8: runs of outputs per thread from one index split.)
      {"mask", {1, 1, 6, 8}, {2, 3, 6, 8}, {}, {2, 3, 6, 8}},
  };
  for (DType dtype : {DType::F32, DType::F16, DType::I64, DType::Bool})
    for (const Shapes &s : shapes) {
      if (dtype != DType::F32 && std::string(s.name) != "bcast" &&
          std::string(s.name) != "mask")
        continue;
      addCase(cases, "select", s.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        auto values = [&](const Shape &shape) {
          return isFloat(dtype) ? uniform(dtype, shape, rng)
                                : integers(dtype, shape, rng, -9, 9);
        };
        c.inputs = {integers(DType::Bool, s.cond, rng, 0, 1), values(s.onTrue),
                    values(s.onFalse)};
        c.outputs = {{dtype, s.out}};
        c.tolerance = exact();
        return c;
      });
    }
}

} // namespace

void addElementwiseCases(std::vector<CaseSpec> &cases) {
  addBinaryCases(cases);
  addUnaryCases(cases);
  addActivationCases(cases);
  addCastSelectCases(cases);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {

/// Values of any element type (data movement only moves them).
HostBuffer anyValues(DType dtype, const Shape &shape, std::mt19937 &rng) {
  if (dtype == DType::Bool)
    return integers(dtype, shape, rng, 0, 1);
  return isFloat(dtype) ? uniform(dtype, shape, rng, -4, 4)
                        : integers(dtype, shape, rng, -100000, 100000);
}

/// Indices into a dimension of `size`, negative ones included (both
/// backends count them from the end).
HostBuffer indices(DType dtype, const Shape &shape, std::mt19937 &rng,
                   int64_t size) {
  return integers(dtype, shape, rng, -size, size - 1);
}

struct SliceGeometry {
  const char *name;
  Shape full;
  std::vector<int64_t> starts, strides;
  Shape part;
};

const std::vector<SliceGeometry> &sliceGeometries() {
  static const std::vector<SliceGeometry> geometries = {
      {"contiguous", {4, 10}, {0, 2}, {1, 1}, {4, 5}},
      {"strided", {6, 8, 5}, {1, 0, 2}, {2, 3, 1}, {3, 3, 3}},
      {"reversed", {5, 6}, {4, 1}, {-1, 2}, {5, 3}},
  };
  return geometries;
}

Attrs sliceAttrs(const SliceGeometry &g) {
  Attrs attrs;
  attrs.set("starts", g.starts);
  attrs.set("strides", g.strides);
  attrs.set("sizes", std::vector<int64_t>(g.part.begin(), g.part.end()));
  return attrs;
}

} // namespace

void addDataMovementCases(std::vector<CaseSpec> &cases) {
  const std::vector<DType> someTypes = {DType::F32, DType::F16, DType::I64};
  for (DType dtype : someTypes)
    addCase(cases, "reshape", "", dtype, [=](std::mt19937 &rng) {
      Case c;
      c.inputs = {anyValues(dtype, {3, 4, 5}, rng)};
      c.outputs = {{dtype, {12, 5}}};
      c.tolerance = exact();
      return c;
    });

  struct Broadcast {
    const char *name;
    Shape in, out;
  };
  for (const Broadcast &b :
       std::vector<Broadcast>{{"inner_outer", {3, 1, 4}, {2, 3, 5, 4}},
                              {"scalar", {}, {3, 4}},
                              {"rows", {5, 1}, {5, 7}}})
    for (DType dtype : {DType::F32, DType::BF16, DType::I32})
      addCase(cases, "broadcast", b.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.inputs = {anyValues(dtype, b.in, rng)};
        c.outputs = {{dtype, b.out}};
        c.tolerance = exact();
        return c;
      });

  struct Transpose {
    const char *name;
    Shape in;
    std::vector<int64_t> perm;
  };
  for (const Transpose &t :
       std::vector<Transpose>{{"2d", {5, 7}, {1, 0}},
                              {"rotate3d", {2, 3, 4}, {2, 0, 1}},
                              {"nchw_to_nhwc", {2, 3, 4, 5}, {0, 2, 3, 1}}})
    for (DType dtype : {DType::F32, DType::F16, DType::I64, DType::Bool})
      addCase(cases, "transpose", t.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("permutation", t.perm);
        Shape out;
        for (int64_t p : t.perm)
          out.push_back(t.in[p]);
        c.inputs = {anyValues(dtype, t.in, rng)};
        c.outputs = {{dtype, out}};
        c.tolerance = exact();
        return c;
      });

  for (const SliceGeometry &g : sliceGeometries()) {
    for (DType dtype : {DType::F32, DType::BF16, DType::I32})
      addCase(cases, "slice", g.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs = sliceAttrs(g);
        c.inputs = {anyValues(dtype, g.full, rng)};
        c.outputs = {{dtype, g.part}};
        c.tolerance = exact();
        return c;
      });
    for (DType dtype : {DType::F32, DType::F16})
      addCase(cases, "slice_grad", g.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs = sliceAttrs(g);
        c.inputs = {anyValues(dtype, g.part, rng)};
        c.outputs = {{dtype, g.full}};
        c.tolerance = exact();
        return c;
      });
  }

  // pad in each mode (a constant converted to the element type), one or
  // both sides of a dimension, and pad_grad summing mirrored and repeated
  // borders.
  struct Pad {
    const char *name;
    Shape in;
    std::vector<int64_t> low, high;
  };
  for (const Pad &p : std::vector<Pad>{
           {"nchw_spatial", {2, 3, 6, 7}, {0, 0, 1, 2}, {0, 0, 3, 1}},
           {"last_dim_one_side", {4, 9}, {0, 0}, {0, 5}},
           {"every_dim", {3, 4, 5}, {1, 2, 3}, {2, 3, 1}}})
    for (const char *mode : {"constant", "reflect", "edge"}) {
      Shape out;
      for (size_t d = 0; d < p.in.size(); ++d)
        out.push_back(p.low[d] + p.in[d] + p.high[d]);
      Attrs attrs;
      attrs.set("low", p.low);
      attrs.set("high", p.high);
      attrs.set("mode", std::string(mode));
      std::string variant = std::string(p.name) + "_" + mode;
      for (DType dtype : {DType::F32, DType::F16, DType::I64, DType::Bool})
        addCase(cases, "pad", variant, dtype, [=](std::mt19937 &rng) {
          Case c;
          c.attrs = attrs;
          c.attrs.set("value", -2.5);
          c.inputs = {anyValues(dtype, p.in, rng)};
          c.outputs = {{dtype, out}};
          c.tolerance = exact();
          return c;
        });
      for (DType dtype : {DType::F32, DType::BF16})
        addCase(cases, "pad_grad", variant, dtype, [=](std::mt19937 &rng) {
          Case c;
          c.attrs = attrs;
          c.inputs = {anyValues(dtype, out, rng)};
          c.outputs = {{dtype, p.in}};
          return c;
        });
    }

  struct Concat {
    const char *name;
    int64_t axis;
    std::vector<Shape> inputs;
    Shape out;
  };
  for (const Concat &k : std::vector<Concat>{
           {"axis1", 1, {{2, 3, 4}, {2, 1, 4}, {2, 5, 4}}, {2, 9, 4}},
           {"axis0", 0, {{3, 5}, {4, 5}}, {7, 5}},
           {"last_axis", 2, {{2, 3, 2}, {2, 3, 5}}, {2, 3, 7}},
           {"single", 0, {{3, 4}}, {3, 4}}})
    for (DType dtype : someTypes)
      addCase(cases, "concat", k.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axis", k.axis);
        for (const Shape &s : k.inputs)
          c.inputs.push_back(anyValues(dtype, s, rng));
        c.outputs = {{dtype, k.out}};
        c.tolerance = exact();
        return c;
      });

  // gather: an embedding lookup (axis 0) and a gather along a middle axis
  // with 2-D indices; gather_grad the reverse, with repeated indices.
  struct Gather {
    const char *name;
    Shape table;
    int64_t axis;
    DType indexType;
    Shape indexShape;
  };
  for (const Gather &g :
       std::vector<Gather>{{"rows_i64", {10, 6}, 0, DType::I64, {7}},
                           {"axis1_i32", {3, 8, 4}, 1, DType::I32, {2, 5}},
                           {"repeated_i64", {4, 3}, 0, DType::I64, {12}}}) {
    Shape out(g.table.begin(), g.table.begin() + g.axis);
    out.insert(out.end(), g.indexShape.begin(), g.indexShape.end());
    out.insert(out.end(), g.table.begin() + g.axis + 1, g.table.end());
    for (DType dtype : {DType::F32, DType::F16, DType::I32})
      addCase(cases, "gather", g.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axis", g.axis);
        c.inputs = {anyValues(dtype, g.table, rng),
                    indices(g.indexType, g.indexShape, rng, g.table[g.axis])};
        c.outputs = {{dtype, out}};
        c.tolerance = exact();
        return c;
      });
    // f32 only: the CUDA kernel accumulates repeated indices with atomic
    // adds in the element type, so f16/bf16 sums round at every step.
    addCase(cases, "gather_grad", g.name, DType::F32, [=](std::mt19937 &rng) {
      Case c;
      c.attrs.set("axis", g.axis);
      c.inputs = {indices(g.indexType, g.indexShape, rng, g.table[g.axis]),
                  uniform(DType::F32, out, rng)};
      c.outputs = {{DType::F32, g.table}};
      c.reduction = numElements(g.indexShape);
      return c;
    });
  }
}

} // namespace loom::rt::conformance
