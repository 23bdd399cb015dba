//===- ConversionTest.cpp - f16 and bf16 conversions, exhaustively --------===//

#include "runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace loom::rt {
namespace {

bool isHalfNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
bool isBf16Nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu); }

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Proves every one of the 65536 half bit patterns survives half -> f32 ->
// half exactly (zeros, subnormals, infinities keep their bits; NaN stays NaN).
TEST(ConversionTest, HalfRoundTripsAllPatterns) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = halfToFloat(h);
    if (isHalfNan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(isHalfNan(floatToHalf(f))) << std::hex << bits;
      continue;
    }
    EXPECT_EQ(floatToHalf(f), h) << std::hex << bits;
  }
}

// Proves every bf16 bit pattern survives bf16 -> f32 -> bf16, NaN staying NaN.
TEST(ConversionTest, Bf16RoundTripsAllPatterns) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t b = static_cast<uint16_t>(bits);
    float f = bf16ToFloat(b);
    if (isBf16Nan(b)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(isBf16Nan(floatToBf16(f))) << std::hex << bits;
      continue;
    }
    EXPECT_EQ(floatToBf16(f), b) << std::hex << bits;
  }
}

// Proves half -> f32 is the exact value (sign, exponent, subnormal scaling)
// for every finite half, by rebuilding the value in double.
TEST(ConversionTest, HalfToFloatIsExact) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint32_t exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
    if (exp == 0x1f)
      continue;
    double magnitude = exp == 0 ? std::ldexp(mant, -24)
                                : std::ldexp(1024 + mant, int(exp) - 25);
    double expected = (bits & 0x8000) ? -magnitude : magnitude;
    EXPECT_EQ(halfToFloat(static_cast<uint16_t>(bits)), expected)
        << std::hex << bits;
  }
}

// Proves f32 -> half rounds to nearest, ties to even: the f32 values just
// below, at and just above the midpoint between every pair of neighbouring
// positive finite halves (subnormals included) round as they should.
TEST(ConversionTest, FloatToHalfRoundsToNearestEven) {
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    double lo = halfToFloat(h), hi = halfToFloat(h + 1);
    float mid = static_cast<float>((lo + hi) / 2); // exact in f32
    uint16_t even = (h & 1) ? h + 1 : h;
    EXPECT_EQ(floatToHalf(mid), even) << std::hex << h;
    EXPECT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    EXPECT_EQ(floatToHalf(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
    EXPECT_EQ(floatToHalf(-mid), even | 0x8000) << std::hex << h;
  }
  // Past the largest half (65504) by half an ulp or more: infinity.
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(1e-10f), 0); // underflows to +0
}

// Proves f32 -> bf16 rounds to nearest even at midpoints of neighbouring
// bf16 values, and overflows to infinity only past the largest bf16.
TEST(ConversionTest, FloatToBf16RoundsToNearestEven) {
  for (uint32_t b = 0; b < 0x7f7f; ++b) {
    uint32_t midBits = (b << 16) | 0x8000u; // halfway to b + 1
    uint16_t even = (b & 1) ? b + 1 : b;
    EXPECT_EQ(floatToBf16(fromBits(midBits)), even) << std::hex << b;
    EXPECT_EQ(floatToBf16(fromBits(midBits - 1)), b) << std::hex << b;
    EXPECT_EQ(floatToBf16(fromBits(midBits + 1)), b + 1) << std::hex << b;
  }
  EXPECT_EQ(floatToBf16(fromBits(0x7f7fffffu)), 0x7f80); // max f32 -> inf
  EXPECT_EQ(floatToBf16(fromBits(0x7f7f7fffu)), 0x7f7f);
}

} // namespace
} // namespace loom::rt
