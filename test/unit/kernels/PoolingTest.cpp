//===- PoolingTest.cpp - max_pool2d and avg_pool2d ------------------------===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

class PoolingTest : public KernelTest {};

struct PoolCase {
  Shape input;
  std::vector<int64_t> kernel, strides, padding, dilations;
  bool ceilMode;
};

/// Output size as the dialect defines it (a ceil-mode window must start
/// inside the input or its leading padding).
int64_t outputSize(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
                   int64_t d, bool ceilMode) {
  int64_t span = in + pb + pe - d * (k - 1) - 1;
  int64_t steps = span / s;
  if (ceilMode && span % s != 0 && (steps + 1) * s < in + pb)
    ++steps;
  return steps + 1;
}

Shape outputShape(const PoolCase &c) {
  Shape os{c.input[0], c.input[1]};
  for (int i = 0; i < 2; ++i)
    os.push_back(outputSize(c.input[2 + i], c.kernel[i], c.strides[i],
                            c.padding[i], c.padding[i + 2], c.dilations[i],
                            c.ceilMode));
  return os;
}

/// PyTorch's reference semantics: max over input positions; average over
/// input positions, divided by the input positions or (count_include_pad)
/// by the window clipped to the padded input.
std::vector<double> poolRef(const PoolCase &c, const HostBuffer &x,
                            const Shape &os, const std::string &mode) {
  std::vector<double> xv = values(x), out;
  int64_t H = c.input[2], W = c.input[3];
  for (int64_t i = 0; i < numElements(os); ++i) {
    std::vector<int64_t> idx = unravel(i, os);
    int64_t plane = idx[0] * c.input[1] + idx[1];
    int64_t hs = idx[2] * c.strides[0] - c.padding[0],
            ws = idx[3] * c.strides[1] - c.padding[1];
    double best = -INFINITY, sum = 0;
    int64_t count = 0;
    for (int64_t kh = 0; kh < c.kernel[0]; ++kh)
      for (int64_t kw = 0; kw < c.kernel[1]; ++kw) {
        int64_t ih = hs + kh * c.dilations[0], iw = ws + kw * c.dilations[1];
        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
          continue;
        double v = xv[(plane * H + ih) * W + iw];
        best = std::max(best, v);
        sum += v;
        ++count;
      }
    if (mode == "max") {
      out.push_back(best);
    } else if (mode == "exclude") {
      out.push_back(sum / count);
    } else { // PyTorch avg_pool2d with count_include_pad (dilation 1)
      int64_t he = std::min(hs + c.kernel[0], H + c.padding[2]),
              we = std::min(ws + c.kernel[1], W + c.padding[3]);
      out.push_back(sum / double((he - hs) * (we - ws)));
    }
  }
  return out;
}

Attrs poolAttrs(const PoolCase &c) {
  Attrs attrs;
  attrs.set("kernel", c.kernel);
  attrs.set("strides", c.strides);
  attrs.set("padding", c.padding);
  attrs.set("dilations", c.dilations);
  attrs.set("ceil_mode", c.ceilMode);
  return attrs;
}

const std::vector<PoolCase> kCommonCases = {
    {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
    {{1, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false},
    {{1, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
    {{2, 2, 7, 10}, {3, 2}, {2, 3}, {1, 0, 0, 1}, {1, 1}, true},
    {{1, 3, 6, 6}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
    {{1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
    {{2, 4, 32, 32}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},
    {{1, 2, 6, 7}, {4, 3}, {3, 2}, {2, 1, 1, 2}, {1, 1}, true}};

// Proves max_pool2d: padded and unpadded, ceil mode (windows past the input
// are dropped or clipped), asymmetric padding, dilation; padding never wins
// even where every input is negative.
TEST_P(PoolingTest, MaxPool) {
  std::vector<PoolCase> cases = kCommonCases;
  cases.push_back({{1, 2, 9, 9}, {3, 3}, {2, 2}, {2, 2, 2, 2}, {2, 2}, true});
  cases.push_back({{1, 2, 11, 8}, {2, 3}, {3, 1}, {1, 0, 1, 2}, {3, 2}, false});
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : cases) {
      Shape os = outputShape(c);
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(c.input) +
                   " -> " + formatShape(os) + (c.ceilMode ? " ceil" : ""));
      HostBuffer x = randomTensor(dtype, c.input, rng, -5, -1); // all < 0
      expectClose(runOk("max_pool2d", poolAttrs(c), {x}, dtype, os),
                  poolRef(c, x, os, "max"), defaultTolerance(dtype));
    }
}

// Proves avg_pool2d with and without count_include_pad, in floor and ceil
// mode; in ceil mode with count_include_pad, positions past the end padding
// do not count (the case oneDNN cannot express).
TEST_P(PoolingTest, AvgPool) {
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : kCommonCases)
      for (bool includePad : {false, true}) {
        Shape os = outputShape(c);
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                     formatShape(c.input) + " -> " + formatShape(os) +
                     (c.ceilMode ? " ceil" : "") +
                     (includePad ? " include_pad" : ""));
        HostBuffer x = randomTensor(dtype, c.input, rng, -2, 2);
        Attrs attrs = poolAttrs(c);
        attrs.set("count_include_pad", includePad);
        expectClose(runOk("avg_pool2d", attrs, {x}, dtype, os),
                    poolRef(c, x, os, includePad ? "include" : "exclude"),
                    defaultTolerance(dtype));
      }
}

// Proves the ceil-mode divisor rule on a hand-computed case: 1x1x3x3 input
// of ones except 9 at the corner, kernel 2, stride 2, pad 0, ceil mode: the
// last window holds one input element, divided by 1 either way.
TEST_P(PoolingTest, AvgPoolCeilModeDivisor) {
  PoolCase c{{1, 1, 3, 3}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true};
  HostBuffer x = makeTensor(DType::F32, c.input, {1, 1, 1, 1, 1, 1, 1, 1, 9});
  for (bool includePad : {false, true}) {
    Attrs attrs = poolAttrs(c);
    attrs.set("count_include_pad", includePad);
    expectClose(runOk("avg_pool2d", attrs, {x}, DType::F32, {1, 1, 2, 2}),
                {1, 1, 1, 9}, 1e-6);
  }
}

// Proves max_pool2d propagates NaN from its window only, on both paths.
TEST_P(PoolingTest, MaxPoolPropagatesNan) {
  PoolCase c{{1, 1, 4, 64}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false};
  std::vector<double> vals(4 * 64, 1.0);
  vals[5] = std::numeric_limits<double>::quiet_NaN(); // window (0, 2)
  HostBuffer x = makeTensor(DType::F32, c.input, vals);
  std::vector<double> got =
      values(runOk("max_pool2d", poolAttrs(c), {x}, DType::F32, {1, 1, 2, 32}));
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[1], 1.0);
  EXPECT_EQ(got[3], 1.0);
}

LOOM_KERNEL_TEST_PATHS(PoolingTest);

} // namespace
} // namespace loom::rt::test
