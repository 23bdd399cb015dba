//===- GradientsStructural.cpp - Gradients of data movement, conv, losses -===//
//
// The gradient rules of the ops that move data (transpose, reshape, gather,
// scatter, slice, pad, concat), convolution and pooling, the losses and
// the random ops; Gradients.cpp holds the arithmetic ones. Both write with
// GradientSupport.h.
//
//===----------------------------------------------------------------------===//

#include "dialects/GradientSupport.h"

using namespace mlir;
using namespace loom;
using namespace loom::grad;

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LOOM_GRADIENT(TransposeOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  operandGrads[0] = TransposeOp::create(b, getLoc(), resultGrads[0],
                                        b.getDenseI64ArrayAttr(inverse));
  return success();
}

LOOM_GRADIENT(ReshapeOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = Emitter{b, getLoc()}.reshape(resultGrads[0],
                                                 typeOf(getInput()).getShape());
  return success();
}

LOOM_GRADIENT(BroadcastOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] =
      Emitter{b, getLoc()}.unbroadcast(resultGrads[0], typeOf(getInput()));
  return success();
}

LOOM_GRADIENT(GatherOp) {
  if (noGradient(resultGrads, 2, operandGrads) || !needed[0])
    return success();
  if (!isa<FloatType>(typeOf(getInput()).getElementType()))
    return emitOpError("gathering integers is not differentiable");
  operandGrads[0] =
      GatherGradOp::create(b, getLoc(), getInput().getType(), getIndices(),
                           resultGrads[0], getAxisAttr());
  return success();
}

LOOM_GRADIENT(GatherElementsOp) {
  // A scatter-add of the gradient into zeros: repeated indices accumulate.
  if (noGradient(resultGrads, 2, operandGrads) || !needed[0])
    return success();
  if (!isa<FloatType>(typeOf(getInput()).getElementType()))
    return emitOpError("gathering integers is not differentiable");
  Emitter e{b, getLoc()};
  operandGrads[0] = ScatterElementsOp::create(
      b, getLoc(), e.zeros(typeOf(getInput())), getIndices(), resultGrads[0],
      getAxisAttr(), b.getUnitAttr());
  return success();
}

LOOM_GRADIENT(ScatterElementsOp) {
  // data: the gradient where no update lands (everywhere with accumulate);
  // updates: the gradient at the positions they went to.
  if (noGradient(resultGrads, 3, operandGrads))
    return success();
  if (!isa<FloatType>(typeOf(getData()).getElementType()))
    return emitOpError("scattering integers is not differentiable");
  Value dy = resultGrads[0];
  if (needed[0] && getAccumulate())
    operandGrads[0] = dy;
  else if (needed[0])
    operandGrads[0] = ScatterElementsOp::create(
        b, getLoc(), dy, getIndices(),
        Emitter{b, getLoc()}.zeros(typeOf(getUpdates())), getAxisAttr(),
        UnitAttr());
  if (needed[2])
    operandGrads[2] =
        GatherElementsOp::create(b, getLoc(), dy, getIndices(), getAxisAttr());
  return success();
}

LOOM_GRADIENT(ConcatOp) {
  if (noGradient(resultGrads, getNumOperands(), operandGrads))
    return success();
  int64_t axis = getAxis(), offset = 0;
  RankedTensorType out = typeOf(getResult());
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    RankedTensorType t = typeOf(input);
    if (needed[i]) {
      SmallVector<int64_t> starts(out.getRank(), 0), strides(out.getRank(), 1);
      starts[axis] = offset;
      operandGrads[i] = SliceOp::create(b, getLoc(), resultGrads[0],
                                        b.getDenseI64ArrayAttr(starts),
                                        b.getDenseI64ArrayAttr(t.getShape()),
                                        b.getDenseI64ArrayAttr(strides));
    }
    offset += t.getDimSize(axis);
  }
  return success();
}

LOOM_GRADIENT(SliceOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] =
      SliceGradOp::create(b, getLoc(), getInput().getType(), resultGrads[0],
                          getStartsAttr(), getStridesAttr());
  return success();
}

LOOM_GRADIENT(PadOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  RankedTensorType in = typeOf(getInput());
  if (!isa<FloatType>(in.getElementType()))
    return emitOpError("padding integers is not differentiable");
  if (getMode() == "constant") { // the border is constant: a slice of dy
    SmallVector<int64_t> strides(in.getRank(), 1);
    operandGrads[0] = SliceOp::create(b, getLoc(), resultGrads[0], getLowAttr(),
                                      b.getDenseI64ArrayAttr(in.getShape()),
                                      b.getDenseI64ArrayAttr(strides));
    return success();
  }
  operandGrads[0] =
      PadGradOp::create(b, getLoc(), in, resultGrads[0], getLowAttr(),
                        getHighAttr(), getModeAttr());
  return success();
}

