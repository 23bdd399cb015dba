//===- Compare.cpp - Comparisons, logic, max, min and trilu kernels -------===//
//
// The comparisons (equal, less, less_equal, greater, greater_equal) and the
// logic ops (and, or, xor, not) write bool masks; max and min pick one
// operand per element (NaN wins, as in numpy); all broadcast as in numpy.
// f16 and bf16 operands compare in f32, which keeps their order. trilu
// zeroes the elements of each matrix outside its triangle.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace loom::rt::cpu {
namespace {

enum class MaskKind {
  Equal,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  And,
  Or,
  Xor
};

template <MaskKind K, typename T> inline bool maskOp(T a, T b) {
  if constexpr (K == MaskKind::Equal)
    return a == b;
  else if constexpr (K == MaskKind::Less)
    return a < b;
  else if constexpr (K == MaskKind::LessEqual)
    return a <= b;
  else if constexpr (K == MaskKind::Greater)
    return a > b;
  else if constexpr (K == MaskKind::GreaterEqual)
    return a >= b;
  else if constexpr (K == MaskKind::And)
    return (a != 0) && (b != 0);
  else if constexpr (K == MaskKind::Or)
    return (a != 0) || (b != 0);
  else
    return (a != 0) != (b != 0);
}

template <MaskKind K, typename T>
void maskLoop(const TensorView &lhs, const TensorView &rhs,
              const TensorView &out) {
  const T *a = lhs.as<T>(), *b = rhs.as<T>();
  uint8_t *c = out.as<uint8_t>();
  StridedLoop<2> loop(out.shape, {broadcastStrides(lhs.shape, out.shape),
                                  broadcastStrides(rhs.shape, out.shape)});
  loop.run([&](int64_t o, const std::array<int64_t, 2> &in) {
    c[o] = maskOp<K>(a[in[0]], b[in[1]]);
  });
}

/// Checks a binary op's operands against its result of `resultType`.
std::string checkBinary(const KernelArgs &a, DType resultType) {
  const TensorView &lhs = a.inputs[0], &rhs = a.inputs[1], &out = a.outputs[0];
  if (lhs.dtype != rhs.dtype || out.dtype != resultType)
    return "operands of '" + std::string(a.op) + "' have element types " +
           dtypeName(lhs.dtype) + " and " + dtypeName(rhs.dtype) + ", result " +
           dtypeName(out.dtype);
  if (!broadcastsTo(lhs.shape, out.shape) ||
      !broadcastsTo(rhs.shape, out.shape))
    return std::string(a.op) + ": operands " + formatShape(lhs.shape) +
           " and " + formatShape(rhs.shape) + " do not broadcast to " +
           formatShape(out.shape);
  return {};
}

template <MaskKind K>
std::string maskKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    if (auto e = checkBinary(a, DType::Bool); !e.empty())
      return e;
    const TensorView &lhs = a.inputs[0], &rhs = a.inputs[1],
                     &out = a.outputs[0];
    bool logic = K == MaskKind::And || K == MaskKind::Or || K == MaskKind::Xor;
    if (lhs.dtype == DType::Bool) {
      if (!logic && K != MaskKind::Equal)
        return unsupportedType(a.op, lhs.dtype);
      maskLoop<K, uint8_t>(lhs, rhs, out);
      return {};
    }
    if (logic)
      return unsupportedType(a.op, lhs.dtype);
    return dispatchNumeric(lhs.dtype, a.op, [&](auto tag) -> std::string {
      maskLoop<K, decltype(tag)>(lhs, rhs, out);
      return {};
    });
  });
}

std::string notKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != DType::Bool || out.dtype != DType::Bool)
    return unsupportedType(args.op, in.dtype);
  if (in.shape != out.shape)
    return "not: input " + formatShape(in.shape) + " and result " +
           formatShape(out.shape) + " differ";
  const uint8_t *x = in.as<uint8_t>();
  uint8_t *y = out.as<uint8_t>();
  int64_t n = in.numElements();
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] == 0;
  return {};
}

/// max or min of two elements; NaN propagates.
template <bool Max, typename T> inline T extremum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a))
      return a;
  }
  return (Max ? a > b : a < b) ? a : b;
}

template <bool Max>
std::string extremumKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    if (auto e = checkBinary(a, a.inputs[0].dtype); !e.empty())
      return e;
    const TensorView &lhs = a.inputs[0], &rhs = a.inputs[1],
                     &out = a.outputs[0];
    return dispatchNumeric(out.dtype, a.op, [&](auto tag) -> std::string {
      using T = decltype(tag);
      const T *x = lhs.as<T>(), *y = rhs.as<T>();
      T *z = out.as<T>();
      StridedLoop<2> loop(out.shape, {broadcastStrides(lhs.shape, out.shape),
                                      broadcastStrides(rhs.shape, out.shape)});
      loop.run([&](int64_t o, const std::array<int64_t, 2> &in) {
        z[o] = extremum<Max>(x[in[0]], y[in[1]]);
      });
      return {};
    });
  });
}

std::string triluKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape || in.rank() < 2)
    return "trilu: input " + formatShape(in.shape) + " and result " +
           formatShape(out.shape) + " differ or have rank below 2";
  int64_t rows = in.shape[in.rank() - 2], cols = in.shape[in.rank() - 1];
  int64_t n = in.numElements();
  bool upper = args.attrs.getBool("upper");
  int64_t k = args.attrs.getInt("k");
  dispatchBySize(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.as<T>();
    T *y = out.as<T>();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) {
      int64_t col = i % cols, row = (i / cols) % rows;
      bool keep = upper ? col - row >= k : col - row <= k;
      y[i] = keep ? x[i] : T(0);
    }
  });
  return {};
}

} // namespace

void registerCompareKernels(KernelTable &table) {
  table["equal"] = {maskKernel<MaskKind::Equal>, 2, 2};
  table["less"] = {maskKernel<MaskKind::Less>, 2, 2};
  table["less_equal"] = {maskKernel<MaskKind::LessEqual>, 2, 2};
  table["greater"] = {maskKernel<MaskKind::Greater>, 2, 2};
  table["greater_equal"] = {maskKernel<MaskKind::GreaterEqual>, 2, 2};
  table["and"] = {maskKernel<MaskKind::And>, 2, 2};
  table["or"] = {maskKernel<MaskKind::Or>, 2, 2};
  table["xor"] = {maskKernel<MaskKind::Xor>, 2, 2};
  table["not"] = {notKernel, 1, 1};
  table["max"] = {extremumKernel<true>, 2, 2};
  table["min"] = {extremumKernel<false>, 2, 2};
  table["trilu"] = {triluKernel, 1, 1};
}

} // namespace loom::rt::cpu
