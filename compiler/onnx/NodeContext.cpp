//===- NodeContext.cpp - What an ONNX op converter sees -------------------===//

#include "compiler/onnx/NodeContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;

namespace loom::onnx_import {

const HostTensor *NodeContext::constant(int i) const {
  auto it = values.find(node.input(i));
  if (it == values.end())
    return nullptr;
  return std::get_if<HostTensor>(&it->second);
}

bool NodeContext::allConstant() const {
  for (int i = 0; i < node.input_size(); ++i)
    if (hasInput(i) && !constant(i))
      return false;
  return true;
}

Value ConstantPool::get(OpBuilder &builder, Location loc,
                        DenseElementsAttr value) {
  Value &slot = byValue[value];
  if (!slot) {
    OpBuilder::InsertionGuard guard(builder);
    if (last)
      builder.setInsertionPointAfter(last);
    else
      builder.setInsertionPointToStart(body);
    auto op = ConstantOp::create(builder, loc, value);
    last = op;
    slot = op;
  }
  return slot;
}

Value ConstantPool::get(OpBuilder &builder, Location loc, StringRef name,
                        const HostTensor &value) {
  Value &slot = byName[name];
  if (!slot)
    slot = get(builder, loc, value.toAttr(builder.getContext()));
  return slot;
}

Value NodeContext::value(int i) {
  const OnnxValue &v = values.find(node.input(i))->second;
  // Known values stay HostTensors in `values` for later folding.
  if (auto *known = std::get_if<HostTensor>(&v))
    return constants.get(builder, loc, node.input(i), *known);
  return std::get<Value>(v);
}

RankedTensorType NodeContext::type(int i) const {
  const OnnxValue &v = values.find(node.input(i))->second;
  if (auto *known = std::get_if<HostTensor>(&v))
    return known->getType(getContext());
  return cast<RankedTensorType>(std::get<Value>(v).getType());
}

FailureOr<std::vector<int64_t>> NodeContext::constantInts(int i,
                                                          StringRef what) {
  const HostTensor *c = constant(i);
  if (!c) {
    unsupported(Twine(what) + " (input '" + node.input(i) +
                "') is computed at run time; Loom needs it to be a constant. "
                "Bind symbolic dimensions with --batch, --dim or "
                "--input-shape so that it folds");
    return failure();
  }
  if (c->isFloat() || c->dtype == DType::Bool) {
    return invalid(Twine(what) + " must be an integer tensor");
  }
  return c->ints;
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

FailureOr<int64_t> NodeContext::attrInt(StringRef name, int64_t dflt) {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return dflt;
  if (a->type() != onnx::AttributeProto::INT) {
    return invalid("attribute '" + name + "' must be an int");
  }
  return a->i();
}

FailureOr<float> NodeContext::attrFloat(StringRef name, float dflt) {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return dflt;
  if (a->type() != onnx::AttributeProto::FLOAT) {
    return invalid("attribute '" + name + "' must be a float");
  }
  return a->f();
}

FailureOr<std::string> NodeContext::attrString(StringRef name, StringRef dflt) {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return dflt.str();
  if (a->type() != onnx::AttributeProto::STRING) {
    return invalid("attribute '" + name + "' must be a string");
  }
  return a->s();
}

FailureOr<std::optional<std::vector<int64_t>>>
NodeContext::attrInts(StringRef name) {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::optional<std::vector<int64_t>>();
  if (a->type() != onnx::AttributeProto::INTS) {
    return invalid("attribute '" + name + "' must be a list of ints");
  }
  return std::optional<std::vector<int64_t>>(
      std::vector<int64_t>(a->ints().begin(), a->ints().end()));
}

void NodeContext::setOutput(int i, OnnxValue v) {
  if (hasOutput(i)) {
    constants.forget(node.output(i));
    values.insert_or_assign(node.output(i), std::move(v));
  }
}

bool NodeContext::updateInput(int i, Value v) {
  if (!stateUpdates || !hasInput(i))
    return false;
  auto it = values.find(node.input(i));
  if (it == values.end() || !std::holds_alternative<Value>(it->second))
    return false;
  auto arg = dyn_cast<BlockArgument>(std::get<Value>(it->second));
  // The input may already be an earlier update of the buffer.
  if (!arg) {
    for (auto &entry : *stateUpdates)
      if (entry.second == std::get<Value>(it->second))
        arg = entry.first;
  }
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func ||
      !func.getArgAttr(arg.getArgNumber(), LoomDialect::kBufferAttrName))
    return false;
  it->second = OnnxValue(v);
  for (auto &entry : *stateUpdates)
    if (entry.first == arg) {
      entry.second = v;
      return true;
    }
  stateUpdates->emplace_back(arg, v);
  return true;
}

Value NodeContext::scalar(Type elementType, double v) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element;
  if (auto f = dyn_cast<FloatType>(elementType))
    element = builder.getFloatAttr(f, v);
  else
    element = builder.getIntegerAttr(elementType, static_cast<int64_t>(v));
  return constants.get(builder, loc, DenseElementsAttr::get(type, element));
}

FailureOr<Value> NodeContext::reshape(Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return createTyped<ReshapeOp>(
      RankedTensorType::get(shape, type.getElementType()), v);
}

ConversionFailure NodeContext::fail(ImportStatus status, const Twine &message) {
  if (!error)
    error = NodeError{status, message.str()};
  return {};
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              StringRef what) {
  if (axis < -rank || axis >= rank) {
    return invalid(Twine(what) + " " + Twine(axis) +
                   " is out of range for rank " + Twine(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

FailureOr<Value> NodeContext::finish(Operation *op, bool infer) {
  if (infer) {
    SmallVector<Type> types;
    auto inferrable = cast<InferTypeOpInterface>(op);
    if (failed(inferrable.inferReturnTypes(
            getContext(), op->getLoc(), op->getOperands(),
            op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
            op->getRegions(), types))) {
      op->erase();
      return invalid(Twine("the loom op it maps to rejects it: ") +
                     takeDiagnostics());
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  }
  if (failed(mlir::verify(op))) {
    std::string message = takeDiagnostics();
    op->erase();
    return invalid(Twine("the loom op it maps to rejects it: ") + message);
  }
  return op->getResult(0);
}

} // namespace loom::onnx_import
