//===- GradKernelsTest.cpp - relu/gelu/layer_norm/gather/slice/CE grads ---===//
//
// Each gradient kernel is compared with a naive double reference, and each
// reference is itself checked against central differences of the forward
// op's math (so a wrong formula cannot hide in both).
//
//===----------------------------------------------------------------------===//

#include "test/unit/kernels/TrainTestUtil.h"

#include "runtime/cpu/CpuContext.h"

#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

class GradKernelsTest : public KernelTest {};

constexpr double kPi = 3.14159265358979323846;
const double kNan = std::numeric_limits<double>::quiet_NaN();

//===----------------------------------------------------------------------===//
// relu_grad / gelu_grad
//===----------------------------------------------------------------------===//

double geluErf(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double geluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
}
double geluErfGrad(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-x * x / 2) / std::sqrt(2 * kPi);
}
double geluTanhGrad(double x) {
  double k = std::sqrt(2 / kPi), u = k * (x + 0.044715 * x * x * x);
  double t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

// Proves the relu and both gelu reference derivatives are the derivatives
// of their forward functions (central differences, away from relu's kink).
TEST(GradReferenceTest, ActivationDerivativesMatchDifferences) {
  std::mt19937 rng(11);
  std::vector<double> xs = randomValues(200, rng, -6, 6);
  for (double &x : xs)
    if (std::abs(x) < 1e-3)
      x = 0.5;
  std::vector<double> g = randomValues(xs.size(), rng);
  struct Fn {
    double (*f)(double);
    double (*df)(double);
  };
  auto relu = [](double x) { return std::max(x, 0.0); };
  auto reluGrad = [](double x) { return x > 0 ? 1.0 : 0.0; };
  for (Fn fn : {Fn{relu, reluGrad}, Fn{geluErf, geluErfGrad},
                Fn{geluTanh, geluTanhGrad}}) {
    auto loss = [&](const std::vector<double> &x) {
      double s = 0;
      for (size_t i = 0; i < x.size(); ++i)
        s += fn.f(x[i]) * g[i];
      return s;
    };
    std::vector<double> ref(xs.size());
    for (size_t i = 0; i < xs.size(); ++i)
      ref[i] = fn.df(xs[i]) * g[i];
    expectMatchesDifferences(ref, centralDifferences(loss, xs));
  }
}

// Proves relu_grad passes grad exactly where input > 0 and gives exactly 0
// elsewhere (zero, negative, NaN inputs), f32/f16/bf16, small and parallel
// sizes.
TEST_P(GradKernelsTest, ReluGrad) {
  for (DType dtype : kFloatTypes)
    for (Shape shape : {Shape{7}, Shape{33, 1000}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape));
      HostBuffer x = randomTensor(dtype, shape, rng, -1, 1);
      std::vector<double> xv = values(x);
      xv[0] = 0;
      xv[1] = kNan;
      xv[2] = -0.0;
      x = makeTensor(dtype, shape, xv);
      HostBuffer g = randomTensor(dtype, shape, rng, -3, 3);
      std::vector<double> gv = values(g), ref(gv.size());
      for (size_t i = 0; i < ref.size(); ++i)
        ref[i] = xv[i] > 0 ? gv[i] : 0.0;
      expectEqual(runOk("relu_grad", Attrs(), {x, g}, dtype, shape), ref);
    }
}

// Proves gelu_grad (exact erf form and tanh approximation) against the
// double derivative for f32/f16/bf16, over [-8, 8] (both tails) and a size
// that takes the parallel/oneDNN path.
TEST_P(GradKernelsTest, GeluGrad) {
  for (bool tanhForm : {false, true})
    for (DType dtype : kFloatTypes)
      for (Shape shape : {Shape{5, 7}, Shape{64, 1000}}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape) +
                     (tanhForm ? " tanh" : " erf"));
        HostBuffer x = randomTensor(dtype, shape, rng, -8, 8);
        HostBuffer g = randomTensor(dtype, shape, rng, -2, 2);
        std::vector<double> xv = values(x), gv = values(g), ref(xv.size());
        for (size_t i = 0; i < ref.size(); ++i)
          ref[i] =
              gv[i] * (tanhForm ? geluTanhGrad(xv[i]) : geluErfGrad(xv[i]));
        Attrs attrs;
        attrs.set("tanh_approximation", tanhForm);
        expectClose(runOk("gelu_grad", attrs, {x, g}, dtype, shape), ref,
                    defaultTolerance(dtype));
      }
}

