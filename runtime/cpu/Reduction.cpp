//===- Reduction.cpp - reduce_sum, reduce_mean and reduce_max -------------===//
//
// f32 reductions run on oneDNN's reduction primitive; the plain path
// accumulates floats in double and integers exactly in 128 bits (sums wrap
// to the element type, integer means truncate toward zero).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include "common/ops/ElementwiseMath.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace loom::rt::cpu {
namespace {

enum class ReduceKind { Sum, Mean, Max };

/// The input split into kept dimensions (one output element each) and the
/// reduced elements relative to a kept position: `outerOffsets` times an
/// inner run of `innerCount` elements `innerStride` apart (the innermost
/// group of adjacent reduced dimensions, merged).
struct ReducePlan {
  Shape keptShape;
  std::vector<int64_t> keptStrides;
  std::vector<int64_t> outerOffsets{0};
  int64_t innerCount = 1;
  int64_t innerStride = 1;

  int64_t count() const {
    return static_cast<int64_t>(outerOffsets.size()) * innerCount;
  }
};

ReducePlan planReduction(const Shape &shape, const std::vector<bool> &reduced) {
  ReducePlan plan;
  std::vector<int64_t> strides = rowMajorStrides(shape);
  bool inRun = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      plan.keptShape.push_back(shape[d]);
      plan.keptStrides.push_back(strides[d]);
      inRun = false;
      continue;
    }
    if (inRun) { // extends the current run of adjacent reduced dimensions
      plan.innerCount *= shape[d];
      plan.innerStride = strides[d];
      continue;
    }
    // A new run: the previous one moves into the outer offsets.
    std::vector<int64_t> next;
    next.reserve(plan.outerOffsets.size() * plan.innerCount);
    for (int64_t base : plan.outerOffsets)
      for (int64_t i = 0; i < plan.innerCount; ++i)
        next.push_back(base + i * plan.innerStride);
    plan.outerOffsets = std::move(next);
    plan.innerCount = shape[d];
    plan.innerStride = strides[d];
    inRun = true;
  }
  return plan;
}

template <typename T>
void reducePlain(ReduceKind kind, const ReducePlan &plan, const T *in, T *out) {
  const std::vector<int64_t> &offsets = plan.outerOffsets;
  int64_t inner = plan.innerCount, step = plan.innerStride;
  int64_t count = plan.count();
  StridedLoop<1> loop(plan.keptShape, {plan.keptStrides});
  loop.run([&](int64_t o, const std::array<int64_t, 1> &base) {
    const T *src = in + base[0];
    if (kind == ReduceKind::Max) {
      T best = src[0];
      for (int64_t outer : offsets)
        for (int64_t i = 0; i < inner; ++i) {
          T v = src[outer + i * step];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v) || (v > best && !std::isnan(best)))
              best = v; // NaN propagates
          } else if (v > best) {
            best = v;
          }
        }
      out[o] = best;
    } else if constexpr (std::is_floating_point_v<T>) {
      double sum = 0;
      for (int64_t outer : offsets)
        for (int64_t i = 0; i < inner; ++i)
          sum += src[outer + i * step];
      out[o] = static_cast<T>(kind == ReduceKind::Mean ? sum / count : sum);
    } else {
      __int128 sum = 0;
      for (int64_t outer : offsets)
        for (int64_t i = 0; i < inner; ++i)
          sum += src[outer + i * step];
      if (kind == ReduceKind::Mean)
        out[o] = static_cast<T>(sum / count); // truncates toward zero
      else                                    // wraps to the element type
        out[o] = static_cast<T>(static_cast<std::make_unsigned_t<T>>(sum));
    }
  });
}

