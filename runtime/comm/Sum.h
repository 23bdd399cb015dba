//===- Sum.h - The member-order sum every communicator uses -----*- C++ -*-===//
//
// Both communicators reduce with this one loop, so that a sum is bitwise
// the same on every member and under either communicator: element e of the
// result is srcs[0][e] + srcs[1][e] + ... in member order, accumulated in
// f32 for f16 and bf16, and with wrap-around for integers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_SUM_H
#define LOOM_RUNTIME_COMM_SUM_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <vector>

namespace loom::rt {

/// Whether `dtype` can be summed (every type but bool).
bool canSum(DType dtype);

/// dst[e] = sum over m of srcs[m][first + e], for e in [0, count).
void sumInMemberOrder(DType dtype, const std::vector<const void *> &srcs,
                      int64_t first, void *dst, int64_t count);

} // namespace loom::rt

#endif // LOOM_RUNTIME_COMM_SUM_H
