//===- ShapeCheck.cpp - Validate one plan instruction's shapes ------------===//

#include "runtime/ShapeCheck.h"

#include <algorithm>
#include <functional>
#include <map>

namespace loom::rt {

bool broadcastShapes(const Shape &a, const Shape &b, Shape &out) {
  size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    r[rank - 1 - i] = da == 1 ? db : da;
  }
  out = std::move(r);
  return true;
}

namespace {

using Check = std::function<std::string(
    const Attrs &, const std::vector<TypeRef> &, const std::vector<TypeRef> &)>;

std::string expectCounts(const std::vector<TypeRef> &ops,
                         const std::vector<TypeRef> &res, size_t minOps,
                         size_t maxOps, size_t nRes = 1) {
  if (ops.size() < minOps || ops.size() > maxOps)
    return "has " + std::to_string(ops.size()) + " operands, expected " +
           std::to_string(minOps) +
           (maxOps != minOps ? " to " + std::to_string(maxOps) : "");
  if (res.size() != nRes)
    return "has " + std::to_string(res.size()) + " results, expected " +
           std::to_string(nRes);
  return "";
}

std::string expectResult(const TypeRef &r, DType dtype, const Shape &shape) {
  if (r.dtype != dtype || *r.shape != shape)
    return std::string("result is ") + dtypeName(r.dtype) +
           formatShape(*r.shape) + " but the op gives " + dtypeName(dtype) +
           formatShape(shape);
  return "";
}

bool inRange(int64_t axis, size_t rank) {
  return axis >= 0 && axis < static_cast<int64_t>(rank);
}

/// Checked a * b + c, false on overflow.
bool mulAdd(int64_t a, int64_t b, int64_t c, int64_t &out) {
  int64_t p;
  return !__builtin_mul_overflow(a, b, &p) &&
         !__builtin_add_overflow(p, c, &out);
}

int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
                  int64_t d, bool ceil) {
  int64_t window, extent, reach, padded, span;
  if (s < 1 || k < 1 || d < 1 || __builtin_mul_overflow(d, k - 1, &window) ||
      __builtin_add_overflow(window, 1, &extent) ||
      __builtin_add_overflow(in, pb, &reach) ||
      __builtin_add_overflow(reach, pe, &padded) ||
      __builtin_sub_overflow(padded, extent, &span) || span < 0)
    return 0;
  int64_t steps = span / s;
  if (ceil && span % s != 0) {
    int64_t start;
    if (!__builtin_mul_overflow(steps + 1, s, &start) && start < reach)
      ++steps;
  }
  return steps + 1;
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

std::string matmul(const Attrs &a, const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  const Shape &l = *ops[0].shape, &r = *ops[1].shape;
  if (l.size() < 2 || r.size() < 2 || ops[0].dtype != ops[1].dtype)
    return "operands must have rank at least 2 and one element type";
  int64_t m = l[l.size() - 2], lk = l.back(), rk = r[r.size() - 2],
          n = r.back();
  if (a.getBool("transpose_lhs"))
    std::swap(m, lk);
  if (a.getBool("transpose_rhs"))
    std::swap(rk, n);
  Shape batch;
  if (lk != rk || !broadcastShapes(Shape(l.begin(), l.end() - 2),
                                   Shape(r.begin(), r.end() - 2), batch))
    return "contracting or batch dimensions do not match";
  batch.push_back(m);
  batch.push_back(n);
  return expectResult(res[0], ops[0].dtype, batch);
}

std::string fusedMatmul(const Attrs &a, const std::vector<TypeRef> &ops,
                        const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 3, 3); !e.empty())
    return e;
  if (auto e = matmul(a, {ops[0], ops[1]}, res); !e.empty())
    return e;
  const Shape &bias = *ops[2].shape;
  if (bias.size() != 1 || bias[0] != res[0].shape->back() ||
      ops[2].dtype != ops[0].dtype)
    return "the bias must be a vector of the result's last dimension";
  return "";
}

std::string paramsOf(const std::vector<TypeRef> &ops, size_t from,
                     const Shape &shape) {
  for (size_t i = from; i < ops.size(); ++i)
    if (*ops[i].shape != shape || ops[i].dtype != ops[0].dtype)
      return "operand #" + std::to_string(i) + " must be " +
             dtypeName(ops[0].dtype) + formatShape(shape);
  return "";
}

