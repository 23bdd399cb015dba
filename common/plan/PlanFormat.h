//===- PlanFormat.h - The plan format's version -----------------*- C++ -*-===//
//
// One number for the compiler that writes plans and the runtime that reads
// them (Plan.format_version). A field whose meaning an older reader would
// get wrong, rather than ignore, raises it:
//
//   1  the first format;
//   2  Value.alias_of: a reshape's result shares its operand's arena bytes
//      (a version-1 reader takes the two for overlapping values);
//   3  Instruction.scratch_bytes: a collective's packing scratch is in the
//      step arena (a version-2 reader would allocate it again, beyond the
//      memory plan);
//   4  a kernel's Instruction.scratch_bytes (common/ops/KernelScratch.h):
//      a version-3 reader would refuse a kernel with scratch.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_PLAN_PLANFORMAT_H
#define LOOM_COMMON_PLAN_PLANFORMAT_H

#include <cstdint>

namespace loom {

/// The plan format version this build writes and reads.
inline constexpr uint32_t kPlanFormatVersion = 4;

} // namespace loom

#endif // LOOM_COMMON_PLAN_PLANFORMAT_H
