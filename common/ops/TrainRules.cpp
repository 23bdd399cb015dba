//===- TrainRules.cpp - Rules of the gradient and optimizer ops -----------===//
//
// The shape rules of dialects/LoomTrainOps.td's ops that carry a network's
// backward pass and update: layer_norm_grad, the loss gradient, label_count,
// the convolution and pooling gradients, and the optimizer updates (sgd,
// momentum, adam). The element-wise and data-movement gradients sit with
// their forward ops in TensorRules.cpp.
//
//===----------------------------------------------------------------------===//

#include "common/ops/RulesImpl.h"

namespace loom::ops::rules {

namespace {

std::string layerNormGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                          std::vector<TensorType> &out) {
  const Shape &in = *ops[0].shape;
  DType dtype = ops[0].dtype;
  int64_t axis = a.getInt("axis");
  if (auto e = checkAxis(axis, in.size()); !e.empty())
    return e;
  Shape param(in.begin() + axis, in.end());
  for (auto e :
       {expectFloat("input", ops[0]), expectType("scale", ops[1], dtype, param),
        expectType("grad", ops[2], dtype, in)})
    if (!e.empty())
      return e;
  out = {{dtype, in}, {dtype, param}, {dtype, param}};
  return "";
}

std::string crossEntropyGrad(const Attrs &, const std::vector<TypeRef> &ops,
                             std::vector<TensorType> &out) {
  const Shape &l = *ops[0].shape, &y = *ops[1].shape;
  if (l.size() != 2 || y.size() != 1 || l[0] != y[0] || !isIndex(ops[1].dtype))
    return "logits must be [N, C] and labels [N] integers";
  if (auto e = expectFloat("logits", ops[0]); !e.empty())
    return e;
  if (auto e = expectType("grad", ops[2], ops[0].dtype, {}); !e.empty())
    return e;
  if (ops.size() > 3)
    if (auto e = expectType("lse", ops[3], ops[0].dtype, {l[0]}); !e.empty())
      return e;
  return one(out, ops[0].dtype, l);
}

/// label_count(labels [N] integers) -> a float scalar of any float type.
std::string labelCount(const Attrs &, const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  if (ops[0].shape->size() != 1 || !isIndex(ops[0].dtype))
    return "labels must be [N] integers";
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  return expectResult(res[0], res[0].dtype, {});
}

/// conv2d_grad_input(grad, weight) -> input-shaped result.
std::string convGradInput(const Attrs &a, const std::vector<TypeRef> &ops,
                          const std::vector<TypeRef> &res) {
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape out;
  if (auto e = convResultShape(a, res[0], ops[1], out); !e.empty())
    return e;
  return expectGrad(ops[0], res[0].dtype, out, "conv2d of the result");
}

/// conv2d_grad_weight(input, grad) -> weight-shaped result.
std::string convGradWeight(const Attrs &a, const std::vector<TypeRef> &ops,
                           const std::vector<TypeRef> &res) {
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  Shape out;
  if (auto e = convResultShape(a, ops[0], res[0], out); !e.empty())
    return e;
  return expectGrad(ops[1], ops[0].dtype, out, "conv2d with the result");
}

/// max_pool2d_grad(input, grad) -> input-typed result (given, as the
/// dialect's assembly names it).
std::string maxPoolGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                        const std::vector<TypeRef> &res) {
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  Shape pooled;
  if (auto e = poolResultShape(a, *ops[0].shape, pooled); !e.empty())
    return e;
  if (auto e =
          expectGrad(ops[1], ops[0].dtype, pooled, "max_pool2d of the input");
      !e.empty())
    return e;
  return expectResult(res[0], ops[0].dtype, *ops[0].shape);
}

/// avg_pool2d_grad(grad) -> pooled-input-shaped result.
std::string avgPoolGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                        const std::vector<TypeRef> &res) {
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape out;
  if (auto e = poolResultShape(a, *res[0].shape, out); !e.empty())
    return e;
  return expectGrad(ops[0], res[0].dtype, out, "avg_pool2d of the result");
}

/// An optimizer update: `tensors` operands of one float type (param first),
/// then `scalars` rank-0 operands of its element type (lr, step), and
/// `results` results of param's type.
std::string update(const std::vector<TypeRef> &ops, size_t tensors,
                   size_t results, std::vector<TensorType> &out) {
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
  out.assign(results, {dtype, shape});
  return "";
}

std::string sgdUpdate(const Attrs &, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  return update(ops, 2, 1, out);
}

std::string momentumUpdate(const Attrs &, const std::vector<TypeRef> &ops,
                           std::vector<TensorType> &out) {
  return update(ops, 3, 2, out);
}

std::string adamUpdate(const Attrs &, const std::vector<TypeRef> &ops,
                       std::vector<TensorType> &out) {
  return update(ops, 4, 3, out);
}

} // namespace

void addTrainRules(RuleTable &table) {
  table.insert({
      {"layer_norm_grad", inferred(layerNormGrad, 3, 3, 3)},
      {"softmax_cross_entropy_grad", inferred(crossEntropyGrad, 3, 4)},
      {"label_count", checked(labelCount, 1, 1)},
      {"conv2d_grad_input", checked(convGradInput, 2, 2)},
      {"conv2d_grad_weight", checked(convGradWeight, 2, 2)},
      {"max_pool2d_grad", checked(maxPoolGrad, 2, 2)},
      {"avg_pool2d_grad", checked(avgPoolGrad, 1, 1)},
      {"sgd_update", inferred(sgdUpdate, 3, 3)},
      {"momentum_update", inferred(momentumUpdate, 4, 4, 2)},
      {"adam_update", inferred(adamUpdate, 6, 6, 3)},
  });
}

} // namespace loom::ops::rules