// Proves gelu_grad's limits on non-finite inputs on both paths: +inf gives
// grad, -inf gives 0, NaN gives NaN.
TEST_P(GradKernelsTest, GeluGradNonFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  for (bool tanhForm : {false, true}) {
    HostBuffer x = makeTensor(DType::F32, {4}, {inf, -inf, kNan, 1.0});
    HostBuffer g = makeTensor(DType::F32, {4}, {2, 2, 2, 2});
    Attrs attrs;
    attrs.set("tanh_approximation", tanhForm);
    std::vector<double> got =
        values(runOk("gelu_grad", attrs, {x, g}, DType::F32, {4}));
    EXPECT_EQ(got[0], 2.0);
    EXPECT_EQ(got[1], 0.0);
    EXPECT_TRUE(std::isnan(got[2]));
    EXPECT_NEAR(got[3], 2 * (tanhForm ? geluTanhGrad(1) : geluErfGrad(1)),
                1e-5);
  }
}

//===----------------------------------------------------------------------===//
// layer_norm_grad
//===----------------------------------------------------------------------===//

std::vector<double> layerNormForward(const std::vector<double> &x,
                                     const std::vector<double> &scale,
                                     const std::vector<double> &bias,
                                     int64_t cols, double eps) {
  int64_t rows = x.size() / cols;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x[r * cols + c] / cols;
    for (int64_t c = 0; c < cols; ++c)
      var += std::pow(x[r * cols + c] - mean, 2) / cols;
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] =
          (x[r * cols + c] - mean) / std::sqrt(var + eps) * scale[c] + bias[c];
  }
  return y;
}

struct LayerNormGrads {
  std::vector<double> input, scale, bias;
};

/// The textbook layer norm backward, in double.
LayerNormGrads layerNormGradRef(const std::vector<double> &x,
                                const std::vector<double> &scale,
                                const std::vector<double> &g, int64_t cols,
                                double eps) {
  int64_t rows = x.size() / cols;
  LayerNormGrads out{std::vector<double>(x.size()),
                     std::vector<double>(cols, 0.0),
                     std::vector<double>(cols, 0.0)};
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x[r * cols + c] / cols;
    for (int64_t c = 0; c < cols; ++c)
      var += std::pow(x[r * cols + c] - mean, 2) / cols;
    double rstd = 1 / std::sqrt(var + eps), a = 0, b = 0;
    std::vector<double> xhat(cols);
    for (int64_t c = 0; c < cols; ++c) {
      xhat[c] = (x[r * cols + c] - mean) * rstd;
      double gs = g[r * cols + c] * scale[c];
      a += gs / cols;
      b += gs * xhat[c] / cols;
      out.scale[c] += g[r * cols + c] * xhat[c];
      out.bias[c] += g[r * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c)
      out.input[r * cols + c] =
          rstd * (g[r * cols + c] * scale[c] - a - xhat[c] * b);
  }
  return out;
}

// Proves the layer norm reference gradients (input, scale, bias) are those
// of the forward's math, with a small and a large epsilon.
TEST(GradReferenceTest, LayerNormMatchesDifferences) {
  std::mt19937 rng(12);
  for (double eps : {1e-5, 0.5}) {
    int64_t rows = 3, cols = 6;
    std::vector<double> x = randomValues(rows * cols, rng, -2, 3),
                        scale = randomValues(cols, rng, 0.5, 1.5),
                        bias = randomValues(cols, rng),
                        g = randomValues(rows * cols, rng);
    LayerNormGrads ref = layerNormGradRef(x, scale, g, cols, eps);
    expectMatchesDifferences(
        ref.input, centralDifferences(
                       [&](const std::vector<double> &v) {
                         return dot(layerNormForward(v, scale, bias, cols, eps),
                                    g);
                       },
                       x));
    expectMatchesDifferences(
        ref.scale, centralDifferences(
                       [&](const std::vector<double> &v) {
                         return dot(layerNormForward(x, v, bias, cols, eps), g);
                       },
                       scale));
    expectMatchesDifferences(
        ref.bias, centralDifferences(
                      [&](const std::vector<double> &v) {
                        return dot(layerNormForward(x, scale, v, cols, eps), g);
                      },
                      bias));
  }
}

