//===- KernelUtil.h - Shape, loop and dtype helpers for kernels -*- C++ -*-===//
//
// Helpers shared by the plain C++ kernels: shape arithmetic, an OpenMP
// strided loop (broadcasting, transposition and slicing are all strided
// reads), running f16/bf16 ops in f32, and element type dispatch.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_KERNELUTIL_H
#define LOOM_RUNTIME_CPU_KERNELUTIL_H

#include "runtime/Kernel.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::rt::cpu {

/// Elements per OpenMP work item in the element loops.
constexpr int64_t kGrain = 1 << 14;

/// Product of shape[begin, end).
int64_t product(const Shape &shape, size_t begin, size_t end);
/// Dense row-major strides (in elements).
std::vector<int64_t> rowMajorStrides(const Shape &shape);
/// `shape` with leading 1s up to `rank`.
Shape padLeft(const Shape &shape, size_t rank);
/// Strides of `in` read as `out` under numpy broadcasting (0 on broadcast
/// dimensions), one per dimension of `out`.
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out);

/// Whether `in` broadcasts to `out` under numpy rules.
bool broadcastsTo(const Shape &in, const Shape &out);
/// "" if `t` has shape `expected`, else an error naming `what`. Kernels
/// check what they index with, so that a malformed plan gives an error
/// rather than an out-of-bounds access.
std::string expectShape(std::string_view op, const char *what,
                        const TensorView &t, const Shape &expected);

/// Visits every element of a row-major output of shape `shape` in parallel,
/// with the offsets (in elements) of the corresponding element of each of N
/// strided inputs: base[k] + sum_d index[d] * strides[k][d].
template <size_t N> class StridedLoop {
public:
  StridedLoop(const Shape &shape, std::array<std::vector<int64_t>, N> strides,
              std::array<int64_t, N> base = {})
      : base(base) {
    total = rt::numElements(shape);
    // Drop size-1 dimensions and merge dimensions contiguous in every input.
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1)
        continue;
      bool merge = !dims.empty();
      for (size_t k = 0; k < N && merge; ++k)
        merge = this->strides[k].back() == strides[k][d] * shape[d];
      if (merge) {
        dims.back() *= shape[d];
        for (size_t k = 0; k < N; ++k)
          this->strides[k].back() = strides[k][d];
        continue;
      }
      dims.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k)
        this->strides[k].push_back(strides[k][d]);
    }
    if (dims.empty()) {
      dims.push_back(1);
      for (size_t k = 0; k < N; ++k)
        this->strides[k].push_back(0);
    }
  }

  /// Calls f(outIndex, const std::array<int64_t, N> &inOffsets) for every
  /// element; f must not throw.
  template <typename F> void run(F &&f) const {
    int64_t chunks = (total + kGrain - 1) / kGrain;
    int rank = static_cast<int>(dims.size()), last = rank - 1;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t begin = c * kGrain, end = std::min(total, begin + kGrain);
      std::vector<int64_t> idx(rank);
      std::array<int64_t, N> off = base, inner;
      int64_t rem = begin;
      for (int d = last; d >= 0; --d) {
        idx[d] = rem % dims[d];
        rem /= dims[d];
        for (size_t k = 0; k < N; ++k)
          off[k] += idx[d] * strides[k][d];
      }
      for (size_t k = 0; k < N; ++k)
        inner[k] = strides[k][last];
      for (int64_t o = begin; o < end;) {
        int64_t n = std::min(end - o, dims[last] - idx[last]);
        std::array<int64_t, N> cur = off;
        for (int64_t j = 0; j < n; ++j) {
          f(o + j, cur);
          for (size_t k = 0; k < N; ++k)
            cur[k] += inner[k];
        }
        o += n;
        idx[last] += n;
        for (size_t k = 0; k < N; ++k)
          off[k] += n * inner[k];
        for (int d = last; d > 0 && idx[d] == dims[d]; --d) {
          idx[d] = 0;
          ++idx[d - 1];
          for (size_t k = 0; k < N; ++k)
            off[k] += strides[k][d - 1] - dims[d] * strides[k][d];
        }
      }
    }
  }

private:
  Shape dims;
  std::array<std::vector<int64_t>, N> strides;
  std::array<int64_t, N> base;
  int64_t total = 0;
};

/// Whether any of the n values is NaN. oneDNN's max-based primitives
/// (reduction max, max pooling, softmax) drop NaN; kernels route inputs
/// holding NaN to their plain path, which propagates it as numpy does.
bool containsNan(const float *data, int64_t n);

/// Converts a float tensor (f32, f16 or bf16) to f32.
void toF32(const TensorView &src, float *dst);
/// Rounds f32 values into a float tensor (f32, f16 or bf16).
void fromF32(const float *src, const TensorView &dst);

using ArgsFn = std::function<std::string(const KernelArgs &)>;

/// Runs `fn` on f32 copies of the f16/bf16 tensors among the arguments and
/// rounds its outputs back; other tensors pass through untouched.
std::string runInF32(const KernelArgs &args, const ArgsFn &fn);

/// "op 'x' does not support element type y".
std::string unsupportedType(std::string_view op, DType dtype);

/// Calls f(T{}) with T the storage type of an f32, i32 or i64 tensor.
template <typename F>
std::string dispatchNumeric(DType dtype, std::string_view op, F &&f) {
  switch (dtype) {
  case DType::F32:
    return f(float{});
  case DType::I32:
    return f(int32_t{});
  case DType::I64:
    return f(int64_t{});
  default:
    return unsupportedType(op, dtype);
  }
}

} // namespace loom::rt::cpu

#endif // LOOM_RUNTIME_CPU_KERNELUTIL_H
