//===- Partition.cpp - Sharding, partitioning and pipelining of @main ------===//
//
// One attempt's middle: @main on its mesh (the pipeline axis split off),
// the user's strategies, under --mode auto the ZeRO level and recompute
// the memory needs and the cost-model search of the forward ops' layouts,
// propagation to the rest, optimizer sharding, recompute, partitioning
// into the per-device program, the stages' layers by the cost model, and
// the pipeline's stages and micro-batches. The explanation records each
// step's result.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/CompileSession.h"

#include "dialects/LoomDialect.h"
#include "passes/AutoSharding.h"
#include "passes/OptimizerSharding.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "passes/Recompute.h"
#include "passes/StrategyFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#include <map>
#include <memory>

using namespace llvm;
using namespace mlir;

namespace loom::pipeline {
namespace {

/// Shows the search's progress on stderr once it has run for a second:
/// one updating line on a terminal, else a line every ten seconds.
class SearchProgress {
public:
  void operator()(StringRef phase, int64_t done, int64_t total) {
    double now = seconds();
    bool terminal = errs().is_displayed();
    if (now < 1.0 || now - last < (terminal ? 0.25 : 10.0))
      return;
    last = now;
    errs() << (terminal ? "\r" : "") << "loom: search: " << phase << " "
           << done;
    if (total > 0)
      errs() << "/" << total;
    errs() << format(" (%.1f s)", now) << (terminal ? "   " : "\n");
    shown = true;
  }
  ~SearchProgress() {
    if (shown && errs().is_displayed())
      errs() << "\n";
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  }

private:
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  double last = 0;
  bool shown = false;
};

/// Parses a mesh's named axes into the dialect's mesh attribute.
std::optional<MeshAttr> parseMesh(MLIRContext &context, StringRef text,
                                  std::string &error) {
  SmallVector<StringRef> parts;
  text.split(parts, ',');
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  for (StringRef part : parts) {
    StringRef name, value;
    int64_t size = 0;
    if (!splitAssignment(part.trim(), name, value) || name.empty() ||
        value.getAsInteger(10, size) || size < 1) {
      error = "--mesh expects named axes like dp=2,tp=4, got '" + text.str() +
              "'";
      return std::nullopt;
    }
    for (StringAttr n : names)
      if (n.getValue() == name) {
        error = "--mesh names axis '" + name.str() + "' twice";
        return std::nullopt;
      }
    names.push_back(StringAttr::get(&context, name));
    sizes.push_back(size);
  }
  return MeshAttr::get(&context, names, sizes);
}

} // namespace

/// The steps of CompileSession::partition over what they share. Each
/// returns 0 or partition()'s code.
class Partitioner {
public:
  Partitioner(CompileSession &session, const CompileOptions &options,
              const Attempt &attempt, ModuleOp module,
              std::optional<explain::ExplanationBuilder> &explanation)
      : session(session), options(options), attempt(attempt),
        config(attempt.parallel), module(module), context(*module->getContext()),
        explanation(explanation) {}

  int run();

private:
  int setUpMesh();
  int setUpCosts();
  int applyStrategyFile();
  int chooseMemoryPolicy();
  int search();
  int propagate();
  int partitionProgram();
  int splitStages();

  sharding::SearchOptions searchOptions() const;
  int fail(const Twine &message) { return session.fail(message); }
  std::string modelPath() const { return options.model.path; }
  std::string meshText() const { return mesh->toString(); }

  CompileSession &session;
  const CompileOptions &options;
  const Attempt &attempt;
  const ParallelConfig &config;
  ModuleOp module;
  MLIRContext &context;
  std::optional<explain::ExplanationBuilder> &explanation;

