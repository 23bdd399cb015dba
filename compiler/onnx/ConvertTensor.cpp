//===- ConvertTensor.cpp - ONNX constants, shapes and data movement -------===//
//
// These converters fold on the host whenever their inputs are known, which
// is how the Shape -> Gather -> Concat -> Reshape chains of exported models
// disappear.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace loom::onnx_import {
namespace {

/// Output 0 gets input 0 with a new shape (folded when it is a constant).
LogicalResult setReshaped(NodeContext &nc, ArrayRef<int64_t> shape) {
  if (const HostTensor *c = nc.constant(0)) {
    nc.setOutput(0, c->reshaped(shape));
    return success();
  }
  return nc.setResult(nc.reshape(nc.value(0), shape));
}

LogicalResult convertIdentity(NodeContext &nc) {
  if (const HostTensor *c = nc.constant(0))
    nc.setOutput(0, *c);
  else
    nc.setOutput(0, nc.value(0));
  return success();
}

LogicalResult convertConstant(NodeContext &nc) {
  if (nc.node.attribute_size() != 1)
    return nc.invalid("Constant needs exactly one attribute");
  const onnx::AttributeProto &a = nc.node.attribute(0);
  StringRef name = a.name();
  if (name == "value") {
    std::optional<DType> dtype = toDType(a.t().data_type());
    if (!dtype)
      return nc.unsupported("constant of element type " +
                            onnxTypeName(a.t().data_type()) +
                            " is not supported");
    std::string why;
    std::optional<std::string> bytes = tensorBytes(a.t(), *dtype, "", why);
    if (!bytes)
      return nc.invalid("the constant " + why);
    SmallVector<int64_t> shape(a.t().dims().begin(), a.t().dims().end());
    if (*checkedNumElements(shape) > kMaxFoldElements)
      return nc.unsupported("constant too large");
    nc.setOutput(0, HostTensor::fromBytes(*dtype, shape, *bytes));
    return success();
  }
  if (name == "value_float") {
    nc.setOutput(0, HostTensor::ofFloats(DType::F32, {}, {a.f()}));
    return success();
  }
  if (name == "value_floats") {
    std::vector<double> v(a.floats().begin(), a.floats().end());
    int64_t n = v.size();
    nc.setOutput(0, HostTensor::ofFloats(DType::F32, {n}, std::move(v)));
    return success();
  }
  if (name == "value_int") {
    nc.setOutput(0, HostTensor::ofInts(DType::I64, {}, {a.i()}));
    return success();
  }
  if (name == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    int64_t n = v.size();
    nc.setOutput(0, HostTensor::ofInts(DType::I64, {n}, std::move(v)));
    return success();
  }
  return nc.unsupported("Constant with attribute '" + name +
                        "' is not supported (sparse and string constants)");
}

LogicalResult convertConstantOfShape(NodeContext &nc) {
  auto shape = nc.constantInts(0, "the shape");
  if (failed(shape))
    return failure();
  std::optional<int64_t> count = checkedNumElements(*shape);
  if (!count)
    return nc.invalid("invalid shape " + formatShape(*shape));
  if (*count > kMaxFoldElements)
    return nc.unsupported("constant of " + Twine(*count) +
                          " elements is too large to fold");
  HostTensor fill = HostTensor::ofFloats(DType::F32, {}, {0.0});
  if (const onnx::AttributeProto *a = nc.attr("value")) {
    std::optional<DType> dtype = toDType(a->t().data_type());
    if (!dtype)
      return nc.unsupported("fill value of element type " +
                            onnxTypeName(a->t().data_type()) +
                            " is not supported");
    std::string why;
    std::optional<std::string> bytes = tensorBytes(a->t(), *dtype, "", why);
    if (!bytes || bytes->size() != elementSize(*dtype))
      return nc.invalid("the fill value must be one element");
    fill = HostTensor::fromBytes(*dtype, {}, *bytes);
  }
  nc.setOutput(0, hostBroadcast(fill, *shape));
  return success();
}

LogicalResult convertShape(NodeContext &nc) {
  auto start = nc.attrInt("start", 0);
  auto end = nc.attrInt("end", INT64_MAX);
  if (failed(start) || failed(end))
    return failure();
  ArrayRef<int64_t> shape = nc.shape(0);
  int64_t rank = shape.size();
  auto clampDim = [&](int64_t v) {
    if (v < 0)
      v = std::max<int64_t>(v, -rank) + rank;
    return std::min(v, rank);
  };
  int64_t s = clampDim(*start), e = std::max(clampDim(*end), s);
  std::vector<int64_t> dims(shape.begin() + s, shape.begin() + e);
  int64_t n = dims.size();
  nc.setOutput(0, HostTensor::ofInts(DType::I64, {n}, std::move(dims)));
  return success();
}

LogicalResult convertSize(NodeContext &nc) {
  nc.setOutput(
      0, HostTensor::ofInts(DType::I64, {}, {nc.type(0).getNumElements()}));
  return success();
}

LogicalResult convertReshape(NodeContext &nc) {
  auto target = nc.constantInts(1, "the target shape");
  auto allowZero = nc.attrInt("allowzero", 0);
  if (failed(target) || failed(allowZero))
    return failure();
  ArrayRef<int64_t> in = nc.shape(0);
  SmallVector<int64_t> shape;
  int inferIndex = -1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !*allowZero) {
      if (i >= in.size())
        return nc.invalid("shape entry " + Twine(i) +
                          " is 0 (copy) but the input has rank " +
                          Twine(in.size()));
      shape.push_back(in[i]);
    } else if (d == -1) {
      if (inferIndex >= 0)
        return nc.invalid("the target shape has more than one -1");
      inferIndex = i;
      shape.push_back(1);
    } else if (d < 0) {
      return nc.invalid("the target shape has negative entry " + Twine(d));
    } else {
      shape.push_back(d);
    }
  }
  std::optional<int64_t> known = checkedNumElements(shape);
  int64_t total = *checkedNumElements(in);
  if (!known)
    return nc.invalid("invalid target shape " + formatShape(shape));
  if (inferIndex >= 0) {
    if (*known == 0 || total % *known != 0)
      return nc.invalid("cannot infer the -1 of " + formatShape(*target) +
                        " for " + Twine(total) + " elements");
    shape[inferIndex] = total / *known;
  } else if (*known != total) {
    return nc.invalid("cannot reshape " + formatShape(in) + " to " +
                      formatShape(shape));
  }
  return setReshaped(nc, shape);
}