// Proves layer_norm_grad's three results for every axis, f32/f16/bf16,
// small and large epsilon, and many rows (scale/bias gradients are sums over
// rows: 2048 rows stay within 1e-5).
TEST_P(GradKernelsTest, LayerNormGrad) {
  std::vector<Shape> shapes = {{2, 3, 8}, {4, 256}, {300, 64}, {2048, 48}};
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : shapes)
      for (int64_t axis = 0; axis < int64_t(shape.size()); ++axis)
        for (double eps : {1e-5, 0.5}) {
          if (shape[0] == 2048 && (axis == 0 || dtype != DType::F32))
            continue;
          SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape) +
                       " axis " + std::to_string(axis) + " eps " +
                       std::to_string(eps));
          Shape param(shape.begin() + axis, shape.end());
          HostBuffer x = randomTensor(dtype, shape, rng, -2, 3);
          HostBuffer scale = randomTensor(dtype, param, rng, 0.5, 1.5);
          HostBuffer g = randomTensor(dtype, shape, rng, -1, 1);
          LayerNormGrads ref =
              layerNormGradRef(values(x), values(scale), values(g),
                               numElements(param), float(eps));
          Attrs attrs;
          attrs.set("axis", axis);
          attrs.set("epsilon", eps);
          MultiResult r =
              runKernel(*backend, "layer_norm_grad", attrs, {x, scale, g},
                        {{dtype, shape}, {dtype, param}, {dtype, param}});
          ASSERT_EQ(r.error, "");
          double tol = defaultTolerance(dtype);
          expectClose(r.outs[0], ref.input, tol);
          expectClose(r.outs[1], ref.scale, tol);
          expectClose(r.outs[2], ref.bias, tol);
        }
}

//===----------------------------------------------------------------------===//
// gather_grad
//===----------------------------------------------------------------------===//

/// Offsets for gather: outer, size, inner of `in` along `axis`.
struct AxisSplit {
  int64_t outer, size, inner;
};
AxisSplit split(const Shape &s, int64_t axis) {
  AxisSplit a{1, s[axis], 1};
  for (int64_t d = 0; d < axis; ++d)
    a.outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d)
    a.inner *= s[d];
  return a;
}

std::vector<double> gatherForward(const std::vector<double> &in,
                                  const Shape &shape, int64_t axis,
                                  const std::vector<int64_t> &idx) {
  AxisSplit a = split(shape, axis);
  std::vector<double> out;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t j : idx)
      for (int64_t i = 0; i < a.inner; ++i)
        out.push_back(
            in[(o * a.size + (j < 0 ? j + a.size : j)) * a.inner + i]);
  return out;
}

std::vector<double> gatherGradRef(const std::vector<double> &g,
                                  const Shape &shape, int64_t axis,
                                  const std::vector<int64_t> &idx) {
  AxisSplit a = split(shape, axis);
  std::vector<double> out(numElements(shape), 0.0);
  int64_t count = idx.size();
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t k = 0; k < count; ++k)
      for (int64_t i = 0; i < a.inner; ++i) {
        int64_t j = idx[k] < 0 ? idx[k] + a.size : idx[k];
        out[(o * a.size + j) * a.inner + i] += g[(o * count + k) * a.inner + i];
      }
  return out;
}

// Proves the gather_grad reference (scatter-add, repeated and negative
// indices) is the gradient of gather.
TEST(GradReferenceTest, GatherMatchesDifferences) {
  std::mt19937 rng(13);
  Shape shape{3, 4, 2};
  std::vector<int64_t> idx = {0, -1, 2, 0, 3};
  std::vector<double> x = randomValues(numElements(shape), rng),
                      g = randomValues(3 * idx.size() * 2, rng);
  expectMatchesDifferences(gatherGradRef(g, shape, 1, idx),
                           centralDifferences(
                               [&](const std::vector<double> &v) {
                                 return dot(gatherForward(v, shape, 1, idx), g);
                               },
                               x));
}

