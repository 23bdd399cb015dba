//===- ShapeCheckNN.cpp - Rules of linear algebra and network layers ------===//
//
// The shape rules of the ops that carry a network's arithmetic: matmul and
// fused_matmul, layer_norm and batch_norm, conv2d and the 2-D pools (over
// one window-size computation), the losses, the gradients of all of those,
// label_count, and the optimizer updates (sgd, momentum, adam).
//
//===----------------------------------------------------------------------===//

#include "runtime/ShapeCheckImpl.h"

#include <algorithm>

namespace loom::rt::shapecheck {

namespace {

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

} // namespace

void addNNRules(RuleTable &table) {
  table.insert({
      {"matmul", matmul},
      {"fused_matmul", fusedMatmul},
      {"layer_norm", layerNorm},
      {"batch_norm", batchNorm},
      {"conv2d", conv2d},
      {"max_pool2d", pool2d},
      {"avg_pool2d", pool2d},
      {"softmax_cross_entropy", crossEntropy},
      {"mse_loss", mse},
      {"layer_norm_grad", layerNormGrad},
      {"softmax_cross_entropy_grad", crossEntropyGrad},
      {"label_count", labelCount},
      {"conv2d_grad_input", convGradInput},
      {"conv2d_grad_weight", convGradWeight},
      {"max_pool2d_grad", maxPoolGrad},
      {"avg_pool2d_grad", avgPoolGrad},
      {"sgd_update", sgdUpdate},
      {"momentum_update", momentumUpdate},
      {"adam_update", adamUpdate},
  });
}

} // namespace loom::rt::shapecheck
