//===- MathCases.cpp - Conformance cases: reductions to matmul ------------===//
//
// The cases of the reductions, normalizations, losses, optimizer updates
// and matmuls. Each op gets every attribute variant in f32 and a
// representative one in f16 and bf16 where both backends take them.
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::rt::conformance {
namespace {

/// An f32 attribute value as the plan carries it (rounded to f32).
double f32Attr(double value) {
  return static_cast<double>(static_cast<float>(value));
}

/// The float types of a variant: all three for `representative`, else f32.
std::vector<DType> typesFor(bool representative) {
  return representative ? kFloatTypes : std::vector<DType>{DType::F32};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

struct Reduction {
  const char *name;
  Shape in;
  std::vector<int64_t> axes;
  Shape out;
  bool representative;
};

const std::vector<Reduction> &reductions() {
  static const std::vector<Reduction> all = {
      {"axis1", {4, 6, 5}, {1}, {4, 5}, true},
      {"axes0_2", {4, 6, 5}, {0, 2}, {6}, false},
      {"last", {4, 6, 5}, {2}, {4, 6}, false},
      {"all", {4, 6, 5}, {0, 1, 2}, {}, false},
      // Many outputs with the last dimension kept: the CUDA column kernel.
      {"columns", {6, 1030}, {0}, {1030}, true},
      {"long_rows", {3, 2000}, {1}, {3}, false},
      // Tiles whose rows are split over blocks, the partials added in a
      // second pass (a bias gradient; uneven chunks and a partial tile).
      {"split_rows", {1000, 70}, {0}, {70}, true},
      // A middle run of reduced axes between kept ones, wide enough for tiles.
      {"middle_run", {3, 20, 15, 40}, {1, 2}, {3, 40}, false},
      // Few reduced rows between kept axes: one thread per output.
      {"short_middle", {4, 5, 40}, {1}, {4, 40}, false},
      {"no_axes", {3, 4}, {}, {3, 4}, false},
  };
  return all;
}

int64_t reducedCount(const Reduction &r) {
  return numElements(r.in) / std::max<int64_t>(numElements(r.out), 1);
}

/// The maximum of `x` over `axes` (kept dimensions in order), as reduce_max
/// gives it.
HostBuffer maxOver(const HostBuffer &x, const std::vector<int64_t> &axes,
                   const Shape &out) {
  HostBuffer result = zeros(x.dtype, out);
  std::vector<double> best(numElements(out),
                           -std::numeric_limits<double>::infinity());
  int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0, n = numElements(x.shape); i < n; ++i) {
    int64_t kept = 0;
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end())
        kept = kept * x.shape[d] + index[d];
    best[kept] = std::max(best[kept], elementAt(x, i));
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == x.shape[d]; --d)
      index[d] = 0;
  }
  for (size_t k = 0; k < best.size(); ++k)
    setElement(result, static_cast<int64_t>(k), best[k]);
  return result;
}