struct GatherCase {
  Shape result;
  int64_t axis;
  Shape indices;
};

// Proves gather_grad against the reference: every axis position, index
// tensors of rank 1 and 2, i32/i64, negative and repeated indices, an
// embedding-sized case (4096 indices into 1000 rows), f32/f16/bf16.
TEST_P(GradKernelsTest, GatherGrad) {
  std::vector<GatherCase> cases = {{{10, 4}, 0, {6}},
                                   {{3, 7, 5}, 1, {2, 3}},
                                   {{4, 6}, 1, {8}},
                                   {{5}, 0, {9}},
                                   {{1000, 64}, 0, {4096}}};
  for (DType indexType : {DType::I32, DType::I64})
    for (DType dtype : kFloatTypes)
      for (const GatherCase &c : cases) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(c.result) +
                     " axis " + std::to_string(c.axis) + " indices " +
                     dtypeName(indexType) + formatShape(c.indices));
        int64_t size = c.result[c.axis];
        HostBuffer idx =
            randomTensor(indexType, c.indices, rng, -size, size - 1);
        std::vector<double> iv = values(idx);
        std::vector<int64_t> indices(iv.begin(), iv.end());
        Shape gs(c.result.begin(), c.result.begin() + c.axis);
        gs.insert(gs.end(), c.indices.begin(), c.indices.end());
        gs.insert(gs.end(), c.result.begin() + c.axis + 1, c.result.end());
        HostBuffer g = randomTensor(dtype, gs, rng);
        Attrs attrs;
        attrs.set("axis", c.axis);
        expectClose(runOk("gather_grad", attrs, {idx, g}, dtype, c.result),
                    gatherGradRef(values(g), c.result, c.axis, indices),
                    defaultTolerance(dtype));
      }
}

// Proves gather_grad is deterministic: with heavy repetition (20000 indices
// into 37 rows) the f32 result is bitwise the sequential f32 sum in index
// order, for 1, 3 and the default number of threads.
TEST_P(GradKernelsTest, GatherGradIsDeterministic) {
  Shape result{37, 48};
  HostBuffer idx = randomTensor(DType::I64, {20000}, rng, 0, 36);
  HostBuffer g = randomTensor(DType::F32, {20000, 48}, rng);
  std::vector<int64_t> iv = rawValues<int64_t>(idx);
  std::vector<float> gv = rawValues<float>(g), seq(37 * 48, 0.0f);
  for (size_t k = 0; k < iv.size(); ++k)
    for (int64_t i = 0; i < 48; ++i)
      seq[iv[k] * 48 + i] += gv[k * 48 + i];
  Attrs attrs;
  attrs.set("axis", int64_t(0));
  for (int threads : {1, 3, 0}) {
    backend->setNumThreads(threads);
    HostBuffer got = runOk("gather_grad", attrs, {idx, g}, DType::F32, result);
    EXPECT_EQ(rawValues<float>(got), seq) << threads << " threads";
  }
  backend->setNumThreads(0);
}

// Proves an index outside [-size, size) is an error naming it.
TEST_P(GradKernelsTest, GatherGradIndexOutOfRangeIsAnError) {
  HostBuffer g = randomTensor(DType::F32, {3, 2}, rng);
  Attrs attrs;
  attrs.set("axis", int64_t(0));
  for (int64_t bad : {4, -5}) {
    HostBuffer idx = makeTensor(DType::I32, {3}, {0, double(bad), 1});
    OpResult r = run("gather_grad", attrs, {idx, g}, DType::F32, {4, 2});
    EXPECT_NE(r.error.find("index " + std::to_string(bad) + " is out of range"),
              std::string::npos)
        << r.error;
  }
}

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

struct SliceCase {
  Shape result, sizes;
  std::vector<int64_t> starts, strides;
};

/// Offset in the sliced tensor of each slice element, row-major.
std::vector<int64_t> sliceOffsets(const SliceCase &c) {
  std::vector<int64_t> offsets;
  for (int64_t i = 0; i < numElements(c.sizes); ++i) {
    std::vector<int64_t> idx = unravel(i, c.sizes);
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      off = off * c.result[d] + c.starts[d] + idx[d] * c.strides[d];
    offsets.push_back(off);
  }
  return offsets;
}

