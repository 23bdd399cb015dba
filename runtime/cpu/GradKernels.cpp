//===- GradKernels.cpp - Gradients of activations, norms, data movement ---===//
//
// relu_grad, gelu_grad, layer_norm_grad, gather_grad, slice_grad, pad_grad
// and softmax_cross_entropy_grad (dialects/LoomTrainOps.td).
//
// - relu_grad is a select (grad where input > 0, else 0; a NaN input gives
//   0), plain C++ on both paths: oneDNN would add nothing to a select.
// - gelu_grad runs oneDNN's eltwise backward (f32); inputs holding an
//   infinity or NaN, and the plain path, evaluate the derivative in double
//   (limits 1 at +inf, 0 at -inf, NaN at NaN).
// - layer_norm_grad computes each row's statistics in double; the input
//   gradient then runs on oneDNN's layer normalization backward (given those
//   statistics) or in double, and the scale and bias gradients are always
//   column sums in double, in a fixed order (deterministic whatever the
//   thread count, and f32-accurate for any realistic number of rows).
// - gather_grad and slice_grad write into zeros. gather_grad accumulates
//   repeated indices in index order whatever the thread count: threads own
//   disjoint ranges of destination rows, never share one.
// - pad_grad sums the padded positions that copied each element, one
//   padded dimension at a time, in a fixed order (common/ops/PadIndex.h).
// - softmax_cross_entropy_grad: oneDNN's softmax of whole rows, scaled;
//   without oneDNN (or on a NaN, or a vocabulary-parallel block), each
//   row's softmax in double.
//
// f16/bf16 run in f32 (runInF32), accumulating in f32 or double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/TrainKernels.h"

