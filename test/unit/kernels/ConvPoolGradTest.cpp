//===- ConvPoolGradTest.cpp - conv2d and pooling gradients ----------------===//
//
// Naive double references of the convolution and pooling gradients,
// validated by central differences of the forward math, then compared with
// the kernels on both paths (conv_transpose2d too, the convolution's input
// gradient plus a bias); and the adjoint identity <f(x), g> = <x, f'(g)>
// against the backend's own forward kernels, which ties each gradient to
// the forward it differentiates (window and divisor rules included).
//
//===----------------------------------------------------------------------===//

#include "test/unit/kernels/TrainTestUtil.h"
#include "test/unit/support/Oracle.h"

#include "runtime/cpu/CpuContext.h"

#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

class ConvPoolGradTest : public KernelTest {};

/// Linalg tolerance: long accumulations make f32 looser than elementwise.
double sumTolerance(DType dtype) {
  return dtype == DType::F32 ? 1e-4 : defaultTolerance(dtype);
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

struct ConvCase {
  Shape input, weight;
  std::vector<int64_t> strides, padding, dilations;
  int64_t groups;

  Shape output() const {
    Shape os{input[0], weight[0]};
    for (int i = 0; i < 2; ++i)
      os.push_back((input[2 + i] + padding[i] + padding[i + 2] -
                    dilations[i] * (weight[2 + i] - 1) - 1) /
                       strides[i] +
                   1);
    return os;
  }
  Attrs attrs() const {
    Attrs a;
    a.set("strides", strides);
    a.set("padding", padding);
    a.set("dilations", dilations);
    a.set("groups", groups);
    return a;
  }
};

/// Calls f(xOffset, wOffset, yOffset) for every product term of the
/// convolution y = conv(x, w).
template <typename F> void forEachConvTerm(const ConvCase &c, F &&f) {
  Shape os = c.output();
  int64_t N = c.input[0], C = c.input[1], H = c.input[2], W = c.input[3];
  int64_t O = c.weight[0], KH = c.weight[2], KW = c.weight[3];
  int64_t cin = C / c.groups, cout = O / c.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < os[2]; ++oh)
        for (int64_t ow = 0; ow < os[3]; ++ow)
          for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih =
                    oh * c.strides[0] - c.padding[0] + kh * c.dilations[0];
                int64_t iw =
                    ow * c.strides[1] - c.padding[1] + kw * c.dilations[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                  continue;
                int64_t ch = (o / cout) * cin + ci;
                f(((n * C + ch) * H + ih) * W + iw,
                  ((o * cin + ci) * KH + kh) * KW + kw,
                  ((n * O + o) * os[2] + oh) * os[3] + ow);
              }
}

std::vector<double> convForward(const ConvCase &c, const std::vector<double> &x,
                                const std::vector<double> &w) {
  std::vector<double> y(numElements(c.output()), 0.0);
  forEachConvTerm(
      c, [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * w[wi]; });
  return y;
}

std::vector<double> convGradInputRef(const ConvCase &c,
                                     const std::vector<double> &g,
                                     const std::vector<double> &w) {
  std::vector<double> dx(numElements(c.input), 0.0);
  forEachConvTerm(
      c, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += g[yi] * w[wi]; });
  return dx;
}

std::vector<double> convGradWeightRef(const ConvCase &c,
                                      const std::vector<double> &x,
                                      const std::vector<double> &g) {
  std::vector<double> dw(numElements(c.weight), 0.0);
  forEachConvTerm(
      c, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += g[yi] * x[xi]; });
  return dw;
}

