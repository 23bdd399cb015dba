//===- CudaContext.h - State and registry of the CUDA kernels ---*- C++ -*-===//
//
// Internal to the CUDA backend: the per-backend state its kernels share (the
// device, the stream every kernel is queued on, the cuBLASLt handle and
// workspace, the cuDNN handle, the caching allocator for scratch, the device
// error word), the kernel table they register into, and one registration
// function per kernel family. Kernels are asynchronous: what they can only
// detect on the device (an index out of range) is written to the error word,
// which the backend's synchronize() reads and reports.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDACONTEXT_H
#define LOOM_RUNTIME_CUDA_CUDACONTEXT_H

#include "runtime/Kernel.h"
#include "runtime/cuda/CachingAllocator.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace loom::rt::cuda {

/// What a kernel found wrong on the device (the error word's values).
enum DeviceError : int {
  kNoDeviceError = 0,
  kIndexOutOfRange = 1,
  kLabelOutOfRange = 2,
  kIntegerDivisionByZero = 3,
};

/// The message of a device error word.
const char *deviceErrorMessage(int code);

/// A cuDNN convolution algorithm chosen for one problem (Conv.cu).
struct CudnnAlgorithm {
  int algorithm = 0;
  size_t workspaceBytes = 0;
  /// The cudnnMathType_t the algorithm runs with.
  int mathType = 0;
};

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// One int on the device; 0 while no kernel has found an error.
  int *errorWord = nullptr;
  std::unique_ptr<CachingAllocator> allocator;
  /// Per cuBLASLt problem: the heuristic's algorithm (see Matmul.cpp).
  std::map<std::string, cublasLtMatmulAlgo_t> algorithms;
  /// Problems whose heuristic has no algorithm with their epilogue.
  std::set<std::string> unfusable;
  /// f32 GEMMs and convolutions on tensor cores in TF32 (LOOM_CUDA_TF32=1):
  /// faster, about 1e-3 relative.
  bool tf32 = false;
  /// cuDNN, for convolution and pooling: created on first use.
  cudnnHandle_t cudnn = nullptr;
  /// Per convolution problem and direction: cuDNN's algorithm.
  std::map<std::string, CudnnAlgorithm> cudnnAlgorithms;
};

/// Scratch device memory for one kernel call, returned to the cache when
/// the call ends (the stream orders its reuse after the call's work).
class Scratch {
public:
  Scratch(CudaContext &ctx, size_t bytes)
      : ctx(ctx), ptr(ctx.allocator->allocate(bytes)) {}
  ~Scratch() { ctx.allocator->deallocate(ptr); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  template <typename T> T *as() const { return static_cast<T *>(ptr); }
  explicit operator bool() const { return ptr != nullptr; }

private:
  CudaContext &ctx;
  void *ptr;
};

/// A kernel body, the inputs it accepts and its result count.
struct KernelEntry {
  std::function<std::string(CudaContext &, const KernelArgs &)> fn;
  int minInputs = 1;
  int maxInputs = 1;
  int outputs = 1;
};

using KernelTable = std::map<std::string, KernelEntry, std::less<>>;

/// add, sub, mul, div, pow, mod, fmod, the unary ops, relu_grad, gelu_grad,
/// cast, select (Elementwise.cu).
void registerElementwiseKernels(KernelTable &table);
/// equal, less, less_equal, greater, greater_equal, and, or, xor, not,
/// max, min, trilu (Compare.cu).
void registerCompareKernels(KernelTable &table);
/// reshape, broadcast, transpose, slice, slice_grad, pad, pad_grad, concat,
/// gather, gather_grad (DataMovement.cu).
void registerDataMovementKernels(KernelTable &table);
/// reduce_sum, reduce_mean, reduce_max, reduce_max_grad (Reduction.cu).
void registerReductionKernels(KernelTable &table);
/// softmax, log_softmax, layer_norm, layer_norm_grad (Normalization.cu).
void registerNormalizationKernels(KernelTable &table);
/// softmax_cross_entropy(_grad), label_count, mse_loss (Loss.cu).
void registerLossKernels(KernelTable &table);
/// sgd_update, momentum_update, adam_update (Optimizer.cu).
void registerOptimizerKernels(KernelTable &table);
/// matmul and fused_matmul on cuBLASLt (Matmul.cpp).
void registerMatmulKernels(KernelTable &table);
/// conv2d, conv2d_grad_input, conv2d_grad_weight, conv_transpose2d on cuDNN
/// (Conv.cu).
void registerConvKernels(KernelTable &table);
/// max_pool2d, avg_pool2d and their gradients on cuDNN (Pool.cu).
void registerPoolKernels(KernelTable &table);

/// gather_elements, scatter_elements, cumsum, top_k, reduce_prod and
/// reduce_prod_grad (Indexing.cu).
void registerIndexingKernels(KernelTable &table);

/// resize and resize_grad (Resize.cu).
void registerResizeKernels(KernelTable &table);

/// dropout, its mask drawn on the global element index (Dropout.cu).
void registerDropoutKernels(KernelTable &table);

/// fused_matmul's epilogue as a pass over the product in `out` (where
/// cuBLASLt has no algorithm with it): + bias per row, then relu.
std::string launchBiasEpilogue(CudaContext &ctx, const TensorView &bias,
                               bool relu, const TensorView &out);

/// "" if the last launch succeeded, else "<op>: <CUDA error>".
std::string launchStatus(std::string_view op);

/// "cuda kernel 'op' does not support element type x".
std::string unsupportedType(std::string_view op, DType dtype);

} // namespace loom::rt::cuda

#endif // LOOM_RUNTIME_CUDA_CUDACONTEXT_H
