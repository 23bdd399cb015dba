//===- Compile.cpp - One attempt: from the model file to a plan -----------===//
//
// buildPlan imports the model into a context of its own (the next attempt
// starts from the file again, with the same names), builds the training
// step, shards and partitions it (Partition.cpp), and emits the plan with
// its explanation. finishPlan adds what the plan says beyond the program:
// the training loop's settings and the seeded initializers.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/CompileSession.h"
#include "compiler/pipeline/Compiler.h"
#include "compiler/pipeline/ExplanationRecorder.h"
#include "compiler/pipeline/LoomPipeline.h"
#include "compiler/pipeline/OutputFile.h"

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "compiler/plan/PlanEmitter.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

using namespace llvm;
using namespace mlir;

namespace loom::pipeline {

OwningOpRef<ModuleOp> importModel(MLIRContext &context, const ModelInput &model,
                                  bool withWeights, bool withBuffers,
                                  std::string &error, raw_ostream *log) {
  onnx_import::ImportOptions options;
  options.batch = model.batch;
  for (const auto &[name, n] : model.dims)
    options.dims[name] = n;
  for (const auto &[name, shape] : model.inputShapes)
    options.inputShapes[name] =
        SmallVector<int64_t>(shape.begin(), shape.end());
  options.freeze.assign(model.freeze.begin(), model.freeze.end());
  options.batchNormGroups = model.syncBatchNorm ? 1 : model.batchNormGroups;
  options.withWeights = withWeights;
  options.withBuffers = withBuffers;
  onnx_import::ImportResult result =
      onnx_import::importOnnxFile(model.path, options, context);
  if (result.status == onnx_import::ImportStatus::InternalError) {
    error = result.message +
            "\nThis is a bug in Loom; please report it with the model.";
    return nullptr;
  }
  if (!result.ok()) {
    error = result.message;
    return nullptr;
  }
  if (log)
    for (const std::string &note : result.notes)
      *log << "loom: import: " << note << "\n";
  return std::move(result.module);
}

LogicalResult runImportCleanup(ModuleOp module) {
  PassManager pm(module->getContext());
  pm.addNestedPass<func::FuncOp>(createFuseLayerNorm());
  pm.addPass(createCSEPass());
  return pm.run(module);
}

int64_t peakBytes(const plan::Plan &plan) {
  int64_t peak = 0;
  for (const plan::Stage &stage : plan.stages())
    peak = std::max(peak, stage.program().state_bytes() +
                              stage.program().arena_bytes());
  return peak;
}

/// `value` as the flags print it: "inf", "nan", "-1", "1.5".
static std::string formatValue(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// The first training hyperparameter outside its range: the flag, the
/// range and the value given. Checked before any work, so that a bad value
/// is not found at step 2 as a loss that is not finite.
static std::optional<std::string>
verifyHyperparameters(const TrainingOptions &t, const ParallelConfig &p,
                      int64_t memoryLimit) {
  struct Range {
    const char *flag;
    double value, low, high;
    bool lowOpen, highOpen;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // Finite everywhere; open ends are excluded.
  const Range ranges[] = {
      {"--lr", t.lr, 0, inf, true, true},
      {"--momentum", t.momentum, 0, 1, false, true},
      {"--beta1", t.beta1, 0, 1, false, true},
      {"--beta2", t.beta2, 0, 1, false, true},
      {"--eps", t.epsilon, 0, inf, true, true},
      {"--weight-decay", t.weightDecay, 0, inf, false, true},
      {"--min-lr", t.minLr, 0, t.lr, false, false},
      {"--loss-scale", t.lossScale.value_or(1), 0, inf, true, true},
  };
  for (const Range &r : ranges) {
    bool above = r.lowOpen ? r.value > r.low : r.value >= r.low;
    bool below = r.highOpen ? r.value < r.high : r.value <= r.high;
    if (std::isfinite(r.value) && above && below)
      continue;
    std::string range = std::string(r.lowOpen ? "(" : "[") +
                        formatValue(r.low) + ", " + formatValue(r.high) +
                        (r.highOpen ? ")" : "]");
    return std::string(r.flag) + " must be a finite number in " + range +
           ", got " + formatValue(r.value);
  }
  if (t.warmupSteps < 0)
    return "--warmup-steps must be 0 or more, got " +
           std::to_string(t.warmupSteps);
  if (t.totalSteps < 1)
    return "--total-steps must be 1 or more, got " +
           std::to_string(t.totalSteps);
  if (p.microBatches < 1)
    return "--micro-batches must be 1 or more, got " +
           std::to_string(p.microBatches);
  if (memoryLimit < 0)
    return "--memory-limit must be 0 (the profile's memory) or a number of "
           "bytes, got " +
           std::to_string(memoryLimit);
  return std::nullopt;
}

/// The devices a --mesh or --stage-meshes names, bounded: every axis size
/// and their product at most kMaxDevices (larger than any machine, small
/// enough that per-device tables fit in memory).
std::optional<std::string> verifyDeviceCounts(const ParallelConfig &parallel) {
  constexpr int64_t kMaxDevices = int64_t(1) << 20;
  auto check = [&](const std::string &flag,
                   const std::string &spec) -> std::optional<std::string> {
    llvm::SmallVector<llvm::StringRef> meshes, axes;
    llvm::StringRef(spec).split(meshes, '/');
    for (llvm::StringRef mesh : meshes) {
      int64_t devices = 1;
      axes.clear();
      mesh.split(axes, ',');
      for (llvm::StringRef axis : axes) {
        uint64_t size = 0;
        llvm::StringRef value = axis.split('=').second.trim();
        // Malformed text is the mesh parser's to report.
        if (value.getAsInteger(10, size) || size == 0)
          continue;
        if (size > uint64_t(kMaxDevices) ||
            devices > kMaxDevices / static_cast<int64_t>(size))
          return flag + " " + spec + " names more than " +
                 std::to_string(kMaxDevices) +
                 " devices, the most Loom plans for";
        devices *= static_cast<int64_t>(size);
      }
    }
    return std::nullopt;
  };
  if (auto bad = check("--mesh", parallel.mesh))
    return bad;
  return check("--stage-meshes", parallel.stageMeshes);
}

std::optional<std::string> verifyOptions(const CompileOptions &options) {
  const bool train = options.training.enabled;
  const ParallelConfig &parallel = options.parallel;
  if (std::optional<std::string> bad = verifyHyperparameters(
          options.training, parallel, options.memoryLimit))
    return bad;
  if (std::optional<std::string> bad = verifyDeviceCounts(parallel))
    return bad;
  if (!parallel.stageMeshes.empty() &&
      (!parallel.mesh.empty() || options.searchStages || !train))
    return std::string("--stage-meshes pipelines a training step (--train) "
                       "over the submeshes it lists: it replaces --mesh and "
                       "--stages");
  if (options.training.lossScale && !train)
    return std::string("--loss-scale needs --train");
  if (parallel.recompute && !parallel.recompute->empty() && !train)
    return std::string("--recompute needs --train");
  if (parallel.zero && *parallel.zero > 0 && !train)
    return "--zero " + std::to_string(*parallel.zero) +
           " shards optimizer state: it needs --train";
  if (parallel.mesh.empty() && parallel.stageMeshes.empty() &&
      !options.searchStages &&
      (options.mode || !options.strategyFile.empty() ||
       !options.saveStrategyFile.empty()))
    return std::string("--mode, --strategy and --save-strategy need --mesh");
  return std::nullopt;
}

std::optional<CompileResult> compile(const CompileOptions &options,
                                     raw_ostream &log, std::string &error) {
  if (std::optional<std::string> bad = verifyOptions(options)) {
    error = *bad;
    return std::nullopt;
  }
  std::optional<cost::HardwareProfile> cluster =
      cost::findProfile(options.cluster, error);
  if (!cluster) {
    error = "--cluster: " + error;
    return std::nullopt;
  }
  CompileSession session(options, std::move(*cluster), log);
  std::optional<CompileResult> result = session.run();
  if (!result)
    error = session.message();
  return result;
}

std::optional<int64_t>
CompileSession::importBatch(const ParallelConfig &config) const {
  if (!options.model.batch)
    return std::nullopt;
  return *options.model.batch / config.microBatches;
}

CompileOptions CompileSession::attemptOptions(const Attempt &attempt) const {
  CompileOptions step = options;
  step.parallel = attempt.parallel;
  step.memoryLimit = attempt.searchLimit;
  if (earlier) {
    // A search again after the plan came out over the memory limit keeps
    // the ZeRO level and recompute the first one chose.
    if (!step.parallel.zero)
      step.parallel.zero = earlier->zero;
    if (!step.parallel.recompute)
      step.parallel.recompute = earlier->recompute == "layers" ? "layers" : "";
  }
  return step;
}

namespace {

/// Shows the search's progress on stderr once it has run for a second:
/// one updating line on a terminal, else a line every ten seconds. Copies
/// (the search keeps one) share their state.
class SearchProgress {
public:
  void operator()(StringRef phase, int64_t done, int64_t total) const {
    double now = std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - state->start)
                     .count();
    bool terminal = errs().is_displayed();
    if (now < 1.0 || now - state->last < (terminal ? 0.25 : 10.0))
      return;
    state->last = now;
    errs() << (terminal ? "\r" : "") << "loom: search: " << phase << " "
           << done;
    if (total > 0)
      errs() << "/" << total;
    errs() << format(" (%.1f s)", now) << (terminal ? "   " : "\n");
    state->shown = true;
  }
  /// Ends an updating line.
  void finish() const {
    if (state->shown && errs().is_displayed())
      errs() << "\n";
  }

private:
  struct State {
    std::chrono::steady_clock::time_point start =
        std::chrono::steady_clock::now();
    double last = 0;
    bool shown = false;
  };
  std::shared_ptr<State> state = std::make_shared<State>();
};

} // namespace

int CompileSession::checkPipelineShape(const ParallelConfig &config) {
  const int64_t stages = pipelineStages(config.mesh);
  if (config.schedule == Schedule::Interleaved) {
    if (config.virtualStages < 1)
      return fail("--virtual-stages must be at least 1, got " +
                  std::to_string(config.virtualStages));
    if (config.microBatches % stages != 0)
      return fail("--schedule interleaved runs the micro-batches in groups "
                  "of the pipeline's stages: --micro-batches " +
                  std::to_string(config.microBatches) +
                  " is not a multiple of pp=" + std::to_string(stages));
  } else if (config.virtualStagesGiven) {
    return fail("--virtual-stages needs --schedule interleaved");
  }
  return 0;
}

void CompileSession::evaluate(const sharding::StageSplitReport &split,
                              StageCandidate &candidate) {
  if (!split.why.empty()) {
    candidate.why = split.why;
    return;
  }
  candidate.seconds = split.split->seconds;
  candidate.memoryBytes = 0;
  for (double m : split.split->memoryBytes)
    candidate.memoryBytes = std::max(candidate.memoryBytes, m);
  candidate.fits = split.split->fits;
  auto sends = std::make_shared<std::map<double, double>>(split.sendSeconds);
  candidate.sendSeconds = [sends](double bytes) {
    auto it = sends->find(bytes);
    return it == sends->end() ? 0.0 : it->second;
  };
  candidate.layers = split.layers;
  candidate.stageDevices = split.stageDevices;
  candidate.memoryLimit = split.memoryLimit;
}

namespace {

/// The data-parallel replicas of `mesh` ("pp=2,dp=2,tp=2"), whose local
/// batches training-mode batch normalization normalizes separately unless
/// --sync-batchnorm: under --mode data, which splits the batch over every
/// axis but the pipeline's, the product of those axes; else the size of
/// the axis named dp (1 without one).
int64_t dataParallelReplicas(StringRef mesh, bool dataMode) {
  int64_t replicas = 1;
  SmallVector<StringRef> axes;
  mesh.split(axes, ',', -1, /*KeepEmpty=*/false);
  for (StringRef axis : axes) {
    StringRef name, value;
    int64_t size;
    if (!splitAssignment(axis, name, value) || value.getAsInteger(10, size) ||
        size < 1)
      continue; // the mesh's own parser reports it
    name = name.trim();
    if (name == "pp")
      continue;
    if (dataMode || name == "dp")
      replicas *= size;
  }
  return replicas;
}

} // namespace

std::optional<plan::Plan> CompileSession::buildPlan(const Attempt &attempt,
                                                    int &code) {
  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  // A simulation needs only shapes, and seeded initialisation draws the
  // parameters: neither reads them (a shape-only model, gpt_shapes.py, will
  // do). Seeded initialisation keeps the buffers' data.
  const bool seeded = options.init == Init::Seeded;
  ModelInput model = options.model;
  model.batch = importBatch(attempt.parallel);
  model.batchNormGroups = dataParallelReplicas(
      attempt.parallel.mesh,
      options.mode.value_or(options.strategyFile.empty()
                                ? ShardingMode::Data
                                : ShardingMode::Semi) == ShardingMode::Data);
  std::string error;
  OwningOpRef<ModuleOp> module =
      importModel(context, model, !options.simulate && !seeded,
                  !options.simulate && seeded, error,
                  importNoted ? nullptr : &log);
  importNoted = true;
  if (!module) {
    code = fail(error);
    return std::nullopt;
  }
  const bool onMesh = !attempt.parallel.mesh.empty();
  if (onMesh && (code = checkPipelineShape(attempt.parallel)))
    return std::nullopt;
  const CompileOptions step = attemptOptions(attempt);
  SearchProgress progress;
  PipelineExtras extras;
  extras.progress = progress;
  extras.recordLayouts = attempt.ownStageMeshes;
  extras.evaluating = attempt.evaluating != nullptr;
  extras.stageTimes = true;
  PassManager pm(&context);
  buildCompilePipeline(pm, step, extras);
  auto owned = std::make_unique<ExplanationRecorder>(
      step, cluster, log, earlier.has_value() && !attempt.evaluating,
      extras.evaluating);
  ExplanationRecorder &recorder = *owned;
  pm.addInstrumentation(std::move(owned));
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    recorder.collect(d);
    return success();
  });
  LogicalResult ran = pm.run(*module);
  progress.finish();
  if (attempt.evaluating) {
    // A candidate of --stages auto: costed by the split, not compiled.
    if (failed(ran) && !recorder.split) {
      code = fail(recorder.failure());
      return std::nullopt;
    }
    if (recorder.split)
      evaluate(*recorder.split, *attempt.evaluating);
    code = recorder.split ? kEvaluated : 0;
    return std::nullopt;
  }
  if (failed(ran) || !recorder.failure().empty()) {
    code = recorder.noPlanUnderLoweredLimit() ? kNoPlanUnderLoweredLimit
                                              : fail(recorder.failure());
    return std::nullopt;
  }
  recorder.recordProgram();
  if (recorder.pipeline)
    chosenLayerStages = recorder.pipeline->layerStages;
  if (!options.emitMlir.empty()) {
    if (std::string e = writeOutputFile(options.emitMlir,
                                        [&](llvm::raw_ostream &os) {
                                          module->print(os);
                                          os << "\n";
                                        });
        !e.empty()) {
      code = fail(e);
      return std::nullopt;
    }
  }
  std::optional<plan::Plan> plan = emitPlan(*module, error);
  if (!plan) {
    code = fail(modelPath() + ": " + error);
    return std::nullopt;
  }
  *plan->mutable_explanation() = recorder.explanation->finish();
  return plan;
}