std::string layerNorm(const Attrs &a, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 3); !e.empty())
    return e;
  const Shape &in = *ops[0].shape;
  int64_t axis = a.getInt("axis");
  if (!inRange(axis, in.size()))
    return "axis is out of range";
  if (auto e = paramsOf(ops, 1, Shape(in.begin() + axis, in.end())); !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, in);
}

std::string batchNorm(const Attrs &, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 5, 5); !e.empty())
    return e;
  const Shape &in = *ops[0].shape;
  if (in.size() < 2)
    return "input must have rank at least 2";
  if (auto e = paramsOf(ops, 1, {in[1]}); !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, in);
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

bool windowAttrs(const Attrs &a, std::vector<int64_t> &strides,
                 std::vector<int64_t> &padding,
                 std::vector<int64_t> &dilations) {
  strides = a.getInts("strides");
  padding = a.getInts("padding");
  dilations = a.getInts("dilations");
  if (strides.size() != 2 || padding.size() != 4 || dilations.size() != 2)
    return false;
  for (int64_t p : padding)
    if (p < 0)
      return false;
  return true;
}

/// The conv2d result shape for input `in` and weight `w` (one element
/// type), or what is wrong.
std::string convShape(const Attrs &a, const TypeRef &in, const TypeRef &w,
                      Shape &out) {
  const Shape &x = *in.shape, &k = *w.shape;
  std::vector<int64_t> strides, padding, dilations;
  int64_t groups = a.getInt("groups", 1);
  if (x.size() != 4 || k.size() != 4 ||
      !windowAttrs(a, strides, padding, dilations) || groups < 1 ||
      x[1] % groups || k[0] % groups || k[1] != x[1] / groups ||
      w.dtype != in.dtype)
    return "input, weight, groups or window attributes do not fit";
  out = {x[0], k[0]};
  for (int i = 0; i < 2; ++i) {
    int64_t o = windowOut(x[2 + i], k[2 + i], strides[i], padding[i],
                          padding[i + 2], dilations[i], false);
    if (o < 1)
      return "the kernel does not fit the input";
    out.push_back(o);
  }
  return "";
}

std::string conv2d(const Attrs &a, const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 3); !e.empty())
    return e;
  Shape out;
  if (auto e = convShape(a, ops[0], ops[1], out); !e.empty())
    return e;
  if (ops.size() == 3)
    if (auto e = paramsOf(ops, 2, {(*ops[1].shape)[0]}); !e.empty())
      return e;
  return expectResult(res[0], ops[0].dtype, out);
}

/// The max_pool2d / avg_pool2d result shape for input `in`, or what is
/// wrong.
std::string poolShape(const Attrs &a, const Shape &in, Shape &out) {
  std::vector<int64_t> kernel = a.getInts("kernel"), strides, padding,
                       dilations;
  if (in.size() != 4 || kernel.size() != 2 ||
      !windowAttrs(a, strides, padding, dilations))
    return "input must be NCHW with 2-D window attributes";
  out = {in[0], in[1]};
  for (int i = 0; i < 2; ++i) {
    int64_t o = windowOut(in[2 + i], kernel[i], strides[i], padding[i],
                          padding[i + 2], dilations[i], a.getBool("ceil_mode"));
    if (o < 1 || padding[i] >= dilations[i] * (kernel[i] - 1) + 1 ||
        padding[i + 2] >= dilations[i] * (kernel[i] - 1) + 1)
      return "the window does not fit the input";
    out.push_back(o);
  }
  return "";
}

std::string pool2d(const Attrs &a, const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  Shape out;
  if (auto e = poolShape(a, *ops[0].shape, out); !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, out);
}

std::string crossEntropy(const Attrs &, const std::vector<TypeRef> &ops,
                         const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  const Shape &l = *ops[0].shape, &y = *ops[1].shape;
  if (l.size() != 2 || y.size() != 1 || l[0] != y[0] ||
      (ops[1].dtype != DType::I32 && ops[1].dtype != DType::I64))
    return "logits must be [N, C] and labels [N] integers";
  return expectResult(res[0], ops[0].dtype, {});
}

std::string mse(const Attrs &, const std::vector<TypeRef> &ops,
                const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  if (*ops[0].shape != *ops[1].shape || ops[0].dtype != ops[1].dtype)
    return "prediction and target must have the same type";
  return expectResult(res[0], ops[0].dtype, {});
}

//===----------------------------------------------------------------------===//
// Training ops (dialects/LoomTrainOps.td)
//===----------------------------------------------------------------------===//

