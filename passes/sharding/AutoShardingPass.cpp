//===- AutoShardingPass.cpp - loom-auto-sharding --------------------------===//
//
// The pass over searchShardings (AutoSharding.cpp): the profile grown to
// the mesh, a pipeline stage's shares of state and saved results, and,
// with choose-zero and choose-recompute, the ZeRO level and recompute as
// part of the search when memory binds (trial searches on a copy of the
// function). Its outcome is kept for a pass instrumentation to report.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/ShardingSupport.h"
#include "passes/Passes.h"
#include "passes/sharding/AutoSharding.h"
#include "passes/sharding/OptimizerSharding.h"
#include "passes/training/Recompute.h"

#include "compiler/search/StageSplit.h"

#include "mlir/IR/Builders.h"

#include <chrono>

namespace loom {
#define GEN_PASS_DEF_AUTOSHARDING
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::sharding;

namespace {

struct AutoShardingPass
    : public loom::impl::AutoShardingBase<AutoShardingPass> {
  using AutoShardingBase::AutoShardingBase;
  void runOnOperation() override;

  /// The ZeRO level and recompute policy ("" or "layers") at which the
  /// fastest plan fits; the most compact when none does. The trial that
  /// found a plan is kept in `winner`.
  std::pair<int, std::string>
  choosePolicy(func::FuncOp func, const SearchOptions &base, int given);
  SearchOptions searchOptions(const cost::HardwareProfile &profile) const;
  /// The search of `func`: the winning trial's, when it searched `func` as
  /// it now is (same level and marks), else a search of its own.
  FailureOr<SearchReport> finalSearch(func::FuncOp func,
                                      const SearchOptions &search);

  /// A trial that found a plan: its copy of the function, with the
  /// shardings the search chose, and the search's report.
  struct Winner {
    func::FuncOp trial;
    int level = 0;
    SearchReport report;
  };
  std::optional<Winner> winner;

  std::function<void(StringRef, int64_t, int64_t)> progress;
  AutoShardingOutcome outcome;
};

/// Sets on `func` what the search of `trial`, a copy of it, set on the
/// copy's ops (their shardings), and maps `report` onto `func`'s ops.
void adoptTrial(func::FuncOp func, func::FuncOp trial, SearchReport &report) {
  SmallVector<Operation *> ours, theirs;
  func.getBody().walk([&](Operation *op) { ours.push_back(op); });
  trial.getBody().walk([&](Operation *op) { theirs.push_back(op); });
  assert(ours.size() == theirs.size() && "the trial is a copy");
  llvm::DenseMap<Operation *, Operation *> counterpart;
  for (auto [mine, copy] : llvm::zip(ours, theirs)) {
    counterpart[copy] = mine;
    if (mine->getAttrDictionary() != copy->getAttrDictionary())
      mine->setAttrs(copy->getAttrDictionary());
  }
  for (SearchChoice &choice : report.choices)
    choice.op = counterpart.lookup(choice.op);
}

FailureOr<SearchReport>
AutoShardingPass::finalSearch(func::FuncOp func, const SearchOptions &search) {
  // A successful trial searched a copy of `func` with the same level and
  // recompute marks: the same search, already done.
  if (winner && winner->level == zeroLevel(func)) {
    SearchReport report = std::move(winner->report);
    adoptTrial(func, winner->trial, report);
    winner->trial.erase();
    winner.reset();
    return report;
  }
  if (winner)
    winner->trial.erase();
  winner.reset();
  ++outcome.searches;
  return searchShardings(func, search);
}

SearchOptions
AutoShardingPass::searchOptions(const cost::HardwareProfile &hw) const {
  SearchOptions search;
  search.profile = hw;
  search.memoryLimit = memoryLimit;
  search.bucketBytes = bucketBytes;
  search.progress = progress;
  if (stages > 1) {
    // One micro-batch's program is searched; a stage holds about 1/P of
    // the state and stage 0 the most micro-batches in flight.
    double p = static_cast<double>(stages);
    search.stateShare = 1.0 / p;
    search.savedShare =
        search::inFlight(stringifyPipelineSchedule(schedule).str(), stages,
                         microBatches, 0, virtualStages) /
        p;
  }
  return search;
}

std::pair<int, std::string>
AutoShardingPass::choosePolicy(func::FuncOp func, const SearchOptions &base,
                               int given) {
  // Level 1 is not tried without micro-batches: level 2 communicates as
  // much and holds less. With them it holds as much (the gradients add up
  // whole until the step's reduce-scatter), and level 1 is tried first.
  std::vector<int> levels = !chooseZero        ? std::vector<int>{given}
                            : microBatches > 1 ? std::vector<int>{0, 1, 2, 3}
                                               : std::vector<int>{0, 2, 3};
  std::vector<std::string> policies = {""};
  if (chooseRecompute)
    policies.push_back("layers");
  auto fits = [&](int level, const std::string &policy, bool fastestOnly) {
    OpBuilder builder(func);
    auto trial = cast<func::FuncOp>(builder.clone(*func));
    trial.setSymName("main_trial");
    trial->setAttr(LoomDialect::kZeroAttrName,
                   builder.getI64IntegerAttr(level));
    std::string ignored;
    bool marked =
        policy.empty() || succeeded(markRecompute(trial, policy, ignored));
    SearchOptions search = base;
    search.fastestOnly = fastestOnly;
    search.diagnose = false; // quiet: see runOnOperation
    FailureOr<SearchReport> report = failure();
    if (marked)
      report = searchShardings(trial, search);
    outcome.trials += marked;
    outcome.searches += marked;
    if (failed(report)) {
      trial.erase();
      return false;
    }
    // A plan: the one the final search would find (with fastestOnly, the
    // fastest plan fits, which the final search tries first).
    if (winner)
      winner->trial.erase();
    winner = Winner{trial, level, std::move(*report)};
    return true;
  };
  // With micro-batches, recomputing comes before the higher levels:
  // ZeRO-3 re-gathers parameters that the micro-batches share, and
  // level 2 saves no gradient memory (see above).
  if (microBatches > 1)
    for (int level : levels)
      for (const std::string &policy : policies)
        if (fits(level, policy, /*fastestOnly=*/true))
          return {level, policy};
  for (const std::string &policy : policies) {
    for (int level : levels)
      if (fits(level, policy, /*fastestOnly=*/true))
        return {level, policy};
    if (fits(levels.back(), policy, /*fastestOnly=*/false))
      return {levels.back(), policy};
  }
  return {levels.back(), policies.back()};
}

void AutoShardingPass::runOnOperation() {
  auto start = std::chrono::steady_clock::now();
  func::FuncOp func = getOperation();
  outcome = AutoShardingOutcome();
  winner.reset();
  auto mesh = meshOf(func, "loom-auto-sharding");
  if (failed(mesh))
    return signalPassFailure();
  std::string error;
  std::optional<cost::HardwareProfile> hw = cost::findProfile(profile, error);
  if (!hw) {
    func.emitError() << error;
    return signalPassFailure();
  }
  outcome.profile = profileForMesh(*hw, mesh->second, outcome.grown);
  SearchOptions search = searchOptions(outcome.profile);
  // The trials and the final search redistribute the same tensors.
  search.redistributions =
      std::make_shared<RedistributionCosts>(mesh->second, outcome.profile);
  int zero = zeroLevel(func);
  if (chooseZero || chooseRecompute) {
    // The trials' diagnostics are not the search's: only the final
    // search's failure is reported.
    ScopedDiagnosticHandler quiet(&getContext(),
                                  [](Diagnostic &) { return success(); });
    auto [level, policy] = choosePolicy(func, search, zero);
    zero = level;
    if (!policy.empty() && succeeded(markRecompute(func, policy, error)))
      outcome.recompute = policy;
  }
  outcome.zero = zero;
  if (zero > 0)
    func->setAttr(LoomDialect::kZeroAttrName,
                  OpBuilder(func).getI64IntegerAttr(zero));
  FailureOr<SearchReport> report = finalSearch(func, search);
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (failed(report))
    return signalPassFailure();
  outcome.report = std::move(*report);
  Builder b(func.getContext());
  func->setAttr(
      LoomDialect::kSearchAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("cost", b.getF64FloatAttr(outcome.report->seconds)),
           b.getNamedAttr("memory", b.getI64IntegerAttr(static_cast<int64_t>(
                                        outcome.report->memoryBytes))),
           b.getNamedAttr("exact", b.getBoolAttr(outcome.report->exact))}));
}

} // namespace

const AutoShardingOutcome *loom::sharding::autoShardingOutcome(Pass &pass) {
  if (pass.getTypeID() != TypeID::get<AutoShardingPass>())
    return nullptr;
  return &static_cast<AutoShardingPass &>(pass).outcome;
}

std::unique_ptr<Pass> loom::sharding::createAutoShardingPass(
    const AutoShardingOptions &options,
    std::function<void(StringRef, int64_t, int64_t)> progress) {
  auto pass = std::make_unique<AutoShardingPass>(options);
  pass->progress = std::move(progress);
  return pass;
}
