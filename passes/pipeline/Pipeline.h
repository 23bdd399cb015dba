//===- Pipeline.h - Pipeline stages and micro-batch schedules ---*- C++ -*-===//
//
// Pipeline parallelism and gradient accumulation on a partitioned training
// step. `@main` is one device's program for one micro-batch; pipelining it
//  - gives every op a stage: forward ops by their ONNX layer (the first
//    path component of the node name), contiguous layers balanced over the
//    stages by op count, unless the user set `loom.stage` on ONNX nodes;
//    other forward ops join the latest stage of their operands; backward
//    ops follow the forward ops of their node; a parameter's gradient
//    reduction and update run on the stage that uses the parameter;
//  - unrolls M micro-batches: forward and backward run once per
//    micro-batch; gradients add up over the micro-batches before their
//    reduction collectives (so these run once per step, as without
//    micro-batches) and are scaled by 1/M; the loss is the micro-batch
//    losses' mean;
//  - orders each stage's work by the schedule (search::scheduleOrder):
//    GPipe (every forward, then every backward), 1F1B (stage s of P runs
//    P-1-s forwards, then alternates one forward and one backward, then
//    the remaining backwards) or interleaved 1F1B (the layers cut into
//    P * V chunks, chunk c on stage c mod P: each stage runs V chunks of
//    every micro-batch), then the reductions and updates;
//  - cuts the step into one function per stage, `@main_stage<s>`, with
//    `loom.send` / `loom.recv` where a value crosses stages; the loss goes
//    from the last stage to every other.
//
// Stage s runs on the ranks whose coordinate on the pipeline axis is s; a
// stage function's mesh is the stage's submesh, the same for every stage,
// so its collectives stay inside the stage. With ownMeshes, stages are
// taken from compiles on different submeshes, and values cross as compute
// ops' results whatever the submesh (crossAtRoots). Each micro-batch's inputs
// are arguments of their own (`loom.micro_batch`). A value sent by stage s in
// micro-batch k to stage d has tag (index * M + k) * P + d, where index
// numbers the values that cross stages; the loss's tags follow them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PIPELINE_PIPELINE_H
#define LOOM_PASSES_PIPELINE_PIPELINE_H

#include "compiler/analysis/StepCost.h"
#include "compiler/search/StageSplit.h"
#include "dialects/LoomEnums.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::sharding {

struct PipelineOptions {
  int64_t stages = 1;
  int64_t microBatches = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// Model chunks per stage under the interleaved schedule (at least 2
  /// there; 1 for the others). User stages (nodeStages) and the stage search's
  /// split (layerStages) then number chunks, 0 to stages * virtualStages - 1.
  int64_t virtualStages = 1;
  /// The micro-batches the report's time and bubble are for, when fewer
  /// are built (0: microBatches). `loom simulate` builds a few: a 1F1B or
  /// interleaved schedule holds at most a bounded number in flight, so the
  /// programs' memory does not grow past them, and the time is the
  /// schedule's formula over the per-micro-batch costs.
  int64_t costedMicroBatches = 0;
  /// The pipeline axis's name in the plan's mesh.
  std::string axis = "pp";
  /// Stages the user set, per ONNX node name (taken from `loom.stage`
  /// before partitioning, which does not keep it).
  llvm::StringMap<int64_t> nodeStages;
  /// Stages per ONNX layer (the stage search's split), used instead of
  /// balancing the layers by op count; every layer must have one.
  llvm::StringMap<int64_t> layerStages;
  /// The per-device seconds of an op of the partitioned step. When set,
  /// the report gives each stage's time and the predicted step.
  std::function<double(mlir::Operation *)> opSeconds;
  /// Seconds one message of `bytes` takes to a neighbouring stage.
  std::function<double(double bytes)> sendSeconds;
  /// Every stage runs on a submesh of its own, and each stage's function is
  /// taken from a compile on that submesh (`--stage-meshes`): the values
  /// that cross stages must then be the same whatever the submesh, so they
  /// cross as what compute ops made, never as a collective's redistribution
  /// of it (see crossAtRoots in Pipeline.cpp). Needs the ops' result
  /// layouts (loom-partition's record-layouts); sends and receives carry
  /// theirs, and the stage functions are marked `own_mesh`.
  bool ownMeshes = false;
};

