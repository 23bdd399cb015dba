//===- ConvertNN.cpp - ONNX convolution, pooling, padding, losses ---------===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace loom::onnx_import {
namespace {

/// Spatial window parameters shared by Conv and the pools, resolved from
/// ONNX attributes (auto_pad included) into explicit 2-D values.
struct Window {
  SmallVector<int64_t> kernel, strides, dilations;
  SmallVector<int64_t> padding; // top, left, bottom, right
};

FailureOr<Window> resolveWindow(NodeContext &nc, ArrayRef<int64_t> spatial,
                                ArrayRef<int64_t> kernelFromWeight,
                                bool ceilMode) {
  Window w;
  auto kernel = nc.attrInts("kernel_shape");
  auto strides = nc.attrInts("strides");
  auto dilations = nc.attrInts("dilations");
  auto pads = nc.attrInts("pads");
  auto autoPad = nc.attrString("auto_pad", "NOTSET");
  if (failed(kernel) || failed(strides) || failed(dilations) || failed(pads) ||
      failed(autoPad))
    return failure();
  auto take = [&](const std::optional<std::vector<int64_t>> &given,
                  size_t count, int64_t dflt, StringRef name,
                  SmallVector<int64_t> &out) -> LogicalResult {
    if (!given) {
      out.assign(count, dflt);
      return success();
    }
    if (given->size() != count)
      return nc.invalid("'" + name + "' needs " + Twine(count) + " values");
    for (int64_t v : *given)
      if (v < 0 || v > (int64_t(1) << 31))
        return nc.invalid("'" + name + "' has out-of-range value " + Twine(v));
    out.assign(given->begin(), given->end());
    return success();
  };
  if (!kernelFromWeight.empty()) {
    w.kernel.assign(kernelFromWeight.begin(), kernelFromWeight.end());
    if (*kernel && ArrayRef<int64_t>(**kernel) != kernelFromWeight)
      return nc.invalid("kernel_shape " + formatShape(**kernel) +
                        " differs from the weight's " +
                        formatShape(kernelFromWeight));
  } else if (!*kernel) {
    return nc.invalid("'kernel_shape' is required");
  } else if (failed(take(*kernel, 2, 1, "kernel_shape", w.kernel))) {
    return failure();
  }
  if (failed(take(*strides, 2, 1, "strides", w.strides)) ||
      failed(take(*dilations, 2, 1, "dilations", w.dilations)) ||
      failed(take(*pads, 4, 0, "pads", w.padding)))
    return failure();
  for (int i = 0; i < 2; ++i)
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.dilations[i] < 1)
      return nc.invalid("kernel, strides and dilations must be at least 1");
  if (*autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER") {
    for (int i = 0; i < 2; ++i) {
      int64_t out = (spatial[i] + w.strides[i] - 1) / w.strides[i];
      int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[i] + span - spatial[i]);
      int64_t small = total / 2, large = total - small;
      bool upper = *autoPad == "SAME_UPPER";
      w.padding[i] = upper ? small : large;
      w.padding[i + 2] = upper ? large : small;
    }
  } else if (*autoPad == "VALID") {
    w.padding.assign(4, 0);
  } else if (*autoPad != "NOTSET") {
    return nc.invalid("unknown auto_pad '" + *autoPad + "'");
  }
  (void)ceilMode;
  return w;
}

/// Checks the input is NCHW; other spatial ranks are not supported yet.
LogicalResult require2D(NodeContext &nc) {
  if (nc.rank(0) != 4)
    return nc.unsupported(nc.node.op_type() + " over " + Twine(nc.rank(0) - 2) +
                          " spatial dimensions is not supported; Loom "
                          "supports 2-D (NCHW) inputs");
  return success();
}

