//===- Backend.h - A set of kernels for one kind of device --------*- C++
//-*-===//
//
// Backends sit behind one interface (as IREE's HAL drivers do): the executor
// asks a backend for the kernel of each op. A backend that lacks an op says
// so by name, and lists the ops it supports.
//
// A backend also owns the memory its kernels read and write. The executor
// allocates a plan's arena and state through it and moves values in and out
// through its copy hooks. The defaults are host memory, which the executor
// may also read and write directly (hostAccessible()); a device backend
// (CUDA) overrides them, and the executor then stages every value it reads
// or writes through host buffers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_BACKEND_H
#define LOOM_RUNTIME_BACKEND_H

#include "runtime/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// The kernel for `op`, or nullptr if this backend does not support it.
  virtual const KernelFn *findKernel(std::string_view op) const = 0;
  virtual std::vector<std::string> supportedOps() const = 0;
  /// Threads the backend's kernels may use (0: the backend's default).
  virtual void setNumThreads(int threads) = 0;

  //===--- Memory (host memory by default) ----------------------------===//

  /// Whether the host may read and write this backend's memory directly.
  /// When false, the executor only touches it through the hooks below.
  virtual bool hostAccessible() const { return true; }
  /// `bytes` of zeroed memory aligned to at least 64 bytes, or nullptr.
  virtual void *allocate(size_t bytes);
  virtual void deallocate(void *ptr);
  virtual void copyToDevice(void *dst, const void *src, size_t bytes);
  virtual void copyToHost(void *dst, const void *src, size_t bytes);
  virtual void copyOnDevice(void *dst, const void *src, size_t bytes);
  /// `height` rows of `width` bytes, rows `srcPitch` and `dstPitch` apart.
  virtual void copy2DOnDevice(void *dst, size_t dstPitch, const void *src,
                              size_t srcPitch, size_t width, size_t height);
  virtual void zero(void *dst, size_t bytes);
  /// Waits for the backend's queued work; "" or what failed (a kernel's
  /// asynchronous error).
  virtual std::string synchronize() { return ""; }

  //===--- A second queue for collectives (device backends) -----------===//
  //
  // A backend whose kernels run asynchronously in one queue may offer a
  // second for the collectives of a device communicator, so that a
  // collective runs while later kernels compute. Between
  // beginCommunication() and endCommunication(), the memory hooks above
  // queue on the second queue, which first waits for every kernel queued
  // so far; endCommunication() returns a token for what was queued, and
  // waitCommunication(token) makes kernels queued after it wait for that
  // work. The caller orders every other use of the memory involved.

  /// Whether beginCommunication() opens a separate queue.
  virtual bool overlapsCommunication() const { return false; }
  virtual void beginCommunication() {}
  virtual int64_t endCommunication() { return 0; }
  virtual void waitCommunication(int64_t token) {}
};

/// The CPU backend: oneDNN primitives where oneDNN has them, plain C++ with
/// OpenMP elsewhere.
std::unique_ptr<Backend> createCpuBackend();

/// Whether this build has the CUDA backend (the toolkit was found).
bool cudaBackendBuilt();
/// The number of CUDA devices; 0 and `error` ("no CUDA device: <why>") when
/// there is none or this build lacks CUDA.
int cudaDeviceCount(std::string &error);
/// The CUDA backend on device `device` (modulo the devices present, so that
/// ranks beyond the device count share GPUs as virtual devices); nullptr
/// and `error` ("no CUDA device: ...") when there is none or this build
/// lacks CUDA.
std::unique_ptr<Backend> createCudaBackend(int device, std::string &error);

/// The CUDA stream (a cudaStream_t) every kernel of a CUDA backend is
/// queued on; nullptr for any other backend.
void *cudaStreamOf(const Backend &backend);
/// The CUDA backend's second stream, for collectives (see
/// beginCommunication()); nullptr for any other backend.
void *cudaCommStreamOf(const Backend &backend);

/// The backend named `name` ("cpu" or "cuda"; `device` is the CUDA device),
/// or nullptr and `error`.
std::unique_ptr<Backend> createBackend(const std::string &name, int device,
                                       std::string &error);

} // namespace loom::rt

#endif // LOOM_RUNTIME_BACKEND_H
