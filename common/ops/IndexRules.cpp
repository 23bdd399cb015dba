//===- IndexRules.cpp - Rules of the element-indexing and scan ops --------===//
//
// The shape rules of the ops that address single elements through an index
// tensor (gather_elements, scatter_elements), scan along an axis (cumsum)
// or select along it (top_k).
//
//===----------------------------------------------------------------------===//

#include "common/ops/RulesImpl.h"

namespace loom::ops::rules {

namespace {

/// `indices` (operand #1) addresses elements of `data` along `axis`: an
/// integer tensor of the data's rank, at most its size outside `axis`.
std::string checkElementIndices(const Attrs &a, const TypeRef &data,
                                const TypeRef &indices) {
  const Shape &in = *data.shape, &idx = *indices.shape;
  int64_t axis = a.getInt("axis");
  if (auto e = checkAxis(axis, in.size()); !e.empty())
    return e;
  if (!isIndex(indices.dtype))
    return std::string("indices must be i32 or i64, not ") +
           dtypeName(indices.dtype);
  if (idx.size() != in.size())
    return "indices " + typeName(indices.dtype, idx) + " must have rank " +
           std::to_string(in.size()) + ", as the data " +
           typeName(data.dtype, in);
  for (size_t d = 0; d < in.size(); ++d)
    if (static_cast<int64_t>(d) != axis && idx[d] > in[d])
      return "indices " + typeName(indices.dtype, idx) + " exceed the data " +
             typeName(data.dtype, in) + " in dimension " + std::to_string(d) +
             ", which is not the axis";
  return "";
}

/// gather_elements(input, indices): the indices' shape, the input's type.
std::string gatherElements(const Attrs &a, const std::vector<TypeRef> &ops,
                           std::vector<TensorType> &out) {
  if (auto e = checkElementIndices(a, ops[0], ops[1]); !e.empty())
    return e;
  return one(out, ops[0].dtype, *ops[1].shape);
}

/// scatter_elements(data, indices, updates): the data's type.
std::string scatterElements(const Attrs &a, const std::vector<TypeRef> &ops,
                            std::vector<TensorType> &out) {
  if (auto e = checkElementIndices(a, ops[0], ops[1]); !e.empty())
    return e;
  if (ops[2].dtype != ops[0].dtype || *ops[2].shape != *ops[1].shape)
    return "updates are " + typeName(ops[2].dtype, *ops[2].shape) +
           " but must have the indices' shape and the data's element type: " +
           typeName(ops[0].dtype, *ops[1].shape);
  return one(out, ops[0].dtype, *ops[0].shape);
}

/// cumsum(input): the input's type.
std::string cumsum(const Attrs &a, const std::vector<TypeRef> &ops,
                   std::vector<TensorType> &out) {
  if (auto e = checkAxis(a.getInt("axis"), ops[0].shape->size()); !e.empty())
    return e;
  return one(out, ops[0].dtype, *ops[0].shape);
}

/// top_k(input) -> (values, i64 indices), `k` along `axis`.
std::string topK(const Attrs &a, const std::vector<TypeRef> &ops,
                 std::vector<TensorType> &out) {
  Shape shape = *ops[0].shape;
  int64_t axis = a.getInt("axis"), k = a.getInt("k");
  if (auto e = checkAxis(axis, shape.size()); !e.empty())
    return e;
  if (k < 0 || k > shape[axis])
    return "k = " + std::to_string(k) + " is outside [0, " +
           std::to_string(shape[axis]) + "], the size of dimension " +
           std::to_string(axis) + " of " + typeName(ops[0].dtype, shape);
  shape[axis] = k;
  one(out, ops[0].dtype, shape);
  return one(out, DType::I64, shape);
}

} // namespace

void addIndexRules(RuleTable &table) {
  table.insert({
      {"gather_elements", inferred(gatherElements, 2, 2)},
      {"scatter_elements", inferred(scatterElements, 3, 3)},
      {"cumsum", inferred(cumsum, 1, 1)},
      {"top_k", inferred(topK, 1, 1, 2)},
  });
}

} // namespace loom::ops::rules