LogicalResult convertConv(NodeContext &nc) {
  if (failed(require2D(nc)))
    return failure();
  if (nc.rank(1) != 4)
    return nc.invalid("the weight must be [O, C/groups, KH, KW]");
  auto group = nc.attrInt("group", 1);
  if (failed(group))
    return failure();
  auto w = resolveWindow(nc, nc.shape(0).drop_front(2),
                         nc.shape(1).drop_front(2), false);
  if (failed(w))
    return failure();
  Value bias = nc.hasInput(2) ? nc.value(2) : Value();
  auto result =
      nc.create<Conv2DOp>(nc.value(0), nc.value(1), bias,
                          nc.builder.getDenseI64ArrayAttr(w->strides),
                          nc.builder.getDenseI64ArrayAttr(w->padding),
                          nc.builder.getDenseI64ArrayAttr(w->dilations),
                          nc.builder.getI64IntegerAttr(*group));
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// ConvTranspose's window over `dims` spatial dimensions, resolved from its
/// attributes (output_shape and auto_pad included) into explicit values.
struct TransposedWindow {
  SmallVector<int64_t> strides, dilations, pads, extra; // pads: begins, ends
};

FailureOr<TransposedWindow> resolveTransposedWindow(NodeContext &nc,
                                                    ArrayRef<int64_t> in,
                                                    ArrayRef<int64_t> kernel) {
  size_t dims = in.size();
  auto kernelShape = nc.attrInts("kernel_shape");
  auto strides = nc.attrInts("strides");
  auto dilations = nc.attrInts("dilations");
  auto pads = nc.attrInts("pads");
  auto extra = nc.attrInts("output_padding");
  auto outputShape = nc.attrInts("output_shape");
  auto autoPad = nc.attrString("auto_pad", "NOTSET");
  if (failed(kernelShape) || failed(strides) || failed(dilations) ||
      failed(pads) || failed(extra) || failed(outputShape) || failed(autoPad))
    return failure();
  auto take = [&](const std::optional<std::vector<int64_t>> &given,
                  size_t count, int64_t dflt, int64_t least, StringRef name,
                  SmallVector<int64_t> &out) -> LogicalResult {
    out.assign(count, dflt);
    if (!given)
      return success();
    if (given->size() != count)
      return nc.invalid("'" + name + "' needs " + Twine(count) + " values");
    for (int64_t v : *given)
      if (v < least || v > (int64_t(1) << 31))
        return nc.invalid("'" + name + "' has out-of-range value " + Twine(v));
    out.assign(given->begin(), given->end());
    return success();
  };
  // output_shape may also name the batch and channels (as onnxruntime reads
  // it): the spatial sizes are its last entries.
  if (*outputShape && (*outputShape)->size() == dims + 2)
    (*outputShape)->erase((*outputShape)->begin(), (*outputShape)->begin() + 2);
  TransposedWindow w;
  SmallVector<int64_t> target;
  if (*kernelShape && ArrayRef<int64_t>(**kernelShape) != kernel)
    return nc.invalid("kernel_shape " + formatShape(**kernelShape) +
                      " differs from the weight's " + formatShape(kernel));
  if (failed(take(*strides, dims, 1, 1, "strides", w.strides)) ||
      failed(take(*dilations, dims, 1, 1, "dilations", w.dilations)) ||
      failed(take(*pads, 2 * dims, 0, 0, "pads", w.pads)) ||
      failed(take(*extra, dims, 0, 0, "output_padding", w.extra)) ||
      failed(take(*outputShape, dims, 0, 1, "output_shape", target)))
    return failure();
  bool same = *autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER";
  if (*autoPad == "VALID")
    w.pads.assign(2 * dims, 0);
  else if (!same && *autoPad != "NOTSET")
    return nc.invalid("unknown auto_pad '" + *autoPad + "'");
  // The total padding that gives the requested output, split as ONNX
  // does; a negative end is more output_padding.
  for (size_t i = 0; i < dims && (*outputShape || same); ++i) {
    int64_t want = *outputShape ? target[i] : in[i] * w.strides[i];
    int64_t total = w.strides[i] * (in[i] - 1) + w.extra[i] +
                    (kernel[i] - 1) * w.dilations[i] + 1 - want;
    int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); // floor
    bool upper = *autoPad == "SAME_UPPER";
    int64_t begin = upper ? half : total - half, end = total - begin;
    if (begin < 0)
      return nc.unsupported(
          "output_shape " + formatShape(target) +
          " needs padding before the output; Loom supports output_shape "
          "only up to the output_padding it implies (less than a stride)");
    w.pads[i] = begin;
    w.pads[i + dims] = std::max<int64_t>(end, 0);
    w.extra[i] -= std::min<int64_t>(end, 0);
  }
  // The rows past the last window are the convolution's unread tail.
  for (size_t i = 0; i < dims; ++i)
    if (w.extra[i] >= w.strides[i])
      return nc.unsupported(
          "output_padding " + formatShape(w.extra) + " (attribute " +
          (*outputShape ? "'output_shape'" : "'output_padding'") +
          ") is not smaller than the strides " + formatShape(w.strides) +
          "; Loom supports output padding less than the stride");
  return w;
}

