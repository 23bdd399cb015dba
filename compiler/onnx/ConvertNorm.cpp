//===- ConvertNorm.cpp - ONNX batch, layer and instance normalisation -----===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace loom::onnx_import {
namespace {

/// `x` * scale + bias with the node's inputs 1 and 2, vectors of the
/// `channels` of dimension `channelDim` of `x`, broadcast as [C, 1, ...].
FailureOr<Value> perChannelAffine(NodeContext &nc, Value x, int64_t channelDim,
                                  int64_t channels) {
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> perChannel(rank - channelDim, 1);
  perChannel[0] = channels;
  auto scale = nc.reshape(nc.value(1), perChannel);
  auto bias = nc.reshape(nc.value(2), perChannel);
  if (failed(scale) || failed(bias))
    return failure();
  auto scaled = nc.create<MulOp>(x, *scale);
  if (failed(scaled))
    return failure();
  return nc.create<AddOp>(*scaled, *bias);
}

/// Training-mode BatchNormalization (version 14 on, `training_mode` 1), as
/// PyTorch's train() exports it: normalization with the batch's statistics
/// (the biased variance), built from reductions and elementwise ops so that
/// the gradient flows through the statistics and a batch split over devices
/// reduces them as partial sums. With ImportOptions::batchNormGroups G > 1
/// the batch is viewed as [G, N/G, ...] and each group has statistics of its
/// own (data-parallel replicas without --sync-batchnorm). The running
/// statistics are the buffers' new values (NodeContext::updateInput):
/// ONNX's `running * momentum + batch * (1 - momentum)` (PyTorch exports its
/// momentum m as 1 - m), from group 0's statistics. The batch variance in
/// the running variance is the biased one, as ONNX's reference computes it,
/// except in models PyTorch exported (producer "pytorch"), whose train()
/// takes the unbiased one (n / (n - 1) times it): Loom trains such a model
/// as PyTorch does.
LogicalResult convertTrainingBatchNorm(NodeContext &nc, float epsilon) {
  auto momentumAttr = nc.attrFloat("momentum", 0.9f);
  if (failed(momentumAttr))
    return failure();
  const double momentum = *momentumAttr;
  RankedTensorType xType = nc.type(0);
  const int64_t rank = xType.getRank();
  if (rank < 2)
    return nc.invalid("BatchNormalization needs an input of rank at least 2");
  const int64_t batch = xType.getDimSize(0), channels = xType.getDimSize(1);
  for (int i = 1; i < 5; ++i)
    if (nc.rank(i) != 1 || nc.shape(i)[0] != channels)
      return nc.invalid("BatchNormalization input " + Twine(i) +
                        " must have shape [" + Twine(channels) + "]");
  const int64_t groups =
      nc.options ? std::max<int64_t>(1, nc.options->batchNormGroups) : 1;
  if (batch % groups != 0)
    return nc.unsupported(
        "training-mode BatchNormalization takes statistics per data-parallel "
        "replica, but the batch " +
        Twine(batch) + " does not divide into " + Twine(groups) +
        " replicas; choose a batch size divisible by the replicas, or "
        "--sync-batchnorm");
  Type element = xType.getElementType();
  // x as [G, N/G, C, ...] when grouped; the statistics reduce every
  // dimension but the group and the channel.
  Value x = nc.value(0);
  SmallVector<int64_t> shape(xType.getShape());
  int64_t channelDim = 1;
  if (groups > 1) {
    shape[0] = batch / groups;
    shape.insert(shape.begin(), groups);
    channelDim = 2;
    auto grouped = nc.reshape(x, shape);
    if (failed(grouped))
      return failure();
    x = *grouped;
  }
  SmallVector<int64_t> axes;
  int64_t count = 1;
  for (int64_t d = groups > 1 ? 1 : 0; d < static_cast<int64_t>(shape.size());
       ++d)
    if (d != channelDim) {
      axes.push_back(d);
      count *= shape[d];
    }
  auto axesAttr = nc.builder.getDenseI64ArrayAttr(axes);
  auto keep = nc.builder.getUnitAttr();
  auto mean = nc.create<ReduceMeanOp>(x, axesAttr, keep);
  if (failed(mean))
    return failure();
  auto centered = nc.create<SubOp>(x, *mean);
  if (failed(centered))
    return failure();
  auto squares = nc.create<MulOp>(*centered, *centered);
  if (failed(squares))
    return failure();
  auto var = nc.create<ReduceMeanOp>(*squares, axesAttr, keep);
  if (failed(var))
    return failure();
  auto shifted = nc.create<AddOp>(*var, nc.scalar(element, epsilon));
  if (failed(shifted))
    return failure();
  auto stddev = nc.create<SqrtOp>(*shifted);
  if (failed(stddev))
    return failure();
  auto normalized = nc.create<DivOp>(*centered, *stddev);
  if (failed(normalized))
    return failure();
  auto y = perChannelAffine(nc, *normalized, channelDim, channels);
  if (failed(y))
    return failure();
  auto result = nc.reshape(*y, xType.getShape());
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);

