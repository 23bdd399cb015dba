//===- StepCost.h - Cost terms of sharded and partitioned ops ---*- C++ -*-===//
//
// The cost model (compiler/cost) applied to the loom dialect, shared by the
// strategy search (loom-auto-sharding) and the explanation a plan carries
// (compiler/explain/Explain):
//
//   - a training step's shape: which ops are the forward pass (those up to
//     the loss) and how much optimizer state a parameter carries;
//   - the terms of one forward op under one sharding, as the search counts
//     them before the backward pass is partitioned: its compute (forward,
//     and the backward ops linked to it), the all-reduce of its
//     parameters' gradients, and the per-device memory it holds for the
//     whole step (parameters, gradients, optimizer state, saved results);
//   - the time of an op of a partitioned (per-device) program: roofline
//     compute for every op, alpha-beta for collectives.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ANALYSIS_STEPCOST_H
#define LOOM_COMPILER_ANALYSIS_STEPCOST_H

#include "compiler/analysis/ShardingSupport.h"
#include "compiler/cost/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>
#include <string>
#include <vector>

namespace loom::sharding {

/// What kind of step a function is.
struct StepShape {
  /// A training step: result 0 is the loss and parameters are updated.
  bool training = false;
  /// The op producing the loss (training only).
  mlir::Operation *loss = nullptr;
  /// Optimizer state per parameter byte: 0 (SGD), 1 (momentum), 2 (Adam).
  double optimizerStateFactor = 0;
  /// Optimizer sharding (the function's loom.zero): 0 to 3.
  int zeroLevel = 0;
  /// The forward ops (training only): a forward result is saved for the
  /// backward pass when an op outside this set uses it.
  llvm::SmallPtrSet<mlir::Operation *, 16> forward;
  /// Forward ops marked loom.recompute: their results are not saved (the
  /// backward recomputes them), but their unmarked operands are.
  llvm::SmallPtrSet<mlir::Operation *, 16> recomputed;
  /// The shares of state and of saved results counted in memory (see
  /// SearchOptions): 1 unless the step is a pipeline's micro-batch.
  double stateShare = 1.0;
  double savedShare = 1.0;
  /// The gradient buckets the plan packs parameter gradients' all-reduces
  /// into (loom-bucket-gradients), in bytes: min(bucket size, the step's
  /// parameter bytes); 0 without buckets. A gradient of b bytes pays
  /// b / bucketBytes of its bucket's latency (at most all of it).
  double bucketBytes = 0;

  bool isSaved(mlir::Value result) const;
  /// Whether a backward op (neither forward nor the return) uses `result`.
  bool usedByBackward(mlir::Value result) const;

