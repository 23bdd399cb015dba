//===- ShapeCheckTensor.cpp - Rules of elementwise and data-movement ops --===//
//
// The shape rules of the ops that combine tensors element by element
// (binary with numpy broadcasting, unary, select, cast, softmax along an
// axis), reduce them, or move their elements without arithmetic
// (transpose, reshape, broadcast, gather, concat, slice), and of the
// gradients of those: relu_grad, gelu_grad, reduce_max_grad, gather_grad
// and slice_grad.
//
//===----------------------------------------------------------------------===//

#include "runtime/ShapeCheckImpl.h"

#include <algorithm>

namespace loom::rt::shapecheck {

namespace {

/// Checked a * b + c, false on overflow.
bool mulAdd(int64_t a, int64_t b, int64_t c, int64_t &out) {
  int64_t p;
  return !__builtin_mul_overflow(a, b, &p) &&
         !__builtin_add_overflow(p, c, &out);
}

std::string elementwise(const Attrs &, const std::vector<TypeRef> &ops,
                        const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  Shape out;
  if (ops[0].dtype != ops[1].dtype ||
      !broadcastShapes(*ops[0].shape, *ops[1].shape, out))
    return "operands do not broadcast or differ in element type";
  return expectResult(res[0], ops[0].dtype, out);
}

std::string unary(const Attrs &, const std::vector<TypeRef> &ops,
                  const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, *ops[0].shape);
}

std::string alongAxis(const Attrs &a, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (auto e = unary(a, ops, res); !e.empty())
    return e;
  if (!inRange(a.getInt("axis"), ops[0].shape->size()))
    return "axis is out of range";
  return "";
}

std::string reduce(const Attrs &a, const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  const Shape &in = *ops[0].shape;
  std::vector<int64_t> axes = a.getInts("axes");
  Shape out;
  for (size_t i = 0; i < axes.size(); ++i)
    if (!inRange(axes[i], in.size()) || (i && axes[i] <= axes[i - 1]))
      return "reduction axes must be increasing and in range";
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced =
        std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    if (!reduced)
      out.push_back(in[d]);
    else if (a.getBool("keep_dims"))
      out.push_back(1);
  }
  return expectResult(res[0], ops[0].dtype, out);
}

std::string transpose(const Attrs &a, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  const Shape &in = *ops[0].shape;
  std::vector<int64_t> perm = a.getInts("permutation");
  if (perm.size() != in.size())
    return "permutation does not match the rank";
  std::vector<bool> seen(in.size());
  Shape out;
  for (int64_t p : perm) {
    if (!inRange(p, in.size()) || seen[p])
      return "permutation is not a permutation";
    seen[p] = true;
    out.push_back(in[p]);
  }
  return expectResult(res[0], ops[0].dtype, out);
}

std::string reshape(const Attrs &, const std::vector<TypeRef> &ops,
                    const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  if (res[0].dtype != ops[0].dtype ||
      numElements(*res[0].shape) != numElements(*ops[0].shape))
    return "result must have the input's element type and count";
  return "";
}

std::string broadcast(const Attrs &, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  Shape out;
  if (res[0].dtype != ops[0].dtype ||
      ops[0].shape->size() > res[0].shape->size() ||
      !broadcastShapes(*ops[0].shape, *res[0].shape, out) ||
      out != *res[0].shape)
    return "input does not broadcast to the result";
  return "";
}

std::string cast(const Attrs &, const std::vector<TypeRef> &ops,
                 const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  if (*res[0].shape != *ops[0].shape)
    return "cast must keep the shape";
  return "";
}

std::string select(const Attrs &, const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 3, 3); !e.empty())
    return e;
  Shape out;
  if (ops[0].dtype != DType::Bool || ops[1].dtype != ops[2].dtype ||
      !broadcastShapes(*ops[0].shape, *ops[1].shape, out) ||
      !broadcastShapes(out, *ops[2].shape, out))
    return "operands do not broadcast or have the wrong element types";
  return expectResult(res[0], ops[1].dtype, out);
}

std::string gather(const Attrs &a, const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  const Shape &in = *ops[0].shape;
  int64_t axis = a.getInt("axis");
  if (!inRange(axis, in.size()) ||
      (ops[1].dtype != DType::I32 && ops[1].dtype != DType::I64))
    return "axis out of range or indices not integers";
  Shape out(in.begin(), in.begin() + axis);
  out.insert(out.end(), ops[1].shape->begin(), ops[1].shape->end());
  out.insert(out.end(), in.begin() + axis + 1, in.end());
  return expectResult(res[0], ops[0].dtype, out);
}