  // The running statistics from group 0's.
  auto firstGroup = [&](Value stat) -> FailureOr<Value> {
    if (groups > 1) {
      auto type = cast<RankedTensorType>(stat.getType());
      SmallVector<int64_t> starts(type.getRank(), 0), sizes(type.getShape()),
          strides(type.getRank(), 1);
      sizes[0] = 1;
      auto sliced =
          nc.create<SliceOp>(stat, nc.builder.getDenseI64ArrayAttr(starts),
                             nc.builder.getDenseI64ArrayAttr(sizes),
                             nc.builder.getDenseI64ArrayAttr(strides));
      if (failed(sliced))
        return failure();
      stat = *sliced;
    }
    return nc.reshape(stat, {channels});
  };
  auto running = [&](int input, Value batchStat,
                     double correction) -> FailureOr<Value> {
    auto kept = nc.create<MulOp>(nc.value(input), nc.scalar(element, momentum));
    if (failed(kept))
      return failure();
    auto fresh = nc.create<MulOp>(
        batchStat, nc.scalar(element, (1.0 - momentum) * correction));
    if (failed(fresh))
      return failure();
    return nc.create<AddOp>(*kept, *fresh);
  };
  auto batchMean = firstGroup(*mean);
  auto batchVar = firstGroup(*var);
  if (failed(batchMean) || failed(batchVar))
    return failure();
  auto newMean = running(3, *batchMean, 1.0);
  const bool unbiased = nc.producer == "pytorch" && count > 1;
  auto newVar = running(
      4, *batchVar, unbiased ? static_cast<double>(count) / (count - 1) : 1.0);
  if (failed(newMean) || failed(newVar))
    return failure();
  // Buffers get their new values; constants (a frozen, folded statistic)
  // stay as they are.
  nc.updateInput(3, *newMean);
  nc.updateInput(4, *newVar);
  nc.setOutput(1, *newMean);
  nc.setOutput(2, *newVar);
  return success();
}

