//===- Gradients.cpp - The gradient rule of every differentiable op -------===//
//
// Each op's GradientOpInterface::emitGradient: reverse-mode rules written
// with loom ops, so that the backward graph is itself a loom graph that
// later passes shard, cost and partition like the forward one. Rules that
// forward ops cannot express use the gradient ops of LoomTrainOps.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/GradientSupport.h"

#include "common/ops/ElementwiseMath.h"

#include <cmath>

using namespace mlir;
using namespace loom;
using namespace loom::grad;

namespace {

/// dy * f'(x) for a function of common/ops/ElementwiseMath.h: one
/// loom.unary_grad naming the op, with the op's parameters.
LogicalResult unaryGradient(Operation *op, OpBuilder &b,
                            ArrayRef<Value> resultGrads, ArrayRef<bool> needed,
                            SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Value x = op->getOperand(0);
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return op->emitOpError("is differentiable only on float inputs");
  StringRef name = op->getName().stripDialect();
  const ops::math::UnaryFnInfo *info =
      ops::math::findUnaryFn({name.data(), name.size()});
  if (!info)
    return op->emitOpError("has no function in ElementwiseMath.h");
  auto param = [&](const char *attr) {
    double v = attr ? cast<FloatAttr>(op->getAttr(attr)).getValueAsDouble() : 0;
    return b.getF32FloatAttr(static_cast<float>(v));
  };
  operandGrads[0] = UnaryGradOp::create(b, op->getLoc(), x, resultGrads[0],
                                        b.getStringAttr(info->name),
                                        param(info->alpha), param(info->beta));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LOOM_GRADIENT(AddOp) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0];
  if (needed[0])
    operandGrads[0] = e.unbroadcast(dy, typeOf(getLhs()));
  if (needed[1])
    operandGrads[1] = e.unbroadcast(dy, typeOf(getRhs()));
  return success();
}

LOOM_GRADIENT(SubOp) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0];
  if (needed[0])
    operandGrads[0] = e.unbroadcast(dy, typeOf(getLhs()));
  if (needed[1])
    operandGrads[1] = e.unbroadcast(e.neg(dy), typeOf(getRhs()));
  return success();
}

LOOM_GRADIENT(MulOp) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0];
  if (needed[0])
    operandGrads[0] = e.unbroadcast(e.mul(dy, getRhs()), typeOf(getLhs()));
  if (needed[1])
    operandGrads[1] = e.unbroadcast(e.mul(dy, getLhs()), typeOf(getRhs()));
  return success();
}

LOOM_GRADIENT(DivOp) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0];
  if (needed[0])
    operandGrads[0] = e.unbroadcast(e.div(dy, getRhs()), typeOf(getLhs()));
  if (needed[1]) // d(l / r)/dr = -(l / r) / r
    operandGrads[1] = e.unbroadcast(
        e.neg(e.div(e.mul(dy, getResult()), getRhs())), typeOf(getRhs()));
  return success();
}

LOOM_GRADIENT(PowOp) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  if (!isa<FloatType>(typeOf(getLhs()).getElementType()))
    return emitOpError("integer pow is not differentiable");
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0];
  if (needed[0]) { // r * l^(r - 1)
    Value rMinusOne = e.sub(getRhs(), e.scalar(getRhs(), 1.0));
    Value d = e.mul(getRhs(), PowOp::create(b, getLoc(), getLhs(), rMinusOne));
    operandGrads[0] = e.unbroadcast(e.mul(dy, d), typeOf(getLhs()));
  }
  if (needed[1]) // l^r * log(l)
    operandGrads[1] = e.unbroadcast(
        e.mul(dy, e.mul(getResult(), e.log(getLhs()))), typeOf(getRhs()));
  return success();
}

/// mod and fmod: l - q r with q = floor(l / r) (mod) or trunc(l / r)
/// (fmod), piecewise constant: d/dl = 1 and d/dr = -q = -(l - result) / r.
template <typename OpTy>
LogicalResult
remainderGradient(OpTy op, OpBuilder &b, ArrayRef<Value> resultGrads,
                  ArrayRef<bool> needed, SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  if (!isa<FloatType>(typeOf(op.getLhs()).getElementType()))
    return op.emitOpError("an integer remainder is not differentiable");
  Emitter e{b, op.getLoc()};
  Value dy = resultGrads[0];
  if (needed[0])
    operandGrads[0] = e.unbroadcast(dy, typeOf(op.getLhs()));
  if (needed[1]) {
    Value quotient = e.div(e.sub(op.getLhs(), op.getResult()), op.getRhs());
    operandGrads[1] =
        e.unbroadcast(e.neg(e.mul(dy, quotient)), typeOf(op.getRhs()));
  }
  return success();
}

