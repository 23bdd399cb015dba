//===- PipelineImpl.h - The pipeliner the pipeline files share --*- C++ -*-===//
//
// Private to pipelining (Pipeline.h): the Pipeliner, which turns the
// training step into its stage functions, and the helpers its files share.
// Its phases live in files of their own:
//  - PipelineStages.cpp: which ops run per micro-batch and once per step
//    (classify), the stage or chunk of each op (assignStages), where state
//    and its updates live and which values cross stages (placeState);
//  - PipelineBuild.cpp: each stage's function, its micro-batches unrolled
//    in the schedule's order with the sends and receives between stages
//    (build), and the check that the schedule does not deadlock;
//  - Pipeline.cpp: the driver (run, measure), the values crossing at their
//    roots on submeshes of their own (crossAtRoots) and the stages' costs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PIPELINE_PIPELINEIMPL_H
#define LOOM_PASSES_PIPELINE_PIPELINEIMPL_H

#include "passes/pipeline/Pipeline.h"

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <set>
#include <string>
#include <vector>

namespace loom::sharding::detail {

/// `op` for error messages: its name and, where it has one, its ONNX node.
std::string describe(mlir::Operation *op);

/// The layout loom-partition recorded for `v` (loom.layouts), if any.
TensorLayoutAttr recordedLayout(mlir::Value v);

/// Records `layout` as the layout of `op`'s one result.
void recordLayout(mlir::Operation *op, TensorLayoutAttr layout);

/// What building one stage's function carries from one part to the next
/// (PipelineBuild.cpp).
struct StageBuild;

class Pipeliner {
public:
  /// With `perLayer`, every ONNX layer is a stage of its own (P becomes
  /// the layer count): what measureLayers costs.
  Pipeliner(mlir::func::FuncOp func, const PipelineOptions &options,
            std::string &error, bool perLayer = false)
      : func(func), options(options), error(error), perLayer(perLayer),
        P(options.stages), M(options.microBatches),
        V(perLayer ? 1
                   : search::chunksPerStage(
                         stringifyPipelineSchedule(options.schedule).str(),
                         options.virtualStages)),
        body(func.getBody().front()) {}
  mlir::FailureOr<PipelineReport> run();
  mlir::FailureOr<std::vector<search::LayerCost>> measure();

private:
  /// The schedule's spelling, as the search and the messages take it.
  std::string scheduleName() const {
    return stringifyPipelineSchedule(options.schedule).str();
  }
  mlir::LogicalResult fail(const llvm::Twine &message) {
    error = message.str();
    return mlir::failure();
  }

  // Which op runs where (PipelineStages.cpp).
  mlir::LogicalResult classify();
  mlir::LogicalResult assignStages();
  /// The user's stages of forward ops (options.nodeStages).
  mlir::LogicalResult
  giveNodeStages(llvm::ArrayRef<mlir::Operation *> forwardOrder,
                 llvm::DenseMap<mlir::Operation *, int64_t> &given);
  /// The stages of forward ops by their ONNX layer; fills `layers`.
  mlir::LogicalResult
  giveLayerStages(llvm::ArrayRef<mlir::Operation *> forwardOrder,
                  llvm::DenseMap<mlir::Operation *, int64_t> &given);
  /// The chunk of each of `layers`, of `weights` ops each.
  mlir::LogicalResult stageLayers(const std::vector<int64_t> &weights,
                                  llvm::StringMap<int64_t> &layerStage);
  /// Forward ops that use neither a parameter nor an anchored op's result.
  llvm::DenseSet<mlir::Operation *>
  floatingOps(llvm::ArrayRef<mlir::Operation *> forwardOrder,
              const llvm::DenseMap<mlir::Operation *, int64_t> &given);
  /// Gives every forward op its chunk; `nodeStage` gets each ONNX node's.
  mlir::LogicalResult
  placeForward(llvm::ArrayRef<mlir::Operation *> forwardOrder,
               const llvm::DenseMap<mlir::Operation *, int64_t> &given,
               llvm::StringMap<int64_t> &nodeStage);
  void placeBackward(const llvm::StringMap<int64_t> &nodeStage);
  /// The latest chunk of `op`'s operands that have one, else 0.
  int64_t operandStage(mlir::Operation *op);
  mlir::LogicalResult placeState();
  /// Fills crossTo and crossIndex: the values that cross stages.
  void numberCrossings();

