//===- CompileFlags.cpp - The flags of `loom compile` and `simulate` ------===//
//
// The flags, and CompileOptions from them: each string is parsed into its
// enum once, here, and the compiler gets values it does not write back.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"
#include "compiler/driver/FrontEndFlags.h"

using namespace llvm;

namespace loom::driver {
namespace {

// compile only.
cl::opt<std::string> planOutput("o",
                                cl::desc("The plan file to write (optional "
                                         "for simulate)"),
                                cl::value_desc("MODEL.plan"),
                                cl::sub(compileCommand()),
                                cl::sub(simulateCommand()),
                                cl::cat(loomCategory()));
cl::OptionCategory &trainCategory() {
  static cl::OptionCategory category("Training (loom compile --train)");
  return category;
}
cl::opt<bool> train("train",
                    cl::desc("Compile a training step: loss, backward and "
                             "optimizer update"),
                    cl::sub(compileCommand()), cl::sub(trainCommand()),
                    cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<std::string> lossFlag("loss", cl::desc("cross_entropy or mse"),
                              cl::init("cross_entropy"),
                              cl::sub(compileCommand()),
                              cl::sub(trainCommand()),
                              cl::sub(simulateCommand()),
                              cl::cat(trainCategory()));
cl::opt<std::string> optimizerFlag("optimizer",
                                   cl::desc("sgd, momentum, adam or adamw"),
                                   cl::init("adamw"), cl::sub(compileCommand()),
                                   cl::sub(trainCommand()),
                                   cl::sub(simulateCommand()),
                                   cl::cat(trainCategory()));
cl::opt<double> lrFlag("lr", cl::desc("Learning rate"), cl::init(1e-3),
                       cl::sub(compileCommand()), cl::sub(trainCommand()),
                       cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<double> momentumFlag("momentum", cl::desc("Momentum (momentum)"),
                             cl::init(0.9), cl::sub(compileCommand()),
                             cl::sub(trainCommand()),
                             cl::sub(simulateCommand()),
                             cl::cat(trainCategory()));
cl::opt<bool> nesterovFlag("nesterov", cl::desc("Nesterov momentum"),
                           cl::sub(compileCommand()), cl::sub(trainCommand()),
                           cl::sub(simulateCommand()),
                           cl::cat(trainCategory()));
cl::opt<double> beta1Flag("beta1", cl::desc("Adam beta1"), cl::init(0.9),
                          cl::sub(compileCommand()), cl::sub(trainCommand()),
                          cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<double> beta2Flag("beta2", cl::desc("Adam beta2"), cl::init(0.999),
                          cl::sub(compileCommand()), cl::sub(trainCommand()),
                          cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<double> epsFlag("eps", cl::desc("Adam epsilon"), cl::init(1e-8),
                        cl::sub(compileCommand()), cl::sub(trainCommand()),
                        cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<double> weightDecayFlag("weight-decay",
                                cl::desc("Weight decay (decoupled for adamw)"),
                                cl::init(0.0), cl::sub(compileCommand()),
                                cl::sub(trainCommand()),
                                cl::sub(simulateCommand()),
                                cl::cat(trainCategory()));
cl::opt<int64_t> ignoreIndexFlag("ignore-index",
                                 cl::desc("Labels cross_entropy ignores"),
                                 cl::init(-100), cl::sub(compileCommand()),
                                 cl::sub(trainCommand()),
                                 cl::sub(simulateCommand()),
                                 cl::cat(trainCategory()));
cl::opt<std::string> initFlag(
    "init",
    cl::desc("Initial parameter values: onnx (the model's initializers) or "
             "seeded (uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for tensors of "
             "rank >= 2, zeros for biases, ones for other vectors; computed "
             "by the runtime from --seed)"),
    cl::init("onnx"), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<uint64_t> seedFlag("seed", cl::desc("Seed of --init seeded"),
                           cl::init(0), cl::sub(compileCommand()),
                           cl::sub(trainCommand()), cl::sub(simulateCommand()),
                           cl::cat(trainCategory()));
cl::opt<int64_t> microBatchesFlag(
    "micro-batches",
    cl::desc("Split each step's batch into M micro-batches run one after "
             "another, accumulating gradients (--batch must divide by M)"),
    cl::init(1), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<std::string> precisionFlag(
    "precision",
    cl::desc("Compute precision: f32, or bf16 / f16 over f32 master weights "
             "(the forward and backward in bf16 or f16; the loss, gradients "
             "of the parameters, optimizer state and updates in f32)"),
    cl::init("f32"), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<double> lossScaleFlag(
    "loss-scale",
    cl::desc("Static loss scale S (f16 training): the backward runs on S "
             "times the loss and each gradient is divided by S before its "
             "update"),
    cl::init(1.0), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(trainCategory()));
cl::opt<std::string> scheduleFlag("lr-schedule",
                                  cl::desc("constant, or cosine (linear "
                                           "warm-up, then cosine decay)"),
                                  cl::init("constant"),
                                  cl::sub(compileCommand()),
                                  cl::sub(trainCommand()),
                                  cl::sub(simulateCommand()),
                                  cl::cat(trainCategory()));
cl::opt<int64_t> warmupFlag("warmup-steps", cl::desc("Warm-up steps (cosine)"),
                            cl::init(0), cl::sub(compileCommand()),
                            cl::sub(trainCommand()), cl::sub(simulateCommand()),
                            cl::cat(trainCategory()));
cl::opt<int64_t> totalStepsFlag("total-steps",
                                cl::desc("Steps of the cosine schedule"),
                                cl::init(1000), cl::sub(compileCommand()),
                                cl::sub(trainCommand()),
                                cl::sub(simulateCommand()),
                                cl::cat(trainCategory()));
cl::opt<double> minLrFlag("min-lr", cl::desc("Final learning rate (cosine)"),
                          cl::init(0.0), cl::sub(compileCommand()),
                          cl::sub(trainCommand()), cl::sub(simulateCommand()),
                          cl::cat(trainCategory()));

cl::OptionCategory &parallelCategory() {
  static cl::OptionCategory category("Parallelism (loom compile --mesh)");
  return category;
}
cl::opt<std::string> meshFlag(
    "mesh",
    cl::desc("The device mesh as named axes, outermost first, e.g. "
             "dp=2,tp=4 (ranks are row-major: put tensor parallelism last); "
             "an axis pp=P, first, splits the model into P pipeline stages, "
             "each on the rest of the mesh"),
    cl::value_desc("AXIS=N,..."), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));
cl::opt<std::string> stageMeshesFlag(
    "stage-meshes",
    cl::desc("Pipeline stages on submeshes of their own, one per stage in "
             "order, separated by '/', e.g. dp=4/tp=2/dp=2 (4, 2 and 2 "
             "devices); each stage's program is compiled on its own submesh. "
             "Replaces --mesh"),
    cl::value_desc("MESH/MESH/..."), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));
cl::opt<std::string> modeFlag(
    "mode",
    cl::desc("data (split the batch over every device, replicate "
             "parameters), semi (the --strategy file and loom.strategy "
             "attributes, completed by propagation) or auto (a cost-model "
             "search on --cluster). Default: semi with --strategy, else "
             "data"),
    cl::value_desc("data|semi|auto"), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));
cl::opt<std::string> clusterFlag(
    "cluster",
    cl::desc("--mode auto: the hardware profile (a built-in name such as "
             "8xH100-80GB or 8xA100-80GB, or a JSON file from loom "
             "calibrate)"),
    cl::value_desc("PROFILE"), cl::init("8xH100-80GB"),
    cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(parallelCategory()));
cl::opt<int64_t> memoryLimitFlag(
    "memory-limit",
    cl::desc("--mode auto: bytes of memory per device (default: the "
             "profile's)"),
    cl::value_desc("BYTES"), cl::init(0), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));
cl::opt<std::string> pipelineScheduleFlag(
    "schedule",
    cl::desc("The pipeline schedule of the micro-batches (with pp=P in "
             "--mesh): gpipe (every forward, then every backward), 1f1b "
             "(one forward, one backward in turn after a warm-up) or "
             "interleaved (1F1B over --virtual-stages chunks of layers per "
             "stage; the micro-batches a multiple of P)"),
    cl::value_desc("gpipe|1f1b|interleaved"), cl::init("1f1b"),
    cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(parallelCategory()));
cl::opt<int64_t> virtualStagesFlag(
    "virtual-stages",
    cl::desc("--schedule interleaved: chunks of layers per pipeline stage "
             "(chunk c runs on stage c mod P; default 2)"),
    cl::value_desc("V"), cl::init(2), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));
cl::opt<std::string> stagesFlag(
    "stages",
    cl::desc("--mode auto: `auto` searches the pipeline too: the number of "
             "stages P (dividing the first --mesh axis, which keeps 1/P of "
             "its size per stage), the micro-batch count (unless "
             "--micro-batches is given), the schedule (1f1b or interleaved "
             "with 2 virtual stages, unless --schedule is given) and the "
             "layers of each stage, for the least predicted step within the "
             "memory limit"),
    cl::value_desc("auto"), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(parallelCategory()));
cl::opt<std::string> zeroFlag(
    "zero",
    cl::desc("Optimizer sharding over the data-parallel axes (ZeRO): 0 "
             "(none), 1 (optimizer state), 2 (+ gradients), 3 (+ "
             "parameters). Default: 0, or under --mode auto the level the "
             "search finds fastest within the memory limit"),
    cl::value_desc("0|1|2|3"), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));
cl::opt<std::string> recomputeFlag(
    "recompute",
    cl::desc("Recompute forward ops in the backward pass instead of keeping "
             "their results: `layers` (every op of each layer but the last, "
             "whose output is kept) or comma-separated ONNX node name "
             "patterns (e.g. '/blocks.*/attn/*'). Default: none, or under "
             "--mode auto `layers` when no plan fits without it"),
    cl::value_desc("layers|PATTERNS"), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));
cl::opt<int> topFlag(
    "top",
    cl::desc("simulate: list only the N nodes with the largest predicted "
             "time (0: every node)"),
    cl::value_desc("N"), cl::init(0), cl::sub(simulateCommand()),
    cl::cat(loomCategory()));
cl::opt<std::string> strategyFlag(
    "strategy", cl::desc("A JSON strategy file (see docs/partitioning.md)"),
    cl::value_desc("FILE"), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(parallelCategory()));
cl::opt<std::string> saveStrategyFlag(
    "save-strategy",
    cl::desc("Write every op's final strategy to FILE, in the --strategy "
             "format"),
    cl::value_desc("FILE"), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(parallelCategory()));
cl::opt<std::string> emitMlirFlag(
    "emit-mlir",
    cl::desc("Also write the compiled (per-device) program as MLIR"),
    cl::value_desc("FILE"), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(parallelCategory()));

cl::opt<bool> fuseFlag(
    "fuse",
    cl::desc("Fold weight transposes and bias (+relu) epilogues into the "
             "GEMMs of the compiled program (loom-fuse-matmul-epilogue); "
             "--fuse=false keeps them separate kernels"),
    cl::init(true), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(parallelCategory()));

cl::opt<double> bucketMbFlag(
    "bucket-mb",
    cl::desc("Reduce the data-parallel gradients in buckets of at most this "
             "many MiB per device, one all-reduce per bucket, in the order "
             "the backward pass makes them (loom-bucket-gradients, like "
             "DDP's bucket_cap_mb); 0: one all-reduce per gradient"),
    cl::value_desc("MB"), cl::init(25.0), cl::sub(compileCommand()),
    cl::sub(trainCommand()), cl::sub(simulateCommand()),
    cl::cat(parallelCategory()));

} // namespace

const std::string &planOutputFlag() { return planOutput; }
int topFlagValue() { return topFlag; }

namespace {

/// Parses `text` with `parse` into `out`; false with `error` set.
template <typename T, typename Parse>
bool parseInto(const std::string &text, Parse parse, T &out,
               std::string &error) {
  std::optional<T> value = parse(text, error);
  if (value)
    out = *value;
  return value.has_value();
}

std::optional<pipeline::TrainingOptions> trainingFromFlags(std::string &error) {
  pipeline::TrainingOptions t;
  t.enabled = train;
  if (!parseInto(lossFlag, pipeline::parseLoss, t.loss, error) ||
      !parseInto(optimizerFlag, pipeline::parseOptimizer, t.optimizer, error) ||
      !parseInto(scheduleFlag, pipeline::parseLrSchedule, t.lrSchedule, error))
    return std::nullopt;
  t.lr = lrFlag;
  t.momentum = momentumFlag;
  t.nesterov = nesterovFlag;
  t.beta1 = beta1Flag;
  t.beta2 = beta2Flag;
  t.epsilon = epsFlag;
  t.weightDecay = weightDecayFlag;
  t.ignoreIndex = ignoreIndexFlag;
  if (lossScaleFlag.getNumOccurrences())
    t.lossScale = lossScaleFlag;
  t.warmupSteps = warmupFlag;
  t.totalSteps = totalStepsFlag;
  t.minLr = minLrFlag;
  return t;
}

std::optional<pipeline::ParallelConfig> parallelFromFlags(std::string &error) {
  pipeline::ParallelConfig p;
  p.mesh = meshFlag;
  p.stageMeshes = stageMeshesFlag;
  p.microBatches = microBatchesFlag;
  if (!parseInto(pipelineScheduleFlag, pipeline::parseSchedule, p.schedule,
                 error))
    return std::nullopt;
  p.virtualStages = virtualStagesFlag;
  p.virtualStagesGiven = virtualStagesFlag.getNumOccurrences() > 0;
  if (!zeroFlag.empty()) {
    p.zero.emplace();
    if (!parseInto(zeroFlag, pipeline::parseZero, *p.zero, error))
      return std::nullopt;
  }
  if (!recomputeFlag.empty())
    p.recompute = recomputeFlag;
  return p;
}

} // namespace

std::optional<pipeline::CompileOptions>
compileOptionsFromFlags(std::string &error) {
  pipeline::CompileOptions options;
  std::optional<pipeline::ModelInput> model = modelInputFromFlags(error);
  if (!model)
    return std::nullopt;
  options.model = std::move(*model);
  std::optional<pipeline::TrainingOptions> training = trainingFromFlags(error);
  if (!training)
    return std::nullopt;
  options.training = std::move(*training);
  std::optional<pipeline::ParallelConfig> parallel = parallelFromFlags(error);
  if (!parallel)
    return std::nullopt;
  options.parallel = std::move(*parallel);
  if (!parseInto(precisionFlag, pipeline::parsePrecision, options.precision,
                 error))
    return std::nullopt;
  if (!modeFlag.empty()) {
    options.mode.emplace();
    if (!parseInto(modeFlag, pipeline::parseShardingMode, *options.mode, error))
      return std::nullopt;
  }
  if (!stagesFlag.empty() && stagesFlag != "auto") {
    error = "--stages takes `auto` (give a fixed stage count as pp=N in "
            "--mesh), got '" +
            stagesFlag + "'";
    return std::nullopt;
  }
  options.searchStages = !stagesFlag.empty();
  options.scheduleGiven = pipelineScheduleFlag.getNumOccurrences() > 0;
  options.microBatchesGiven = microBatchesFlag.getNumOccurrences() > 0;
  options.cluster = clusterFlag;
  options.memoryLimit = memoryLimitFlag;
  options.strategyFile = strategyFlag;
  options.saveStrategyFile = saveStrategyFlag;
  options.emitMlir = emitMlirFlag;
  options.fuse = fuseFlag;
  std::optional<int64_t> bucketBytes =
      pipeline::parseBucketMb(bucketMbFlag, error);
  if (!bucketBytes)
    return std::nullopt;
  options.bucketBytes = *bucketBytes;
  if (!parseInto(initFlag, pipeline::parseInit, options.init, error))
    return std::nullopt;
  options.seed = seedFlag;
  options.simulate = static_cast<bool>(simulateCommand());
  return options;
}

} // namespace loom::driver
