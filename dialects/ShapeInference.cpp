//===- ShapeInference.cpp - Result types shared by several loom ops -------===//

#include "dialects/ShapeInference.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace loom {

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return s;
}

std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1)
      return false;
  }
  return true;
}

LogicalResult inferElementwiseResult(std::optional<Location> loc,
                                     ArrayRef<Value> operands,
                                     SmallVectorImpl<Type> &results) {
  auto first = cast<RankedTensorType>(operands.front().getType());
  SmallVector<int64_t> shape(first.getShape());
  for (Value v : operands.drop_front()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "operands have different element types (",
                               first.getElementType(), " and ",
                               t.getElementType(), ")");
    auto b = broadcastShapes(shape, t.getShape());
    if (!b)
      return emitOptionalError(loc, "operand shapes ", formatShape(shape),
                               " and ", formatShape(t.getShape()),
                               " do not broadcast");
    shape = *b;
  }
  results.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult inferReduceResult(std::optional<Location> loc, Value input,
                                ArrayRef<int64_t> axes, bool keepDims,
                                SmallVectorImpl<Type> &results) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t rank = type.getRank();
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return emitOptionalError(loc, "reduction axis ", axes[i],
                               " is out of range for rank ", rank);
    if (i > 0 && axes[i] <= axes[i - 1])
      return emitOptionalError(loc,
                               "reduction axes must be strictly increasing");
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced)
      shape.push_back(type.getDimSize(d));
    else if (keepDims)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation,
                         bool ceilMode) {
  // Attributes come from user IR: any overflow means the window cannot fit.
  int64_t window, extent, reach, padded, span;
  if (stride < 1 || kernel < 1 || dilation < 1 ||
      __builtin_mul_overflow(dilation, kernel - 1, &window) ||
      __builtin_add_overflow(window, 1, &extent) ||
      __builtin_add_overflow(in, padBegin, &reach) ||
      __builtin_add_overflow(reach, padEnd, &padded) ||
      __builtin_sub_overflow(padded, extent, &span) || span < 0)
    return 0;
  int64_t steps = span / stride;
  if (ceilMode && span % stride != 0) {
    // The extra window counts only if it starts inside the input or the
    // leading padding.
    int64_t start;
    if (!__builtin_mul_overflow(steps + 1, stride, &start) && start < reach)
      ++steps;
  }
  return steps + 1;
}

static LogicalResult checkWindowAttrs(std::optional<Location> loc,
                                      StringRef name, ArrayRef<int64_t> values,
                                      size_t count, int64_t minimum) {
  if (values.size() != count)
    return emitOptionalError(loc, "'", name, "' must have ", count,
                             " entries, got ", values.size());
  for (int64_t v : values)
    if (v < minimum)
      return emitOptionalError(loc, "'", name, "' entries must be at least ",
                               minimum, ", got ", v);
  return success();
}

LogicalResult inferPool2DResult(std::optional<Location> loc, Value input,
                                ArrayRef<int64_t> kernel,
                                ArrayRef<int64_t> strides,
                                ArrayRef<int64_t> padding,
                                ArrayRef<int64_t> dilations, bool ceilMode,
                                SmallVectorImpl<Type> &results) {
  auto type = cast<RankedTensorType>(input.getType());
  if (type.getRank() != 4)
    return emitOptionalError(loc, "input must be NCHW (rank 4), got rank ",
                             type.getRank());
  if (failed(checkWindowAttrs(loc, "kernel", kernel, 2, 1)) ||
      failed(checkWindowAttrs(loc, "strides", strides, 2, 1)) ||
      failed(checkWindowAttrs(loc, "padding", padding, 4, 0)) ||
      failed(checkWindowAttrs(loc, "dilations", dilations, 2, 1)))
    return failure();
  SmallVector<int64_t> shape{type.getDimSize(0), type.getDimSize(1)};
  for (int i = 0; i < 2; ++i) {
    int64_t window;
    if (__builtin_mul_overflow(dilations[i], kernel[i] - 1, &window))
      return emitOptionalError(loc, "window does not fit spatial dimension ", i,
                               " of size ", type.getDimSize(2 + i));
    if (padding[i] > window || padding[i + 2] > window)
      return emitOptionalError(loc, "padding must be smaller than the window");
    int64_t out =
        windowOutputSize(type.getDimSize(2 + i), kernel[i], strides[i],
                         padding[i], padding[i + 2], dilations[i], ceilMode);
    if (out < 1)
      return emitOptionalError(loc, "window does not fit spatial dimension ", i,
                               " of size ", type.getDimSize(2 + i));
    shape.push_back(out);
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

} // namespace loom
