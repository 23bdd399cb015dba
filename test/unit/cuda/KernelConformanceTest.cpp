//===- KernelConformanceTest.cpp - CUDA kernels against the CPU backend ---===//
//
// Proves that every kernel the CUDA backend registers computes what the CPU
// backend (the oracle) computes: each case of the table (KernelConformance.h)
// runs on the device backend, inputs copied to its memory and results
// copied back after synchronize(), and on a CPU backend, and the results
// must agree within the tolerance of their element type (bit-exact for
// integers, bools, data movement, casts and maxima). A kernel error fails
// the case with its message. The coverage tests fail when an op of the
// device backend has no case, and when the CUDA backend's op list drifts
// from the one written down here.
//
// LOOM_TEST_DEVICE_BACKEND=cpu makes the "device" a second CPU backend: the
// harness then runs without a GPU, proving every case's attributes, shapes
// and arities valid for the CPU kernels. Otherwise the device is "cuda", and
// without a CUDA device the binary prints why and exits with 77 (skipped).
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

#include "runtime/Backend.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

namespace loom::rt::conformance {
namespace {

/// "cuda" unless LOOM_TEST_DEVICE_BACKEND names another backend.
std::string deviceBackendName() {
  const char *name = std::getenv("LOOM_TEST_DEVICE_BACKEND");
  return name && *name ? name : "cuda";
}

/// The device backend and the CPU reference, made once for the run (a CUDA
/// backend sets up streams and cuBLASLt) and destroyed when the tests end,
/// before the CUDA runtime shuts down.
class Backends : public ::testing::Environment {
public:
  void SetUp() override {
    std::string error;
    device = createBackend(deviceBackendName(), 0, error);
    if (!device)
      deviceError =
          "cannot create the '" + deviceBackendName() + "' backend: " + error;
    reference = createCpuBackend();
  }
  void TearDown() override {
    device.reset();
    reference.reset();
  }

  std::unique_ptr<Backend> device, reference;
  std::string deviceError;
};

Backends *theBackends = nullptr;

Backends &backends() { return *theBackends; }

//===----------------------------------------------------------------------===//
// Running a case
//===----------------------------------------------------------------------===//

/// A backend's memory, freed on scope exit.
class BackendMemory {
public:
  explicit BackendMemory(Backend &backend) : backend(backend) {}
  ~BackendMemory() {
    for (void *p : blocks)
      backend.deallocate(p);
  }
  BackendMemory(const BackendMemory &) = delete;
  BackendMemory &operator=(const BackendMemory &) = delete;

  void *allocate(size_t bytes) {
    void *p = backend.allocate(std::max<size_t>(bytes, 64));
    if (p)
      blocks.push_back(p);
    return p;
  }

private:
  Backend &backend;
  std::vector<void *> blocks;
};

struct KernelRun {
  std::string error;
  std::vector<HostBuffer> outputs;
};

/// Runs `op` on `backend` through its memory hooks only: the inputs are
/// copied in, the results (first filled with `fill` bytes, so that an
/// element the kernel leaves unwritten shows) copied out after
/// synchronize(), which also reports the kernel's asynchronous errors.
KernelRun runOn(Backend &backend, const std::string &op, const Case &c,
                unsigned char fill) {
  KernelRun run;
  const KernelFn *kernel = backend.findKernel(op);
  if (!kernel) {
    run.error = "the " + backend.name() + " backend has no kernel '" + op + "'";
    return run;
  }
  BackendMemory memory(backend);
  std::vector<TensorView> inputs, outputs;
  for (const HostBuffer &in : c.inputs) {
    void *p = memory.allocate(in.bytes.size());
    if (!p) {
      run.error = "out of " + backend.name() + " memory";
      return run;
    }
    backend.copyToDevice(p, in.bytes.data(), in.bytes.size());
    inputs.push_back({in.dtype, in.shape, p});
  }
  for (const OutputSpec &spec : c.outputs) {
    HostBuffer host{spec.dtype, spec.shape, {}};
    host.bytes.assign(numElements(spec.shape) * dtypeSize(spec.dtype), fill);
    void *p = memory.allocate(host.bytes.size());
    if (!p) {
      run.error = "out of " + backend.name() + " memory";
      return run;
    }
    backend.copyToDevice(p, host.bytes.data(), host.bytes.size());
    outputs.push_back({spec.dtype, spec.shape, p});
    run.outputs.push_back(std::move(host));
  }
  KernelArgs args{op, c.attrs, inputs, outputs, c.block ? &*c.block : nullptr};
  run.error = (*kernel)(args);
  std::string asyncError = backend.synchronize();
  if (run.error.empty())
    run.error = asyncError;
  if (!run.error.empty())
    return run;
  for (size_t i = 0; i < outputs.size(); ++i)
    backend.copyToHost(run.outputs[i].bytes.data(), outputs[i].data,
                       run.outputs[i].bytes.size());
  return run;
}

//===----------------------------------------------------------------------===//
// Comparing results
//===----------------------------------------------------------------------===//

std::string formatIndex(int64_t index, const Shape &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = index % shape[d];
    index /= shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d)
    s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

bool matches(double got, double want, const Tolerance &tol) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want);
  if (tol.atol == 0 && tol.rtol == 0)
    return got == want;
  if (std::isinf(got) || std::isinf(want))
    return got == want;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

/// "" if `got` matches `want` within `tol`, else what differs: the count,
/// the largest difference and the first few elements.
std::string compare(const HostBuffer &got, const HostBuffer &want,
                    const Tolerance &tol) {
  int64_t n = numElements(want.shape), mismatches = 0, worstAt = -1;
  double worst = -1;
  std::ostringstream first;
  first << std::setprecision(9);
  for (int64_t i = 0; i < n; ++i) {
    double g = elementAt(got, i), w = elementAt(want, i);
    if (matches(g, w, tol))
      continue;
    double diff = std::isnan(g - w) ? INFINITY : std::fabs(g - w);
    if (diff > worst) {
      worst = diff;
      worstAt = i;
    }
    if (++mismatches <= 6)
      first << "\n    at " << formatIndex(i, want.shape) << ": got " << g
            << ", expected " << w;
  }
  if (mismatches == 0)
    return "";
  std::ostringstream report;
  report << std::setprecision(3) << mismatches << " of " << n
         << " elements differ";
  if (tol.atol == 0 && tol.rtol == 0)
    report << " (exact comparison)";
  else
    report << " beyond " << tol.atol << " + " << tol.rtol << " * |expected|";
  report << "; the largest difference is " << worst << " at "
         << formatIndex(worstAt, want.shape) << first.str();
  return report.str();
}

/// A fixed seed per case name (FNV-1a), whatever the order cases run in.
uint32_t seedOf(const std::string &name) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : name)
    h = (h ^ ch) * 16777619u;
  return h;
}

