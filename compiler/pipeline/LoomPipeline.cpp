//===- LoomPipeline.cpp - `loom compile` as one MLIR pass pipeline --------===//
//
// buildShardingPipeline adds the passes in the order LoomPipeline.h lists,
// each with the typed options CompileOptions gives; the registered
// `loom-compile-pipeline` parses the flags' spellings into CompileOptions
// with the parsers the CLI uses.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/LoomPipeline.h"

#include "passes/Passes.h"
#include "passes/pipeline/Pipeline.h"
#include "passes/sharding/AutoSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace loom::pipeline {

int64_t builtMicroBatches(const CompileOptions &options) {
  const ParallelConfig &p = options.parallel;
  // GPipe keeps every micro-batch's activations until its backwards: its
  // memory grows with all of them.
  if (!options.simulate || p.schedule == Schedule::GPipe)
    return p.microBatches;
  // 1F1B holds at most `stages` micro-batches in flight and interleaved
  // 1F1B at most 2 (stages - 1) + (chunks - 1) stages forward chunks, both
  // reached once 2 x stages micro-batches run (a multiple of the stages,
  // as interleaving needs).
  const int64_t stages = std::max<int64_t>(pipelineStages(p.mesh), 1);
  return std::min(p.microBatches, 2 * stages);
}

bool isPipelined(const CompileOptions &options) {
  const ParallelConfig &p = options.parallel;
  return !p.stageMeshes.empty() ||
         (!p.mesh.empty() &&
          (pipelineStages(p.mesh) > 1 || p.microBatches > 1));
}

namespace {

/// Checks the contract of a phase boundary (changes nothing).
void addContract(OpPassManager &pm, Phase phase) {
  VerifyPhaseOptions verify;
  verify.phase = phase;
  pm.addPass(createVerifyPhase(verify));
}

void addTrainingStep(OpPassManager &pm, const CompileOptions &options) {
  const TrainingOptions &training = options.training;
  BuildTrainingGraphOptions step;
  step.loss = toString(training.loss).str();
  step.optimizer = toString(training.optimizer).str();
  step.momentum = training.momentum;
  step.nesterov = training.nesterov;
  step.beta1 = training.beta1;
  step.beta2 = training.beta2;
  step.epsilon = training.epsilon;
  step.weightDecay = training.weightDecay;
  step.ignoreIndex = training.ignoreIndex;
  step.lossScale = training.lossScale.value_or(1.0);
  // On a mesh, micro-batches are unrolled after partitioning (with the
  // pipeline stages), so that their gradients are reduced once.
  step.microBatches =
      options.parallel.mesh.empty() ? options.parallel.microBatches : 1;
  pm.addPass(createBuildTrainingGraph(step));
  pm.addPass(createCSEPass());
  addContract(pm, Phase::TrainingStep);
}

void addSharding(OpPassManager &pm, const CompileOptions &options,
                 const PipelineExtras &extras) {
  const ParallelConfig &parallel = options.parallel;
  const ShardingMode mode = options.shardingMode();
  const bool train = options.training.enabled;
  AssignMeshOptions assign;
  assign.mesh = parallel.mesh;
  assign.zero = parallel.zero.value_or(0);
  pm.addPass(createAssignMesh(assign));
  OpPassManager &func = pm.nest<func::FuncOp>();
  if (!options.strategyFile.empty()) {
    ApplyStrategiesOptions strategies;
    strategies.file = options.strategyFile;
    func.addPass(createApplyStrategies(strategies));
  }
  const bool chooseZero = mode == ShardingMode::Auto && train && !parallel.zero;
  if (mode == ShardingMode::Auto) {
    AutoShardingOptions search;
    search.profile = options.cluster;
    search.memoryLimit = options.memoryLimit;
    search.stages = pipelineStages(parallel.mesh);
    search.microBatches = parallel.microBatches;
    search.schedule = parallel.schedule;
    search.virtualStages =
        parallel.schedule == Schedule::Interleaved ? parallel.virtualStages : 1;
    search.chooseZero = chooseZero;
    search.chooseRecompute = train && !parallel.recompute;
    // The search prices the gradient buckets loom-bucket-gradients makes.
    search.bucketBytes = options.bucketBytes;
    func.addPass(sharding::createAutoShardingPass(search, extras.progress));
  }
  PropagateShardingOptions propagation;
  propagation.mode = mode == ShardingMode::Data ? "data" : "semi";
  func.addPass(createPropagateSharding(propagation));
  if (chooseZero || parallel.zero.value_or(0) > 0) {
    ShardOptimizerOptions zero;
    zero.level = 0; // the function's loom.zero
    zero.repropagate = propagation.mode;
    func.addPass(createShardOptimizer(zero));
  }
  addContract(pm, Phase::Sharded);
  OpPassManager &partitioned = pm.nest<func::FuncOp>();
  partitioned.addPass(createRecompute());
  PartitionOptions partition;
  partition.recordLayouts = extras.recordLayouts;
  partitioned.addPass(createPartition(partition));
  pm.addPass(createCSEPass());
  addContract(pm, Phase::Partitioned);
}

} // namespace

