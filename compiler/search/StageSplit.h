//===- StageSplit.h - Pipeline stages over layers at least cost -*- C++ -*-===//
//
// The inter-op half of the search (Alpa's inter-operator pass, for one
// submesh shape): the layers of a training step, in order, each with its
// per-device costs on the stage's submesh, are split into P contiguous
// non-empty stages. With stage s taking t_s per micro-batch (its layers'
// forward and backward, plus the sends it makes) and u_s once per step
// (its gradients' reductions and updates), a GPipe or 1F1B step of M
// micro-batches takes
//
//     T = sum_s t_s + (M - 1) * max_s t_s + max_s u_s
//
// (the first micro-batch passes every stage, the others follow at the
// pace of the slowest; the updates of all stages run at once at the end).
// Stage s holds its layers' state for the whole step and the saved results
// of as many micro-batches as the schedule has in flight on it: all M
// under GPipe, min(M, P - s) under 1F1B. The split minimizes
// sum_s t_s + (M - 1) * max_s t_s exactly (Alpa's enumeration of the
// slowest stage's time, each with a dynamic program for the least sum),
// subject to every stage's memory within the limit; max_s u_s is reported,
// not optimized.
//
// Plain C++17, no MLIR: the pass that measures the layers
// (passes/Pipeline) and the driver that compares stage counts use it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_SEARCH_STAGESPLIT_H
#define LOOM_COMPILER_SEARCH_STAGESPLIT_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom::search {

/// One layer of a training step, per device of the stage's submesh.
struct LayerCost {
  std::string name;
  /// Forward and backward of one micro-batch: compute and the collectives
  /// inside the submesh.
  double microBatchSeconds = 0;
  /// Once per step: its gradients' reductions and its parameters' updates.
  double stepSeconds = 0;
  /// Held for the whole step: parameters, optimizer state, gradients.
  double stateBytes = 0;
  /// Kept from one micro-batch's forward for its backward.
  double savedBytes = 0;
  /// Per micro-batch, if a stage ends after this layer: the bytes the
  /// forward sends across that cut, and the bytes the backward sends back
  /// across it (the gradients of the same values).
  double forwardBytes = 0;
  double backwardBytes = 0;
};

struct StageSplitOptions {
  int64_t stages = 1;
  int64_t microBatches = 1;
  /// "gpipe" or "1f1b" (any other string counts as "1f1b").
  std::string schedule = "1f1b";
  /// Bytes per device; <= 0: unlimited.
  double memoryLimit = 0;
  /// Seconds one message of `bytes` takes from a stage to its neighbour;
  /// unset: sends are free. Called only for bytes > 0: a cut that carries
  /// nothing one way costs nothing that way.
  std::function<double(double bytes)> sendSeconds;
};

struct StageSplit {
  /// The index of each stage's first layer (starts[0] == 0, increasing).
  std::vector<size_t> starts;
  /// Per stage: t_s (its layers' microBatchSeconds plus the sends it makes:
  /// forward across its last cut, backward across its first), u_s, and the
  /// bytes it holds at its peak (state + in-flight * saved).
  std::vector<double> microBatchSeconds, stepSeconds, memoryBytes;
  /// T above.
  double seconds = 0;
  /// Whether every stage fits the memory limit. When no split does, the
  /// split returned is the one whose largest stage memory is least.
  bool fits = true;

  /// One past stage `s`'s last layer, of `layerCount` layers.
  size_t end(size_t s, size_t layerCount) const {
    return s + 1 < starts.size() ? starts[s + 1] : layerCount;
  }
};

/// T above for stages taking `micro[s]` per micro-batch and `step[s]` per
/// step.
double pipelineSeconds(const std::vector<double> &micro,
                       const std::vector<double> &step, int64_t microBatches);

/// How many micro-batches' saved results stage `stage` of `stages` holds at
/// once under `schedule`: M for gpipe, min(M, P - stage) for 1f1b.
int64_t inFlight(const std::string &schedule, int64_t stages,
                 int64_t microBatches, int64_t stage);

/// The split of `layers` into options.stages stages described above;
/// nullopt when there are fewer layers than stages (or no stages, or no
/// micro-batches). At equal cost the result is the same on every run.
std::optional<StageSplit> splitStages(const std::vector<LayerCost> &layers,
                                      const StageSplitOptions &options);

} // namespace loom::search

#endif // LOOM_COMPILER_SEARCH_STAGESPLIT_H