LogicalResult convertFlatten(NodeContext &nc) {
  auto axis = nc.attrInt("axis", 1);
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> in = nc.shape(0);
  int64_t rank = in.size();
  int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a > rank)
    return nc.invalid("axis " + Twine(*axis) + " is out of range for rank " +
                      Twine(rank));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < a ? outer : inner) *= in[d];
  return setReshaped(nc, {outer, inner});
}

/// The integer list an operator took as attribute `name` before version
/// `asInputFrom` and takes as (constant) input `input` since: Squeeze's and
/// Unsqueeze's axes, Split's sizes. std::nullopt inside if not given.
FailureOr<std::optional<std::vector<int64_t>>>
intsInputOrAttr(NodeContext &nc, int input, StringRef name, int64_t asInputFrom,
                StringRef what) {
  if (nc.version < asInputFrom)
    return nc.attrInts(name);
  if (!nc.hasInput(input))
    return std::optional<std::vector<int64_t>>();
  auto given = nc.constantInts(input, what);
  if (failed(given))
    return failure();
  return std::optional<std::vector<int64_t>>(std::move(*given));
}

LogicalResult convertSqueeze(NodeContext &nc) {
  ArrayRef<int64_t> in = nc.shape(0);
  SmallVector<bool> drop(in.size(), false);
  auto axes = intsInputOrAttr(nc, 1, "axes", 13, "the axes");
  if (failed(axes))
    return failure();
  if (*axes) {
    for (int64_t a : **axes) {
      auto n = nc.normalizeAxis(a, in.size());
      if (failed(n))
        return failure();
      if (in[*n] != 1)
        return nc.invalid("cannot squeeze dimension " + Twine(*n) +
                          " of size " + Twine(in[*n]));
      drop[*n] = true;
    }
  } else {
    for (size_t d = 0; d < in.size(); ++d)
      drop[d] = in[d] == 1;
  }
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d])
      shape.push_back(in[d]);
  return setReshaped(nc, shape);
}