/// Sum or mean of f32 over one contiguous block of axes, seen as
/// [outer, reduced, inner]: the shapes a training graph reduces most (bias
/// gradients over leading axes, softmax gradients over the last). oneDNN
/// 2.6 runs some of these in its slow reference kernel; this path is
/// direct. Accumulates in double, in a fixed order (deterministic for any
/// thread count). False if the axes are not one contiguous block.
bool reduceContiguousF32(ReduceKind kind, const TensorView &in,
                         const std::vector<int64_t> &axes,
                         const TensorView &out) {
  if (kind == ReduceKind::Max || in.dtype != DType::F32 || axes.empty() ||
      axes.back() - axes.front() + 1 != static_cast<int64_t>(axes.size()))
    return false;
  int64_t outer = 1, reduced = 1, inner = 1;
  for (int64_t d = 0; d < in.rank(); ++d)
    (d < axes.front()  ? outer
     : d > axes.back() ? inner
                       : reduced) *= in.shape[d];
  const float *src = in.as<float>();
  float *dst = out.as<float>();
  double scale = kind == ReduceKind::Mean ? 1.0 / reduced : 1.0;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * reduced > 32768)
    for (int64_t o = 0; o < outer; ++o) {
      const float *row = src + o * reduced;
      double sum = 0;
      for (int64_t r = 0; r < reduced; ++r)
        sum += row[r];
      dst[o] = static_cast<float>(sum * scale);
    }
    return true;
  }
  // Columns of an [outer][reduced][inner] block: parallel over outer and
  // chunks of inner, each accumulating a strip of columns row by row.
  constexpr int64_t kChunk = 256;
  int64_t chunks = (inner + kChunk - 1) / kChunk;
#pragma omp parallel for collapse(2)                                           \
    schedule(static) if (outer * reduced * inner > 32768)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t begin = c * kChunk, end = std::min(inner, begin + kChunk);
      double acc[kChunk] = {};
      for (int64_t r = 0; r < reduced; ++r) {
        const float *row = src + (o * reduced + r) * inner;
        for (int64_t i = begin; i < end; ++i)
          acc[i - begin] += row[i];
      }
      for (int64_t i = begin; i < end; ++i)
        dst[o * inner + i] = static_cast<float>(acc[i - begin] * scale);
    }
  return true;
}

bool reduceOneDnn(CpuContext &ctx, ReduceKind kind, const TensorView &in,
                  const Shape &keptDims, const TensorView &out) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || in.rank() == 0 || in.rank() > DNNL_MAX_NDIMS ||
      in.numElements() == 0 ||
      (kind == ReduceKind::Max &&
       containsNan(in.as<float>(), in.numElements())))
    return false;
  dnnl::algorithm alg = kind == ReduceKind::Sum ? dnnl::algorithm::reduction_sum
                        : kind == ReduceKind::Mean
                            ? dnnl::algorithm::reduction_mean
                            : dnnl::algorithm::reduction_max;
  try {
    auto prim = ctx.primitives.get(
        CacheKey("reduction")
            .add(static_cast<int64_t>(alg))
            .add(in.shape)
            .add(keptDims),
        [&] {
          dnnl::reduction::desc desc(alg, plainDesc(in.shape),
                                     plainDesc(keptDims), 0.0f, 0.0f);
          return makeCached<dnnl::reduction>(dnnl::reduction::primitive_desc(
              desc, userScratchpadAttr(), cpuEngine()));
        });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(plainDesc(in.shape), in.data)},
                    {DNNL_ARG_DST, wrapMemory(plainDesc(keptDims), out.data)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

std::string reduceKernel(CpuContext &ctx, const KernelArgs &args,
                         ReduceKind kind) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    if (in.dtype != out.dtype)
      return "input and result of '" + std::string(a.op) +
             "' differ in element type";
    std::vector<int64_t> axes = a.attrs.getInts("axes");
    std::vector<bool> reduced(in.shape.size(), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= in.rank() || (i && axes[i] <= axes[i - 1]))
        return "reduction axes must be strictly increasing and in [0, " +
               std::to_string(in.rank()) + ")";
      reduced[axes[i]] = true;
    }
    Shape keptDims = in.shape;
    for (int64_t ax : axes)
      keptDims[ax] = 1;
    if (out.numElements() != numElements(keptDims))
      return std::string(a.op) + ": result " + formatShape(out.shape) +
             " does not match the reduced input " + formatShape(keptDims);
    if (axes.empty()) {
      if (in.data != out.data && in.bytes() != 0)
        std::memmove(out.data, in.data, in.bytes());
      return {};
    }
    if (out.numElements() == 0)
      return {};
    if (reduceContiguousF32(kind, in, axes, out))
      return {};
    if (in.dtype == DType::F32 && reduceOneDnn(ctx, kind, in, keptDims, out))
      return {};
    ReducePlan plan = planReduction(in.shape, reduced);
    if (plan.count() == 0) {
      if (kind == ReduceKind::Max)
        return "reduce_max over an empty set of elements";
      if (kind == ReduceKind::Mean && !isFloat(in.dtype))
        return "integer reduce_mean over an empty set of elements";
      // Sum of nothing is 0; the float mean of nothing is NaN (as numpy).
      return dispatchNumeric(out.dtype, a.op, [&](auto tag) -> std::string {
        using T = decltype(tag);
        T value = 0;
        if constexpr (std::is_floating_point_v<T>)
          if (kind == ReduceKind::Mean)
            value = std::numeric_limits<T>::quiet_NaN();
        std::fill(out.as<T>(), out.as<T>() + out.numElements(), value);
        return {};
      });
    }
    return dispatchNumeric(out.dtype, a.op, [&](auto tag) -> std::string {
      using T = decltype(tag);
      reducePlain<T>(kind, plan, in.as<T>(), out.as<T>());
      return {};
    });
  });
}

