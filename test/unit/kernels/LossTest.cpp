//===- LossTest.cpp - softmax_cross_entropy and mse_loss ------------------===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>

namespace loom::rt::test {
namespace {

class LossTest : public KernelTest {};

double crossEntropyRef(const HostBuffer &logits,
                       const std::vector<double> &labels, int64_t ignore,
                       bool sum) {
  std::vector<double> x = values(logits);
  int64_t classes = logits.shape[1];
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

// Proves softmax_cross_entropy's mean over non-ignored rows and its sum,
// with i32/i64 labels, f32/f16/bf16 logits, large logits (stability) and a
// batch big enough for the parallel loop.
TEST_P(LossTest, SoftmaxCrossEntropy) {
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
          lv[1] = -100; // an ignored row
          labels = makeTensor(labelType, {rows}, lv);
          Attrs attrs;
          attrs.set("ignore_index", int64_t(-100));
          attrs.set("sum", sum);
          expectClose(runOk("softmax_cross_entropy", attrs, {logits, labels},
                            dtype, {}),
                      {crossEntropyRef(logits, lv, -100, sum)},
                      defaultTolerance(dtype));
        }
}

// Proves the mean over no counted rows (every label ignored) is 0, and that
// ignore_index may be a valid class.
TEST_P(LossTest, CrossEntropyIgnoredRows) {
  HostBuffer logits = randomTensor(DType::F32, {3, 4}, rng);
  HostBuffer labels = makeTensor(DType::I64, {3}, {2, 2, 2});
  Attrs attrs;
  attrs.set("ignore_index", int64_t(2));
  expectEqual(
      runOk("softmax_cross_entropy", attrs, {logits, labels}, DType::F32, {}),
      {0});
  HostBuffer mixed = makeTensor(DType::I64, {3}, {2, 0, 3});
  expectClose(
      runOk("softmax_cross_entropy", attrs, {logits, mixed}, DType::F32, {}),
      {crossEntropyRef(logits, {2, 0, 3}, 2, false)}, 1e-5);
}

// Proves a label outside [0, C) that is not ignored is an error naming it.
TEST_P(LossTest, CrossEntropyLabelOutOfRangeIsAnError) {
  HostBuffer logits = randomTensor(DType::F32, {3, 4}, rng);
  Attrs attrs;
  attrs.set("ignore_index", int64_t(-100));
  for (double bad : {4.0, -1.0}) {
    HostBuffer labels = makeTensor(DType::I32, {3}, {0, bad, 1});
    OpResult r =
        run("softmax_cross_entropy", attrs, {logits, labels}, DType::F32, {});
    EXPECT_NE(r.error.find("label " + std::to_string(int(bad))),
              std::string::npos)
        << r.error;
  }
}

// Proves mse_loss's mean and sum of squared differences, f32/f16/bf16, on a
// small and a large tensor.
TEST_P(LossTest, MseLoss) {
  for (DType dtype : kFloatTypes)
    for (Shape shape : {Shape{3, 4}, Shape{100, 700}})
      for (bool sum : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape) +
                     (sum ? " sum" : " mean"));
        HostBuffer p = randomTensor(dtype, shape, rng);
        HostBuffer t = randomTensor(dtype, shape, rng);
        std::vector<double> pv = values(p), tv = values(t);
        double total = 0;
        for (size_t i = 0; i < pv.size(); ++i)
          total += (pv[i] - tv[i]) * (pv[i] - tv[i]);
        Attrs attrs;
        attrs.set("sum", sum);
        expectClose(runOk("mse_loss", attrs, {p, t}, dtype, {}),
                    {sum ? total : total / pv.size()}, defaultTolerance(dtype));
      }
}

LOOM_KERNEL_TEST_PATHS(LossTest);

} // namespace
} // namespace loom::rt::test
