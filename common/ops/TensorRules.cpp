//===- TensorRules.cpp - Rules of elementwise and data-movement ops -------===//
//
// The shape rules of the ops that combine tensors element by element
// (binary with numpy broadcasting, unary, select, cast, softmax along an
// axis, comparisons and logic with a bool result, trilu), reduce them, or
// move their elements without arithmetic (transpose, reshape, broadcast,
// gather, concat, slice, pad), and of the gradients of those: relu_grad,
// gelu_grad, unary_grad, reduce_max_grad, gather_grad, slice_grad and
// pad_grad.
//
//===----------------------------------------------------------------------===//

#include "common/ops/ElementwiseMath.h"
#include "common/ops/PadIndex.h"
#include "common/ops/RulesImpl.h"

#include <algorithm>

namespace loom::ops::rules {

namespace {

/// Checked a * b + c, false on overflow.
bool mulAdd(int64_t a, int64_t b, int64_t c, int64_t &out) {
  int64_t p;
  return !__builtin_mul_overflow(a, b, &p) &&
         !__builtin_add_overflow(p, c, &out);
}

/// The broadcast of `ops` (one element type) into `shape`, or what is wrong.
std::string broadcastAll(const std::vector<TypeRef> &ops, Shape &shape) {
  shape = *ops[0].shape;
  for (size_t i = 1; i < ops.size(); ++i) {
    if (ops[i].dtype != ops[0].dtype)
      return std::string("operands have different element types (") +
             dtypeName(ops[0].dtype) + " and " + dtypeName(ops[i].dtype) + ")";
    Shape out;
    if (!broadcastShapes(shape, *ops[i].shape, out))
      return "operand shapes " + formatShape(shape) + " and " +
             formatShape(*ops[i].shape) + " do not broadcast";
    shape = std::move(out);
  }
  return "";
}

std::string elementwise(const Attrs &, const std::vector<TypeRef> &ops,
                        std::vector<TensorType> &out) {
  Shape shape;
  if (auto e = broadcastAll(ops, shape); !e.empty())
    return e;
  return one(out, ops[0].dtype, shape);
}

std::string unary(const Attrs &, const std::vector<TypeRef> &ops,
                  std::vector<TensorType> &out) {
  return one(out, ops[0].dtype, *ops[0].shape);
}

std::string alongAxis(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  if (auto e = checkAxis(a.getInt("axis"), ops[0].shape->size()); !e.empty())
    return e;
  return one(out, ops[0].dtype, *ops[0].shape);
}

std::string reduce(const Attrs &a, const std::vector<TypeRef> &ops,
                   std::vector<TensorType> &out) {
  const Shape &in = *ops[0].shape;
  std::vector<int64_t> axes = a.getInts("axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!inRange(axes[i], in.size()))
      return "reduction axis " + std::to_string(axes[i]) +
             " is out of range for rank " + std::to_string(in.size());
    if (i > 0 && axes[i] <= axes[i - 1])
      return "reduction axes must be strictly increasing";
  }
  Shape shape;
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced =
        std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    if (!reduced)
      shape.push_back(in[d]);
    else if (a.getBool("keep_dims"))
      shape.push_back(1);
  }
  return one(out, ops[0].dtype, shape);
}

/// arg_max, arg_min: i64 indices along `axis`, which is removed or kept.
std::string argReduce(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  const Shape &in = *ops[0].shape;
  int64_t axis = a.getInt("axis");
  if (auto e = checkAxis(axis, in.size()); !e.empty())
    return e;
  if (in[axis] == 0)
    return "the extreme of an empty axis (dimension " + std::to_string(axis) +
           " of " + formatShape(in) + ") has no index";
  Shape shape;
  for (size_t d = 0; d < in.size(); ++d) {
    if (static_cast<int64_t>(d) != axis)
      shape.push_back(in[d]);
    else if (a.getBool("keep_dims"))
      shape.push_back(1);
  }
  return one(out, DType::I64, shape);
}

std::string transpose(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  const Shape &in = *ops[0].shape;
  std::vector<int64_t> perm = a.getInts("permutation");
  if (perm.size() != in.size())
    return "permutation has " + std::to_string(perm.size()) +
           " entries but the input has rank " + std::to_string(in.size());
  std::vector<bool> seen(in.size());
  Shape shape;
  for (int64_t p : perm) {
    if (!inRange(p, in.size()) || seen[p])
      return "permutation " + formatShape(perm) +
             " is not a permutation of [0, " + std::to_string(in.size()) + ")";
    seen[p] = true;
    shape.push_back(in[p]);
  }
  return one(out, ops[0].dtype, shape);
}

std::string reshape(const Attrs &, const std::vector<TypeRef> &ops,
                    const std::vector<TypeRef> &res) {
  if (res[0].dtype != ops[0].dtype)
    return std::string("result element type ") + dtypeName(res[0].dtype) +
           " differs from input element type " + dtypeName(ops[0].dtype);
  int64_t in = numElements(*ops[0].shape), to = numElements(*res[0].shape);
  if (in != to)
    return "cannot reshape " + formatShape(*ops[0].shape) + " (" +
           std::to_string(in) + " elements) to " + formatShape(*res[0].shape) +
           " (" + std::to_string(to) + " elements)";
  return "";
}

std::string broadcast(const Attrs &, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (res[0].dtype != ops[0].dtype)
    return std::string("result element type ") + dtypeName(res[0].dtype) +
           " differs from input element type " + dtypeName(ops[0].dtype);
  Shape out;
  if (ops[0].shape->size() > res[0].shape->size() ||
      !broadcastShapes(*ops[0].shape, *res[0].shape, out) ||
      out != *res[0].shape)
    return "input shape " + formatShape(*ops[0].shape) +
           " does not broadcast to " + formatShape(*res[0].shape);
  return "";
}

std::string cast(const Attrs &, const std::vector<TypeRef> &ops,
                 const std::vector<TypeRef> &res) {
  if (*res[0].shape != *ops[0].shape)
    return "result shape " + formatShape(*res[0].shape) +
           " differs from input shape " + formatShape(*ops[0].shape);
  return "";
}

std::string select(const Attrs &, const std::vector<TypeRef> &ops,
                   std::vector<TensorType> &out) {
  if (ops[0].dtype != DType::Bool)
    return std::string("condition must be bool, not ") +
           dtypeName(ops[0].dtype);
  Shape values, shape;
  if (auto e = broadcastAll({ops[1], ops[2]}, values); !e.empty())
    return e;
  if (!broadcastShapes(values, *ops[0].shape, shape))
    return "condition shape " + formatShape(*ops[0].shape) +
           " does not broadcast with " + formatShape(values);
  return one(out, ops[1].dtype, shape);
}

/// Comparisons and logic: operands broadcast and share one element type
/// (the flags say which); the result is bool.
std::string mask(const std::vector<TypeRef> &ops, std::vector<TensorType> &out,
                 bool allowBool, bool allowNumbers) {
  Shape shape;
  if (auto e = broadcastAll(ops, shape); !e.empty())
    return e;
  bool isBool = ops[0].dtype == DType::Bool;
  if (isBool && !allowBool)
    return "operands must be numbers, not bool";
  if (!isBool && !allowNumbers)
    return std::string("operands must be bool, not ") + dtypeName(ops[0].dtype);
  return one(out, DType::Bool, shape);
}

std::string equal(const Attrs &, const std::vector<TypeRef> &ops,
                  std::vector<TensorType> &out) {
  return mask(ops, out, /*allowBool=*/true, /*allowNumbers=*/true);
}

std::string ordering(const Attrs &, const std::vector<TypeRef> &ops,
                     std::vector<TensorType> &out) {
  return mask(ops, out, /*allowBool=*/false, /*allowNumbers=*/true);
}

std::string logic(const Attrs &, const std::vector<TypeRef> &ops,
                  std::vector<TensorType> &out) {
  return mask(ops, out, /*allowBool=*/true, /*allowNumbers=*/false);
}

std::string trilu(const Attrs &, const std::vector<TypeRef> &ops,
                  std::vector<TensorType> &out) {
  if (ops[0].shape->size() < 2)
    return "input must have rank at least 2, not " +
           std::to_string(ops[0].shape->size());
  return one(out, ops[0].dtype, *ops[0].shape);
}

std::string gather(const Attrs &a, const std::vector<TypeRef> &ops,
                   std::vector<TensorType> &out) {
  const Shape &in = *ops[0].shape;
  int64_t axis = a.getInt("axis");
  if (auto e = checkAxis(axis, in.size()); !e.empty())
    return e;
  if (!isIndex(ops[1].dtype))
    return std::string("indices must be i32 or i64, not ") +
           dtypeName(ops[1].dtype);
  Shape shape(in.begin(), in.begin() + axis);
  shape.insert(shape.end(), ops[1].shape->begin(), ops[1].shape->end());
  shape.insert(shape.end(), in.begin() + axis + 1, in.end());
  return one(out, ops[0].dtype, shape);
}

std::string concat(const Attrs &a, const std::vector<TypeRef> &ops,
                   std::vector<TensorType> &out) {
  Shape shape = *ops[0].shape;
  int64_t axis = a.getInt("axis");
  if (auto e = checkAxis(axis, shape.size()); !e.empty())
    return e;
  for (size_t i = 1; i < ops.size(); ++i) {
    const Shape &s = *ops[i].shape;
    if (ops[i].dtype != ops[0].dtype || s.size() != shape.size())
      return "input #" + std::to_string(i) + " has type " +
             typeName(ops[i].dtype, s) + ", which differs from input #0's " +
             typeName(ops[0].dtype, *ops[0].shape) + " in rank or element type";
    for (size_t d = 0; d < s.size(); ++d)
      if (int64_t(d) != axis && s[d] != shape[d])
        return "input #" + std::to_string(i) + " has size " +
               std::to_string(s[d]) + " in dimension " + std::to_string(d) +
               " but input #0 has " + std::to_string(shape[d]);
    shape[axis] += s[axis];
  }
  return one(out, ops[0].dtype, shape);
}

/// "" if a slice of `in` with these starts, sizes and strides stays inside
/// it, else what is wrong (slice reads there, slice_grad writes there:
/// `verb` says which).
std::string sliceWindow(const Shape &in, const std::vector<int64_t> &starts,
                        const std::vector<int64_t> &sizes,
                        const std::vector<int64_t> &strides, const char *verb) {
  size_t rank = in.size();
  if (starts.size() != rank || sizes.size() != rank || strides.size() != rank)
    return "starts, sizes and strides need " + std::to_string(rank) +
           " entries each";
  for (size_t d = 0; d < rank; ++d) {
    std::string dim = std::to_string(d);
    if (strides[d] == 0)
      return "stride of dimension " + dim + " must not be 0";
    if (sizes[d] < 0)
      return "size of dimension " + dim + " must not be negative";
    if (sizes[d] == 0)
      continue;
    int64_t last;
    if (!mulAdd(sizes[d] - 1, strides[d], starts[d], last))
      return "slice of dimension " + dim + " (size " +
             std::to_string(sizes[d]) + ", stride " +
             std::to_string(strides[d]) + ") overflows 64-bit indices";
    if (starts[d] < 0 || starts[d] >= in[d] || last < 0 || last >= in[d])
      return "slice of dimension " + dim + " " + verb + " [" +
             std::to_string(starts[d]) + ", " + std::to_string(last) +
             "], outside the dimension of size " + std::to_string(in[d]);
  }
  return "";
}

std::string slice(const Attrs &a, const std::vector<TypeRef> &ops,
                  std::vector<TensorType> &out) {
  std::vector<int64_t> sizes = a.getInts("sizes");
  if (auto e = sliceWindow(*ops[0].shape, a.getInts("starts"), sizes,
                           a.getInts("strides"), "reads");
      !e.empty())
    return e;
  return one(out, ops[0].dtype, Shape(sizes.begin(), sizes.end()));
}

/// The shape `in` padded by the op's `low`, `high` and `mode` into
/// `padded`, or what is wrong.
std::string padShape(const Attrs &a, const Shape &in, Shape &padded) {
  std::vector<int64_t> low = a.getInts("low"), high = a.getInts("high");
  std::string modeName = a.getString("mode");
  pad::PadMode mode;
  if (!pad::parsePadMode(modeName, mode))
    return "mode '" + modeName + "' is not one of " + pad::kPadModeNames;
  size_t rank = in.size();
  if (low.size() != rank || high.size() != rank)
    return "low and high need " + std::to_string(rank) + " entries each";
  padded.clear();
  for (size_t d = 0; d < rank; ++d) {
    std::string dim = std::to_string(d),
                pads = " (low " + std::to_string(low[d]) + ", high " +
                       std::to_string(high[d]) + ")";
    if (low[d] < 0 || high[d] < 0)
      return "pad of dimension " + dim + pads + " must not be negative";
    if (mode == pad::PadMode::Reflect && (low[d] >= in[d] || high[d] >= in[d]))
      return "reflect pad of dimension " + dim + pads +
             " must be smaller than its size " + std::to_string(in[d]);
    if (mode == pad::PadMode::Edge && in[d] == 0 && low[d] + high[d] > 0)
      return "edge pad of dimension " + dim + pads +
             " needs a non-empty dimension";
    int64_t size;
    if (!mulAdd(1, in[d], low[d], size) || !mulAdd(1, size, high[d], size))
      return "pad of dimension " + dim + pads + " overflows 64-bit sizes";
    padded.push_back(size);
  }
  return "";
}

std::string padOp(const Attrs &a, const std::vector<TypeRef> &ops,
                  std::vector<TensorType> &out) {
  Shape shape;
  if (auto e = padShape(a, *ops[0].shape, shape); !e.empty())
    return e;
  return one(out, ops[0].dtype, shape);
}

/// pad_grad(grad) -> the padded tensor's gradient: grad has the pad's
/// result shape.
std::string padGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                    const std::vector<TypeRef> &res) {
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape padded;
  if (auto e = padShape(a, *res[0].shape, padded); !e.empty())
    return e;
  return expectGrad(ops[0], res[0].dtype, padded, "pad of the result");
}

