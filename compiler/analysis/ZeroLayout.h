//===- ZeroLayout.h - The layouts optimizer sharding gives updates -*- C++ -*-//
//
// The layout algebra of optimizer sharding (ZeRO, see
// passes/sharding/OptimizerSharding.h), shared by loom-shard-optimizer and
// the cost terms of StepCost.h: the split an update takes over the axes its
// gradient sums over, those axes, and a function's ZeRO level.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ANALYSIS_ZEROLAYOUT_H
#define LOOM_COMPILER_ANALYSIS_ZEROLAYOUT_H

#include "compiler/analysis/ShardingSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <vector>

namespace loom::sharding {

/// The layout ZeRO gives an update whose parameter has layout `update`:
/// `axes` added (innermost) to the first dimension of `shape` whose local
/// extent they divide; nullopt when none does or `axes` is empty.
std::optional<layout::TensorLayout>
zeroLayout(const layout::TensorLayout &update, llvm::ArrayRef<int> axes,
           llvm::ArrayRef<int64_t> shape, const layout::Mesh &mesh);

/// How ZeRO splits an update no dimension of which its ways divide: the
/// parameter and its optimizer state are padded with zeros along `dim` to
/// `extent`, a multiple of the ways, and split there. The padding stays
/// zero (its gradient is zero, and so is every optimizer's update of a zero
/// parameter with zero state), and the model reads the leading block.
struct ZeroPadding {
  int dim = 0;
  int64_t extent = 0;
};

/// The padding for an update of layout `update` over `axes`, for when
/// zeroLayout finds no dimension (callers ask it first): of the dimensions
/// `update` does not split (a split one would move its other splits'
/// borders), the one whose padding adds the fewest elements, the first of
/// equals. Nullopt when `update` splits every dimension or `axes` is empty.
std::optional<ZeroPadding> zeroPadding(const layout::TensorLayout &update,
                                       llvm::ArrayRef<int> axes,
                                       llvm::ArrayRef<int64_t> shape,
                                       const layout::Mesh &mesh);

/// The axes a parameter operand's gradient sums over: those an op's
/// layouts use (split or partial) that the operand's layout does not.
std::vector<int> gradientAxes(const OpLayouts &layouts, unsigned operand);

/// The function's ZeRO level (its `loom.zero`), 0 when it has none.
int zeroLevel(mlir::func::FuncOp func);

} // namespace loom::sharding

#endif // LOOM_COMPILER_ANALYSIS_ZEROLAYOUT_H