  /// Where the backward pass reads a forward result. A backward op linked
  /// to its forward op (loom.grad_of) takes that op's layouts: the
  /// producer's gradient reads the result in the producer's layout, a
  /// consumer's gradient reads its operand in the consumer's (the copy the
  /// forward made for it).
  struct BackwardUses {
    /// In the producer's layout (also any use not linked to a forward op).
    bool own = false;
    /// (consumer, operand) pairs whose layout the backward reads it in.
    llvm::SmallVector<std::pair<mlir::Operation *, unsigned>, 4> consumers;
    /// A backward op without links reads it: in any layout, for all we know.
    bool unlinked = false;
    bool readsAs(mlir::Operation *consumer, unsigned operand) const {
      return unlinked ||
             llvm::is_contained(consumers, std::make_pair(consumer, operand));
    }
  };
  BackwardUses backwardUses(mlir::Value result) const;
  /// The forward ops by their loom.grad_id.
  llvm::DenseMap<int64_t, mlir::Operation *> forwardById;
  /// The backward ops of each forward op: those linked to it (loom.grad_of)
  /// and the unlinked ones that feed them (a derivative's helpers). Empty
  /// when the step has no links (a hand-written graph): the backward is
  /// then costed as twice the forward.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *, 4>>
      backward;
  /// Whether `result` is a recomputed op's result the backward uses: made
  /// again in the backward of its layer and live through it.
  bool isRecomputedForBackward(mlir::Value result) const;
};
StepShape analyzeStep(mlir::func::FuncOp func, double stateShare = 1.0,
                      double savedShare = 1.0, int64_t bucketBytes = 0);

/// Whether `op` is an optimizer update (sgd, momentum, adam).
bool isOptimizerUpdate(mlir::Operation *op);

/// The ops that are nodes of the strategy search, in program order: every
/// op with a sharding rule (constants excepted) up to the loss of a
/// training step, or all of them in an inference graph.
std::vector<mlir::Operation *> forwardOps(mlir::func::FuncOp func,
                                          const StepShape &step);

/// The terms of one forward op under one sharding, per device.
struct NodeTerms {
  /// Forward compute (twice when the backward recomputes it) and, in a
  /// training step, the compute of its backward ops (StepShape::backward,
  /// each at the forward's share of the work; twice the forward without
  /// links), plus the optimizer updates of its parameters.
  double computeSeconds = 0;
  /// All-reduces of the parameter gradients over the axes that split work
  /// the parameters do not index.
  double commSeconds = 0;
  /// Parameters, gradients and optimizer state of the op's parameter
  /// operands, plus its results the backward pass uses (training).
  double memoryBytes = 0;
  /// The part of memoryBytes that is results (not parameters and state).
  double resultBytes = 0;
  /// The part of resultBytes that is a loss's gradient of its input: made
  /// by the loss's backward, live until its producer's backward has run.
  double lossGradientBytes = 0;
  /// The gradients live while the op's backward runs (training): of its
  /// float results and of its float operands other than parameters (whose
  /// gradients are held for the step) and the loss input (held where the
  /// backward begins). Not held for the step: a plan's count adds the
  /// largest, less what the backward of the ops after it has freed.
  double gradientBytes = 0;
  /// The tensors live while the op's forward runs that are not saved for
  /// the backward (training): its results and its operands in its
  /// layouts. A plan's count adds them to what the ops before it saved.
  double forwardBytes = 0;
  /// The part of memoryBytes that is each parameter operand's (with its
  /// gradient and state): (operand index, bytes). A parameter several
  /// nodes read (a recurrent weight's gate slices, a tied embedding) is
  /// held once per layout, so a plan's count takes it once.
  std::vector<std::pair<unsigned, double>> parameterBytes;
  /// For a recomputed op, its results the backward uses: not held for the
  /// step, but made again in the backward of the op's layer, where they
  /// are live together with the layer's other recomputed results (the
  /// search counts the largest layer's sum once).
  double recomputedBytes = 0;
  double seconds() const { return computeSeconds + commSeconds; }
};

/// The ranks of rank 0's group over a set of mesh axes (which link a
/// collective over those axes uses), computed once per set.
class GroupCache {
public:
  explicit GroupCache(const layout::Mesh &mesh) : mesh(mesh) {}
  const std::vector<int64_t> &group(const std::vector<int> &axes);

private:
  const layout::Mesh &mesh;
  std::map<std::vector<int>, std::vector<int64_t>> groups;
};

class NodeCoster {
public:
  NodeCoster(mlir::func::FuncOp func, const layout::Mesh &mesh,
             const cost::HardwareProfile &profile, const StepShape &step)
      : func(func), mesh(mesh), profile(profile), step(step), groups(mesh) {}

  NodeTerms terms(mlir::Operation *op, const ShardingRule &rule,
                  const FactorAxes &axes, const OpLayouts &layouts);

  /// The tensors behind NodeTerms::memoryBytes, for messages.
  struct MemoryItem {
    /// "parameter 'fc.weight' (with its gradient and optimizer state)" or
    /// "result of '/fc/MatMul'".
    std::string what;
    double bytes = 0;
    /// Its per-device layout (compactLayout).
    std::string layout;
  };
  std::vector<MemoryItem> memoryItems(mlir::Operation *op,
                                      const OpLayouts &layouts) const;