LOOM_GRADIENT(ModOp) {
  return remainderGradient(*this, b, resultGrads, needed, operandGrads);
}

LOOM_GRADIENT(FModOp) {
  return remainderGradient(*this, b, resultGrads, needed, operandGrads);
}

LOOM_GRADIENT(NegOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = Emitter{b, getLoc()}.neg(resultGrads[0]);
  return success();
}

LOOM_GRADIENT(ExpOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = Emitter{b, getLoc()}.mul(resultGrads[0], getResult());
  return success();
}

LOOM_GRADIENT(LogOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = Emitter{b, getLoc()}.div(resultGrads[0], getInput());
  return success();
}

LOOM_GRADIENT(SqrtOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Emitter e{b, getLoc()};
  operandGrads[0] =
      e.div(e.mul(resultGrads[0], e.scalar(getInput(), 0.5)), getResult());
  return success();
}

LOOM_GRADIENT(ErfOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Emitter e{b, getLoc()};
  Value x = getInput();
  Value d =
      e.mul(e.scalar(x, 2.0 / std::sqrt(M_PI)), e.exp(e.neg(e.mul(x, x))));
  operandGrads[0] = e.mul(resultGrads[0], d);
  return success();
}

LOOM_GRADIENT(TanhOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Emitter e{b, getLoc()};
  Value y = getResult();
  operandGrads[0] = e.mul(resultGrads[0], e.sub(e.scalar(y, 1.0), e.mul(y, y)));
  return success();
}

LOOM_GRADIENT(SigmoidOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Emitter e{b, getLoc()};
  Value y = getResult();
  operandGrads[0] = e.mul(resultGrads[0], e.mul(y, e.sub(e.scalar(y, 1.0), y)));
  return success();
}

LOOM_GRADIENT(ReluOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = ReluGradOp::create(b, getLoc(), getInput(), resultGrads[0]);
  return success();
}

LOOM_GRADIENT(GeluOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = GeluGradOp::create(b, getLoc(), getInput(), resultGrads[0],
                                       getTanhApproximationAttr());
  return success();
}

#define LOOM_UNARY_GRADIENT(OP)                                                \
  LOOM_GRADIENT(OP) {                                                          \
    return unaryGradient(*this, b, resultGrads, needed, operandGrads);         \
  }
LOOM_UNARY_GRADIENT(CosOp)
LOOM_UNARY_GRADIENT(SinOp)
LOOM_UNARY_GRADIENT(AbsOp)
LOOM_UNARY_GRADIENT(ReciprocalOp)
LOOM_UNARY_GRADIENT(SoftplusOp)
LOOM_UNARY_GRADIENT(MishOp)
LOOM_UNARY_GRADIENT(HardSwishOp)
LOOM_UNARY_GRADIENT(LeakyReluOp)
LOOM_UNARY_GRADIENT(EluOp)
LOOM_UNARY_GRADIENT(SeluOp)
LOOM_UNARY_GRADIENT(HardSigmoidOp)
LOOM_UNARY_GRADIENT(ClipOp)
#undef LOOM_UNARY_GRADIENT

LOOM_GRADIENT(CastOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  RankedTensorType in = typeOf(getInput());
  if (!isa<FloatType>(in.getElementType()) ||
      !isa<FloatType>(typeOf(getResult()).getElementType()))
    return emitOpError("only casts between float types are differentiable");
  operandGrads[0] = CastOp::create(b, getLoc(), in, resultGrads[0]);
  return success();
}