LOOM_GRADIENT(ResizeOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = ResizeGradOp::create(
      b, getLoc(), getInput().getType(), resultGrads[0], getModeAttr(),
      getCoordinateTransformationModeAttr(), getNearestModeAttr(),
      getScaleNumAttr(), getScaleDenAttr(), getCubicCoeffAAttr(),
      getExcludeOutsideAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LOOM_GRADIENT(Conv2DOp) {
  if (noGradient(resultGrads, getNumOperands(), operandGrads))
    return success();
  Value dy = resultGrads[0];
  if (needed[0])
    operandGrads[0] = Conv2DGradInputOp::create(
        b, getLoc(), getInput().getType(), dy, getWeight(), getStridesAttr(),
        getPaddingAttr(), getDilationsAttr(), getGroupsAttr());
  if (needed[1])
    operandGrads[1] = Conv2DGradWeightOp::create(
        b, getLoc(), getWeight().getType(), getInput(), dy, getStridesAttr(),
        getPaddingAttr(), getDilationsAttr(), getGroupsAttr());
  if (getBias() && needed[2])
    operandGrads[2] =
        Emitter{b, getLoc()}.reduceSum(dy, {0, 2, 3}, /*keep=*/false);
  return success();
}

// conv_transpose2d is conv2d's input gradient: its input gradient is the
// convolution of dy, and its weight gradient the convolution's weight
// gradient with dy as the convolution's input and x as its output gradient.
LOOM_GRADIENT(ConvTranspose2DOp) {
  if (noGradient(resultGrads, getNumOperands(), operandGrads))
    return success();
  Value dy = resultGrads[0];
  if (needed[0])
    operandGrads[0] = Conv2DOp::create(b, getLoc(), dy, getWeight(), Value(),
                                       getStridesAttr(), getPaddingAttr(),
                                       getDilationsAttr(), getGroupsAttr());
  if (needed[1])
    operandGrads[1] = Conv2DGradWeightOp::create(
        b, getLoc(), getWeight().getType(), dy, getInput(), getStridesAttr(),
        getPaddingAttr(), getDilationsAttr(), getGroupsAttr());
  if (getBias() && needed[2])
    operandGrads[2] =
        Emitter{b, getLoc()}.reduceSum(dy, {0, 2, 3}, /*keep=*/false);
  return success();
}

LOOM_GRADIENT(MaxPool2DOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = MaxPool2DGradOp::create(
      b, getLoc(), getInput().getType(), getInput(), resultGrads[0],
      getKernelAttr(), getStridesAttr(), getPaddingAttr(), getDilationsAttr(),
      getCeilModeAttr());
  return success();
}

LOOM_GRADIENT(AvgPool2DOp) {
  if (noGradient(resultGrads, 1, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = AvgPool2DGradOp::create(
      b, getLoc(), getInput().getType(), resultGrads[0], getKernelAttr(),
      getStridesAttr(), getPaddingAttr(), getDilationsAttr(), getCeilModeAttr(),
      getCountIncludePadAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LOOM_GRADIENT(SoftmaxCrossEntropyOp) {
  if (noGradient(resultGrads, 2, operandGrads) || !needed[0])
    return success();
  operandGrads[0] = SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getLogits(), getLabels(), resultGrads[0], getLse(),
      getIgnoreIndexAttr(), getSumAttr());
  return success();
}

LOOM_GRADIENT(MseLossOp) {
  if (noGradient(resultGrads, 2, operandGrads))
    return success();
  Emitter e{b, getLoc()};
  RankedTensorType t = typeOf(getPrediction());
  double scale =
      getSum() ? 2.0 : 2.0 / std::max<int64_t>(t.getNumElements(), 1);
  Value d = e.mul(e.mul(e.sub(getPrediction(), getTarget()),
                        e.scalar(getPrediction(), scale)),
                  resultGrads[0]);
  if (needed[0])
    operandGrads[0] = d;
  if (needed[1])
    operandGrads[1] = e.neg(d);
  return success();
}

//===----------------------------------------------------------------------===//
// Random ops
//===----------------------------------------------------------------------===//

/// For a fixed mask dropout is linear in its input: the gradient is the
/// same dropout (ratio, seed, step, global indexing) of the result's
/// gradient, which draws the same mask again instead of storing it.
LOOM_GRADIENT(DropoutOp) {
  if (noGradient(resultGrads, getNumOperands(), operandGrads) || !needed[0])
    return success();
  operandGrads[0] =
      DropoutOp::create(b, getLoc(), resultGrads[0], getStep(), getRatioAttr(),
                        getSeedAttr(), getIndexOffsetAttr());
  return success();
}
