//===- ExplanationRecorder.h - What the passes did --------------*- C++ -*-===//
//
// Private to compiler/pipeline. A pass instrumentation on one compile
// attempt's pass manager: it builds the plan's explanation from what each
// pass did (the search's report, the layouts after propagation, ZeRO's and
// recompute's reports), prints the search's summary line, collects the
// passes' diagnostics, and turns a failed pass into the message `loom
// compile` gives for it. The passes themselves know nothing of it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PIPELINE_EXPLANATIONRECORDER_H
#define LOOM_COMPILER_PIPELINE_EXPLANATIONRECORDER_H

#include "compiler/cost/HardwareProfile.h"
#include "compiler/explain/Explain.h"
#include "compiler/pipeline/CompileOptions.h"
#include "passes/pipeline/Pipeline.h"
#include "passes/sharding/AutoSharding.h"

#include "common/layout/Mesh.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace loom::pipeline {

class ExplanationRecorder : public mlir::PassInstrumentation {
public:
  /// `options` are the attempt's; `lowered` says that a search found no
  /// plan under a lowered memory limit is not an error (the planner
  /// reports the plan it had).
  ExplanationRecorder(const CompileOptions &options,
                      const cost::HardwareProfile &cluster,
                      llvm::raw_ostream &log, bool lowered, bool evaluating);

  void runBeforePass(mlir::Pass *pass, mlir::Operation *op) override;
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override;
  void runAfterPassFailed(mlir::Pass *pass, mlir::Operation *op) override;

  /// Collects a diagnostic as the running pass's failure message quotes it.
  void collect(mlir::Diagnostic &diagnostic);

  /// After a failed run: the message, and whether it is the search's
  /// failure under a lowered limit.
  const std::string &failure() const { return message; }
  bool noPlanUnderLoweredLimit() const { return lowerLimitMiss; }

  std::optional<explain::ExplanationBuilder> explanation;
  /// @main; on a mesh, its stage submesh and the profile grown to it.
  mlir::func::FuncOp func;
  std::optional<layout::Mesh> mesh;
  cost::HardwareProfile profile;
  /// The stage split's and the pipeline's reports, while the pass manager
  /// that ran them lives.
  const sharding::StageSplitReport *split = nullptr;
  const sharding::PipelineReport *pipeline = nullptr;

  /// Records @main's costs, once: before the stages split it, else as it
  /// runs (after the last pass).
  void recordProgram();

private:
  enum class Phase {
    Cleanup,
    Precision,
    Training,
    Marks,
    Mesh,
    Strategies,
    Search,
    Propagation,
    Zero,
    Recompute,
    Partition,
    SplitStages,
    Pipeline,
    Fusion
  };
  void fail(const std::string &text) { message = text; }
  std::string meshText() const;
  int zeroLevel() const;

  const CompileOptions &options;
  const cost::HardwareProfile &cluster;
  llvm::raw_ostream &log;
  const bool lowered, evaluating;
  bool programRecorded = false;
  Phase phase = Phase::Cleanup;
  bool fixedNoted = false;
  std::string diagnostics;
  std::string message;
  bool lowerLimitMiss = false;
  /// The policy of the recompute marks (the user's, or the search's).
  std::string recompute;
  const sharding::SearchReport *searchReport = nullptr;
};

} // namespace loom::pipeline

#endif // LOOM_COMPILER_PIPELINE_EXPLANATIONRECORDER_H
