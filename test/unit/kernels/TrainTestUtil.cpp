//===- TrainTestUtil.cpp - Runners and finite differences for training ops ===//

#include "test/unit/kernels/TrainTestUtil.h"

#include "test/unit/support/Oracle.h"

#include "common/ops/KernelScratch.h"

#include <cstdint>

namespace loom::rt::test {

MultiResult runKernel(Backend &backend, const std::string &op,
                      const Attrs &attrs, std::vector<HostBuffer> inputs,
                      const std::vector<OutSpec> &outs) {
  MultiResult result;
  std::vector<TensorView> in, out;
  for (HostBuffer &b : inputs)
    in.push_back(b.view());
  for (const OutSpec &spec : outs) {
    result.outs.push_back(makeTensor(
        spec.dtype, spec.shape,
        std::vector<double>(static_cast<size_t>(numElements(spec.shape)))));
  }
  for (HostBuffer &b : result.outs)
    out.push_back(b.view());
  result.error = runViews(backend, op, attrs, std::move(in), std::move(out));
  return result;
}

std::string runViews(Backend &backend, const std::string &op,
                     const Attrs &attrs, std::vector<TensorView> inputs,
                     std::vector<TensorView> outputs) {
  const KernelFn *kernel = backend.findKernel(op);
  if (!kernel)
    return "no kernel for " + op;
  KernelArgs args{op, attrs, std::move(inputs), std::move(outputs)};
  return runWithRuleScratch(*kernel, args);
}

std::string runWithRuleScratch(const KernelFn &kernel, KernelArgs &args) {
  std::vector<ops::TypeRef> operands, results;
  for (const TensorView &v : args.inputs)
    operands.push_back({v.dtype, &v.shape});
  for (const TensorView &v : args.outputs)
    results.push_back({v.dtype, &v.shape});
  int64_t bytes =
      ops::kernelScratchBytes(args.op, args.attrs, operands, results);
  // NaN bytes, aligned as the step arena is: a kernel must not read
  // scratch it has not written.
  std::vector<unsigned char> scratch(static_cast<size_t>(bytes) +
                                         ops::kScratchAlign,
                                     0xff);
  auto at = reinterpret_cast<uintptr_t>(scratch.data());
  args.scratch = scratch.data() + (ops::kScratchAlign - at % ops::kScratchAlign) %
                                      ops::kScratchAlign;
  args.scratchBytes = static_cast<size_t>(bytes);
  size_t before = ScratchPool::heapBytesOfAllPools();
  std::string error = kernel(args);
  size_t beyond = ScratchPool::heapBytesOfAllPools() - before;
  if (error.empty() && beyond > 0)
    error = "kernel '" + std::string(args.op) + "' took " +
            std::to_string(beyond) + " bytes of scratch from the heap beyond the " +
            std::to_string(bytes) + " its rule (common/ops/KernelScratch.h) gives it";
  return error;
}

std::vector<double>
centralDifferences(const std::function<double(const std::vector<double> &)> &f,
                   std::vector<double> x, double h) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    x[i] = saved + h;
    double up = f(x);
    x[i] = saved - h;
    double down = f(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

void expectMatchesDifferences(const std::vector<double> &analytic,
                              const std::vector<double> &numeric, double tol) {
  oracle::Comparison r = oracle::compareElements(
      analytic, numeric, oracle::Tolerance::relative(tol));
  EXPECT_TRUE(r.ok()) << "the reference gradient against the central "
                         "differences: "
                      << r.message();
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    s += a[i] * b[i];
  return s;
}

std::vector<double> randomValues(size_t n, std::mt19937 &rng, double lo,
                                 double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = dist(rng);
  return v;
}

} // namespace loom::rt::test
