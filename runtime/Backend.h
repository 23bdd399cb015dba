//===- Backend.h - A set of kernels for one kind of device --------*- C++
//-*-===//
//
// Backends sit behind one interface (as IREE's HAL drivers do): the executor
// asks a backend for the kernel of each op. A backend that lacks an op says
// so by name, and lists the ops it supports.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_BACKEND_H
#define LOOM_RUNTIME_BACKEND_H

#include "runtime/Kernel.h"

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
};

/// The CPU backend: oneDNN primitives where oneDNN has them, plain C++ with
/// OpenMP elsewhere.
std::unique_ptr<Backend> createCpuBackend();

} // namespace loom::rt

#endif // LOOM_RUNTIME_BACKEND_H