//===----------------------------------------------------------------------===//
// The cases
//===----------------------------------------------------------------------===//

class KernelConformance : public ::testing::TestWithParam<size_t> {};

TEST_P(KernelConformance, MatchesCpuBackend) {
  const CaseSpec &spec = conformanceCases()[GetParam()];
  Backends &b = backends();
  ASSERT_TRUE(b.device) << b.deviceError;
  std::mt19937 rng(seedOf(spec.name));
  Case c = spec.make(rng);

  KernelRun want = runOn(*b.reference, spec.op, c, 0x00);
  ASSERT_EQ(want.error, "") << "the reference cpu kernel rejects case "
                            << spec.name << ", so the case itself is wrong";
  KernelRun got = runOn(*b.device, spec.op, c, 0xff);
  ASSERT_EQ(got.error, "") << "the " << b.device->name() << " kernel '"
                           << spec.op << "' failed on case " << spec.name;

  ASSERT_EQ(got.outputs.size(), c.outputs.size());
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const OutputSpec &out = c.outputs[i];
    Tolerance tol =
        c.tolerance.value_or(defaultTolerance(out.dtype, c.reduction));
    std::string diff = compare(got.outputs[i], want.outputs[i], tol);
    EXPECT_TRUE(diff.empty())
        << spec.name << ": result " << i << " (" << dtypeName(out.dtype)
        << formatShape(out.shape) << ") of the device (" << b.device->name()
        << ") kernel differs from the cpu kernel's: " << diff;
  }
}

std::string caseNameOf(const ::testing::TestParamInfo<size_t> &info) {
  return conformanceCases()[info.param].name;
}

INSTANTIATE_TEST_SUITE_P(Cases, KernelConformance,
                         ::testing::Range<size_t>(0, conformanceCases().size()),
                         caseNameOf);

//===----------------------------------------------------------------------===//
// The harness itself
//===----------------------------------------------------------------------===//