/// reduce_max_grad(input, max, grad): max and grad are the reduction of
/// input; the result has input's type.
std::string reduceMaxGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                          std::vector<TensorType> &out) {
  std::vector<TensorType> reduced;
  if (auto e = reduce(a, {ops[0]}, reduced); !e.empty())
    return "the maximum: " + e;
  if (ops[1].dtype != reduced[0].dtype || *ops[1].shape != reduced[0].shape)
    return "the maximum is " + typeName(ops[1].dtype, *ops[1].shape) +
           " but the reduction of the input gives " +
           typeName(reduced[0].dtype, reduced[0].shape);
  if (ops[2].dtype != ops[1].dtype || *ops[2].shape != *ops[1].shape)
    return "grad must have the maximum's type";
  return one(out, ops[0].dtype, *ops[0].shape);
}

/// reduce_prod_grad(input, grad): grad is the reduction of input; the
/// result has input's type.
std::string reduceProdGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                           std::vector<TensorType> &out) {
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  std::vector<TensorType> reduced;
  if (auto e = reduce(a, {ops[0]}, reduced); !e.empty())
    return "the product: " + e;
  if (auto e = expectGrad(ops[1], reduced[0].dtype, reduced[0].shape,
                          "the product of the input");
      !e.empty())
    return e;
  return one(out, ops[0].dtype, *ops[0].shape);
}

