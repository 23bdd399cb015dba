//===- Reduction.cu - reduce_sum, reduce_mean, reduce_max on CUDA ---------===//
//
// A reduction whose reduced dimensions form one run (after merging
// neighbours of one kind) is viewed as [outer, count, inner]:
// - inner of 32 or more (bias gradients, middle axes), with fewer than 64
//   rows: one thread per output;
// - inner of 32 or more and more rows: 32-column tiles, the rows of a tile
//   split over the block's 16 thread rows and, when the tiles alone would
//   not fill the device, over up to 64 blocks whose f32 partials a second
//   pass adds in split order;
// - inner 1 (row sums): one warp per row.
// Anything else is viewed as kept dimensions (the output, row-major) and
// reduced ones: one thread per output when the last dimension is kept and
// there are many outputs, else one block per output. Every order of
// summation depends on the shape alone, so results are the same run to run.
// Floats accumulate in f32; reduce_max propagates NaN as numpy does.
// reduce_max_grad shares each gradient evenly among the elements equal to
// the maximum.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

#include "common/ops/ElementwiseMath.h"

#include <algorithm>
#include <memory>

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

/// The reduction as [outer, count, inner] (see the file comment); `ok` is
/// false when the reduced dimensions are not one run.
struct Runs {
  int64_t outer = 1, count = 1, inner = 1;
  bool ok = false;
};

Runs runsOf(const Shape &shape, const std::vector<bool> &isReduced) {
  std::vector<std::pair<int64_t, bool>> runs;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!runs.empty() && runs.back().second == isReduced[d])
      runs.back().first *= shape[d];
    else
      runs.push_back({shape[d], isReduced[d]});
  }
  Runs r;
  size_t i = 0;
  if (i < runs.size() && !runs[i].second)
    r.outer = runs[i++].first;
  if (i < runs.size() && runs[i].second)
    r.count = runs[i++].first;
  if (i < runs.size() && !runs[i].second)
    r.inner = runs[i++].first;
  r.ok = i == runs.size();
  return r;
}

template <Reduce K> __device__ float initial() {
  return K == Reduce::Max ? -INFINITY : 0.0f;
}

template <Reduce K> __device__ float finish(float acc, int64_t count) {
  if (K == Reduce::Mean)
    return count ? acc / static_cast<float>(count) : NAN;
  return acc;
}

constexpr int kTileCols = 32, kTileRows = 16;

/// Pass 1 over [outer, count, inner]: block (x, s, z) sums the 32 columns of
/// tile x over rows [s * chunk, (s + 1) * chunk) of each outer index z, z +
/// gridDim.z, ...; with one split it writes the result, else its f32
/// partial at [outer][split][inner].
template <Reduce K, typename T>
__global__ void tiledReduceKernel(const T *in, T *out, float *partial,
                                  int64_t outer, int64_t count, int64_t inner,
                                  int64_t chunk) {
  __shared__ float sums[kTileRows][kTileCols + 1];
  int64_t col = blockIdx.x * int64_t(kTileCols) + threadIdx.x;
  int64_t split = blockIdx.y, splits = gridDim.y;
  int64_t first = split * chunk, last = min(count, first + chunk);
  for (int64_t o = blockIdx.z; o < outer; o += gridDim.z) {
    float acc = initial<K>();
    if (col < inner) {
      const T *p = in + o * count * inner + col;
      for (int64_t r = first + threadIdx.y; r < last; r += kTileRows)
        acc = combine<K>(acc, toFloat(p[r * inner]));
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
      for (int y = 1; y < kTileRows; ++y)
        acc = combine<K>(acc, sums[y][threadIdx.x]);
      if (splits == 1)
        out[o * inner + col] = fromFloat<T>(finish<K>(acc, count));
      else
        partial[(o * splits + split) * inner + col] = acc;
    }
    __syncthreads();
  }
}

/// Pass 2: each output combines its splits' partials in split order.
template <Reduce K, typename T>
__global__ void combineSplitsKernel(const float *partial, T *out, int64_t outer,
                                    int64_t splits, int64_t count,
                                    int64_t inner) {
  LOOM_GRID_LOOP(i, outer * inner) {
    int64_t o = i / inner, col = i % inner;
    const float *p = partial + o * splits * inner + col;
    float acc = p[0];
    for (int64_t s = 1; s < splits; ++s)
      acc = combine<K>(acc, p[s * inner]);
    out[i] = fromFloat<T>(finish<K>(acc, count));
  }
}

