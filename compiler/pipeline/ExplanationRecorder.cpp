//===- ExplanationRecorder.cpp - What the passes did, for the plan --------===//
//
// Each pass, by its argument, moves the attempt to a phase; the phase says
// how its diagnostics are quoted (with the ONNX node they name, from the
// sharding passes on) and what a failure means to the user.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/ExplanationRecorder.h"
#include "compiler/pipeline/OutputFile.h"

#include "compiler/analysis/StepCost.h"
#include "dialects/LoomDialect.h"
#include "passes/sharding/OptimizerSharding.h"
#include "passes/sharding/StrategyFile.h"
#include "passes/training/Recompute.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace llvm;

namespace loom::pipeline {

ExplanationRecorder::ExplanationRecorder(const CompileOptions &options,
                                         const cost::HardwareProfile &cluster,
                                         raw_ostream &log, bool lowered,
                                         bool evaluating)
    : options(options), cluster(cluster), log(log), lowered(lowered),
      evaluating(evaluating),
      recompute(options.parallel.recompute.value_or("")) {
  if (options.parallel.mesh.empty())
    explanation.emplace(cluster, std::nullopt, "single");
}

std::string ExplanationRecorder::meshText() const {
  return mesh ? mesh->toString() : options.parallel.mesh;
}

int ExplanationRecorder::zeroLevel() const {
  return func ? sharding::zeroLevel(func) : options.parallel.zero.value_or(0);
}

void ExplanationRecorder::collect(Diagnostic &d) {
  std::string where;
  if (phase >= Phase::Search && phase <= Phase::Partition)
    if (auto name = dyn_cast<NameLoc>(d.getLocation()))
      where = "ONNX node '" + name.getName().str() + "': ";
  diagnostics += where + d.str() + "\n";
}

void ExplanationRecorder::runBeforePass(Pass *pass, Operation *op) {
  StringRef name = pass->getArgument();
  static const std::pair<StringRef, Phase> phases[] = {
      {"loom-fuse-layer-norm", Phase::Cleanup},
      {"loom-mixed-precision", Phase::Precision},
      {"loom-build-training-graph", Phase::Training},
      {"loom-mark-recompute", Phase::Marks},
      {"loom-assign-mesh", Phase::Mesh},
      {"loom-apply-strategies", Phase::Strategies},
      {"loom-auto-sharding", Phase::Search},
      {"loom-propagate-sharding", Phase::Propagation},
      {"loom-shard-optimizer", Phase::Zero},
      {"loom-recompute", Phase::Recompute},
      {"loom-partition", Phase::Partition},
      {"loom-split-stages", Phase::SplitStages},
      {"loom-pipeline", Phase::Pipeline},
      {"loom-fuse-matmul-epilogue", Phase::Fusion}};
  for (const auto &[argument, next] : phases)
    if (name == argument) {
      // The stages' messages are their own, as the search's are not.
      if (next != phase &&
          (next == Phase::SplitStages || next == Phase::Pipeline))
        diagnostics.clear();
      phase = next;
    }
  // A pipeline costs its stages from the partitioned program (one
  // micro-batch over every stage); any other plan is costed as it runs,
  // after its gradient buckets and fused epilogues (Compile.cpp, at the
  // end).
  if (phase == Phase::SplitStages || phase == Phase::Pipeline)
    recordProgram();
  auto f = dyn_cast<func::FuncOp>(op);
  if (!f)
    return;
  if ((phase == Phase::Search || phase == Phase::Propagation) && !fixedNoted) {
    explanation->noteFixed(f);
    fixedNoted = true;
  }
  if (phase == Phase::Recompute && !mesh)
    explanation->recordShardings(f, nullptr);
}

void ExplanationRecorder::recordProgram() {
  if (programRecorded || !func)
    return;
  // Before the stages, fusion is yet to run.
  explanation->recordProgram(func, options.fuse && phase < Phase::Fusion);
  programRecorded = true;
}

/// "loom: pipeline stages by the cost model: 2 stages of 3, 2 layers; ...".
static void printSplit(raw_ostream &log, const sharding::StageSplitReport &r,
                       int64_t chunks) {
  const search::StageSplit &split = *r.split;
  double memory = 0;
  for (double m : split.memoryBytes)
    memory = std::max(memory, m);
  log << "loom: pipeline stages by the cost model: " << split.starts.size()
      << (chunks > 1 ? " chunks (" + std::to_string(chunks) + " per stage) of"
                     : " stages of");
  for (size_t s = 0; s < split.starts.size(); ++s)
    log << (s ? ", " : " ") << split.end(s, r.layers.size()) - split.starts[s];
  log << " layers; predicted step " << explain::formatSeconds(split.seconds)
      << ", the largest stage holding " << sharding::formatBytes(memory)
      << (split.fits ? ""
                     : " (over the limit: no split fits by this "
                       "count; the most compact)")
      << "\n";
}

void ExplanationRecorder::runAfterPass(Pass *pass, Operation *op) {
  if (const sharding::StageSplitReport *report =
          sharding::splitStagesReport(*pass)) {
    split = report;
    if (!evaluating)
      printSplit(log, *report,
                 options.parallel.schedule == Schedule::Interleaved
                     ? options.parallel.virtualStages
                     : 1);
    return;
  }
  if (const sharding::PipelineReport *report =
          sharding::pipelineReport(*pass)) {
    pipeline = report;
    explanation->recordPipeline(*report);
    return;
  }
  if (phase == Phase::Mesh && isa<ModuleOp>(op) && !mesh) {
    func = cast<ModuleOp>(op).lookupSymbol<func::FuncOp>("main");
    std::string error;
    mesh = sharding::toMesh(
        func->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName), error);
    bool grown = false;
    profile = sharding::profileForMesh(cluster, *mesh, grown);
    explanation.emplace(profile, *mesh,
                        std::string(toString(options.shardingMode())));
    return;
  }
  auto f = dyn_cast<func::FuncOp>(op);
  if (!f)
    return;
  if (const sharding::AutoShardingOutcome *outcome =
          sharding::autoShardingOutcome(*pass)) {
    if (!outcome->recompute.empty())
      recompute = outcome->recompute;
    const sharding::SearchReport &report = *outcome->report;
    searchReport = &report;
    int zero = outcome->zero;
    log << "loom: --mode auto on " << outcome->profile.name;
    if (outcome->grown)
      log << " x" << outcome->profile.nodes << " nodes";
    log << ": searched " << report.nodes << " ops (" << report.distinctOps
        << " distinct) in " << format("%.2f", outcome->seconds) << " s"
        << (outcome->searches > 1
                ? " over " + std::to_string(outcome->searches) + " searches"
                : "")
        << "; " << (zero ? "ZeRO-" + std::to_string(zero) + "; " : "")
        << (!recompute.empty() ? "recompute " + recompute + "; " : "")
        << "predicted step " << explain::formatSeconds(report.seconds) << ", "
        << sharding::formatBytes(report.memoryBytes) << " per device"
        << (report.exact ? " (exact search)" : " (heuristic search)") << "\n";
    return;
  }
  if (phase == Phase::Propagation) {
    explanation->recordShardings(f, searchReport);
    if (!options.saveStrategyFile.empty()) {
      if (std::string e =
              writeOutputFile(options.saveStrategyFile,
                              [&](llvm::raw_ostream &os) {
                                os << sharding::writeStrategyFile(f, *mesh);
                              });
          !e.empty())
        return fail(e);
    }
    return;
  }
  if (const sharding::ZeroReport *zero = sharding::shardOptimizerReport(*pass))
    explanation->recordZero(*zero);
  if (const sharding::RecomputeReport *report =
          sharding::recomputeReport(*pass)) {
    explanation->recordRecompute(*report, recompute);
    if (!mesh)
      func = f;
  }
}