/// relu_grad, gelu_grad: input and grad of one float type, the result's.
std::string activationGrad(const Attrs &, const std::vector<TypeRef> &ops,
                           std::vector<TensorType> &out) {
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  if (auto e = expectType("grad", ops[1], ops[0].dtype, *ops[0].shape);
      !e.empty())
    return e;
  return one(out, ops[0].dtype, *ops[0].shape);
}

/// unary_grad: as activationGrad, for a function ElementwiseMath.h knows.
std::string unaryGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  std::string fn = a.getString("fn");
  if (!math::findUnaryFn(fn))
    return "fn '" + fn + "' is not one of " + std::string(math::unaryFnNames());
  return activationGrad(a, ops, out);
}

std::string gatherGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  const Shape &out = *res[0].shape;
  int64_t axis = a.getInt("axis");
  if (auto e = checkAxis(axis, out.size()); !e.empty())
    return e;
  if (!isIndex(ops[0].dtype))
    return std::string("indices must be i32 or i64, not ") +
           dtypeName(ops[0].dtype);
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape grad(out.begin(), out.begin() + axis);
  grad.insert(grad.end(), ops[0].shape->begin(), ops[0].shape->end());
  grad.insert(grad.end(), out.begin() + axis + 1, out.end());
  return expectGrad(ops[1], res[0].dtype, grad, "gather of the result");
}

