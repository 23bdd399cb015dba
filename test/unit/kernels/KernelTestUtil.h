//===- KernelTestUtil.h - Helpers for the kernel tests ----------*- C++ -*-===//
//
// Kernel tests build host tensors from random values (rounded to the element
// type, so that references see exactly what the kernel sees), run one op on
// the CPU backend, and compare with a naive double-precision reference.
// Every test runs twice: on the oneDNN path and on the plain C++ path.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_KERNELS_KERNELTESTUTIL_H
#define LOOM_TEST_UNIT_KERNELS_KERNELTESTUTIL_H

#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace loom::rt::test {

/// Tolerances: f32 1e-5, f16 1e-3, bf16 1e-2 (and exact for integers).
double defaultTolerance(DType dtype);

/// A host tensor with the given values, rounded to the element type.
HostBuffer makeTensor(DType dtype, Shape shape,
                      const std::vector<double> &values);
/// Uniform values in [lo, hi] (integers: whole numbers in [lo, hi]; bool:
/// 0 or 1), from `rng`.
HostBuffer randomTensor(DType dtype, Shape shape, std::mt19937 &rng,
                        double lo = -1, double hi = 1);
/// A host tensor holding exactly `vals` (storage type T).
template <typename T>
HostBuffer rawTensor(DType dtype, Shape shape, const std::vector<T> &vals) {
  HostBuffer t{dtype, std::move(shape), {}};
  t.bytes.resize(vals.size() * sizeof(T));
  if (!vals.empty())
    std::memcpy(t.bytes.data(), vals.data(), t.bytes.size());
  return t;
}
/// The stored elements of a host tensor (storage type T).
template <typename T> std::vector<T> rawValues(const HostBuffer &t) {
  std::vector<T> vals(t.bytes.size() / sizeof(T));
  if (!vals.empty())
    std::memcpy(vals.data(), t.bytes.data(), t.bytes.size());
  return vals;
}
/// The values of a host tensor, exactly, as doubles.
std::vector<double> values(const HostBuffer &tensor);

/// Row-major index arithmetic for references.
std::vector<int64_t> unravel(int64_t index, const Shape &shape);
/// Offset of the element of `in` that broadcasts to output index `outIdx`.
int64_t broadcastOffset(const std::vector<int64_t> &outIdx, const Shape &in);
/// The numpy broadcast of two shapes.
Shape broadcastShapes(const Shape &a, const Shape &b);

/// The input index each position of a padded dimension reads, laid out as
/// numpy.pad does (reflect: ..., 2, 1, [0 .. size), size - 2, ...; edge:
/// the end repeated), or -1 for a constant border.
std::vector<int64_t> padIndices(const std::string &mode, int64_t size,
                                int64_t low, int64_t high);

/// Expects every element within tol * max(|ref|, floor) of the reference; an
/// expected NaN or infinity is matched only by the same (support/Oracle.h).
void expectClose(const HostBuffer &got, const std::vector<double> &ref,
                 double tol, double floor = 1.0);
/// Expects exact equality (integers, bools, data movement); NaN matches NaN.
void expectEqual(const HostBuffer &got, const std::vector<double> &ref);

/// Runs the backend's kernel for `op`; the result gets dtype and shape.
struct OpResult {
  std::string error;
  HostBuffer out;
};

/// The fixture: a CPU backend with oneDNN on (param true) or off.
class KernelTest : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override;
  OpResult run(const std::string &op, const Attrs &attrs,
               std::vector<HostBuffer> inputs, DType outType, Shape outShape);
  /// Runs and expects success.
  HostBuffer runOk(const std::string &op, const Attrs &attrs,
                   std::vector<HostBuffer> inputs, DType outType,
                   Shape outShape);

  std::unique_ptr<Backend> backend;
  std::mt19937 rng{1234};
};

std::string pathName(const ::testing::TestParamInfo<bool> &info);

/// Instantiates a KernelTest subclass on both paths.
#define LOOM_KERNEL_TEST_PATHS(Suite)                                          \
  INSTANTIATE_TEST_SUITE_P(Paths, Suite, ::testing::Bool(),                    \
                           ::loom::rt::test::pathName)

/// Float element types with their tolerances, for loops over dtypes.
inline const std::vector<DType> kFloatTypes = {DType::F32, DType::F16,
                                               DType::BF16};

} // namespace loom::rt::test

#endif // LOOM_TEST_UNIT_KERNELS_KERNELTESTUTIL_H
