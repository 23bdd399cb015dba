//===- Explain.h - What a plan is predicted to cost, and why ----*- C++ -*-===//
//
// A plan carries an Explanation (common/plan/plan.proto): per ONNX node the
// layouts chosen, its compute, communication and memory terms, how its
// layouts were chosen and, under --mode auto, the runner-up it beat; and
// the predicted step time and memory per device. `loom compile` and `loom
// simulate` build it in three steps around sharding and partitioning;
// `loom explain` prints it.
//
// The step time is the sum, over the per-device program, of each op's
// roofline time and each collective's alpha-beta time (the runtime runs
// them one after the other); the memory is the plan's own static memory
// plan (state plus activation arena).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_EXPLAIN_EXPLAIN_H
#define LOOM_COMPILER_EXPLAIN_EXPLAIN_H

#include "common/plan/plan.pb.h"
#include "compiler/cost/HardwareProfile.h"
#include "passes/pipeline/Pipeline.h"
#include "passes/sharding/AutoSharding.h"
#include "passes/sharding/OptimizerSharding.h"
#include "passes/training/Recompute.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <set>
#include <string>

namespace loom::explain {

class ExplanationBuilder {
public:
  /// `mesh` is absent for a single-device plan.
  ExplanationBuilder(cost::HardwareProfile profile,
                     std::optional<layout::Mesh> mesh, std::string mode);

  /// Before sharding: remembers the ops the user fixed.
  void noteFixed(mlir::func::FuncOp func);
  /// After sharding, before partitioning: one node per ONNX node of the
  /// forward ops, with its layouts, memory and (from `search`) runner-up.
  void recordShardings(mlir::func::FuncOp func,
                       const sharding::SearchReport *search);
  /// After recompute: what it marked and no longer keeps (nothing when it
  /// marked no op); `policy` is how the ops were marked.
  void recordRecompute(const sharding::RecomputeReport &recompute,
                       const std::string &policy);
  /// After optimizer sharding: its level and what it split and saved.
  void recordZero(const sharding::ZeroReport &zero);
  /// After partitioning: every op's predicted time, added to its node.
  /// With `fusedLater`, the program is yet to be fused
  /// (loom-fuse-matmul-epilogue), and the ops the fusion removes cost
  /// nothing.
  void recordProgram(mlir::func::FuncOp program, bool fusedLater);
  /// After pipelining: the stages and the schedule. The step time becomes
  /// the schedule's, (M + P - 1) micro-batch slots of one stage's time,
  /// taking the stages as equal (1/P of the micro-batch's program each).
  void recordPipeline(const sharding::PipelineReport &pipeline);
  /// The explanation, with the plan's memory totals.
  plan::Explanation finish() const { return explanation; }

private:
  plan::Explanation::Node &nodeFor(const std::string &name);

  cost::HardwareProfile profile;
  /// The mesh, or one device when the plan has none.
  layout::Mesh mesh;
  bool hasMesh;
  plan::Explanation explanation;
  std::map<std::string, int> nodeIndex;
  std::set<mlir::Operation *> fixed;
  /// Nodes recordShardings made (named by their forward ops).
  std::set<std::string> forwardNodes;
};

struct PrintOptions {
  /// Show only the N nodes with the largest predicted time (0: all, in
  /// program order).
  int top = 0;
};

/// Prints `plan`'s explanation for people, under `title` (e.g. "plan
/// gpt.plan").
void printExplanation(const plan::Plan &plan, const std::string &title,
                      const PrintOptions &options, llvm::raw_ostream &os);

/// Where the plan's largest stage peaks: "at its peak [on stage s], <op> of
/// '<node>', its step arena holds ... (state ... beside it); the largest
/// there:" and a line per value among the `top` largest live there (bytes,
/// local shape, what made it). Empty for a plan without instructions.
std::string describeArenaPeak(const plan::Plan &plan, size_t top);

/// "12.345 ms" (or us / s as fits).
std::string formatSeconds(double seconds);

} // namespace loom::explain

#endif // LOOM_COMPILER_EXPLAIN_EXPLAIN_H
