//===- OpRuleAdaptor.h - The op rules seen from the dialect -----*- C++ -*-===//
//
// Each loom op's shape rule is written once, in plain C++
// (common/ops/OpRules.h). These functions read it from MLIR: they convert
// operand types and inherent attributes to the rules' vocabulary, run the
// rule, and convert the inferred types back, reporting what the rule says
// through the op's location. The ODS base classes `Loom_InferredOp` and
// `Loom_CheckedOp` call them, so an op's C++ needs no shape code of its own.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_OPRULEADAPTOR_H
#define LOOM_DIALECTS_OPRULEADAPTOR_H

#include "common/ops/OpTypes.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/ValueRange.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <type_traits>

namespace loom {

/// The rules' element type for `type` (f32, f16, bf16, i32, i64, i1), or
/// std::nullopt.
std::optional<ops::DType> toRuleDType(mlir::Type type);

/// The MLIR element type of `dtype`.
mlir::Type toMlirElementType(mlir::MLIRContext *context, ops::DType dtype);

/// Sets `out` to `attr` as a rule's attribute value (unit and bool: bool;
/// integer; float; string; i64 array); false for any other kind.
bool toRuleAttrValue(mlir::Attribute attr, ops::AttrValue &out);

/// The entries of `attrs` that convert (toRuleAttrValue); a null dictionary
/// gives none.
ops::Attrs toRuleAttrs(mlir::DictionaryAttr attrs);

/// Infers the result types of the op named `opName` ("loom.matmul") by its
/// rule.
llvm::LogicalResult inferByRule(llvm::StringRef opName,
                                mlir::MLIRContext *context,
                                std::optional<mlir::Location> loc,
                                mlir::ValueRange operands,
                                mlir::DictionaryAttr attrs,
                                llvm::SmallVectorImpl<mlir::Type> &results);

/// `inferByRule` for the op class `OpT`, from its generated adaptor.
template <typename OpT, typename AdaptorT>
llvm::LogicalResult
inferByRule(mlir::MLIRContext *context, std::optional<mlir::Location> loc,
            AdaptorT &adaptor, llvm::SmallVectorImpl<mlir::Type> &results) {
  mlir::DictionaryAttr attrs;
  using Properties = typename mlir::PropertiesSelector<OpT>::type;
  if constexpr (!std::is_same_v<Properties, mlir::EmptyProperties>)
    attrs = llvm::dyn_cast_or_null<mlir::DictionaryAttr>(
        OpT::getPropertiesAsAttr(context, adaptor.getProperties()));
  return inferByRule(OpT::getOperationName(), context, loc,
                     adaptor.getOperands(), attrs, results);
}

/// Checks `op`'s operands against its results by its rule (for ops whose
/// result type is an input of their own: cast, reshape, broadcast, and the
/// gradients that write into a given shape).
llvm::LogicalResult verifyByRule(mlir::Operation *op);

} // namespace loom

#endif // LOOM_DIALECTS_OPRULEADAPTOR_H