struct PipelineReport {
  struct Stage {
    /// The first and last ONNX layer of its forward ops.
    std::string firstLayer, lastLayer;
    /// Under "interleaved", per chunk of the stage: its first and last
    /// ONNX layer.
    std::vector<std::pair<std::string, std::string>> chunks;
    /// Ops of its function (one micro-batch's forward ops counted once).
    int forwardOps = 0;
    int sends = 0;
    /// With options.opSeconds: one micro-batch's forward and backward
    /// (with the sends it makes), and the once-per-step reductions and
    /// updates.
    double microBatchSeconds = 0, stepSeconds = 0;
  };
  std::vector<Stage> stages;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int64_t microBatches = 1;
  int64_t virtualStages = 1;
  /// (P - 1) / (V M + P - 1): the idle fraction of the schedule when the
  /// stages (chunks) take equal time.
  double bubbleFraction = 0;
  /// With options.opSeconds: the predicted step, search::pipelineSeconds
  /// of the stages' times.
  double seconds = 0;
  /// The chunk of every ONNX layer, where the stages were given by layer
  /// (balanced, or options.layerStages); empty where the user gave stages
  /// per node.
  llvm::StringMap<int64_t> layerStages;
};

/// Replaces the partitioned training step `func` (`@main`) by its stage
/// functions. Fails with `error` naming the op or parameter when the step
/// cannot be pipelined (a parameter used by two stages, fewer layers than
/// stages or chunks, a user stage earlier than its input's, an interleaved
/// schedule whose micro-batches are not a multiple of the stages).
mlir::FailureOr<PipelineReport> pipelineStep(mlir::func::FuncOp func,
                                             const PipelineOptions &options,
                                             std::string &error);

/// The ONNX layers of the partitioned training step `func`, in order, with
/// their per-device costs for the stage search: each layer measured as if
/// it were a stage of its own (options.opSeconds for times, local types
/// for bytes). Fails as pipelineStep would with one stage per layer (a
/// parameter used by two layers, a step that is not a training step).
mlir::FailureOr<std::vector<search::LayerCost>>
measureLayers(mlir::func::FuncOp func, const PipelineOptions &options,
              std::string &error);

/// The costs pipelining splits and reports by: ops of the per-device
/// program on the stage's submesh, and sends from a rank to the same rank
/// of the next stage, on `profile` grown to `stages` times the submesh.
class StageCosts {
public:
  StageCosts(const cost::HardwareProfile &profile, const layout::Mesh &stage,
             int64_t stages);
  StageCosts(const StageCosts &) = delete;
  /// Sets `options`' opSeconds and sendSeconds (which refer to this).
  void apply(PipelineOptions &options) const;
  const cost::HardwareProfile &stageProfile() const { return stage; }
  int64_t stageDevices() const { return devices; }

private:
  /// Its own copy: the group cache refers to it.
  layout::Mesh mesh;
  cost::HardwareProfile stage, whole;
  int64_t devices;
  mutable GroupCache groups;
};

/// What loom-split-stages found: the layers' costs on the stage's
/// submesh, the split (empty when there is none), the memory limit it
/// split under, the stage's devices and the sends' seconds of these
/// layers' bytes (by value); `why` when the layers could not be costed or
/// split.
struct StageSplitReport {
  std::vector<search::LayerCost> layers;
  std::optional<search::StageSplit> split;
  double memoryLimit = 0;
  int64_t stageDevices = 0;
  std::map<double, double> sendSeconds;
  std::string why;
};

/// The report of `pass`, when it is a loom-split-stages that costed the
/// layers; nullptr otherwise (for a pass instrumentation).
const StageSplitReport *splitStagesReport(mlir::Pass &pass);

/// loom-pipeline with the stages, schedule and layer stages of `options`,
/// its report costed on `profile` (a hardware profile's name or file;
/// empty: no times); node stages come from the ops' loom.stage marks.
std::unique_ptr<mlir::Pass> createPipelinePass(const PipelineOptions &options,
                                               llvm::StringRef profile = "");

/// What `pass` did, when it is a loom-pipeline that ran; nullptr otherwise
/// (for a pass instrumentation's report).
const PipelineReport *pipelineReport(mlir::Pass &pass);

} // namespace loom::sharding

#endif // LOOM_PASSES_PIPELINE_PIPELINE_H