LogicalResult convertUnsqueeze(NodeContext &nc) {
  auto given = intsInputOrAttr(nc, 1, "axes", 13, "the axes");
  if (failed(given))
    return failure();
  if (!*given)
    return nc.invalid("Unsqueeze needs its axes");
  const std::vector<int64_t> *axes = &**given;
  ArrayRef<int64_t> in = nc.shape(0);
  int64_t outRank = in.size() + axes->size();
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : *axes) {
    auto n = nc.normalizeAxis(a, outRank);
    if (failed(n))
      return failure();
    if (inserted[*n])
      return nc.invalid("axes repeat dimension " + Twine(*n));
    inserted[*n] = true;
  }
  SmallVector<int64_t> shape;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    shape.push_back(inserted[d] ? 1 : in[next++]);
  return setReshaped(nc, shape);
}

LogicalResult convertTranspose(NodeContext &nc) {
  auto given = nc.attrInts("perm");
  if (failed(given))
    return failure();
  int64_t rank = nc.rank(0);
  SmallVector<int64_t> perm;
  if (*given)
    perm.assign((*given)->begin(), (*given)->end());
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  if (const HostTensor *c = nc.constant(0)) {
    SmallVector<int64_t> sorted(perm);
    llvm::sort(sorted);
    for (int64_t d = 0; d < rank; ++d)
      if (static_cast<int64_t>(sorted.size()) != rank || sorted[d] != d)
        return nc.invalid("perm is not a permutation of the dimensions");
    nc.setOutput(0, hostTranspose(*c, perm));
    return success();
  }
  return nc.setResult(nc.create<TransposeOp>(
      nc.value(0), nc.builder.getDenseI64ArrayAttr(perm)));
}

LogicalResult convertGather(NodeContext &nc) {
  auto axis = nc.attrInt("axis", 0);
  if (failed(axis))
    return failure();
  auto a = nc.normalizeAxis(*axis, nc.rank(0));
  if (failed(a))
    return failure();
  const HostTensor *data = nc.constant(0), *indices = nc.constant(1);
  if (indices && (indices->isFloat() || indices->dtype == DType::Bool))
    return nc.invalid("indices must be integers");
  if (indices) {
    int64_t dim = nc.shape(0)[*a];
    for (int64_t i : indices->ints)
      if (i < -dim || i >= dim)
        return nc.invalid("index " + Twine(i) + " is out of range for " +
                          "dimension " + Twine(*a) + " of size " + Twine(dim));
  }
  if (data && indices) {
    nc.setOutput(0, hostGather(*data, *indices, *a));
    return success();
  }
  return nc.setResult(nc.create<GatherOp>(nc.value(0), nc.value(1),
                                          nc.builder.getI64IntegerAttr(*a)));
}

LogicalResult convertConcat(NodeContext &nc) {
  auto axis = nc.attrInt("axis", INT64_MIN);
  if (failed(axis))
    return failure();
  if (*axis == INT64_MIN)
    return nc.invalid("Concat needs the 'axis' attribute");
  if (nc.node.input_size() == 0)
    return nc.invalid("Concat needs at least one input");
  auto a = nc.normalizeAxis(*axis, nc.rank(0));
  if (failed(a))
    return failure();
  if (nc.allConstant()) {
    SmallVector<const HostTensor *> inputs;
    for (int i = 0; i < nc.node.input_size(); ++i) {
      const HostTensor *c = nc.constant(i);
      if (c->dtype != nc.constant(0)->dtype ||
          c->shape.size() != nc.constant(0)->shape.size())
        return nc.invalid("Concat inputs differ in element type or rank");
      for (size_t d = 0; d < c->shape.size(); ++d)
        if (static_cast<int64_t>(d) != *a &&
            c->shape[d] != nc.constant(0)->shape[d])
          return nc.invalid("Concat inputs differ in dimension " + Twine(d));
      inputs.push_back(c);
    }
    nc.setOutput(0, hostConcat(inputs, *a));
    return success();
  }
  SmallVector<Value> inputs;
  for (int i = 0; i < nc.node.input_size(); ++i)
    inputs.push_back(nc.value(i));
  return nc.setResult(
      nc.create<ConcatOp>(inputs, nc.builder.getI64IntegerAttr(*a)));
}

