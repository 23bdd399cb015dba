//===- CudaBackend.cpp - The CUDA backend: memory, stream and registry ----===//
//
// One backend per rank and device. Every kernel and copy is queued on the
// backend's one stream, in the executor's order, so the memory plan's reuse
// of arena bytes needs no further synchronisation; the host waits only
// where it reads results (copies to the host) and at the end of a step
// (synchronize(), which also reports the errors kernels found on the
// device). Memory comes from a caching allocator over cudaMalloc.
//
// Collectives of a device communicator may run on a second stream (see
// Backend::beginCommunication): inside a communication section the memory
// hooks queue there, after an event that follows every kernel queued so
// far; the section ends with an event the executor makes later kernels wait
// for where they touch the collective's buffers. The caching allocator
// knows one stream, so memory freed while the second has queued work waits
// for that work first.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaContext.h"

#include <cstdlib>
#include <limits>

namespace loom::rt {
namespace {

using cuda::CudaContext;
using cuda::KernelEntry;
using cuda::KernelTable;

std::string cudaMessage(cudaError_t e) { return cudaGetErrorString(e); }

class CudaBackend final : public Backend {
public:
  /// Sets up device `device`; `error` set when that fails.
  CudaBackend(int device, std::string &error)
      : ctx(std::make_unique<CudaContext>()) {
    ctx->device = device;
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
      error = "no CUDA device: cannot use device " + std::to_string(device) +
              ": " + cudaMessage(e);
      return;
    }
    for (cudaStream_t *s : {&ctx->stream, &commStream})
      if (cudaError_t e = cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
          e != cudaSuccess) {
        error = "cannot create a CUDA stream: " + cudaMessage(e);
        return;
      }
    current = ctx->stream;
    if (cublasLtCreate(&ctx->lt) != CUBLAS_STATUS_SUCCESS) {
      error = "cannot initialise cuBLASLt";
      return;
    }
    ctx->allocator = std::make_unique<CachingAllocator>(
        [](size_t bytes) -> void * {
          void *p = nullptr;
          return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
        },
        [](void *p) { cudaFree(p); });
    ctx->workspaceBytes = size_t(32) << 20;
    ctx->workspace = ctx->allocator->allocate(ctx->workspaceBytes);
    ctx->errorWord = static_cast<int *>(ctx->allocator->allocate(sizeof(int)));
    if (!ctx->workspace || !ctx->errorWord) {
      error = "cannot allocate the CUDA backend's workspace";
      return;
    }
    cudaMemsetAsync(ctx->errorWord, 0, sizeof(int), ctx->stream);
    if (const char *tf32 = std::getenv("LOOM_CUDA_TF32"))
      ctx->tf32 = std::string(tf32) == "1";
    KernelTable table;
    cuda::registerElementwiseKernels(table);
    cuda::registerCompareKernels(table);
    cuda::registerDataMovementKernels(table);
    cuda::registerReductionKernels(table);
    cuda::registerNormalizationKernels(table);
    cuda::registerLossKernels(table);
    cuda::registerOptimizerKernels(table);
    cuda::registerMatmulKernels(table);
    cuda::registerConvKernels(table);
    cuda::registerPoolKernels(table);
    cuda::registerDropoutKernels(table);
    cuda::registerIndexingKernels(table);
    cuda::registerResizeKernels(table);
    for (auto &[op, entry] : table)
      kernels.emplace(op, wrap(op, std::move(entry)));
  }

  ~CudaBackend() override {
    cudaSetDevice(ctx->device);
    for (cudaStream_t s : {ctx->stream, commStream})
      if (s)
        cudaStreamSynchronize(s);
    ctx->allocator.reset();
    if (ctx->lt)
      cublasLtDestroy(ctx->lt);
    if (ctx->cudnn)
      cudnnDestroy(ctx->cudnn);
    for (cudaEvent_t e : events)
      cudaEventDestroy(e);
    for (cudaStream_t s : {ctx->stream, commStream})
      if (s)
        cudaStreamDestroy(s);
  }

  std::string name() const override { return "cuda"; }

  const KernelFn *findKernel(std::string_view op) const override {
    auto it = kernels.find(op);
    return it == kernels.end() ? nullptr : &it->second;
  }

  std::vector<std::string> supportedOps() const override {
    std::vector<std::string> ops;
    for (const auto &entry : kernels)
      ops.push_back(entry.first);
    return ops;
  }

  void setNumThreads(int) override {}

  bool hostAccessible() const override { return false; }

