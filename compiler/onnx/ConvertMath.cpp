//===- ConvertMath.cpp - ONNX arithmetic, matmul and reductions -----------===//

#include "compiler/onnx/NodeContext.h"

#include <array>
#include <cmath>
#include <optional>
#include <tuple>
#include <type_traits>

using namespace mlir;

namespace loom::onnx_import {
namespace {

/// Folds an elementwise binary op on two host tensors with broadcasting.
/// Integer division by zero is reported through `nc`.
FailureOr<HostTensor> foldBinary(NodeContext &nc, const HostTensor &a,
                                 const HostTensor &b, StringRef op) {
  auto shape = broadcastShapes(a.shape, b.shape);
  if (!shape || a.dtype != b.dtype) {
    return nc.invalid("operands " + formatShape(a.shape) + " and " +
                      formatShape(b.shape) +
                      " do not broadcast or differ in element type");
  }
  if (*checkedNumElements(*shape) > kMaxFoldElements) {
    return nc.unsupported("constant operands are too large to fold");
  }
  // Only an operand of another shape is copied out to the full shape: a
  // folded value can be large (a [1, 1, seq, seq] causal mask).
  std::optional<HostTensor> xb, yb;
  if (ArrayRef<int64_t>(a.shape) != ArrayRef<int64_t>(*shape))
    xb = hostBroadcast(a, *shape);
  if (ArrayRef<int64_t>(b.shape) != ArrayRef<int64_t>(*shape))
    yb = hostBroadcast(b, *shape);
  const HostTensor &x = xb ? *xb : a, &y = yb ? *yb : b;
  int64_t n = *checkedNumElements(*shape);
  if (a.isFloat()) {
    std::vector<double> out(n);
    for (int64_t i = 0; i < n; ++i) {
      double l = x.floats[i], r = y.floats[i];
      out[i] = op == "Add"   ? l + r
               : op == "Sub" ? l - r
               : op == "Mul" ? l * r
               : op == "Div" ? l / r
                             : std::pow(l, r);
    }
    return HostTensor::ofFloats(a.dtype, *shape, std::move(out))
        .castTo(a.dtype);
  }
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) {
    // Wrapping arithmetic through unsigned, as the hardware does.
    uint64_t l = x.ints[i], r = y.ints[i];
    if (op == "Add") {
      out[i] = static_cast<int64_t>(l + r);
    } else if (op == "Sub") {
      out[i] = static_cast<int64_t>(l - r);
    } else if (op == "Mul") {
      out[i] = static_cast<int64_t>(l * r);
    } else if (op == "Div") {
      if (y.ints[i] == 0 || (x.ints[i] == INT64_MIN && y.ints[i] == -1)) {
        return nc.invalid("integer division by zero or overflow in constant "
                          "operands");
      }
      out[i] = x.ints[i] / y.ints[i];
    } else {
      double p = std::pow(static_cast<double>(x.ints[i]),
                          static_cast<double>(y.ints[i]));
      out[i] = std::isfinite(p) && std::fabs(p) < 9.2e18
                   ? static_cast<int64_t>(p)
                   : 0;
    }
  }
  return HostTensor::ofInts(a.dtype, *shape, std::move(out)).castTo(a.dtype);
}

template <typename OpTy> LogicalResult convertBinary(NodeContext &nc) {
  StringRef opType = nc.node.op_type();
  if (nc.allConstant()) {
    const HostTensor *a = nc.constant(0), *b = nc.constant(1);
    HostTensor rhs = *b;
    if (opType == "Pow" && rhs.dtype != a->dtype)
      rhs = rhs.castTo(a->dtype);
    auto folded = foldBinary(nc, *a, rhs, opType);
    if (failed(folded))
      return failure();
    nc.setOutput(0, std::move(*folded));
    return success();
  }
  Value lhs = nc.value(0);
  Value rhs;
  Type elementType = nc.type(0).getElementType();
  // Pow's exponent may have another element type: convert it.
  if (opType == "Pow" && nc.type(1).getElementType() != elementType) {
    if (const HostTensor *c = nc.constant(1)) {
      std::optional<DType> dtype = fromMlirType(elementType);
      HostTensor converted = c->castTo(*dtype);
      rhs = nc.constantValue(converted);
    } else {
      auto cast = nc.createTyped<CastOp>(
          RankedTensorType::get(nc.shape(1), elementType), nc.value(1));
      if (failed(cast))
        return failure();
      rhs = *cast;
    }
  } else {
    rhs = nc.value(1);
  }
  auto result = nc.create<OpTy>(lhs, rhs);
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

template <typename OpTy> LogicalResult convertUnary(NodeContext &nc) {
  if (nc.node.op_type() == "Neg" && nc.allConstant()) {
    HostTensor t = *nc.constant(0);
    for (double &f : t.floats)
      f = -f;
    for (int64_t &i : t.ints)
      i = static_cast<int64_t>(0 - static_cast<uint64_t>(i));
    nc.setOutput(0, t.castTo(t.dtype));
    return success();
  }
  auto result = nc.create<OpTy>(nc.value(0));
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// The remainder of l / r, truncated (C's fmod) or floored (the divisor's
/// sign).
template <typename T> T remainderOf(T l, T r, bool floored) {
  T m;
  if constexpr (std::is_floating_point_v<T>)
    m = std::fmod(l, r);
  else
    m = r == -1 ? 0 : l % r;
  if (floored && m != 0 && ((m < 0) != (r < 0)))
    m += r;
  return m;
}

/// Mod: fmod=0 is the floored remainder (integers only), fmod=1 the
/// truncated one. Folded on constants (exporters emit it in shape
/// arithmetic: Swin's window shifts).
LogicalResult convertMod(NodeContext &nc) {
  auto fmod = nc.attrInt("fmod", 0);
  if (failed(fmod))
    return failure();
  bool floatType = isa<FloatType>(nc.type(0).getElementType());
  if (floatType && *fmod == 0)
    return nc.invalid("the remainder of floating-point numbers needs fmod=1 "
                      "(attribute 'fmod' is 0)");
  bool floored = *fmod == 0;
  if (nc.allConstant()) {
    const HostTensor &a = *nc.constant(0), &b = *nc.constant(1);
    auto shape = broadcastShapes(a.shape, b.shape);
    if (!shape || a.dtype != b.dtype)
      return nc.invalid("operands " + formatShape(a.shape) + " and " +
                        formatShape(b.shape) +
                        " do not broadcast or differ in element type");
    if (*checkedNumElements(*shape) > kMaxFoldElements)
      return nc.unsupported("constant operands are too large to fold");
    HostTensor x = hostBroadcast(a, *shape), y = hostBroadcast(b, *shape);
    int64_t n = x.numElements();
    if (a.isFloat()) {
      std::vector<double> out(n);
      for (int64_t i = 0; i < n; ++i)
        out[i] = remainderOf(x.floats[i], y.floats[i], floored);
      nc.setOutput(0, HostTensor::ofFloats(a.dtype, *shape, std::move(out))
                          .castTo(a.dtype));
      return success();
    }
    std::vector<int64_t> out(n);
    for (int64_t i = 0; i < n; ++i) {
      if (y.ints[i] == 0)
        return nc.invalid("integer remainder by zero in constant operands");
      out[i] = remainderOf(x.ints[i], y.ints[i], floored);
    }
    nc.setOutput(
        0, HostTensor::ofInts(a.dtype, *shape, std::move(out)).castTo(a.dtype));
    return success();
  }
  if (floored)
    return nc.setResult(nc.create<ModOp>(nc.value(0), nc.value(1)));
  return nc.setResult(nc.create<FModOp>(nc.value(0), nc.value(1)));
}

/// An activation with float attributes: each ONNX attribute in `attrs`
/// (its default beside it) becomes the loom op's f32 attribute of the same
/// name, in that order. Every float value is supported.
template <typename OpTy, size_t N>
LogicalResult
convertActivation(NodeContext &nc,
                  const std::pair<const char *, float> (&attrs)[N]) {
  std::array<FloatAttr, N> values;
  for (size_t i = 0; i < N; ++i) {
    FailureOr<float> v = nc.attrFloat(attrs[i].first, attrs[i].second);
    if (failed(v))
      return failure();
    values[i] = nc.builder.getF32FloatAttr(*v);
  }
  return std::apply(
      [&](auto... a) {
        return nc.setResult(nc.create<OpTy>(nc.value(0), a...));
      },
      values);
}

LogicalResult convertLeakyRelu(NodeContext &nc) {
  return convertActivation<LeakyReluOp>(nc, {{"alpha", 0.01f}});
}

LogicalResult convertElu(NodeContext &nc) {
  return convertActivation<EluOp>(nc, {{"alpha", 1.0f}});
}

LogicalResult convertSelu(NodeContext &nc) {
  return convertActivation<SeluOp>(nc, {{"alpha", 1.67326319217681884765625f},
                                        {"gamma", 1.05070102214813232421875f}});
}

LogicalResult convertHardSigmoid(NodeContext &nc) {
  return convertActivation<HardSigmoidOp>(nc,
                                          {{"alpha", 0.2f}, {"beta", 0.5f}});
}

/// Clip: `min` and `max` are attributes before opset 11 and optional inputs
/// from it on, which Loom needs known at import (ReLU6 exports give
/// constants). An absent bound is an infinite one.
LogicalResult convertClip(NodeContext &nc) {
  Type element = nc.type(0).getElementType();
  if (!isa<FloatType>(element)) {
    std::string type;
    llvm::raw_string_ostream(type) << element;
    return nc.unsupported("Clip of " + type +
                          " is not supported: Loom's clip takes f32, f16 or "
                          "bf16 tensors");
  }
  const char *names[] = {"min", "max"};
  float bounds[] = {-INFINITY, INFINITY};
  for (int i = 0; i < 2; ++i) {
    if (nc.version < 11) {
      FailureOr<float> v = nc.attrFloat(names[i], bounds[i]);
      if (failed(v))
        return failure();
      bounds[i] = *v;
      continue;
    }
    if (!nc.hasInput(i + 1))
      continue;
    const HostTensor *bound = nc.constant(i + 1);
    if (!bound)
      return nc.unsupported(Twine("the ") + names[i] + " (input '" +
                            nc.node.input(i + 1) +
                            "') is computed at run time; Loom needs Clip's "
                            "bounds to be constants (or absent)");
    if (bound->numElements() != 1)
      return nc.invalid(Twine("input '") + names[i] +
                        "' must be a scalar, not " + formatShape(bound->shape));
    bounds[i] = static_cast<float>(bound->asDouble(0));
  }
  return nc.setResult(nc.create<ClipOp>(nc.value(0),
                                        nc.builder.getF32FloatAttr(bounds[0]),
                                        nc.builder.getF32FloatAttr(bounds[1])));
}

/// MatMul with numpy semantics: 1-D operands are promoted and the added
/// dimension removed again.
LogicalResult convertMatMul(NodeContext &nc) {
  Value lhs = nc.value(0), rhs = nc.value(1);
  ArrayRef<int64_t> ls = nc.shape(0), rs = nc.shape(1);
  if (ls.empty() || rs.empty())
    return nc.invalid("MatMul operands must have rank at least 1");
  bool vecL = ls.size() == 1, vecR = rs.size() == 1;
  if (vecL) {
    auto r = nc.reshape(lhs, {1, ls[0]});
    if (failed(r))
      return failure();
    lhs = *r;
  }
  if (vecR) {
    auto r = nc.reshape(rhs, {rs[0], 1});
    if (failed(r))
      return failure();
    rhs = *r;
  }
  auto product = nc.create<MatmulOp>(lhs, rhs, UnitAttr(), UnitAttr());
  if (failed(product))
    return failure();
  Value result = *product;
  if (vecL || vecR) {
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(result.getType()).getShape());
    if (vecR)
      shape.pop_back();
    if (vecL)
      shape.erase(shape.end() - (vecR ? 1 : 2));
    auto r = nc.reshape(result, shape);
    if (failed(r))
      return failure();
    result = *r;
  }
  nc.setOutput(0, result);
  return success();
}

/// Gemm: alpha * A' B' + beta * C.
LogicalResult convertGemm(NodeContext &nc) {
  auto transA = nc.attrInt("transA", 0), transB = nc.attrInt("transB", 0);
  auto alpha = nc.attrFloat("alpha", 1.0f), beta = nc.attrFloat("beta", 1.0f);
  if (failed(transA) || failed(transB) || failed(alpha) || failed(beta))
    return failure();
  if (nc.rank(0) != 2 || nc.rank(1) != 2)
    return nc.invalid("Gemm operands A and B must be 2-D");
  UnitAttr unit = nc.builder.getUnitAttr();
  auto product =
      nc.create<MatmulOp>(nc.value(0), nc.value(1), *transA ? unit : UnitAttr(),
                          *transB ? unit : UnitAttr());
  if (failed(product))
    return failure();
  Value result = *product;
  Type elementType = nc.type(0).getElementType();
  if (*alpha != 1.0f) {
    auto scaled = nc.create<MulOp>(result, nc.scalar(elementType, *alpha));
    if (failed(scaled))
      return failure();
    result = *scaled;
  }
  if (nc.hasInput(2) && *beta != 0.0f) {
    Value c = nc.value(2);
    if (*beta != 1.0f) {
      auto scaled = nc.create<MulOp>(c, nc.scalar(elementType, *beta));
      if (failed(scaled))
        return failure();
      c = *scaled;
    }
    auto sum = nc.create<AddOp>(result, c);
    if (failed(sum))
      return failure();
    result = *sum;
  }
  nc.setOutput(0, result);
  return success();
}

/// Softmax and LogSoftmax. From version 13 they normalise along `axis`
/// (default -1); versions 1 and 11 flatten the input to 2-D, [d0 * ... *
/// d(axis-1), d(axis) * ... * dn] (default axis 1), and normalise the rows:
/// imported as that reshape around the op, or the op alone when the axis is
/// the last.
template <typename OpTy> LogicalResult convertSoftmax(NodeContext &nc) {
  bool flattens = nc.version < 13;
  auto axis = nc.attrInt("axis", flattens ? 1 : -1);
  if (failed(axis))
    return failure();
  int64_t rank = nc.rank(0);
  auto normalized = nc.normalizeAxis(*axis, rank);
  if (failed(normalized))
    return failure();
  Value x = nc.value(0);
  ArrayRef<int64_t> shape = nc.shape(0);
  bool reshape = flattens && *normalized != rank - 1;
  int64_t softmaxAxis = *normalized;
  if (reshape) {
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < rank; ++d)
      (d < *normalized ? rows : cols) *= shape[d];
    auto flat = nc.reshape(x, {rows, cols});
    if (failed(flat))
      return failure();
    x = *flat;
    softmaxAxis = 1;
  }
  auto result = nc.create<OpTy>(x, nc.builder.getI64IntegerAttr(softmaxAxis));
  if (failed(result))
    return failure();
  Value y = *result;
  if (reshape) {
    auto back = nc.reshape(y, shape);
    if (failed(back))
      return failure();
    y = *back;
  }
  nc.setOutput(0, y);
  return success();
}

/// What a Reduce* node reduces: its axes (normalised, sorted) and whether
/// it keeps them; `identity` when the node is the identity (empty axes with
/// noop_with_empty_axes).
struct ReduceSpec {
  SmallVector<int64_t> axes;
  bool keepDims = true, identity = false;
};

/// ReduceSum's axes are an input from version 13 and an attribute before;
/// the other Reduce* ops take the attribute up to opset 17.
FailureOr<ReduceSpec> reduceSpec(NodeContext &nc) {
  auto keepDims = nc.attrInt("keepdims", 1);
  auto noopEmpty = nc.attrInt("noop_with_empty_axes", 0);
  if (failed(keepDims) || failed(noopEmpty))
    return failure();
  std::vector<int64_t> axes;
  bool axesGiven = false;
  if (nc.node.op_type() == "ReduceSum" && nc.version >= 13) {
    if (nc.hasInput(1)) {
      auto given = nc.constantInts(1, "the axes");
      if (failed(given))
        return failure();
      axes = *given;
      axesGiven = !axes.empty();
    }
  } else if (nc.hasInput(1)) {
    // Opset 18 moved the other Reduce* ops' axes to an input.
    return nc.unsupported("the axes are input 1 (" + nc.node.op_type() +
                          "-18); Loom reads them as the attribute of "
                          "versions 1 to 13: export with opset 17 or older");
  } else {
    auto given = nc.attrInts("axes");
    if (failed(given))
      return failure();
    if (*given) {
      axes = **given;
      axesGiven = !axes.empty();
    }
  }
  ReduceSpec spec;
  spec.keepDims = *keepDims != 0;
  int64_t rank = nc.rank(0);
  if (!axesGiven) {
    if (*noopEmpty) {
      spec.identity = true;
      return spec;
    }
    axes.clear();
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t a : axes) {
    auto n = nc.normalizeAxis(a, rank, "reduction axis");
    if (failed(n))
      return failure();
    spec.axes.push_back(*n);
  }
  llvm::sort(spec.axes);
  if (std::adjacent_find(spec.axes.begin(), spec.axes.end()) != spec.axes.end())
    return nc.invalid("reduction axes repeat a dimension");
  return spec;
}

template <typename OpTy>
FailureOr<Value> reduce(NodeContext &nc, Value x, const ReduceSpec &spec,
                        bool keepDims) {
  return nc.create<OpTy>(x, nc.builder.getDenseI64ArrayAttr(spec.axes),
                         keepDims ? nc.builder.getUnitAttr() : UnitAttr());
}

/// ReduceSum, ReduceMean, ReduceMax and ReduceProd: one op each.
template <typename OpTy> LogicalResult convertReduce(NodeContext &nc) {
  auto spec = reduceSpec(nc);
  if (failed(spec))
    return failure();
  if (spec->identity) {
    nc.setOutput(0, nc.value(0));
    return success();
  }
  auto result = reduce<OpTy>(nc, nc.value(0), *spec, spec->keepDims);
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// The Reduce* ops that are compositions of elementwise ops and a sum or a
/// max, so that their kernels, gradients and shardings are those ops':
///   ReduceSumSquare  sum(x * x)          ReduceL2      sqrt(sum(x * x))
///   ReduceLogSum     log(sum(x))         ReduceMin     -max(-x)
///   ReduceL1         sum(|x|)
///   ReduceLogSumExp  log(sum(exp(x - m))) + m, with m = max(x) (stable)
LogicalResult convertComposedReduce(NodeContext &nc) {
  auto spec = reduceSpec(nc);
  if (failed(spec))
    return failure();
  StringRef op = nc.node.op_type();
  Value x = nc.value(0);
  auto chain = [&]() -> FailureOr<Value> {
    if (op == "ReduceMin") {
      if (spec->identity)
        return x;
      auto negated = nc.create<NegOp>(x);
      if (failed(negated))
        return failure();
      auto max = reduce<ReduceMaxOp>(nc, *negated, *spec, spec->keepDims);
      if (failed(max))
        return failure();
      return nc.create<NegOp>(*max);
    }
    if (op == "ReduceLogSumExp") {
      if (spec->identity)
        return x;
      auto maxKept = reduce<ReduceMaxOp>(nc, x, *spec, /*keepDims=*/true);
      if (failed(maxKept))
        return failure();
      auto shifted = nc.create<SubOp>(x, *maxKept);
      if (failed(shifted))
        return failure();
      auto exp = nc.create<ExpOp>(*shifted);
      if (failed(exp))
        return failure();
      auto sum = reduce<ReduceSumOp>(nc, *exp, *spec, spec->keepDims);
      if (failed(sum))
        return failure();
      auto log = nc.create<LogOp>(*sum);
      if (failed(log))
        return failure();
      Value max = *maxKept;
      if (!spec->keepDims) {
        auto reshaped =
            nc.reshape(max, cast<RankedTensorType>(log->getType()).getShape());
        if (failed(reshaped))
          return failure();
        max = *reshaped;
      }
      return nc.create<AddOp>(*log, max);
    }
    Value y = x;
    if (op == "ReduceSumSquare" || op == "ReduceL2") {
      auto square = nc.create<MulOp>(x, x);
      if (failed(square))
        return failure();
      y = *square;
    } else if (op == "ReduceL1") {
      auto abs = nc.create<AbsOp>(x);
      if (failed(abs))
        return failure();
      y = *abs;
    }
    if (!spec->identity) {
      auto sum = reduce<ReduceSumOp>(nc, y, *spec, spec->keepDims);
      if (failed(sum))
        return failure();
      y = *sum;
    }
    if (op == "ReduceL2")
      return nc.create<SqrtOp>(y);
    if (op == "ReduceLogSum")
      return nc.create<LogOp>(y);
    return y;
  }();
  if (failed(chain))
    return failure();
  nc.setOutput(0, *chain);
  return success();
}

/// ArgMax and ArgMin: i64 indices along `axis` (default 0); ties give the
/// first index unless select_last_index (from version 12).
template <typename OpTy> LogicalResult convertArgReduce(NodeContext &nc) {
  auto axis = nc.attrInt("axis", 0);
  auto keepDims = nc.attrInt("keepdims", 1);
  auto last = nc.attrInt("select_last_index", 0);
  if (failed(axis) || failed(keepDims) || failed(last))
    return failure();
  auto normalized = nc.normalizeAxis(*axis, nc.rank(0));
  if (failed(normalized))
    return failure();
  UnitAttr unit = nc.builder.getUnitAttr();
  auto result =
      nc.create<OpTy>(nc.value(0), nc.builder.getI64IntegerAttr(*normalized),
                      *keepDims ? unit : UnitAttr(), *last ? unit : UnitAttr());
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

LogicalResult convertWhere(NodeContext &nc) {
  if (nc.allConstant()) {
    const HostTensor *c = nc.constant(0), *x = nc.constant(1),
                     *y = nc.constant(2);
    auto shape = broadcastShapes(c->shape, x->shape);
    if (shape)
      shape = broadcastShapes(*shape, y->shape);
    if (!shape || x->dtype != y->dtype)
      return nc.invalid("Where operands do not broadcast or differ in type");
    if (*checkedNumElements(*shape) > kMaxFoldElements)
      return nc.unsupported("constant operands are too large to fold");
    HostTensor cb = hostBroadcast(*c, *shape), xb = hostBroadcast(*x, *shape),
               yb = hostBroadcast(*y, *shape);
    HostTensor out = xb;
    for (int64_t i = 0, n = out.numElements(); i < n; ++i)
      if (!cb.ints[i]) {
        if (out.isFloat())
          out.floats[i] = yb.floats[i];
        else
          out.ints[i] = yb.ints[i];
      }
    nc.setOutput(0, std::move(out));
    return success();
  }
  auto result = nc.create<SelectOp>(nc.value(0), nc.value(1), nc.value(2));
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

//===--- Comparisons, logic, max and min ----------------------------------===//

/// A comparison: folded on constants (exporters emit Equal in shape
/// arithmetic), a run-time loom op otherwise.
template <typename OpTy> LogicalResult convertCompare(NodeContext &nc) {
  if (!nc.allConstant()) {
    auto result = nc.create<OpTy>(nc.value(0), nc.value(1));
    if (failed(result))
      return failure();
    nc.setOutput(0, *result);
    return success();
  }
  StringRef opType = nc.node.op_type();
  const HostTensor *a = nc.constant(0), *b = nc.constant(1);
  auto shape = broadcastShapes(a->shape, b->shape);
  if (!shape || a->dtype != b->dtype)
    return nc.invalid(opType + " operands do not broadcast or differ in type");
  if (*checkedNumElements(*shape) > kMaxFoldElements)
    return nc.unsupported("constant operands are too large to fold");
  HostTensor x = hostBroadcast(*a, *shape), y = hostBroadcast(*b, *shape);
  std::vector<int64_t> out;
  for (int64_t i = 0, n = x.numElements(); i < n; ++i) {
    double l = x.asDouble(i), r = y.asDouble(i);
    out.push_back(opType == "Equal"         ? l == r
                  : opType == "Less"        ? l < r
                  : opType == "LessOrEqual" ? l <= r
                  : opType == "Greater"     ? l > r
                                            : l >= r);
  }
  nc.setOutput(0, HostTensor::ofInts(DType::Bool, *shape, std::move(out)));
  return success();
}

/// And, Or, Xor on bool tensors.
template <typename OpTy> LogicalResult convertLogic(NodeContext &nc) {
  auto result = nc.create<OpTy>(nc.value(0), nc.value(1));
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

LogicalResult convertNot(NodeContext &nc) {
  auto result = nc.create<NotOp>(nc.value(0));
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// Max, Min, Sum and Mean take any number of inputs that broadcast
/// together: a chain of the binary op, left to right; Mean divides the sum
/// by the count.
template <typename OpTy> LogicalResult convertVariadic(NodeContext &nc) {
  int n = nc.node.input_size();
  if (n < 1)
    return nc.invalid(nc.node.op_type() + " needs at least one input");
  Value acc = nc.value(0);
  for (int i = 1; i < n; ++i) {
    auto next = nc.create<OpTy>(acc, nc.value(i));
    if (failed(next))
      return failure();
    acc = *next;
  }
  if (nc.node.op_type() == "Mean" && n > 1) {
    Type element = cast<RankedTensorType>(acc.getType()).getElementType();
    if (!isa<FloatType>(element))
      return nc.invalid("Mean takes floating-point inputs");
    auto mean = nc.create<MulOp>(acc, nc.scalar(element, 1.0 / n));
    if (failed(mean))
      return failure();
    acc = *mean;
  }
  nc.setOutput(0, acc);
  return success();
}

} // namespace

void addMathConverters(llvm::StringMap<Converter> &t) {
  // Versions: 7 is where binary ops took numpy broadcasting (6 and older
  // had `broadcast` and `axis`); 6 is where unary ops dropped
  // `consumed_inputs`. Later versions added element types only, except
  // where a converter says otherwise.
  t["Add"] = {7, convertBinary<AddOp>};
  t["Sub"] = {7, convertBinary<SubOp>};
  t["Mul"] = {7, convertBinary<MulOp>};
  t["Div"] = {7, convertBinary<DivOp>};
  t["Pow"] = {7, convertBinary<PowOp>};
  t["Mod"] = {10, convertMod};
  t["Neg"] = {6, convertUnary<NegOp>};
  t["Exp"] = {6, convertUnary<ExpOp>};
  t["Log"] = {6, convertUnary<LogOp>};
  t["Sqrt"] = {6, convertUnary<SqrtOp>};
  t["Erf"] = {9, convertUnary<ErfOp>};
  t["Tanh"] = {6, convertUnary<TanhOp>};
  t["Relu"] = {6, convertUnary<ReluOp>};
  t["Sigmoid"] = {6, convertUnary<SigmoidOp>};
  t["Cos"] = {7, convertUnary<CosOp>};
  t["Sin"] = {7, convertUnary<SinOp>};
  t["Abs"] = {6, convertUnary<AbsOp>};
  t["Reciprocal"] = {6, convertUnary<ReciprocalOp>};
  t["Softplus"] = {1, convertUnary<SoftplusOp>};
  t["HardSwish"] = {14, convertUnary<HardSwishOp>};
  t["LeakyRelu"] = {6, convertLeakyRelu};
  t["Elu"] = {6, convertElu};
  t["Selu"] = {6, convertSelu};
  t["HardSigmoid"] = {6, convertHardSigmoid};
  t["Clip"] = {6, convertClip}; // 6: bounds attributes; 11: inputs
  t["MatMul"] = {1, convertMatMul};
  t["Gemm"] = {7, convertGemm}; // 6 and older: `broadcast`
  t["Softmax"] = {1, convertSoftmax<SoftmaxOp>};
  t["LogSoftmax"] = {1, convertSoftmax<LogSoftmaxOp>};
  t["ReduceSum"] = {1, convertReduce<ReduceSumOp>};
  t["ReduceMean"] = {1, convertReduce<ReduceMeanOp>};
  t["ReduceMax"] = {1, convertReduce<ReduceMaxOp>};
  t["ReduceProd"] = {1, convertReduce<ReduceProdOp>};
  t["ReduceMin"] = {1, convertComposedReduce};
  t["ArgMax"] = {1, convertArgReduce<ArgMaxOp>};
  t["ArgMin"] = {1, convertArgReduce<ArgMinOp>};
  t["ReduceSumSquare"] = {1, convertComposedReduce};
  t["ReduceL1"] = {1, convertComposedReduce};
  t["ReduceL2"] = {1, convertComposedReduce};
  t["ReduceLogSum"] = {1, convertComposedReduce};
  t["ReduceLogSumExp"] = {1, convertComposedReduce};
  t["Where"] = {9, convertWhere};
  t["Equal"] = {7, convertCompare<EqualOp>};
  t["Less"] = {7, convertCompare<LessOp>};
  t["LessOrEqual"] = {12, convertCompare<LessEqualOp>};
  t["Greater"] = {7, convertCompare<GreaterOp>};
  t["GreaterOrEqual"] = {12, convertCompare<GreaterEqualOp>};
  t["And"] = {7, convertLogic<AndOp>}; // 1: `broadcast`
  t["Or"] = {7, convertLogic<OrOp>};
  t["Xor"] = {7, convertLogic<XorOp>};
  t["Not"] = {1, convertNot};
  // 6: operands of one shape, which broadcasting (from 8) includes.
  t["Max"] = {6, convertVariadic<MaxOp>};
  t["Min"] = {6, convertVariadic<MinOp>};
  t["Sum"] = {6, convertVariadic<AddOp>};
  t["Mean"] = {6, convertVariadic<AddOp>};
}

} // namespace loom::onnx_import
