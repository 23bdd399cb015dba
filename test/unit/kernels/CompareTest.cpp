//===- CompareTest.cpp - Comparisons, logic, max, min and trilu kernels ---===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace loom::rt::test {
namespace {

class CompareTest : public KernelTest {
protected:
  /// Runs a binary op on operands drawn from a few levels (so that ties
  /// are common) and checks it against `ref` on the broadcast operands.
  void checkBinary(const std::string &op, DType dtype, DType outType,
                   const Shape &ls, const Shape &rs,
                   const std::function<double(double, double)> &ref) {
    SCOPED_TRACE(op + " " + dtypeName(dtype) + " " + formatShape(ls) + " " +
                 formatShape(rs));
    auto draw = [&](const Shape &shape) {
      std::uniform_int_distribution<int> level(-2, 2);
      std::vector<double> v(numElements(shape));
      for (double &x : v)
        x = dtype == DType::Bool ? (level(rng) > 0) : level(rng) * 0.5;
      if (!isFloat(dtype) && dtype != DType::Bool)
        for (double &x : v)
          x = std::round(x * 2);
      return makeTensor(dtype, shape, v);
    };
    HostBuffer lhs = draw(ls), rhs = draw(rs);
    Shape os = broadcastShapes(ls, rs);
    std::vector<double> a = values(lhs), b = values(rhs), expected;
    for (int64_t i = 0; i < numElements(os); ++i) {
      std::vector<int64_t> idx = unravel(i, os);
      expected.push_back(
          ref(a[broadcastOffset(idx, ls)], b[broadcastOffset(idx, rs)]));
    }
    expectEqual(runOk(op, {}, {lhs, rhs}, outType, os), expected);
  }
};

const std::vector<std::pair<Shape, Shape>> kShapes = {
    {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}},
    {{2, 1, 4}, {3, 1}},    {{}, {3, 2}},     {{64, 300}, {300}}};

const std::vector<DType> kNumbers = {DType::F32, DType::F16, DType::BF16,
                                     DType::I32, DType::I64};

// Proves the comparisons on every numeric type (and equal on bool) match a
// reference under numpy broadcasting, ties included.
TEST_P(CompareTest, ComparisonsBroadcast) {
  std::map<std::string, std::function<double(double, double)>> ops = {
      {"equal", [](double a, double b) { return a == b; }},
      {"less", [](double a, double b) { return a < b; }},
      {"less_equal", [](double a, double b) { return a <= b; }},
      {"greater", [](double a, double b) { return a > b; }},
      {"greater_equal", [](double a, double b) { return a >= b; }}};
  for (DType dtype : kNumbers)
    for (const auto &[ls, rs] : kShapes)
      for (const auto &[op, ref] : ops)
        checkBinary(op, dtype, DType::Bool, ls, rs, ref);
  for (const auto &[ls, rs] : kShapes)
    checkBinary("equal", DType::Bool, DType::Bool, ls, rs, ops["equal"]);
}

// Proves and, or, xor and not on bool tensors.
TEST_P(CompareTest, LogicOps) {
  std::map<std::string, std::function<double(double, double)>> ops = {
      {"and", [](double a, double b) { return a != 0 && b != 0; }},
      {"or", [](double a, double b) { return a != 0 || b != 0; }},
      {"xor", [](double a, double b) { return (a != 0) != (b != 0); }}};
  for (const auto &[ls, rs] : kShapes)
    for (const auto &[op, ref] : ops)
      checkBinary(op, DType::Bool, DType::Bool, ls, rs, ref);
  HostBuffer in = makeTensor(DType::Bool, {2, 2}, {0, 1, 1, 0});
  expectEqual(runOk("not", {}, {in}, DType::Bool, {2, 2}), {1, 0, 0, 1});
}

// Proves max and min on every numeric type under broadcasting.
TEST_P(CompareTest, MaxMinBroadcast) {
  for (DType dtype : kNumbers)
    for (const auto &[ls, rs] : kShapes) {
      checkBinary("max", dtype, dtype, ls, rs,
                  [](double a, double b) { return std::max(a, b); });
      checkBinary("min", dtype, dtype, ls, rs,
                  [](double a, double b) { return std::min(a, b); });
    }
}

// Proves NaN propagates from either operand of max and min (numpy), and
// that every comparison with NaN is false.
TEST_P(CompareTest, NanPropagates) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  HostBuffer a = makeTensor(DType::F32, {3}, {nan, 1, 2});
  HostBuffer b = makeTensor(DType::F32, {3}, {1, nan, 3});
  expectEqual(runOk("max", {}, {a, b}, DType::F32, {3}), {nan, nan, 3});
  expectEqual(runOk("min", {}, {a, b}, DType::F32, {3}), {nan, nan, 2});
  expectEqual(runOk("equal", {}, {a, b}, DType::Bool, {3}), {0, 0, 0});
  expectEqual(runOk("less", {}, {a, b}, DType::Bool, {3}), {0, 0, 1});
}

// Proves trilu keeps the triangle on and above (upper) or below (lower)
// the k-th diagonal of every matrix, for positive, negative and
// out-of-range k.
TEST_P(CompareTest, TriluKeepsTheTriangle) {
  for (bool upper : {true, false})
    for (int64_t k : {0, 1, -2, 9, -9})
      for (DType dtype : {DType::F32, DType::I64, DType::Bool}) {
        SCOPED_TRACE(std::to_string(upper) + " " + std::to_string(k) + " " +
                     dtypeName(dtype));
        Shape shape{2, 3, 4};
        std::vector<double> in(24), expected(24);
        for (int64_t i = 0; i < 24; ++i) {
          in[i] = dtype == DType::Bool ? 1 : i + 1;
          int64_t col = i % 4, row = (i / 4) % 3;
          bool keep = upper ? col - row >= k : col - row <= k;
          expected[i] = keep ? in[i] : 0;
        }
        Attrs attrs;
        attrs.set("upper", upper);
        attrs.set("k", k);
        expectEqual(
            runOk("trilu", attrs, {makeTensor(dtype, shape, in)}, dtype, shape),
            expected);
      }
}

// Proves a malformed call is an error, not a wrong read.
TEST_P(CompareTest, WrongTypesAreErrors) {
  HostBuffer f = makeTensor(DType::F32, {2}, {1, 2});
  HostBuffer i = makeTensor(DType::I32, {2}, {1, 2});
  HostBuffer p = makeTensor(DType::Bool, {2}, {1, 0});
  EXPECT_FALSE(run("less", {}, {f, i}, DType::Bool, {2}).error.empty());
  EXPECT_FALSE(run("less", {}, {p, p}, DType::Bool, {2}).error.empty());
  EXPECT_FALSE(run("and", {}, {f, f}, DType::Bool, {2}).error.empty());
  EXPECT_FALSE(run("equal", {}, {f, f}, DType::F32, {2}).error.empty());
  EXPECT_FALSE(run("max", {}, {f, i}, DType::F32, {2}).error.empty());
}

LOOM_KERNEL_TEST_PATHS(CompareTest);

} // namespace
} // namespace loom::rt::test
