//===- Loss.cpp - softmax_cross_entropy and mse_loss ----------------------===//
//
// Both reduce to a scalar, accumulating in double (the cross-entropy of
// whole rows from oneDNN's log_softmax, else each row's log-sum-exp in
// double); label_count counts the
// labels a mean cross-entropy divides by. The mean over nothing
// (every row ignored, or an empty tensor) is defined as 0 rather than NaN,
// so that a batch made only of padding does not poison training.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include "common/ops/KernelScratch.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::rt::cpu {
namespace {

/// Where the logits are one class block of a vocabulary-parallel loss:
/// the block's first class and the global class count, and each row's
/// log-sum-exp over all classes.
struct ClassBlock {
  int64_t offset = 0;
  int64_t classes = 0;
  const float *lse = nullptr;
};

/// The summed loss of whole rows from oneDNN's log_softmax, a block of
/// rows at a time into a scratch buffer: the exps vectorised. False where
/// oneDNN does not run it.
template <typename Label>
bool crossEntropyOneDnn(CpuContext &ctx, const float *logits,
                        const Label *labels, int64_t rows, int64_t classes,
                        int64_t ignoreIndex, float *scratch, double &total,
                        int64_t &counted) {
  int64_t blockRows = ops::crossEntropyBlockRows(rows, classes);
  total = 0;
  counted = 0;
  for (int64_t first = 0; first < rows; first += blockRows) {
    int64_t n = std::min(blockRows, rows - first);
    if (!softmaxOneDnn(ctx, logits + first * classes, scratch, n,
                       classes, 1, /*logOf=*/true))
      return false;
    for (int64_t r = 0; r < n; ++r)
      if (labels[first + r] != ignoreIndex) {
        total -= scratch[r * classes + labels[first + r]];
        ++counted;
      }
  }
  return true;
}

template <typename Label>
std::string crossEntropy(CpuContext &ctx, ScratchPool &pool,
                         const float *logits, const Label *labels,
                         int64_t rows, int64_t classes,
                         int64_t ignoreIndex, bool sum, const ClassBlock *block,
                         float *result) {
  int64_t allClasses = block ? block->classes : classes;
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] != ignoreIndex && (labels[r] < 0 || labels[r] >= allClasses))
      return "softmax_cross_entropy label " + std::to_string(labels[r]) +
             " of row " + std::to_string(r) + " is out of range for " +
             std::to_string(allClasses) + " classes (ignore_index " +
             std::to_string(ignoreIndex) + ")";
  double total = 0;
  int64_t counted = 0;
  if (!block &&
      crossEntropyOneDnn(
          ctx, logits, labels, rows, classes, ignoreIndex,
          pool.take<float>(ops::crossEntropyBlockRows(rows, classes) * classes),
          total, counted)) {
    *result = static_cast<float>(sum ? total : counted ? total / counted : 0.0);
    return {};
  }

#pragma omp parallel for schedule(static) reduction(+ : total, counted) \
    if (rows * classes > kGrain)
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    const float *x = logits + r * classes;
    ++counted;
    if (block) {
      // This block's share: the log-sum-exp once (in the block of class
      // 0), minus the label's logit where the block holds it.
      int64_t local = static_cast<int64_t>(labels[r]) - block->offset;
      if (block->offset == 0)
        total += block->lse[r];
      if (local >= 0 && local < classes)
        total -= x[local];
      continue;
    }
    double maxValue = -INFINITY;
    for (int64_t c = 0; c < classes; ++c)
      maxValue = std::max<double>(maxValue, x[c]);
    double sumExp = 0;
    for (int64_t c = 0; c < classes; ++c)
      sumExp += std::exp(x[c] - maxValue);
    total += maxValue + std::log(sumExp) - x[labels[r]];
  }
  *result = static_cast<float>(sum ? total : counted ? total / counted : 0.0);
  return {};
}