#include "common/ops/KernelScratch.h"
#include "common/ops/PadIndex.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loom::rt::cpu {
namespace {

#if LOOM_HAVE_DNNL
using dnnl::normalization_flags;
using dnnl::prop_kind;
#endif

/// "" if every tensor is f32, f16 or bf16, else an error naming `what`.
std::string expectFloat(std::string_view op, const char *what,
                        const TensorView &t) {
  if (isFloat(t.dtype))
    return {};
  return std::string(op) + ": " + what + " must be a float tensor, got " +
         dtypeName(t.dtype);
}

/// "" if `t` has exactly `dtype`, else an error naming `what`.
std::string expectType(std::string_view op, const char *what,
                       const TensorView &t, DType dtype) {
  if (t.dtype == dtype)
    return {};
  return std::string(op) + ": " + what + " is " + dtypeName(t.dtype) +
         ", expected " + dtypeName(dtype);
}

/// The first non-empty error of a list.
std::string firstError(std::initializer_list<std::string> errors) {
  for (const std::string &e : errors)
    if (!e.empty())
      return e;
  return {};
}

//===----------------------------------------------------------------------===//
// relu_grad / gelu_grad
//===----------------------------------------------------------------------===//

enum class GeluForm { Erf, Tanh };

/// d/dx gelu(x) in double. Erf form: Phi(x) + x phi(x). Tanh form: the
/// derivative of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
double geluDerivative(GeluForm form, double x) {
  if (std::isinf(x))
    return x > 0 ? 1.0 : 0.0;
  constexpr double kPi = 3.14159265358979323846;
  if (form == GeluForm::Erf)
    return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
           x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
  const double k = std::sqrt(2.0 / kPi), c = 0.044715;
  double t = std::tanh(k * (x + c * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x * x);
}

#if LOOM_HAVE_DNNL
bool allFinite(const float *data, int64_t n) {
  bool finite = true;
#pragma omp parallel for schedule(static) reduction(&& : finite) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    finite = finite && std::isfinite(data[i]);
  return finite;
}
#endif

bool geluGradOneDnn(CpuContext &ctx, GeluForm form, const float *x,
                    const float *dy, float *dx, int64_t n) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || n == 0 || !allFinite(x, n))
    return false;
  dnnl::algorithm alg = form == GeluForm::Erf
                            ? dnnl::algorithm::eltwise_gelu_erf
                            : dnnl::algorithm::eltwise_gelu_tanh;
  dnnl::memory::desc md = plainDesc({n});
  try {
    auto prim = ctx.primitives.get(
        CacheKey("eltwise_bwd").add(static_cast<int64_t>(alg)).add(n), [&] {
          dnnl::eltwise_forward::primitive_desc hint(
              dnnl::eltwise_forward::desc(prop_kind::forward_training, alg, md,
                                          0.0f, 0.0f),
              cpuEngine());
          dnnl::eltwise_backward::desc desc(alg, md, md, 0.0f, 0.0f);
          return makeCached<dnnl::eltwise_backward>(
              dnnl::eltwise_backward::primitive_desc(desc, userScratchpadAttr(),
                                                     cpuEngine(), hint));
        });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(md, x)},
                    {DNNL_ARG_DIFF_DST, wrapMemory(md, dy)},
                    {DNNL_ARG_DIFF_SRC, wrapMemory(md, dx)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

std::string activationGradKernel(CpuContext &ctx, const KernelArgs &args,
                                 bool relu) {
  const TensorView &x = args.inputs[0], &dy = args.inputs[1],
                   &dx = args.outputs[0];
  if (std::string e = firstError({expectFloat(args.op, "input", x),
                                  expectType(args.op, "grad", dy, x.dtype),
                                  expectType(args.op, "result", dx, x.dtype),
                                  expectShape(args.op, "grad", dy, x.shape),
                                  expectShape(args.op, "result", dx, x.shape)});
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const float *in = a.inputs[0].as<float>(), *g = a.inputs[1].as<float>();
    float *out = a.outputs[0].as<float>();
    int64_t n = a.inputs[0].numElements();
    if (relu) {
#pragma omp parallel for schedule(static) if (n > kGrain)
      for (int64_t i = 0; i < n; ++i)
        out[i] = in[i] > 0.0f ? g[i] : 0.0f;
      return {};
    }
    GeluForm form =
        a.attrs.getBool("tanh_approximation") ? GeluForm::Tanh : GeluForm::Erf;
    if (geluGradOneDnn(ctx, form, in, g, out, n))
      return {};
#pragma omp parallel for schedule(static) if (n > kGrain / 16)
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<float>(g[i] * geluDerivative(form, in[i]));
    return {};
  });
}

//===----------------------------------------------------------------------===//
// layer_norm_grad
//===----------------------------------------------------------------------===//

/// Per-row statistics in double (the forward kernel's two-pass ones).
struct RowStats {
  double *mean, *variance, *rstd; // rstd = 1 / sqrt(var + eps); rows each
};

/// The statistics in the kernel's scratch (common/ops/KernelScratch.h).
RowStats rowStatistics(ScratchPool &pool, const float *x, int64_t rows,
                       int64_t cols, double epsilon) {
  RowStats s{pool.take<double>(rows), pool.take<double>(rows),
             pool.take<double>(rows)};
#pragma omp parallel for schedule(static) if (rows * cols > kGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols;
    double m = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      m += row[c];
    m /= cols;
    for (int64_t c = 0; c < cols; ++c)
      var += (row[c] - m) * (row[c] - m);
    s.mean[r] = m;
    s.variance[r] = var / cols;
    s.rstd[r] = 1.0 / std::sqrt(var / cols + epsilon);
  }
  return s;
}

/// dx = rstd * (dy*scale - mean(dy*scale) - xhat * mean(dy*scale*xhat)).
void layerNormInputGradPlain(const float *x, const float *scale,
                             const float *dy, float *dx, int64_t rows,
                             int64_t cols, const RowStats &stats) {
  const double *mean = stats.mean, *rstd = stats.rstd;
#pragma omp parallel for schedule(static) if (rows * cols > kGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *gr = dy + r * cols;
    float *out = dx + r * cols;
    double sumG = 0, sumGX = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double g = static_cast<double>(gr[c]) * scale[c];
      sumG += g;
      sumGX += g * (xr[c] - mean[r]) * rstd[r];
    }
    sumG /= cols;
    sumGX /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (xr[c] - mean[r]) * rstd[r];
      double g = static_cast<double>(gr[c]) * scale[c];
      out[c] = static_cast<float>(rstd[r] * (g - sumG - xhat * sumGX));
    }
  }
}