  std::optional<MeshAttr> meshAttr;
  std::optional<layout::Mesh> mesh, fullMesh;
  ShardingMode mode = ShardingMode::Data;
  sharding::PipelineOptions pipeline;
  func::FuncOp func;
  cost::HardwareProfile profile, fullProfile;
  bool grown = false;
  std::unique_ptr<sharding::GroupCache> groups;
  llvm::SmallPtrSet<Operation *, 16> userFixed;
  std::string diagnostics;
  std::optional<SearchProgress> progress;
  std::optional<sharding::SearchReport> report;
  int zero = 0;
  std::string recompute;
  int trials = 0;
};

int CompileSession::partition(
    ModuleOp module, const Attempt &attempt,
    std::optional<explain::ExplanationBuilder> &explanation) {
  return Partitioner(*this, options, attempt, module, explanation).run();
}

int Partitioner::run() {
  if (int code = setUpMesh())
    return code;
  if (int code = setUpCosts())
    return code;
  if (int code = applyStrategyFile())
    return code;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    std::string where;
    if (auto name = dyn_cast<NameLoc>(d.getLocation()))
      where = "ONNX node '" + name.getName().str() + "': ";
    diagnostics += where + d.str() + "\n";
    return success();
  });
  zero = config.zero.value_or(0);
  if (mode == ShardingMode::Auto)
    progress.emplace();
  if (int code = chooseMemoryPolicy())
    return code;
  if (zero > 0)
    func->setAttr(LoomDialect::kZeroAttrName,
                  OpBuilder(func).getI64IntegerAttr(zero));
  if (mode == ShardingMode::Auto)
    if (int code = search())
      return code;
  if (int code = propagate())
    return code;
  if (int code = partitionProgram())
    return code;
  if (int code = splitStages())
    return code;
  if (pipeline.stages > 1 || pipeline.microBatches > 1) {
    std::string error;
    FailureOr<sharding::PipelineReport> stages =
        sharding::pipelineStep(func, pipeline, error);
    if (failed(stages))
      return fail(modelPath() + ": cannot pipeline the step on " +
                  config.mesh + ": " + error);
    explanation->recordPipeline(*stages);
    session.chosenLayerStages = stages->layerStages;
  }
  return 0;
}

/// The mesh from the configuration; the pipeline axis, first, becomes the
/// stages, each on the rest of the mesh (which the ops are sharded over).
int Partitioner::setUpMesh() {
  std::string error;
  meshAttr = parseMesh(context, config.mesh, error);
  if (!meshAttr)
    return fail(error);
  mesh = sharding::toMesh(*meshAttr, error);
  if (!mesh)
    return fail("--mesh: " + error);
  mode = options.shardingMode();
  pipeline.microBatches = config.microBatches;
  pipeline.schedule = toString(config.schedule).str();
  pipeline.ownMeshes = attempt.ownStageMeshes;
  if (config.layerStages)
    pipeline.layerStages = *config.layerStages;
  fullMesh = *mesh;
  if (std::optional<unsigned> pp = meshAttr->getAxisIndex("pp")) {
    if (*pp != 0)
      return fail("--mesh: the pipeline axis pp must come first, got '" +
                  config.mesh + "'");
    if (!options.training.enabled)
      return fail("--mesh pp=N pipelines a training step: it needs --train");
    pipeline.stages = meshAttr->getAxisSizes()[0];
    SmallVector<StringAttr> names;
    SmallVector<int64_t> sizes;
    for (auto [name, size] : llvm::zip(meshAttr->getAxisNames().drop_front(),
                                       meshAttr->getAxisSizes().drop_front())) {
      names.push_back(name);
      sizes.push_back(size);
    }
    if (names.empty()) {
      // One device per stage: a one-device submesh.
      names.push_back(StringAttr::get(&context, "dp"));
      sizes.push_back(1);
    }
    meshAttr = MeshAttr::get(&context, names, sizes);
    mesh = sharding::toMesh(*meshAttr, error);
    if (!mesh)
      return fail("--mesh: " + error);
  }
  if (config.schedule == Schedule::Interleaved) {
    if (config.virtualStages < 1)
      return fail("--virtual-stages must be at least 1, got " +
                  std::to_string(config.virtualStages));
    if (pipeline.microBatches % pipeline.stages != 0)
      return fail("--schedule interleaved runs the micro-batches in groups "
                  "of the pipeline's stages: --micro-batches " +
                  std::to_string(pipeline.microBatches) +
                  " is not a multiple of pp=" +
                  std::to_string(pipeline.stages));
    pipeline.virtualStages = config.virtualStages;
  } else if (config.virtualStagesGiven) {
    return fail("--virtual-stages needs --schedule interleaved");
  }
  for (auto f : module.getOps<func::FuncOp>())
    if (f.getSymName() == "main")
      func = f;
  if (!func)
    return fail(modelPath() + ": no function @main");
  func->setAttr(LoomDialect::kMeshAttrName, *meshAttr);
  return 0;
}

