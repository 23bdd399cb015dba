//===- Tensor.cpp - Element types, shapes and tensor views ----------------===//

#include "runtime/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace loom::rt {

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or nan
    return sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0);
  if (absx >= 0x477ff000u) // rounds to beyond the largest half
    return sign | 0x7c00u;
  if (absx < 0x38800000u) { // subnormal half or zero
    // Add the value to 0.5 so that the FPU rounds the mantissa for us.
    float magic;
    uint32_t magicBits = 0x3f000000u; // 0.5
    std::memcpy(&magic, &magicBits, 4);
    float a;
    std::memcpy(&a, &absx, 4);
    float sum = a + magic;
    uint32_t sumBits;
    std::memcpy(&sumBits, &sum, 4);
    return sign | static_cast<uint16_t>(sumBits - magicBits);
  }
  uint32_t mantOdd = (absx >> 13) & 1u;
  absx += 0xc8000fffu + mantOdd; // rebias exponent, round to nearest even
  return sign | static_cast<uint16_t>(absx >> 13);
}

float bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) // nan stays nan
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

uint64_t elementBits(DType dtype, double value) {
  switch (dtype) {
  case DType::F32: {
    float f = static_cast<float>(value);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
  }
  case DType::F16:
    return floatToHalf(static_cast<float>(value));
  case DType::BF16:
    return floatToBf16(static_cast<float>(value));
  case DType::I32: // out of range saturates, NaN is 0 (no undefined cast)
    return static_cast<uint32_t>(static_cast<int32_t>(
        value != value ? 0 : std::clamp(value, -2147483648.0, 2147483647.0)));
  case DType::I64:
    return static_cast<uint64_t>(value != value                   ? 0
                                 : value >= 9223372036854775807.0 ? INT64_MAX
                                 : value <= -9223372036854775808.0
                                     ? INT64_MIN
                                     : static_cast<int64_t>(value));
  case DType::Bool:
    return value != 0 ? 1 : 0;
  }
  return 0;
}

} // namespace loom::rt