/// arg_max / arg_min along `axis`: per row, the index of the first (or last)
/// extreme; NaN is the extreme, as in numpy.
template <typename T>
void argReducePlain(const T *in, int64_t *out, int64_t outer, int64_t n,
                    int64_t inner, bool isMax, bool last) {
#pragma omp parallel for schedule(static) if (outer * inner > 4096)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T *row = in + o * n * inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k)
        if (ops::math::argBetter(row[k * inner], row[best * inner], isMax,
                                 last))
          best = k;
      out[o * inner + i] = best;
    }
}

std::string argReduceKernel(const KernelArgs &args, bool isMax) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis >= in.rank() || out.dtype != DType::I64)
      return std::string(a.op) + ": axis " + std::to_string(axis) +
             " out of range or a result not i64";
    int64_t outer = 1, inner = 1, n = in.shape[axis];
    for (int64_t d = 0; d < in.rank(); ++d)
      if (d < axis)
        outer *= in.shape[d];
      else if (d > axis)
        inner *= in.shape[d];
    if (out.numElements() != outer * inner || (n == 0 && outer * inner > 0))
      return std::string(a.op) + ": result " + formatShape(out.shape) +
             " does not match the input " + formatShape(in.shape);
    bool last = a.attrs.getBool("select_last_index");
    return dispatchNumeric(in.dtype, a.op, [&](auto tag) -> std::string {
      using T = decltype(tag);
      argReducePlain<T>(in.as<T>(), out.as<int64_t>(), outer, n, inner, isMax,
                        last);
      return {};
    });
  });
}

} // namespace

void registerReductionKernels(KernelTable &table) {
  auto reduce = [](ReduceKind kind) {
    return KernelEntry{[kind](CpuContext &ctx, const KernelArgs &args) {
                         return reduceKernel(ctx, args, kind);
                       },
                       1, 1};
  };
  table["reduce_sum"] = reduce(ReduceKind::Sum);
  table["reduce_mean"] = reduce(ReduceKind::Mean);
  table["reduce_max"] = reduce(ReduceKind::Max);
  table["arg_max"] = {[](CpuContext &, const KernelArgs &args) {
                        return argReduceKernel(args, /*isMax=*/true);
                      },
                      1, 1};
  table["arg_min"] = {[](CpuContext &, const KernelArgs &args) {
                        return argReduceKernel(args, /*isMax=*/false);
                      },
                      1, 1};
}

} // namespace loom::rt::cpu
