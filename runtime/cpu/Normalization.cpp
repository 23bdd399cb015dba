//===- Normalization.cpp - softmax, log_softmax, layer_norm, batch_norm ---===//
//
// All four run on oneDNN (f32) with the input collapsed to the 2-D, 3-D or
// 4-D shape oneDNN expects; the plain path accumulates statistics in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace loom::rt::cpu {

#if LOOM_HAVE_DNNL
using dnnl::normalization_flags;
using dnnl::prop_kind;
#endif

bool softmaxOneDnn(CpuContext &ctx, const float *in, float *out, int64_t outer,
                   int64_t n, int64_t inner, bool logOf) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || outer * n * inner == 0 ||
      containsNan(in, outer * n * inner))
    return false;
  dnnl::memory::desc md = plainDesc({outer, n, inner});
  try {
    auto prim = ctx.primitives.get(
        CacheKey(logOf ? "logsoftmax" : "softmax").add({outer, n, inner}), [&] {
          if (logOf) {
            dnnl::logsoftmax_forward::desc desc(prop_kind::forward_inference,
                                                md, 1);
            return makeCached<dnnl::logsoftmax_forward>(
                dnnl::logsoftmax_forward::primitive_desc(
                    desc, userScratchpadAttr(), cpuEngine()));
          }
          dnnl::softmax_forward::desc desc(prop_kind::forward_inference, md, 1);
          return makeCached<dnnl::softmax_forward>(
              dnnl::softmax_forward::primitive_desc(desc, userScratchpadAttr(),
                                                    cpuEngine()));
        });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(md, in)},
                    {DNNL_ARG_DST, wrapMemory(md, out)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

namespace {

//===----------------------------------------------------------------------===//
// softmax / log_softmax
//===----------------------------------------------------------------------===//

void softmaxPlain(const float *in, float *out, int64_t outer, int64_t n,
                  int64_t inner, bool logOf) {
  int64_t lanes = outer * inner;
#pragma omp parallel for schedule(static) if (lanes * n > kGrain)
  for (int64_t lane = 0; lane < lanes; ++lane) {
    int64_t base = (lane / inner) * n * inner + lane % inner;
    const float *x = in + base;
    float *y = out + base;
    float maxValue = -INFINITY;
    for (int64_t i = 0; i < n; ++i)
      maxValue = std::max(maxValue, x[i * inner]);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += std::exp(static_cast<double>(x[i * inner]) - maxValue);
    double logSum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) {
      double shifted = static_cast<double>(x[i * inner]) - maxValue;
      y[i * inner] = static_cast<float>(logOf ? shifted - logSum
                                              : std::exp(shifted) / sum);
    }
  }
}

std::string softmaxKernel(CpuContext &ctx, const KernelArgs &args, bool logOf) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    if (std::string error = expectShape(a.op, "result", out, in.shape);
        !error.empty())
      return error;
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis >= in.rank())
      return std::string(a.op) + " axis " + std::to_string(axis) +
             " is out of range for rank " + std::to_string(in.rank());
    int64_t outer = product(in.shape, 0, axis), n = in.shape[axis],
            inner = product(in.shape, axis + 1, in.shape.size());
    if (!softmaxOneDnn(ctx, in.as<float>(), out.as<float>(), outer, n, inner,
                       logOf))
      softmaxPlain(in.as<float>(), out.as<float>(), outer, n, inner, logOf);
    return {};
  });
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

void layerNormPlain(const float *in, const float *scale, const float *bias,
                    float *out, int64_t rows, int64_t cols, double epsilon) {
#pragma omp parallel for schedule(static) if (rows * cols > kGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = in + r * cols;
    float *y = out + r * cols;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x[c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c)
      var += (x[c] - mean) * (x[c] - mean);
    double inv = 1.0 / std::sqrt(var / cols + epsilon);
    for (int64_t c = 0; c < cols; ++c)
      y[c] = static_cast<float>((x[c] - mean) * inv * scale[c] +
                                (bias ? bias[c] : 0.0f));
  }
}

