//===- CastSelectTest.cpp - cast between all element types; select --------===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

class CastSelectTest : public KernelTest {};

constexpr long double kNan = std::numeric_limits<long double>::quiet_NaN(),
                      kInf = std::numeric_limits<long double>::infinity();

/// Source values per element type (rounded to the type when stored).
std::vector<long double> sourceValues(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    return {0.0L,  -0.0L, 1.5L,  -1.5L, 2.7L,  -2.7L,  100.25L, 2049,
            65519, 65520, 3e9L,  -3e9L, 1e19L, -1e19L, 1e30L,   kNan,
            kInf,  -kInf, 1e-8L, 6e-8L, 3e38L, 0.3L,   -0.9L};
  case DType::I32:
    return {0, 1, -1, 7, -7, 2049, 70000, 16777217, 2147483647, -2147483648.0L};
  case DType::I64:
    return {0,
            -5,
            2049,
            16777217,
            16777216.0L + 65536 + 1, // rounds wrongly if rounded twice
            1099511627777.0L,        // 2^40 + 1
            9007199254740993.0L,     // 2^53 + 1
            9223372036854775807.0L,
            -9223372036854775808.0L,
            2147483648.0L,
            -2147483649.0L};
  case DType::Bool:
    return {0, 1};
  }
  return {};
}

HostBuffer sourceTensor(DType dtype) {
  std::vector<long double> vals = sourceValues(dtype);
  Shape shape{static_cast<int64_t>(vals.size())};
  if (dtype == DType::I64) {
    std::vector<int64_t> ints;
    for (long double v : vals)
      ints.push_back(static_cast<int64_t>(v));
    return rawTensor(dtype, shape, ints);
  }
  std::vector<double> doubles(vals.begin(), vals.end());
  return makeTensor(dtype, shape, doubles);
}

/// The exact values a tensor holds (i64 exactly, via long double).
std::vector<long double> exactValues(const HostBuffer &t) {
  std::vector<long double> out;
  if (t.dtype == DType::I64) {
    for (int64_t v : rawValues<int64_t>(t))
      out.push_back(v);
    return out;
  }
  for (double v : values(t))
    out.push_back(v);
  return out;
}

/// The 16-bit float nearest to v (ties to even) by searching neighbours of
/// a candidate: independent of the kernel's rounding path.
uint16_t nearest16(long double v, bool isHalf) {
  auto toFloat = [&](uint16_t bits) -> long double {
    return isHalf ? halfToFloat(bits) : bf16ToFloat(bits);
  };
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  uint16_t inf = isHalf ? 0x7c00 : 0x7f80, maxFinite = inf - 1;
  long double a = std::fabs(v);
  long double top = toFloat(maxFinite),
              threshold = top + (top - toFloat(maxFinite - 1)) / 2;
  if (a >= threshold)
    return sign | inf;
  uint16_t c = isHalf ? floatToHalf(static_cast<float>(a))
                      : floatToBf16(static_cast<float>(a));
  if (c > maxFinite)
    c = maxFinite;
  uint16_t best = c;
  for (int d = -2; d <= 2; ++d) {
    int p = c + d;
    if (p < 0 || p > maxFinite)
      continue;
    long double err = std::fabs(toFloat(p) - a),
                bestErr = std::fabs(toFloat(best) - a);
    if (err < bestErr || (err == bestErr && (p & 1) == 0 && p != best))
      best = static_cast<uint16_t>(p);
  }
  return sign | best;
}

template <typename T> T saturatingTrunc(long double v) {
  if (std::isnan(v))
    return 0;
  long double t = std::trunc(v);
  if (t >= static_cast<long double>(std::numeric_limits<T>::max()))
    return std::numeric_limits<T>::max();
  if (t <= static_cast<long double>(std::numeric_limits<T>::min()))
    return std::numeric_limits<T>::min();
  return static_cast<T>(t);
}