/// oneDNN's layer normalization backward, given the statistics. It has no
/// scaled backward_data, so it runs the full backward and its scale
/// gradient (f32 sums) is dropped for the double one.
bool layerNormInputGradOneDnn(CpuContext &ctx, ScratchPool &pool,
                              const float *x, const float *scale,
                              const float *dy, float *dx, int64_t rows,
                              int64_t cols, float epsilon,
                              const RowStats &stats) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || rows * cols == 0)
    return false;
  float *meanF = pool.take<float>(rows), *varF = pool.take<float>(rows),
        *dropped = pool.take<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    meanF[r] = static_cast<float>(stats.mean[r]);
    varF[r] = static_cast<float>(stats.variance[r]);
  }
  dnnl::memory::desc md = plainDesc({rows, cols}), param = plainDesc({cols}),
                     stat = plainDesc({rows});
  try {
    auto prim = ctx.primitives.get(
        CacheKey("layer_norm_bwd").add({rows, cols}).addFloat(epsilon), [&] {
          dnnl::layer_normalization_forward::primitive_desc hint(
              dnnl::layer_normalization_forward::desc(
                  prop_kind::forward_training, md, stat, epsilon,
                  normalization_flags::use_scale),
              cpuEngine());
          dnnl::layer_normalization_backward::desc desc(
              prop_kind::backward, md, md, stat, epsilon,
              normalization_flags::use_scale);
          return makeCached<dnnl::layer_normalization_backward>(
              dnnl::layer_normalization_backward::primitive_desc(
                  desc, userScratchpadAttr(), cpuEngine(), hint));
        });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(md, x)},
                    {DNNL_ARG_MEAN, wrapMemory(stat, meanF)},
                    {DNNL_ARG_VARIANCE, wrapMemory(stat, varF)},
                    {DNNL_ARG_DIFF_DST, wrapMemory(md, dy)},
                    {DNNL_ARG_SCALE, wrapMemory(param, scale)},
                    {DNNL_ARG_DIFF_SRC, wrapMemory(md, dx)},
                    {DNNL_ARG_DIFF_SCALE, wrapMemory(param, dropped)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

/// scale_grad[c] = sum_r dy * xhat, bias_grad[c] = sum_r dy, in double,
/// summed over rows in order: threads own blocks of columns.
void layerNormParamGrads(const float *x, const float *dy, float *dScale,
                         float *dBias, int64_t rows, int64_t cols,
                         const RowStats &stats) {
  const double *mean = stats.mean, *rstd = stats.rstd;
  constexpr int64_t kBlock = 64;
  int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * cols > kGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t c0 = b * kBlock, c1 = std::min(cols, c0 + kBlock);
    double sumScale[kBlock] = {}, sumBias[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * cols, *gr = dy + r * cols;
      for (int64_t c = c0; c < c1; ++c) {
        sumBias[c - c0] += gr[c];
        sumScale[c - c0] += gr[c] * ((xr[c] - mean[r]) * rstd[r]);
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dScale[c] = static_cast<float>(sumScale[c - c0]);
      dBias[c] = static_cast<float>(sumBias[c - c0]);
    }
  }
}

std::string layerNormGradKernel(CpuContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &scale = args.inputs[1],
                   &dy = args.inputs[2];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= x.rank())
    return "layer_norm_grad axis " + std::to_string(axis) +
           " is out of range for rank " + std::to_string(x.rank());
  Shape param(x.shape.begin() + axis, x.shape.end());
  if (std::string e = firstError(
          {expectFloat(args.op, "input", x),
           expectType(args.op, "scale", scale, x.dtype),
           expectType(args.op, "grad", dy, x.dtype),
           expectType(args.op, "input_grad", args.outputs[0], x.dtype),
           expectType(args.op, "scale_grad", args.outputs[1], x.dtype),
           expectType(args.op, "bias_grad", args.outputs[2], x.dtype),
           expectShape(args.op, "scale", scale, param),
           expectShape(args.op, "grad", dy, x.shape),
           expectShape(args.op, "input_grad", args.outputs[0], x.shape),
           expectShape(args.op, "scale_grad", args.outputs[1], param),
           expectShape(args.op, "bias_grad", args.outputs[2], param)});
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const float *in = a.inputs[0].as<float>(), *s = a.inputs[1].as<float>(),
                *g = a.inputs[2].as<float>();
    int64_t rows = product(x.shape, 0, axis),
            cols = product(x.shape, axis, x.shape.size());
    float epsilon = static_cast<float>(a.attrs.getFloat("epsilon"));
    ScratchPool pool(a);
    RowStats stats = rowStatistics(pool, in, rows, cols, epsilon);
    float *dx = a.outputs[0].as<float>();
    if (!layerNormInputGradOneDnn(ctx, pool, in, s, g, dx, rows, cols,
                                  epsilon, stats))
      layerNormInputGradPlain(in, s, g, dx, rows, cols, stats);
    layerNormParamGrads(in, g, a.outputs[1].as<float>(),
                        a.outputs[2].as<float>(), rows, cols, stats);
    return {};
  });
}