// Proves the slice_grad reference (grad placed into zeros, negative
// strides) is the gradient of slice.
TEST(GradReferenceTest, SliceMatchesDifferences) {
  std::mt19937 rng(14);
  SliceCase c{{6, 5}, {3, 2}, {5, 1}, {-2, 3}};
  std::vector<int64_t> offsets = sliceOffsets(c);
  std::vector<double> x = randomValues(30, rng), g = randomValues(6, rng),
                      ref(30, 0.0);
  for (size_t i = 0; i < offsets.size(); ++i)
    ref[offsets[i]] = g[i];
  expectMatchesDifferences(ref, centralDifferences(
                                    [&](const std::vector<double> &v) {
                                      double s = 0;
                                      for (size_t i = 0; i < offsets.size();
                                           ++i)
                                        s += v[offsets[i]] * g[i];
                                      return s;
                                    },
                                    x));
}

// Proves slice_grad places grad exactly (zeros elsewhere) for positive,
// negative and mixed strides, ranks 1 to 3, a large parallel case and an
// empty slice, f32/f16/bf16.
TEST_P(GradKernelsTest, SliceGrad) {
  std::vector<SliceCase> cases = {{{10}, {3}, {1}, {3}},
                                  {{6, 5}, {3, 5}, {5, 4}, {-2, -1}},
                                  {{4, 6, 5}, {2, 3, 2}, {1, 0, 4}, {2, 2, -3}},
                                  {{300, 400}, {150, 200}, {299, 1}, {-2, 2}},
                                  {{4, 3}, {0, 3}, {0, 0}, {1, 1}}};
  for (DType dtype : kFloatTypes)
    for (const SliceCase &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(c.result) +
                   " sizes " + formatShape(c.sizes));
      HostBuffer g = randomTensor(dtype, c.sizes, rng);
      std::vector<double> gv = values(g), ref(numElements(c.result), 0.0);
      std::vector<int64_t> offsets = sliceOffsets(c);
      for (size_t i = 0; i < offsets.size(); ++i)
        ref[offsets[i]] = gv[i];
      Attrs attrs;
      attrs.set("starts", c.starts);
      attrs.set("strides", c.strides);
      expectEqual(runOk("slice_grad", attrs, {g}, dtype, c.result), ref);
    }
}

// Proves pad_grad is the adjoint of pad: every grad element is added to the
// input element the reference pad (numpy.pad's layout) read it from, in
// reflect, edge and constant mode, ranks 1 to 4, wide edge pads that repeat
// one element many times, and a large parallel case; f32/f16/bf16.
TEST_P(GradKernelsTest, PadGrad) {
  struct Case {
    Shape shape;
    std::vector<int64_t> low, high;
    std::string mode;
  };
  std::vector<Case> cases;
  for (std::string mode : {"reflect", "edge", "constant"}) {
    cases.push_back({{5}, {2}, {4}, mode});
    cases.push_back({{3, 4}, {0, 3}, {2, 0}, mode});
    cases.push_back({{2, 3, 4}, {1, 2, 0}, {1, 1, 3}, mode});
    cases.push_back({{2, 2, 3, 5}, {0, 1, 2, 1}, {0, 1, 2, 4}, mode});
    cases.push_back({{4, 40, 70}, {0, 7, 3}, {0, 9, 2}, mode});
  }
  cases.push_back({{3, 2}, {5, 9}, {6, 11}, "edge"});
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + c.mode + " " +
                   formatShape(c.shape) + " low " + formatShape(c.low) +
                   " high " + formatShape(c.high));
      std::vector<std::vector<int64_t>> lists;
      Shape padded;
      for (size_t d = 0; d < c.shape.size(); ++d) {
        lists.push_back(padIndices(c.mode, c.shape[d], c.low[d], c.high[d]));
        padded.push_back(lists.back().size());
      }
      HostBuffer g = randomTensor(dtype, padded, rng);
      std::vector<double> gv = values(g), ref(numElements(c.shape), 0.0);
      for (int64_t i = 0; i < numElements(padded); ++i) {
        std::vector<int64_t> idx = unravel(i, padded);
        int64_t offset = 0;
        bool border = false;
        for (size_t d = 0; d < idx.size(); ++d) {
          int64_t j = lists[d][idx[d]];
          border |= j < 0;
          offset = offset * c.shape[d] + j;
        }
        if (!border)
          ref[offset] += gv[i];
      }
      Attrs attrs;
      attrs.set("low", c.low);
      attrs.set("high", c.high);
      attrs.set("mode", c.mode);
      expectClose(runOk("pad_grad", attrs, {g}, dtype, c.shape), ref,
                  defaultTolerance(dtype));
    }
}

