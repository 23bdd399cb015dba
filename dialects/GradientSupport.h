//===- GradientSupport.h - Helpers the gradient rules share -----*- C++ -*-===//
//
// What every file of gradient rules (Gradients.cpp, GradientsStructural.cpp)
// writes with: a small builder of arithmetic on loom values and the
// LOOM_GRADIENT signature of GradientOpInterface::emitGradient.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_GRADIENTSUPPORT_H
#define LOOM_DIALECTS_GRADIENTSUPPORT_H

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"

namespace loom::grad {

using namespace mlir;

inline RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Small helpers to write rules as arithmetic.
struct Emitter {
  OpBuilder &b;
  Location loc;

  Value scalar(Value like, double v) {
    Type element = typeOf(like).getElementType();
    auto type = RankedTensorType::get({}, element);
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, v)));
  }
  /// A float tensor of `type` holding zeros.
  Value zeros(RankedTensorType type) {
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0)));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x); }
  Value log(Value x) { return LogOp::create(b, loc, x); }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape)
      return x;
    return ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x);
  }
  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keep) {
    if (axes.empty())
      return x;
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                               keep ? b.getUnitAttr() : UnitAttr());
  }
  /// Sums `grad` down to `target`'s shape, undoing numpy broadcasting.
  Value unbroadcast(Value grad, RankedTensorType target) {
    ArrayRef<int64_t> g = typeOf(grad).getShape(), t = target.getShape();
    if (g == t)
      return grad;
    int64_t lead = g.size() - t.size();
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < static_cast<int64_t>(g.size()); ++d)
      if (d < lead || (t[d - lead] == 1 && g[d] != 1))
        axes.push_back(d);
    return reshape(reduceSum(grad, axes, /*keep=*/true), t);
  }
  /// `grad`, shaped like a keep_dims reduction of `input`, spread back.
  Value spread(Value grad, RankedTensorType input, ArrayRef<int64_t> axes) {
    SmallVector<int64_t> kept(input.getShape());
    for (int64_t a : axes)
      kept[a] = 1;
    Value r = reshape(grad, kept);
    if (ArrayRef<int64_t>(kept) == input.getShape())
      return r;
    return BroadcastOp::create(b, loc, input, r);
  }
};

/// Shared prologue: no result gradient means no operand gradients.
inline bool noGradient(ArrayRef<Value> resultGrads, size_t numOperands,
                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(numOperands, Value());
  return !resultGrads.front();
}

} // namespace loom::grad

#define LOOM_GRADIENT(OP)                                                      \
  LogicalResult OP::emitGradient(OpBuilder &b, ArrayRef<Value> resultGrads,    \
                                 ArrayRef<bool> needed,                        \
                                 SmallVectorImpl<Value> &operandGrads)

#endif // LOOM_DIALECTS_GRADIENTSUPPORT_H