const std::vector<ConvCase> kConvCases = {
    {{2, 3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {{1, 4, 9, 7}, {6, 4, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
    {{1, 2, 8, 8}, {3, 2, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1}, // unused row
    {{1, 2, 10, 10}, {3, 2, 3, 3}, {1, 2}, {2, 1, 0, 2}, {2, 2}, 1},
    {{2, 4, 6, 6}, {6, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
    {{1, 6, 7, 7}, {6, 1, 3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 2}, 6},
    {{3, 5, 4, 4}, {7, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {{2, 16, 28, 28}, {32, 16, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1},
    {{1, 3, 5, 5}, {2, 3, 5, 5}, {3, 3}, {3, 2, 1, 3}, {1, 1}, 1}};

// Proves both convolution reference gradients (input and weight) are those
// of the forward convolution, with groups, strides, asymmetric padding and
// dilations.
TEST(ConvPoolGradReferenceTest, ConvMatchesDifferences) {
  std::mt19937 rng(21);
  for (const ConvCase &c :
       {ConvCase{{1, 4, 5, 6}, {4, 2, 3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 2}, 2},
        ConvCase{
            {2, 2, 4, 4}, {3, 2, 2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}}) {
    std::vector<double> x = randomValues(numElements(c.input), rng),
                        w = randomValues(numElements(c.weight), rng),
                        g = randomValues(numElements(c.output()), rng);
    expectMatchesDifferences(convGradInputRef(c, g, w),
                             centralDifferences(
                                 [&](const std::vector<double> &v) {
                                   return dot(convForward(c, v, w), g);
                                 },
                                 x));
    expectMatchesDifferences(convGradWeightRef(c, x, g),
                             centralDifferences(
                                 [&](const std::vector<double> &v) {
                                   return dot(convForward(c, x, v), g);
                                 },
                                 w));
  }
}

// Proves conv2d_grad_input against the reference: strides (with input rows
// no window reads, whose gradient is 0), asymmetric padding, dilations,
// grouped and depthwise, 1x1, f32/f16/bf16; on the oneDNN path every case
// runs on oneDNN (creates a primitive) rather than falling back.
TEST_P(ConvPoolGradTest, Conv2dGradInput) {
  cpu::CpuContext *ctx = cpu::getCpuContext(*backend);
  for (DType dtype : kFloatTypes)
    for (const ConvCase &c : kConvCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(c.input) +
                   " * " + formatShape(c.weight) + " groups " +
                   std::to_string(c.groups));
      HostBuffer g = randomTensor(dtype, c.output(), rng);
      HostBuffer w = randomTensor(dtype, c.weight, rng);
      ctx->primitives.clear();
      size_t before = ctx->primitives.creations();
      expectClose(runOk("conv2d_grad_input", c.attrs(), {g, w}, dtype, c.input),
                  convGradInputRef(c, values(g), values(w)),
                  sumTolerance(dtype));
      EXPECT_EQ(ctx->primitives.creations(), before + (GetParam() ? 1 : 0));
    }
}

// Proves conv2d_grad_weight against the reference on the same cases, on
// oneDNN for every case of the oneDNN path.
TEST_P(ConvPoolGradTest, Conv2dGradWeight) {
  cpu::CpuContext *ctx = cpu::getCpuContext(*backend);
  for (DType dtype : kFloatTypes)
    for (const ConvCase &c : kConvCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(c.input) +
                   " * " + formatShape(c.weight) + " groups " +
                   std::to_string(c.groups));
      HostBuffer x = randomTensor(dtype, c.input, rng);
      HostBuffer g = randomTensor(dtype, c.output(), rng);
      ctx->primitives.clear();
      size_t before = ctx->primitives.creations();
      expectClose(
          runOk("conv2d_grad_weight", c.attrs(), {x, g}, dtype, c.weight),
          convGradWeightRef(c, values(x), values(g)), sumTolerance(dtype));
      EXPECT_EQ(ctx->primitives.creations(), before + (GetParam() ? 1 : 0));
    }
}

// Proves conv_transpose2d is conv2d_grad_input of its input plus the bias,
// on the same cases: output_padding gives back the rows and columns no
// window reads (which receive only the bias), on oneDNN for every case of
// the oneDNN path.
TEST_P(ConvPoolGradTest, ConvTranspose2d) {
  cpu::CpuContext *ctx = cpu::getCpuContext(*backend);
  for (DType dtype : kFloatTypes)
    for (const ConvCase &c : kConvCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(c.input) +
                   " * " + formatShape(c.weight) + " groups " +
                   std::to_string(c.groups));
      Attrs attrs = c.attrs();
      std::vector<int64_t> extra;
      for (int i = 0; i < 2; ++i)
        extra.push_back((c.input[2 + i] + c.padding[i] + c.padding[i + 2] -
                         c.dilations[i] * (c.weight[2 + i] - 1) - 1) %
                        c.strides[i]);
      attrs.set("output_padding", extra);
      HostBuffer x = randomTensor(dtype, c.output(), rng);
      HostBuffer w = randomTensor(dtype, c.weight, rng);
      HostBuffer b = randomTensor(dtype, {c.input[1]}, rng);
      std::vector<double> want = convGradInputRef(c, values(x), values(w));
      std::vector<double> bias = values(b);
      int64_t area = c.input[2] * c.input[3];
      for (size_t i = 0; i < want.size(); ++i)
        want[i] += bias[(i / area) % c.input[1]];
      ctx->primitives.clear();
      size_t before = ctx->primitives.creations();
      expectClose(runOk("conv_transpose2d", attrs, {x, w, b}, dtype, c.input),
                  want, sumTolerance(dtype));
      EXPECT_EQ(ctx->primitives.creations(), before + (GetParam() ? 1 : 0));
    }
}

// Proves the conv kernels reject inconsistent shapes (channels, groups,
// batch, attribute counts) rather than index out of bounds.
TEST_P(ConvPoolGradTest, ConvGradMalformedShapesAreErrors) {
  ConvCase c{{1, 4, 6, 6}, {4, 2, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2};
  HostBuffer g = randomTensor(DType::F32, c.output(), rng);
  HostBuffer w = randomTensor(DType::F32, c.weight, rng);
  HostBuffer x = randomTensor(DType::F32, c.input, rng);
  EXPECT_EQ(
      run("conv2d_grad_input", c.attrs(), {g, w}, DType::F32, c.input).error,
      "");
  EXPECT_NE(
      run("conv2d_grad_input", c.attrs(), {g, w}, DType::F32, {1, 6, 6, 6})
          .error,
      "");
  EXPECT_NE(
      run("conv2d_grad_input", c.attrs(), {g, w}, DType::F32, {2, 4, 6, 6})
          .error,
      "");
  EXPECT_NE(
      run("conv2d_grad_weight", c.attrs(), {x, g}, DType::F32, {4, 4, 3, 3})
          .error,
      "");
  Attrs bad = c.attrs();
  bad.set("strides", std::vector<int64_t>{1});
  EXPECT_NE(run("conv2d_grad_weight", bad, {x, g}, DType::F32, c.weight).error,
            "");
  bad = c.attrs();
  bad.set("strides", std::vector<int64_t>{0, 1});
  EXPECT_NE(run("conv2d_grad_input", bad, {g, w}, DType::F32, c.input).error,
            "");
}

//===----------------------------------------------------------------------===//
// max_pool2d / avg_pool2d
//===----------------------------------------------------------------------===//

struct PoolCase {
  Shape input;
  std::vector<int64_t> kernel, strides, padding, dilations;
  bool ceilMode;

  Shape output() const {
    Shape os{input[0], input[1]};
    for (int i = 0; i < 2; ++i) {
      int64_t span = input[2 + i] + padding[i] + padding[i + 2] -
                     dilations[i] * (kernel[i] - 1) - 1;
      int64_t steps = span / strides[i];
      if (ceilMode && span % strides[i] != 0 &&
          (steps + 1) * strides[i] < input[2 + i] + padding[i])
        ++steps;
      os.push_back(steps + 1);
    }
    return os;
  }
  Attrs attrs() const {
    Attrs a;
    a.set("kernel", kernel);
    a.set("strides", strides);
    a.set("padding", padding);
    a.set("dilations", dilations);
    a.set("ceil_mode", ceilMode);
    return a;
  }
};

/// Calls f(outIndex, inputOffsets of the window's real positions in
/// row-major window order, window start h, window start w) for each output.
template <typename F> void forEachWindow(const PoolCase &c, F &&f) {
  Shape os = c.output();
  int64_t H = c.input[2], W = c.input[3];
  for (int64_t i = 0; i < numElements(os); ++i) {
    std::vector<int64_t> idx = unravel(i, os);
    int64_t plane = idx[0] * c.input[1] + idx[1];
    int64_t hs = idx[2] * c.strides[0] - c.padding[0],
            ws = idx[3] * c.strides[1] - c.padding[1];
    std::vector<int64_t> window;
    for (int64_t kh = 0; kh < c.kernel[0]; ++kh)
      for (int64_t kw = 0; kw < c.kernel[1]; ++kw) {
        int64_t ih = hs + kh * c.dilations[0], iw = ws + kw * c.dilations[1];
        if (ih >= 0 && ih < H && iw >= 0 && iw < W)
          window.push_back((plane * H + ih) * W + iw);
      }
    f(i, window, hs, ws);
  }
}

/// The first maximum (a NaN beating numbers) of the window, or -1.
int64_t firstMax(const std::vector<double> &x,
                 const std::vector<int64_t> &window) {
  int64_t best = -1;
  for (int64_t off : window)
    if (best < 0 || (std::isnan(x[off]) && !std::isnan(x[best])) ||
        x[off] > x[best])
      best = off;
  return best;
}

/// PyTorch's divisor (dilation 1): the window clipped to the padded input
/// (count_include_pad), or its real positions.
double avgDivisor(const PoolCase &c, int64_t hs, int64_t ws, size_t real,
                  bool includePad) {
  if (!includePad)
    return double(real);
  int64_t he = std::min(hs + c.kernel[0], c.input[2] + c.padding[2]),
          we = std::min(ws + c.kernel[1], c.input[3] + c.padding[3]);
  return double((he - hs) * (we - ws));
}

std::vector<double> poolForward(const PoolCase &c, const std::vector<double> &x,
                                const std::string &mode) {
  std::vector<double> y(numElements(c.output()));
  forEachWindow(c, [&](int64_t i, const std::vector<int64_t> &window,
                       int64_t hs, int64_t ws) {
    if (mode == "max") {
      int64_t best = firstMax(x, window);
      y[i] = best < 0 ? -INFINITY : x[best];
      return;
    }
    double sum = 0;
    for (int64_t off : window)
      sum += x[off];
    y[i] = sum / avgDivisor(c, hs, ws, window.size(), mode == "include");
  });
  return y;
}

std::vector<double> maxPoolGradRef(const PoolCase &c,
                                   const std::vector<double> &x,
                                   const std::vector<double> &g) {
  std::vector<double> dx(x.size(), 0.0);
  forEachWindow(
      c, [&](int64_t i, const std::vector<int64_t> &window, int64_t, int64_t) {
        int64_t best = firstMax(x, window);
        if (best >= 0)
          dx[best] += g[i];
      });
  return dx;
}

std::vector<double> avgPoolGradRef(const PoolCase &c,
                                   const std::vector<double> &g,
                                   bool includePad) {
  std::vector<double> dx(numElements(c.input), 0.0);
  forEachWindow(c, [&](int64_t i, const std::vector<int64_t> &window,
                       int64_t hs, int64_t ws) {
    for (int64_t off : window)
      dx[off] += g[i] / avgDivisor(c, hs, ws, window.size(), includePad);
  });
  return dx;
}

const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
    {{1, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false},
    {{1, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
    {{2, 2, 7, 10}, {3, 2}, {2, 3}, {1, 0, 0, 1}, {1, 1}, true},
    {{1, 3, 6, 6}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
    {{1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
    {{2, 4, 32, 32}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},
    {{1, 2, 6, 7}, {4, 3}, {3, 2}, {2, 1, 1, 2}, {1, 1}, true}};

// Proves the max and avg pooling reference gradients are those of the
// forward math (distinct values, so no tie sits within the step), in ceil
// mode with windows past the end padding, and for both divisor rules.
TEST(ConvPoolGradReferenceTest, PoolMatchesDifferences) {
  std::mt19937 rng(22);
  for (const PoolCase &c :
       {PoolCase{{1, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
        PoolCase{{1, 1, 6, 7}, {4, 3}, {3, 2}, {2, 1, 1, 2}, {1, 1}, true},
        PoolCase{{1, 1, 9, 8}, {2, 3}, {3, 1}, {1, 0, 1, 2}, {3, 2}, false}}) {
    std::vector<double> x = randomValues(numElements(c.input), rng),
                        g = randomValues(numElements(c.output()), rng);
    expectMatchesDifferences(maxPoolGradRef(c, x, g),
                             centralDifferences(
                                 [&](const std::vector<double> &v) {
                                   return dot(poolForward(c, v, "max"), g);
                                 },
                                 x, 1e-7));
    if (c.dilations[0] != 1 || c.dilations[1] != 1)
      continue; // avg_pool2d has dilations of 1
    for (bool includePad : {false, true})
      expectMatchesDifferences(
          avgPoolGradRef(c, g, includePad),
          centralDifferences(
              [&](const std::vector<double> &v) {
                return dot(
                    poolForward(c, v, includePad ? "include" : "exclude"), g);
              },
              x));
  }
}

// Proves max_pool2d_grad routes each window's gradient to its first maximum
// (overlapping windows accumulate), padding never selected even with all
// inputs negative, ceil mode, asymmetric padding, dilation, f32/f16/bf16
// (where rounding creates ties, resolved as the reference does).
TEST_P(ConvPoolGradTest, MaxPoolGrad) {
  std::vector<PoolCase> cases = kPoolCases;
  cases.push_back({{1, 2, 9, 9}, {3, 3}, {2, 2}, {2, 2, 2, 2}, {2, 2}, true});
  cases.push_back({{1, 2, 11, 8}, {2, 3}, {3, 1}, {1, 0, 1, 2}, {3, 2}, false});
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : cases) {
      Shape os = c.output();
      SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(c.input) +
                   " -> " + formatShape(os) + (c.ceilMode ? " ceil" : ""));
      HostBuffer x = randomTensor(dtype, c.input, rng, -5, -1);
      HostBuffer g = randomTensor(dtype, os, rng);
      expectClose(runOk("max_pool2d_grad", c.attrs(), {x, g}, dtype, c.input),
                  maxPoolGradRef(c, values(x), values(g)),
                  defaultTolerance(dtype));
    }
}

// Proves the tie rule on hand-made inputs: equal values send the gradient
// to the first position of the window in row-major order; a NaN takes the
// gradient from the numbers around it.
TEST_P(ConvPoolGradTest, MaxPoolGradTiesAndNan) {
  PoolCase c{{1, 1, 2, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false};
  HostBuffer x = makeTensor(DType::F32, c.input, {1, 1, 7, 7, 1, 1, 7, 7});
  HostBuffer g = makeTensor(DType::F32, {1, 1, 1, 2}, {3, 5});
  expectEqual(runOk("max_pool2d_grad", c.attrs(), {x, g}, DType::F32, c.input),
              {3, 0, 5, 0, 0, 0, 0, 0});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  x = makeTensor(DType::F32, c.input, {1, 9, 2, 2, nan, 9, 2, nan});
  expectEqual(runOk("max_pool2d_grad", c.attrs(), {x, g}, DType::F32, c.input),
              {0, 0, 0, 0, 3, 0, 0, 5});
  // Stride 1: the shared maximum collects both windows' gradients.
  PoolCase overlap{{1, 1, 1, 3}, {1, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false};
  x = makeTensor(DType::F32, overlap.input, {0, 4, 4});
  expectEqual(runOk("max_pool2d_grad", overlap.attrs(), {x, g}, DType::F32,
                    overlap.input),
              {0, 8, 0});
}

// Proves avg_pool2d_grad for both divisor rules in floor and ceil mode; in
// ceil mode with count_include_pad positions past the end padding do not
// count (the case oneDNN cannot express), f32/f16/bf16.
TEST_P(ConvPoolGradTest, AvgPoolGrad) {
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : kPoolCases)
      for (bool includePad : {false, true}) {
        Shape os = c.output();
        SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(c.input) +
                     " -> " + formatShape(os) + (c.ceilMode ? " ceil" : "") +
                     (includePad ? " include_pad" : ""));
        HostBuffer g = randomTensor(dtype, os, rng, -2, 2);
        Attrs attrs = c.attrs();
        attrs.set("count_include_pad", includePad);
        expectClose(runOk("avg_pool2d_grad", attrs, {g}, dtype, c.input),
                    avgPoolGradRef(c, values(g), includePad),
                    defaultTolerance(dtype));
      }
}

// Proves each gradient kernel is the adjoint of the backend's own forward
// kernel: <f(x), g> = <x, grad(g)> for conv2d (input and weight),
// max_pool2d (at fixed x) and avg_pool2d (both divisor rules, ceil mode),
// in f32 on this path.
TEST_P(ConvPoolGradTest, AdjointOfForwardKernels) {
  auto inner = [](const HostBuffer &a, const HostBuffer &b) {
    return dot(values(a), values(b));
  };
  // Both sides finite and within rtol * max(|lhs|, 1) of each other.
  auto expectAdjoint = [](double got, double lhs, double rtol,
                          const char *what) {
    EXPECT_TRUE(std::isfinite(lhs)) << what << ": <f(x), g> = " << lhs;
    oracle::Comparison c =
        oracle::compareValue(got, lhs, oracle::Tolerance::relative(rtol));
    EXPECT_TRUE(c.ok()) << what << ": " << c.message();
  };
  for (const ConvCase &c : kConvCases) {
    SCOPED_TRACE("conv " + formatShape(c.input) + " * " +
                 formatShape(c.weight));
    HostBuffer x = randomTensor(DType::F32, c.input, rng);
    HostBuffer w = randomTensor(DType::F32, c.weight, rng);
    HostBuffer g = randomTensor(DType::F32, c.output(), rng);
    double lhs =
        inner(runOk("conv2d", c.attrs(), {x, w}, DType::F32, c.output()), g);
    double viaInput = inner(
        x, runOk("conv2d_grad_input", c.attrs(), {g, w}, DType::F32, c.input));
    double viaWeight = inner(w, runOk("conv2d_grad_weight", c.attrs(), {x, g},
                                      DType::F32, c.weight));
    expectAdjoint(viaInput, lhs, 1e-4, "grad_input");
    expectAdjoint(viaWeight, lhs, 1e-4, "grad_weight");
  }
  for (const PoolCase &c : kPoolCases) {
    SCOPED_TRACE("pool " + formatShape(c.input) + (c.ceilMode ? " ceil" : ""));
    HostBuffer x = randomTensor(DType::F32, c.input, rng);
    HostBuffer g = randomTensor(DType::F32, c.output(), rng);
    double lhs =
        inner(runOk("max_pool2d", c.attrs(), {x}, DType::F32, c.output()), g);
    double rhs = inner(
        x, runOk("max_pool2d_grad", c.attrs(), {x, g}, DType::F32, c.input));
    expectAdjoint(rhs, lhs, 1e-5, "max_pool2d_grad");
    for (bool includePad : {false, true}) {
      Attrs attrs = c.attrs();
      attrs.set("count_include_pad", includePad);
      lhs = inner(runOk("avg_pool2d", attrs, {x}, DType::F32, c.output()), g);
      rhs = inner(x, runOk("avg_pool2d_grad", attrs, {g}, DType::F32, c.input));
      expectAdjoint(rhs, lhs, 1e-5,
                    includePad ? "avg_pool2d_grad include_pad"
                               : "avg_pool2d_grad exclude_pad");
    }
  }
}

// Proves the pooling gradient kernels reject a grad whose batch or
// channels differ from the input's and malformed attributes.
TEST_P(ConvPoolGradTest, PoolGradMalformedShapesAreErrors) {
  PoolCase c{{1, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false};
  HostBuffer x = randomTensor(DType::F32, c.input, rng);
  HostBuffer g = randomTensor(DType::F32, {1, 3, 3, 3}, rng);
  EXPECT_NE(
      run("max_pool2d_grad", c.attrs(), {x, g}, DType::F32, c.input).error, "");
  EXPECT_NE(run("avg_pool2d_grad", c.attrs(), {g}, DType::F32, c.input).error,
            "");
  HostBuffer ok = randomTensor(DType::F32, {1, 2, 3, 3}, rng);
  EXPECT_NE(run("max_pool2d_grad", c.attrs(), {x, ok}, DType::F32, {1, 2, 6, 5})
                .error,
            "");
  Attrs bad = c.attrs();
  bad.set("kernel", std::vector<int64_t>{0, 2});
  EXPECT_NE(run("avg_pool2d_grad", bad, {ok}, DType::F32, c.input).error, "");
}

LOOM_KERNEL_TEST_PATHS(ConvPoolGradTest);

} // namespace
} // namespace loom::rt::test