// Proves slice_grad rejects a slice that would write outside the result,
// a zero stride and a rank mismatch, instead of writing out of bounds.
TEST_P(GradKernelsTest, SliceGradOutOfBoundsIsAnError) {
  HostBuffer g = randomTensor(DType::F32, {3}, rng);
  auto attempt = [&](std::vector<int64_t> starts, std::vector<int64_t> strides,
                     Shape result) {
    Attrs attrs;
    attrs.set("starts", starts);
    attrs.set("strides", strides);
    return run("slice_grad", attrs, {g}, DType::F32, result).error;
  };
  EXPECT_NE(attempt({1}, {2}, {5}), "");  // 1, 3, 5: past the end
  EXPECT_NE(attempt({1}, {-1}, {5}), ""); // 1, 0, -1
  EXPECT_NE(attempt({0}, {0}, {5}), "");
  EXPECT_NE(attempt({0, 0}, {1, 1}, {5, 1}), "");
  EXPECT_EQ(attempt({4}, {-2}, {5}), ""); // 4, 2, 0
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy_grad
//===----------------------------------------------------------------------===//

double crossEntropy(const std::vector<double> &x, int64_t classes,
                    const std::vector<double> &labels, int64_t ignore,
                    bool sum) {
  double total = 0;
  int64_t counted = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == ignore)
      continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < classes; ++c)
      m = std::max(m, x[r * classes + c]);
    for (int64_t c = 0; c < classes; ++c)
      s += std::exp(x[r * classes + c] - m);
    total += m + std::log(s) - x[r * classes + int64_t(labels[r])];
    ++counted;
  }
  return sum ? total : counted ? total / counted : 0;
}

std::vector<double> crossEntropyGradRef(const std::vector<double> &x,
                                        int64_t classes,
                                        const std::vector<double> &labels,
                                        int64_t ignore, bool sum, double grad) {
  int64_t counted = 0;
  for (double l : labels)
    counted += l != ignore;
  std::vector<double> out(x.size(), 0.0);
  if (counted == 0)
    return out;
  double factor = sum ? grad : grad / counted;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == ignore)
      continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < classes; ++c)
      m = std::max(m, x[r * classes + c]);
    for (int64_t c = 0; c < classes; ++c)
      s += std::exp(x[r * classes + c] - m);
    for (int64_t c = 0; c < classes; ++c)
      out[r * classes + c] =
          (std::exp(x[r * classes + c] - m) / s - (c == labels[r])) * factor;
  }
  return out;
}

// Proves the cross-entropy reference gradient (mean over counted rows, sum,
// ignored rows) is the gradient of grad * softmax_cross_entropy.
TEST(GradReferenceTest, CrossEntropyMatchesDifferences) {
  std::mt19937 rng(15);
  std::vector<double> labels = {2, -100, 0, 3};
  for (bool sum : {false, true}) {
    std::vector<double> x = randomValues(4 * 5, rng, -3, 3);
    double grad = 0.7;
    expectMatchesDifferences(crossEntropyGradRef(x, 5, labels, -100, sum, grad),
                             centralDifferences(
                                 [&](const std::vector<double> &v) {
                                   return grad *
                                          crossEntropy(v, 5, labels, -100, sum);
                                 },
                                 x));
  }
}

