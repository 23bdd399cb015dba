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
// Stage s holds its layers' state for the whole step, the saved results
// of as many micro-batches as the schedule has in flight on it (all M
// under GPipe, min(M, P - s) under 1F1B), and its layers' largest
// transient working set. The split minimizes
// sum_s t_s + (M - 1) * max_s t_s exactly (Alpa's enumeration of the
// slowest stage's time, each with a dynamic program for the least sum),
// subject to every stage's memory within the limit; max_s u_s is reported,
// not optimized.
//
// Interleaved 1F1B (Megatron-LM's schedule with V model chunks per device)
// splits the layers into P * V contiguous chunks, chunk c on device c mod P.
// With chunk c taking t_c per micro-batch and device d the sum T_d of its
// chunks', a step takes
//
//     T = (1 / V) sum_c t_c + (M - 1 / V) max_d T_d + max_d u_d
//
// (the pipe fills and drains through one chunk per device instead of a
// whole stage: for equal chunks, (M V + P - 1) t, a bubble of
// (P - 1) / (M V + P - 1)); for V = 1 it is the formula above. A device
// holds its chunks' state, its chunks' largest transient, and the saved
// results of the micro-batches its order holds at once per chunk. The
// split minimizes this T under the memory limit per device: exactly, over
// every split, when there are at most `exhaustiveSplits` of them (C(L - 1,
// P V - 1) for L layers); else by descent from the split of the chunks as
// P * V stages of a 1F1B pipeline over M * V micro-batches (V times T for
// equal chunks, each chunk within 1/V of the limit), moving runs of
// consecutive cuts by a layer while the best such move improves T (or,
// while nothing fits, the largest device's memory). The descent ends in a
// local optimum, no worse than where it starts.
//
// Stages on submeshes of different sizes (Alpa's inter-op pass over layers
// and submeshes): given, for several submesh shapes, every layer's costs on
// a stage of that shape, splitOnSubmeshes chooses the stages' layers and
// each stage's shape together, the shapes' devices adding up to the
// cluster's, minimizing the same GPipe/1F1B T. A stage's in-flight count
// is as above, from its position counted from the last stage.
//
// Plain C++17, no MLIR: the pass that measures the layers
// (passes/pipeline/Pipeline) and the driver that compares stage counts use it.
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
  /// The most bytes of values that live only while a micro-batch passes
  /// the layer (forward results the backward does not keep, gradients,
  /// recomputed results) live at once while its ops run. A stage adds its
  /// layers' largest once: its units run one at a time.
  double transientBytes = 0;
  /// Per micro-batch, if a stage ends after this layer: the bytes the
  /// forward sends across that cut, and the bytes the backward sends back
  /// across it (the gradients of the same values).
  double forwardBytes = 0;
  double backwardBytes = 0;
};

struct StageSplitOptions {
  int64_t stages = 1;
  int64_t microBatches = 1;
  /// "gpipe", "1f1b" or "interleaved" (any other string counts as
  /// "1f1b").
  std::string schedule = "1f1b";
  /// Model chunks per device under "interleaved" (else 1).
  int64_t virtualStages = 1;
  /// Bytes per device; <= 0: unlimited.
  double memoryLimit = 0;
  /// Under "interleaved", the most splits tried one by one (above, a
  /// descent).
  double exhaustiveSplits = 20000;
  /// Seconds one message of `bytes` takes from a stage to its neighbour;
  /// unset: sends are free. Called only for bytes > 0: a cut that carries
  /// nothing one way costs nothing that way.
  std::function<double(double bytes)> sendSeconds;
};

struct StageSplit {
  /// The index of each stage's first layer (starts[0] == 0, increasing);
  /// under "interleaved", of each chunk's (P * V of them).
  std::vector<size_t> starts;
  /// Per stage (per chunk under "interleaved"): t_s (its layers'
  /// microBatchSeconds plus the sends it makes: forward across its last
  /// cut, backward across its first) and u_s.
  std::vector<double> microBatchSeconds, stepSeconds;
  /// Per stage (per device), the bytes it holds at its peak (state +
  /// in-flight * saved + the largest transient, summed over a device's
  /// chunks).
  std::vector<double> memoryBytes;
  /// T above.
  double seconds = 0;
  /// Whether every stage fits the memory limit. When no split does, the
  /// split returned is the one whose largest stage memory is least (under
  /// "interleaved" past the exhaustive budget, the least the descent
  /// reaches).
  bool fits = true;

  /// One past stage `s`'s last layer, of `layerCount` layers.
  size_t end(size_t s, size_t layerCount) const {
    return s + 1 < starts.size() ? starts[s + 1] : layerCount;
  }
};

/// T above for stages taking `micro[s]` per micro-batch and `step[s]` per
/// step; with `virtualStages` V > 1, `micro` is per chunk (chunk c on
/// device c mod (micro.size() / V)) and `step` per device or per chunk
/// (summed per device).
double pipelineSeconds(const std::vector<double> &micro,
                       const std::vector<double> &step, int64_t microBatches,
                       int64_t virtualStages = 1);