/// The seeded rule's bounds for a parameter of `shape` named `name`:
/// uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) from rank 2, ones for the
/// scales of normalisations, zeros for biases.
static std::pair<double, double>
seededBounds(const google::protobuf::RepeatedField<int64_t> &shape,
             StringRef name) {
  if (shape.size() >= 2) {
    int64_t fanIn = 1;
    for (int d = 1; d < shape.size(); ++d)
      fanIn *= shape[d];
    double bound =
        1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fanIn, 1)));
    return {-bound, bound};
  }
  if (!name.ends_with("bias"))
    return {1.0, 1.0};
  return {0.0, 0.0};
}

void CompileSession::finishPlan(plan::Plan &plan,
                                const ParallelConfig &config) const {
  if (options.init == Init::Seeded) {
    // Replace the initializers' data by a seeded rule on the global tensor
    // (in every pipeline stage).
    for (plan::Stage &stage : *plan.mutable_stages())
      for (plan::Value &v : *stage.mutable_program()->mutable_values()) {
        if (v.kind() != plan::Value::PARAMETER)
          continue;
        // A padded parameter's bounds are its logical shape's.
        auto [low, high] =
            seededBounds(v.logical_shape().empty() ? v.global_type().shape()
                                                   : v.logical_shape(),
                         v.name());
        v.clear_data();
        plan::Initializer *init = v.mutable_init();
        init->set_distribution("uniform");
        init->set_low(low);
        init->set_high(high);
        init->set_seed(options.seed);
      }
  }
  const TrainingOptions &training = options.training;
  if (training.enabled) {
    plan::Training *t = plan.mutable_training();
    t->set_loss(toString(training.loss).str());
    t->set_optimizer(toString(training.optimizer).str());
    t->set_lr(training.lr);
    t->set_lr_schedule(toString(training.lrSchedule).str());
    t->set_warmup_steps(training.warmupSteps);
    t->set_total_steps(training.totalSteps);
    t->set_min_lr(training.minLr);
    plan.mutable_schedule()->set_micro_batches(config.microBatches);
  }
}

} // namespace loom::pipeline