void addReductionCases(std::vector<CaseSpec> &cases) {
  for (const Reduction &r : reductions()) {
    for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"})
      for (DType dtype : typesFor(r.representative))
        addCase(cases, op, r.name, dtype, [=](std::mt19937 &rng) {
          Case c;
          c.attrs.set("axes", r.axes);
          c.attrs.set("keep_dims", false);
          c.inputs = {uniform(dtype, r.in, rng)};
          c.outputs = {{dtype, r.out}};
          c.reduction = reducedCount(r);
          if (std::string(op) == "reduce_max")
            c.tolerance = exact();
          return c;
        });
    if (std::string(r.name) == "no_axes")
      continue;
    // arg_max / arg_min along the first reduced axis, exactly; few levels
    // make ties, which the first or (select_last_index) last index breaks.
    for (const char *op : {"arg_max", "arg_min"})
      for (bool last : {false, true})
        for (DType dtype : typesFor(r.representative))
          addCase(cases, op, std::string(r.name) + (last ? "_last" : "_first"),
                  dtype, [=](std::mt19937 &rng) {
                    Case c;
                    int64_t axis = r.axes[0];
                    c.attrs.set("axis", axis);
                    c.attrs.set("keep_dims", true);
                    c.attrs.set("select_last_index", last);
                    c.inputs = {levels(dtype, r.in, rng, -1, 0.5, 5)};
                    Shape out = r.in;
                    out[axis] = 1;
                    c.outputs = {{DType::I64, out}};
                    c.tolerance = exact();
                    return c;
                  });
    // f32 only: the CPU kernel takes no other type. Few levels make ties,
    // which share the gradient.
    addCase(cases, "reduce_max_grad", r.name, DType::F32,
            [=](std::mt19937 &rng) {
              Case c;
              c.attrs.set("axes", r.axes);
              c.attrs.set("keep_dims", false);
              HostBuffer x = levels(DType::F32, r.in, rng, -1, 0.5, 5);
              HostBuffer max = maxOver(x, r.axes, r.out);
              c.inputs = {x, max, uniform(DType::F32, r.out, rng)};
              c.outputs = {{DType::F32, r.in}};
              return c;
            });
  }
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

void addSoftmaxCases(std::vector<CaseSpec> &cases) {
  struct Softmax {
    const char *name;
    Shape shape;
    int64_t axis;
    bool representative;
  };
  for (const Softmax &s :
       std::vector<Softmax>{{"last", {4, 10}, 1, true},
                            {"middle", {2, 5, 3}, 1, true},
                            {"first", {6, 2, 3}, 0, false},
                            {"long", {2, 1100}, 1, false},
                            // One warp per row, the row in
                            // registers (4, 16, 32 a lane).
                            {"row_100", {9, 100}, 1, false},
                            {"row_300", {5, 300}, 1, false},
                            {"row_1000", {3, 1000}, 1, true}})
    for (const char *op : {"softmax", "log_softmax"})
      for (DType dtype : typesFor(s.representative))
        addCase(cases, op, s.name, dtype, [=](std::mt19937 &rng) {
          Case c;
          c.attrs.set("axis", s.axis);
          c.inputs = {uniform(dtype, s.shape, rng, -4, 4)};
          c.outputs = {{dtype, s.shape}};
          c.reduction = s.shape[s.axis];
          return c;
        });
}

void addLayerNormCases(std::vector<CaseSpec> &cases) {
  const double epsilon = f32Attr(1e-5);
  struct LayerNorm {
    const char *name;
    Shape shape;
    int64_t axis;
    bool bias, representative;
  };
  for (const LayerNorm &l :
       std::vector<LayerNorm>{{"last_bias", {4, 6, 8}, 2, true, true},
                              {"two_axes", {4, 6, 8}, 1, false, true},
                              {"wide_bias", {3, 1500}, 1, true, false}}) {
    Shape param(l.shape.begin() + l.axis, l.shape.end());
    for (DType dtype : typesFor(l.representative))
      addCase(cases, "layer_norm", l.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axis", l.axis);
        c.attrs.set("epsilon", epsilon);
        c.inputs = {uniform(dtype, l.shape, rng, -2, 3),
                    uniform(dtype, param, rng, -1.5, 1.5)};
        if (l.bias)
          c.inputs.push_back(uniform(dtype, param, rng));
        c.outputs = {{dtype, l.shape}};
        c.reduction = numElements(param);
        return c;
      });
  }

  struct LayerNormGrad {
    const char *name;
    Shape shape;
    int64_t axis;
    bool representative;
  };
  for (const LayerNormGrad &l : std::vector<LayerNormGrad>{
           {"last", {6, 16}, 1, true},
           // Enough rows for the CUDA kernel to sum columns in chunks.
           {"many_rows", {256, 24}, 1, false},
           {"two_axes", {2, 3, 4, 5}, 2, false}}) {
    Shape param(l.shape.begin() + l.axis, l.shape.end());
    int64_t cols = numElements(param), rows = numElements(l.shape) / cols;
    for (DType dtype : typesFor(l.representative))
      addCase(cases, "layer_norm_grad", l.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axis", l.axis);
        c.attrs.set("epsilon", epsilon);
        c.inputs = {uniform(dtype, l.shape, rng, -2, 3),
                    uniform(dtype, param, rng, -1.5, 1.5),
                    uniform(dtype, l.shape, rng)};
        c.outputs = {{dtype, l.shape}, {dtype, param}, {dtype, param}};
        c.reduction = std::max(rows, cols);
        return c;
      });
  }

  for (auto [name, shape] : std::vector<std::pair<const char *, Shape>>{
           {"nchw", {2, 3, 4, 5}}, {"nc", {4, 3}}})
    for (DType dtype : typesFor(std::string(name) == "nchw"))
      addCase(cases, "batch_norm", name, dtype,
              [=, shape = shape](std::mt19937 &rng) {
                Case c;
                c.attrs.set("epsilon", epsilon);
                Shape channels{shape[1]};
                c.inputs = {uniform(dtype, shape, rng, -2, 2),
                            uniform(dtype, channels, rng, -1.5, 1.5),
                            uniform(dtype, channels, rng),
                            uniform(dtype, channels, rng, -0.5, 0.5),
                            uniform(dtype, channels, rng, 0.5, 2)};
                c.outputs = {{dtype, shape}};
                return c;
              });
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

