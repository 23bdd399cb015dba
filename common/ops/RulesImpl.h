//===- RulesImpl.h - The op rules' shared helpers ---------------*- C++ -*-===//
//
// Private to the op rules (common/ops/OpRules.h): included only by their
// .cpp files, which each hold one family of ops so that no file grows past
// the size limits:
//
//   OpRules.cpp      the helpers declared here, broadcastShapes, the rule
//                    table and its lookup (checkOp, inferResultTypes), and
//                    the collectives (checkCollective)
//   TensorRules.cpp  elementwise and unary ops, reductions and data
//                    movement (transpose, reshape, broadcast, gather,
//                    concat, slice), with their gradients
//   IndexRules.cpp   gather_elements, scatter_elements, cumsum and top_k
//   ResizeRules.cpp  resize and resize_grad
//   NNRules.cpp      linear algebra, normalization, convolution and
//                    pooling, the losses, their gradients, and the
//                    optimizer updates
//
// Every rule returns "" when the op fits it, else the message that the
// dialect's verifier and the runtime's plan validator report; tests compare
// those messages.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_RULESIMPL_H
#define LOOM_COMMON_OPS_RULESIMPL_H

#include "common/ops/OpRules.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::ops::rules {

/// The rules by op name.
using RuleTable = std::map<std::string, OpRule, std::less<>>;

/// An inferred op's rule with `minOps` to `maxOps` operands and `nRes`
/// results.
inline OpRule inferred(InferFn infer, size_t minOps, size_t maxOps,
                       size_t nRes = 1) {
  return OpRule{minOps, maxOps, nRes, infer, nullptr};
}

/// A checked op's rule.
inline OpRule checked(CheckFn check, size_t minOps, size_t maxOps,
                      size_t nRes = 1) {
  return OpRule{minOps, maxOps, nRes, nullptr, check};
}

/// Adds the rules of TensorRules.cpp's ops to `table`.
void addTensorRules(RuleTable &table);

/// Adds the rules of NNRules.cpp's ops to `table`.
void addNNRules(RuleTable &table);

/// Adds the rules of TrainRules.cpp's ops to `table`.
void addTrainRules(RuleTable &table);

/// Adds the rules of IndexRules.cpp's ops to `table`.
void addIndexRules(RuleTable &table);

/// Adds the rules of ResizeRules.cpp's ops to `table`.
void addResizeRules(RuleTable &table);

/// The conv2d result shape for input `in` and weight `w` (NNRules.cpp).
std::string convResultShape(const Attrs &a, const TypeRef &in, const TypeRef &w,
                            Shape &out);

/// The 2-D pooling result shape for input `in` (NNRules.cpp).
std::string poolResultShape(const Attrs &a, const Shape &in, Shape &out);

/// Infers a single result of `dtype` and `shape`; returns "".
inline std::string one(std::vector<TensorType> &out, DType dtype, Shape shape) {
  out.push_back({dtype, std::move(shape)});
  return "";
}

/// "" if `axis` is a dimension of a tensor of `rank`, else the message.
std::string checkAxis(int64_t axis, size_t rank);

/// "" if the result `r` is `dtype` with `shape`, else what it is and what
/// the op gives.
std::string expectResult(const TypeRef &r, DType dtype, const Shape &shape);

inline bool inRange(int64_t axis, size_t rank) {
  return axis >= 0 && axis < static_cast<int64_t>(rank);
}

inline bool isIndex(DType dtype) {
  return dtype == DType::I32 || dtype == DType::I64;
}

/// `dtype` and `shape` as the messages print a type, e.g. "f32[2, 3]".
std::string typeName(DType dtype, const Shape &shape);

/// "" if `t` is `dtype` with `shape`, else an error naming `what`.
std::string expectType(const char *what, const TypeRef &t, DType dtype,
                       const Shape &shape);

/// "" if `t` has a float element type, else an error naming `what`.
std::string expectFloat(const char *what, const TypeRef &t);

/// The gradient `grad` must have the type of the forward result `forward`
/// of element type `dtype`.
std::string expectGrad(const TypeRef &grad, DType dtype, const Shape &forward,
                       const char *of);

} // namespace loom::ops::rules

#endif // LOOM_COMMON_OPS_RULESIMPL_H
