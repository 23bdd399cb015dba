//===- NNRules.cpp - Rules of linear algebra and network layers -----------===//
//
// The shape rules of the ops that carry a network's arithmetic: matmul and
// fused_matmul, layer_norm and batch_norm, conv2d, conv_transpose2d and the
// 2-D pools (over one window-size computation), the losses, the gradients of
// all of those, label_count, and the optimizer updates (sgd, momentum, adam).
//
//===----------------------------------------------------------------------===//

#include "common/ops/RulesImpl.h"

#include <algorithm>
#include <cmath>

namespace loom::ops::rules {

namespace {

int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
                  int64_t d, bool ceil) {
  // Attributes come from user IR or a plan: any overflow means the window
  // cannot fit.
  int64_t window, extent, reach, padded, span;
  if (s < 1 || k < 1 || d < 1 || __builtin_mul_overflow(d, k - 1, &window) ||
      __builtin_add_overflow(window, 1, &extent) ||
      __builtin_add_overflow(in, pb, &reach) ||
      __builtin_add_overflow(reach, pe, &padded) ||
      __builtin_sub_overflow(padded, extent, &span) || span < 0)
    return 0;
  int64_t steps = span / s;
  // The extra window of ceil mode counts only if it starts inside the input
  // or the leading padding.
  if (ceil && span % s != 0) {
    int64_t start;
    if (!__builtin_mul_overflow(steps + 1, s, &start) && start < reach)
      ++steps;
  }
  return steps + 1;
}

/// The type of `op(lhs) x op(rhs)` (matmul's rule) into `out`.
std::string matmulType(const Attrs &a, const TypeRef &lhs, const TypeRef &rhs,
                       TensorType &out) {
  const Shape &l = *lhs.shape, &r = *rhs.shape;
  if (l.size() < 2 || r.size() < 2)
    return "operands must have rank at least 2, got " +
           std::to_string(l.size()) + " and " + std::to_string(r.size());
  if (lhs.dtype != rhs.dtype)
    return std::string("operands have different element types (") +
           dtypeName(lhs.dtype) + " and " + dtypeName(rhs.dtype) + ")";
  int64_t m = l[l.size() - 2], lk = l.back(), rk = r[r.size() - 2],
          n = r.back();
  if (a.getBool("transpose_lhs"))
    std::swap(m, lk);
  if (a.getBool("transpose_rhs"))
    std::swap(rk, n);
  if (lk != rk)
    return "contracting dimensions differ: lhs has " + std::to_string(lk) +
           ", rhs has " + std::to_string(rk);
  Shape lb(l.begin(), l.end() - 2), rb(r.begin(), r.end() - 2), batch;
  if (!broadcastShapes(lb, rb, batch))
    return "batch dimensions " + formatShape(lb) + " and " + formatShape(rb) +
           " do not broadcast";
  batch.push_back(m);
  batch.push_back(n);
  out = {lhs.dtype, batch};
  return "";
}

std::string matmul(const Attrs &a, const std::vector<TypeRef> &ops,
                   std::vector<TensorType> &out) {
  TensorType type;
  if (auto e = matmulType(a, ops[0], ops[1], type); !e.empty())
    return e;
  out.push_back(type);
  return "";
}

std::string fusedMatmul(const Attrs &a, const std::vector<TypeRef> &ops,
                        std::vector<TensorType> &out) {
  TensorType type;
  if (auto e = matmulType(a, ops[0], ops[1], type); !e.empty())
    return e;
  const Shape &bias = *ops[2].shape;
  int64_t n = type.shape.back();
  if (bias.size() != 1 || bias[0] != n || ops[2].dtype != type.dtype)
    return "the bias must be a vector of " + std::to_string(n) + " " +
           dtypeName(type.dtype) + ", got " + typeName(ops[2].dtype, bias);
  out.push_back(type);
  return "";
}

/// "" if operand `param` (named `name`) has `shape` and the input's element
/// type `dtype`.
std::string checkParam(const char *name, const TypeRef &param,
                       const Shape &shape, DType dtype) {
  if (*param.shape != shape)
    return std::string("'") + name + "' must have shape " + formatShape(shape) +
           ", got " + formatShape(*param.shape);
  if (param.dtype != dtype)
    return std::string("'") + name + "' must have element type " +
           dtypeName(dtype) + ", got " + dtypeName(param.dtype);
  return "";
}

std::string checkEpsilon(const Attrs &a) {
  double epsilon = a.getFloat("epsilon");
  if (!std::isfinite(epsilon) || epsilon < 0)
    return "epsilon must be finite and not negative";
  return "";
}

std::string layerNorm(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  const Shape &in = *ops[0].shape;
  int64_t axis = a.getInt("axis");
  if (auto e = checkAxis(axis, in.size()); !e.empty())
    return e;
  if (auto e = checkEpsilon(a); !e.empty())
    return e;
  Shape normalized(in.begin() + axis, in.end());
  if (auto e = checkParam("scale", ops[1], normalized, ops[0].dtype);
      !e.empty())
    return e;
  if (ops.size() == 3)
    if (auto e = checkParam("bias", ops[2], normalized, ops[0].dtype);
        !e.empty())
      return e;
  return one(out, ops[0].dtype, in);
}

std::string batchNorm(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  const Shape &in = *ops[0].shape;
  if (in.size() < 2)
    return "input must have rank at least 2, got " + std::to_string(in.size());
  if (auto e = checkEpsilon(a); !e.empty())
    return e;
  const char *names[] = {"scale", "bias", "mean", "variance"};
  for (size_t i = 1; i < 5; ++i)
    if (auto e = checkParam(names[i - 1], ops[i], {in[1]}, ops[0].dtype);
        !e.empty())
      return e;
  return one(out, ops[0].dtype, in);
}

/// "" if the window attribute `name` has `count` entries of at least
/// `minimum`.
std::string windowAttr(const std::vector<int64_t> &values, const char *name,
                       size_t count, int64_t minimum) {
  if (values.size() != count)
    return std::string("'") + name + "' must have " + std::to_string(count) +
           " entries, got " + std::to_string(values.size());
  for (int64_t v : values)
    if (v < minimum)
      return std::string("'") + name + "' entries must be at least " +
             std::to_string(minimum) + ", got " + std::to_string(v);
  return "";
}

/// The conv2d result shape for input `in` and weight `w` into `out`, or what
/// is wrong.
std::string convShape(const Attrs &a, const TypeRef &in, const TypeRef &w,
                      Shape &out) {
  const Shape &x = *in.shape, &k = *w.shape;
  if (x.size() != 4 || k.size() != 4)
    return "input and weight must have rank 4, got " +
           std::to_string(x.size()) + " and " + std::to_string(k.size());
  if (w.dtype != in.dtype)
    return std::string("weight element type ") + dtypeName(w.dtype) +
           " differs from the input's " + dtypeName(in.dtype);
  int64_t groups = a.getInt("groups", 1);
  if (groups < 1 || x[1] % groups != 0 || k[0] % groups != 0)
    return "groups (" + std::to_string(groups) +
           ") must be at least 1 and divide the input channels (" +
           std::to_string(x[1]) + ") and output channels (" +
           std::to_string(k[0]) + ")";
  if (k[1] != x[1] / groups)
    return "weight has " + std::to_string(k[1]) +
           " input channels per group, expected " +
           std::to_string(x[1] / groups);
  std::vector<int64_t> strides = a.getInts("strides"),
                       padding = a.getInts("padding"),
                       dilations = a.getInts("dilations");
  if (auto e = windowAttr(strides, "strides", 2, 1); !e.empty())
    return e;
  if (auto e = windowAttr(padding, "padding", 4, 0); !e.empty())
    return e;
  if (auto e = windowAttr(dilations, "dilations", 2, 1); !e.empty())
    return e;
  out = {x[0], k[0]};
  for (int i = 0; i < 2; ++i) {
    int64_t o = windowOut(x[2 + i], k[2 + i], strides[i], padding[i],
                          padding[i + 2], dilations[i], false);
    if (o < 1)
      return "kernel does not fit spatial dimension " + std::to_string(i) +
             " of size " + std::to_string(x[2 + i]);
    out.push_back(o);
  }
  return "";
}

std::string conv2d(const Attrs &a, const std::vector<TypeRef> &ops,
                   std::vector<TensorType> &out) {
  Shape shape;
  if (auto e = convShape(a, ops[0], ops[1], shape); !e.empty())
    return e;
  if (ops.size() == 3)
    if (auto e = checkParam("bias", ops[2], {shape[1]}, ops[0].dtype);
        !e.empty())
      return e;
  return one(out, ops[0].dtype, shape);
}

/// conv_transpose2d: the input shape of a convolution whose output is
/// `input`, with `output_padding` more rows and columns at the end.
std::string convTranspose2d(const Attrs &a, const std::vector<TypeRef> &ops,
                            std::vector<TensorType> &out) {
  const Shape &x = *ops[0].shape, &k = *ops[1].shape;
  if (x.size() != 4 || k.size() != 4)
    return "input and weight must have rank 4, got " +
           std::to_string(x.size()) + " and " + std::to_string(k.size());
  if (ops[1].dtype != ops[0].dtype)
    return std::string("weight element type ") + dtypeName(ops[1].dtype) +
           " differs from the input's " + dtypeName(ops[0].dtype);
  int64_t groups = a.getInt("groups", 1);
  if (groups < 1 || x[1] % groups != 0)
    return "groups (" + std::to_string(groups) +
           ") must be at least 1 and divide the input channels (" +
           std::to_string(x[1]) + ")";
  if (k[0] != x[1])
    return "weight has " + std::to_string(k[0]) + " input channels, expected " +
           std::to_string(x[1]);
  std::vector<int64_t> strides = a.getInts("strides"),
                       padding = a.getInts("padding"),
                       dilations = a.getInts("dilations"),
                       extra = a.getInts("output_padding");
  for (auto e : {windowAttr(strides, "strides", 2, 1),
                 windowAttr(padding, "padding", 4, 0),
                 windowAttr(dilations, "dilations", 2, 1),
                 windowAttr(extra, "output_padding", 2, 0)})
    if (!e.empty())
      return e;
  int64_t channels;
  if (__builtin_mul_overflow(k[1], groups, &channels))
    return "the output channels (" + std::to_string(k[1]) + " x " +
           std::to_string(groups) + " groups) overflow";
  Shape shape = {x[0], channels};
  for (int i = 0; i < 2; ++i) {
    if (extra[i] >= strides[i])
      return "output_padding (" + std::to_string(extra[i]) +
             ") must be smaller than its stride (" +
             std::to_string(strides[i]) + ")";
    // (in - 1) * stride - pads + dilation * (kernel - 1) + 1 + extra; the
    // attributes come from a plan, so any overflow leaves no output.
    int64_t span, reach, o, pads;
    if (k[2 + i] < 1 ||
        __builtin_mul_overflow(x[2 + i] - 1, strides[i], &span) ||
        __builtin_mul_overflow(dilations[i], k[2 + i] - 1, &reach) ||
        __builtin_add_overflow(span, reach, &o) ||
        __builtin_add_overflow(o, extra[i], &o) ||
        __builtin_add_overflow(o, 1, &o) ||
        __builtin_add_overflow(padding[i], padding[i + 2], &pads) ||
        __builtin_sub_overflow(o, pads, &o) || o < 1)
      return "padding leaves no output in spatial dimension " +
             std::to_string(i) + " of size " + std::to_string(x[2 + i]);
    shape.push_back(o);
  }
  if (ops.size() == 3)
    if (auto e = checkParam("bias", ops[2], {shape[1]}, ops[0].dtype);
        !e.empty())
      return e;
  return one(out, ops[0].dtype, shape);
}

/// The max_pool2d / avg_pool2d result shape for input `in`, or what is
/// wrong.
std::string poolShape(const Attrs &a, const Shape &in, Shape &out) {
  if (in.size() != 4)
    return "input must be NCHW (rank 4), got rank " + std::to_string(in.size());
  std::vector<int64_t> kernel = a.getInts("kernel"),
                       strides = a.getInts("strides"),
                       padding = a.getInts("padding"),
                       dilations = a.getInts("dilations");
  for (auto e : {windowAttr(kernel, "kernel", 2, 1),
                 windowAttr(strides, "strides", 2, 1),
                 windowAttr(padding, "padding", 4, 0),
                 windowAttr(dilations, "dilations", 2, 1)})
    if (!e.empty())
      return e;
  out = {in[0], in[1]};
  for (int i = 0; i < 2; ++i) {
    std::string fit = "window does not fit spatial dimension " +
                      std::to_string(i) + " of size " +
                      std::to_string(in[2 + i]);
    int64_t window;
    if (__builtin_mul_overflow(dilations[i], kernel[i] - 1, &window))
      return fit;
    if (padding[i] > window || padding[i + 2] > window)
      return "padding must be smaller than the window";
    int64_t o = windowOut(in[2 + i], kernel[i], strides[i], padding[i],
                          padding[i + 2], dilations[i], a.getBool("ceil_mode"));
    if (o < 1)
      return fit;
    out.push_back(o);
  }
  return "";
}

std::string maxPool2d(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  Shape shape;
  if (auto e = poolShape(a, *ops[0].shape, shape); !e.empty())
    return e;
  return one(out, ops[0].dtype, shape);
}

std::string avgPool2d(const Attrs &a, const std::vector<TypeRef> &ops,
                      std::vector<TensorType> &out) {
  for (int64_t d : a.getInts("dilations"))
    if (d != 1)
      return "dilations must be 1";
  return maxPool2d(a, ops, out);
}

std::string crossEntropy(const Attrs &, const std::vector<TypeRef> &ops,
                         std::vector<TensorType> &out) {
  const Shape &l = *ops[0].shape, &y = *ops[1].shape;
  if (l.size() != 2 || y.size() != 1 || l[0] != y[0])
    return "logits must be [N, C] and labels [N], got " + formatShape(l) +
           " and " + formatShape(y);
  if (!isIndex(ops[1].dtype))
    return std::string("labels must be i32 or i64, not ") +
           dtypeName(ops[1].dtype);
  // A class block of a vocabulary-parallel loss: the rows' log-sum-exp.
  if (ops.size() > 2 &&
      (*ops[2].shape != Shape{l[0]} || ops[2].dtype != ops[0].dtype))
    return "lse must be [N] of the logits' type, got " +
           typeName(ops[2].dtype, *ops[2].shape);
  return one(out, ops[0].dtype, {});
}

std::string mse(const Attrs &, const std::vector<TypeRef> &ops,
                std::vector<TensorType> &out) {
  if (*ops[0].shape != *ops[1].shape || ops[0].dtype != ops[1].dtype)
    return "prediction " + typeName(ops[0].dtype, *ops[0].shape) +
           " and target " + typeName(ops[1].dtype, *ops[1].shape) +
           " must have the same type";
  return one(out, ops[0].dtype, {});
}

std::string dropout(const Attrs &a, const std::vector<TypeRef> &ops,
                    std::vector<TensorType> &out) {
  double ratio = a.getFloat("ratio");
  if (!(ratio >= 0 && ratio < 1))
    return "ratio must be in [0, 1), got " + std::to_string(ratio);
  if (a.getInt("index_offset") < 0)
    return "index_offset must not be negative, got " +
           std::to_string(a.getInt("index_offset"));
  if (ops.size() == 2 && (!ops[1].shape->empty() || !isFloat(ops[1].dtype)))
    return "step must be a floating-point scalar, got " +
           typeName(ops[1].dtype, *ops[1].shape);
  return one(out, ops[0].dtype, *ops[0].shape);
}

} // namespace

void addNNRules(RuleTable &table) {
  table.insert({
      {"matmul", inferred(matmul, 2, 2)},
      {"fused_matmul", inferred(fusedMatmul, 3, 3)},
      {"layer_norm", inferred(layerNorm, 2, 3)},
      {"batch_norm", inferred(batchNorm, 5, 5)},
      {"conv2d", inferred(conv2d, 2, 3)},
      {"conv_transpose2d", inferred(convTranspose2d, 2, 3)},
      {"max_pool2d", inferred(maxPool2d, 1, 1)},
      {"avg_pool2d", inferred(avgPool2d, 1, 1)},
      {"softmax_cross_entropy", inferred(crossEntropy, 2, 3)},
      {"mse_loss", inferred(mse, 2, 2)},
      {"dropout", inferred(dropout, 1, 2)},
  });
}

// The training ops' rules need the window and convolution shapes above.
std::string convResultShape(const Attrs &a, const TypeRef &in, const TypeRef &w,
                            Shape &out) {
  return convShape(a, in, w, out);
}

std::string poolResultShape(const Attrs &a, const Shape &in, Shape &out) {
  return poolShape(a, in, out);
}

} // namespace loom::ops::rules
