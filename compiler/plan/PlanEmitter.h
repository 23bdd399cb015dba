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
#include "runtime/plan.pb.h"

#include <optional>
#include <string>

namespace loom {

/// The plan format version this compiler writes (Plan.format_version).
inline constexpr uint32_t kPlanFormatVersion = 1;

/// Emits the plan of `module`'s `@main`; on failure returns std::nullopt
/// and says why in `error` (naming the op and its location).
std::optional<plan::Plan> emitPlan(mlir::ModuleOp module, std::string &error);

} // namespace loom

#endif // LOOM_COMPILER_PLAN_PLANEMITTER_H
