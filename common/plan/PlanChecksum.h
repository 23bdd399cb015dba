//===- PlanChecksum.h - A plan's CRC-32, sealed and verified ----*- C++ -*-===//
//
// A compiled plan carries a CRC-32 of itself (Plan.crc32): of its
// deterministic serialization without that field. The compiler seals a
// plan before writing it; every reader verifies it, so a plan patched after
// compile (a learning rate, an operand id) or damaged is refused before its
// contents are trusted. Protobuf writes known fields in field-number order,
// so a parsed plan serializes back to the bytes that were sealed.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_PLAN_PLANCHECKSUM_H
#define LOOM_COMMON_PLAN_PLANCHECKSUM_H

#include "common/plan/plan.pb.h"

#include <cstdint>
#include <optional>
#include <string>

namespace loom::plan {

/// The CRC-32 of `plan` serialized deterministically without its crc32
/// (a plan that has one is copied; checksumWithout copies nothing).
uint32_t planChecksum(const Plan &plan);
/// The same, clearing `plan`'s crc32 while it serializes and restoring it.
uint32_t checksumWithout(Plan &plan);

/// Sets `plan`'s crc32 and returns its serialization; nullopt if the plan
/// is too large for protobuf (2 GiB).
std::optional<std::string> sealPlan(Plan &plan);

/// "" if `plan` carries the CRC-32 of its contents, else why not ("carries
/// no checksum", "was changed after it was compiled").
/// `plan` is left as it was (its crc32 is cleared only while checked).
std::string checkPlanChecksum(Plan &plan);

} // namespace loom::plan

#endif // LOOM_COMMON_PLAN_PLANCHECKSUM_H
