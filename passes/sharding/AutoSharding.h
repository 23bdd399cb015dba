//===- AutoSharding.h - The strategy search of --mode auto ------*- C++ -*-===//
//
// The search behind `loom-auto-sharding` (AutoShardingPass.cpp), and the
// pass's outcome: its report (what every op chose, at what cost, and what
// it beat) for the plan's explanation, through a pass instrumentation, and
// its progress through a callback.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SHARDING_AUTOSHARDING_H
#define LOOM_PASSES_SHARDING_AUTOSHARDING_H

#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"
#include "passes/sharding/RedistributionCosts.h"

#include "mlir/Pass/Pass.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::sharding {

/// What the search chose for one forward op.
struct SearchChoice {
  mlir::Operation *op = nullptr;
  /// The chosen layouts (compactLayouts).
  std::string layouts;
  NodeTerms terms;
  /// Whether the user fixed the op (loom.sharding or a strategy file).
  bool fixed = false;
  /// The runner-up: the op's best other candidate with every other op's
  /// choice held, its layouts and how much slower (seconds, counting the
  /// redistributions it implies) and bigger (bytes per device) it is.
  /// Empty when the op had one candidate.
  std::string runnerUp;
  double runnerUpSeconds = 0;
  double runnerUpMemory = 0;
};

struct SearchReport {
  std::vector<SearchChoice> choices;
  /// The objective: the search's predicted step time in seconds.
  double seconds = 0;
  /// Memory per device the search counted, in bytes.
  double memoryBytes = 0;
  /// Whether the cost-graph solve was exact (no greedy fallback).
  bool exact = true;
  /// Whether memory bound the choice (the fastest plan did not fit).
  bool memoryBound = false;
  /// The forward ops searched.
  int nodes = 0;
  /// Distinct op signatures whose candidates were costed (repeated layers
  /// share them).
  int distinctOps = 0;
};

struct SearchOptions {
  cost::HardwareProfile profile;
  /// Bytes per device; 0 means the profile's memory capacity.
  int64_t memoryLimit = 0;
  /// Only the fastest plan: fail (without a diagnostic) when it does not
  /// fit, instead of trading time for memory. One solve.
  bool fastestOnly = false;
  /// Whether a failure to fit names the largest tensors (a diagnostic on
  /// the function); a trial whose diagnostics nobody reads skips it.
  bool diagnose = true;
  /// The shares of the step's state (parameters, gradients, optimizer
  /// state) and of its saved results a device holds: 1 each, or under a
  /// pipeline of P stages 1/P and the micro-batches in flight over P (one
  /// micro-batch's program is searched, each stage holds its part).
  double stateShare = 1.0;
  double savedShare = 1.0;
  /// The gradient buckets' size (0: none): see StepShape::bucketBytes.
  int64_t bucketBytes = 0;
  /// Redistribution seconds shared with other searches on the same mesh
  /// and profile; null: the search computes its own.
  std::shared_ptr<RedistributionCosts> redistributions;
  /// Called as the search advances: a phase name and how far along it is.
  std::function<void(llvm::StringRef phase, int64_t done, int64_t total)>
      progress;
};

/// Chooses a sharding for every forward op of `func` (annotating each with
/// loom.sharding) by the cost model; fails with a diagnostic on `func`
/// when no plan fits the memory limit, naming the largest tensors.
mlir::FailureOr<SearchReport> searchShardings(mlir::func::FuncOp func,
                                              const SearchOptions &options);

/// What loom-auto-sharding did: the search's report (empty when it found
/// no plan), the ZeRO level and recompute it chose (with choose-zero and
/// choose-recompute; "layers" or empty), the searches it ran to choose
/// them (trials) and in all (the final search reuses the trial that found
/// its plan), its seconds, and the profile it costed on (grown to the
/// mesh).
struct AutoShardingOutcome {
  std::optional<SearchReport> report;
  int zero = 0;
  std::string recompute;
  int trials = 0;
  int searches = 0;
  double seconds = 0;
  cost::HardwareProfile profile;
  bool grown = false;
};

/// The outcome of `pass`, when it is a loom-auto-sharding that ran;
/// nullptr otherwise (for a pass instrumentation's report).
const AutoShardingOutcome *autoShardingOutcome(mlir::Pass &pass);

/// loom-auto-sharding, reporting its progress to `progress`.
std::unique_ptr<mlir::Pass> createAutoShardingPass(
    const AutoShardingOptions &options,
    std::function<void(llvm::StringRef phase, int64_t done, int64_t total)>
        progress);

} // namespace loom::sharding

#endif // LOOM_PASSES_SHARDING_AUTOSHARDING_H
