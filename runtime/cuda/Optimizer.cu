//===- Optimizer.cu - sgd_update, momentum_update, adam_update on CUDA ----===//
//
// One fused kernel per update, in place (the executor gives each result the
// storage of the tensor it replaces; every element is read before it is
// written). The arithmetic is the CPU backend's (OptimizerKernels.cpp,
// PyTorch's single-tensor updates), in f32 for f16/bf16 tensors too; lr and
// step are read on the device, and Adam's scalar factors are computed in
// double from them as the CPU computes them.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

namespace loom::rt::cuda {
namespace {

template <typename T>
__global__ void sgdKernel(const T *param, const T *grad, const T *lrPtr,
                          float wd, T *out, int64_t n) {
  float lr = toFloat(*lrPtr);
  LOOM_GRID_LOOP(i, n) {
    float p = toFloat(param[i]), d = toFloat(grad[i]);
    if (wd != 0.0f)
      d = d + wd * p;
    out[i] = fromFloat<T>(p - lr * d);
  }
}

template <typename T>
__global__ void momentumKernel(const T *param, const T *grad, const T *velocity,
                               const T *lrPtr, float momentum, float wd,
                               bool nesterov, T *newParam, T *newVelocity,
                               int64_t n) {
  float lr = toFloat(*lrPtr);
  LOOM_GRID_LOOP(i, n) {
    float p = toFloat(param[i]), d = toFloat(grad[i]),
          buf = toFloat(velocity[i]);
    if (wd != 0.0f)
      d = d + wd * p;
    buf = buf * momentum + d;
    d = nesterov ? d + momentum * buf : buf;
    newVelocity[i] = fromFloat<T>(buf);
    newParam[i] = fromFloat<T>(p - lr * d);
  }
}

struct AdamAttrs {
  double beta1, beta2, epsilon, wd;
  bool decoupled;
};

template <typename T>
__global__ void adamKernel(const T *param, const T *grad, const T *m,
                           const T *v, const T *lrPtr, const T *stepPtr,
                           AdamAttrs a, T *newParam, T *newM, T *newV,
                           int64_t n) {
  double lr = toFloat(*lrPtr), step = toFloat(*stepPtr);
  double bc1 = 1.0 - pow(a.beta1, step), bc2 = 1.0 - pow(a.beta2, step);
  float decay = static_cast<float>(1.0 - lr * a.wd);
  float wdF = static_cast<float>(a.wd), b1 = static_cast<float>(a.beta1),
        b2 = static_cast<float>(a.beta2),
        oneMinusB1 = static_cast<float>(1.0 - a.beta1),
        oneMinusB2 = static_cast<float>(1.0 - a.beta2),
        bc2Sqrt = static_cast<float>(sqrt(bc2)),
        eps = static_cast<float>(a.epsilon),
        negStepSize = static_cast<float>(-(lr / bc1));
  LOOM_GRID_LOOP(i, n) {
    float p = toFloat(param[i]), g = toFloat(grad[i]), mi = toFloat(m[i]),
          vi = toFloat(v[i]);
    if (a.decoupled)
      p = p * decay;
    else if (a.wd != 0.0)
      g = g + wdF * p;
    mi = mi * b1 + oneMinusB1 * g;
    vi = vi * b2 + oneMinusB2 * g * g;
    float denom = sqrtf(vi) / bc2Sqrt + eps;
    newM[i] = fromFloat<T>(mi);
    newV[i] = fromFloat<T>(vi);
    newParam[i] = fromFloat<T>(p + negStepSize * mi / denom);
  }
}

/// Every tensor of `same` has the first's float type and shape; `scalars`
/// are one-element tensors of that type.
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
             formatShape(first.shape);
  for (const TensorView *t : scalars)
    if (t->dtype != first.dtype || t->numElements() != 1)
      return op + ": lr and step must be " + dtypeName(first.dtype) +
             " scalars";
  return "";
}

std::string runSgd(CudaContext &ctx, const KernelArgs &args) {
  const auto &in = args.inputs;
  const auto &out = args.outputs;
  if (std::string e = checkUpdate(args, {&in[0], &in[1], &out[0]}, {&in[2]});
      !e.empty())
    return e;
  int64_t n = in[0].numElements();
  if (n == 0)
    return "";
  float wd = static_cast<float>(args.attrs.getFloat("weight_decay"));
  dispatchFloat(in[0].dtype, [&](auto t) {
    using T = decltype(t);
    sgdKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in[0].as<T>(), in[1].as<T>(), in[2].as<T>(), wd, out[0].as<T>(), n);
  });
  return launchStatus(args.op);
}

std::string runMomentum(CudaContext &ctx, const KernelArgs &args) {
  const auto &in = args.inputs;
  const auto &out = args.outputs;
  if (std::string e = checkUpdate(
          args, {&in[0], &in[1], &in[2], &out[0], &out[1]}, {&in[3]});
      !e.empty())
    return e;
  int64_t n = in[0].numElements();
  if (n == 0)
    return "";
  float momentum = static_cast<float>(args.attrs.getFloat("momentum"));
  float wd = static_cast<float>(args.attrs.getFloat("weight_decay"));
  bool nesterov = args.attrs.getBool("nesterov");
  dispatchFloat(in[0].dtype, [&](auto t) {
    using T = decltype(t);
    momentumKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in[0].as<T>(), in[1].as<T>(), in[2].as<T>(), in[3].as<T>(), momentum,
        wd, nesterov, out[0].as<T>(), out[1].as<T>(), n);
  });
  return launchStatus(args.op);
}

std::string runAdam(CudaContext &ctx, const KernelArgs &args) {
  const auto &in = args.inputs;
  const auto &out = args.outputs;
  if (std::string e = checkUpdate(
          args, {&in[0], &in[1], &in[2], &in[3], &out[0], &out[1], &out[2]},
          {&in[4], &in[5]});
      !e.empty())
    return e;
  int64_t n = in[0].numElements();
  if (n == 0)
    return "";
  AdamAttrs a{args.attrs.getFloat("beta1"), args.attrs.getFloat("beta2"),
              args.attrs.getFloat("epsilon"),
              args.attrs.getFloat("weight_decay"),
              args.attrs.getBool("decoupled_weight_decay")};
  dispatchFloat(in[0].dtype, [&](auto t) {
    using T = decltype(t);
    adamKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in[0].as<T>(), in[1].as<T>(), in[2].as<T>(), in[3].as<T>(),
        in[4].as<T>(), in[5].as<T>(), a, out[0].as<T>(), out[1].as<T>(),
        out[2].as<T>(), n);
  });
  return launchStatus(args.op);
}

} // namespace

void registerOptimizerKernels(KernelTable &table) {
  table["sgd_update"] = {runSgd, 3, 3};
  table["momentum_update"] = {runMomentum, 4, 4, 2};
  table["adam_update"] = {runAdam, 6, 6, 3};
}

} // namespace loom::rt::cuda
