//===- OpRules.h - Each loom op's shape rule, defined once ------*- C++ -*-===//
//
// One table holds, for every op of the loom dialect, how many operands and
// results it has and how its result types follow from its operands and
// attributes. The dialect's type inference (dialects/OpRuleAdaptor.h), the
// plan validator of the runtime and the tests all read it, so a rule is
// written once, in plain C++, and a corrupt plan is an error before a kernel
// runs, never an out-of-bounds access.
//
// An op is one of two kinds:
//   - inferred: its result types follow from operands and attributes
//     (`inferResultTypes`);
//   - checked: its result type is an input of its own (cast, reshape,
//     broadcast, and the gradients that write into a given shape), so the
//     rule checks operands against results.
// `checkOp` serves both: it infers and compares, or checks.
//
// Every function returns "" when the op fits its rule, else the message
// (without location) that the caller reports.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_OPRULES_H
#define LOOM_COMMON_OPS_OPRULES_H

#include "common/layout/Mesh.h"
#include "common/ops/OpTypes.h"

#include <string>
#include <string_view>
#include <vector>

namespace loom::ops {

/// An attribute's kind, as plans carry it.
enum class AttrKind { Int, Float, Bool, Ints, String };

/// One attribute of an op's schema: generated from the dialect's ODS
/// (OpSchema.inc, scripts/gen_op_schema.py), the one place an op's
/// attributes are declared.
struct AttrSpec {
  const char *name;
  AttrKind kind;
  bool optional; // may be absent (unit attributes, OptionalAttr)
};

/// The attribute schema of `op` (named without `loom.`), or null.
const std::vector<AttrSpec> *findAttrSchema(std::string_view op);

/// "" if `attrs` fit `op`'s schema: every attribute it names has the kind
/// ODS declares, none that it requires is missing, and there is no other.
/// An op without a schema passes (its rule reports it as unknown).
std::string checkAttrs(std::string_view op, const Attrs &attrs);

/// Infers the result types of an op whose operand counts are in range.
using InferFn = std::string (*)(const Attrs &, const std::vector<TypeRef> &,
                                std::vector<TensorType> &);
/// Checks the operands and results of an op whose counts are in range.
using CheckFn = std::string (*)(const Attrs &, const std::vector<TypeRef> &,
                                const std::vector<TypeRef> &);

/// One op's rule. Exactly one of `infer` and `check` is set.
struct OpRule {
  size_t minOperands;
  size_t maxOperands; // SIZE_MAX: variadic
  size_t numResults;
  InferFn infer = nullptr;
  CheckFn check = nullptr;
};

/// The rule of the op named as in the dialect without `loom.` (e.g.
/// "matmul"), or null.
const OpRule *findOpRule(std::string_view op);

/// The names of all ops with a rule, sorted.
std::vector<std::string> opsWithRules();

/// Infers `results` of an inferred op; "" or what is wrong.
std::string inferResultTypes(std::string_view op, const Attrs &attrs,
                             const std::vector<TypeRef> &operands,
                             std::vector<TensorType> &results);

/// Returns "" if `op`'s attributes fit its schema and it maps `operands` to
/// `results`, else what is wrong.
std::string checkOp(std::string_view op, const Attrs &attrs,
                    const std::vector<TypeRef> &operands,
                    const std::vector<TypeRef> &results);

/// Returns "" if the collective `op` (all_reduce, reduce_scatter, all_gather,
/// all_to_all, local_split, make_partial) with these attributes maps
/// `operands` to `results` on a mesh with `meshAxes` (empty: the plan has no
/// mesh), else what is wrong: the mesh axis indices are in range and
/// distinct, `dim` and `to_dim` are dimensions of the operand, the split
/// dimension divides by the group size, the result's dimension is the
/// operand's times or divided by it, every other dimension and the element
/// type are the operand's, and sums are over summable types.
std::string checkCollective(const std::string &op, const Attrs &attrs,
                            const std::vector<layout::MeshAxis> &meshAxes,
                            const std::vector<TypeRef> &operands,
                            const std::vector<TypeRef> &results);

/// The numpy broadcast of two shapes; false if they do not broadcast.
bool broadcastShapes(const Shape &a, const Shape &b, Shape &out);

} // namespace loom::ops

#endif // LOOM_COMMON_OPS_OPRULES_H