LOOM_GRADIENT(SelectOp) {
  if (noGradient(resultGrads, 3, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0], zero = e.scalar(dy, 0.0);
  if (needed[1])
    operandGrads[1] =
        e.unbroadcast(SelectOp::create(b, getLoc(), getCondition(), dy, zero),
                      typeOf(getTrueValue()));
  if (needed[2])
    operandGrads[2] =
        e.unbroadcast(SelectOp::create(b, getLoc(), getCondition(), zero, dy),
                      typeOf(getFalseValue()));
  return success();
}

//===----------------------------------------------------------------------===//
// Maximum, minimum and triangles
//===----------------------------------------------------------------------===//

namespace {

/// The gradient of max (lhs wins where `lhsWins` is greater) or min: dy
/// goes to the operand that wins, and half of it to each on a tie, as
/// PyTorch's torch.maximum and torch.minimum do.
template <typename LhsWins, typename RhsWins, typename Op>
LogicalResult extremumGradient(Op op, OpBuilder &b, ArrayRef<Value> resultGrads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  if (!isa<FloatType>(typeOf(op.getLhs()).getElementType()))
    return op.emitOpError("is differentiable on floating-point inputs only");
  Location loc = op.getLoc();
  Emitter e{b, loc};
  Value dy = resultGrads[0], lhs = op.getLhs(), rhs = op.getRhs();
  Value tie = SelectOp::create(b, loc, EqualOp::create(b, loc, lhs, rhs),
                               e.mul(dy, e.scalar(dy, 0.5)), e.scalar(dy, 0.0));
  if (needed[0])
    operandGrads[0] = e.unbroadcast(
        SelectOp::create(b, loc, LhsWins::create(b, loc, lhs, rhs), dy, tie),
        typeOf(lhs));
  if (needed[1])
    operandGrads[1] = e.unbroadcast(
        SelectOp::create(b, loc, RhsWins::create(b, loc, lhs, rhs), dy, tie),
        typeOf(rhs));
  return success();
}

} // namespace

LOOM_GRADIENT(MaxOp) {
  return extremumGradient<GreaterOp, LessOp>(*this, b, resultGrads, needed,
                                             operandGrads);
}

LOOM_GRADIENT(MinOp) {
  return extremumGradient<LessOp, GreaterOp>(*this, b, resultGrads, needed,
                                             operandGrads);
}

LOOM_GRADIENT(TriluOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] =
      TriluOp::create(b, getLoc(), resultGrads[0], getUpperAttr(), getKAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

LOOM_GRADIENT(MatmulOp) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0], lhs = getLhs(), rhs = getRhs();
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  UnitAttr yes = b.getUnitAttr(), no;
  auto flag = [&](bool v) { return v ? yes : no; };
  // y = op(A) op(B): d op(A) = dy op(B)^T, d op(B) = op(A)^T dy.
  if (needed[0]) {
    Value d = tl ? MatmulOp::create(b, getLoc(), rhs, dy, flag(tr), yes)
                 : MatmulOp::create(b, getLoc(), dy, rhs, no, flag(!tr));
    operandGrads[0] = e.unbroadcast(d, typeOf(lhs));
  }
  if (needed[1]) {
    RankedTensorType lt = typeOf(lhs), dt = typeOf(dy);
    // A matrix shared by every batch (a layer's weight): its gradient can
    // contract the batch dimensions with the rows in one matmul over
    // flattened copies of lhs and dy, rather than sum one product per
    // batch afterwards. Whichever holds less: the copies (rows x (k + n))
    // or the batch of weight-sized products (batch x k x n).
    int64_t k = lt.getShape().back(), n = dt.getShape().back();
    if (typeOf(rhs).getRank() == 2 && lt.getRank() > 2 && !tl &&
        lt.getShape()[lt.getRank() - 2] * (k + n) < k * n) {
      int64_t rows = lt.getNumElements() / k;
      Value a = e.reshape(lhs, {rows, k});
      Value g = e.reshape(dy, {rows, n});
      operandGrads[1] = tr ? MatmulOp::create(b, getLoc(), g, a, yes, no)
                           : MatmulOp::create(b, getLoc(), a, g, yes, no);
    } else {
      Value d = tr ? MatmulOp::create(b, getLoc(), dy, lhs, yes, flag(tl))
                   : MatmulOp::create(b, getLoc(), lhs, dy, flag(!tl), no);
      operandGrads[1] = e.unbroadcast(d, typeOf(rhs));
    }
  }
  return success();
}

LOOM_GRADIENT(SoftmaxOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0], y = getResult();
  int64_t axis = getAxis();
  Value dot = e.reduceSum(e.mul(dy, y), {axis}, /*keep=*/true);
  operandGrads[0] = e.mul(y, e.sub(dy, dot));
  return success();
}

