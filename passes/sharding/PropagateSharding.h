//===- PropagateSharding.h - Layouts for every value ------------*- C++ -*-===//
//
// The propagation behind `loom-propagate-sharding`, callable from the passes
// that propagate again after changing layouts (loom-shard-optimizer), and
// the analysis that remembers which layouts were given before it ran.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SHARDING_PROPAGATESHARDING_H
#define LOOM_PASSES_SHARDING_PROPAGATESHARDING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace loom::sharding {

/// Completes the layouts of `func` on its mesh: `mode` is "data" or
/// "semi" (see loom-propagate-sharding).
mlir::LogicalResult propagateShardings(mlir::func::FuncOp func,
                                       llvm::StringRef mode);

/// The ops of a function that carry a layout of their own (`loom.sharding`
/// or `loom.strategy`): taken by loom-propagate-sharding before it runs and
/// preserved, so that a later pass of the same pipeline can tell the
/// layouts the user, a strategy file or the search gave from those
/// propagation chose.
struct GivenShardings {
  explicit GivenShardings(mlir::Operation *func);
  llvm::SmallPtrSet<mlir::Operation *, 16> ops;
};

} // namespace loom::sharding

#endif // LOOM_PASSES_SHARDING_PROPAGATESHARDING_H