/// The profiles of the stage's submesh and of the whole mesh, and the
/// pipeline's costs: ops of the per-device program on the stage's
/// submesh, and sends from a rank to the same rank of the next stage.
int Partitioner::setUpCosts() {
  profile = sharding::profileForMesh(session.cluster, *mesh, grown);
  explanation.emplace(profile, *mesh, std::string(toString(mode)));
  groups = std::make_unique<sharding::GroupCache>(*mesh);
  bool fullGrown = false;
  fullProfile = sharding::profileForMesh(session.cluster, *fullMesh, fullGrown);
  const int64_t stageSize = mesh->numDevices();
  pipeline.opSeconds = [this](Operation *op) {
    return sharding::opSeconds(op, *groups, profile);
  };
  pipeline.sendSeconds = [this, stageSize](double bytes) {
    return cost::collectiveSeconds(fullProfile, cost::CollectiveKind::SendRecv,
                                   bytes, {0, stageSize});
  };
  return 0;
}

int Partitioner::applyStrategyFile() {
  const std::string &path = options.strategyFile;
  std::string error;
  if (!path.empty()) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return fail(path + ": " + buffer.getError().message());
    std::optional<sharding::StrategyFile> file =
        sharding::parseStrategyFile((*buffer)->getBuffer(), path, error);
    if (!file)
      return fail(error);
    if (!sharding::applyStrategies(func, *file, path, *mesh, error))
      return fail(error);
  }
  explanation->noteFixed(func);
  for (Operation &op : func.getBody().front())
    if (op.hasAttr(LoomDialect::kShardingAttrName) ||
        op.hasAttr(LoomDialect::kStrategyAttrName))
      userFixed.insert(&op);
  return 0;
}

sharding::SearchOptions Partitioner::searchOptions() const {
  sharding::SearchOptions search;
  search.profile = profile;
  search.memoryLimit = attempt.searchLimit;
  search.progress = std::ref(const_cast<SearchProgress &>(*progress));
  if (pipeline.stages > 1) {
    // One micro-batch's program is searched; a stage holds about 1/P of
    // the state and stage 0 the most micro-batches in flight.
    double p = static_cast<double>(pipeline.stages);
    search.stateShare = 1.0 / p;
    search.savedShare =
        search::inFlight(pipeline.schedule, pipeline.stages,
                         pipeline.microBatches, 0, pipeline.virtualStages) /
        p;
  }
  return search;
}

/// --mode auto, when memory binds: the ZeRO level and recompute join the
/// search. The lowest level (lower levels communicate less) at which the
/// fastest plan fits is the choice; if there is none, the highest level,
/// trading time for memory as the search does; recomputing layers only
/// when nothing fits without. When nothing fits at all, the most compact
/// choice's search says why. A search again after the plan came out over
/// the memory limit keeps the level and recompute the first one chose.
int Partitioner::chooseMemoryPolicy() {
  const bool train = options.training.enabled;
  const bool chooseZero = mode == ShardingMode::Auto && train &&
                          !config.zero && !session.earlier;
  const bool chooseRecompute = mode == ShardingMode::Auto && train &&
                               config.recompute.empty() && !session.earlier;
  recompute = config.recompute;
  std::string error;
  if (session.earlier && !config.zero)
    zero = session.earlier->zero;
  if (session.earlier && config.recompute.empty() &&
      session.earlier->recompute == "layers") {
    recompute = "layers";
    if (failed(sharding::markRecompute(func, recompute, error)))
      return fail(modelPath() + ": " + error);
  }
  if (!chooseZero && !chooseRecompute)
    return 0;
  // Level 1 is not tried without micro-batches: level 2 communicates as
  // much and holds less. With them it holds as much (the gradients add up
  // whole until the step's reduce-scatter), and level 1 is tried first.
  std::vector<int> levels = !chooseZero ? std::vector<int>{zero}
                            : pipeline.microBatches > 1
                                ? std::vector<int>{0, 1, 2, 3}
                                : std::vector<int>{0, 2, 3};
  std::vector<std::string> policies = {recompute};
  if (chooseRecompute)
    policies.push_back("layers");
  auto fits = [&](int level, const std::string &policy, bool fastestOnly) {
    OpBuilder builder(func);
    auto trial = cast<func::FuncOp>(builder.clone(*func));
    trial.setSymName("main_trial");
    trial->setAttr(LoomDialect::kZeroAttrName,
                   builder.getI64IntegerAttr(level));
    std::string ignored;
    bool marked = policy == config.recompute ||
                  succeeded(sharding::markRecompute(trial, policy, ignored));
    sharding::SearchOptions search = searchOptions();
    search.fastestOnly = fastestOnly;
    bool ok = marked && succeeded(sharding::searchShardings(trial, search));
    trials += marked;
    trial.erase();
    return ok;
  };
  auto choose = [&](int level, const std::string &policy) {
    zero = level;
    recompute = policy;
    return true;
  };
  // With micro-batches, recomputing comes before the higher levels:
  // ZeRO-3 re-gathers parameters that the micro-batches share, and
  // level 2 saves no gradient memory (see above).
  bool found = false;
  if (pipeline.microBatches > 1)
    for (int level : levels) {
      for (const std::string &policy : policies)
        if (fits(level, policy, /*fastestOnly=*/true)) {
          found = choose(level, policy);
          break;
        }
      if (found)
        break;
    }
  for (const std::string &policy : policies) {
    if (found)
      break;
    for (int level : levels)
      if (fits(level, policy, /*fastestOnly=*/true)) {
        found = choose(level, policy);
        break;
      }
    if (!found && fits(levels.back(), policy, /*fastestOnly=*/false))
      found = choose(levels.back(), policy);
  }
  if (!found)
    choose(levels.back(), policies.back());
  diagnostics.clear();
  if (recompute != config.recompute &&
      failed(sharding::markRecompute(func, recompute, error)))
    recompute = config.recompute;
  return 0;
}

