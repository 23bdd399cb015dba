//===- Sum.cpp - The member-order sum every communicator uses -------------===//

#include "runtime/comm/Sum.h"

namespace loom::rt {

namespace {

/// dst[e] = srcs[0][first + e] + ... + srcs[n-1][first + e] for e in
/// [0, count), accumulated as Acc in member order.
template <typename T, typename Acc, typename Load, typename Store>
void sumAs(const std::vector<const void *> &srcs, int64_t first, void *dst,
           int64_t count, Load load, Store store) {
  T *out = static_cast<T *>(dst);
  for (int64_t e = 0; e < count; ++e) {
    Acc acc = load(static_cast<const T *>(srcs[0])[first + e]);
    for (size_t m = 1; m < srcs.size(); ++m)
      acc += load(static_cast<const T *>(srcs[m])[first + e]);
    out[e] = store(acc);
  }
}

} // namespace

void sumInMemberOrder(DType dtype, const std::vector<const void *> &srcs,
                      int64_t first, void *dst, int64_t count) {
  switch (dtype) {
  case DType::F32:
    return sumAs<float, float>(
        srcs, first, dst, count, [](float v) { return v; },
        [](float v) { return v; });
  case DType::F16:
    return sumAs<uint16_t, float>(srcs, first, dst, count, halfToFloat,
                                  floatToHalf);
  case DType::BF16:
    return sumAs<uint16_t, float>(srcs, first, dst, count, bf16ToFloat,
                                  floatToBf16);
  case DType::I32:
    // Unsigned arithmetic: overflow wraps instead of being undefined.
    return sumAs<int32_t, uint32_t>(
        srcs, first, dst, count,
        [](int32_t v) { return static_cast<uint32_t>(v); },
        [](uint32_t v) { return static_cast<int32_t>(v); });
  case DType::I64:
    return sumAs<int64_t, uint64_t>(
        srcs, first, dst, count,
        [](int64_t v) { return static_cast<uint64_t>(v); },
        [](uint64_t v) { return static_cast<int64_t>(v); });
  case DType::Bool:
    break;
  }
}

bool canSum(DType dtype) { return dtype != DType::Bool; }

} // namespace loom::rt