//===----------------------------------------------------------------------===//
// gather_grad
//===----------------------------------------------------------------------===//

template <typename Index>
std::string gatherGrad(ScratchPool &pool, const TensorView &indices,
                       const float *dy, float *out, int64_t outer,
                       int64_t size, int64_t inner, int64_t axis) {
  int64_t count = indices.numElements();
  const Index *idx = indices.as<Index>();
  // The scratch in the order of its rule (common/ops/KernelScratch.h).
  const int64_t buckets = std::min(size, ops::kGatherGradBuckets);
  int64_t *pos = pool.take<int64_t>(count);
  int64_t *start = pool.take<int64_t>(buckets + 1);
  int64_t *order = pool.take<int64_t>(count);
  int64_t *fill = pool.take<int64_t>(buckets);
  for (int64_t j = 0; j < count; ++j) {
    int64_t i = idx[j];
    if (i < -size || i >= size)
      return "gather_grad index " + std::to_string(i) +
             " is out of range for dimension " + std::to_string(axis) +
             " of size " + std::to_string(size);
    pos[j] = i < 0 ? i + size : i;
  }
  int64_t total = outer * size * inner;
#pragma omp parallel for schedule(static) if (total > kGrain)
  for (int64_t i = 0; i < total; ++i)
    out[i] = 0.0f;
  if (count == 0 || inner == 0 || outer == 0)
    return {};
  // Destination rows in `buckets` ranges; each task (outer slice, bucket)
  // adds its rows' contributions in index order, so every element's sum has
  // the same order whatever the thread count.
  std::fill(start, start + buckets + 1, int64_t(0));
  for (int64_t j = 0; j < count; ++j)
    ++start[pos[j] * buckets / size + 1];
  for (int64_t b = 0; b < buckets; ++b)
    start[b + 1] += start[b];
  std::copy(start, start + buckets, fill);
  for (int64_t j = 0; j < count; ++j)
    order[fill[pos[j] * buckets / size]++] = j;
  int64_t tasks = outer * buckets;
#pragma omp parallel for schedule(dynamic, 1) if (count * inner > kGrain)
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t o = t / buckets, b = t % buckets;
    for (int64_t k = start[b]; k < start[b + 1]; ++k) {
      int64_t j = order[k];
      const float *src = dy + (o * count + j) * inner;
      float *dst = out + (o * size + pos[j]) * inner;
      for (int64_t i = 0; i < inner; ++i)
        dst[i] += src[i];
    }
  }
  return {};
}

std::string gatherGradKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &indices = args.inputs[0], &dy = args.inputs[1],
                   &out = args.outputs[0];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= out.rank())
    return "gather_grad axis " + std::to_string(axis) +
           " is out of range for rank " + std::to_string(out.rank());
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return "gather_grad indices must be i32 or i64, got " +
           std::string(dtypeName(indices.dtype));
  Shape expected(out.shape.begin(), out.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), out.shape.begin() + axis + 1,
                  out.shape.end());
  if (std::string e = firstError({expectFloat(args.op, "result", out),
                                  expectType(args.op, "grad", dy, out.dtype),
                                  expectShape(args.op, "grad", dy, expected)});
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    int64_t outer = product(out.shape, 0, axis), size = out.shape[axis],
            inner = product(out.shape, axis + 1, out.shape.size());
    const float *g = a.inputs[1].as<float>();
    float *result = a.outputs[0].as<float>();
    ScratchPool pool(a);
    if (indices.dtype == DType::I32)
      return gatherGrad<int32_t>(pool, indices, g, result, outer, size, inner,
                                 axis);
    return gatherGrad<int64_t>(pool, indices, g, result, outer, size, inner,
                               axis);
  });
}

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

