//===- LoomTrainOps.cpp - Gradient and optimizer op types -----------------===//

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace loom;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Every value in `values` has `values[0]`'s type, which is the result type.
static LogicalResult inferSameType(std::optional<Location> loc,
                                   ArrayRef<Value> values, unsigned numResults,
                                   SmallVectorImpl<Type> &results) {
  Type type = values.front().getType();
  for (Value v : values.drop_front())
    if (v.getType() != type)
      return emitOptionalError(loc, "operands must all have type ", type,
                               ", got ", v.getType());
  results.append(numResults, type);
  return success();
}

/// `v` is a rank-0 tensor of `elementType`.
static LogicalResult checkScalar(std::optional<Location> loc, StringRef name,
                                 Value v, Type elementType) {
  RankedTensorType t = tensorType(v);
  if (t.getRank() != 0 || t.getElementType() != elementType)
    return emitOptionalError(loc, "'", name, "' must be a scalar of ",
                             elementType, ", got ", t);
  return success();
}

LogicalResult ReluGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  return inferSameType(loc, {adaptor.getInput(), adaptor.getGrad()}, 1,
                       results);
}

LogicalResult GeluGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  return inferSameType(loc, {adaptor.getInput(), adaptor.getGrad()}, 1,
                       results);
}

LogicalResult
LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             input.getRank());
  if (adaptor.getGrad().getType() != input)
    return emitOptionalError(loc, "'grad' must have the input's type");
  auto paramType = RankedTensorType::get(input.getShape().drop_front(axis),
                                         input.getElementType());
  if (adaptor.getScale().getType() != paramType)
    return emitOptionalError(loc, "'scale' must have type ", paramType);
  results.append({input, paramType, paramType});
  return success();
}

LogicalResult
ReduceMaxGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  SmallVector<Type> reduced;
  if (failed(inferReduceResult(loc, adaptor.getInput(), adaptor.getAxes(),
                               adaptor.getKeepDims(), reduced)))
    return failure();
  if (adaptor.getResult().getType() != reduced[0] ||
      adaptor.getGrad().getType() != reduced[0])
    return emitOptionalError(loc,
                             "'result' and 'grad' must have the reduction's "
                             "type ",
                             reduced[0]);
  results.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  RankedTensorType logits = tensorType(adaptor.getLogits());
  RankedTensorType labels = tensorType(adaptor.getLabels());
  if (logits.getRank() != 2 || labels.getRank() != 1 ||
      logits.getDimSize(0) != labels.getDimSize(0))
    return emitOptionalError(loc, "logits must be [N, C] and labels [N]");
  if (failed(
          checkScalar(loc, "grad", adaptor.getGrad(), logits.getElementType())))
    return failure();
  results.push_back(logits);
  return success();
}

LogicalResult SgdUpdateOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  if (failed(inferSameType(loc, {adaptor.getParam(), adaptor.getGrad()}, 1,
                           results)))
    return failure();
  return checkScalar(loc, "lr", adaptor.getLr(),
                     tensorType(adaptor.getParam()).getElementType());
}

LogicalResult
MomentumUpdateOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  if (failed(inferSameType(
          loc, {adaptor.getParam(), adaptor.getGrad(), adaptor.getVelocity()},
          2, results)))
    return failure();
  return checkScalar(loc, "lr", adaptor.getLr(),
                     tensorType(adaptor.getParam()).getElementType());
}

LogicalResult AdamUpdateOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  if (failed(inferSameType(loc,
                           {adaptor.getParam(), adaptor.getGrad(),
                            adaptor.getM(), adaptor.getV()},
                           3, results)))
    return failure();
  Type element = tensorType(adaptor.getParam()).getElementType();
  if (failed(checkScalar(loc, "lr", adaptor.getLr(), element)))
    return failure();
  return checkScalar(loc, "step", adaptor.getStep(), element);
}

//===----------------------------------------------------------------------===//
// Ops whose result type is the shape being differentiated: the verifier
// re-derives the forward shape from it and checks the gradient matches.
//===----------------------------------------------------------------------===//

/// The gradient operand has the forward result's shape and the result's
/// element type.
static LogicalResult checkGradShape(Operation *op, Value grad,
                                    ArrayRef<int64_t> forward, Type element) {
  RankedTensorType g = tensorType(grad);
  if (g.getShape() != forward || g.getElementType() != element)
    return op->emitOpError("'grad' must be ")
           << formatShape(forward) << " of " << element << ", got " << g;
  return success();
}

