//===- DeviceUtil.cuh - Element access and indexing for CUDA kernels ------===//
//
// Internal to the CUDA backend's kernels: loads and stores that convert
// f16/bf16 to and from f32, strided indexing for broadcasting, transposition
// and slicing (up to kMaxRank dimensions), launch geometry and block sums.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_DEVICEUTIL_CUH
#define LOOM_RUNTIME_CUDA_DEVICEUTIL_CUH

#include "runtime/cuda/CudaContext.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdint>
#include <vector>

namespace loom::rt::cuda {

constexpr int kMaxRank = 8;
constexpr int kThreads = 256;

inline __device__ float toFloat(float x) { return x; }
inline __device__ float toFloat(__half x) { return __half2float(x); }
inline __device__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T fromFloat(float x);
template <> inline __device__ float fromFloat<float>(float x) { return x; }
template <> inline __device__ __half fromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <> inline __device__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Division by a fixed 32-bit divisor as a multiply-high and a shift
/// (Granlund and Montgomery's round-up method): exact for dividends below
/// 2^31, and several times cheaper on the device than `/`, let alone a
/// 64-bit division.
struct FastDivisor {
  uint32_t divisor = 1, magic = 1, shift = 0;

  FastDivisor() = default;
  explicit FastDivisor(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t(1) << shift) < d)
      ++shift;
    uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1;
    magic = static_cast<uint32_t>(m);
  }
  __host__ __device__ uint32_t divide(uint32_t n) const {
#ifdef __CUDA_ARCH__
    uint32_t high = __umulhi(n, magic);
#else
    uint32_t high = static_cast<uint32_t>((uint64_t(n) * magic) >> 32);
#endif
    return (high + n) >> shift;
  }
};

/// Output index -> offsets of up to N strided operands, for an output of
/// `rank` dimensions. Built by makeIndexer, which drops dimensions of size 1
/// and merges neighbours that every operand walks contiguously (a same-shape
/// operand then needs no division at all); below 2^31 elements the index is
/// split with 32-bit FastDivisors.
template <int N> struct Indexer {
  int rank = 0;
  /// Every index is below 2^31: the 32-bit path.
  bool narrow = false;
  int64_t dims[kMaxRank] = {};
  FastDivisor divisors[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  int64_t base[N] = {};

  __device__ void offsets(int64_t index, int64_t *out) const {
    for (int k = 0; k < N; ++k)
      out[k] = base[k];
    if (narrow) {
      // Innermost first; the outermost index needs no division. Unrolled so
      // that the dimension arrays are indexed by constants.
      uint32_t i = static_cast<uint32_t>(index);
#pragma unroll
      for (int d = kMaxRank - 1; d > 0; --d) {
        if (d < rank) {
          uint32_t q = divisors[d].divide(i);
          uint32_t r = i - q * divisors[d].divisor;
          for (int k = 0; k < N; ++k)
            out[k] += static_cast<int64_t>(r) * strides[k][d];
          i = q;
        }
      }
      if (rank > 0)
        for (int k = 0; k < N; ++k)
          out[k] += static_cast<int64_t>(i) * strides[k][0];
      return;
    }
    for (int d = rank - 1; d >= 0; --d) {
      int64_t i = index % dims[d];
      index /= dims[d];
      for (int k = 0; k < N; ++k)
        out[k] += i * strides[k][d];
    }
  }
};

/// Outputs per thread of the indexed kernels when the innermost dimension
/// holds a multiple of them: one index split serves kRun neighbours.
constexpr int kRun = 4;

/// Whether `ix` walks its output in runs of kRun along the innermost
/// dimension, and each operand's step along it.
template <int N> struct InnerRuns {
  bool grouped = false;
  int64_t step[N] = {};
};

template <int N> InnerRuns<N> innerRunsOf(const Indexer<N> &ix) {
  InnerRuns<N> r;
  if (ix.rank == 0 || ix.dims[ix.rank - 1] % kRun != 0)
    return r;
  r.grouped = true;
  for (int k = 0; k < N; ++k)
    r.step[k] = ix.strides[k][ix.rank - 1];
  return r;
}

/// Dense row-major strides of `shape`.
std::vector<int64_t> denseStrides(const Shape &shape);
/// Strides of `in` read under numpy broadcasting as `out` (0 where
/// broadcast), or an empty vector if it does not broadcast.
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out);

/// An indexer over `out` with the given per-operand strides; false if the
/// rank exceeds kMaxRank (after dropping dimensions of size 1 and merging
/// the neighbours every operand walks contiguously).
template <int N>
bool makeIndexer(const Shape &out,
                 const std::array<std::vector<int64_t>, N> &strides,
                 Indexer<N> &ix) {
  // Merge on the host into unbounded vectors first, so that a tensor of more
  // than kMaxRank dimensions that merges down still has an indexer.
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> merged;
  int64_t total = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    total *= out[d];
    if (out[d] == 1)
      continue;
    bool contiguous = !dims.empty();
    for (int k = 0; k < N && contiguous; ++k)
      contiguous = merged[k].back() == strides[k][d] * out[d];
    if (contiguous) {
      dims.back() *= out[d];
      for (int k = 0; k < N; ++k)
        merged[k].back() = strides[k][d];
      continue;
    }
    dims.push_back(out[d]);
    for (int k = 0; k < N; ++k)
      merged[k].push_back(strides[k][d]);
  }
  if (dims.size() > static_cast<size_t>(kMaxRank))
    return false;
  ix.rank = static_cast<int>(dims.size());
  ix.narrow = total > 0 && total < (int64_t(1) << 31);
  for (int d = 0; d < ix.rank; ++d) {
    ix.dims[d] = dims[d];
    if (ix.narrow)
      ix.divisors[d] = FastDivisor(static_cast<uint32_t>(dims[d]));
    for (int k = 0; k < N; ++k)
      ix.strides[k][d] = merged[k][d];
  }
  return true;
}

/// Threads of a block that handles one row of `cols` elements.
inline unsigned rowThreadsFor(int64_t cols) {
  return cols >= 4096 ? 1024 : cols >= 1024 ? 512 : cols >= 256 ? 256 : 128;
}

inline unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

#define LOOM_GRID_LOOP(i, n)                                                   \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

/// The sum of `v` over the block (every thread gets it); `shared` holds 32
/// floats. Block sizes are multiples of 32.
inline __device__ float blockSum(float v, float *shared) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  v = lane < warps ? shared[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The max of `v` over the block, NaN if any is NaN.
inline __device__ float blockMax(float v, float *shared) {
  auto mx = [](float a, float b) {
    return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
  };
  for (int o = 16; o > 0; o >>= 1)
    v = mx(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  v = lane < warps ? shared[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1)
    v = mx(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Calls f(T{}) with T the device type of a float tensor; false for others.
template <typename F> bool dispatchFloat(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32:
    f(float{});
    return true;
  case DType::F16:
    f(__half{});
    return true;
  case DType::BF16:
    f(__nv_bfloat16{});
    return true;
  default:
    return false;
  }
}

/// Records `code` in the error word (the first error wins).
inline __device__ void raise(int *errorWord, int code) {
  atomicCAS(errorWord, 0, code);
}

} // namespace loom::rt::cuda

#endif // LOOM_RUNTIME_CUDA_DEVICEUTIL_CUH
