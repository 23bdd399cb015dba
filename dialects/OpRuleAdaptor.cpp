//===- OpRuleAdaptor.cpp - The op rules seen from the dialect -------------===//

#include "dialects/OpRuleAdaptor.h"

#include "common/ops/OpRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace loom {

std::optional<ops::DType> toRuleDType(Type type) {
  if (type.isF32())
    return ops::DType::F32;
  if (type.isF16())
    return ops::DType::F16;
  if (type.isBF16())
    return ops::DType::BF16;
  if (type.isInteger(32))
    return ops::DType::I32;
  if (type.isInteger(64))
    return ops::DType::I64;
  if (type.isInteger(1))
    return ops::DType::Bool;
  return std::nullopt;
}

Type toMlirElementType(MLIRContext *context, ops::DType dtype) {
  Builder b(context);
  switch (dtype) {
  case ops::DType::F32:
    return b.getF32Type();
  case ops::DType::F16:
    return b.getF16Type();
  case ops::DType::BF16:
    return b.getBF16Type();
  case ops::DType::I32:
    return b.getI32Type();
  case ops::DType::I64:
    return b.getI64Type();
  case ops::DType::Bool:
    return b.getI1Type();
  }
  return {};
}

bool toRuleAttrValue(Attribute attr, ops::AttrValue &out) {
  if (isa<UnitAttr>(attr))
    out = true;
  else if (auto b = dyn_cast<BoolAttr>(attr))
    out = b.getValue();
  else if (auto i = dyn_cast<IntegerAttr>(attr))
    out = int64_t(i.getValue().getSExtValue());
  else if (auto f = dyn_cast<FloatAttr>(attr))
    out = f.getValueAsDouble();
  else if (auto s = dyn_cast<StringAttr>(attr))
    out = s.str();
  else if (auto list = dyn_cast<DenseI64ArrayAttr>(attr))
    out = std::vector<int64_t>(list.asArrayRef().begin(),
                               list.asArrayRef().end());
  else
    return false;
  return true;
}

ops::Attrs toRuleAttrs(DictionaryAttr attrs) {
  ops::Attrs out;
  if (!attrs)
    return out;
  for (NamedAttribute named : attrs) {
    ops::AttrValue value;
    if (toRuleAttrValue(named.getValue(), value))
      out.set(named.getName().str(), std::move(value));
  }
  return out;
}

/// The rule's view of `values`' types into `types` (whose shapes `shapes`
/// holds), or the message why one has none.
static std::string toRuleTypes(ValueRange values, const char *what,
                               std::vector<ops::Shape> &shapes,
                               std::vector<ops::TypeRef> &types) {
  shapes.reserve(values.size());
  for (auto [i, value] : llvm::enumerate(values)) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    std::optional<ops::DType> dtype =
        type ? toRuleDType(type.getElementType()) : std::nullopt;
    if (!type || !type.hasStaticShape() || !dtype)
      return std::string(what) + " #" + std::to_string(i) +
             " must be a statically shaped tensor of f32, f16, bf16, i32, "
             "i64 or i1";
    shapes.emplace_back(type.getShape().begin(), type.getShape().end());
  }
  for (size_t i = 0; i < shapes.size(); ++i)
    types.push_back(
        {*toRuleDType(getElementTypeOrSelf(values[i].getType())), &shapes[i]});
  return "";
}

static StringRef ruleName(StringRef opName) {
  opName.consume_front("loom.");
  return opName;
}

LogicalResult inferByRule(StringRef opName, MLIRContext *context,
                          std::optional<Location> loc, ValueRange operands,
                          DictionaryAttr attrs,
                          SmallVectorImpl<Type> &results) {
  std::vector<ops::Shape> shapes;
  std::vector<ops::TypeRef> types;
  if (std::string e = toRuleTypes(operands, "operand", shapes, types);
      !e.empty())
    return emitOptionalError(loc, e);
  std::vector<ops::TensorType> inferred;
  if (std::string e = ops::inferResultTypes(
          ruleName(opName), toRuleAttrs(attrs), types, inferred);
      !e.empty())
    return emitOptionalError(loc, e);
  for (const ops::TensorType &t : inferred)
    results.push_back(
        RankedTensorType::get(t.shape, toMlirElementType(context, t.dtype)));
  return success();
}

LogicalResult verifyByRule(Operation *op) {
  std::vector<ops::Shape> operandShapes, resultShapes;
  std::vector<ops::TypeRef> operands, results;
  std::string e =
      toRuleTypes(op->getOperands(), "operand", operandShapes, operands);
  if (e.empty())
    e = toRuleTypes(op->getResults(), "result", resultShapes, results);
  if (e.empty())
    e = ops::checkOp(ruleName(op->getName().getStringRef()),
                     toRuleAttrs(dyn_cast_or_null<DictionaryAttr>(
                         op->getPropertiesAsAttribute())),
                     operands, results);
  if (!e.empty())
    return op->emitOpError(e);
  return success();
}

} // namespace loom