/// Creates a slice of input 0 (folded when it is a constant).
LogicalResult emitSlice(NodeContext &nc, int output, ArrayRef<int64_t> starts,
                        ArrayRef<int64_t> sizes, ArrayRef<int64_t> strides) {
  if (const HostTensor *c = nc.constant(0)) {
    nc.setOutput(output, hostSlice(*c, starts, sizes, strides));
    return success();
  }
  ArrayRef<int64_t> in = nc.shape(0);
  if (llvm::equal(sizes, in) &&
      llvm::all_of(starts, [](int64_t s) { return s == 0; }) &&
      llvm::all_of(strides, [](int64_t s) { return s == 1; })) {
    nc.setOutput(output, nc.value(0));
    return success();
  }
  auto slice =
      nc.create<SliceOp>(nc.value(0), nc.builder.getDenseI64ArrayAttr(starts),
                         nc.builder.getDenseI64ArrayAttr(sizes),
                         nc.builder.getDenseI64ArrayAttr(strides));
  if (failed(slice))
    return failure();
  nc.setOutput(output, *slice);
  return success();
}

LogicalResult convertSlice(NodeContext &nc) {
  auto startsIn = nc.constantInts(1, "the starts");
  auto endsIn = nc.constantInts(2, "the ends");
  if (failed(startsIn) || failed(endsIn))
    return failure();
  ArrayRef<int64_t> in = nc.shape(0);
  int64_t rank = in.size();
  size_t n = startsIn->size();
  std::vector<int64_t> axes, steps(n, 1);
  if (nc.hasInput(3)) {
    auto given = nc.constantInts(3, "the axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    for (size_t i = 0; i < n; ++i)
      axes.push_back(i);
  }
  if (nc.hasInput(4)) {
    auto given = nc.constantInts(4, "the steps");
    if (failed(given))
      return failure();
    steps = *given;
  }
  if (endsIn->size() != n || axes.size() != n || steps.size() != n)
    return nc.invalid("starts, ends, axes and steps differ in length");
  SmallVector<int64_t> starts(rank, 0), sizes(in), strides(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    auto axis = nc.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return nc.invalid("axes repeat dimension " + Twine(*axis));
    seen[*axis] = true;
    int64_t dim = in[*axis], step = steps[i];
    if (step == 0)
      return nc.invalid("a step is 0");
    int64_t start = (*startsIn)[i], end = (*endsIn)[i];
    if (start < 0)
      start = start < -dim ? -1 : start + dim;
    if (end < 0)
      end = end < -dim ? -1 : end + dim;
    // Sizes in unsigned arithmetic: steps may be as large as INT64_MAX.
    int64_t size = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start)
        size = static_cast<int64_t>(
            (uint64_t(end - start) + uint64_t(step) - 1) / uint64_t(step));
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      uint64_t mag = step == INT64_MIN ? uint64_t(1) << 63 : uint64_t(-step);
      if (start > end)
        size = static_cast<int64_t>((uint64_t(start - end) + mag - 1) / mag);
    }
    starts[*axis] = size > 0 ? start : 0;
    sizes[*axis] = size;
    strides[*axis] = size > 1 ? step : 1;
  }
  return emitSlice(nc, 0, starts, sizes, strides);
}

