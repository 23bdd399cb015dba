//===- LoomOps.cpp - Result type inference and verifiers of loom ops ------===//
//
// Every shape rule lives in the op's `inferReturnTypes`, which reports a
// violated constraint through the location it is given; the verifier then
// checks that the declared result type is the inferred one. Ops whose result
// type is an input of their own (cast, reshape, broadcast) have verifiers.
//
//===----------------------------------------------------------------------===//

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace loom;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Checks that `axis` is a valid dimension index for `rank`.
static LogicalResult checkAxis(std::optional<Location> loc, int64_t axis,
                               int64_t rank) {
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             rank);
  return success();
}

static bool isValidEpsilon(const APFloat &epsilon) {
  return epsilon.isFinite() && (epsilon.isZero() || !epsilon.isNegative());
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location>,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  results.push_back(adaptor.getValue().getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  if (tensorType(getInput()).getShape() != tensorType(getResult()).getShape())
    return emitOpError("result shape ")
           << formatShape(tensorType(getResult()).getShape())
           << " differs from input shape "
           << formatShape(tensorType(getInput()).getShape());
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  SmallVector<Type> values;
  if (failed(inferElementwiseResult(
          loc, {adaptor.getTrueValue(), adaptor.getFalseValue()}, values)))
    return failure();
  auto valueType = cast<RankedTensorType>(values.front());
  auto shape = broadcastShapes(valueType.getShape(),
                               tensorType(adaptor.getCondition()).getShape());
  if (!shape)
    return emitOptionalError(
        loc, "condition shape ",
        formatShape(tensorType(adaptor.getCondition()).getShape()),
        " does not broadcast with ", formatShape(valueType.getShape()));
  results.push_back(RankedTensorType::get(*shape, valueType.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

/// The result type of `op(lhs) x op(rhs)` (loom.matmul's rule).
static FailureOr<RankedTensorType>
inferMatmulType(std::optional<Location> loc, Value lhsValue, Value rhsValue,
                bool transposeLhs, bool transposeRhs) {
  RankedTensorType lhs = tensorType(lhsValue);
  RankedTensorType rhs = tensorType(rhsValue);
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "operands must have rank at least 2, got ",
                             lhs.getRank(), " and ", rhs.getRank());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "operands have different element types (",
                             lhs.getElementType(), " and ",
                             rhs.getElementType(), ")");
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  int64_t m = l[l.size() - 2], lk = l.back();
  int64_t rk = r[r.size() - 2], n = r.back();
  if (transposeLhs)
    std::swap(m, lk);
  if (transposeRhs)
    std::swap(rk, n);
  if (lk != rk)
    return emitOptionalError(loc, "contracting dimensions differ: lhs has ", lk,
                             ", rhs has ", rk);
  auto batch = broadcastShapes(l.drop_back(2), r.drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "batch dimensions ",
                             formatShape(l.drop_back(2)), " and ",
                             formatShape(r.drop_back(2)), " do not broadcast");
  batch->append({m, n});
  return RankedTensorType::get(*batch, lhs.getElementType());
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferMatmulType(loc, adaptor.getLhs(), adaptor.getRhs(),
                      adaptor.getTransposeLhs(), adaptor.getTransposeRhs());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

LogicalResult FusedMatmulOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferMatmulType(loc, adaptor.getLhs(), adaptor.getRhs(),
                      adaptor.getTransposeLhs(), adaptor.getTransposeRhs());
  if (failed(type))
    return failure();
  RankedTensorType bias = tensorType(adaptor.getBias());
  int64_t n = type->getShape().back();
  if (bias.getRank() != 1 || bias.getDimSize(0) != n ||
      bias.getElementType() != type->getElementType())
    return emitOptionalError(loc, "the bias must be a vector of ", n, " ",
                             type->getElementType(), ", got ", bias);
  results.push_back(*type);
  return success();
}

static LogicalResult inferAlongAxis(std::optional<Location> loc, Value input,
                                    int64_t axis,
                                    SmallVectorImpl<Type> &results) {
  if (failed(checkAxis(loc, axis, tensorType(input).getRank())))
    return failure();
  results.push_back(input.getType());
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferAlongAxis(loc, adaptor.getInput(), adaptor.getAxis(), results);
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  return inferAlongAxis(loc, adaptor.getInput(), adaptor.getAxis(), results);
}

/// Checks that `param` has the given shape and `input`'s element type.
static LogicalResult checkParam(std::optional<Location> loc, StringRef name,
                                Value param, ArrayRef<int64_t> shape,
                                RankedTensorType input) {
  RankedTensorType type = tensorType(param);
  if (type.getShape() != shape)
    return emitOptionalError(loc, "'", name, "' must have shape ",
                             formatShape(shape), ", got ",
                             formatShape(type.getShape()));
  if (type.getElementType() != input.getElementType())
    return emitOptionalError(loc, "'", name, "' must have element type ",
                             input.getElementType(), ", got ",
                             type.getElementType());
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, input.getRank())))
    return failure();
  if (!isValidEpsilon(adaptor.getEpsilon()))
    return emitOptionalError(loc, "epsilon must be finite and not negative");
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  if (failed(checkParam(loc, "scale", adaptor.getScale(), normalized, input)))
    return failure();
  if (adaptor.getBias() &&
      failed(checkParam(loc, "bias", adaptor.getBias(), normalized, input)))
    return failure();
  results.push_back(input);
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorType(adaptor.getInput());
  if (input.getRank() < 2)
    return emitOptionalError(loc, "input must have rank at least 2, got ",
                             input.getRank());
  if (!isValidEpsilon(adaptor.getEpsilon()))
    return emitOptionalError(loc, "epsilon must be finite and not negative");
  int64_t channels = input.getDimSize(1);
  std::pair<StringRef, Value> params[] = {{"scale", adaptor.getScale()},
                                          {"bias", adaptor.getBias()},
                                          {"mean", adaptor.getMean()},
                                          {"variance", adaptor.getVariance()}};
  for (auto [name, value] : params)
    if (failed(checkParam(loc, name, value, {channels}, input)))
      return failure();
  results.push_back(input);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorType(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (perm.size() != static_cast<size_t>(input.getRank()))
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries but the input has rank ",
                             input.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return emitOptionalError(loc, "permutation ", formatShape(perm),
                               " is not a permutation of [0, ", input.getRank(),
                               ")");
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  results.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = tensorType(getInput()), out = tensorType(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type ")
           << out.getElementType() << " differs from input element type "
           << in.getElementType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << formatShape(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << formatShape(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType in = tensorType(getInput()), out = tensorType(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type ")
           << out.getElementType() << " differs from input element type "
           << in.getElementType();
  if (!broadcastsTo(in.getShape(), out.getShape()))
    return emitOpError("input shape ")
           << formatShape(in.getShape()) << " does not broadcast to "
           << formatShape(out.getShape());
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, input.getRank())))
    return failure();
  SmallVector<int64_t> shape(input.getShape().take_front(axis));
  llvm::append_range(shape, tensorType(adaptor.getIndices()).getShape());
  llvm::append_range(shape, input.getShape().drop_front(axis + 1));
  results.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "needs at least one input");
  RankedTensorType first = tensorType(adaptor.getInputs().front());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(adaptor.getInputs().drop_front())) {
    RankedTensorType t = tensorType(v);
    if (t.getElementType() != first.getElementType() ||
        t.getRank() != first.getRank())
      return emitOptionalError(loc, "input #", i + 1, " has type ", t,
                               ", which differs from input #0's ", first,
                               " in rank or element type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != shape[d])
        return emitOptionalError(loc, "input #", i + 1, " has size ",
                                 t.getDimSize(d), " in dimension ", d,
                                 " but input #0 has ", shape[d]);
    shape[axis] += t.getDimSize(axis);
  }
  results.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorType(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), sizes = adaptor.getSizes(),
                    strides = adaptor.getStrides();
  size_t rank = input.getRank();
  if (starts.size() != rank || sizes.size() != rank || strides.size() != rank)
    return emitOptionalError(loc, "starts, sizes and strides need ", rank,
                             " entries each");
  for (size_t d = 0; d < rank; ++d) {
    if (strides[d] == 0)
      return emitOptionalError(loc, "stride of dimension ", d,
                               " must not be 0");
    if (sizes[d] < 0)
      return emitOptionalError(loc, "size of dimension ", d,
                               " must not be negative");
    if (sizes[d] == 0)
      continue;
    int64_t dim = input.getDimSize(d), offset = 0, last = 0;
    bool overflow = __builtin_mul_overflow(sizes[d] - 1, strides[d], &offset) ||
                    __builtin_add_overflow(starts[d], offset, &last);
    if (overflow)
      return emitOptionalError(loc, "slice of dimension ", d, " (size ",
                               sizes[d], ", stride ", strides[d],
                               ") overflows 64-bit indices");
    if (starts[d] < 0 || starts[d] >= dim || last < 0 || last >= dim)
      return emitOptionalError(loc, "slice of dimension ", d, " reads [",
                               starts[d], ", ", last,
                               "], outside the dimension of size ", dim);
  }
  results.push_back(RankedTensorType::get(sizes, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorType(adaptor.getInput());
  RankedTensorType weight = tensorType(adaptor.getWeight());
  if (input.getRank() != 4 || weight.getRank() != 4)
    return emitOptionalError(loc, "input and weight must have rank 4, got ",
                             input.getRank(), " and ", weight.getRank());
  if (weight.getElementType() != input.getElementType())
    return emitOptionalError(
        loc, "weight element type ", weight.getElementType(),
        " differs from the input's ", input.getElementType());
  int64_t groups = adaptor.getGroups();
  int64_t channels = input.getDimSize(1), out = weight.getDimSize(0);
  if (groups < 1 || channels % groups != 0 || out % groups != 0)
    return emitOptionalError(loc, "groups (", groups,
                             ") must be at least 1 and divide the input "
                             "channels (",
                             channels, ") and output channels (", out, ")");
  if (weight.getDimSize(1) != channels / groups)
    return emitOptionalError(loc, "weight has ", weight.getDimSize(1),
                             " input channels per group, expected ",
                             channels / groups);
  if (adaptor.getBias() &&
      failed(checkParam(loc, "bias", adaptor.getBias(), {out}, input)))
    return failure();
  ArrayRef<int64_t> strides = adaptor.getStrides(),
                    padding = adaptor.getPadding(),
                    dilations = adaptor.getDilations();
  if (strides.size() != 2 || dilations.size() != 2 || padding.size() != 4)
    return emitOptionalError(loc, "strides and dilations need 2 entries and "
                                  "padding 4");
  if (llvm::any_of(strides, [](int64_t s) { return s < 1; }) ||
      llvm::any_of(dilations, [](int64_t s) { return s < 1; }) ||
      llvm::any_of(padding, [](int64_t s) { return s < 0; }))
    return emitOptionalError(loc, "strides and dilations must be at least 1 "
                                  "and padding not negative");
  SmallVector<int64_t> shape{input.getDimSize(0), out};
  for (int i = 0; i < 2; ++i) {
    int64_t size =
        windowOutputSize(input.getDimSize(2 + i), weight.getDimSize(2 + i),
                         strides[i], padding[i], padding[i + 2], dilations[i],
                         /*ceilMode=*/false);
    if (size < 1)
      return emitOptionalError(loc, "kernel does not fit spatial dimension ", i,
                               " of size ", input.getDimSize(2 + i));
    shape.push_back(size);
  }
  results.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult AvgPool2DOp::verify() {
  if (llvm::any_of(getDilations(), [](int64_t d) { return d != 1; }))
    return emitOpError("dilations must be 1");
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  RankedTensorType logits = tensorType(adaptor.getLogits());
  RankedTensorType labels = tensorType(adaptor.getLabels());
  if (logits.getRank() != 2 || labels.getRank() != 1 ||
      logits.getDimSize(0) != labels.getDimSize(0))
    return emitOptionalError(loc, "logits must be [N, C] and labels [N], got ",
                             formatShape(logits.getShape()), " and ",
                             formatShape(labels.getShape()));
  results.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  RankedTensorType prediction = tensorType(adaptor.getPrediction());
  if (prediction != tensorType(adaptor.getTarget()))
    return emitOptionalError(loc, "prediction ", prediction, " and target ",
                             adaptor.getTarget().getType(),
                             " must have the same type");
  results.push_back(RankedTensorType::get({}, prediction.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "dialects/LoomOps.cpp.inc"