std::string sliceGradKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &dy = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> starts = args.attrs.getInts("starts"),
                       steps = args.attrs.getInts("strides");
  size_t rank = out.shape.size();
  if (std::string e = firstError({expectFloat(args.op, "result", out),
                                  expectType(args.op, "grad", dy, out.dtype)});
      !e.empty())
    return e;
  if (starts.size() != rank || steps.size() != rank || dy.shape.size() != rank)
    return "slice_grad needs one start and stride per dimension and grad of "
           "the result's rank";
  for (size_t d = 0; d < rank; ++d)
    if (steps[d] == 0)
      return "slice_grad strides must not be zero";
  for (size_t d = 0; d < rank && dy.numElements() > 0; ++d) {
    int64_t last;
    if (__builtin_mul_overflow(dy.shape[d] - 1, steps[d], &last) ||
        __builtin_add_overflow(last, starts[d], &last) || starts[d] < 0 ||
        starts[d] >= out.shape[d] || last < 0 || last >= out.shape[d])
      return "slice_grad writes outside dimension " + std::to_string(d) +
             " of size " + std::to_string(out.shape[d]);
  }
  if (out.bytes() != 0)
    std::memset(out.data, 0, out.bytes());
  if (dy.numElements() == 0)
    return {};
  std::vector<int64_t> outStrides = rowMajorStrides(out.shape), strides(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    base += starts[d] * outStrides[d];
    strides[d] = steps[d] * outStrides[d];
  }
  // Distinct grad elements land on distinct result elements (non-zero
  // strides inside the bounds), so the parallel scatter has no conflicts.
  StridedLoop<1> loop(dy.shape, {std::move(strides)}, {base});
  dispatchBySize(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *src = dy.as<T>();
    T *dst = out.as<T>();
    loop.run([&](int64_t i, const std::array<int64_t, 1> &o) {
      dst[o[0]] = src[i];
    });
  });
  return {};
}

//===----------------------------------------------------------------------===//
// pad_grad
//===----------------------------------------------------------------------===//

std::string padGradKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &dy = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> low = args.attrs.getInts("low"),
                       high = args.attrs.getInts("high");
  ops::pad::PadMode mode;
  if (!ops::pad::parsePadMode(args.attrs.getString("mode"), mode))
    return "pad_grad mode '" + args.attrs.getString("mode") +
           "' is not one of " + ops::pad::kPadModeNames;
  if (std::string e = firstError({expectFloat(args.op, "result", out),
                                  expectType(args.op, "grad", dy, out.dtype)});
      !e.empty())
    return e;
  size_t rank = out.shape.size();
  if (low.size() != rank || high.size() != rank || dy.shape.size() != rank)
    return "pad_grad needs one low and high pad per dimension and grad of "
           "the result's rank";
  for (size_t d = 0; d < rank; ++d)
    if (low[d] < 0 || high[d] < 0 ||
        (mode == ops::pad::PadMode::Reflect &&
         (low[d] >= out.shape[d] || high[d] >= out.shape[d])) ||
        (mode != ops::pad::PadMode::Constant && out.shape[d] == 0 &&
         low[d] + high[d] > 0) ||
        dy.shape[d] != low[d] + out.shape[d] + high[d])
      return "pad_grad: grad " + formatShape(dy.shape) +
             " is not the pad of the result " + formatShape(out.shape) +
             " in dimension " + std::to_string(d);
  return runInF32(args, [&](const KernelArgs &a) {
    // Two buffers of the operand's size in the kernel's scratch
    // (common/ops/KernelScratch.h): the gradient unpadded so far, and the
    // next dimension's.
    const int64_t n = a.inputs[0].numElements();
    ScratchPool pool(a);
    float *cur = pool.take<float>(n), *next = pool.take<float>(n);
    std::memcpy(cur, a.inputs[0].data, static_cast<size_t>(n) * sizeof(float));
    Shape shape = a.inputs[0].shape;
    for (size_t d = 0; d < rank; ++d) {
      if (low[d] == 0 && high[d] == 0)
        continue;
      int64_t outer = product(shape, 0, d), padded = shape[d],
              size = out.shape[d], inner = product(shape, d + 1, rank);
      std::fill(next, next + outer * size * inner, 0.0f);
      int64_t lines = outer * size;
#pragma omp parallel for schedule(static) if (lines * inner > kGrain)
      for (int64_t l = 0; l < lines; ++l) {
        int64_t o = l / size, j = l % size, begin[3], end[3];
        ops::pad::padPreimage(mode, j, low[d], high[d], size, begin, end);
        float *dst = next + l * inner;
        for (int k = 0; k < 3; ++k)
          for (int64_t i = begin[k]; i < end[k]; ++i) {
            const float *src = cur + (o * padded + i) * inner;
            for (int64_t t = 0; t < inner; ++t)
              dst[t] += src[t];
          }
      }
      std::swap(cur, next);
      shape[d] = size;
    }
    const int64_t kept = numElements(shape);
    if (kept > 0)
      std::memcpy(a.outputs[0].data, cur,
                  static_cast<size_t>(kept) * sizeof(float));
    return std::string();
  });
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy_grad
//===----------------------------------------------------------------------===//