bool layerNormOneDnn(CpuContext &ctx, const float *in, const float *scale,
                     const float *bias, float *out, int64_t rows, int64_t cols,
                     float epsilon) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || rows * cols == 0)
    return false;
  dnnl::memory::desc md = plainDesc({rows, cols}), param = plainDesc({cols});
  auto flags = normalization_flags::use_scale;
  if (bias)
    flags |= normalization_flags::use_shift;
  try {
    auto prim = ctx.primitives.get(
        CacheKey("layer_norm")
            .add({rows, cols})
            .add(bias != nullptr)
            .addFloat(epsilon),
        [&] {
          dnnl::layer_normalization_forward::desc desc(
              prop_kind::forward_inference, md, epsilon, flags);
          return makeCached<dnnl::layer_normalization_forward>(
              dnnl::layer_normalization_forward::primitive_desc(
                  desc, userScratchpadAttr(), cpuEngine()));
        });
    std::unordered_map<int, dnnl::memory> margs{
        {DNNL_ARG_SRC, wrapMemory(md, in)},
        {DNNL_ARG_DST, wrapMemory(md, out)},
        {DNNL_ARG_SCALE, wrapMemory(param, scale)}};
    if (bias)
      margs.emplace(DNNL_ARG_SHIFT, wrapMemory(param, bias));
    execute(*prim, std::move(margs));
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

std::string layerNormKernel(CpuContext &ctx, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &scale = a.inputs[1],
                     &out = a.outputs[0];
    const float *bias = a.inputs.size() > 2 ? a.inputs[2].as<float>() : nullptr;
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis >= in.rank())
      return "layer_norm axis " + std::to_string(axis) +
             " is out of range for rank " + std::to_string(in.rank());
    int64_t rows = product(in.shape, 0, axis),
            cols = product(in.shape, axis, in.shape.size());
    if (std::string error = expectShape(a.op, "result", out, in.shape);
        !error.empty())
      return error;
    if (scale.numElements() != cols ||
        (a.inputs.size() > 2 && a.inputs[2].numElements() != cols))
      return "layer_norm scale has " + std::to_string(scale.numElements()) +
             " elements, expected " + std::to_string(cols);
    float epsilon = static_cast<float>(a.attrs.getFloat("epsilon"));
    if (!layerNormOneDnn(ctx, in.as<float>(), scale.as<float>(), bias,
                         out.as<float>(), rows, cols, epsilon))
      layerNormPlain(in.as<float>(), scale.as<float>(), bias, out.as<float>(),
                     rows, cols, epsilon);
    return {};
  });
}

//===----------------------------------------------------------------------===//
// batch_norm (inference: given mean and variance)
//===----------------------------------------------------------------------===//

struct BatchNormParams {
  const float *scale, *bias, *mean, *variance;
};

void batchNormPlain(const float *in, const BatchNormParams &p, float *out,
                    int64_t batch, int64_t channels, int64_t spatial,
                    double epsilon) {
  int64_t planes = batch * channels;
#pragma omp parallel for schedule(static) if (planes * spatial > kGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    int64_t c = plane % channels;
    double factor = p.scale[c] / std::sqrt(p.variance[c] + epsilon);
    const float *x = in + plane * spatial;
    float *y = out + plane * spatial;
    for (int64_t s = 0; s < spatial; ++s)
      y[s] = static_cast<float>((x[s] - p.mean[c]) * factor + p.bias[c]);
  }
}

bool batchNormOneDnn(CpuContext &ctx, const float *in, const BatchNormParams &p,
                     float *out, int64_t batch, int64_t channels,
                     int64_t spatial, float epsilon) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || batch * channels * spatial == 0)
    return false;
  dnnl::memory::desc md = plainDesc({batch, channels, spatial, 1}),
                     param = plainDesc({channels});
  try {
    auto prim = ctx.primitives.get(
        CacheKey("batch_norm")
            .add({batch, channels, spatial})
            .addFloat(epsilon),
        [&] {
          dnnl::batch_normalization_forward::desc desc(
              prop_kind::forward_inference, md, epsilon,
              normalization_flags::use_global_stats |
                  normalization_flags::use_scale |
                  normalization_flags::use_shift);
          return makeCached<dnnl::batch_normalization_forward>(
              dnnl::batch_normalization_forward::primitive_desc(
                  desc, userScratchpadAttr(), cpuEngine()));
        });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(md, in)},
                    {DNNL_ARG_DST, wrapMemory(md, out)},
                    {DNNL_ARG_SCALE, wrapMemory(param, p.scale)},
                    {DNNL_ARG_SHIFT, wrapMemory(param, p.bias)},
                    {DNNL_ARG_MEAN, wrapMemory(param, p.mean)},
                    {DNNL_ARG_VARIANCE, wrapMemory(param, p.variance)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

std::string batchNormKernel(CpuContext &ctx, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    if (in.rank() < 2)
      return "batch_norm input must have rank at least 2";
    if (std::string error = expectShape(a.op, "result", out, in.shape);
        !error.empty())
      return error;
    int64_t batch = in.shape[0], channels = in.shape[1],
            spatial = product(in.shape, 2, in.shape.size());
    for (size_t i = 1; i < 5; ++i)
      if (a.inputs[i].numElements() != channels)
        return "batch_norm parameters must have " + std::to_string(channels) +
               " elements";
    BatchNormParams p{a.inputs[1].as<float>(), a.inputs[2].as<float>(),
                      a.inputs[3].as<float>(), a.inputs[4].as<float>()};
    float epsilon = static_cast<float>(a.attrs.getFloat("epsilon"));
    if (!batchNormOneDnn(ctx, in.as<float>(), p, out.as<float>(), batch,
                         channels, spatial, epsilon))
      batchNormPlain(in.as<float>(), p, out.as<float>(), batch, channels,
                     spatial, epsilon);
    return {};
  });
}

} // namespace

void registerNormalizationKernels(KernelTable &table) {
  table["softmax"] = {[](CpuContext &ctx, const KernelArgs &args) {
                        return softmaxKernel(ctx, args, /*logOf=*/false);
                      },
                      1, 1};
  table["log_softmax"] = {[](CpuContext &ctx, const KernelArgs &args) {
                            return softmaxKernel(ctx, args, /*logOf=*/true);
                          },
                          1, 1};
  table["layer_norm"] = {layerNormKernel, 2, 3};
  table["batch_norm"] = {batchNormKernel, 5, 5};
}

} // namespace loom::rt::cpu