bool isIndex(DType dtype) { return dtype == DType::I32 || dtype == DType::I64; }

std::string typeName(DType dtype, const Shape &shape) {
  return dtypeName(dtype) + formatShape(shape);
}

/// "" if `t` is `dtype` with `shape`, else an error naming `what`.
std::string expectType(const char *what, const TypeRef &t, DType dtype,
                       const Shape &shape) {
  if (t.dtype == dtype && *t.shape == shape)
    return "";
  return std::string(what) + " is " + typeName(t.dtype, *t.shape) +
         ", expected " + typeName(dtype, shape);
}

std::string expectFloat(const char *what, const TypeRef &t) {
  if (isFloat(t.dtype))
    return "";
  return std::string(what) + " must be a float tensor, not " +
         dtypeName(t.dtype);
}

/// The gradient `grad` must have the type of the forward result `forward`
/// of element type `dtype`.
std::string expectGrad(const TypeRef &grad, DType dtype, const Shape &forward,
                       const char *of) {
  if (grad.dtype == dtype && *grad.shape == forward)
    return "";
  return "grad is " + typeName(grad.dtype, *grad.shape) + " but " + of +
         " gives " + typeName(dtype, forward);
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

std::string layerNormGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                          const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 3, 3, 3); !e.empty())
    return e;
  const Shape &in = *ops[0].shape;
  DType dtype = ops[0].dtype;
  int64_t axis = a.getInt("axis");
  if (!inRange(axis, in.size()))
    return "axis is out of range";
  Shape param(in.begin() + axis, in.end());
  for (auto e :
       {expectFloat("input", ops[0]), expectType("scale", ops[1], dtype, param),
        expectType("grad", ops[2], dtype, in),
        expectType("input_grad", res[0], dtype, in),
        expectType("scale_grad", res[1], dtype, param),
        expectType("bias_grad", res[2], dtype, param)})
    if (!e.empty())
      return e;
  return "";
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

std::string crossEntropyGrad(const Attrs &, const std::vector<TypeRef> &ops,
                             const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 3, 3); !e.empty())
    return e;
  const Shape &l = *ops[0].shape, &y = *ops[1].shape;
  if (l.size() != 2 || y.size() != 1 || l[0] != y[0] || !isIndex(ops[1].dtype))
    return "logits must be [N, C] and labels [N] integers";
  if (auto e = expectFloat("logits", ops[0]); !e.empty())
    return e;
  if (auto e = expectType("grad", ops[2], ops[0].dtype, {}); !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, l);
}

/// label_count(labels [N] integers) -> a float scalar.
std::string labelCount(const Attrs &, const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  if (ops[0].shape->size() != 1 || !isIndex(ops[0].dtype))
    return "labels must be [N] integers";
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  return expectResult(res[0], res[0].dtype, {});
}

/// conv2d_grad_input(grad, weight) -> input-shaped result.
std::string convGradInput(const Attrs &a, const std::vector<TypeRef> &ops,
                          const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape out;
  if (auto e = convShape(a, res[0], ops[1], out); !e.empty())
    return e;
  return expectGrad(ops[0], res[0].dtype, out, "conv2d of the result");
}

/// conv2d_grad_weight(input, grad) -> weight-shaped result.
std::string convGradWeight(const Attrs &a, const std::vector<TypeRef> &ops,
                           const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  Shape out;
  if (auto e = convShape(a, ops[0], res[0], out); !e.empty())
    return e;
  return expectGrad(ops[1], ops[0].dtype, out, "conv2d with the result");
}

/// max_pool2d_grad(input, grad) -> input-typed result.
std::string maxPoolGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                        const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 2, 2); !e.empty())
    return e;
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  Shape out;
  if (auto e = poolShape(a, *ops[0].shape, out); !e.empty())
    return e;
  if (auto e = expectGrad(ops[1], ops[0].dtype, out, "max_pool2d of the input");
      !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, *ops[0].shape);
}

/// avg_pool2d_grad(grad) -> pooled-input-shaped result.
std::string avgPoolGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                        const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape out;
  if (auto e = poolShape(a, *res[0].shape, out); !e.empty())
    return e;
  return expectGrad(ops[0], res[0].dtype, out, "avg_pool2d of the result");
}