LogicalResult convertBatchNorm(NodeContext &nc) {
  auto training = nc.attrInt("training_mode", 0);
  auto epsilon = nc.attrFloat("epsilon", 1e-5f);
  if (failed(training) || failed(epsilon))
    return failure();
  if (*training)
    return convertTrainingBatchNorm(nc, *epsilon);
  if (nc.hasOutput(1) || nc.hasOutput(2))
    return nc.unsupported(
        "BatchNormalization's extra outputs are read only in training mode "
        "(training_mode 1, BatchNormalization version 14 on); export the "
        "model with opset 14 or later, in train() mode "
        "(TrainingMode.TRAINING) or eval mode");
  auto result =
      nc.create<BatchNormOp>(nc.value(0), nc.value(1), nc.value(2), nc.value(3),
                             nc.value(4), nc.builder.getF32FloatAttr(*epsilon));
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// LayerNormalization (opset 17). The optional Mean and InvStdDev outputs
/// are computed from primitives when the graph uses them.
LogicalResult convertLayerNorm(NodeContext &nc) {
  auto axisAttr = nc.attrInt("axis", -1);
  auto epsilon = nc.attrFloat("epsilon", 1e-5f);
  if (failed(axisAttr) || failed(epsilon))
    return failure();
  auto axis = nc.normalizeAxis(*axisAttr, nc.rank(0));
  if (failed(axis))
    return failure();
  Value x = nc.value(0);
  Value bias = nc.hasInput(2) ? nc.value(2) : Value();
  auto y = nc.create<LayerNormOp>(x, nc.value(1), bias,
                                  nc.builder.getI64IntegerAttr(*axis),
                                  nc.builder.getF32FloatAttr(*epsilon));
  if (failed(y))
    return failure();
  nc.setOutput(0, *y);
  if (!nc.hasOutput(1) && !nc.hasOutput(2))
    return success();

  SmallVector<int64_t> axes;
  for (int64_t d = *axis; d < nc.rank(0); ++d)
    axes.push_back(d);
  auto axesAttr = nc.builder.getDenseI64ArrayAttr(axes);
  UnitAttr keep = nc.builder.getUnitAttr();
  Type elementType = nc.type(0).getElementType();
  auto mean = nc.create<ReduceMeanOp>(x, axesAttr, keep);
  if (failed(mean))
    return failure();
  nc.setOutput(1, *mean);
  if (!nc.hasOutput(2))
    return success();
  auto centered = nc.create<SubOp>(x, *mean);
  if (failed(centered))
    return failure();
  auto square = nc.create<MulOp>(*centered, *centered);
  if (failed(square))
    return failure();
  auto variance = nc.create<ReduceMeanOp>(*square, axesAttr, keep);
  if (failed(variance))
    return failure();
  auto shifted = nc.create<AddOp>(*variance, nc.scalar(elementType, *epsilon));
  if (failed(shifted))
    return failure();
  auto stddev = nc.create<SqrtOp>(*shifted);
  if (failed(stddev))
    return failure();
  auto inverse = nc.create<DivOp>(nc.scalar(elementType, 1.0), *stddev);
  if (failed(inverse))
    return failure();
  nc.setOutput(2, *inverse);
  return success();
}

/// InstanceNormalization (6): each sample's channel normalised over its
/// spatial dimensions, then scaled and shifted per channel. A layer norm
/// over the dimensions from 2 (weight one) and a per-channel affine, so
/// that the batch and channel dimensions shard as in any layer norm.
/// PyTorch exports GroupNorm (opset <= 17) as this op on [N, G, -1] between
/// reshapes, with the per-channel affine after it.
LogicalResult convertInstanceNorm(NodeContext &nc) {
  auto epsilon = nc.attrFloat("epsilon", 1e-5f);
  if (failed(epsilon))
    return failure();
  int64_t rank = nc.rank(0);
  if (rank < 3)
    return nc.invalid("InstanceNormalization needs an input of rank at least "
                      "3 ([N, C, D1, ...]), got rank " +
                      Twine(rank));
  ArrayRef<int64_t> shape = nc.shape(0);
  int64_t channels = shape[1];
  for (int i : {1, 2})
    if (nc.rank(i) != 1 || nc.shape(i)[0] != channels)
      return nc.invalid(Twine(i == 1 ? "scale" : "B") +
                        " must be a vector of the " + Twine(channels) +
                        " channels");
  Type element = nc.type(0).getElementType();
  SmallVector<int64_t> spatial(shape.begin() + 2, shape.end());
  auto count = checkedNumElements(spatial);
  if (!count || *count > kMaxFoldElements)
    return nc.unsupported("InstanceNormalization over more than " +
                          Twine(kMaxFoldElements) + " elements per channel");
  auto dtype = fromMlirType(element);
  if (!dtype || !isFloat(*dtype))
    return nc.unsupported("InstanceNormalization of a non-float input");
  Value ones = nc.constantValue(HostTensor::ofFloats(
      *dtype, spatial, std::vector<double>(size_t(*count), 1.0)));
  auto normalized = nc.create<LayerNormOp>(
      nc.value(0), ones, Value(), nc.builder.getI64IntegerAttr(2),
      nc.builder.getF32FloatAttr(*epsilon));
  if (failed(normalized))
    return failure();
  return nc.setResult(perChannelAffine(nc, *normalized, 1, channels));
}

} // namespace

void addNormConverters(llvm::StringMap<Converter> &t) {
  // 7 and older: `spatial` (and `is_test`, `consumed_inputs`).
  t["BatchNormalization"] = {9, convertBatchNorm};
  t["LayerNormalization"] = {17, convertLayerNorm};
  t["InstanceNormalization"] = {6, convertInstanceNorm};
}

} // namespace loom::onnx_import