  void *allocate(size_t bytes) override {
    cudaSetDevice(ctx->device);
    void *p = ctx->allocator->allocate(bytes);
    if (p)
      cudaMemsetAsync(p, 0, bytes, current);
    return p;
  }
  void deallocate(void *ptr) override {
    // The allocator hands freed blocks to the kernels' stream: finish the
    // second stream's work, which may still use this one.
    if (communicating || pending)
      cudaStreamSynchronize(commStream);
    ctx->allocator->deallocate(ptr);
  }

  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    cudaSetDevice(ctx->device);
    // Synchronous for pageable host memory: the source may go away.
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream);
    cudaStreamSynchronize(ctx->stream);
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    cudaSetDevice(ctx->device);
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream);
    cudaStreamSynchronize(ctx->stream);
  }
  void copyOnDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes || dst == src)
      return;
    cudaSetDevice(ctx->device);
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, current);
  }
  void copy2DOnDevice(void *dst, size_t dstPitch, const void *src,
                      size_t srcPitch, size_t width, size_t height) override {
    if (!width || !height)
      return;
    cudaSetDevice(ctx->device);
    cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, height,
                      cudaMemcpyDeviceToDevice, current);
  }
  void zero(void *dst, size_t bytes) override {
    if (!bytes)
      return;
    cudaSetDevice(ctx->device);
    cudaMemsetAsync(dst, 0, bytes, current);
  }

  bool overlapsCommunication() const override { return true; }

  void beginCommunication() override {
    cudaSetDevice(ctx->device);
    int event = takeEvent();
    cudaEventRecord(events[event], ctx->stream);
    cudaStreamWaitEvent(commStream, events[event], 0);
    freeEvents.push_back(event);
    current = commStream;
    communicating = true;
  }

  int64_t endCommunication() override {
    int event = takeEvent();
    cudaEventRecord(events[event], commStream);
    current = ctx->stream;
    communicating = false;
    ++pending;
    return event;
  }

  void waitCommunication(int64_t token) override {
    if (token < 0 || token >= static_cast<int64_t>(events.size()))
      return;
    cudaSetDevice(ctx->device);
    cudaStreamWaitEvent(ctx->stream, events[token], 0);
    freeEvents.push_back(static_cast<int>(token));
    if (pending > 0)
      --pending;
  }

  std::string synchronize() override {
    cudaSetDevice(ctx->device);
    if (cudaError_t e = cudaStreamSynchronize(commStream); e != cudaSuccess)
      return "CUDA error: " + cudaMessage(e);
    int word = 0;
    cudaMemcpyAsync(&word, ctx->errorWord, sizeof(int), cudaMemcpyDeviceToHost,
                    ctx->stream);
    if (cudaError_t e = cudaStreamSynchronize(ctx->stream); e != cudaSuccess)
      return "CUDA error: " + cudaMessage(e);
    if (word != cuda::kNoDeviceError) {
      cudaMemsetAsync(ctx->errorWord, 0, sizeof(int), ctx->stream);
      cudaStreamSynchronize(ctx->stream);
      return cuda::deviceErrorMessage(word);
    }
    return "";
  }

  CudaContext &context() const { return *ctx; }
  cudaStream_t communicationStream() const { return commStream; }

private:
  /// An event of the pool (a recorded event may be recorded again once
  /// every wait on it has been queued).
  int takeEvent() {
    if (!freeEvents.empty()) {
      int e = freeEvents.back();
      freeEvents.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    events.push_back(e);
    return static_cast<int>(events.size()) - 1;
  }

  KernelFn wrap(const std::string &op, KernelEntry entry) {
    CudaContext *context = ctx.get();
    return [context, op, entry = std::move(entry)](const KernelArgs &args) {
      if (std::string e = checkArity("cuda", op, args, entry.minInputs,
                                     entry.maxInputs, entry.outputs);
          !e.empty())
        return e;
      cudaSetDevice(context->device);
      try {
        return entry.fn(*context, args);
      } catch (const std::exception &e) {
        return "cuda kernel '" + op + "' failed: " + e.what();
      }
    };
  }

  std::unique_ptr<CudaContext> ctx;
  std::map<std::string, KernelFn, std::less<>> kernels;
  /// The stream of collectives, and where the memory hooks queue now.
  cudaStream_t commStream = nullptr;
  cudaStream_t current = nullptr;
  bool communicating = false;
  /// Sections ended whose tokens nobody has waited for yet.
  int64_t pending = 0;
  std::vector<cudaEvent_t> events;
  std::vector<int> freeEvents;
};

} // namespace

const char *cuda::deviceErrorMessage(int code) {
  switch (code) {
  case kIndexOutOfRange:
    return "a gather index is out of range";
  case kLabelOutOfRange:
    return "a cross-entropy label is out of range for the classes";
  case kIntegerDivisionByZero:
    return "integer division by zero";
  default:
    return "a kernel reported an unknown error";
  }
}

int cuda::deviceCount(std::string &error) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    error = "no CUDA device: " + cudaMessage(e);
    return 0;
  }
  if (count == 0) {
    error = "no CUDA device: the driver reports none";
    return 0;
  }
  return count;
}

int cuda::deviceOf(const Backend &backend) {
  auto *b = dynamic_cast<const CudaBackend *>(&backend);
  return b ? b->context().device : -1;
}

void *cuda::streamOf(const Backend &backend) {
  auto *b = dynamic_cast<const CudaBackend *>(&backend);
  return b ? static_cast<void *>(b->context().stream) : nullptr;
}

CachingAllocator::Stats cuda::allocatorStats(const Backend &backend) {
  auto *b = dynamic_cast<const CudaBackend *>(&backend);
  return b ? b->context().allocator->stats() : CachingAllocator::Stats{};
}

bool cudaBackendBuilt() { return true; }

int cudaDeviceCount(std::string &error) { return cuda::deviceCount(error); }

void *cudaStreamOf(const Backend &backend) { return cuda::streamOf(backend); }

void *cudaCommStreamOf(const Backend &backend) {
  auto *b = dynamic_cast<const CudaBackend *>(&backend);
  return b ? static_cast<void *>(b->communicationStream()) : nullptr;
}

std::unique_ptr<Backend> createCudaBackend(int device, std::string &error) {
  int count = cuda::deviceCount(error);
  if (count == 0)
    return nullptr;
  std::string setupError;
  auto backend = std::make_unique<CudaBackend>(device % count, setupError);
  if (!setupError.empty()) {
    error = setupError;
    return nullptr;
  }
  return backend;
}

} // namespace loom::rt