/// An optimizer update: `tensors` operands of one float type (param first),
/// then `scalars` rank-0 operands of its element type (lr, step), and
/// `results` results of param's type.
std::string update(const std::vector<TypeRef> &ops,
                   const std::vector<TypeRef> &res, size_t tensors,
                   size_t scalars, size_t results) {
  if (auto e =
          expectCounts(ops, res, tensors + scalars, tensors + scalars, results);
      !e.empty())
    return e;
  if (auto e = expectFloat("param", ops[0]); !e.empty())
    return e;
  DType dtype = ops[0].dtype;
  const Shape &shape = *ops[0].shape;
  for (size_t i = 1; i < tensors; ++i)
    if (auto e = expectType(("operand #" + std::to_string(i)).c_str(), ops[i],
                            dtype, shape);
        !e.empty())
      return e;
  for (size_t i = tensors; i < ops.size(); ++i)
    if (auto e = expectType(i == tensors ? "lr" : "step", ops[i], dtype, {});
        !e.empty())
      return e;
  for (const TypeRef &r : res)
    if (auto e = expectResult(r, dtype, shape); !e.empty())
      return e;
  return "";
}

std::string sgdUpdate(const Attrs &, const std::vector<TypeRef> &ops,
                      const std::vector<TypeRef> &res) {
  return update(ops, res, 2, 1, 1);
}

std::string momentumUpdate(const Attrs &, const std::vector<TypeRef> &ops,
                           const std::vector<TypeRef> &res) {
  return update(ops, res, 3, 1, 2);
}

std::string adamUpdate(const Attrs &, const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  return update(ops, res, 4, 2, 3);
}

const std::map<std::string, Check> &rules() {
  static const std::map<std::string, Check> table = {
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
      {"matmul", matmul},
      {"fused_matmul", fusedMatmul},
      {"softmax", alongAxis},
      {"log_softmax", alongAxis},
      {"layer_norm", layerNorm},
      {"batch_norm", batchNorm},
      {"reduce_sum", reduce},
      {"reduce_mean", reduce},
      {"reduce_max", reduce},
      {"transpose", transpose},
      {"reshape", reshape},
      {"broadcast", broadcast},
      {"gather", gather},
      {"concat", concat},
      {"slice", slice},
      {"conv2d", conv2d},
      {"max_pool2d", pool2d},
      {"avg_pool2d", pool2d},
      {"softmax_cross_entropy", crossEntropy},
      {"mse_loss", mse},
      {"relu_grad", activationGrad},
      {"reduce_max_grad", reduceMaxGrad},
      {"gelu_grad", activationGrad},
      {"layer_norm_grad", layerNormGrad},
      {"gather_grad", gatherGrad},
      {"slice_grad", sliceGrad},
      {"softmax_cross_entropy_grad", crossEntropyGrad},
      {"label_count", labelCount},
      {"conv2d_grad_input", convGradInput},
      {"conv2d_grad_weight", convGradWeight},
      {"max_pool2d_grad", maxPoolGrad},
      {"avg_pool2d_grad", avgPoolGrad},
      {"sgd_update", sgdUpdate},
      {"momentum_update", momentumUpdate},
      {"adam_update", adamUpdate},
  };
  return table;
}

//===----------------------------------------------------------------------===//
// Collectives (runtime/comm/Collectives.h)
//===----------------------------------------------------------------------===//

/// Reads the integer attribute `name` into `out`, or says why it cannot.
std::string intAttr(const Attrs &a, const char *name, int64_t &out) {
  auto it = a.all().find(name);
  if (it == a.all().end())
    return std::string("needs the integer attribute '") + name + "'";
  const int64_t *value = std::get_if<int64_t>(&it->second);
  if (!value)
    return std::string("attribute '") + name + "' must be an integer";
  out = *value;
  return "";
}

/// "" if `axis` is an index into `mesh`, else why not.
std::string meshAxisInRange(int64_t axis,
                            const std::vector<layout::MeshAxis> &mesh) {
  if (mesh.empty())
    return "a collective needs a mesh, and the plan has none";
  if (axis < 0 || axis >= static_cast<int64_t>(mesh.size()))
    return "mesh axis " + std::to_string(axis) +
           " is out of range (the mesh "
           "has " +
           std::to_string(mesh.size()) + " axes)";
  return "";
}

std::string meshAxisName(int64_t axis,
                         const std::vector<layout::MeshAxis> &mesh) {
  return "'" + mesh[axis].name + "' (size " + std::to_string(mesh[axis].size) +
         ")";
}

bool isSummable(DType dtype) { return dtype != DType::Bool; }

