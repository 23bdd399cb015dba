//===- OracleTest.cpp - The unit harnesses' comparison, itself tested -----===//
//
// Proves the oracle fails where a result is wrong and passes where it is
// right: a planted NaN, a finite value or the other infinity where an
// infinity is expected, a short array and a different shape each fail,
// naming the count and the worst element; equality, a NaN where a NaN is
// expected and values inside the tolerance pass.
//
//===----------------------------------------------------------------------===//

#include "test/unit/support/Oracle.h"

#include "gtest/gtest.h"

#include <limits>

using namespace loom::oracle;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// ONNX's runner's tolerance, as the node tests use it.
const Tolerance kOnnx = Tolerance::allclose(1e-3, 1e-7);

TEST(Oracle, EqualArraysMatch) {
  std::vector<double> v = {0, -1.5, 3e30, -0.0, kInf, -kInf};
  for (const Tolerance &tol :
       {Tolerance::exact(), kOnnx, Tolerance::relative(1e-5)}) {
    Comparison r = compareElements(v, v, tol);
    EXPECT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r.message(), "");
    EXPECT_EQ(r.mismatches(), 0);
    EXPECT_EQ(r.worstIndex(), -1);
  }
  // Signed zeros are equal.
  EXPECT_TRUE(compareElements({0.0}, {-0.0}, Tolerance::exact()).ok());
  EXPECT_TRUE(compareElements({}, {}, Tolerance::exact()).ok());
}

TEST(Oracle, ANaNIsExpectedAsANaN) {
  for (const Tolerance &tol : {Tolerance::exact(), kOnnx}) {
    EXPECT_TRUE(compareElements({1, kNaN}, {1, kNaN}, tol).ok());
    EXPECT_TRUE(compareElements({-kNaN}, {kNaN}, tol).ok());
    // A number where a NaN is expected is wrong, however close.
    Comparison r = compareElements({1, 0}, {1, kNaN}, tol);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.worstIndex(), 1);
  }
}

TEST(Oracle, APlantedNaNFails) {
  std::vector<double> expected = {1, 2, 3, 4};
  for (const Tolerance &tol :
       {Tolerance::exact(), kOnnx, Tolerance::relative(1e-2, 1e3)}) {
    Comparison r = compareElements({1, 2, kNaN, 4}, expected, tol);
    EXPECT_FALSE(r.ok()) << tol.describe();
    EXPECT_EQ(r.mismatches(), 1);
    EXPECT_EQ(r.worstIndex(), 2);
    EXPECT_NE(r.message().find("1 of 4 elements differ"), std::string::npos)
        << r.message();
    EXPECT_NE(r.message().find("element 2: got nan, expected 3"),
              std::string::npos)
        << r.message();
  }
  // An infinity where a finite value is expected fails as well.
  EXPECT_FALSE(compareElements({kInf}, {3e38}, kOnnx).ok());
  EXPECT_FALSE(compareElements({-kInf}, {-1}, Tolerance::relative(1)).ok());
}

// The flaw the oracle replaces: |a - inf| <= atol + rtol * |inf| holds for
// every finite a.
TEST(Oracle, AFiniteValueDoesNotMatchAnInfinity) {
  for (const Tolerance &tol :
       {Tolerance::exact(), kOnnx, Tolerance::relative(1e-2)}) {
    for (double got : {0.0, 1.0, -1e308, 1e308}) {
      Comparison r = compareElements({got}, {kInf}, tol);
      EXPECT_FALSE(r.ok()) << got << " " << tol.describe();
      EXPECT_NE(r.message().find("expected inf"), std::string::npos)
          << r.message();
      EXPECT_FALSE(compareElements({got}, {-kInf}, tol).ok()) << got;
    }
  }
}

TEST(Oracle, AnInfinityOfTheOtherSignFails) {
  for (const Tolerance &tol :
       {Tolerance::exact(), kOnnx, Tolerance::relative(1e-2)}) {
    Comparison r = compareElements({1, -kInf}, {1, kInf}, tol);
    EXPECT_FALSE(r.ok()) << tol.describe();
    EXPECT_EQ(r.worstIndex(), 1);
    EXPECT_NE(r.message().find("got -inf, expected inf"), std::string::npos)
        << r.message();
    EXPECT_FALSE(compareElements({kInf}, {-kInf}, tol).ok());
  }
}

TEST(Oracle, LengthsAndShapesMustAgree) {
  Comparison shortArray = compareElements({1, 2}, {1, 2, 3}, kOnnx);
  EXPECT_FALSE(shortArray.ok());
  EXPECT_EQ(shortArray.message(), "2 elements, expected 3");
  EXPECT_FALSE(compareElements({1, 2, 3}, {1, 2}, kOnnx).ok());
  EXPECT_FALSE(compareElements({}, {0}, Tolerance::exact()).ok());

  std::vector<double> six = {1, 2, 3, 4, 5, 6};
  Comparison transposed = compareElements(six, {3, 2}, six, {2, 3}, kOnnx);
  EXPECT_EQ(transposed.message(), "shape [3, 2], expected [2, 3]");
  Comparison missing = compareElements({1, 2, 3}, {2, 3}, six, {2, 3}, kOnnx);
  EXPECT_EQ(missing.message(), "3 elements, expected 6 (shape [2, 3])");
  EXPECT_TRUE(compareElements(six, {2, 3}, six, {2, 3}, kOnnx).ok());
}

TEST(Oracle, ValuesWithinTheToleranceMatch) {
  // atol + rtol * |e|: 1e-7 + 1e-3 * 100 = 0.1000001.
  EXPECT_TRUE(compareElements({100.1, 0}, {100, 1e-7}, kOnnx).ok());
  EXPECT_FALSE(compareElements({100.11}, {100}, kOnnx).ok());
  EXPECT_FALSE(compareElements({1e-6}, {0}, kOnnx).ok());
  // rtol * max(|e|, floor): 1e-2 * max(|e|, 1).
  Tolerance relative = Tolerance::relative(1e-2);
  EXPECT_TRUE(compareElements({0.0099, 201.9}, {0, 200}, relative).ok());
  EXPECT_FALSE(compareElements({0.011}, {0}, relative).ok());
  EXPECT_FALSE(compareElements({202.1}, {200}, relative).ok());
  // Exact means exact.
  EXPECT_FALSE(compareElements({1 + 1e-15}, {1}, Tolerance::exact()).ok());
}

TEST(Oracle, TheMessageCountsAndNamesTheWorst) {
  std::vector<double> expected = {1, 2, 3, 4, 5, 6};
  std::vector<double> got = {1, 2.5, 3, 14, 5, 6.5};
  Comparison r = compareElements(got, {2, 3}, expected, {2, 3}, kOnnx);
  EXPECT_EQ(r.mismatches(), 3);
  EXPECT_EQ(r.worstIndex(), 3);
  EXPECT_EQ(r.message(), "3 of 6 elements differ (1e-07 + 0.001 * |expected|);"
                         " the worst is element 3 [1, 0]: got 14, expected 4;"
                         " the first element 1 [0, 1]: got 2.5, expected 2");
  // The first is not repeated when it is the worst.
  EXPECT_EQ(compareElements({9, 2}, {1, 2}, Tolerance::exact()).message(),
            "1 of 2 elements differ (exact); the worst is element 0: got 9, "
            "expected 1");
}

} // namespace