HostBuffer filled(DType dtype, const std::vector<double> &values) {
  HostBuffer t = zeros(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    setElement(t, static_cast<int64_t>(i), values[i]);
  return t;
}

// The comparison accepts differences within the tolerance and NaN against
// NaN, and rejects larger differences, NaN against a number, and a result
// left as the device side's 0xff fill: in cpu mode, where both sides run
// the same kernels, these are what make a case able to fail.
TEST(ConformanceHarness, CompareFindsDifferences) {
  Tolerance tol = defaultTolerance(DType::F32, 1);
  HostBuffer want = filled(DType::F32, {1.0, -2.0, NAN, 0.0});
  EXPECT_EQ(
      compare(filled(DType::F32, {1.0 + 1e-5, -2.0, NAN, 5e-6}), want, tol),
      "");
  EXPECT_NE(compare(filled(DType::F32, {1.001, -2.0, NAN, 0.0}), want, tol),
            "");
  EXPECT_NE(compare(filled(DType::F32, {1.0, -2.0, 0.0, 0.0}), want, tol), "");
  EXPECT_NE(compare(filled(DType::F32, {1.0, -2.0, NAN, NAN}), want, tol), "");
  EXPECT_NE(
      compare(filled(DType::F32, {1.0 + 1e-6, -2.0, NAN, 0.0}), want, exact()),
      "");
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I32,
                      DType::I64, DType::Bool}) {
    HostBuffer zero = zeros(dtype, {3}), unwritten = zeros(dtype, {3});
    std::fill(unwritten.bytes.begin(), unwritten.bytes.end(), 0xff);
    EXPECT_NE(compare(unwritten, zero, defaultTolerance(dtype, 1)), "")
        << dtypeName(dtype);
  }
}

//===----------------------------------------------------------------------===//
// Coverage
//===----------------------------------------------------------------------===//

/// The ops that need cases: the CUDA backend's own list, or the list
/// written down here when the device is a CPU backend (which has more ops).
std::vector<std::string> opsUnderTest() {
  if (deviceBackendName() == "cuda" && backends().device)
    return backends().device->supportedOps();
  return kCudaBackendOps;
}

std::set<std::string> coveredOps() {
  std::set<std::string> ops;
  for (const CaseSpec &spec : conformanceCases())
    ops.insert(spec.op);
  return ops;
}

TEST(KernelCoverage, EveryDeviceOpHasACase) {
  std::set<std::string> covered = coveredOps();
  for (const std::string &op : opsUnderTest())
    EXPECT_TRUE(covered.count(op))
        << "op '" << op << "' of the " << deviceBackendName()
        << " backend has no conformance case: add one to the case table "
           "(test/unit/cuda/*Cases.cpp)";
}

TEST(KernelCoverage, EveryCaseIsOfADeviceOp) {
  std::vector<std::string> list = opsUnderTest();
  std::set<std::string> ops(list.begin(), list.end());
  for (const CaseSpec &spec : conformanceCases())
    EXPECT_TRUE(ops.count(spec.op))
        << "case " << spec.name << " runs '" << spec.op
        << "', which the CUDA backend does not register";
}

TEST(KernelCoverage, CudaOpListIsTheCudaBackends) {
  if (deviceBackendName() != "cuda")
    GTEST_SKIP() << "the device backend is '" << deviceBackendName()
                 << "': the CUDA backend's op list is checked on a GPU";
  ASSERT_TRUE(backends().device) << backends().deviceError;
  std::vector<std::string> registered = backends().device->supportedOps(),
                           listed = kCudaBackendOps;
  std::sort(registered.begin(), registered.end());
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(registered, listed)
      << "update kCudaBackendOps (test/unit/cuda/KernelConformanceCases.cpp) "
         "and add cases for new ops";
}

TEST(KernelCoverage, ReferenceHasEveryCudaOp) {
  for (const std::string &op : kCudaBackendOps)
    EXPECT_NE(backends().reference->findKernel(op), nullptr)
        << "the cpu backend has no kernel '" << op << "' to compare with";
}

TEST(KernelCoverage, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const CaseSpec &spec : conformanceCases())
    EXPECT_TRUE(names.insert(spec.name).second)
        << "two cases are named " << spec.name;
}

} // namespace
} // namespace loom::rt::conformance

int main(int argc, char **argv) {
  using namespace loom::rt;
  std::string device = conformance::deviceBackendName();
  if (device != "cuda" && device != "cpu") {
    std::cerr << "LOOM_TEST_DEVICE_BACKEND must be 'cuda' or 'cpu', got '"
              << device << "'\n";
    return 2;
  }
  if (device == "cuda") {
    std::string why;
    if (cudaDeviceCount(why) == 0) {
      std::cout << "skipped: " << why << "\n";
      return 77;
    }
    // f32 is compared at f32 precision: TF32 GEMMs and convolutions would
    // need tolerances of about 1e-3.
    if (std::getenv("LOOM_CUDA_TF32")) {
      std::cout << "note: LOOM_CUDA_TF32 is ignored by this test\n";
      unsetenv("LOOM_CUDA_TF32");
    }
  }
  testing::InitGoogleTest(&argc, argv);
  conformance::theBackends = new conformance::Backends;
  testing::AddGlobalTestEnvironment(conformance::theBackends); // gtest owns it
  std::cout << "device backend: " << device << " ("
            << conformance::conformanceCases().size()
            << " cases, compared with the cpu backend)\n";
  return RUN_ALL_TESTS();
}