/// ConvTranspose (1-D and 2-D) as loom.conv_transpose2d: a 1-D one reads
/// its input and weight with a unit height.
LogicalResult convertConvTranspose(NodeContext &nc) {
  int64_t rank = nc.rank(0);
  if (rank != 3 && rank != 4)
    return nc.unsupported("ConvTranspose over " + Twine(rank - 2) +
                          " spatial dimensions is not supported; Loom "
                          "supports 1-D and 2-D (NCW, NCHW) inputs");
  if (nc.rank(1) != rank)
    return nc.invalid("the weight must be [C, O/group, kernel...] of the "
                      "input's rank");
  auto group = nc.attrInt("group", 1);
  if (failed(group))
    return failure();
  auto w = resolveTransposedWindow(nc, nc.shape(0).drop_front(2),
                                   nc.shape(1).drop_front(2));
  if (failed(w))
    return failure();
  Value x = nc.value(0), weight = nc.value(1);
  if (rank == 3) { // as 2-D: height 1, no stride, padding or dilation there
    auto unitHeight = [&](Value v) {
      ArrayRef<int64_t> s = cast<RankedTensorType>(v.getType()).getShape();
      return nc.reshape(v, {s[0], s[1], 1, s[2]});
    };
    auto x2 = unitHeight(x), weight2 = unitHeight(weight);
    if (failed(x2) || failed(weight2))
      return failure();
    x = *x2, weight = *weight2;
    w->strides.insert(w->strides.begin(), 1);
    w->dilations.insert(w->dilations.begin(), 1);
    w->extra.insert(w->extra.begin(), 0);
    w->pads = {0, w->pads[0], 0, w->pads[1]};
  }
  Value bias = nc.hasInput(2) ? nc.value(2) : Value();
  auto result = nc.create<ConvTranspose2DOp>(
      x, weight, bias, nc.builder.getDenseI64ArrayAttr(w->strides),
      nc.builder.getDenseI64ArrayAttr(w->pads),
      nc.builder.getDenseI64ArrayAttr(w->dilations),
      nc.builder.getI64IntegerAttr(*group),
      nc.builder.getDenseI64ArrayAttr(w->extra));
  if (failed(result) || rank == 4)
    return nc.setResult(result);
  ArrayRef<int64_t> y = cast<RankedTensorType>(result->getType()).getShape();
  return nc.setResult(nc.reshape(*result, {y[0], y[1], y[3]}));
}