// Proves softmax_cross_entropy_grad against the reference for mean and sum,
// i32/i64 labels, an ignored row, large logits, a parallel-sized batch and
// f32/f16/bf16.
TEST_P(GradKernelsTest, SoftmaxCrossEntropyGrad) {
  for (DType labelType : {DType::I32, DType::I64})
    for (DType dtype : kFloatTypes)
      for (bool sum : {false, true})
        for (auto [rows, classes, range] :
             {std::tuple<int64_t, int64_t, double>{7, 5, 3},
              {3, 4, 500},
              {256, 100, 4}}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " labels " +
                       dtypeName(labelType) + (sum ? " sum" : " mean") +
                       " rows " + std::to_string(rows));
          HostBuffer logits =
              randomTensor(dtype, {rows, classes}, rng, -range, range);
          HostBuffer labels =
              randomTensor(labelType, {rows}, rng, 0, double(classes - 1));
          std::vector<double> lv = values(labels);
          lv[1] = -100;
          labels = makeTensor(labelType, {rows}, lv);
          HostBuffer grad = makeTensor(dtype, {}, {0.75});
          Attrs attrs;
          attrs.set("ignore_index", int64_t(-100));
          attrs.set("sum", sum);
          expectClose(
              runOk("softmax_cross_entropy_grad", attrs, {logits, labels, grad},
                    dtype, {rows, classes}),
              crossEntropyGradRef(values(logits), classes, lv, -100, sum, 0.75),
              defaultTolerance(dtype), 1e-3);
        }
}

// Proves every row ignored gives all zeros (mean and sum), and an ignored
// row is zero even when ignore_index is a valid class.
TEST_P(GradKernelsTest, CrossEntropyGradIgnoredRows) {
  HostBuffer logits = randomTensor(DType::F32, {3, 4}, rng);
  HostBuffer grad = makeTensor(DType::F32, {}, {1.0});
  Attrs attrs;
  attrs.set("ignore_index", int64_t(2));
  for (bool sum : {false, true}) {
    attrs.set("sum", sum);
    HostBuffer all = makeTensor(DType::I64, {3}, {2, 2, 2});
    expectEqual(runOk("softmax_cross_entropy_grad", attrs, {logits, all, grad},
                      DType::F32, {3, 4}),
                std::vector<double>(12, 0.0));
    HostBuffer mixed = makeTensor(DType::I64, {3}, {2, 0, 3});
    expectClose(runOk("softmax_cross_entropy_grad", attrs,
                      {logits, mixed, grad}, DType::F32, {3, 4}),
                crossEntropyGradRef(values(logits), 4, {2, 0, 3}, 2, sum, 1.0),
                1e-5);
  }
}

// Proves a label outside [0, C) that is not ignored is an error naming it.
TEST_P(GradKernelsTest, CrossEntropyGradLabelOutOfRangeIsAnError) {
  HostBuffer logits = randomTensor(DType::F32, {3, 4}, rng);
  HostBuffer grad = makeTensor(DType::F32, {}, {1.0});
  Attrs attrs;
  attrs.set("ignore_index", int64_t(-100));
  for (double bad : {4.0, -1.0}) {
    HostBuffer labels = makeTensor(DType::I32, {3}, {0, bad, 1});
    OpResult r = run("softmax_cross_entropy_grad", attrs,
                     {logits, labels, grad}, DType::F32, {3, 4});
    EXPECT_NE(r.error.find("label " + std::to_string(int(bad))),
              std::string::npos)
        << r.error;
  }
}