void ExplanationRecorder::runAfterPassFailed(Pass *pass, Operation *op) {
  const std::string &model = options.model.path;
  if (const sharding::StageSplitReport *report =
          sharding::splitStagesReport(*pass))
    split = report;
  const std::string shard =
      model + ": cannot shard the model on " + meshText() + ": ";
  switch (phase) {
  case Phase::Cleanup:
    return fail("the clean-up passes failed");
  case Phase::Precision:
    return fail(model + ": cannot compute in " +
                toString(options.precision).str());
  case Phase::Training:
    return fail(model + ": cannot build the training step: " + diagnostics);
  case Phase::Marks:
    return fail(model + ": " + StringRef(diagnostics).rtrim().str());
  case Phase::Mesh:
  case Phase::Strategies:
    return fail(StringRef(diagnostics).rtrim().str());
  case Phase::Search:
    if (const sharding::AutoShardingOutcome *outcome =
            sharding::autoShardingOutcome(*pass)) {
      log << "loom: --mode auto on " << outcome->profile.name;
      if (outcome->grown)
        log << " x" << outcome->profile.nodes << " nodes";
      log << ": searched in " << format("%.2f", outcome->seconds) << " s"
          << (outcome->searches > 1
                  ? " over " + std::to_string(outcome->searches) + " searches"
                  : "")
          << "; no plan\n";
      log.flush();
    }
    lowerLimitMiss = lowered;
    return fail(shard + diagnostics);
  case Phase::Propagation:
    return fail(shard + diagnostics);
  case Phase::Zero:
    if (sharding::shardOptimizerReport(*pass))
      return fail(model + ": cannot shard the model on " + meshText() +
                  " with --zero " + std::to_string(zeroLevel()) + ": " +
                  diagnostics);
    return fail(model + ": cannot shard the optimizer (--zero " +
                std::to_string(zeroLevel()) + "): " + diagnostics);
  case Phase::Recompute:
  case Phase::Partition:
    return fail(model + ": cannot partition the model on " + meshText() + ": " +
                diagnostics);
  case Phase::SplitStages:
    return fail(model + ": " + StringRef(diagnostics).rtrim().str());
  case Phase::Pipeline:
    return fail(model + ": cannot pipeline the step on " +
                options.parallel.mesh + ": " +
                StringRef(diagnostics).rtrim().str());
  case Phase::Fusion:
    return fail(model + ": cannot fuse matmul epilogues: " +
                StringRef(diagnostics).rtrim().str());
  }
}

} // namespace loom::pipeline
