//===- OptimizerKernels.cpp - sgd_update, momentum_update, adam_update ----===//
//
// The updates run in place: the executor gives new_param the storage of
// param, new_velocity that of velocity, new_m that of m and new_v that of v.
// Every loop reads all inputs of element i before it writes any output of
// element i, so exact aliasing (and no aliasing) are both correct. f16/bf16
// run in f32 (runInF32 converts every input before the update and rounds
// the outputs after it, which aliasing also survives).
//
// The arithmetic follows PyTorch 1.13's single-tensor (non-foreach)
// implementations operation by operation, each one rounded to f32:
//   sgd:      d = g + wd*p (only if wd != 0); p = p - lr*d
//   momentum: d = g + wd*p (only if wd != 0); buf = momentum*buf + d;
//             d = nesterov ? d + momentum*buf : buf; p = p - lr*d
//   adam:     AdamW: p = p * (1 - lr*wd); Adam: g = g + wd*p (if wd != 0);
//             m = m*b1 + (1-b1)*g; v = v*b2 + ((1-b2)*g)*g;
//             denom = sqrt(v) / sqrt(1 - b2^t) + eps;
//             p = p + (-(lr / (1 - b1^t)) * m) / denom
// with the scalar factors (1 - lr*wd, 1 - b1, bias corrections, step size)
// computed in double as Python computes them and then rounded to f32, as
// PyTorch rounds a Python scalar for an f32 tensor. Differences that remain:
// the attributes are f32 (beta1 = 0.9 arrives as 0.899999976), lr is an f32
// tensor, and PyTorch's AVX2 `add(x, alpha)` fuses the multiply-add.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/TrainKernels.h"

#include <cmath>

namespace loom::rt::cpu {
namespace {

/// Checks the tensors the updates index: `same` (inputs then outputs) share
/// the first one's float type and shape; `scalars` share its type and hold
/// one element.
std::string checkUpdate(const KernelArgs &args,
                        std::initializer_list<const TensorView *> same,
                        std::initializer_list<const TensorView *> scalars) {
  const TensorView &first = **same.begin();
  std::string op(args.op);
  if (!isFloat(first.dtype))
    return op + " needs float tensors, got " + dtypeName(first.dtype);
  for (const TensorView *t : same)
    if (t->dtype != first.dtype || t->shape != first.shape)
      return op + ": every tensor must be " + dtypeName(first.dtype) +
             formatShape(first.shape) + ", got " + dtypeName(t->dtype) +
             formatShape(t->shape);
  for (const TensorView *t : scalars)
    if (t->dtype != first.dtype || t->numElements() != 1)
      return op + ": lr and step must be " + dtypeName(first.dtype) +
             " scalars, got " + dtypeName(t->dtype) + formatShape(t->shape);
  return {};
}

std::string sgdKernel(CpuContext &, const KernelArgs &args) {
  const auto &in = args.inputs;
  if (std::string e =
          checkUpdate(args, {&in[0], &in[1], &args.outputs[0]}, {&in[2]});
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const float *param = a.inputs[0].as<float>(),
                *grad = a.inputs[1].as<float>();
    float lr = *a.inputs[2].as<float>();
    float wd = static_cast<float>(a.attrs.getFloat("weight_decay"));
    float *out = a.outputs[0].as<float>();
    int64_t n = a.inputs[0].numElements();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) {
      float p = param[i], d = grad[i];
      if (wd != 0.0f)
        d = d + wd * p;
      out[i] = p - lr * d;
    }
    return {};
  });
}

std::string momentumKernel(CpuContext &, const KernelArgs &args) {
  const auto &in = args.inputs;
  const auto &out = args.outputs;
  if (std::string e = checkUpdate(
          args, {&in[0], &in[1], &in[2], &out[0], &out[1]}, {&in[3]});
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const float *param = a.inputs[0].as<float>(),
                *grad = a.inputs[1].as<float>(),
                *velocity = a.inputs[2].as<float>();
    float lr = *a.inputs[3].as<float>();
    float momentum = static_cast<float>(a.attrs.getFloat("momentum"));
    float wd = static_cast<float>(a.attrs.getFloat("weight_decay"));
    bool nesterov = a.attrs.getBool("nesterov");
    float *newParam = a.outputs[0].as<float>(),
          *newVelocity = a.outputs[1].as<float>();
    int64_t n = a.inputs[0].numElements();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) {
      float p = param[i], d = grad[i], buf = velocity[i];
      if (wd != 0.0f)
        d = d + wd * p;
      buf = buf * momentum + d;
      d = nesterov ? d + momentum * buf : buf;
      newVelocity[i] = buf;
      newParam[i] = p - lr * d;
    }
    return {};
  });
}

std::string adamKernel(CpuContext &, const KernelArgs &args) {
  const auto &in = args.inputs;
  const auto &out = args.outputs;
  if (std::string e = checkUpdate(
          args, {&in[0], &in[1], &in[2], &in[3], &out[0], &out[1], &out[2]},
          {&in[4], &in[5]});
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const float *param = a.inputs[0].as<float>(),
                *grad = a.inputs[1].as<float>(), *m = a.inputs[2].as<float>(),
                *v = a.inputs[3].as<float>();
    // Python floats: the attributes (f32 values), lr and step as doubles.
    double lr = *a.inputs[4].as<float>(), step = *a.inputs[5].as<float>();
    double beta1 = a.attrs.getFloat("beta1"), beta2 = a.attrs.getFloat("beta2"),
           epsilon = a.attrs.getFloat("epsilon"),
           wd = a.attrs.getFloat("weight_decay");
    bool decoupled = a.attrs.getBool("decoupled_weight_decay");
    double biasCorrection1 = 1.0 - std::pow(beta1, step);
    double biasCorrection2 = 1.0 - std::pow(beta2, step);
    double stepSize = lr / biasCorrection1;
    // The scalars as PyTorch hands them to f32 kernels.
    float decay = static_cast<float>(1.0 - lr * wd);
    float wdF = static_cast<float>(wd), b1 = static_cast<float>(beta1),
          b2 = static_cast<float>(beta2),
          oneMinusB1 = static_cast<float>(1.0 - beta1),
          oneMinusB2 = static_cast<float>(1.0 - beta2),
          bc2Sqrt = static_cast<float>(std::sqrt(biasCorrection2)),
          eps = static_cast<float>(epsilon),
          negStepSize = static_cast<float>(-stepSize);
    float *newParam = a.outputs[0].as<float>(),
          *newM = a.outputs[1].as<float>(), *newV = a.outputs[2].as<float>();
    int64_t n = a.inputs[0].numElements();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) {
      float p = param[i], g = grad[i], mi = m[i], vi = v[i];
      if (decoupled)
        p = p * decay;
      else if (wd != 0.0)
        g = g + wdF * p;
      mi = mi * b1 + oneMinusB1 * g;
      vi = vi * b2 + oneMinusB2 * g * g;
      float denom = std::sqrt(vi) / bc2Sqrt + eps;
      newM[i] = mi;
      newV[i] = vi;
      newParam[i] = p + negStepSize * mi / denom;
    }
    return {};
  });
}

} // namespace

void registerOptimizerKernels(KernelTable &table, ResultCounts &results) {
  table["sgd_update"] = {sgdKernel, 3, 3};
  table["momentum_update"] = {momentumKernel, 4, 4};
  results["momentum_update"] = 2;
  table["adam_update"] = {adamKernel, 6, 6};
  results["adam_update"] = 3;
}

} // namespace loom::rt::cpu