std::string crossEntropyKernel(CpuContext &ctx, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &logits = a.inputs[0], &labels = a.inputs[1];
    if (logits.rank() != 2 || labels.rank() != 1 ||
        labels.shape[0] != logits.shape[0])
      return "softmax_cross_entropy needs logits [N, C] and labels [N], got " +
             formatShape(logits.shape) + " and " + formatShape(labels.shape);
    if (a.outputs[0].numElements() != 1)
      return "softmax_cross_entropy result must be a scalar";
    int64_t rows = logits.shape[0], classes = logits.shape[1];
    int64_t ignore = a.attrs.getInt("ignore_index", -100);
    bool sum = a.attrs.getBool("sum");
    float *result = a.outputs[0].as<float>();
    ClassBlock block;
    if (a.inputs.size() > 2) {
      if (a.inputs[2].shape != Shape{rows})
        return "softmax_cross_entropy lse must be [" + std::to_string(rows) +
               "], got " + formatShape(a.inputs[2].shape);
      block.lse = a.inputs[2].as<float>();
      block.classes = classes;
      if (a.block && a.block->globalShape.size() == 2) {
        block.offset = a.block->offsets[1];
        block.classes = a.block->globalShape[1];
      }
    }
    const ClassBlock *b = block.lse ? &block : nullptr;
    ScratchPool pool(a);
    if (labels.dtype == DType::I32)
      return crossEntropy(ctx, pool, logits.as<float>(), labels.as<int32_t>(),
                          rows,
                          classes, ignore, sum, b, result);
    if (labels.dtype == DType::I64)
      return crossEntropy(ctx, pool, logits.as<float>(), labels.as<int64_t>(),
                          rows,
                          classes, ignore, sum, b, result);
    return "softmax_cross_entropy labels must be i32 or i64, got " +
           std::string(dtypeName(labels.dtype));
  });
}

std::string mseKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &prediction = a.inputs[0], &target = a.inputs[1];
    if (prediction.shape != target.shape)
      return "mse_loss prediction " + formatShape(prediction.shape) +
             " and target " + formatShape(target.shape) + " differ";
    if (a.outputs[0].numElements() != 1)
      return "mse_loss result must be a scalar";
    const float *p = prediction.as<float>(), *t = target.as<float>();
    int64_t n = prediction.numElements();
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) {
      double d = static_cast<double>(p[i]) - t[i];
      total += d * d;
    }
    bool sum = a.attrs.getBool("sum");
    *a.outputs[0].as<float>() = static_cast<float>(sum ? total
                                                   : n ? total / n
                                                       : 0.0);
    return {};
  });
}

template <typename Label>
int64_t countLabels(const Label *labels, int64_t n, int64_t ignoreIndex) {
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i)
    counted += labels[i] != ignoreIndex;
  return counted;
}

/// The number of labels that are not `ignore_index`, as a float scalar.
std::string labelCountKernel(CpuContext &, const KernelArgs &a) {
  const TensorView &labels = a.inputs[0];
  const TensorView &out = a.outputs[0];
  if (labels.rank() != 1 || out.numElements() != 1)
    return "label_count needs labels [N] and a scalar result, got " +
           formatShape(labels.shape) + " -> " + formatShape(out.shape);
  int64_t ignore = a.attrs.getInt("ignore_index", -100);
  int64_t counted = 0;
  if (labels.dtype == DType::I32)
    counted = countLabels(labels.as<int32_t>(), labels.shape[0], ignore);
  else if (labels.dtype == DType::I64)
    counted = countLabels(labels.as<int64_t>(), labels.shape[0], ignore);
  else
    return "label_count labels must be i32 or i64, got " +
           std::string(dtypeName(labels.dtype));
  float value = static_cast<float>(counted);
  switch (out.dtype) {
  case DType::F32:
    *out.as<float>() = value;
    return {};
  case DType::F16:
    *out.as<uint16_t>() = floatToHalf(value);
    return {};
  case DType::BF16:
    *out.as<uint16_t>() = floatToBf16(value);
    return {};
  default:
    return "label_count result must be a float scalar";
  }
}

} // namespace

void registerLossKernels(KernelTable &table) {
  table["softmax_cross_entropy"] = {crossEntropyKernel, 2, 3};
  table["mse_loss"] = {mseKernel, 2, 2};
  table["label_count"] = {labelCountKernel, 1, 1};
}

} // namespace loom::rt::cpu
