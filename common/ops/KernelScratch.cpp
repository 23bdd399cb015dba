//===- KernelScratch.cpp - The memory a kernel uses beyond its tensors ----===//

#include "common/ops/KernelScratch.h"

#include <algorithm>

namespace loom::ops {

namespace {

int64_t product(const Shape &shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i)
    n *= shape[i];
  return n;
}

} // namespace

int64_t crossEntropyBlockRows(int64_t rows, int64_t classes) {
  return std::clamp<int64_t>(kCrossEntropyBlockElements /
                                 std::max<int64_t>(classes, 1),
                             1, std::max<int64_t>(rows, 1));
}

std::vector<int64_t> kernelScratchParts(std::string_view op,
                                        const Attrs &attrs,
                                        const std::vector<TypeRef> &operands,
                                        const std::vector<TypeRef> &results) {
  constexpr int64_t f32 = 4, f64 = 8, i64 = 8;
  if (op == "softmax_cross_entropy" && operands.size() == 2) {
    const Shape &logits = *operands[0].shape;
    if (logits.size() != 2)
      return {};
    return {crossEntropyBlockRows(logits[0], logits[1]) * logits[1] * f32};
  }
  if (op == "gather_grad" && operands.size() == 2 && results.size() == 1) {
    const Shape &out = *results[0].shape;
    int64_t axis = attrs.getInt("axis");
    if (axis < 0 || axis >= static_cast<int64_t>(out.size()))
      return {};
    int64_t count = numElements(*operands[0].shape);
    int64_t buckets = std::min(out[axis], kGatherGradBuckets);
    return {count * i64, (buckets + 1) * i64, count * i64, buckets * i64};
  }
  if (op == "layer_norm_grad" && !operands.empty()) {
    const Shape &x = *operands[0].shape;
    int64_t axis = attrs.getInt("axis");
    if (axis < 0 || axis >= static_cast<int64_t>(x.size()))
      return {};
    int64_t rows = product(x, 0, axis), cols = product(x, axis, x.size());
    return {rows * f64, rows * f64, rows * f64,
            rows * f32, rows * f32, cols * f32};
  }
  if (op == "pad_grad" && !operands.empty()) {
    int64_t n = numElements(*operands[0].shape);
    return {n * f32, n * f32};
  }
  return {};
}

int64_t kernelScratchBytes(std::string_view op, const Attrs &attrs,
                           const std::vector<TypeRef> &operands,
                           const std::vector<TypeRef> &results) {
  int64_t total = 0;
  for (int64_t part : kernelScratchParts(op, attrs, operands, results))
    total += (part + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  return total;
}

} // namespace loom::ops
