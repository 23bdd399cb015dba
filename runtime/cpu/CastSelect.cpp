//===- CastSelect.cpp - Element type conversion and elementwise select ----===//
//
// cast converts between all six element types: floats truncate toward zero
// into integers, saturating at the type's range (NaN gives 0); integers
// wrap into narrower integers; anything non-zero (NaN included) is true.
// Every conversion rounds once, to nearest even.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include <cmath>
#include <limits>

namespace loom::rt::cpu {
namespace {

/// A float with the integer's value rounded to 24 bits toward odd: rounding
/// it again to a narrower float (f16, bf16) equals rounding the integer
/// directly, since 24 bits exceed both formats' precision by at least 2.
float intToFloatRoundOdd(int64_t v) {
  uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : v;
  float f;
  if (magnitude < (uint64_t(1) << 24)) {
    f = static_cast<float>(magnitude);
  } else {
    int shift = 64 - __builtin_clzll(magnitude) - 24;
    uint64_t kept = magnitude >> shift;
    if (magnitude & ((uint64_t(1) << shift) - 1))
      kept |= 1; // sticky bit
    f = std::ldexp(static_cast<float>(kept), shift);
  }
  return v < 0 ? -f : f;
}

/// Truncation toward zero, saturating at T's range; NaN gives 0.
template <typename T> T truncSaturate(float f) {
  if (std::isnan(f))
    return 0;
  const float limit = std::ldexp(1.0f, std::numeric_limits<T>::digits);
  if (f >= limit)
    return std::numeric_limits<T>::max();
  if (f < -limit)
    return std::numeric_limits<T>::min();
  return static_cast<T>(f);
}

// Element types: how to read one (as float or int64_t) and how to make one
// from either.
struct F32Type {
  using Storage = float;
  static float load(float v) { return v; }
  static float from(float f) { return f; }
  static float from(int64_t v) { return static_cast<float>(v); }
};
struct F16Type {
  using Storage = uint16_t;
  static float load(uint16_t v) { return halfToFloat(v); }
  static uint16_t from(float f) { return floatToHalf(f); }
  static uint16_t from(int64_t v) { return floatToHalf(intToFloatRoundOdd(v)); }
};
struct BF16Type {
  using Storage = uint16_t;
  static float load(uint16_t v) { return bf16ToFloat(v); }
  static uint16_t from(float f) { return floatToBf16(f); }
  static uint16_t from(int64_t v) { return floatToBf16(intToFloatRoundOdd(v)); }
};
struct I32Type {
  using Storage = int32_t;
  static int64_t load(int32_t v) { return v; }
  static int32_t from(float f) { return truncSaturate<int32_t>(f); }
  static int32_t from(int64_t v) {
    return static_cast<int32_t>(static_cast<uint32_t>(v));
  }
};
struct I64Type {
  using Storage = int64_t;
  static int64_t load(int64_t v) { return v; }
  static int64_t from(float f) { return truncSaturate<int64_t>(f); }
  static int64_t from(int64_t v) { return v; }
};
struct BoolType {
  using Storage = uint8_t;
  static int64_t load(uint8_t v) { return v != 0; }
  static uint8_t from(float f) { return f != 0; }
  static uint8_t from(int64_t v) { return v != 0; }
};

template <typename Src, typename Dst>
void castLoop(const TensorView &in, const TensorView &out) {
  const auto *src = in.as<typename Src::Storage>();
  auto *dst = out.as<typename Dst::Storage>();
  int64_t n = in.numElements();
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = Dst::from(Src::load(src[i]));
}

template <typename F> void dispatchElementType(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32:
    return f(F32Type{});
  case DType::F16:
    return f(F16Type{});
  case DType::BF16:
    return f(BF16Type{});
  case DType::I32:
    return f(I32Type{});
  case DType::I64:
    return f(I64Type{});
  case DType::Bool:
    return f(BoolType{});
  }
}

std::string castKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.numElements() != out.numElements())
    return "cast changes the element count from " + formatShape(in.shape) +
           " to " + formatShape(out.shape);
  dispatchElementType(in.dtype, [&](auto src) {
    dispatchElementType(out.dtype, [&](auto dst) {
      castLoop<decltype(src), decltype(dst)>(in, out);
    });
  });
  return {};
}

std::string selectKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &cond = args.inputs[0], &onTrue = args.inputs[1],
                   &onFalse = args.inputs[2], &out = args.outputs[0];
  if (cond.dtype != DType::Bool)
    return "select condition must be bool, got " +
           std::string(dtypeName(cond.dtype));
  if (onTrue.dtype != out.dtype || onFalse.dtype != out.dtype)
    return "select values and result differ in element type";
  for (const TensorView *t : {&cond, &onTrue, &onFalse})
    if (!broadcastsTo(t->shape, out.shape))
      return "select operand " + formatShape(t->shape) +
             " does not broadcast to " + formatShape(out.shape);
  StridedLoop<3> loop(out.shape, {broadcastStrides(cond.shape, out.shape),
                                  broadcastStrides(onTrue.shape, out.shape),
                                  broadcastStrides(onFalse.shape, out.shape)});
  const uint8_t *c = cond.as<uint8_t>();
  dispatchBySize(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *t = onTrue.as<T>(), *f = onFalse.as<T>();
    T *o = out.as<T>();
    loop.run([&](int64_t i, const std::array<int64_t, 3> &in) {
      o[i] = c[in[0]] ? t[in[1]] : f[in[2]];
    });
  });
  return {};
}

} // namespace

void registerCastSelectKernels(KernelTable &table) {
  table["cast"] = {castKernel, 1, 1};
  table["select"] = {selectKernel, 3, 3};
}

} // namespace loom::rt::cpu