struct CrossEntropy {
  const char *name;
  int64_t rows, classes;
  DType labelType;
  int64_t ignoreIndex; // -100 (the default) is left unset
  bool sum;
  int ignoredRows; // rows labelled ignoreIndex
  bool representative;
};

const std::vector<CrossEntropy> &crossEntropies() {
  static const std::vector<CrossEntropy> all = {
      {"mean_i64", 8, 10, DType::I64, -100, false, 2, true},
      {"sum_i32", 8, 10, DType::I32, -100, true, 1, false},
      {"ignore_index3", 9, 6, DType::I64, 3, false, 2, false},
      {"all_ignored", 4, 5, DType::I32, -100, false, 4, false},
      {"wide", 4, 300, DType::I64, -100, false, 0, false},
  };
  return all;
}

/// Labels in [0, classes) with the first `ignored` rows set to the ignore
/// index.
HostBuffer labels(const CrossEntropy &e, std::mt19937 &rng) {
  HostBuffer t = integers(e.labelType, {e.rows}, rng, 0, e.classes - 1);
  for (int i = 0; i < e.ignoredRows; ++i)
    setElement(t, i, static_cast<double>(e.ignoreIndex));
  return t;
}

Attrs crossEntropyAttrs(const CrossEntropy &e) {
  Attrs attrs;
  if (e.ignoreIndex != -100)
    attrs.set("ignore_index", e.ignoreIndex);
  if (e.sum)
    attrs.set("sum", true);
  return attrs;
}

void addLossCases(std::vector<CaseSpec> &cases) {
  for (const CrossEntropy &e : crossEntropies())
    for (DType dtype : typesFor(e.representative)) {
      Shape logits{e.rows, e.classes};
      addCase(cases, "softmax_cross_entropy", e.name, dtype,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs = crossEntropyAttrs(e);
                c.inputs = {uniform(dtype, logits, rng, -3, 3), labels(e, rng)};
                c.outputs = {{dtype, {}}};
                c.reduction = e.rows * e.classes;
                return c;
              });
      addCase(cases, "softmax_cross_entropy_grad", e.name, dtype,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs = crossEntropyAttrs(e);
                c.inputs = {uniform(dtype, logits, rng, -3, 3), labels(e, rng),
                            scalar(dtype, 0.75)};
                c.outputs = {{dtype, logits}};
                c.reduction = e.classes;
                return c;
              });
    }

  // A class block of a vocabulary-parallel loss (loom-partition's lse
  // operand): 8 of 24 classes, at offset 0 (the block that adds the
  // log-sum-exp) and 8; labels over all 24 classes, so some rows' labels
  // fall outside the block; two rows ignored. The forward's block is its
  // logits' (its result is a scalar), the gradient's its result's.
  for (int64_t offset : {0, 8})
    for (bool sum : {true, false}) {
      std::string name =
          "class_block_at" + std::to_string(offset) + (sum ? "_sum" : "_mean");
      Shape logits{6, 8};
      auto blockOf = [=] { return GlobalBlock{{6, 24}, {0, offset}}; };
      auto inputs = [=](std::mt19937 &rng) {
        HostBuffer y = integers(DType::I64, {6}, rng, 0, 23);
        setElement(y, 0, -100.0);
        setElement(y, 3, -100.0);
        return std::vector<HostBuffer>{uniform(DType::F32, logits, rng, -3, 3),
                                       y};
      };
      Attrs attrs;
      if (sum)
        attrs.set("sum", true);
      addCase(cases, "softmax_cross_entropy", name, DType::F32,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs = attrs;
                c.inputs = inputs(rng);
                c.inputs.push_back(uniform(DType::F32, {6}, rng, 2, 4));
                c.outputs = {{DType::F32, {}}};
                c.reduction = 6;
                c.block = blockOf();
                return c;
              });
      addCase(cases, "softmax_cross_entropy_grad", name, DType::F32,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs = attrs;
                c.inputs = inputs(rng);
                c.inputs.push_back(scalar(DType::F32, 0.75));
                c.inputs.push_back(uniform(DType::F32, {6}, rng, 2, 4));
                c.outputs = {{DType::F32, logits}};
                c.reduction = 8;
                c.block = blockOf();
                return c;
              });
    }

  struct LabelCount {
    const char *name;
    DType labelType, resultType;
    int64_t ignoreIndex;
    int ignored;
  };
  for (const LabelCount &l : std::vector<LabelCount>{
           {"i64", DType::I64, DType::F32, -100, 3},
           {"i32_ignore2", DType::I32, DType::F16, 2, 4},
           {"i64", DType::I64, DType::BF16, -100, 1},
           {"all_ignored", DType::I32, DType::F32, -100, 10}})
    addCase(cases, "label_count", l.name, l.resultType, [=](std::mt19937 &rng) {
      Case c;
      if (l.ignoreIndex != -100)
        c.attrs.set("ignore_index", l.ignoreIndex);
      // Labels other than the ignored one, then `ignored` of them.
      HostBuffer t = integers(l.labelType, {10}, rng, 3, 9);
      for (int i = 0; i < l.ignored; ++i)
        setElement(t, (i * 3) % 10, static_cast<double>(l.ignoreIndex));
      c.inputs = {t};
      c.outputs = {{l.resultType, {}}};
      c.tolerance = exact();
      return c;
    });

  struct Mse {
    const char *name;
    Shape shape;
    bool sum, representative;
  };
  for (const Mse &m : std::vector<Mse>{{"mean", {5, 7}, false, true},
                                       {"sum", {5, 7}, true, false},
                                       {"large", {64, 70}, false, false}})
    for (DType dtype : typesFor(m.representative))
      addCase(cases, "mse_loss", m.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        if (m.sum)
          c.attrs.set("sum", true);
        c.inputs = {uniform(dtype, m.shape, rng, -2, 2),
                    uniform(dtype, m.shape, rng, -2, 2)};
        c.outputs = {{dtype, {}}};
        c.reduction = numElements(m.shape);
        return c;
      });
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

