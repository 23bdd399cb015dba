//===- GemmBench.cpp - Loom's matmul kernel against a plain cuBLAS call ---===//
//
// For the GEMMs of a GPT training step (tokens x d_model against the
// attention, MLP and LM-head weights, forward and both backward products),
// times the CUDA backend's "matmul" kernel (cuBLASLt with its heuristic's
// algorithm) and a plain cublasGemmEx on the same device buffers, and prints
// both rates and their ratio (Loom / cuBLAS). Without a GPU it prints why
// and exits 0.
//
//   loom-gemm-bench [--tokens N] [--d-model D] [--vocab V] [--dtype bf16|f32]
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"
#include "runtime/Kernel.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace loom;

namespace {

struct Shape3 {
  const char *what;
  int64_t m, k, n;
  bool transLhs, transRhs;
};

double seconds(const std::function<void()> &f, int iters) {
  f(); // warm-up (and algorithm selection)
  cudaDeviceSynchronize();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    f();
  cudaDeviceSynchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count() /
         iters;
}

} // namespace

int main(int argc, char **argv) {
  int64_t tokens = 8192, d = 768, vocab = 50304;
  std::string dtypeName = "bf16";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--tokens")
      tokens = std::atoll(argv[i + 1]);
    else if (flag == "--d-model")
      d = std::atoll(argv[i + 1]);
    else if (flag == "--vocab")
      vocab = std::atoll(argv[i + 1]);
    else if (flag == "--dtype")
      dtypeName = argv[i + 1];
  }
  std::string error;
  std::unique_ptr<rt::Backend> backend = rt::createCudaBackend(0, error);
  if (!backend) {
    std::printf("skipped: %s\n", error.c_str());
    return 0;
  }
  bool bf16 = dtypeName == "bf16";
  rt::DType dtype = bf16 ? rt::DType::BF16 : rt::DType::F32;
  cudaDataType_t cudaType = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  size_t elem = bf16 ? 2 : 4;
  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasSetStream(handle,
                  static_cast<cudaStream_t>(rt::cudaStreamOf(*backend)));
  const rt::KernelFn *matmul = backend->findKernel("matmul");
  std::vector<Shape3> shapes = {
      {"qkv/fc forward  [T,d]x[d,4d]", tokens, d, 4 * d, false, false},
      {"proj forward    [T,4d]x[4d,d]", tokens, 4 * d, d, false, false},
      {"grad input      [T,4d]x[d,4d]^T", tokens, 4 * d, d, false, true},
      {"grad weight     [T,d]^T x[T,4d]", d, tokens, 4 * d, true, false},
      {"lm head         [T,d]x[d,V]", tokens, d, vocab, false, false},
  };
  std::printf("GEMM efficiency, %s, against cublasGemmEx (f32 accumulation)\n",
              dtypeName.c_str());
  std::printf("%-34s %12s %12s %7s\n", "gemm (M x K x N)", "loom TF/s",
              "cublas TF/s", "ratio");
  double loomTotal = 0, cublasTotal = 0;
  for (const Shape3 &s : shapes) {
    size_t aBytes = s.m * s.k * elem, bBytes = s.k * s.n * elem,
           cBytes = s.m * s.n * elem;
    void *a = backend->allocate(aBytes), *b = backend->allocate(bBytes),
         *c = backend->allocate(cBytes);
    if (!a || !b || !c) {
      std::printf("%-34s out of device memory\n", s.what);
      continue;
    }
    rt::Attrs attrs;
    if (s.transLhs)
      attrs.set("transpose_lhs", true);
    if (s.transRhs)
      attrs.set("transpose_rhs", true);
    rt::Shape lhsShape = s.transLhs ? rt::Shape{s.k, s.m} : rt::Shape{s.m, s.k};
    rt::Shape rhsShape = s.transRhs ? rt::Shape{s.n, s.k} : rt::Shape{s.k, s.n};
    rt::KernelArgs args{"matmul",
                        attrs,
                        {{dtype, lhsShape, a}, {dtype, rhsShape, b}},
                        {{dtype, {s.m, s.n}, c}}};
    int iters = 20;
    std::string failure;
    double tLoom = seconds(
        [&] {
          std::string e = (*matmul)(args);
          if (!e.empty())
            failure = e;
        },
        iters);
    // The same product in cuBLAS's column-major terms: C^T = B^T A^T.
    float alpha = 1, beta = 0;
    cublasOperation_t opB = s.transRhs ? CUBLAS_OP_T : CUBLAS_OP_N,
                      opA = s.transLhs ? CUBLAS_OP_T : CUBLAS_OP_N;
    double tCublas = seconds(
        [&] {
          cublasGemmEx(handle, opB, opA, s.n, s.m, s.k, &alpha, b, cudaType,
                       s.transRhs ? s.k : s.n, a, cudaType,
                       s.transLhs ? s.m : s.k, &beta, c, cudaType, s.n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        },
        iters);
    double flops = 2.0 * s.m * s.k * s.n;
    if (!failure.empty())
      std::printf("%-34s loom matmul failed: %s\n", s.what, failure.c_str());
    else
      std::printf("%-34s %12.1f %12.1f %6.2fx\n", s.what, flops / tLoom / 1e12,
                  flops / tCublas / 1e12, tCublas / tLoom);
    loomTotal += tLoom;
    cublasTotal += tCublas;
    backend->deallocate(a);
    backend->deallocate(b);
    backend->deallocate(c);
  }
  std::printf("all shapes: loom / cublas time ratio %.2fx (above 1: Loom "
              "faster)\n",
              cublasTotal / loomTotal);
  cublasDestroy(handle);
  return 0;
}