std::string concat(const Attrs &a, const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res) {
  if (ops.empty() || res.size() != 1)
    return "needs operands and one result";
  Shape out = *ops[0].shape;
  int64_t axis = a.getInt("axis");
  if (!inRange(axis, out.size()))
    return "axis is out of range";
  for (size_t i = 1; i < ops.size(); ++i) {
    const Shape &s = *ops[i].shape;
    if (ops[i].dtype != ops[0].dtype || s.size() != out.size())
      return "operands differ in rank or element type";
    for (size_t d = 0; d < s.size(); ++d)
      if (int64_t(d) != axis && s[d] != out[d])
        return "operands differ outside the axis";
    out[axis] += s[axis];
  }
  return expectResult(res[0], ops[0].dtype, out);
}

/// "" if a slice of `in` with these starts, sizes and strides stays inside
/// it, else what is wrong (slice reads there, slice_grad writes there:
/// `outside` says which).
std::string sliceWindow(const Shape &in, const std::vector<int64_t> &starts,
                        const std::vector<int64_t> &sizes,
                        const std::vector<int64_t> &strides,
                        const char *outside) {
  if (starts.size() != in.size() || sizes.size() != in.size() ||
      strides.size() != in.size())
    return "starts, sizes and strides need one entry per dimension";
  for (size_t d = 0; d < in.size(); ++d) {
    if (sizes[d] < 0 || strides[d] == 0)
      return "sizes must not be negative and strides not zero";
    if (sizes[d] == 0)
      continue;
    int64_t last;
    if (!mulAdd(sizes[d] - 1, strides[d], starts[d], last) || starts[d] < 0 ||
        starts[d] >= in[d] || last < 0 || last >= in[d])
      return "slice of dimension " + std::to_string(d) + " " + outside;
  }
  return "";
}

std::string slice(const Attrs &a, const std::vector<TypeRef> &ops,
                  const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  std::vector<int64_t> sizes = a.getInts("sizes");
  if (auto e = sliceWindow(*ops[0].shape, a.getInts("starts"), sizes,
                           a.getInts("strides"), "reads outside the input");
      !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, Shape(sizes.begin(), sizes.end()));
}

/// relu_grad, gelu_grad: input and grad of one float type, the result's.
/// reduce_max_grad(input, max, grad): max and grad are the reduction of
/// input; the result has input's type.
std::string reduceMaxGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                          const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 3, 3); !e.empty())
    return e;
  if (auto e = reduce(a, {ops[0]}, {ops[1]}); !e.empty())
    return "the maximum " + e;
  if (ops[2].dtype != ops[1].dtype || *ops[2].shape != *ops[1].shape)
    return "grad must have the maximum's type";
  return expectResult(res[0], ops[0].dtype, *ops[0].shape);
}

std::string activationGrad(const Attrs &, const std::vector<TypeRef> &ops,
                           const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  if (auto e = expectType("grad", ops[1], ops[0].dtype, *ops[0].shape);
      !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, *ops[0].shape);
}

std::string gatherGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  const Shape &out = *res[0].shape;
  int64_t axis = a.getInt("axis");
  if (!inRange(axis, out.size()) || !isIndex(ops[0].dtype))
    return "axis out of range or indices not integers";
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape grad(out.begin(), out.begin() + axis);
  grad.insert(grad.end(), ops[0].shape->begin(), ops[0].shape->end());
  grad.insert(grad.end(), out.begin() + axis + 1, out.end());
  return expectGrad(ops[1], res[0].dtype, grad, "gather of the result");
}

std::string sliceGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  if (ops[0].dtype != res[0].dtype)
    return "grad must have the result's element type";
  const Shape &sizes = *ops[0].shape;
  return sliceWindow(*res[0].shape, a.getInts("starts"), sizes,
                     a.getInts("strides"), "writes outside the result");
}

} // namespace

void addTensorRules(RuleTable &table) {
  table.insert({
      {"add", elementwise},
      {"sub", elementwise},
      {"mul", elementwise},
      {"div", elementwise},
      {"pow", elementwise},
      {"neg", unary},
      {"exp", unary},
      {"log", unary},
      {"sqrt", unary},
      {"erf", unary},
      {"tanh", unary},
      {"relu", unary},
      {"sigmoid", unary},
      {"gelu", unary},
      {"cast", cast},
      {"select", select},
      {"softmax", alongAxis},
      {"log_softmax", alongAxis},
      {"reduce_sum", reduce},
      {"reduce_mean", reduce},
      {"reduce_max", reduce},
      {"transpose", transpose},
      {"reshape", reshape},
      {"broadcast", broadcast},
      {"gather", gather},
      {"concat", concat},
      {"slice", slice},
      {"relu_grad", activationGrad},
      {"reduce_max_grad", reduceMaxGrad},
      {"gelu_grad", activationGrad},
      {"gather_grad", gatherGrad},
      {"slice_grad", sliceGrad},
  });
}

} // namespace loom::rt::shapecheck