/// Checks element i of a cast result against the exact source value.
void checkCastElement(long double v, DType from, const HostBuffer &out,
                      size_t i) {
  SCOPED_TRACE(std::string(dtypeName(from)) + " -> " + dtypeName(out.dtype) +
               " of " + std::to_string(static_cast<double>(v)));
  bool fromFloat = isFloat(from);
  switch (out.dtype) {
  case DType::F32: {
    float got = rawValues<float>(out)[i];
    if (std::isnan(v))
      EXPECT_TRUE(std::isnan(got));
    else
      EXPECT_EQ(got, static_cast<float>(v));
    break;
  }
  case DType::F16:
  case DType::BF16: {
    bool isHalf = out.dtype == DType::F16;
    uint16_t got = rawValues<uint16_t>(out)[i];
    if (std::isnan(v))
      EXPECT_TRUE(std::isnan(isHalf ? halfToFloat(got) : bf16ToFloat(got)));
    else
      EXPECT_EQ(got, nearest16(v, isHalf)) << std::hex << got;
    break;
  }
  case DType::I32:
    EXPECT_EQ(rawValues<int32_t>(out)[i],
              fromFloat ? saturatingTrunc<int32_t>(v)
                        : static_cast<int32_t>(
                              static_cast<uint32_t>(static_cast<int64_t>(v))));
    break;
  case DType::I64:
    EXPECT_EQ(rawValues<int64_t>(out)[i], fromFloat
                                              ? saturatingTrunc<int64_t>(v)
                                              : static_cast<int64_t>(v));
    break;
  case DType::Bool:
    EXPECT_EQ(rawValues<uint8_t>(out)[i], v != 0 ? 1 : 0); // NaN != 0
    break;
  }
}

// Proves cast between every pair of the six element types: floats truncate
// toward zero into integers (saturating, NaN to 0), integers wrap, every
// float target is rounded once to nearest even (even from i64 values that
// double rounding through f32 would get wrong), non-zero and NaN are true.
TEST_P(CastSelectTest, CastAllPairs) {
  std::vector<DType> all = {DType::F32, DType::F16, DType::BF16,
                            DType::I32, DType::I64, DType::Bool};
  for (DType from : all) {
    HostBuffer src = sourceTensor(from);
    std::vector<long double> exact = exactValues(src);
    for (DType to : all) {
      HostBuffer out = runOk("cast", {}, {src}, to, src.shape);
      for (size_t i = 0; i < exact.size(); ++i)
        checkCastElement(exact[i], from, out, i);
    }
  }
}

// Proves cast handles tensors large enough for the parallel loop.
TEST_P(CastSelectTest, CastLargeTensor) {
  HostBuffer src = randomTensor(DType::F32, {70000}, rng, -1000, 1000);
  HostBuffer out = runOk("cast", {}, {src}, DType::I32, src.shape);
  std::vector<double> expected;
  for (double v : values(src))
    expected.push_back(std::trunc(v));
  expectEqual(out, expected);
}

// Proves select picks per element under three-way numpy broadcasting, for
// every element width (bool, f16, f32, i64).
TEST_P(CastSelectTest, SelectBroadcasts) {
  struct Shapes {
    Shape cond, onTrue, onFalse;
  };
  std::vector<Shapes> cases = {{{3, 4}, {3, 4}, {3, 4}},
                               {{3, 1}, {1, 4}, {}},
                               {{4}, {2, 3, 4}, {3, 1}},
                               {{}, {2, 2}, {2, 2}},
                               {{200, 1}, {1, 300}, {300}}};
  for (DType dtype : {DType::Bool, DType::F16, DType::F32, DType::I64})
    for (const Shapes &s : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(s.cond));
      HostBuffer c = randomTensor(DType::Bool, s.cond, rng);
      HostBuffer t = randomTensor(dtype, s.onTrue, rng, -9, 9);
      HostBuffer f = randomTensor(dtype, s.onFalse, rng, -9, 9);
      Shape os = broadcastShapes(broadcastShapes(s.cond, s.onTrue), s.onFalse);
      std::vector<double> cv = values(c), tv = values(t), fv = values(f);
      std::vector<double> expected;
      for (int64_t i = 0; i < numElements(os); ++i) {
        std::vector<int64_t> idx = unravel(i, os);
        expected.push_back(cv[broadcastOffset(idx, s.cond)]
                               ? tv[broadcastOffset(idx, s.onTrue)]
                               : fv[broadcastOffset(idx, s.onFalse)]);
      }
      expectEqual(runOk("select", {}, {c, t, f}, dtype, os), expected);
    }
}

LOOM_KERNEL_TEST_PATHS(CastSelectTest);

} // namespace
} // namespace loom::rt::test
