//===- CpuBackend.cpp - The CPU backend: kernel registry and threading ----===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/TrainKernels.h"

#include <omp.h>

#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>

namespace loom::rt {
namespace {

using cpu::CpuContext;
using cpu::KernelEntry;
using cpu::KernelTable;

class CpuBackend final : public Backend {
public:
  CpuBackend() : ctx(std::make_unique<CpuContext>()) {
    defaultThreads = omp_get_max_threads();
    ctx->numThreads = defaultThreads;
    if (const char *off = std::getenv("LOOM_CPU_DISABLE_ONEDNN"))
      ctx->useOneDnn = std::string(off) != "1";
    KernelTable table;
    cpu::registerElementwiseKernels(table);
    cpu::registerCastSelectKernels(table);
    cpu::registerCompareKernels(table);
    cpu::registerLinalgKernels(table);
    cpu::registerNormalizationKernels(table);
    cpu::registerReductionKernels(table);
    cpu::registerDataMovementKernels(table);
    cpu::registerPoolingKernels(table);
    cpu::registerLossKernels(table);
    cpu::registerDropoutKernels(table);
    cpu::ResultCounts results;
    cpu::registerGradKernels(table, results);
    cpu::registerConvPoolGradKernels(table, results);
    cpu::registerOptimizerKernels(table, results);
    cpu::registerReduceGradKernels(table, results);
    cpu::registerIndexingKernels(table, results);
    cpu::registerResizeKernels(table);
    for (auto &[op, entry] : table) {
      auto count = results.find(op);
      kernels.emplace(op, wrap(op, std::move(entry),
                               count == results.end() ? 1 : count->second));
    }
  }

  std::string name() const override { return "cpu"; }

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

  void setNumThreads(int threads) override {
    int n = threads > 0 ? threads : defaultThreads;
    ctx->numThreads = n;
    omp_set_num_threads(n);
  }

  CpuContext &context() { return *ctx; }

private:
  /// The executor-facing kernel: checks the operand and result counts,
  /// applies the thread count on the calling thread (OpenMP's is per
  /// thread), and turns exceptions into error strings.
  KernelFn wrap(const std::string &op, KernelEntry entry, int outputs) {
    CpuContext *context = ctx.get();
    return [context, op, outputs,
            entry = std::move(entry)](const KernelArgs &args) {
      if (std::string e = checkArity("cpu", op, args, entry.minInputs,
                                     entry.maxInputs, outputs);
          !e.empty())
        return e;
      int threads = context->numThreads;
      if (omp_get_max_threads() != threads)
        omp_set_num_threads(threads);
      try {
        return entry.fn(*context, args);
      } catch (const std::exception &e) {
        return "cpu kernel '" + op + "' failed: " + e.what();
      }
    };
  }

  std::unique_ptr<CpuContext> ctx;
  std::map<std::string, KernelFn, std::less<>> kernels;
  int defaultThreads = 1;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

cpu::CpuContext *cpu::getCpuContext(Backend &backend) {
  auto *cpuBackend = dynamic_cast<CpuBackend *>(&backend);
  return cpuBackend ? &cpuBackend->context() : nullptr;
}

} // namespace loom::rt
