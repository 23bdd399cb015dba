//===- OptimizerSharding.h - ZeRO over the data-parallel axes ---*- C++ -*-===//
//
// Optimizer sharding (ZeRO, Rajbhandari et al.): in a data-parallel step
// every replica of a parameter runs the same update on the same summed
// gradient. Splitting that update over the data-parallel axes removes the
// redundancy, in three levels:
//
//   1. the optimizer state is split: the gradient is reduce-scattered at
//      the update (instead of all-reduced), each device updates its slice,
//      and the new parameter is all-gathered;
//   2. + gradients: the reduce-scatter moves up to where the gradient is
//      complete, so only the slice lives until the update;
//   3. + parameters: the parameter itself is stored split; it is gathered
//      before each use in the forward pass and again in the backward.
//
// The data-parallel axes are those gradients are partial sums over where
// they are made (the axes that split the batch); a parameter's update is
// split over those of them it is replicated over, on the first dimension
// they divide. A parameter no dimension of which they divide is padded with
// zeros until one does (as ZeRO pads its flat buffers; zeroPadding), its
// model reading the leading block; one every dimension of which is split
// already stays whole (and is reported).
//
// All of it is layouts: the update op gets the split layout, the optimizer
// state (and at level 3 the parameter) argument takes it, and loom-partition
// derives the reduce-scatter and all-gathers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SHARDING_OPTIMIZERSHARDING_H
#define LOOM_PASSES_SHARDING_OPTIMIZERSHARDING_H

#include "compiler/analysis/ZeroLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>
#include <string>
#include <vector>

namespace loom::sharding {

struct ZeroReport {
  int level = 0;
  /// The data-parallel axes (mesh axis indices).
  std::vector<int> axes;
  /// Parameters whose updates were split, and those left whole (no
  /// data-parallel axis, or every dimension split already).
  std::vector<std::string> sharded, whole;
  /// Those of `sharded` that were padded first (no dimension divided).
  std::vector<std::string> padded;
  /// Bytes per device saved against level 0: optimizer state, gradients
  /// (level 2 and up) and parameters (level 3).
  double savedBytes = 0;
};

/// Applies ZeRO `level` (1 to 3) to a sharded training step (every op has
/// its loom.sharding): rewrites the updates' shardings and the state and
/// parameter arguments' layouts, and marks the function (loom.zero) and
/// the split arguments. Fails with a diagnostic on a function that is not
/// a sharded training step.
mlir::FailureOr<ZeroReport> shardOptimizer(mlir::func::FuncOp func, int level);

/// What `pass` did, when it is a loom-shard-optimizer that split the
/// optimizer; nullptr otherwise (for a pass instrumentation's report).
const ZeroReport *shardOptimizerReport(mlir::Pass &pass);

} // namespace loom::sharding

#endif // LOOM_PASSES_SHARDING_OPTIMIZERSHARDING_H
