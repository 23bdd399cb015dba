//===- ConvertIndex.cpp - ONNX element indexing, scans and top-k ----------===//
//
// GatherElements, ScatterElements and ScatterND (as a scatter_elements over
// the data flattened to [positions, slice], its flat indices computed here
// from the constant indices), CumSum and TopK.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace loom::onnx_import {
namespace {

/// ScatterElements' and ScatterND's `reduction` (from version 16): whether
/// updates add; mul, max and min are refused.
FailureOr<bool> scatterAccumulates(NodeContext &nc) {
  auto reduction = nc.attrString("reduction", "none");
  if (failed(reduction))
    return failure();
  if (*reduction == "none")
    return false;
  if (*reduction == "add")
    return true;
  return nc.unsupported("attribute 'reduction' is '" + Twine(*reduction) +
                        "'; Loom supports 'none' and 'add'");
}

LogicalResult convertGatherElements(NodeContext &nc) {
  auto axis = nc.attrInt("axis", 0);
  if (failed(axis))
    return failure();
  auto a = nc.normalizeAxis(*axis, nc.rank(0));
  if (failed(a))
    return failure();
  return nc.setResult(nc.create<GatherElementsOp>(
      nc.value(0), nc.value(1), nc.builder.getI64IntegerAttr(*a)));
}

LogicalResult convertScatterElements(NodeContext &nc) {
  auto axis = nc.attrInt("axis", 0);
  auto accumulate = scatterAccumulates(nc);
  if (failed(axis) || failed(accumulate))
    return failure();
  auto a = nc.normalizeAxis(*axis, nc.rank(0));
  if (failed(a))
    return failure();
  return nc.setResult(nc.create<ScatterElementsOp>(
      nc.value(0), nc.value(1), nc.value(2), nc.builder.getI64IntegerAttr(*a),
      *accumulate ? nc.builder.getUnitAttr() : UnitAttr()));
}

/// ScatterND: indices [..., k] address slices data[i0, ..., ik-1] of shape
/// data.shape[k:]. The data is viewed as [positions, slice] and each slice
/// of the updates scattered to its flat position along axis 0.
LogicalResult convertScatterND(NodeContext &nc) {
  auto accumulate = scatterAccumulates(nc);
  if (failed(accumulate))
    return failure();
  ArrayRef<int64_t> data = nc.shape(0), idxShape = nc.shape(1),
                    updShape = nc.shape(2);
  if (idxShape.empty())
    return nc.invalid("indices must have rank at least 1");
  int64_t k = idxShape.back(), r = data.size();
  if (k < 1 || k > r)
    return nc.invalid("the last dimension of the indices, " + Twine(k) +
                      ", must be in [1, " + Twine(r) + "], the data's rank");
  SmallVector<int64_t> expected(idxShape.drop_back());
  expected.append(data.begin() + k, data.end());
  if (ArrayRef<int64_t>(expected) != updShape)
    return nc.invalid("updates must have shape indices.shape[:-1] + "
                      "data.shape[k:]");
  auto indices = nc.constantInts(1, "the indices");
  if (failed(indices))
    return failure();
  int64_t positions = 1, slice = 1;
  for (int64_t d = 0; d < r; ++d)
    (d < k ? positions : slice) *= data[d];
  int64_t count = static_cast<int64_t>(indices->size()) / k;
  std::vector<int64_t> flat;
  flat.reserve(count * slice);
  for (int64_t n = 0; n < count; ++n) {
    int64_t p = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = (*indices)[n * k + j], dim = data[j];
      if (i < -dim || i >= dim)
        return nc.invalid("index " + Twine(i) + " is out of range for " +
                          "dimension " + Twine(j) + " of size " + Twine(dim));
      p = p * dim + (i < 0 ? i + dim : i);
    }
    flat.insert(flat.end(), slice, p);
  }
  Value flatIndices = nc.constantValue(
      HostTensor::ofInts(DType::I64, {count, slice}, std::move(flat)));
  auto data2 = nc.reshape(nc.value(0), {positions, slice});
  auto upd2 = nc.reshape(nc.value(2), {count, slice});
  if (failed(data2) || failed(upd2))
    return failure();
  auto scattered = nc.create<ScatterElementsOp>(
      *data2, flatIndices, *upd2, nc.builder.getI64IntegerAttr(0),
      *accumulate ? nc.builder.getUnitAttr() : UnitAttr());
  if (failed(scattered))
    return failure();
  return nc.setResult(nc.reshape(*scattered, data));
}

LogicalResult convertCumSum(NodeContext &nc) {
  auto exclusive = nc.attrInt("exclusive", 0);
  auto reverse = nc.attrInt("reverse", 0);
  auto axis = nc.constantInts(1, "the axis");
  if (failed(exclusive) || failed(reverse) || failed(axis))
    return failure();
  if (axis->size() != 1)
    return nc.invalid("the axis must hold one value, not " +
                      Twine(axis->size()));
  auto a = nc.normalizeAxis(axis->front(), nc.rank(0));
  if (failed(a))
    return failure();
  UnitAttr unit = nc.builder.getUnitAttr();
  return nc.setResult(nc.create<CumSumOp>(
      nc.value(0), nc.builder.getI64IntegerAttr(*a),
      *exclusive ? unit : UnitAttr(), *reverse ? unit : UnitAttr()));
}

/// TopK-10: k an input; 11 adds `largest` and `sorted` (the results are
/// always sorted, which `sorted` = 0 allows).
LogicalResult convertTopK(NodeContext &nc) {
  auto axis = nc.attrInt("axis", -1);
  auto largest = nc.attrInt("largest", 1);
  auto k = nc.constantInts(1, "k");
  if (failed(axis) || failed(largest) || failed(k))
    return failure();
  if (k->size() != 1)
    return nc.invalid("k must hold one value, not " + Twine(k->size()));
  auto a = nc.normalizeAxis(*axis, nc.rank(0));
  if (failed(a))
    return failure();
  auto results = nc.createPair<TopKOp>(
      nc.value(0), nc.builder.getI64IntegerAttr(k->front()),
      nc.builder.getI64IntegerAttr(*a),
      *largest ? UnitAttr() : nc.builder.getUnitAttr());
  if (failed(results))
    return failure();
  nc.setOutput(0, results->first);
  nc.setOutput(1, results->second);
  return success();
}

} // namespace

void addIndexConverters(llvm::StringMap<Converter> &t) {
  t["GatherElements"] = {11, convertGatherElements};
  t["ScatterElements"] = {11, convertScatterElements}; // 16: `reduction`
  t["Scatter"] = {9, convertScatterElements}; // ScatterElements' old name
  t["ScatterND"] = {11, convertScatterND};    // 16: `reduction`
  t["CumSum"] = {11, convertCumSum};
  t["TopK"] = {10, convertTopK}; // 1: k an attribute
}

} // namespace loom::onnx_import