LogicalResult convertSplit(NodeContext &nc) {
  auto axis = nc.attrInt("axis", 0);
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> in = nc.shape(0);
  auto a = nc.normalizeAxis(*axis, in.size());
  if (failed(a))
    return failure();
  int64_t outputs = nc.node.output_size();
  std::vector<int64_t> parts;
  auto given = intsInputOrAttr(nc, 1, "split", 13, "the split sizes");
  if (failed(given))
    return failure();
  if (*given) {
    parts = **given;
  } else {
    if (outputs == 0 || in[*a] % outputs != 0)
      return nc.invalid("dimension " + Twine(*a) + " of size " + Twine(in[*a]) +
                        " does not split evenly into " + Twine(outputs) +
                        " outputs");
    parts.assign(outputs, in[*a] / outputs);
  }
  int64_t total = 0;
  for (int64_t p : parts) {
    if (p < 0)
      return nc.invalid("a split size is negative");
    total += p;
  }
  if (static_cast<int64_t>(parts.size()) != outputs || total != in[*a])
    return nc.invalid("split sizes " + formatShape(parts) +
                      " do not add up to dimension size " + Twine(in[*a]) +
                      " over " + Twine(outputs) + " outputs");
  SmallVector<int64_t> starts(in.size(), 0), sizes(in), strides(in.size(), 1);
  for (int64_t i = 0; i < outputs; ++i) {
    sizes[*a] = parts[i];
    if (failed(emitSlice(nc, i, starts, sizes, strides)))
      return failure();
    starts[*a] += parts[i];
    if (starts[*a] >= in[*a])
      starts[*a] = 0; // empty trailing parts start anywhere
  }
  return success();
}

LogicalResult convertExpand(NodeContext &nc) {
  auto target = nc.constantInts(1, "the shape");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> in = nc.shape(0);
  auto shape = broadcastShapes(in, *target);
  if (!shape || !checkedNumElements(*shape))
    return nc.invalid("shape " + formatShape(in) + " cannot expand to " +
                      formatShape(*target));
  if (const HostTensor *c = nc.constant(0)) {
    if (*checkedNumElements(*shape) > kMaxFoldElements)
      return nc.unsupported("constant too large to fold");
    nc.setOutput(0, hostBroadcast(*c, *shape));
    return success();
  }
  if (ArrayRef<int64_t>(*shape) == in) {
    nc.setOutput(0, nc.value(0));
    return success();
  }
  return nc.setResult(nc.createTyped<BroadcastOp>(
      RankedTensorType::get(*shape, nc.type(0).getElementType()), nc.value(0)));
}