  // Values crossing stages on submeshes of their own (Pipeline.cpp).
  mlir::LogicalResult crossAtRoots();

  // The stage functions (PipelineBuild.cpp).
  mlir::LogicalResult build(int64_t s, mlir::OpBuilder &builder);
  void stageArguments(StageBuild &st, mlir::OpBuilder &builder);
  mlir::LogicalResult stageResults(StageBuild &st, mlir::OpBuilder &builder);
  mlir::Block *createStageFunc(StageBuild &st, mlir::OpBuilder &builder);
  mlir::LogicalResult cloneShared(StageBuild &st, mlir::Operation &op);
  mlir::LogicalResult clonePre(StageBuild &st, mlir::Block *entry);
  void groupChunks(StageBuild &st);
  mlir::Value scale(StageBuild &st, mlir::Value v);
  void precount(StageBuild &st, LabelCountOp count);
  mlir::LogicalResult emitSchedule(StageBuild &st);
  mlir::LogicalResult emitUnitOp(StageBuild &st, mlir::Operation *op,
                                 const search::ScheduleUnit &unit);
  mlir::LogicalResult finishStep(StageBuild &st);
  mlir::LogicalResult checkDeadlock();

  /// Per stage, what the cost model says of it (options.opSeconds).
  std::vector<search::LayerCost> stageCosts();
  /// The pipeline's chunks: stage s runs chunks s, s + P, ..., and
  /// stageOf gives forward and backward ops their chunk, the once-per-step
  /// ops their stage (chunk c is stage c mod P either way).
  int64_t chunks() const { return P * V; }
  int64_t stageOfOp(mlir::Operation *op) { return stageOf[op] % P; }
  int64_t tag(mlir::Value v, int64_t k, int64_t dst) const {
    return (crossIndex.lookup(v) * M + k) * P + dst;
  }
  int64_t lossTag(int64_t dst) const {
    return static_cast<int64_t>(crossIndex.size()) * M * P + dst;
  }
  bool isInput(mlir::Value v) {
    auto arg = llvm::dyn_cast<mlir::BlockArgument>(v);
    return arg &&
           func.getArgAttr(arg.getArgNumber(), LoomDialect::kInputAttrName);
  }

  mlir::func::FuncOp func;
  const PipelineOptions &options;
  std::string &error;
  const bool perLayer;
  int64_t P;
  const int64_t M;
  /// Chunks per stage (interleaved), else 1.
  const int64_t V;
  mlir::Block &body;
  /// The ONNX layers of the forward ops, in order.
  std::vector<std::string> layers;
  mlir::Value loss;
  /// Optimizer updates and the collectives (and reshapes) that reduce
  /// their gradients (run once per step); per-micro-batch ops (they depend on
  /// an input); ops of the step after the updates; ops before any input.
  llvm::DenseSet<mlir::Operation *> reductions, data, post, pre;
  llvm::DenseSet<mlir::Operation *> forward;
  /// Gradients as the micro-batch computes them, before the collectives.
  llvm::SetVector<mlir::Value> gradients;
  llvm::DenseMap<mlir::Operation *, int64_t> stageOf;
  /// For arguments and pre ops: the stages that need them.
  llvm::DenseMap<mlir::Value, std::set<int64_t>> needs;
  /// Per-micro-batch values used on other stages, and by which.
  llvm::DenseMap<mlir::Value, std::vector<int64_t>> crossTo;
  llvm::DenseMap<mlir::Value, int64_t> crossIndex;
  /// options.ownMeshes: per value that crosses stages, the compute op's
  /// result it carries (itself, or what it reduces), which numbers it.
  llvm::DenseMap<mlir::Value, mlir::Value> rootOf;
  int64_t lossStage = 0;
  std::vector<mlir::func::FuncOp> stageFuncs;
  PipelineReport report;
};

} // namespace loom::sharding::detail

#endif // LOOM_PASSES_PIPELINE_PIPELINEIMPL_H
