//===- BackendTest.cpp - The CPU backend's registry, threads and cache ----===//

#include "runtime/cpu/CpuContext.h"
#include "test/unit/kernels/KernelTestUtil.h"
#include "test/unit/support/Oracle.h"

#include <omp.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace loom::rt::test {
namespace {

/// The op names (without `loom.`) that LoomOps.td and LoomTrainOps.td define.
std::set<std::string> dialectOps() {
  std::stringstream text;
  for (const char *name : {"LoomOps.td", "LoomTrainOps.td"}) {
    std::ifstream file(std::string(LOOM_SOURCE_DIR) + "/dialects/" + name);
    text << file.rdbuf() << "\n";
  }
  std::string td = text.str();
  // Matches `def Loom_<Name> : Loom_<Class><"mnemonic"`, across newlines.
  std::set<std::string> ops;
  for (size_t pos = td.find("def Loom_"); pos != std::string::npos;
       pos = td.find("def Loom_", pos + 1)) {
    size_t colon = td.find(':', pos);
    size_t base = td.find_first_not_of(" \n", colon + 1);
    if (colon == std::string::npos || td.compare(base, 5, "Loom_") != 0)
      continue;
    size_t angle = td.find('<', base);
    size_t quote = td.find_first_not_of(" \n", angle + 1);
    if (angle == std::string::npos || td[quote] != '"')
      continue;
    size_t end = td.find('"', quote + 1);
    ops.insert(td.substr(quote + 1, end - quote - 1));
  }
  return ops;
}

// Proves the backend has a kernel for every compute op the dialect defines
// (constants are materialised by the executor), and for nothing else.
TEST(CpuBackendTest, SupportsEveryDialectOp) {
  std::set<std::string> expected = dialectOps();
  ASSERT_GT(expected.size(), 30u) << "could not parse LoomOps.td";
  expected.erase("constant");
  auto backend = createCpuBackend();
  std::vector<std::string> supported = backend->supportedOps();
  EXPECT_EQ(std::set<std::string>(supported.begin(), supported.end()),
            expected);
  for (const std::string &op : expected)
    EXPECT_NE(backend->findKernel(op), nullptr) << op;
  EXPECT_EQ(backend->name(), "cpu");
}

// Proves an unknown op has no kernel rather than a crashing one.
TEST(CpuBackendTest, UnknownOpHasNoKernel) {
  auto backend = createCpuBackend();
  EXPECT_EQ(backend->findKernel("loom.add"), nullptr);
  EXPECT_EQ(backend->findKernel("fft"), nullptr);
}

// Proves a kernel called with the wrong number of operands reports it
// instead of reading past its inputs.
TEST(CpuBackendTest, WrongArityIsAnError) {
  auto backend = createCpuBackend();
  std::mt19937 rng(1);
  HostBuffer a = randomTensor(DType::F32, {3}, rng),
             out = randomTensor(DType::F32, {3}, rng);
  Attrs attrs;
  KernelArgs args{"add", attrs, {a.view()}, {out.view()}};
  std::string error = (*backend->findKernel("add"))(args);
  EXPECT_NE(error.find("expects 2 inputs"), std::string::npos) << error;
  KernelArgs convArgs{"conv2d", attrs, {a.view()}, {out.view()}};
  error = (*backend->findKernel("conv2d"))(convArgs);
  EXPECT_NE(error.find("expects 2 to 3 inputs"), std::string::npos) << error;
}

/// The error of running `op` on `inputs` with a result of `outShape`.
std::string runError(Backend &backend, const std::string &op,
                     const Attrs &attrs, std::vector<HostBuffer> inputs,
                     Shape outShape) {
  int64_t count = numElements(outShape);
  HostBuffer out =
      makeTensor(DType::F32, std::move(outShape), std::vector<double>(count));
  KernelArgs args{op, attrs, {}, {out.view()}};
  for (HostBuffer &in : inputs)
    args.inputs.push_back(in.view());
  return (*backend.findKernel(op))(args);
}

// Proves kernels reject shapes that would make them index out of bounds
// (a malformed plan gives an error, not a crash).
TEST(CpuBackendTest, MalformedShapesAreErrors) {
  auto backend = createCpuBackend();
  std::mt19937 rng(6);
  auto t = [&](Shape s) { return randomTensor(DType::F32, s, rng); };
  Attrs none;
  EXPECT_NE(runError(*backend, "add", none, {t({3}), t({4})}, {4}), "");
  EXPECT_NE(runError(*backend, "exp", none, {t({3})}, {4}), "");
  EXPECT_NE(runError(*backend, "broadcast", none, {t({3})}, {2, 4}), "");
  EXPECT_NE(runError(*backend, "matmul", none, {t({2, 3}), t({4, 5})}, {2, 5}),
            "");
  EXPECT_NE(runError(*backend, "matmul", none, {t({3, 2, 3}), t({2, 3, 5})},
                     {3, 2, 5}),
            "");
  Attrs perm;
  perm.set("permutation", std::vector<int64_t>{1, 0});
  EXPECT_NE(runError(*backend, "transpose", perm, {t({2, 3})}, {2, 3}), "");
  Attrs slice;
  slice.set("starts", std::vector<int64_t>{1});
  slice.set("sizes", std::vector<int64_t>{3});
  slice.set("strides", std::vector<int64_t>{2});
  EXPECT_NE(runError(*backend, "slice", slice, {t({5})}, {3}), "");
  Attrs axes;
  axes.set("axes", std::vector<int64_t>{0});
  EXPECT_NE(runError(*backend, "reduce_sum", axes, {t({3, 4})}, {3}), "");
  Attrs axis;
  axis.set("axis", int64_t(2));
  EXPECT_NE(runError(*backend, "softmax", axis, {t({3, 4})}, {3, 4}), "");
}

HostBuffer runMatmul(Backend &backend, HostBuffer &a, HostBuffer &b,
                     Shape outShape) {
  HostBuffer out = makeTensor(DType::F32, outShape,
                              std::vector<double>(numElements(outShape)));
  Attrs attrs;
  KernelArgs args{"matmul", attrs, {a.view(), b.view()}, {out.view()}};
  EXPECT_EQ((*backend.findKernel("matmul"))(args), "");
  return out;
}

// Proves oneDNN primitives are cached by shape: a repeated shape creates no
// new primitive, a new shape creates exactly one.
TEST(CpuBackendTest, PrimitiveCacheReusesPrimitives) {
  auto backend = createCpuBackend();
  cpu::CpuContext *ctx = cpu::getCpuContext(*backend);
  ASSERT_NE(ctx, nullptr);
  std::mt19937 rng(2);
  HostBuffer a = randomTensor(DType::F32, {8, 16}, rng),
             b = randomTensor(DType::F32, {16, 4}, rng),
             c = randomTensor(DType::F32, {16, 5}, rng);
  size_t before = ctx->primitives.creations();
  runMatmul(*backend, a, b, {8, 4});
  EXPECT_EQ(ctx->primitives.creations(), before + 1);
  runMatmul(*backend, a, b, {8, 4});
  runMatmul(*backend, a, b, {8, 4});
  EXPECT_EQ(ctx->primitives.creations(), before + 1);
  runMatmul(*backend, a, c, {8, 5});
  EXPECT_EQ(ctx->primitives.creations(), before + 2);
  EXPECT_EQ(ctx->primitives.size(), 2u);
}

// Proves setNumThreads applies on whichever thread calls the kernel (OpenMP
// thread counts are per thread) and does not change results.
TEST(CpuBackendTest, ThreadCountAppliesOnTheCallingThread) {
  auto backend = createCpuBackend();
  std::mt19937 rng(3);
  HostBuffer a = randomTensor(DType::F32, {33, 70}, rng),
             b = randomTensor(DType::F32, {70, 20}, rng);
  backend->setNumThreads(1);
  std::vector<double> one = values(runMatmul(*backend, a, b, {33, 20}));
  backend->setNumThreads(2);
  int observed = 0;
  std::vector<double> two;
  std::thread worker([&] {
    omp_set_num_threads(1);
    two = values(runMatmul(*backend, a, b, {33, 20}));
    observed = omp_get_max_threads();
  });
  worker.join();
  EXPECT_EQ(observed, 2);
  oracle::Comparison c =
      oracle::compareElements(two, one, oracle::Tolerance::relative(1e-4));
  EXPECT_TRUE(c.ok()) << c.message();
  backend->setNumThreads(0); // back to the default
}

// Proves kernels may run concurrently from several threads (shared
// primitive cache, per-thread scratchpads) and still compute correctly.
TEST(CpuBackendTest, ConcurrentKernelsAreCorrect) {
  auto backend = createCpuBackend();
  backend->setNumThreads(1);
  std::mt19937 rng(4);
  HostBuffer a = randomTensor(DType::F32, {16, 32}, rng),
             b = randomTensor(DType::F32, {32, 8}, rng);
  std::vector<double> expected = values(runMatmul(*backend, a, b, {16, 8}));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<double> got = values(runMatmul(*backend, a, b, {16, 8}));
        mismatches[t] += got != expected;
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (int m : mismatches)
    EXPECT_EQ(m, 0);
}

// Proves the oneDNN switch is honoured: with oneDNN off no primitive is
// created.
TEST(CpuBackendTest, PlainPathCreatesNoPrimitives) {
  auto backend = createCpuBackend();
  cpu::CpuContext *ctx = cpu::getCpuContext(*backend);
  ctx->useOneDnn = false;
  std::mt19937 rng(5);
  HostBuffer a = randomTensor(DType::F32, {4, 6}, rng),
             b = randomTensor(DType::F32, {6, 3}, rng);
  runMatmul(*backend, a, b, {4, 3});
  EXPECT_EQ(ctx->primitives.creations(), 0u);
}

} // namespace
} // namespace loom::rt::test