/// The search fixes the forward ops; propagation completes the rest.
int Partitioner::search() {
  FailureOr<sharding::SearchReport> found =
      sharding::searchShardings(func, searchOptions());
  raw_ostream &log = session.log;
  log << "loom: --mode auto on " << profile.name;
  if (grown)
    log << " x" << profile.nodes << " nodes";
  std::string searches =
      trials ? " over " + std::to_string(trials + 1) + " searches" : "";
  if (failed(found)) {
    log << ": searched in " << format("%.2f", progress->seconds()) << " s"
        << searches << "; no plan\n";
    log.flush();
    if (session.earlier && !attempt.evaluating)
      return kNoPlanUnderLoweredLimit;
    return fail(modelPath() + ": cannot shard the model on " + meshText() +
                ": " + diagnostics);
  }
  report = std::move(*found);
  log << ": searched " << report->nodes << " ops (" << report->distinctOps
      << " distinct) in " << format("%.2f", progress->seconds()) << " s"
      << searches << "; " << (zero ? "ZeRO-" + std::to_string(zero) + "; " : "")
      << (!recompute.empty() ? "recompute " + recompute + "; " : "")
      << "predicted step " << explain::formatSeconds(report->seconds) << ", "
      << sharding::formatBytes(report->memoryBytes) << " per device"
      << (report->exact ? " (exact search)" : " (heuristic search)") << "\n";
  return 0;
}

/// Propagation, the strategy file written back, optimizer sharding and
/// recompute.
int Partitioner::propagate() {
  PassManager propagate(&context);
  PropagateShardingOptions propagation;
  propagation.mode = mode == ShardingMode::Data ? "data" : "semi";
  propagate.addNestedPass<func::FuncOp>(createPropagateSharding(propagation));
  if (failed(propagate.run(module)))
    return fail(modelPath() + ": cannot shard the model on " + meshText() +
                ": " + diagnostics);
  explanation->recordShardings(func, report ? &*report : nullptr);
  std::string error;
  if (!options.saveStrategyFile.empty()) {
    auto output = mlir::openOutputFile(options.saveStrategyFile, &error);
    if (!output)
      return fail(error);
    output->os() << sharding::writeStrategyFile(func, *mesh);
    output->keep();
  }
  if (zero > 0) {
    FailureOr<sharding::ZeroReport> zeroReport =
        sharding::shardOptimizer(func, zero);
    if (failed(zeroReport))
      return fail(modelPath() + ": cannot shard the optimizer (--zero " +
                  std::to_string(zero) + "): " + diagnostics);
    explanation->recordZero(*zeroReport);
    // The updates now want split gradients: the backward ops (but those
    // the user fixed) are propagated again, so that a gradient stays a
    // partial sum up to its reduce-scatter instead of being all-reduced
    // on the way.
    Operation *loss = sharding::analyzeStep(func).loss;
    bool backward = false;
    for (Operation &op : func.getBody().front()) {
      if (backward && !userFixed.contains(&op) &&
          !sharding::isOptimizerUpdate(&op))
        op.removeAttr(LoomDialect::kShardingAttrName);
      backward |= &op == loss;
    }
    if (failed(propagate.run(module)))
      return fail(modelPath() + ": cannot shard the model on " + meshText() +
                  " with --zero " + std::to_string(zero) + ": " + diagnostics);
  }
  explanation->recordRecompute(sharding::applyRecompute(func), recompute);
  return 0;
}

