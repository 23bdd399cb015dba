//===- NormalizationTest.cpp - softmax, log_softmax, layer/batch norm -----===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

class NormalizationTest : public KernelTest {};

std::vector<double> softmaxRef(const HostBuffer &in, int64_t axis, bool logOf) {
  std::vector<double> x = values(in), y(x.size());
  const Shape &s = in.shape;
  int64_t outer = 1, n = s[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d)
    inner *= s[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * n + k) * inner + i; };
      double m = -INFINITY, sum = 0;
      for (int64_t k = 0; k < n; ++k)
        m = std::max(m, x[at(k)]);
      for (int64_t k = 0; k < n; ++k)
        sum += std::exp(x[at(k)] - m);
      for (int64_t k = 0; k < n; ++k)
        y[at(k)] =
            logOf ? x[at(k)] - m - std::log(sum) : std::exp(x[at(k)] - m) / sum;
    }
  return y;
}

// Proves softmax and log_softmax along every axis match the reference for
// f32/f16/bf16, including rank 1, large rows and large logits (stability).
TEST_P(NormalizationTest, SoftmaxAndLogSoftmax) {
  struct Case {
    Shape shape;
    double range;
  };
  std::vector<Case> cases = {{{2, 3, 4}, 3},
                             {{1000}, 3},
                             {{64, 512}, 5},
                             {{3, 5}, 80},
                             {{2, 1, 3}, 2}};
  for (const char *op : {"softmax", "log_softmax"})
    for (DType dtype : kFloatTypes)
      for (const Case &c : cases)
        for (int64_t axis = 0; axis < int64_t(c.shape.size()); ++axis) {
          SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype) + " " +
                       formatShape(c.shape) + " axis " + std::to_string(axis));
          HostBuffer in = randomTensor(dtype, c.shape, rng, -c.range, c.range);
          Attrs attrs;
          attrs.set("axis", axis);
          bool logOf = std::string(op) == "log_softmax";
          // Softmax outputs are small: compare relative to 1e-2.
          expectClose(runOk(op, attrs, {in}, dtype, c.shape),
                      softmaxRef(in, axis, logOf), defaultTolerance(dtype),
                      logOf ? 1.0 : 1e-2);
        }
}

// Proves layer_norm normalises over [axis, rank) with scale and optional
// bias, for every axis, f32/f16/bf16, and a large epsilon that matters.
TEST_P(NormalizationTest, LayerNorm) {
  std::vector<Shape> shapes = {{2, 3, 8}, {4, 256}, {300, 64}};
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : shapes)
      for (int64_t axis = 0; axis < int64_t(shape.size()); ++axis)
        for (bool withBias : {false, true})
          for (double epsilon : {1e-5, 0.5}) {
            SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                         formatShape(shape) + " axis " + std::to_string(axis) +
                         (withBias ? " bias" : "") + " eps " +
                         std::to_string(epsilon));
            Shape param(shape.begin() + axis, shape.end());
            HostBuffer x = randomTensor(dtype, shape, rng, -2, 3);
            HostBuffer scale = randomTensor(dtype, param, rng, 0.5, 1.5);
            HostBuffer bias = randomTensor(dtype, param, rng, -1, 1);
            std::vector<double> xv = values(x), sv = values(scale),
                                bv = values(bias), expected(xv.size());
            int64_t cols = numElements(param), rows = xv.size() / cols;
            for (int64_t r = 0; r < rows; ++r) {
              double mean = 0, var = 0;
              for (int64_t c = 0; c < cols; ++c)
                mean += xv[r * cols + c] / cols;
              for (int64_t c = 0; c < cols; ++c)
                var += std::pow(xv[r * cols + c] - mean, 2) / cols;
              for (int64_t c = 0; c < cols; ++c)
                expected[r * cols + c] = (xv[r * cols + c] - mean) /
                                             std::sqrt(var + float(epsilon)) *
                                             sv[c] +
                                         (withBias ? bv[c] : 0);
            }
            Attrs attrs;
            attrs.set("axis", axis);
            attrs.set("epsilon", epsilon);
            std::vector<HostBuffer> inputs = {x, scale};
            if (withBias)
              inputs.push_back(bias);
            expectClose(runOk("layer_norm", attrs, inputs, dtype, shape),
                        expected, defaultTolerance(dtype));
          }
}

// Proves batch_norm (given statistics) normalises along channel dimension 1
// for ranks 2 to 5.
TEST_P(NormalizationTest, BatchNorm) {
  std::vector<Shape> shapes = {
      {4, 3}, {2, 5, 7}, {2, 3, 5, 5}, {2, 4, 3, 2, 3}, {8, 16, 32, 32}};
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : shapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(shape));
      int64_t channels = shape[1];
      HostBuffer x = randomTensor(dtype, shape, rng, -3, 3);
      HostBuffer scale = randomTensor(dtype, {channels}, rng, 0.5, 2);
      HostBuffer bias = randomTensor(dtype, {channels}, rng, -1, 1);
      HostBuffer mean = randomTensor(dtype, {channels}, rng, -1, 1);
      HostBuffer var = randomTensor(dtype, {channels}, rng, 0.1, 2);
      double epsilon = 1e-3;
      std::vector<double> xv = values(x), sv = values(scale), bv = values(bias),
                          mv = values(mean), vv = values(var),
                          expected(xv.size());
      int64_t spatial = 1;
      for (size_t d = 2; d < shape.size(); ++d)
        spatial *= shape[d];
      for (size_t i = 0; i < xv.size(); ++i) {
        int64_t c = (i / spatial) % channels;
        expected[i] =
            (xv[i] - mv[c]) / std::sqrt(vv[c] + float(epsilon)) * sv[c] + bv[c];
      }
      Attrs attrs;
      attrs.set("epsilon", epsilon);
      expectClose(
          runOk("batch_norm", attrs, {x, scale, bias, mean, var}, dtype, shape),
          expected, defaultTolerance(dtype));
    }
}

// Proves a NaN in a softmax row makes that row NaN (and leaves other rows
// alone) on both paths; oneDNN alone would turn the row into zeros.
TEST_P(NormalizationTest, SoftmaxPropagatesNan) {
  for (const char *op : {"softmax", "log_softmax"}) {
    std::vector<double> vals(2 * 64, 0.5);
    vals[3] = std::numeric_limits<double>::quiet_NaN();
    HostBuffer in = makeTensor(DType::F32, {2, 64}, vals);
    Attrs attrs;
    attrs.set("axis", int64_t(1));
    std::vector<double> got =
        values(runOk(op, attrs, {in}, DType::F32, {2, 64}));
    EXPECT_TRUE(std::isnan(got[0])) << op;
    EXPECT_FALSE(std::isnan(got[64])) << op;
  }
}

LOOM_KERNEL_TEST_PATHS(NormalizationTest);

} // namespace
} // namespace loom::rt::test
