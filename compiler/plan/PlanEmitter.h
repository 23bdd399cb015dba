//===- PlanEmitter.h - The loom dialect to a runtime plan ------*- C++ -*-===//
//
// Lowers a module's `@main` (global graph, one device for now) to a
// `loom::plan::Plan`: one value per SSA value, one instruction per op in
// program order, constants and parameter data carried in the plan, and a
// static memory plan that reuses step-arena storage once a value is dead.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PLAN_PLANEMITTER_H
#define LOOM_COMPILER_PLAN_PLANEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "common/plan/PlanFormat.h"
#include "common/plan/plan.pb.h"

#include <optional>
#include <string>
#include <vector>

namespace loom {

/// Emits the plan of `module`'s `@main`; on failure returns std::nullopt
/// and says why in `error` (naming the op and its location).
std::optional<plan::Plan> emitPlan(mlir::ModuleOp module, std::string &error);

/// Where a program's step arena holds the most live bytes (the static
/// memory plan's liveness, before placement): the instruction, the bytes
/// live there (its scratch included), its scratch, and the `top` largest
/// values live there with the instruction producing each (-1 for inputs).
struct ArenaPeak {
  int64_t bytes = 0;
  int instruction = -1;
  int64_t scratch = 0;
  std::vector<int32_t> largest;
  std::vector<int> producers;
};
ArenaPeak arenaPeak(const plan::Program &program, size_t top);

} // namespace loom

#endif // LOOM_COMPILER_PLAN_PLANEMITTER_H
