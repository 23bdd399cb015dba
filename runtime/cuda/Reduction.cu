//===- Reduction.cu - reduce_sum, reduce_mean, reduce_max on CUDA ---------===//
//
// A reduction is viewed as kept dimensions (the output, row-major) and
// reduced ones. When the input's last dimension is kept, neighbouring
// outputs are neighbours in memory and one thread per output loops over the
// reduced elements (coalesced); otherwise one block per output sums with a
// block reduction. Floats accumulate in f32; reduce_max propagates NaN as
// numpy does. reduce_max_grad shares each gradient evenly among the
// elements equal to the maximum.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

#include "common/ops/ElementwiseMath.h"

namespace loom::rt::cuda {
namespace {

enum class Reduce { Sum, Mean, Max };

struct Geometry {
  Indexer<1> kept, reduced;
  int64_t outputs = 1, count = 1;
  bool lastKept = true;
};

std::string geometry(const KernelArgs &args, const TensorView &in,
                     Geometry &g) {
  std::vector<int64_t> axes = args.attrs.getInts("axes");
  std::vector<bool> isReduced(in.rank(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= in.rank())
      return "cuda kernel '" + std::string(args.op) + "': axis " +
             std::to_string(a) + " out of range";
    isReduced[a] = true;
  }
  std::vector<int64_t> dense = denseStrides(in.shape);
  Shape keptShape, reducedShape;
  std::vector<int64_t> keptStrides, reducedStrides;
  for (int64_t d = 0; d < in.rank(); ++d) {
    (isReduced[d] ? reducedShape : keptShape).push_back(in.shape[d]);
    (isReduced[d] ? reducedStrides : keptStrides).push_back(dense[d]);
  }
  g.outputs = numElements(keptShape);
  g.count = numElements(reducedShape);
  g.lastKept = in.rank() == 0 || !isReduced[in.rank() - 1];
  if (!makeIndexer<1>(keptShape, {keptStrides}, g.kept) ||
      !makeIndexer<1>(reducedShape, {reducedStrides}, g.reduced))
    return "cuda kernel '" + std::string(args.op) + "': more than " +
           std::to_string(kMaxRank) + " dimensions";
  return "";
}

template <Reduce K> __device__ float combine(float a, float b) {
  if constexpr (K == Reduce::Max)
    return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
  else
    return a + b;
}

template <Reduce K, typename T>
__global__ void columnReduceKernel(const T *in, T *out, Geometry g) {
  LOOM_GRID_LOOP(o, g.outputs) {
    int64_t base;
    g.kept.offsets(o, &base);
    float acc = K == Reduce::Max ? -INFINITY : 0.0f;
    for (int64_t r = 0; r < g.count; ++r) {
      int64_t off;
      g.reduced.offsets(r, &off);
      acc = combine<K>(acc, toFloat(in[base + off]));
    }
    if (K == Reduce::Mean)
      acc = g.count ? acc / static_cast<float>(g.count) : NAN;
    out[o] = fromFloat<T>(acc);
  }
}

template <Reduce K, typename T>
__global__ void blockReduceKernel(const T *in, T *out, Geometry g) {
  __shared__ float shared[32];
  for (int64_t o = blockIdx.x; o < g.outputs; o += gridDim.x) {
    int64_t base;
    g.kept.offsets(o, &base);
    float acc = K == Reduce::Max ? -INFINITY : 0.0f;
    for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) {
      int64_t off;
      g.reduced.offsets(r, &off);
      acc = combine<K>(acc, toFloat(in[base + off]));
    }
    acc = K == Reduce::Max ? blockMax(acc, shared) : blockSum(acc, shared);
    if (threadIdx.x == 0) {
      if (K == Reduce::Mean)
        acc = g.count ? acc / static_cast<float>(g.count) : NAN;
      out[o] = fromFloat<T>(acc);
    }
    __syncthreads();
  }
}

template <Reduce K>
std::string runReduce(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != out.dtype)
    return "cuda kernel '" + std::string(args.op) + "': types differ";
  Geometry g;
  if (std::string e = geometry(args, in, g); !e.empty())
    return e;
  if (g.outputs != out.numElements())
    return "cuda kernel '" + std::string(args.op) +
           "': the result has the wrong size";
  if (g.outputs == 0)
    return "";
  bool column = g.lastKept && g.outputs >= 1024;
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        if (column)
          columnReduceKernel<K, T>
              <<<blocksFor(g.outputs), kThreads, 0, ctx.stream>>>(
                  in.as<T>(), out.as<T>(), g);
        else
          blockReduceKernel<K, T>
              <<<static_cast<unsigned>(std::min<int64_t>(g.outputs, 1 << 20)),
                 kThreads, 0, ctx.stream>>>(in.as<T>(), out.as<T>(), g);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

template <typename T>
__global__ void reduceMaxGradKernel(const T *in, const T *result, const T *grad,
                                    T *out, Geometry g) {
  __shared__ float shared[32];
  for (int64_t o = blockIdx.x; o < g.outputs; o += gridDim.x) {
    int64_t base;
    g.kept.offsets(o, &base);
    float m = toFloat(result[o]);
    float ties = 0;
    for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) {
      int64_t off;
      g.reduced.offsets(r, &off);
      ties += toFloat(in[base + off]) == m ? 1.0f : 0.0f;
    }
    ties = blockSum(ties, shared);
    float share = ties > 0 ? toFloat(grad[o]) / ties : 0.0f;
    for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) {
      int64_t off;
      g.reduced.offsets(r, &off);
      out[base + off] =
          fromFloat<T>(toFloat(in[base + off]) == m ? share : 0.0f);
    }
    __syncthreads();
  }
}