/// Tile as a broadcast: [d0, d1] repeated [r0, r1] is [1, d0, 1, d1]
/// broadcast to [r0, d0, r1, d1], reshaped to [r0 * d0, r1 * d1]; so its
/// gradient and sharding are the broadcast's and the reshapes'.
LogicalResult convertTile(NodeContext &nc) {
  auto repeats = nc.constantInts(1, "the repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> in = nc.shape(0);
  if (repeats->size() != in.size())
    return nc.invalid("Tile's repeats " + formatShape(*repeats) +
                      " do not match the input's rank " + Twine(in.size()));
  SmallVector<int64_t> split, expanded, tiled;
  for (size_t d = 0; d < in.size(); ++d) {
    if ((*repeats)[d] < 0)
      return nc.invalid("Tile's repeats must not be negative");
    split.append({1, in[d]});
    expanded.append({(*repeats)[d], in[d]});
    tiled.push_back((*repeats)[d] * in[d]);
  }
  if (!checkedNumElements(expanded))
    return nc.invalid("Tile's result " + formatShape(tiled) + " is too large");
  if (const HostTensor *c = nc.constant(0)) {
    if (*checkedNumElements(expanded) > kMaxFoldElements)
      return nc.unsupported("constant too large to fold");
    nc.setOutput(0,
                 hostBroadcast(c->reshaped(split), expanded).reshaped(tiled));
    return success();
  }
  if (ArrayRef<int64_t>(tiled) == in) {
    nc.setOutput(0, nc.value(0));
    return success();
  }
  auto reshaped = nc.reshape(nc.value(0), split);
  if (failed(reshaped))
    return failure();
  auto broadcast = nc.createTyped<BroadcastOp>(
      RankedTensorType::get(expanded, nc.type(0).getElementType()), *reshaped);
  if (failed(broadcast))
    return failure();
  return nc.setResult(nc.reshape(*broadcast, tiled));
}

LogicalResult convertCast(NodeContext &nc) {
  auto to = nc.attrInt("to", 0);
  if (failed(to))
    return failure();
  std::optional<DType> dtype = toDType(static_cast<int32_t>(*to));
  if (!dtype)
    return nc.unsupported("Cast to " + onnxTypeName(static_cast<int32_t>(*to)) +
                          " is not supported; Loom supports FLOAT, FLOAT16, "
                          "BFLOAT16, INT32, INT64 and BOOL");
  if (const HostTensor *c = nc.constant(0)) {
    nc.setOutput(0, c->castTo(*dtype));
    return success();
  }
  Type elementType = toMlirType(*dtype, nc.getContext());
  if (nc.type(0).getElementType() == elementType) {
    nc.setOutput(0, nc.value(0));
    return success();
  }
  return nc.setResult(nc.createTyped<CastOp>(
      RankedTensorType::get(nc.shape(0), elementType), nc.value(0)));
}

/// Range's length depends on its operands' values, so with static shapes
/// they must be known: Range always folds.
LogicalResult convertRange(NodeContext &nc) {
  static const char *const names[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i)
    if (!nc.constant(i))
      return nc.unsupported(
          Twine("the ") + names[i] + " (input '" + nc.node.input(i) +
          "') is computed at run time; Range's length depends on it, so "
          "Loom needs it to be a constant");
  const HostTensor *s = nc.constant(0), *l = nc.constant(1),
                   *d = nc.constant(2);
  if (s->numElements() != 1 || l->numElements() != 1 || d->numElements() != 1)
    return nc.invalid("Range operands must be scalars");
  double start = s->asDouble(0), limit = l->asDouble(0), delta = d->asDouble(0);
  if (delta == 0)
    return nc.invalid("Range delta is 0");
  double count = std::max(0.0, std::ceil((limit - start) / delta));
  if (!(count <= static_cast<double>(kMaxFoldElements)))
    return nc.unsupported("Range too large to fold");
  int64_t n = static_cast<int64_t>(count);
  if (s->isFloat()) {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(start + i * delta);
    nc.setOutput(
        0, HostTensor::ofFloats(s->dtype, {n}, std::move(v)).castTo(s->dtype));
  } else {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(s->ints[0] + i * d->ints[0]);
    nc.setOutput(0, HostTensor::ofInts(s->dtype, {n}, std::move(v)));
  }
  return success();
}

/// Trilu: k, the diagonal's offset, is an optional input that must be a
/// constant (it becomes the op's attribute).
LogicalResult convertTrilu(NodeContext &nc) {
  int64_t k = 0;
  if (nc.hasInput(1)) {
    const HostTensor *c = nc.constant(1);
    if (!c)
      return nc.unsupported("Trilu's k (input '" + nc.node.input(1) +
                            "') is computed at run time; Loom supports a "
                            "constant k only (an initializer, a Constant "
                            "or a value that folds)");
    if (c->isFloat() || c->dtype == DType::Bool || c->numElements() != 1)
      return nc.invalid("Trilu's k must be an integer scalar");
    k = c->ints[0];
  }
  auto upper = nc.attrInt("upper", 1);
  if (failed(upper))
    return failure();
  return nc.setResult(nc.create<TriluOp>(nc.value(0),
                                         nc.builder.getBoolAttr(*upper != 0),
                                         nc.builder.getI64IntegerAttr(k)));
}

} // namespace

void addTensorConverters(llvm::StringMap<Converter> &t) {
  t["Identity"] = {1, convertIdentity};
  t["Constant"] = {1, convertConstant};
  t["ConstantOfShape"] = {9, convertConstantOfShape};
  t["Shape"] = {1, convertShape};
  t["Size"] = {1, convertSize};
  t["Reshape"] = {5, convertReshape}; // 1: the shape an attribute
  t["Flatten"] = {1, convertFlatten};
  t["Squeeze"] = {1, convertSqueeze};
  t["Unsqueeze"] = {1, convertUnsqueeze};
  t["Transpose"] = {1, convertTranspose};
  t["Gather"] = {1, convertGather};
  t["Concat"] = {4, convertConcat}; // 1: `axis` optional, default 1
  t["Slice"] = {10, convertSlice};  // 1: starts and ends attributes
  t["Split"] = {2, convertSplit};   // 1: the sizes an optional input
  t["Expand"] = {8, convertExpand};
  t["Tile"] = {6, convertTile}; // 1: `tiles` and `axis` inputs
  t["Cast"] = {6, convertCast}; // 1: `to` a string
  t["Range"] = {11, convertRange};
  t["Trilu"] = {14, convertTrilu};
}

} // namespace loom::onnx_import