  /// The trainable parameter (an argument marked loom.param) `v` is: the
  /// argument itself, or its cast to the compute precision (under
  /// --precision, ops read their parameters through one cast each, and
  /// those ops, not the cast, hold the parameter, reduce its gradient and
  /// update it); null for other values.
  mlir::BlockArgument parameterOf(mlir::Value v) const;
  bool isParameter(mlir::Value v) const { return bool(parameterOf(v)); }
  /// Whether `op` is such a cast: its parameter counts at its users.
  bool isParameterCast(mlir::Operation *op) const;

  GroupCache &groupCache() { return groups; }

private:
  /// The all-gather a matmul's weight gradient needs under `layouts`.
  double weightGradientGatherSeconds(
      mlir::Operation *op, llvm::ArrayRef<mlir::RankedTensorType> operands,
      const OpLayouts &layouts);
  /// Sets `t`'s gradientBytes and forwardBytes (training).
  void addTransients(mlir::Operation *op,
                     llvm::ArrayRef<mlir::RankedTensorType> operands,
                     llvm::ArrayRef<mlir::RankedTensorType> results,
                     NodeTerms &t) const;
  /// The seconds of `op`'s backward ops at the share of their work the
  /// forward's local types (`operands`, `results`) do.
  double backwardSeconds(mlir::Operation *op,
                         llvm::ArrayRef<mlir::RankedTensorType> operands,
                         llvm::ArrayRef<mlir::RankedTensorType> results,
                         double forwardSeconds) const;

  mutable mlir::func::FuncOp func; // accessors of FuncOp are not const
  const layout::Mesh &mesh;
  const cost::HardwareProfile &profile;
  StepShape step;
  GroupCache groups;
};

/// The element type name the profile's peaks are keyed by ("f32", "bf16",
/// "f16"; other types count as f32).
std::string dtypeName(mlir::Type elementType);

/// Roofline seconds of an op of a per-device program (its types are the
/// local ones); 0 for ops without the cost interface (collectives).
double localComputeSeconds(mlir::Operation *op,
                           const cost::HardwareProfile &profile);

/// Alpha-beta seconds of a collective op of a per-device program; 0 for
/// other ops and for local_split and make_partial, which move nothing.
double collectiveOpSeconds(mlir::Operation *op, GroupCache &groups,
                           const cost::HardwareProfile &profile);

/// Whether `op` is a collective that moves data between devices.
bool isCommunication(mlir::Operation *op);

/// Seconds of any op of a per-device program: collectiveOpSeconds for the
/// collectives that move data, localComputeSeconds for the others.
double opSeconds(mlir::Operation *op, GroupCache &groups,
                 const cost::HardwareProfile &profile);

/// A compact layout: `[dp,-,tp]`, several axes on a dimension as `dp*tp`,
/// partial sums as `+sum(tp)`.
std::string compactLayout(const layout::TensorLayout &layout,
                          const layout::Mesh &mesh);
/// An op's layouts: `[dp,-] x [-,tp] -> [dp,tp]`.
std::string compactLayouts(const OpLayouts &layouts, const layout::Mesh &mesh);

/// Bytes for people: "1000 B", "1.5 MiB".
std::string formatBytes(double bytes);

/// The ONNX node an op came from (its name location), or "".
std::string nodeName(mlir::Operation *op);
/// The layer of an ONNX node: its name's first path component ("/blocks.3"
/// for "/blocks.3/attn/q/MatMul"); empty for a name with one component.
llvm::StringRef layerOf(llvm::StringRef node);

/// The profile the mesh runs on: `profile` with as many nodes as the
/// mesh's devices need (at least its own). `grown` says whether it grew.
cost::HardwareProfile profileForMesh(const cost::HardwareProfile &profile,
                                     const layout::Mesh &mesh, bool &grown);

} // namespace loom::sharding

#endif // LOOM_COMPILER_ANALYSIS_STEPCOST_H
