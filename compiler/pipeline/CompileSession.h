//===- CompileSession.h - One compile's attempts (private) ------*- C++ -*-===//
//
// Private to compiler/pipeline. A compile may build the step several times:
// `--stages auto` costs each pipeline shape, `--stage-meshes` compiles once
// per distinct submesh, and a plan over the memory limit is searched again
// under a lowered limit (keeping the ZeRO level and recompute the first
// search chose) or with the next pipeline shape. A CompileSession holds
// what those attempts share, for one call of compile(): the options (read
// only), the hardware profile, the log, and what one attempt tells the
// next. Each attempt gets its parallel configuration as a value.
//
// Return codes of the attempt functions: 0 on success, 1 after an error
// (in `error`), or one of the codes below.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PIPELINE_COMPILESESSION_H
#define LOOM_COMPILER_PIPELINE_COMPILESESSION_H

#include "common/plan/plan.pb.h"
#include "compiler/cost/HardwareProfile.h"
#include "compiler/explain/Explain.h"
#include "compiler/pipeline/CompileOptions.h"
#include "compiler/pipeline/Compiler.h"
#include "compiler/search/StageSplit.h"
#include "passes/pipeline/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom::pipeline {

class ExplanationRecorder;

/// An attempt's code for a candidate costed, not an error.
constexpr int kEvaluated = -1;
/// An attempt's code when a search under a lowered limit (after a plan
/// over the memory limit: `earlier` is set) finds no plan; the caller
/// reports the plan it had.
constexpr int kNoPlanUnderLoweredLimit = -2;

/// What --mode auto chose besides layouts, kept for the searches that
/// follow when a plan comes out over the memory limit.
struct AutoChoice {
  int zero = 0;
  std::string recompute;
};

/// One pipeline shape `--stages auto` weighs: an attempt costs it (the
/// stage split included) and stops before pipelining and emitting.
struct StageCandidate {
  int64_t stages = 1, microBatches = 1;
  std::string mesh;
  Schedule schedule = Schedule::OneFOneB;
  int64_t virtualStages = 2;
  /// How the summary names its schedule ("" for the one given).
  std::string describe() const;
  /// The configuration that compiles it: `base` with its mesh,
  /// micro-batches and schedule.
  ParallelConfig config(const ParallelConfig &base) const;
  /// The predicted step, and the largest stage's memory as the split
  /// counts it (state + saved results in flight).
  double seconds = 0, memoryBytes = 0;
  bool fits = false;
  /// Why it could not be costed, if it could not.
  std::string why;
  /// The layers' costs on one stage's submesh, the limit and the sends
  /// (of these layers' bytes) the split used: for the split over
  /// submeshes of different sizes.
  std::vector<search::LayerCost> layers;
  int64_t stageDevices = 0;
  double memoryLimit = 0;
  std::function<double(double)> sendSeconds;
};

/// How one attempt builds the step.
struct Attempt {
  ParallelConfig parallel;
  /// The search's memory limit in bytes per device (0: the profile's).
  int64_t searchLimit = 0;
  /// Each stage's function is made for a submesh of its own
  /// (--stage-meshes).
  bool ownStageMeshes = false;
  /// Set while `--stages auto` costs a candidate: the attempt fills it
  /// and returns kEvaluated.
  StageCandidate *evaluating = nullptr;
};

class CompileSession {
public:
  CompileSession(const CompileOptions &options, cost::HardwareProfile cluster,
                 llvm::raw_ostream &log)
      : options(options), cluster(std::move(cluster)), log(log) {}

  /// The whole compile: the planner's searches, then the plan with the
  /// training fields and initializers the options give.
  std::optional<CompileResult> run();
  /// The message of the last error.
  const std::string &message() const { return error; }

private:
  // Compile.cpp: one attempt.
  std::optional<plan::Plan> buildPlan(const Attempt &attempt, int &code);
  void finishPlan(plan::Plan &plan, const ParallelConfig &config) const;

  /// The options one attempt runs the passes with.
  CompileOptions attemptOptions(const Attempt &attempt) const;

  /// The schedule's checks against the stages and micro-batches.
  int checkPipelineShape(const ParallelConfig &config);
  /// A candidate of --stages auto from the stage split's report.
  void evaluate(const sharding::StageSplitReport &split,
                StageCandidate &candidate);

  // Planner.cpp: the searches over whole compiles.
  int chooseStages(ParallelConfig &chosen);
  std::optional<plan::Plan> compileWithinMemory(ParallelConfig &config);

  // StageMeshes.cpp: --stage-meshes.
  std::optional<plan::Plan> buildOnStageMeshes(const ParallelConfig &config,
                                               int64_t searchLimit, int &code);
  std::optional<llvm::StringMap<int64_t>>
  splitOverStageMeshes(const ParallelConfig &config, int64_t searchLimit,
                       llvm::ArrayRef<llvm::StringRef> meshes, int &code);

  /// Records `message` as the error; returns 1.
  int fail(const llvm::Twine &message) {
    error = message.str();
    return 1;
  }
  const std::string &modelPath() const { return options.model.path; }
  /// The batch one micro-batch of `config` imports (when one is bound).
  std::optional<int64_t> importBatch(const ParallelConfig &config) const;

  const CompileOptions &options;
  const cost::HardwareProfile cluster;
  llvm::raw_ostream &log;
  std::string error;
  /// Whether the import's notes were printed: a compile imports the model
  /// once per attempt, and says what it undid once.
  bool importNoted = false;

  /// The ZeRO level and recompute of the plan over the memory limit.
  std::optional<AutoChoice> earlier;
  /// The layers' stages the last compile chose (empty where given per
  /// node).
  llvm::StringMap<int64_t> chosenLayerStages;
  /// The shapes `--stages auto` costed, best first: the next is compiled
  /// when one's plan exceeds the memory limit.
  std::vector<StageCandidate> rankedShapes;
};

/// The messages between the stages of `plan`, each end checked against the
/// other: nullopt when they pair up, else what does not.
std::optional<std::string> checkStageMessages(const plan::Plan &plan);

} // namespace loom::pipeline

#endif // LOOM_COMPILER_PIPELINE_COMPILESESSION_H