namespace {

/// The stages of a pipelined step: split by the cost model (--mode auto,
/// unless the layers' stages are given), then pipelined. A candidate of
/// --stages auto stops after the split (it is costed, not compiled).
void addStages(OpPassManager &pm, const CompileOptions &options,
               const PipelineExtras &extras) {
  const ParallelConfig &p = options.parallel;
  const int64_t stages = pipelineStages(p.mesh);
  const int64_t chunks =
      p.schedule == Schedule::Interleaved ? p.virtualStages : 1;
  if (options.shardingMode() == ShardingMode::Auto &&
      options.training.enabled && !p.layerStages &&
      (stages > 1 || extras.evaluating)) {
    SplitStagesOptions split;
    split.stages = stages;
    split.microBatches = p.microBatches;
    split.schedule = p.schedule;
    split.virtualStages = chunks;
    split.profile = options.cluster;
    split.memoryLimit = options.memoryLimit;
    split.ownMeshes = extras.recordLayouts;
    pm.addPass(createSplitStages(split));
  }
  if (extras.evaluating || !(stages > 1 || p.microBatches > 1))
    return;
  sharding::PipelineOptions pipeline;
  pipeline.stages = stages;
  pipeline.microBatches = builtMicroBatches(options);
  pipeline.costedMicroBatches = p.microBatches;
  pipeline.schedule = p.schedule;
  pipeline.virtualStages = chunks;
  pipeline.ownMeshes = extras.recordLayouts;
  if (p.layerStages)
    pipeline.layerStages = *p.layerStages;
  pm.addPass(sharding::createPipelinePass(
      pipeline, extras.stageTimes ? options.cluster : std::string()));
  addContract(pm, Phase::Pipelined);
}

} // namespace

void buildCompilePipeline(OpPassManager &pm, const CompileOptions &options,
                          const PipelineExtras &extras) {
  addContract(pm, Phase::Imported);
  pm.addNestedPass<func::FuncOp>(createFuseLayerNorm());
  pm.addPass(createCSEPass());
  if (options.precision != Precision::F32) {
    MixedPrecisionOptions precision;
    precision.precision = toString(options.precision).str();
    pm.addNestedPass<func::FuncOp>(createMixedPrecision(precision));
  }
  if (options.training.enabled)
    addTrainingStep(pm, options);
  if (options.parallel.recompute && !options.parallel.recompute->empty()) {
    MarkRecomputeOptions mark;
    mark.spec = *options.parallel.recompute;
    pm.addNestedPass<func::FuncOp>(createMarkRecompute(mark));
  }
  if (options.parallel.mesh.empty()) {
    pm.addNestedPass<func::FuncOp>(createRecompute());
  } else {
    addSharding(pm, options, extras);
    addStages(pm, options, extras);
    // After the stages, so that a stage's reductions, made once after the
    // micro-batches' accumulation, are bucketed too.
    if (options.bucketBytes > 0 && !extras.evaluating) {
      BucketGradientsOptions buckets;
      buckets.bucketBytes = options.bucketBytes;
      pm.addNestedPass<func::FuncOp>(createBucketGradients(buckets));
    }
  }
  if (options.fuse && !extras.evaluating)
    pm.addNestedPass<func::FuncOp>(createFuseMatmulEpilogue());
}

LogicalResult buildLoomPipeline(OpPassManager &pm,
                                const CompileOptions &options,
                                std::string &error) {
  if (!options.parallel.stageMeshes.empty()) {
    error = "--stage-meshes assembles one plan from a compile per submesh: "
            "compile it with `loom compile`";
    return failure();
  }
  buildCompilePipeline(pm, options);
  return success();
}