/// The per-device program; stage marks, which partitioning does not keep,
/// are taken per ONNX node first.
int Partitioner::partitionProgram() {
  for (Operation &op : func.getBody().front())
    if (auto stage = op.getAttrOfType<IntegerAttr>(LoomDialect::kStageAttrName))
      pipeline.nodeStages[sharding::nodeName(&op)] = stage.getInt();
  PassManager lower(&context);
  PartitionOptions partitionOptions;
  partitionOptions.recordLayouts = attempt.ownStageMeshes;
  lower.addNestedPass<func::FuncOp>(createPartition(partitionOptions));
  lower.addPass(createCSEPass());
  if (failed(lower.run(module)))
    return fail(modelPath() + ": cannot partition the model on " + meshText() +
                ": " + diagnostics);
  explanation->recordProgram(func);
  return 0;
}

/// --mode auto: the stages' layers by the cost model (Alpa's inter-op pass
/// on this submesh), each layer costed on the partitioned program. While
/// --stages auto costs a candidate, fills it and returns kEvaluated.
int Partitioner::splitStages() {
  StageCandidate *evaluating = attempt.evaluating;
  if (!(mode == ShardingMode::Auto && options.training.enabled &&
        pipeline.nodeStages.empty() && pipeline.layerStages.empty() &&
        (pipeline.stages > 1 || evaluating)))
    return 0;
  std::string error;
  FailureOr<std::vector<search::LayerCost>> layers =
      sharding::measureLayers(func, pipeline, error);
  if (failed(layers) && evaluating) {
    evaluating->why = error;
    return kEvaluated;
  }
  if (failed(layers))
    return fail(modelPath() + ": cannot split the step into " +
                std::to_string(pipeline.stages) + " pipeline stages: " + error);
  search::StageSplitOptions splitOptions;
  splitOptions.stages = pipeline.stages;
  splitOptions.microBatches = pipeline.microBatches;
  splitOptions.schedule = pipeline.schedule;
  splitOptions.virtualStages = pipeline.virtualStages;
  splitOptions.memoryLimit = static_cast<double>(
      attempt.searchLimit > 0 ? attempt.searchLimit : profile.memoryCapacity);
  splitOptions.sendSeconds = pipeline.sendSeconds;
  std::optional<search::StageSplit> split =
      search::splitStages(*layers, splitOptions);
  if (!split && evaluating) {
    evaluating->why = "too few layers";
    return kEvaluated;
  }
  if (!split)
    return fail(
        modelPath() + ": the model has " + std::to_string(layers->size()) +
        " layers (ONNX node names' first path components), too few for " +
        std::to_string(pipeline.stages * pipeline.virtualStages) +
        (pipeline.virtualStages > 1 ? " pipeline chunks" : " pipeline stages"));
  double memory = 0;
  for (double m : split->memoryBytes)
    memory = std::max(memory, m);
  if (evaluating) {
    evaluating->seconds = split->seconds;
    evaluating->memoryBytes = memory;
    evaluating->fits = split->fits;
    // The sends' seconds by value: pipeline.sendSeconds refers to this
    // attempt's profile.
    auto sends = std::make_shared<std::map<double, double>>();
    for (const search::LayerCost &layer : *layers)
      for (double bytes : {layer.forwardBytes, layer.backwardBytes})
        if (bytes > 0 && pipeline.sendSeconds)
          (*sends)[bytes] = pipeline.sendSeconds(bytes);
    evaluating->sendSeconds = [sends](double bytes) {
      auto it = sends->find(bytes);
      return it == sends->end() ? 0.0 : it->second;
    };
    evaluating->layers = std::move(*layers);
    evaluating->stageDevices = mesh->numDevices();
    evaluating->memoryLimit = splitOptions.memoryLimit;
    return kEvaluated;
  }
  raw_ostream &log = session.log;
  log << "loom: pipeline stages by the cost model: " << split->starts.size()
      << (pipeline.virtualStages > 1
              ? " chunks (" + std::to_string(pipeline.virtualStages) +
                    " per stage) of"
              : " stages of");
  for (size_t s = 0; s < split->starts.size(); ++s) {
    size_t end = split->end(s, layers->size());
    for (size_t i = split->starts[s]; i < end; ++i)
      pipeline.layerStages[(*layers)[i].name] = static_cast<int64_t>(s);
    log << (s ? ", " : " ") << end - split->starts[s];
  }
  log << " layers; predicted step " << explain::formatSeconds(split->seconds)
      << ", the largest stage holding " << sharding::formatBytes(memory)
      << (split->fits ? ""
                      : " (over the limit: no split fits by this "
                        "count; the most compact)")
      << "\n";
  return 0;
}

} // namespace loom::pipeline