LogicalResult convertMaxPool(NodeContext &nc) {
  if (failed(require2D(nc)))
    return failure();
  if (nc.hasOutput(1))
    return nc.unsupported("MaxPool's Indices output is not supported");
  auto ceil = nc.attrInt("ceil_mode", 0);
  auto order = nc.attrInt("storage_order", 0);
  if (failed(ceil) || failed(order))
    return failure();
  auto w = resolveWindow(nc, nc.shape(0).drop_front(2), {}, *ceil);
  if (failed(w))
    return failure();
  auto result = nc.create<MaxPool2DOp>(
      nc.value(0), nc.builder.getDenseI64ArrayAttr(w->kernel),
      nc.builder.getDenseI64ArrayAttr(w->strides),
      nc.builder.getDenseI64ArrayAttr(w->padding),
      nc.builder.getDenseI64ArrayAttr(w->dilations),
      *ceil ? nc.builder.getUnitAttr() : UnitAttr());
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

LogicalResult convertAveragePool(NodeContext &nc) {
  if (failed(require2D(nc)))
    return failure();
  auto ceil = nc.attrInt("ceil_mode", 0);
  auto includePad = nc.attrInt("count_include_pad", 0);
  if (failed(ceil) || failed(includePad))
    return failure();
  auto w = resolveWindow(nc, nc.shape(0).drop_front(2), {}, *ceil);
  if (failed(w))
    return failure();
  UnitAttr unit = nc.builder.getUnitAttr();
  auto result = nc.create<AvgPool2DOp>(
      nc.value(0), nc.builder.getDenseI64ArrayAttr(w->kernel),
      nc.builder.getDenseI64ArrayAttr(w->strides),
      nc.builder.getDenseI64ArrayAttr(w->padding),
      nc.builder.getDenseI64ArrayAttr(w->dilations), *ceil ? unit : UnitAttr(),
      *includePad ? unit : UnitAttr());
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// GlobalAveragePool and GlobalMaxPool: the mean or the maximum over every
/// spatial axis (2 onward), kept as size 1.
template <typename ReduceOpTy>
LogicalResult convertGlobalPool(NodeContext &nc) {
  if (nc.rank(0) < 3)
    return nc.invalid(nc.node.op_type() +
                      " needs an input of rank at least 3 (N, C, spatial...), "
                      "not " +
                      formatShape(nc.shape(0)));
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < nc.rank(0); ++d)
    axes.push_back(d);
  auto result =
      nc.create<ReduceOpTy>(nc.value(0), nc.builder.getDenseI64ArrayAttr(axes),
                            nc.builder.getUnitAttr());
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// PRelu (7, with numpy broadcasting of the slope to the input):
/// x where x > 0, slope * x elsewhere, as PyTorch's prelu (whose gradient
/// at 0 is the slope's branch).
LogicalResult convertPRelu(NodeContext &nc) {
  Value x = nc.value(0);
  Type element = nc.type(0).getElementType();
  auto positive = nc.create<GreaterOp>(x, nc.scalar(element, 0.0));
  if (failed(positive))
    return failure();
  auto scaled = nc.create<MulOp>(x, nc.value(1));
  if (failed(scaled))
    return failure();
  if (cast<RankedTensorType>(scaled->getType()).getShape() != nc.shape(0))
    return nc.invalid("the slope " + Twine(nc.node.input(1)) +
                      " does not broadcast to the input's shape");
  auto result = nc.create<SelectOp>(*positive, x, *scaled);
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// A stable 64-bit hash (FNV-1a) of `text`: a dropout node's seed.
uint64_t stableHash(llvm::StringRef text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text.bytes()) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// Dropout is the identity at inference (training_mode false or absent,
/// or Dropout-10, which has no training mode) and with ratio 0; its mask
/// is then all true. In training mode with a ratio in (0, 1) it is
/// loom.dropout, whose seed is a hash of the node's name (and of its
/// `seed` attribute when given), so that two nodes draw different masks
/// and a recompile draws the same ones.
LogicalResult convertDropout(NodeContext &nc) {
  bool training = false;
  double ratio = 0.5;
  // Dropout-10 has no training mode: its `ratio` attribute is never used.
  if (nc.version >= 12) {
    if (nc.hasInput(2)) {
      const HostTensor *mode = nc.constant(2);
      if (!mode)
        return nc.unsupported(
            "the training_mode (input '" + nc.node.input(2) +
            "') is computed at run time; Loom decides when it compiles "
            "whether a Dropout drops, so it must be a constant (an "
            "initializer or a Constant node)");
      training = mode->numElements() == 1 && mode->asInt(0) != 0;
    }
    // At inference the ratio is not read (it may be a run-time value).
    if (training && nc.hasInput(1)) {
      const HostTensor *r = nc.constant(1);
      if (!r)
        return nc.unsupported("the ratio (input '" + nc.node.input(1) +
                              "') is computed at run time; Loom needs "
                              "Dropout's ratio a constant");
      if (r->numElements() != 1)
        return nc.invalid("Dropout's ratio (input '" + nc.node.input(1) +
                          "') must be a scalar");
      ratio = r->asDouble(0);
    }
  }
  if (training && ratio != 0) {
    if (!(ratio > 0 && ratio < 1))
      return nc.invalid("Dropout's ratio must be in [0, 1), got " +
                        std::to_string(ratio));
    std::string name =
        nc.node.name().empty() ? nc.node.output(0) : nc.node.name();
    if (const onnx::AttributeProto *seed = nc.attr("seed"))
      name += "#seed=" + std::to_string(seed->i());
    FloatAttr ratioAttr = nc.builder.getF32FloatAttr(ratio);
    IntegerAttr seedAttr =
        nc.builder.getI64IntegerAttr(static_cast<int64_t>(stableHash(name)));
    FailureOr<Value> y = nc.create<DropoutOp>(nc.value(0), Value(), ratioAttr,
                                              seedAttr, IntegerAttr());
    if (failed(y))
      return failure();
    nc.setOutput(0, *y);
    if (nc.hasOutput(1)) {
      // The mask: the same dropout of ones is non-zero where it keeps. An
      // unused mask (exporters name it anyway) is dead code, which CSE
      // erases.
      RankedTensorType type = nc.type(0);
      FailureOr<Value> ones = nc.createTyped<BroadcastOp>(
          type, nc.scalar(type.getElementType(), 1.0));
      if (failed(ones))
        return failure();
      FailureOr<Value> kept = nc.create<DropoutOp>(*ones, Value(), ratioAttr,
                                                   seedAttr, IntegerAttr());
      if (failed(kept))
        return failure();
      FailureOr<Value> mask = nc.createTyped<CastOp>(
          RankedTensorType::get(type.getShape(), nc.builder.getI1Type()),
          *kept);
      if (failed(mask))
        return failure();
      nc.setOutput(1, *mask);
    }
    return success();
  }
  if (const HostTensor *c = nc.constant(0))
    nc.setOutput(0, *c);
  else
    nc.setOutput(0, nc.value(0));
  if (nc.hasOutput(1)) {
    auto count = checkedNumElements(nc.shape(0));
    if (*count > kMaxFoldElements)
      return nc.unsupported("Dropout's mask output is too large");
    nc.setOutput(1, HostTensor::ofInts(DType::Bool, nc.shape(0),
                                       std::vector<int64_t>(*count, 1)));
  }
  return success();
}

/// NegativeLogLikelihoodLoss on `logProb` [N, C, d...] (one row of class
/// scores per element) and integer targets [N, d...], as a composition:
/// the target's score picked by a one-hot comparison with the classes, the
/// class weights gathered by target, ignored targets masked, then the
/// reduction. Its kernels, gradient and sharding are those ops'.
FailureOr<Value> negativeLogLikelihood(NodeContext &nc, Value logProb,
                                       Value target, Value weight) {
  auto scoresType = cast<RankedTensorType>(logProb.getType());
  auto targetType = cast<RankedTensorType>(target.getType());
  ArrayRef<int64_t> scores = scoresType.getShape();
  Type element = scoresType.getElementType(),
       index = targetType.getElementType();
  if (scores.size() < 2)
    return nc.invalid("the input must have rank at least 2 ([N, C, ...]), "
                      "not " +
                      formatShape(scores));
  SmallVector<int64_t> expected(scores.begin(), scores.end());
  expected.erase(expected.begin() + 1);
  if (targetType.getShape() != ArrayRef<int64_t>(expected) ||
      !isa<IntegerType>(index))
    return nc.invalid("the target must be integers of shape " +
                      formatShape(expected));
  auto reduction = nc.attrString("reduction", "mean");
  if (failed(reduction))
    return failure();
  if (*reduction != "none" && *reduction != "sum" && *reduction != "mean")
    return nc.invalid("reduction '" + *reduction +
                      "' is not one of none, sum and mean");
  const onnx::AttributeProto *ignoreAttr = nc.attr("ignore_index");
  std::optional<int64_t> ignore;
  if (ignoreAttr) {
    auto v = nc.attrInt("ignore_index", 0);
    if (failed(v))
      return failure();
    ignore = *v;
  }
  int64_t classes = scores[1];

  // The one-hot mask [N, C, d...]: target (as [N, 1, d...]) == class.
  SmallVector<int64_t> column(expected.begin(), expected.end());
  column.insert(column.begin() + 1, 1);
  auto targetColumn = nc.reshape(target, column);
  if (failed(targetColumn))
    return failure();
  SmallVector<int64_t> classShape(scores.size(), 1);
  classShape[1] = classes;
  std::vector<int64_t> ids(classes);
  for (int64_t c = 0; c < classes; ++c)
    ids[c] = c;
  std::optional<DType> indexType = fromMlirType(index);
  Value classIds = nc.constantValue(
      HostTensor::ofInts(*indexType, classShape, std::move(ids)));
  auto oneHot = nc.create<EqualOp>(*targetColumn, classIds);
  if (failed(oneHot))
    return failure();
  auto picked = nc.create<SelectOp>(*oneHot, logProb, nc.scalar(element, 0));
  if (failed(picked))
    return failure();
  auto score = nc.create<ReduceSumOp>(
      *picked, nc.builder.getDenseI64ArrayAttr({1}), UnitAttr());
  if (failed(score))
    return failure();

  // Each element's weight: the class weight of its target, 0 if ignored.
  Value valid;
  if (ignore) {
    auto isIgnored = nc.create<EqualOp>(target, nc.scalar(index, *ignore));
    if (failed(isIgnored))
      return failure();
    auto notIgnored = nc.create<NotOp>(*isIgnored);
    if (failed(notIgnored))
      return failure();
    valid = *notIgnored;
  }
  Value weights;
  if (weight) {
    Value safeTarget = target;
    if (valid) { // an ignored target may be out of range: gather class 0
      auto safe = nc.create<SelectOp>(valid, target, nc.scalar(index, 0));
      if (failed(safe))
        return failure();
      safeTarget = *safe;
    }
    auto gathered = nc.create<GatherOp>(weight, safeTarget,
                                        nc.builder.getI64IntegerAttr(0));
    if (failed(gathered))
      return failure();
    weights = *gathered;
    if (valid) {
      auto masked = nc.create<SelectOp>(valid, weights, nc.scalar(element, 0));
      if (failed(masked))
        return failure();
      weights = *masked;
    }
  } else if (valid) {
    auto ones =
        nc.createTyped<CastOp>(RankedTensorType::get(expected, element), valid);
    if (failed(ones))
      return failure();
    weights = *ones;
  }
  Value loss = *score;
  if (weights) {
    auto weighted = nc.create<MulOp>(loss, weights);
    if (failed(weighted))
      return failure();
    loss = *weighted;
  }
  auto negated = nc.create<NegOp>(loss);
  if (failed(negated))
    return failure();
  loss = *negated;
  if (*reduction == "none")
    return loss;
  SmallVector<int64_t> all;
  for (size_t d = 0; d < expected.size(); ++d)
    all.push_back(d);
  auto allAxes = nc.builder.getDenseI64ArrayAttr(all);
  auto total = nc.create<ReduceSumOp>(loss, allAxes, UnitAttr());
  if (failed(total) || *reduction == "sum")
    return total;
  if (!weights)
    return nc.create<DivOp>(
        *total,
        nc.scalar(element, static_cast<double>(*checkedNumElements(expected))));
  // The mean over the weights of the elements that count.
  auto weightSum = nc.create<ReduceSumOp>(weights, allAxes, UnitAttr());
  if (failed(weightSum))
    return failure();
  return nc.create<DivOp>(*total, *weightSum);
}

LogicalResult convertNegativeLogLikelihoodLoss(NodeContext &nc) {
  auto loss = negativeLogLikelihood(nc, nc.value(0), nc.value(1),
                                    nc.hasInput(2) ? nc.value(2) : Value());
  if (failed(loss))
    return failure();
  nc.setOutput(0, *loss);
  return success();
}

/// SoftmaxCrossEntropyLoss: log_softmax over the classes (axis 1), then the
/// negative log-likelihood; the optional second output is the log_softmax.
LogicalResult convertSoftmaxCrossEntropyLoss(NodeContext &nc) {
  if (nc.rank(0) < 2)
    return nc.invalid("the scores must have rank at least 2 ([N, C, ...])");
  auto logProb =
      nc.create<LogSoftmaxOp>(nc.value(0), nc.builder.getI64IntegerAttr(1));
  if (failed(logProb))
    return failure();
  auto loss = negativeLogLikelihood(nc, *logProb, nc.value(1),
                                    nc.hasInput(2) ? nc.value(2) : Value());
  if (failed(loss))
    return failure();
  nc.setOutput(0, *loss);
  if (nc.hasOutput(1))
    nc.setOutput(1, *logProb);
  return success();
}

/// Pad-2 reads `pads`, `value` and `mode` attributes; Pad-11 and later take
/// the pads and the constant value as inputs, which must be known. Negative
/// pads crop (a slice), in constant mode.
LogicalResult convertPad(NodeContext &nc) {
  auto mode = nc.attrString("mode", "constant");
  if (failed(mode))
    return failure();
  if (*mode != "constant" && *mode != "reflect" && *mode != "edge")
    return nc.unsupported("mode '" + *mode +
                          "' (attribute 'mode') is not supported; Loom pads "
                          "in the modes constant, reflect and edge");
  std::vector<int64_t> pads;
  double value = 0;
  if (nc.version < 11) {
    auto given = nc.attrInts("pads");
    auto v = nc.attrFloat("value", 0.0f);
    if (failed(given) || failed(v))
      return failure();
    if (!*given)
      return nc.invalid("Pad needs the 'pads' attribute");
    pads = **given;
    value = *v;
  } else {
    if (nc.hasInput(3))
      return nc.unsupported("the axes input (Pad-18) is not supported; give "
                            "pads for every dimension");
    auto given = nc.constantInts(1, "the pads");
    if (failed(given))
      return failure();
    pads = *given;
    if (nc.hasInput(2)) {
      const HostTensor *c = nc.constant(2);
      if (!c)
        return nc.unsupported("the constant_value (input '" + nc.node.input(2) +
                              "') is computed at run time; Loom needs it to "
                              "be a constant");
      if (c->numElements() != 1)
        return nc.invalid("constant_value must hold one element, not " +
                          Twine(c->numElements()));
      value = c->asDouble(0);
    }
  }
  ArrayRef<int64_t> in = nc.shape(0);
  size_t rank = in.size();
  if (pads.size() != 2 * rank)
    return nc.invalid("pads has " + Twine(pads.size()) +
                      " entries but the input has rank " + Twine(rank) +
                      ": it needs " + Twine(2 * rank));
  SmallVector<int64_t> low(pads.begin(), pads.begin() + rank),
      high(pads.begin() + rank, pads.end());
  Value input = nc.value(0);
  // Negative pads crop: slice first, then pad what remains.
  SmallVector<int64_t> starts(rank, 0), sizes(in), strides(rank, 1);
  bool crop = false;
  for (size_t d = 0; d < rank; ++d) {
    if (low[d] >= 0 && high[d] >= 0)
      continue;
    if (*mode != "constant")
      return nc.unsupported("negative pads (cropping) are supported in "
                            "constant mode only, not '" +
                            *mode + "'");
    crop = true;
    starts[d] = std::max<int64_t>(0, -low[d]);
    sizes[d] = in[d] - starts[d] - std::max<int64_t>(0, -high[d]);
    if (sizes[d] < 0)
      return nc.invalid("pads " + formatShape(pads) + " crop more than " +
                        "dimension " + Twine(d) + " of size " + Twine(in[d]));
    low[d] = std::max<int64_t>(0, low[d]);
    high[d] = std::max<int64_t>(0, high[d]);
  }
  if (crop) {
    auto slice =
        nc.create<SliceOp>(input, nc.builder.getDenseI64ArrayAttr(starts),
                           nc.builder.getDenseI64ArrayAttr(sizes),
                           nc.builder.getDenseI64ArrayAttr(strides));
    if (failed(slice))
      return failure();
    input = *slice;
  }
  if (llvm::all_of(low, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(high, [](int64_t p) { return p == 0; })) {
    nc.setOutput(0, input);
    return success();
  }
  auto padded = nc.create<PadOp>(
      input, nc.builder.getDenseI64ArrayAttr(low),
      nc.builder.getDenseI64ArrayAttr(high), nc.builder.getStringAttr(*mode),
      nc.builder.getF32FloatAttr(static_cast<float>(value)));
  if (failed(padded))
    return failure();
  nc.setOutput(0, *padded);
  return success();
}

} // namespace

void addNNConverters(llvm::StringMap<Converter> &t) {
  t["Conv"] = {1, convertConv};
  t["ConvTranspose"] = {1, convertConvTranspose};
  t["MaxPool"] = {1, convertMaxPool};
  t["AveragePool"] = {1, convertAveragePool};
  t["GlobalAveragePool"] = {1, convertGlobalPool<ReduceMeanOp>};
  t["GlobalMaxPool"] = {1, convertGlobalPool<ReduceMaxOp>};
  t["Pad"] = {2, convertPad};     // 1: `paddings`; 11: pads and value inputs
  t["PRelu"] = {7, convertPRelu}; // 6: `consumed_inputs`, no broadcasting
  // 7: the mask has the input's type; from 10 it is bool. 10 has no
  // training mode (ratio is an attribute); 12 takes ratio and
  // training_mode as inputs.
  t["Dropout"] = {10, convertDropout};
  t["NegativeLogLikelihoodLoss"] = {12, convertNegativeLogLikelihoodLoss};
  t["SoftmaxCrossEntropyLoss"] = {12, convertSoftmaxCrossEntropyLoss};
}

} // namespace loom::onnx_import