LogicalResult GatherGradOp::verify() {
  RankedTensorType result = tensorType(getResult());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= result.getRank())
    return emitOpError("axis ")
           << axis << " is out of range for rank " << result.getRank();
  SmallVector<int64_t> shape(result.getShape().take_front(axis));
  llvm::append_range(shape, tensorType(getIndices()).getShape());
  llvm::append_range(shape, result.getShape().drop_front(axis + 1));
  return checkGradShape(*this, getGrad(), shape, result.getElementType());
}

LogicalResult SliceGradOp::verify() {
  RankedTensorType result = tensorType(getResult());
  RankedTensorType grad = tensorType(getGrad());
  ArrayRef<int64_t> starts = getStarts(), strides = getStrides();
  if (grad.getRank() != result.getRank() ||
      static_cast<int64_t>(starts.size()) != result.getRank() ||
      static_cast<int64_t>(strides.size()) != result.getRank() ||
      grad.getElementType() != result.getElementType())
    return emitOpError("grad, starts and strides must match the result's "
                       "rank and element type");
  for (int64_t d = 0; d < result.getRank(); ++d) {
    int64_t size = grad.getDimSize(d);
    if (size == 0)
      continue;
    int64_t offset, last;
    if (strides[d] == 0 ||
        __builtin_mul_overflow(size - 1, strides[d], &offset) ||
        __builtin_add_overflow(starts[d], offset, &last) || starts[d] < 0 ||
        starts[d] >= result.getDimSize(d) || last < 0 ||
        last >= result.getDimSize(d))
      return emitOpError("the slice of dimension ")
             << d << " lies outside the result";
  }
  return success();
}

/// The conv2d output shape for an input and weight shape, or failure.
static FailureOr<SmallVector<int64_t>>
convOutput(ArrayRef<int64_t> in, ArrayRef<int64_t> w, ArrayRef<int64_t> strides,
           ArrayRef<int64_t> padding, ArrayRef<int64_t> dilations,
           int64_t groups) {
  if (in.size() != 4 || w.size() != 4 || strides.size() != 2 ||
      padding.size() != 4 || dilations.size() != 2 || groups < 1 ||
      in[1] % groups || w[0] % groups || w[1] != in[1] / groups)
    return failure();
  SmallVector<int64_t> out{in[0], w[0]};
  for (int i = 0; i < 2; ++i) {
    int64_t size = windowOutputSize(in[2 + i], w[2 + i], strides[i], padding[i],
                                    padding[i + 2], dilations[i], false);
    if (size < 1)
      return failure();
    out.push_back(size);
  }
  return out;
}

LogicalResult Conv2DGradInputOp::verify() {
  RankedTensorType result = tensorType(getResult());
  auto out =
      convOutput(result.getShape(), tensorType(getWeight()).getShape(),
                 getStrides(), getPadding(), getDilations(), getGroups());
  if (failed(out))
    return emitOpError("the convolution of the result's shape and the weight "
                       "is invalid");
  return checkGradShape(*this, getGrad(), *out, result.getElementType());
}

LogicalResult Conv2DGradWeightOp::verify() {
  RankedTensorType result = tensorType(getResult());
  auto out =
      convOutput(tensorType(getInput()).getShape(), result.getShape(),
                 getStrides(), getPadding(), getDilations(), getGroups());
  if (failed(out))
    return emitOpError("the convolution of the input and the result's shape "
                       "is invalid");
  return checkGradShape(*this, getGrad(), *out, result.getElementType());
}

/// Checks a pool gradient: pooling `inputType` gives grad's shape.
static LogicalResult verifyPoolGrad(Operation *op, RankedTensorType inputType,
                                    Value grad, ArrayRef<int64_t> kernel,
                                    ArrayRef<int64_t> strides,
                                    ArrayRef<int64_t> padding,
                                    ArrayRef<int64_t> dilations,
                                    bool ceilMode) {
  // Reuse the forward rule through a placeholder value of the input type.
  SmallVector<Type> types;
  Block block;
  Value input = block.addArgument(inputType, op->getLoc());
  if (failed(inferPool2DResult(op->getLoc(), input, kernel, strides, padding,
                               dilations, ceilMode, types)))
    return failure();
  return checkGradShape(op, grad, cast<RankedTensorType>(types[0]).getShape(),
                        inputType.getElementType());
}

LogicalResult MaxPool2DGradOp::verify() {
  if (getInput().getType() != getResult().getType())
    return emitOpError("the result must have the input's type");
  return verifyPoolGrad(*this, tensorType(getResult()), getGrad(), getKernel(),
                        getStrides(), getPadding(), getDilations(),
                        getCeilMode());
}

LogicalResult AvgPool2DGradOp::verify() {
  return verifyPoolGrad(*this, tensorType(getResult()), getGrad(), getKernel(),
                        getStrides(), getPadding(), getDilations(),
                        getCeilMode());
}