std::string runReduceMaxGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &result = args.inputs[1],
                   &grad = args.inputs[2], &out = args.outputs[0];
  if (in.dtype != out.dtype || result.dtype != in.dtype ||
      grad.dtype != in.dtype || in.shape != out.shape)
    return "cuda kernel 'reduce_max_grad': types or shapes differ";
  Geometry g;
  if (std::string e = geometry(args, in, g); !e.empty())
    return e;
  if (g.outputs != result.numElements() || g.outputs != grad.numElements())
    return "cuda kernel 'reduce_max_grad': the result has the wrong size";
  if (g.outputs == 0)
    return "";
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        reduceMaxGradKernel<T>
            <<<static_cast<unsigned>(std::min<int64_t>(g.outputs, 1 << 20)),
               kThreads, 0, ctx.stream>>>(in.as<T>(), result.as<T>(),
                                          grad.as<T>(), out.as<T>(), g);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

/// arg_max / arg_min: one thread per row, scanning the axis; NaN is the
/// extreme (numpy), ties give the first index or, with `last`, the last.
template <typename T>
__global__ void argReduceKernel(const T *in, int64_t *out, int64_t outer,
                                int64_t n, int64_t inner, bool isMax,
                                bool last) {
  LOOM_GRID_LOOP(o, outer * inner) {
    const T *row = in + (o / inner) * n * inner + o % inner;
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k) {
      bool better;
      if constexpr (std::is_integral_v<T>)
        better = ops::math::argBetter(row[k * inner], row[best * inner], isMax,
                                      last);
      else
        better = ops::math::argBetter(toFloat(row[k * inner]),
                                      toFloat(row[best * inner]), isMax, last);
      if (better)
        best = k;
    }
    out[o] = best;
  }
}

std::string runArgReduce(CudaContext &ctx, const KernelArgs &args, bool isMax) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= in.rank() || out.dtype != DType::I64)
    return "cuda kernel '" + std::string(args.op) +
           "': axis out of range or a result not i64";
  int64_t outer = 1, inner = 1, n = in.shape[axis];
  for (int64_t d = 0; d < in.rank(); ++d)
    if (d < axis)
      outer *= in.shape[d];
    else if (d > axis)
      inner *= in.shape[d];
  if (out.numElements() != outer * inner || (n == 0 && outer * inner > 0))
    return "cuda kernel '" + std::string(args.op) +
           "': the result has the wrong size";
  int64_t rows = outer * inner;
  if (rows == 0)
    return "";
  bool last = args.attrs.getBool("select_last_index");
  auto launch = [&](auto t) {
    using T = decltype(t);
    argReduceKernel<T><<<blocksFor(rows), kThreads, 0, ctx.stream>>>(
        in.as<T>(), out.as<int64_t>(), outer, n, inner, isMax, last);
  };
  if (dispatchFloat(in.dtype, launch)) {
  } else if (in.dtype == DType::I32) {
    launch(int32_t{});
  } else if (in.dtype == DType::I64) {
    launch(int64_t{});
  } else {
    return unsupportedType(args.op, in.dtype);
  }
  return launchStatus(args.op);
}

} // namespace

void registerReductionKernels(KernelTable &table) {
  table["reduce_sum"] = {runReduce<Reduce::Sum>, 1, 1};
  table["reduce_mean"] = {runReduce<Reduce::Mean>, 1, 1};
  table["reduce_max"] = {runReduce<Reduce::Max>, 1, 1};
  table["reduce_max_grad"] = {runReduceMaxGrad, 3, 3};
  table["arg_max"] = {[](CudaContext &ctx, const KernelArgs &args) {
                        return runArgReduce(ctx, args, /*isMax=*/true);
                      },
                      1, 1};
  table["arg_min"] = {[](CudaContext &ctx, const KernelArgs &args) {
                        return runArgReduce(ctx, args, /*isMax=*/false);
                      },
                      1, 1};
}

} // namespace loom::rt::cuda
