//===- ShardingRule.h - How an op may be split over a mesh ------*- C++ -*-===//
//
// A sharding rule describes an op as a set of iteration factors, the way an
// einsum does: `matmul [M, K] x [K, N] -> [M, N]` has factors M, N (kept by
// the result) and K (summed away). Each operand and result dimension lists
// the factors it is made of, major to minor (a reshape merges or splits
// factors; a broadcast dimension of size 1 has none). A strategy assigns
// mesh axes to factors; from it follow:
//   - every operand's required layout: a dimension is split over the axes of
//     its factors, in order;
//   - every result's layout: likewise, plus partial sums over the axes of
//     `reduction` factors the result does not index;
//   - the local op: the same op on the local shapes, its results multiplied
//     by 1/n when `meanScaled` factors are split n ways (a mean computed
//     over a shard, turned into the shard's share of the global mean).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_SHARDINGRULE_H
#define LOOM_DIALECTS_SHARDINGRULE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>

namespace loom {

enum class FactorKind {
  /// Split freely: each device computes the results of its block.
  Parallel,
  /// Results without this factor are sums over it: splitting it makes them
  /// partial sums over its axes.
  Reduction,
  /// Never split (the op needs the whole extent, e.g. softmax's axis).
  Blocked,
};

struct ShardingFactor {
  int64_t size = 1;
  FactorKind kind = FactorKind::Parallel;
  /// Results are means over this factor: when it is split n ways, the local
  /// results are multiplied by 1/n.
  bool meanScaled = false;
  /// Splitting this factor needs a cross-shard combine besides the local
  /// op, which loom-partition builds (a vocabulary-parallel cross-entropy's
  /// class factor: the rows' log-sum-exp over all classes, from the blocks'
  /// by a small all_gather); the cost model counts it. Otherwise the factor is
  /// what its kind says.
  bool combined = false;
};

/// The factors of every dimension of one tensor, major to minor.
using DimFactors = llvm::SmallVector<llvm::SmallVector<int, 1>, 4>;

struct ShardingRule {
  llvm::SmallVector<ShardingFactor, 8> factors;
  llvm::SmallVector<DimFactors, 4> operands;
  llvm::SmallVector<DimFactors, 2> results;
  /// The op is linear in all its operands together (add, sub): operands
  /// that are all partial sums over the same axes give a result that is a
  /// partial sum over them, so the reduction can wait.
  bool linear = false;

  int addFactor(int64_t size, FactorKind kind = FactorKind::Parallel) {
    factors.push_back({size, kind, false, false});
    return static_cast<int>(factors.size()) - 1;
  }
  /// A rule whose every dimension is its own blocked factor: the op only
  /// runs on whole (replicated) tensors.
  static ShardingRule replicatedOnly(mlir::Operation *op);
  /// The rule of an elementwise op with numpy broadcasting: one factor per
  /// dimension of the result. A `linear` op (add, sub) maps partial sums to
  /// partial sums.
  static ShardingRule elementwise(mlir::Operation *op, bool linear = false);
};

/// The axes (mesh axis indices, outermost first) assigned to each factor.
/// For a linear op, one more entry may follow the factors: the axes over
/// which its operands and results are partial sums.
using FactorAxes = llvm::SmallVector<llvm::SmallVector<int, 2>, 8>;

/// The default `buildLocalOp`: clones `op` with `operands` and result types
/// `resultTypes`, rewriting attributes that restate shapes (slice sizes).
mlir::Operation *buildLocalOpByCloning(mlir::Operation *op,
                                       mlir::OpBuilder &builder,
                                       mlir::ValueRange operands,
                                       mlir::TypeRange resultTypes);

/// The work of one op (CostOpInterface): floating-point operations, bytes
/// read and written, the kernel class whose efficiency applies, and the
/// kernel's name for a profile's own figure of it (op_efficiency): the op's
/// name without the dialect, or a variant where one op runs kernels of
/// different speeds ("transpose_innermost": a transpose that moves the
/// innermost dimension gathers single elements instead of copying rows).
struct OpWork {
  double flops = 0;
  double bytes = 0;
  std::string kernelClass = "elementwise";
  std::string kernel;
};

/// The work `op` does on operands and results of the given types.
OpWork estimateWork(mlir::Operation *op,
                    llvm::ArrayRef<mlir::RankedTensorType> operands,
                    llvm::ArrayRef<mlir::RankedTensorType> results);

} // namespace loom

#endif // LOOM_DIALECTS_SHARDINGRULE_H