// Proves the kernels reject operands whose shapes or types would make them
// index out of bounds (a malformed plan is an error, never a crash).
TEST_P(GradKernelsTest, MalformedOperandsAreErrors) {
  auto t = [&](Shape s, DType d = DType::F32) {
    return randomTensor(d, std::move(s), rng);
  };
  Attrs none;
  EXPECT_NE(run("relu_grad", none, {t({3}), t({4})}, DType::F32, {3}).error,
            "");
  EXPECT_NE(run("gelu_grad", none, {t({3}), t({3})}, DType::F32, {4}).error,
            "");
  EXPECT_NE(run("relu_grad", none, {t({3}, DType::Bool), t({3}, DType::Bool)},
                DType::Bool, {3})
                .error,
            "");
  Attrs axis;
  axis.set("axis", int64_t(1));
  axis.set("epsilon", 1e-5);
  MultiResult ln = runKernel(
      *backend, "layer_norm_grad", axis, {t({2, 3}), t({2}), t({2, 3})},
      {{DType::F32, {2, 3}}, {DType::F32, {3}}, {DType::F32, {3}}});
  EXPECT_NE(ln.error, "");
  ln = runKernel(*backend, "layer_norm_grad", axis,
                 {t({2, 3}), t({3}), t({2, 3})},
                 {{DType::F32, {2, 3}}, {DType::F32, {3}}});
  EXPECT_NE(ln.error.find("expects 3 inputs and 3 outputs"), std::string::npos)
      << ln.error;
  Attrs gatherAxis;
  gatherAxis.set("axis", int64_t(0));
  EXPECT_NE(run("gather_grad", gatherAxis, {t({3}, DType::I32), t({4, 2})},
                DType::F32, {5, 2})
                .error,
            "");
  EXPECT_NE(run("gather_grad", gatherAxis, {t({3}, DType::F32), t({3, 2})},
                DType::F32, {5, 2})
                .error,
            "");
  Attrs ce;
  EXPECT_NE(run("softmax_cross_entropy_grad", ce,
                {t({3, 4}), t({2}, DType::I32), t({})}, DType::F32, {3, 4})
                .error,
            "");
  EXPECT_NE(run("softmax_cross_entropy_grad", ce,
                {t({3, 4}), t({3}, DType::I32), t({2})}, DType::F32, {3, 4})
                .error,
            "");
}

// Proves the oneDNN path really runs oneDNN for the gradients that have one
// (a rejected primitive would fall back to the plain path silently): each
// creates a primitive with oneDNN on, none with it off.
TEST(GradOneDnnTest, OneDnnPathsCreatePrimitives) {
  std::mt19937 rng(16);
  auto t = [&](Shape s) { return randomTensor(DType::F32, std::move(s), rng); };
  Attrs conv;
  conv.set("strides", std::vector<int64_t>{2, 1});
  conv.set("padding", std::vector<int64_t>{1, 0, 1, 2});
  conv.set("dilations", std::vector<int64_t>{1, 2});
  conv.set("groups", int64_t(2));
  Attrs pool;
  pool.set("kernel", std::vector<int64_t>{3, 3});
  pool.set("strides", std::vector<int64_t>{2, 2});
  pool.set("padding", std::vector<int64_t>{1, 1, 1, 1});
  pool.set("dilations", std::vector<int64_t>{1, 1});
  pool.set("ceil_mode", true);
  Attrs ln;
  ln.set("axis", int64_t(1));
  ln.set("epsilon", 1e-5);
  struct Call {
    std::string op;
    Attrs attrs;
    std::vector<HostBuffer> inputs;
    std::vector<OutSpec> outs;
  };
  // conv: input [2, 4, 9, 8], weight [6, 2, 3, 3] -> [2, 6, 5, 6].
  std::vector<Call> calls = {
      {"conv2d_grad_input",
       conv,
       {t({2, 6, 5, 6}), t({6, 2, 3, 3})},
       {{DType::F32, {2, 4, 9, 8}}}},
      {"conv2d_grad_weight",
       conv,
       {t({2, 4, 9, 8}), t({2, 6, 5, 6})},
       {{DType::F32, {6, 2, 3, 3}}}},
      {"gelu_grad", Attrs(), {t({100}), t({100})}, {{DType::F32, {100}}}},
      {"avg_pool2d_grad",
       pool,
       {t({1, 2, 5, 5})},
       {{DType::F32, {1, 2, 8, 8}}}},
      {"layer_norm_grad",
       ln,
       {t({4, 6}), t({6}), t({4, 6})},
       {{DType::F32, {4, 6}}, {DType::F32, {6}}, {DType::F32, {6}}}}};
  for (bool oneDnn : {true, false})
    for (const Call &call : calls) {
      auto backend = createCpuBackend();
      cpu::CpuContext *ctx = cpu::getCpuContext(*backend);
      ctx->useOneDnn = oneDnn;
      ASSERT_EQ(runKernel(*backend, call.op, call.attrs, call.inputs, call.outs)
                    .error,
                "");
      EXPECT_EQ(ctx->primitives.creations(), oneDnn ? 1u : 0u)
          << call.op << (oneDnn ? " with" : " without") << " oneDNN";
    }
}

LOOM_KERNEL_TEST_PATHS(GradKernelsTest);

} // namespace
} // namespace loom::rt::test