LOOM_GRADIENT(LogSoftmaxOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0];
  int64_t axis = getAxis();
  Value total = e.reduceSum(dy, {axis}, /*keep=*/true);
  operandGrads[0] = e.sub(dy, e.mul(e.exp(getResult()), total));
  return success();
}

LOOM_GRADIENT(LayerNormOp) {
  if (noGradient(resultGrads, getNumOperands(), operandGrads))
    return success();
  auto grads =
      LayerNormGradOp::create(b, getLoc(), getInput(), getScale(),
                              resultGrads[0], getAxisAttr(), getEpsilonAttr());
  operandGrads[0] = needed[0] ? grads.getInputGrad() : Value();
  operandGrads[1] = needed[1] ? grads.getScaleGrad() : Value();
  if (getBias() && needed[2])
    operandGrads[2] = grads.getBiasGrad();
  return success();
}

LOOM_GRADIENT(BatchNormOp) {
  // The inference form: statistics are constants of the step.
  if (noGradient(resultGrads, 5, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  Value dy = resultGrads[0], x = getInput();
  RankedTensorType in = typeOf(x);
  SmallVector<int64_t> channelShape(in.getRank(), 1), axes;
  channelShape[1] = in.getDimSize(1);
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (d != 1)
      axes.push_back(d);
  Value eps = e.scalar(x, getEpsilon().convertToDouble());
  Value inv = e.div(e.scalar(x, 1.0),
                    SqrtOp::create(b, getLoc(), e.add(getVariance(), eps)));
  if (needed[0])
    operandGrads[0] =
        e.mul(dy, e.reshape(e.mul(getScale(), inv), channelShape));
  if (needed[1]) {
    Value xhat = e.mul(e.sub(x, e.reshape(getMean(), channelShape)),
                       e.reshape(inv, channelShape));
    operandGrads[1] = e.reduceSum(e.mul(dy, xhat), axes, /*keep=*/false);
  }
  if (needed[2])
    operandGrads[2] = e.reduceSum(dy, axes, /*keep=*/false);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LOOM_GRADIENT(ReduceSumOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = Emitter{b, getLoc()}.spread(resultGrads[0],
                                                typeOf(getInput()), getAxes());
  return success();
}

LOOM_GRADIENT(ReduceMeanOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  Emitter e{b, getLoc()};
  RankedTensorType in = typeOf(getInput());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= in.getDimSize(a);
  Value scaled = e.mul(resultGrads[0], e.scalar(getInput(), 1.0 / count));
  operandGrads[0] = e.spread(scaled, in, getAxes());
  return success();
}

LOOM_GRADIENT(ReduceMaxOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  if (!isa<FloatType>(typeOf(getInput()).getElementType()))
    return emitOpError("is differentiable on floating-point inputs only");
  operandGrads[0] =
      ReduceMaxGradOp::create(b, getLoc(), getInput(), getResult(),
                              resultGrads[0], getAxesAttr(), getKeepDimsAttr());
  return success();
}

LOOM_GRADIENT(ReduceProdOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  if (!isa<FloatType>(typeOf(getInput()).getElementType()))
    return emitOpError("is differentiable on floating-point inputs only");
  operandGrads[0] =
      ReduceProdGradOp::create(b, getLoc(), getInput(), resultGrads[0],
                               getAxesAttr(), getKeepDimsAttr());
  return success();
}

LOOM_GRADIENT(CumSumOp) {
  // Each input element reaches the outputs after it (before it when
  // reversed): the gradient is the cumulative sum the other way.
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  if (!isa<FloatType>(typeOf(getInput()).getElementType()))
    return emitOpError("is differentiable on floating-point inputs only");
  operandGrads[0] = CumSumOp::create(
      b, getLoc(), resultGrads[0], getAxisAttr(), getExclusiveAttr(),
      getReverse() ? UnitAttr() : b.getUnitAttr());
  return success();
}

LOOM_GRADIENT(TopKOp) {
  if (noGradient(resultGrads, 1, operandGrads))
    return success();
  return emitOpError("is inference-only (ONNX TopK): Loom gives its values "
                     "no gradient; compute the loss without TopK, or keep "
                     "TopK out of the trained graph");
}