/// [outer, count, inner] with few rows: one thread per output, its rows
/// `inner` apart (neighbouring threads read neighbouring elements).
template <Reduce K, typename T>
__global__ void shortColumnsKernel(const T *in, T *out, int64_t outer,
                                   int64_t count, int64_t inner) {
  LOOM_GRID_LOOP(i, outer * inner) {
    int64_t o = i / inner, col = i - o * inner;
    const T *p = in + o * count * inner + col;
    float acc = initial<K>();
    for (int64_t r = 0; r < count; ++r)
      acc = combine<K>(acc, toFloat(p[r * inner]));
    out[i] = fromFloat<T>(finish<K>(acc, count));
  }
}

/// Rows of `count` contiguous elements: one warp per row.
template <Reduce K, typename T>
__global__ void warpRowReduceKernel(const T *in, T *out, int64_t rows,
                                    int64_t count) {
  int lane = threadIdx.x & 31;
  int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  int64_t warps = (gridDim.x * int64_t(blockDim.x)) >> 5;
  for (int64_t r = warp; r < rows; r += warps) {
    const T *p = in + r * count;
    float acc = initial<K>();
    for (int64_t c = lane; c < count; c += 32)
      acc = combine<K>(acc, toFloat(p[c]));
    for (int o = 16; o > 0; o >>= 1)
      acc = combine<K>(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if (lane == 0)
      out[r] = fromFloat<T>(finish<K>(acc, count));
  }
}

/// Launches the [outer, count, inner] kernels; false when the shape is for
/// the general ones.
template <Reduce K, typename T>
bool launchRuns(CudaContext &ctx, const Runs &r, const T *in, T *out,
                std::string &error) {
  if (!r.ok || r.count == 0 || (r.inner > 1 && r.inner < kTileCols))
    return false;
  if (r.inner == 1) {
    int64_t blocks = std::min<int64_t>((r.outer + 7) / 8, 65535 * 32);
    warpRowReduceKernel<K, T>
        <<<static_cast<unsigned>(blocks), 256, 0, ctx.stream>>>(
            in, out, r.outer, r.count);
    return true;
  }
  if (r.count < 4 * kTileRows) {
    shortColumnsKernel<K, T>
        <<<blocksFor(r.outer * r.inner), kThreads, 0, ctx.stream>>>(
            in, out, r.outer, r.count, r.inner);
    return true;
  }
  // Split the rows only when the tiles would not fill the device, and by a
  // number that depends on the shape alone.
  int64_t tiles = (r.inner + kTileCols - 1) / kTileCols;
  int64_t zs = std::min<int64_t>(r.outer, 65535);
  int64_t blocks = tiles * zs, splits = 1;
  if (blocks < 1024)
    splits = std::min<int64_t>({(1024 + blocks - 1) / blocks, 64,
                                std::max<int64_t>(1, r.count / 128)});
  std::unique_ptr<Scratch> partial;
  if (splits > 1) {
    partial = std::make_unique<Scratch>(
        ctx, static_cast<size_t>(r.outer * splits * r.inner) * sizeof(float));
    if (!*partial) {
      partial.reset();
      splits = 1;
    }
  }
  int64_t chunk = (r.count + splits - 1) / splits;
  dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits),
            static_cast<unsigned>(zs));
  tiledReduceKernel<K, T><<<grid, dim3(kTileCols, kTileRows), 0, ctx.stream>>>(
      in, out, partial ? partial->as<float>() : nullptr, r.outer, r.count,
      r.inner, chunk);
  if (splits > 1) {
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
      error = cudaGetErrorString(e);
      return true;
    }
    combineSplitsKernel<K, T>
        <<<blocksFor(r.outer * r.inner), kThreads, 0, ctx.stream>>>(
            partial->as<float>(), out, r.outer, splits, r.count, r.inner);
  }
  return true;
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
  std::vector<bool> isReduced(in.rank(), false);
  for (int64_t a : args.attrs.getInts("axes"))
    isReduced[a] = true;
  Runs runs = runsOf(in.shape, isReduced);
  bool column = g.lastKept && g.outputs >= 1024;
  std::string error;
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        if (launchRuns<K, T>(ctx, runs, in.as<T>(), out.as<T>(), error))
          return;
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
  if (!error.empty())
    return "cuda kernel '" + std::string(args.op) + "': " + error;
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