std::string sliceGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  if (ops[0].dtype != res[0].dtype)
    return "grad must have the result's element type";
  const Shape &sizes = *ops[0].shape;
  return sliceWindow(*res[0].shape, a.getInts("starts"), sizes,
                     a.getInts("strides"), "writes");
}

} // namespace

void addTensorRules(RuleTable &table) {
  OpRule binary = inferred(elementwise, 2, 2), one = inferred(unary, 1, 1),
         axis = inferred(alongAxis, 1, 1), reduction = inferred(reduce, 1, 1);
  table.insert({
      {"add", binary},
      {"sub", binary},
      {"mul", binary},
      {"div", binary},
      {"pow", binary},
      {"mod", binary},
      {"fmod", binary},
      {"neg", one},
      {"exp", one},
      {"log", one},
      {"sqrt", one},
      {"erf", one},
      {"tanh", one},
      {"relu", one},
      {"sigmoid", one},
      {"gelu", one},
      {"cos", one},
      {"sin", one},
      {"abs", one},
      {"reciprocal", one},
      {"softplus", one},
      {"mish", one},
      {"hard_swish", one},
      {"leaky_relu", one},
      {"elu", one},
      {"selu", one},
      {"hard_sigmoid", one},
      {"clip", one},
      {"cast", checked(cast, 1, 1)},
      {"select", inferred(select, 3, 3)},
      {"max", binary},
      {"min", binary},
      {"equal", inferred(equal, 2, 2)},
      {"less", inferred(ordering, 2, 2)},
      {"less_equal", inferred(ordering, 2, 2)},
      {"greater", inferred(ordering, 2, 2)},
      {"greater_equal", inferred(ordering, 2, 2)},
      {"and", inferred(logic, 2, 2)},
      {"or", inferred(logic, 2, 2)},
      {"xor", inferred(logic, 2, 2)},
      {"not", inferred(logic, 1, 1)},
      {"trilu", inferred(trilu, 1, 1)},
      {"softmax", axis},
      {"log_softmax", axis},
      {"reduce_sum", reduction},
      {"reduce_mean", reduction},
      {"reduce_max", reduction},
      {"reduce_prod", reduction},
      {"arg_max", inferred(argReduce, 1, 1)},
      {"arg_min", inferred(argReduce, 1, 1)},
      {"transpose", inferred(transpose, 1, 1)},
      {"reshape", checked(reshape, 1, 1)},
      {"broadcast", checked(broadcast, 1, 1)},
      {"gather", inferred(gather, 2, 2)},
      {"concat", inferred(concat, 1, SIZE_MAX)},
      {"slice", inferred(slice, 1, 1)},
      {"pad", inferred(padOp, 1, 1)},
      {"relu_grad", inferred(activationGrad, 2, 2)},
      {"reduce_max_grad", inferred(reduceMaxGrad, 3, 3)},
      {"reduce_prod_grad", inferred(reduceProdGrad, 2, 2)},
      {"gelu_grad", inferred(activationGrad, 2, 2)},
      {"unary_grad", inferred(unaryGrad, 2, 2)},
      {"gather_grad", checked(gatherGrad, 2, 2)},
      {"slice_grad", checked(sliceGrad, 1, 1)},
      {"pad_grad", checked(padGrad, 1, 1)},
  });
}

} // namespace loom::ops::rules
