//===- MemoryPlan.h - The step arena's static memory plan -------*- C++ -*-===//
//
// Private to the plan emitter (PlanEmitter.cpp, MemoryPlan.cpp): the
// alignment of state and arena offsets, and the memory plan of a program
// once its values and instructions are emitted.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PLAN_MEMORYPLAN_H
#define LOOM_COMPILER_PLAN_MEMORYPLAN_H

#include "common/plan/plan.pb.h"

#include <cstdint>
#include <string>

namespace loom::arena {

/// State and arena offsets are multiples of this.
constexpr int64_t kAlignment = 64;

inline int64_t alignUp(int64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

/// Lays out the step arena of `program`, whose values and instructions are
/// emitted: reshapes alias their operands, in-place updates take their
/// targets' offsets, and every other arena value and instruction scratch
/// gets an offset from the policy giving the smallest arena, whose size is
/// set. Fails, saying why in `error`, if an in-place update is not the
/// last reader of what it replaces.
bool planMemory(plan::Program &program, std::string &error);

} // namespace loom::arena

#endif // LOOM_COMPILER_PLAN_MEMORYPLAN_H