/// Model chunks per device under `schedule`: `virtualStages` (at least 1)
/// for "interleaved", else 1.
int64_t chunksPerStage(const std::string &schedule, int64_t virtualStages);

/// One unit of a device's schedule: micro-batch `microBatch`'s forward or
/// backward through the device's chunk `chunk` (0 to V - 1; chunk v of
/// device d is the pipeline's chunk v * P + d).
struct ScheduleUnit {
  int64_t microBatch = 0;
  int64_t chunk = 0;
  bool backward = false;
  bool operator==(const ScheduleUnit &o) const {
    return microBatch == o.microBatch && chunk == o.chunk &&
           backward == o.backward;
  }
};

/// The order in which device `stage` of `stages` runs its units:
///  - gpipe: every forward, then every backward;
///  - 1f1b: P - 1 - stage forwards, then one forward and one backward in
///    turn, then the remaining backwards;
///  - interleaved (V chunks per device, M a multiple of P): the forwards
///    in groups of P micro-batches through chunk 0, then chunk 1, ..., the
///    backwards likewise from chunk V - 1 down; 2 (P - 1 - stage) +
///    (V - 1) P forwards first, then one forward and one backward in turn.
/// Empty for an interleaved schedule whose M is not a multiple of P.
std::vector<ScheduleUnit> scheduleOrder(const std::string &schedule,
                                        int64_t stages, int64_t microBatches,
                                        int64_t stage,
                                        int64_t virtualStages = 1);

/// How many micro-batches' saved results device `stage` of `stages` holds
/// at once under `schedule`: M for gpipe, min(M, P - stage) for 1f1b; for
/// interleaved, the most forward units it holds at once over V (units of
/// a whole device's saved results when its chunks are equal).
double inFlight(const std::string &schedule, int64_t stages,
                int64_t microBatches, int64_t stage, int64_t virtualStages = 1);

/// The most micro-batches whose saved results the device's chunk `chunk`
/// (0 to V - 1) holds at once under `schedule`.
int64_t chunkInFlight(const std::string &schedule, int64_t stages,
                      int64_t microBatches, int64_t stage, int64_t chunk,
                      int64_t virtualStages = 1);

/// The split of `layers` into options.stages stages described above;
/// nullopt when there are fewer layers than stages (or no stages, or no
/// micro-batches). At equal cost the result is the same on every run.
std::optional<StageSplit> splitStages(const std::vector<LayerCost> &layers,
                                      const StageSplitOptions &options);

/// One submesh shape a stage may run on: its devices, and the per-device
/// costs of every layer on a stage of this shape (the same layers, in the
/// same order, for every shape).
struct SubmeshShape {
  std::string name;
  int64_t devices = 1;
  std::vector<LayerCost> layers;
  /// Seconds a stage of this shape takes to send `bytes` to the next
  /// stage (its ranks' distance to the next stage's is its own size);
  /// unset: SubmeshSplitOptions::sendSeconds.
  std::function<double(double bytes)> sendSeconds;
};

struct SubmeshSplitOptions {
  /// The cluster's devices: the stages' shapes use exactly these.
  int64_t devices = 1;
  int64_t microBatches = 1;
  /// "gpipe" or "1f1b" (any other string counts as "1f1b").
  std::string schedule = "1f1b";
  /// Bytes per device; <= 0: unlimited.
  double memoryLimit = 0;
  /// As in StageSplitOptions, for the shapes without their own. A stage's
  /// sends are costed on its own shape (the bytes its layout holds per
  /// device across the cut).
  std::function<double(double bytes)> sendSeconds;
  /// When not empty, the stages' shapes, first to last (indices into the
  /// shapes given; their devices must add up to `devices`): only the
  /// layers are chosen (--stage-meshes).
  std::vector<size_t> stageShapes;
};

struct SubmeshSplit {
  /// The index of each stage's first layer, and each stage's shape (an
  /// index into the shapes given).
  std::vector<size_t> starts, shapes;
  /// Per stage: t_s, u_s and its memory per device, on its shape.
  std::vector<double> microBatchSeconds, stepSeconds, memoryBytes;
  /// T of the split.
  double seconds = 0;

  size_t end(size_t s, size_t layerCount) const {
    return s + 1 < starts.size() ? starts[s + 1] : layerCount;
  }
};

/// The split of the layers into contiguous stages, each on one of `shapes`
/// with the shapes' devices summing to options.devices, that minimizes
/// sum_s t_s + (M - 1) max_s t_s (exactly: the enumeration of the slowest
/// stage's time, each with a dynamic program over layers, devices left and
/// stages left) with every stage within the memory limit. nullopt when no
/// such split exists (the shapes' layers differ, no sum of shapes makes the
/// devices, or nothing fits). With options.stageShapes, the stages and
/// their shapes are those, and only the layers are chosen. At equal cost
/// the result is the same on every run.
std::optional<SubmeshSplit>
splitOnSubmeshes(const std::vector<SubmeshShape> &shapes,
                 const SubmeshSplitOptions &options);

} // namespace loom::search

#endif // LOOM_COMPILER_SEARCH_STAGESPLIT_H