void addOptimizerCases(std::vector<CaseSpec> &cases) {
  const Shape shape{8, 9};
  for (double wd : {0.0, 0.01})
    for (DType dtype : kFloatTypes)
      addCase(cases, "sgd_update", wd == 0 ? "plain" : "weight_decay", dtype,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs.set("weight_decay", f32Attr(wd));
                c.inputs = {uniform(dtype, shape, rng),
                            uniform(dtype, shape, rng), scalar(dtype, 0.1)};
                c.outputs = {{dtype, shape}};
                return c;
              });

  for (bool nesterov : {false, true})
    for (DType dtype : kFloatTypes)
      addCase(cases, "momentum_update", nesterov ? "nesterov_wd" : "plain",
              dtype, [=](std::mt19937 &rng) {
                Case c;
                c.attrs.set("momentum", f32Attr(0.9));
                c.attrs.set("weight_decay", f32Attr(nesterov ? 1e-4 : 0.0));
                c.attrs.set("nesterov", nesterov);
                c.inputs = {
                    uniform(dtype, shape, rng), uniform(dtype, shape, rng),
                    uniform(dtype, shape, rng, -0.5, 0.5), scalar(dtype, 0.05)};
                c.outputs = {{dtype, shape}, {dtype, shape}};
                return c;
              });

  struct Adam {
    const char *name;
    double weightDecay;
    bool decoupled;
    double step;
  };
  for (const Adam &a : std::vector<Adam>{{"adam_step1", 0.0, false, 1},
                                         {"adam_wd_step5", 0.01, false, 5},
                                         {"adamw_step5", 0.01, true, 5}})
    for (DType dtype : kFloatTypes)
      addCase(cases, "adam_update", a.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("beta1", f32Attr(0.9));
        c.attrs.set("beta2", f32Attr(0.999));
        c.attrs.set("epsilon", f32Attr(1e-8));
        c.attrs.set("weight_decay", f32Attr(a.weightDecay));
        c.attrs.set("decoupled_weight_decay", a.decoupled);
        c.inputs = {uniform(dtype, shape, rng),
                    uniform(dtype, shape, rng),
                    uniform(dtype, shape, rng, -0.1, 0.1),
                    uniform(dtype, shape, rng, 0, 0.01),
                    scalar(dtype, 1e-3),
                    scalar(dtype, a.step)};
        c.outputs = {{dtype, shape}, {dtype, shape}, {dtype, shape}};
        return c;
      });
}

//===----------------------------------------------------------------------===//
// matmul, fused_matmul
//===----------------------------------------------------------------------===//

struct Matmul {
  const char *name;
  Shape lhs, rhs, out;
  bool transposeLhs, transposeRhs, representative;
};

int64_t innerDim(const Matmul &m) {
  return m.lhs[m.lhs.size() - (m.transposeLhs ? 2 : 1)];
}