/// A class block of a vocabulary-parallel loss (see Loss.cpp): the block's
/// first class, the global class count, and each row's log-sum-exp.
struct ClassBlock {
  int64_t offset = 0;
  int64_t classes = 0;
  const float *lse = nullptr;
};

template <typename Label>
std::string crossEntropyGrad(CpuContext &ctx, const float *logits,
                             const Label *labels, float grad, int64_t rows,
                             int64_t classes, int64_t ignoreIndex, bool sum,
                             const ClassBlock *block, float *out) {
  int64_t allClasses = block ? block->classes : classes;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    if (labels[r] < 0 || labels[r] >= allClasses)
      return "softmax_cross_entropy_grad label " + std::to_string(labels[r]) +
             " of row " + std::to_string(r) + " is out of range for " +
             std::to_string(allClasses) + " classes (ignore_index " +
             std::to_string(ignoreIndex) + ")";
    ++counted;
  }
  double factor = counted == 0 ? 0.0
                  : sum        ? static_cast<double>(grad)
                               : static_cast<double>(grad) / counted;
  // Whole rows: oneDNN's softmax into the result (the exps vectorised),
  // scaled, and the label's entry p - 1 (p from the softmax).
  if (!block && softmaxOneDnn(ctx, logits, out, rows, classes, 1, false)) {
    float scale = static_cast<float>(factor);
#pragma omp parallel for schedule(static) if (rows * classes > kGrain)
    for (int64_t r = 0; r < rows; ++r) {
      float *y = out + r * classes;
      if (labels[r] == ignoreIndex || factor == 0.0) {
        std::fill(y, y + classes, 0.0f);
        continue;
      }
      double p = y[labels[r]];
#pragma omp simd
      for (int64_t c = 0; c < classes; ++c)
        y[c] *= scale;
      y[labels[r]] = static_cast<float>((p - 1.0) * factor);
    }
    return {};
  }