namespace {

/// loom-compile-pipeline's options: the `loom compile` flags that shape
/// the program, spelled as the flags are.
struct CompilePipelineOptions
    : public PassPipelineOptions<CompilePipelineOptions> {
  Option<bool> train{*this, "train", llvm::cl::desc("A training step")};
  Option<std::string> loss{*this, "loss", llvm::cl::init("cross_entropy")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::init("adamw")};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.9)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::init(false)};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.0)};
  Option<int64_t> ignoreIndex{*this, "ignore-index", llvm::cl::init(-100)};
  Option<double> lossScale{*this, "loss-scale", llvm::cl::init(1.0)};
  Option<std::string> precision{*this, "precision", llvm::cl::init("f32")};
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("Named axes, e.g. dp=2,tp=2")};
  Option<std::string> mode{*this, "mode", llvm::cl::desc("data, semi or auto")};
  Option<std::string> cluster{*this, "cluster", llvm::cl::init("8xH100-80GB")};
  Option<int64_t> memoryLimit{*this, "memory-limit", llvm::cl::init(0)};
  Option<std::string> zero{*this, "zero", llvm::cl::desc("0, 1, 2 or 3")};
  Option<std::string> recompute{*this, "recompute",
                                llvm::cl::desc("layers or ONNX patterns")};
  Option<std::string> strategy{*this, "strategy",
                               llvm::cl::desc("A JSON strategy file")};
  Option<int64_t> microBatches{*this, "micro-batches", llvm::cl::init(1)};
  Option<Schedule> schedule{
      *this, "schedule", llvm::cl::init(Schedule::OneFOneB),
      EnumSpellings<Schedule, symbolizePipelineSchedule>()};
  Option<int64_t> virtualStages{*this, "virtual-stages", llvm::cl::init(2)};
  Option<bool> fuse{*this, "fuse", llvm::cl::init(true)};
  Option<double> bucketMb{*this, "bucket-mb", llvm::cl::init(25.0)};
};

/// CompileOptions from the registered pipeline's options; nullopt with
/// `error` set.
std::optional<CompileOptions> toCompileOptions(const CompilePipelineOptions &o,
                                               std::string &error) {
  CompileOptions options;
  TrainingOptions &t = options.training;
  t.enabled = o.train;
  std::optional<Loss> loss = parseLoss(o.loss, error);
  std::optional<Optimizer> optimizer = parseOptimizer(o.optimizer, error);
  std::optional<Precision> precision = parsePrecision(o.precision, error);
  if (!loss || !optimizer || !precision)
    return std::nullopt;
  t.loss = *loss;
  t.optimizer = *optimizer;
  t.momentum = o.momentum;
  t.nesterov = o.nesterov;
  t.beta1 = o.beta1;
  t.beta2 = o.beta2;
  t.epsilon = o.eps;
  t.weightDecay = o.weightDecay;
  t.ignoreIndex = o.ignoreIndex;
  if (o.lossScale != 1.0)
    t.lossScale = o.lossScale;
  options.precision = *precision;
  ParallelConfig &p = options.parallel;
  p.mesh = o.mesh;
  p.microBatches = o.microBatches;
  p.schedule = o.schedule;
  p.virtualStages = o.virtualStages;
  if (!o.zero.empty()) {
    p.zero = parseZero(o.zero, error);
    if (!p.zero)
      return std::nullopt;
  }
  if (!o.recompute.empty())
    p.recompute = o.recompute.getValue();
  if (!o.mode.empty()) {
    options.mode = parseShardingMode(o.mode, error);
    if (!options.mode)
      return std::nullopt;
  }
  options.cluster = o.cluster;
  options.memoryLimit = o.memoryLimit;
  options.strategyFile = o.strategy;
  options.fuse = o.fuse;
  std::optional<int64_t> bucketBytes = parseBucketMb(o.bucketMb, error);
  if (!bucketBytes)
    return std::nullopt;
  options.bucketBytes = *bucketBytes;
  return options;
}

} // namespace

void registerLoomCompilePipeline() {
  registerPassPipeline(
      "loom-compile-pipeline",
      "The passes of `loom compile`, from an imported model (loom import "
      "--locations) to the per-device program",
      [](OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<LogicalResult(const llvm::Twine &)> onError) {
        CompilePipelineOptions parsed;
        if (failed(parsed.parseFromString(text)))
          return failure();
        std::string error;
        std::optional<CompileOptions> options = toCompileOptions(parsed, error);
        if (!options || failed(buildLoomPipeline(pm, *options, error)))
          return onError("loom-compile-pipeline: " + error);
        return success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> handler) {
        handler(CompilePipelineOptions());
      });
}

} // namespace loom::pipeline
