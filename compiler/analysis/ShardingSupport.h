//===- ShardingSupport.h - Sharding rules meet the layout algebra -*- C++ -*-//
//
// Shared by loom-propagate-sharding, loom-partition and the strategy file:
// conversions between the dialect's mesh and layout attributes and the
// layout library, the layouts a factor assignment gives an op (with every
// rule it must obey checked), and the translation of user strategies (split
// counts or axis names per operand dimension) into factor assignments.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ANALYSIS_SHARDINGSUPPORT_H
#define LOOM_COMPILER_ANALYSIS_SHARDINGSUPPORT_H

#include "common/layout/Redistribution.h"
#include "dialects/LoomDialect.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::sharding {

std::optional<layout::Mesh> toMesh(MeshAttr mesh, std::string &error);
/// The mesh of `func` (its `loom.mesh`), as attribute and layout-library
/// mesh; emits an error naming `pass` and fails when it has none or it is
/// invalid.
mlir::FailureOr<std::pair<MeshAttr, layout::Mesh>>
meshOf(mlir::Operation *func, llvm::StringRef pass);
layout::TensorLayout toLayout(TensorLayoutAttr attr, MeshAttr mesh);
TensorLayoutAttr toAttr(MeshAttr mesh, const layout::TensorLayout &layout);
/// Bytes per element of a tensor type (i1 counts 1).
int64_t elementBytes(mlir::Type type);
/// "'loom.matmul' (ONNX node '/fc1/MatMul')", for messages.
std::string describeOp(mlir::Operation *op);

/// A move: an op that changes only a value's element type, dimension order
/// or shape (loom.cast, loom.transpose, loom.reshape). A parameter keeps its
/// identity through moves (its cast to the compute precision, its
/// transpose), and so does its gradient on the way back.
bool isMove(mlir::Operation *op);
/// The value `v` is made from by moves alone: `v` itself when no move
/// makes it.
mlir::Value moveSource(mlir::Value v);

/// Redistribution plans for the tensors of one mesh: one layout::Planner per
/// global shape and element size, so that the searches it keeps are shared
/// by every value of that shape.
class PlannerCache {
public:
  explicit PlannerCache(const layout::Mesh &mesh) : mesh(mesh) {}
  std::optional<layout::RedistributionPlan>
  plan(mlir::RankedTensorType global, const layout::TensorLayout &from,
       const layout::TensorLayout &to, std::string &error);

private:
  const layout::Mesh &mesh;
  std::map<std::pair<std::vector<int64_t>, int64_t>, layout::Planner> planners;
};

/// The per-device type of `global` under `layout`.
mlir::RankedTensorType localType(mlir::RankedTensorType global,
                                 const layout::Mesh &mesh,
                                 const layout::TensorLayout &layout);

/// What a factor assignment means for one op.
struct OpLayouts {
  llvm::SmallVector<layout::TensorLayout, 4> operands;
  llvm::SmallVector<layout::TensorLayout, 2> results;
  /// Local results are divided by this (mean factors that are split).
  int64_t meanDivisor = 1;
};

/// Checks `axes` against `rule` on `mesh` and derives the layouts. The
/// error (without the op's name) says which rule is broken.
std::optional<OpLayouts> deriveLayouts(const ShardingRule &rule,
                                       const FactorAxes &axes,
                                       const layout::Mesh &mesh,
                                       std::string &error);

/// The layouts `op`'s `loom.sharding` gives it; nullopt with `error` set
/// (without the op's name) when it has none or it breaks its rule.
std::optional<OpLayouts>
layoutsOf(mlir::Operation *op, const layout::Mesh &mesh, std::string &error);

/// Adds to `into` the assignment operand `index`'s `layout` implies (its
/// partial axes ignored): the axes of each dimension go to its first
/// factor of size above 1. Axes already used and factors already assigned
/// are left alone. False if the layout splits a dimension no factor may
/// carry.
bool induceFromOperand(const ShardingRule &rule, unsigned index,
                       const layout::TensorLayout &layout, FactorAxes &into);
/// Likewise from result `index`'s layout.
bool induceFromResult(const ShardingRule &rule, unsigned index,
                      const layout::TensorLayout &layout, FactorAxes &into);

/// The assignment `op` is fixed to by the user (its loom.sharding, or a
/// loom.strategy's counts), if any; fails with a diagnostic on `op` when it
/// is invalid.
mlir::FailureOr<std::optional<FactorAxes>>
fixedAssignment(mlir::Operation *op, const ShardingRule &rule,
                const layout::Mesh &mesh);

mlir::ArrayAttr factorsToAttr(mlir::MLIRContext *ctx, const FactorAxes &axes,
                              const layout::Mesh &mesh);
std::optional<FactorAxes> factorsFromAttr(mlir::ArrayAttr attr,
                                          const layout::Mesh &mesh,
                                          std::string &error);

/// One operand dimension of a user strategy: a split count, or the mesh
/// axes (outermost first) it is split over.
struct DimSpec {
  int64_t count = 1;
  std::vector<std::string> axes;
};
using StrategySpec = std::vector<std::vector<DimSpec>>;

/// The factor assignment a strategy asks for. Counts map to mesh axes in
/// order: going through the operands and their dimensions, a count takes
/// the next unused mesh axes (outermost first) whose sizes multiply to it.
/// Fewer entries than operands leave the rest free. Errors name the
/// operand, the dimension and the rule.
std::optional<FactorAxes>
strategyToFactors(const ShardingRule &rule,
                  llvm::ArrayRef<mlir::RankedTensorType> operandTypes,
                  const StrategySpec &spec, const layout::Mesh &mesh,
                  std::string &error);

/// The strategy of an assignment, per operand dimension its axes.
StrategySpec layoutsToStrategy(const OpLayouts &layouts,
                               const layout::Mesh &mesh);

/// E.g. `[[2, 1], [1, 4]]` or `[[dp, 1], [1, tp]]`.
std::string strategyToString(const StrategySpec &spec);

} // namespace loom::sharding

#endif // LOOM_COMPILER_ANALYSIS_SHARDINGSUPPORT_H
