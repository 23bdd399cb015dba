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

/// Output index -> offsets of up to N strided operands, for an output of
/// `rank` dimensions.
template <int N> struct Indexer {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  int64_t base[N] = {};

  __device__ void offsets(int64_t index, int64_t *out) const {
    for (int k = 0; k < N; ++k)
      out[k] = base[k];
    for (int d = rank - 1; d >= 0; --d) {
      int64_t i = index % dims[d];
      index /= dims[d];
      for (int k = 0; k < N; ++k)
        out[k] += i * strides[k][d];
    }
  }
};

/// Dense row-major strides of `shape`.
std::vector<int64_t> denseStrides(const Shape &shape);
/// Strides of `in` read under numpy broadcasting as `out` (0 where
/// broadcast), or an empty vector if it does not broadcast.
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out);

/// An indexer over `out` with the given per-operand strides; false if the
/// rank exceeds kMaxRank (after dropping dimensions of size 1).
template <int N>
bool makeIndexer(const Shape &out,
                 const std::array<std::vector<int64_t>, N> &strides,
                 Indexer<N> &ix) {
  ix.rank = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1)
      continue;
    if (ix.rank == kMaxRank)
      return false;
    ix.dims[ix.rank] = out[d];
    for (int k = 0; k < N; ++k)
      ix.strides[k][ix.rank] = strides[k][d];
    ++ix.rank;
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
