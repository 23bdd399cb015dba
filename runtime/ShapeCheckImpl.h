//===- ShapeCheckImpl.h - The shape rules' shared helpers -------*- C++ -*-===//
//
// Private to the plan validator's shape rules (runtime/ShapeCheck.h):
// included only by their .cpp files, which each hold one family of ops so
// that no file grows past the size limits:
//
//   ShapeCheck.cpp        the helpers declared here, broadcastShapes, the
//                         rule table and its lookup (checkInstruction), and
//                         the collectives (checkCollective)
//   ShapeCheckTensor.cpp  elementwise and unary ops, reductions and data
//                         movement (transpose, reshape, broadcast, gather,
//                         concat, slice), with their gradients
//   ShapeCheckNN.cpp      linear algebra, normalization, convolution and
//                         pooling, the losses, their gradients, and the
//                         optimizer updates
//
// Every rule returns "" when the instruction fits it, else the message the
// validator reports; tests compare those messages byte for byte.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SHAPECHECKIMPL_H
#define LOOM_RUNTIME_SHAPECHECKIMPL_H

#include "runtime/ShapeCheck.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace loom::rt::shapecheck {

/// One op's rule: its attributes, operand and result types to "" or what is
/// wrong.
using Check = std::function<std::string(
    const Attrs &, const std::vector<TypeRef> &, const std::vector<TypeRef> &)>;

/// The rules by op name.
using RuleTable = std::map<std::string, Check>;

/// Adds the rules of ShapeCheckTensor.cpp's ops to `table`.
void addTensorRules(RuleTable &table);

/// Adds the rules of ShapeCheckNN.cpp's ops to `table`.
void addNNRules(RuleTable &table);

/// "" if there are `minOps` to `maxOps` operands and `nRes` results, else
/// how many there are and should be.
std::string expectCounts(const std::vector<TypeRef> &ops,
                         const std::vector<TypeRef> &res, size_t minOps,
                         size_t maxOps, size_t nRes = 1);

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

} // namespace loom::rt::shapecheck

#endif // LOOM_RUNTIME_SHAPECHECKIMPL_H
