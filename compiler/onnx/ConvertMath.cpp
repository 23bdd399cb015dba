//===- ConvertMath.cpp - ONNX arithmetic, matmul and reductions -----------===//

#include "compiler/onnx/NodeContext.h"

#include <cmath>

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
  HostTensor x = hostBroadcast(a, *shape), y = hostBroadcast(b, *shape);
  int64_t n = x.numElements();
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

template <typename OpTy> LogicalResult convertSoftmax(NodeContext &nc) {
  auto axis = nc.attrInt("axis", -1);
  if (failed(axis))
    return failure();
  auto normalized = nc.normalizeAxis(*axis, nc.rank(0));
  if (failed(normalized))
    return failure();
  auto result =
      nc.create<OpTy>(nc.value(0), nc.builder.getI64IntegerAttr(*normalized));
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

/// ReduceSum (axes as input from opset 13), ReduceMean and ReduceMax (axes
/// as an attribute up to opset 17).
template <typename OpTy> LogicalResult convertReduce(NodeContext &nc) {
  auto keepDims = nc.attrInt("keepdims", 1);
  auto noopEmpty = nc.attrInt("noop_with_empty_axes", 0);
  if (failed(keepDims) || failed(noopEmpty))
    return failure();
  std::vector<int64_t> axes;
  bool axesGiven = false;
  if (nc.node.op_type() == "ReduceSum") {
    if (nc.hasInput(1)) {
      auto given = nc.constantInts(1, "the axes");
      if (failed(given))
        return failure();
      axes = *given;
      axesGiven = !axes.empty();
    }
  } else {
    auto given = nc.attrInts("axes");
    if (failed(given))
      return failure();
    if (*given) {
      axes = **given;
      axesGiven = !axes.empty();
    }
  }
  int64_t rank = nc.rank(0);
  if (!axesGiven) {
    if (*noopEmpty) {
      nc.setOutput(0, nc.value(0));
      return success();
    }
    axes.clear();
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  SmallVector<int64_t> normalized;
  for (int64_t a : axes) {
    auto n = nc.normalizeAxis(a, rank, "reduction axis");
    if (failed(n))
      return failure();
    normalized.push_back(*n);
  }
  llvm::sort(normalized);
  if (std::adjacent_find(normalized.begin(), normalized.end()) !=
      normalized.end())
    return nc.invalid("reduction axes repeat a dimension");
  auto result =
      nc.create<OpTy>(nc.value(0), nc.builder.getDenseI64ArrayAttr(normalized),
                      *keepDims ? nc.builder.getUnitAttr() : UnitAttr());
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
  t["Add"] = convertBinary<AddOp>;
  t["Sub"] = convertBinary<SubOp>;
  t["Mul"] = convertBinary<MulOp>;
  t["Div"] = convertBinary<DivOp>;
  t["Pow"] = convertBinary<PowOp>;
  t["Neg"] = convertUnary<NegOp>;
  t["Exp"] = convertUnary<ExpOp>;
  t["Log"] = convertUnary<LogOp>;
  t["Sqrt"] = convertUnary<SqrtOp>;
  t["Erf"] = convertUnary<ErfOp>;
  t["Tanh"] = convertUnary<TanhOp>;
  t["Relu"] = convertUnary<ReluOp>;
  t["Sigmoid"] = convertUnary<SigmoidOp>;
  t["MatMul"] = convertMatMul;
  t["Gemm"] = convertGemm;
  t["Softmax"] = convertSoftmax<SoftmaxOp>;
  t["LogSoftmax"] = convertSoftmax<LogSoftmaxOp>;
  t["ReduceSum"] = convertReduce<ReduceSumOp>;
  t["ReduceMean"] = convertReduce<ReduceMeanOp>;
  t["ReduceMax"] = convertReduce<ReduceMaxOp>;
  t["Where"] = convertWhere;
  t["Equal"] = convertCompare<EqualOp>;
  t["Less"] = convertCompare<LessOp>;
  t["LessOrEqual"] = convertCompare<LessEqualOp>;
  t["Greater"] = convertCompare<GreaterOp>;
  t["GreaterOrEqual"] = convertCompare<GreaterEqualOp>;
  t["And"] = convertLogic<AndOp>;
  t["Or"] = convertLogic<OrOp>;
  t["Xor"] = convertLogic<XorOp>;
  t["Not"] = convertNot;
  t["Max"] = convertVariadic<MaxOp>;
  t["Min"] = convertVariadic<MinOp>;
  t["Sum"] = convertVariadic<AddOp>;
  t["Mean"] = convertVariadic<AddOp>;
}

} // namespace loom::onnx_import
