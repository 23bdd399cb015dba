//===- CpuContext.h - State and registry of the CPU kernels -----*- C++ -*-===//
//
// Internal to the CPU backend (and its unit tests): the per-backend state the
// kernels share, the kernel table they register into, and one registration
// function per kernel family.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_CPUCONTEXT_H
#define LOOM_RUNTIME_CPU_CPUCONTEXT_H

#include "runtime/Backend.h"
#if LOOM_HAVE_DNNL
#include "runtime/cpu/OneDnnUtil.h"
#endif

#include <atomic>
#include <functional>
#include <map>
#include <string>

namespace loom::rt::cpu {

/// State owned by one CPU backend and shared by its kernels.
struct CpuContext {
#if LOOM_HAVE_DNNL
  /// oneDNN primitives by shape/attribute signature.
  PrimitiveCache primitives;
#endif
  /// When false every op takes its plain C++ path (tests compare both);
  /// always false in a build without oneDNN (LOOM_ENABLE_DNNL=OFF).
#if LOOM_HAVE_DNNL
  std::atomic<bool> useOneDnn{true};
#else
  std::atomic<bool> useOneDnn{false};
#endif
  /// Threads per kernel; the backend applies it on the calling thread.
  std::atomic<int> numThreads{1};
};

/// A kernel body and the number of inputs it accepts.
struct KernelEntry {
  std::function<std::string(CpuContext &, const KernelArgs &)> fn;
  int minInputs;
  int maxInputs;
};

using KernelTable = std::map<std::string, KernelEntry, std::less<>>;

/// softmax, or log_softmax with `logOf`, of [outer, n, inner] over n on
/// oneDNN (Normalization.cpp); false where oneDNN does not run it (no
/// oneDNN, nothing to do, a NaN in `in`).
bool softmaxOneDnn(CpuContext &ctx, const float *in, float *out, int64_t outer,
                   int64_t n, int64_t inner, bool logOf);

void registerElementwiseKernels(KernelTable &table);
void registerCastSelectKernels(KernelTable &table);
void registerCompareKernels(KernelTable &table);
void registerLinalgKernels(KernelTable &table);
void registerNormalizationKernels(KernelTable &table);
void registerReductionKernels(KernelTable &table);
void registerDataMovementKernels(KernelTable &table);
void registerPoolingKernels(KernelTable &table);
void registerLossKernels(KernelTable &table);
void registerDropoutKernels(KernelTable &table);

/// The context of a backend made by createCpuBackend(), else nullptr. Tests
/// use it to switch oneDNN off and to inspect the primitive cache.
CpuContext *getCpuContext(Backend &backend);

} // namespace loom::rt::cpu

#endif // LOOM_RUNTIME_CPU_CPUCONTEXT_H
