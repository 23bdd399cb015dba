//===- ReductionTest.cpp - reduce_sum, reduce_mean, reduce_max ------------===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

class ReductionTest : public KernelTest {
protected:
  /// Reference reduction in double (integer means truncate toward zero).
  static std::vector<double> reference(const std::string &op,
                                       const HostBuffer &in,
                                       const std::vector<int64_t> &axes,
                                       Shape &keptShape) {
    keptShape = in.shape;
    for (int64_t ax : axes)
      keptShape[ax] = 1;
    int64_t outCount = numElements(keptShape);
    std::vector<double> sum(outCount, 0), best(outCount, -INFINITY),
        count(outCount, 0);
    std::vector<double> iv = values(in);
    for (int64_t i = 0; i < numElements(in.shape); ++i) {
      std::vector<int64_t> idx = unravel(i, in.shape);
      for (int64_t ax : axes)
        idx[ax] = 0;
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        o = o * keptShape[d] + idx[d];
      sum[o] += iv[i];
      best[o] = std::max(best[o], iv[i]);
      count[o] += 1;
    }
    if (op == "reduce_max")
      return best;
    if (op == "reduce_mean")
      for (int64_t o = 0; o < outCount; ++o)
        sum[o] = isFloat(in.dtype) ? sum[o] / count[o]
                                   : std::trunc(sum[o] / count[o]);
    return sum;
  }

  void check(const std::string &op, DType dtype, const Shape &shape,
             const std::vector<int64_t> &axes, bool keepDims) {
    SCOPED_TRACE(op + " " + dtypeName(dtype) + " " + formatShape(shape) +
                 " axes " + formatShape(axes) + (keepDims ? " keep" : ""));
    HostBuffer in = randomTensor(dtype, shape, rng, -20, 20);
    Shape kept;
    std::vector<double> expected = reference(op, in, axes, kept);
    Shape os;
    for (size_t d = 0; d < shape.size(); ++d)
      if (keepDims ||
          std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end())
        os.push_back(kept[d]);
    Attrs attrs;
    attrs.set("axes", axes);
    attrs.set("keep_dims", keepDims);
    HostBuffer out = runOk(op, attrs, {in}, dtype, os);
    if (isFloat(dtype))
      expectClose(out, expected, defaultTolerance(dtype), 20);
    else
      expectEqual(out, expected);
  }
};

// Proves sum/mean/max over every axis subset of a rank-3 tensor, with and
// without keep_dims, for all numeric types (empty axes copy the input).
TEST_P(ReductionTest, AllAxisSubsets) {
  std::vector<std::vector<int64_t>> axisSets = {
      {}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"})
    for (DType dtype :
         {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
      for (const auto &axes : axisSets)
        for (bool keep : {false, true})
          check(op, dtype, {4, 5, 6}, axes, keep);
}

// Proves reductions on larger tensors (parallel loops, oneDNN blocking),
// size-1 reduced dimensions, and rank 1.
TEST_P(ReductionTest, LargeAndDegenerateShapes) {
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    check(op, DType::F32, {100, 300}, {1}, false);
    check(op, DType::F32, {100, 300}, {0}, true);
    check(op, DType::F32, {3, 1, 4}, {1}, false);
    check(op, DType::F32, {17}, {0}, false);
    check(op, DType::I32, {64, 2, 300}, {0, 2}, false);
    check(op, DType::F16, {2, 3, 4, 5, 6}, {1, 3}, true);
  }
}

// Proves integer sums wrap to the element type while integer means are
// exact (no intermediate overflow), truncated toward zero.
TEST_P(ReductionTest, IntegerSumWrapsAndMeanIsExact) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  HostBuffer in = rawTensor<int32_t>(DType::I32, {3}, {kMax, kMax, -7});
  Attrs attrs;
  attrs.set("axes", std::vector<int64_t>{0});
  uint32_t wrapped = uint32_t(kMax) + uint32_t(kMax) + uint32_t(-7);
  EXPECT_EQ(
      rawValues<int32_t>(runOk("reduce_sum", attrs, {in}, DType::I32, {})),
      std::vector<int32_t>{static_cast<int32_t>(wrapped)});
  int64_t exactMean = (int64_t(kMax) * 2 - 7) / 3;
  EXPECT_EQ(
      rawValues<int32_t>(runOk("reduce_mean", attrs, {in}, DType::I32, {})),
      std::vector<int32_t>{static_cast<int32_t>(exactMean)});
  HostBuffer neg = makeTensor(DType::I64, {2}, {-3, -4});
  expectEqual(runOk("reduce_mean", attrs, {neg}, DType::I64, {}), {-3});
}

// Proves reductions over an empty set: sum is 0, float mean NaN, while max
// and integer mean report errors.
TEST_P(ReductionTest, EmptyReducedSet) {
  HostBuffer in = makeTensor(DType::F32, {0, 3}, {});
  Attrs attrs;
  attrs.set("axes", std::vector<int64_t>{0});
  expectEqual(runOk("reduce_sum", attrs, {in}, DType::F32, {3}), {0, 0, 0});
  std::vector<double> mean =
      values(runOk("reduce_mean", attrs, {in}, DType::F32, {3}));
  EXPECT_TRUE(std::isnan(mean[0]));
  EXPECT_NE(run("reduce_max", attrs, {in}, DType::F32, {3}).error, "");
  HostBuffer ints = makeTensor(DType::I32, {0, 3}, {});
  EXPECT_NE(run("reduce_mean", attrs, {ints}, DType::I32, {3}).error, "");
}

// Proves reduce_max propagates NaN as numpy does, on both paths (oneDNN's
// reduction drops NaN, so the kernel routes such inputs around it).
TEST_P(ReductionTest, MaxPropagatesNan) {
  for (int64_t n : {3, 64, 1000}) {
    std::vector<double> vals(2 * n, 1.0);
    vals[1] = vals[2 * n - 1] = std::numeric_limits<double>::quiet_NaN();
    HostBuffer in = makeTensor(DType::F32, {2, n}, vals);
    Attrs attrs;
    attrs.set("axes", std::vector<int64_t>{1});
    std::vector<double> got =
        values(runOk("reduce_max", attrs, {in}, DType::F32, {2}));
    EXPECT_TRUE(std::isnan(got[0])) << n;
    EXPECT_TRUE(std::isnan(got[1])) << n;
  }
}

LOOM_KERNEL_TEST_PATHS(ReductionTest);

} // namespace
} // namespace loom::rt::test