std::string collective(const std::string &op, const Attrs &a,
                       const std::vector<layout::MeshAxis> &mesh,
                       const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(ops, res, 1, 1); !e.empty())
    return e;
  const Shape &in = *ops[0].shape, &out = *res[0].shape;
  if (res[0].dtype != ops[0].dtype)
    return std::string("result element type ") + dtypeName(res[0].dtype) +
           " differs from the operand's " + dtypeName(ops[0].dtype);
  // The ops that produce or consume partial sums need summable elements.
  bool sums =
      op == "all_reduce" || op == "reduce_scatter" || op == "make_partial";
  if (sums && !isSummable(ops[0].dtype))
    return std::string("cannot sum elements of type ") +
           dtypeName(ops[0].dtype);
  if (op == "all_reduce") {
    auto it = a.all().find("axes");
    const auto *axes = it == a.all().end()
                           ? nullptr
                           : std::get_if<std::vector<int64_t>>(&it->second);
    if (!axes || axes->empty())
      return "needs a non-empty integer list attribute 'axes'";
    for (size_t i = 0; i < axes->size(); ++i) {
      if (auto e = meshAxisInRange((*axes)[i], mesh); !e.empty())
        return e;
      for (size_t j = 0; j < i; ++j)
        if ((*axes)[j] == (*axes)[i])
          return "mesh axis " + meshAxisName((*axes)[i], mesh) +
                 " is listed twice";
    }
    return expectResult(res[0], ops[0].dtype, in);
  }
  int64_t axis = 0;
  if (auto e = intAttr(a, "axis", axis); !e.empty())
    return e;
  if (auto e = meshAxisInRange(axis, mesh); !e.empty())
    return e;
  if (op == "make_partial")
    return expectResult(res[0], ops[0].dtype, in);
  int64_t n = mesh[axis].size, dim = 0;
  if (auto e = intAttr(a, "dim", dim); !e.empty())
    return e;
  if (!inRange(dim, in.size()))
    return "dim " + std::to_string(dim) +
           " is out of range for an operand "
           "of rank " +
           std::to_string(in.size());
  if (out.size() != in.size())
    return "result rank " + std::to_string(out.size()) +
           " differs from the operand's " + std::to_string(in.size());
  Shape expected = in;
  auto divide = [&](int64_t d) -> std::string {
    if (in[d] % n != 0)
      return "dimension " + std::to_string(d) + " of size " +
             std::to_string(in[d]) +
             " is not divisible by the size of mesh "
             "axis " +
             meshAxisName(axis, mesh);
    expected[d] = in[d] / n;
    return "";
  };
  auto multiply = [&](int64_t d) -> std::string {
    if (__builtin_mul_overflow(in[d], n, &expected[d]))
      return "dimension " + std::to_string(d) + " overflows";
    return "";
  };
  std::string e;
  if (op == "reduce_scatter" || op == "local_split") {
    e = divide(dim);
  } else if (op == "all_gather") {
    e = multiply(dim);
  } else if (op == "all_to_all") {
    int64_t toDim = 0;
    if (auto e2 = intAttr(a, "to_dim", toDim); !e2.empty())
      return e2;
    if (!inRange(toDim, in.size()) || toDim == dim)
      return "to_dim " + std::to_string(toDim) +
             " must be a dimension of "
             "the operand other than dim " +
             std::to_string(dim);
    e = divide(toDim);
    if (e.empty())
      e = multiply(dim);
  } else {
    return "unknown collective '" + op + "'";
  }
  if (!e.empty())
    return e;
  if (out != expected)
    return "result is " + typeName(res[0].dtype, out) + " but " + op +
           " over mesh axis " + meshAxisName(axis, mesh) + " gives " +
           typeName(ops[0].dtype, expected);
  return "";
}

} // namespace

std::string checkCollective(const std::string &op, const Attrs &attrs,
                            const std::vector<layout::MeshAxis> &meshAxes,
                            const std::vector<TypeRef> &operands,
                            const std::vector<TypeRef> &results) {
  return collective(op, attrs, meshAxes, operands, results);
}

std::string checkInstruction(const std::string &op, const Attrs &attrs,
                             const std::vector<TypeRef> &operands,
                             const std::vector<TypeRef> &results) {
  auto it = rules().find(op);
  if (it == rules().end())
    return "unknown op '" + op + "'";
  return it->second(attrs, operands, results);
}

} // namespace loom::rt
