//===- TrainTestUtil.h - Helpers for training-op kernel tests --*- C++ -*-===//
//
// Training ops may have several results and run in place, so these tests
// call kernels with explicit output views; gradient references are
// validated by central differences of the forward op's math in double.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_KERNELS_TRAINTESTUTIL_H
#define LOOM_TEST_UNIT_KERNELS_TRAINTESTUTIL_H

#include "test/unit/kernels/KernelTestUtil.h"

#include <functional>
#include <string>
#include <vector>

namespace loom::rt::test {

/// The element type and shape of one kernel result.
struct OutSpec {
  DType dtype;
  Shape shape;
};

struct MultiResult {
  std::string error;
  std::vector<HostBuffer> outs;
};

/// Runs `op` with fresh zero-filled results of the given types.
MultiResult runKernel(Backend &backend, const std::string &op,
                      const Attrs &attrs, std::vector<HostBuffer> inputs,
                      const std::vector<OutSpec> &outs);

/// Runs `op` with explicit input and output views (aliasing allowed).
std::string runViews(Backend &backend, const std::string &op,
                     const Attrs &attrs, std::vector<TensorView> inputs,
                     std::vector<TensorView> outputs);

/// Runs `kernel` as the executor does, with the scratch its rule gives it
/// (common/ops/KernelScratch.h) filled with NaN bytes; an error too when
/// the kernel took scratch from the heap beyond its rule.
std::string runWithRuleScratch(const KernelFn &kernel, KernelArgs &args);

/// Central differences of f at x, one per coordinate, step h.
std::vector<double>
centralDifferences(const std::function<double(const std::vector<double> &)> &f,
                   std::vector<double> x, double h = 1e-5);

/// Expects an analytic gradient within tol * max(|numeric|, 1) of the
/// central differences.
void expectMatchesDifferences(const std::vector<double> &analytic,
                              const std::vector<double> &numeric,
                              double tol = 1e-6);

/// sum_i a[i] * b[i].
double dot(const std::vector<double> &a, const std::vector<double> &b);

/// Uniform doubles in [lo, hi].
std::vector<double> randomValues(size_t n, std::mt19937 &rng, double lo = -1,
                                 double hi = 1);

} // namespace loom::rt::test

#endif // LOOM_TEST_UNIT_KERNELS_TRAINTESTUTIL_H