Attrs matmulAttrs(const Matmul &m) {
  Attrs attrs;
  if (m.transposeLhs)
    attrs.set("transpose_lhs", true);
  if (m.transposeRhs)
    attrs.set("transpose_rhs", true);
  return attrs;
}

/// A matmul problem: name, lhs, rhs and result shapes, transpose_lhs,
/// transpose_rhs, and whether it also runs in f16 and bf16.
Matmul matmul(const char *name, Shape lhs, Shape rhs, Shape out,
              bool transposeLhs, bool transposeRhs, bool representative) {
  return {name,         std::move(lhs), std::move(rhs), std::move(out),
          transposeLhs, transposeRhs,   representative};
}

const std::vector<Matmul> &matmuls() {
  static const std::vector<Matmul> all = {
      matmul("2d", {5, 7}, {7, 6}, {5, 6}, false, false, true),
      matmul("transpose_lhs", {7, 5}, {7, 6}, {5, 6}, true, false, false),
      matmul("transpose_rhs", {5, 7}, {6, 7}, {5, 6}, false, true, false),
      matmul("transpose_both", {7, 5}, {6, 7}, {5, 6}, true, true, false),
      matmul("batched", {3, 4, 5}, {3, 5, 6}, {3, 4, 6}, false, false, true),
      matmul("batched_transposed", {3, 5, 4}, {3, 6, 5}, {3, 4, 6}, true, true,
             false),
      matmul("bcast_rhs_2d", {2, 3, 4, 5}, {5, 6}, {2, 3, 4, 6}, false, false,
             false),
      matmul("bcast_lhs_2d", {4, 5}, {3, 5, 6}, {3, 4, 6}, false, false, false),
      // Batch counts neither 1 nor the result's: one GEMM per matrix.
      matmul("bcast_mixed", {2, 1, 4, 5}, {3, 5, 6}, {2, 3, 4, 6}, false, false,
             true),
      matmul("long_k", {4, 300}, {300, 5}, {4, 5}, false, false, true),
      matmul("row_vector", {1, 64}, {64, 33}, {1, 33}, false, false, false),
  };
  return all;
}

/// fused_matmul's problems and whether each applies relu.
const std::vector<std::pair<Matmul, bool>> &fusedMatmuls() {
  static const std::vector<std::pair<Matmul, bool>> all = {
      {matmul("bias", {5, 7}, {7, 6}, {5, 6}, false, false, false), false},
      {matmul("bias_relu", {5, 7}, {7, 6}, {5, 6}, false, false, true), true},
      {matmul("batched_bias_relu", {3, 4, 5}, {3, 5, 6}, {3, 4, 6}, false,
              false, false),
       true},
      {matmul("transpose_rhs_bias", {5, 7}, {6, 7}, {5, 6}, false, true, false),
       false},
      {matmul("bcast_mixed_bias_relu", {2, 1, 4, 5}, {3, 5, 6}, {2, 3, 4, 6},
              false, false, false),
       true},
  };
  return all;
}

void addMatmulCases(std::vector<CaseSpec> &cases) {
  for (const Matmul &m : matmuls())
    for (DType dtype : typesFor(m.representative))
      addCase(cases, "matmul", m.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs = matmulAttrs(m);
        c.inputs = {uniform(dtype, m.lhs, rng), uniform(dtype, m.rhs, rng)};
        c.outputs = {{dtype, m.out}};
        c.reduction = innerDim(m);
        return c;
      });

  for (const auto &[m, relu] : fusedMatmuls())
    for (DType dtype : typesFor(m.representative))
      addCase(cases, "fused_matmul", m.name, dtype,
              [=, m = m, relu = relu](std::mt19937 &rng) {
                Case c;
                c.attrs = matmulAttrs(m);
                if (relu)
                  c.attrs.set("relu", true);
                c.inputs = {uniform(dtype, m.lhs, rng),
                            uniform(dtype, m.rhs, rng),
                            uniform(dtype, {m.out.back()}, rng)};
                c.outputs = {{dtype, m.out}};
                c.reduction = innerDim(m);
                return c;
              });
}

} // namespace

void addReductionNormalizationCases(std::vector<CaseSpec> &cases) {
  addReductionCases(cases);
  addSoftmaxCases(cases);
  addLayerNormCases(cases);
}

void addLossOptimizerMatmulCases(std::vector<CaseSpec> &cases) {
  addLossCases(cases);
  addOptimizerCases(cases);
  addMatmulCases(cases);
}

} // namespace loom::rt::conformance