#pragma omp parallel for schedule(static) if (rows * classes > kGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = logits + r * classes;
    float *y = out + r * classes;
    if (labels[r] == ignoreIndex || factor == 0.0) {
      for (int64_t c = 0; c < classes; ++c)
        y[c] = 0.0f;
      continue;
    }
    if (block) {
      // softmax = exp(x - lse) over the global row; the one-hot term where
      // this block holds the label.
      double lse = block->lse[r];
      for (int64_t c = 0; c < classes; ++c)
        y[c] = static_cast<float>(std::exp(x[c] - lse) * factor);
      int64_t local = static_cast<int64_t>(labels[r]) - block->offset;
      if (local >= 0 && local < classes)
        y[local] =
            static_cast<float>((std::exp(x[local] - lse) - 1.0) * factor);
      continue;
    }
    double maxValue = -INFINITY;
    for (int64_t c = 0; c < classes; ++c)
      maxValue = std::max<double>(maxValue, x[c]);
    // One exp per element: exp(x - max) <= 1 is kept in the output row.
    double sumExp = 0;
    for (int64_t c = 0; c < classes; ++c) {
      double e = std::exp(x[c] - maxValue);
      sumExp += e;
      y[c] = static_cast<float>(e);
    }
    double scale = factor / sumExp;
    for (int64_t c = 0; c < classes; ++c)
      y[c] = static_cast<float>(y[c] * scale);
    // The label's entry, p - 1, from p in double (no cancellation loss).
    double p = std::exp(x[labels[r]] - maxValue) / sumExp;
    y[labels[r]] = static_cast<float>((p - 1.0) * factor);
  }
  return {};
}

std::string crossEntropyGradKernel(CpuContext &ctx, const KernelArgs &args) {
  const TensorView &logits = args.inputs[0], &labels = args.inputs[1],
                   &grad = args.inputs[2], &out = args.outputs[0];
  if (logits.rank() != 2 || labels.rank() != 1 ||
      labels.shape[0] != logits.shape[0])
    return "softmax_cross_entropy_grad needs logits [N, C] and labels [N], "
           "got " +
           formatShape(logits.shape) + " and " + formatShape(labels.shape);
  if (labels.dtype != DType::I32 && labels.dtype != DType::I64)
    return "softmax_cross_entropy_grad labels must be i32 or i64, got " +
           std::string(dtypeName(labels.dtype));
  if (std::string e =
          firstError({expectFloat(args.op, "logits", logits),
                      expectType(args.op, "grad", grad, logits.dtype),
                      expectType(args.op, "result", out, logits.dtype),
                      expectShape(args.op, "grad", grad, {}),
                      expectShape(args.op, "result", out, logits.shape)});
      !e.empty())
    return e;
  if (args.inputs.size() > 3)
    if (std::string e = firstError(
            {expectType(args.op, "lse", args.inputs[3], logits.dtype),
             expectShape(args.op, "lse", args.inputs[3], {logits.shape[0]})});
        !e.empty())
      return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    int64_t rows = logits.shape[0], classes = logits.shape[1];
    int64_t ignore = a.attrs.getInt("ignore_index", -100);
    bool sum = a.attrs.getBool("sum");
    const float *x = a.inputs[0].as<float>();
    float g = *a.inputs[2].as<float>();
    float *y = a.outputs[0].as<float>();
    ClassBlock block;
    if (a.inputs.size() > 3) {
      block.lse = a.inputs[3].as<float>();
      block.classes = classes;
      if (a.block && a.block->globalShape.size() == 2) {
        block.offset = a.block->offsets[1];
        block.classes = a.block->globalShape[1];
      }
    }
    const ClassBlock *b = block.lse ? &block : nullptr;
    if (labels.dtype == DType::I32)
      return crossEntropyGrad(ctx, x, labels.as<int32_t>(), g, rows, classes,
                              ignore, sum, b, y);
    return crossEntropyGrad(ctx, x, labels.as<int64_t>(), g, rows, classes,
                            ignore, sum, b, y);
  });
}

} // namespace

void registerGradKernels(KernelTable &table, ResultCounts &results) {
  table["relu_grad"] = {[](CpuContext &ctx, const KernelArgs &args) {
                          return activationGradKernel(ctx, args, true);
                        },
                        2, 2};
  table["gelu_grad"] = {[](CpuContext &ctx, const KernelArgs &args) {
                          return activationGradKernel(ctx, args, false);
                        },
                        2, 2};
  table["layer_norm_grad"] = {layerNormGradKernel, 3, 3};
  results["layer_norm_grad"] = 3;
  table["gather_grad"] = {gatherGradKernel, 2, 2};
  table["slice_grad"] = {sliceGradKernel, 1, 1};
  table["pad_grad"] = {padGradKernel, 1, 1};
  table["softmax_cross_entropy_grad"] = {crossEntropyGradKernel, 3, 4};
}

} // namespace loom::rt::cpu
