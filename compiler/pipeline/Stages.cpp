//===- Stages.cpp - The pipeline's stages after partitioning --------------===//
//
// What follows the sharding passes on a pipelined step (not yet passes,
// see LoomPipeline.h): under --mode auto the stages' layers by the cost
// model (Alpa's inter-op split, each layer costed on the partitioned
// program), and the pipeline's stages and micro-batches. While --stages
// auto costs a candidate, the attempt stops after the split.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/CompileSession.h"
#include "compiler/pipeline/ExplanationRecorder.h"

#include "dialects/LoomDialect.h"
#include "passes/Pipeline.h"
#include "passes/StepCost.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <map>
#include <memory>

using namespace llvm;
using namespace mlir;

namespace loom::pipeline {

/// The stage split and pipelining of one attempt's partitioned @main, over
/// what the sharding passes left (ExplanationRecorder). Each step returns
/// 0 or a CompileSession code.
class Stager {
public:
  Stager(CompileSession &session, const CompileOptions &options,
         const Attempt &attempt, ExplanationRecorder &recorder)
      : session(session), options(options), attempt(attempt),
        config(attempt.parallel), recorder(recorder), mesh(&*recorder.mesh),
        func(recorder.func) {}

  int run();

private:
  int splitStages();
  int fail(const Twine &message) { return session.fail(message); }
  std::string modelPath() const { return options.model.path; }

  CompileSession &session;
  const CompileOptions &options;
  const Attempt &attempt;
  const ParallelConfig &config;
  ExplanationRecorder &recorder;
  const layout::Mesh *mesh;
  func::FuncOp func;
  sharding::PipelineOptions pipeline;
  std::unique_ptr<sharding::GroupCache> groups;
  cost::HardwareProfile fullProfile;
};

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

int CompileSession::stageAndPipeline(const Attempt &attempt,
                                     ExplanationRecorder &recorder) {
  return Stager(*this, options, attempt, recorder).run();
}

int Stager::run() {
  pipeline.stages = pipelineStages(config.mesh);
  pipeline.microBatches = config.microBatches;
  pipeline.schedule = toString(config.schedule).str();
  if (config.schedule == Schedule::Interleaved)
    pipeline.virtualStages = config.virtualStages;
  pipeline.ownMeshes = attempt.ownStageMeshes;
  if (config.layerStages)
    pipeline.layerStages = *config.layerStages;
  // Stages given per ONNX node (partitioning keeps the loom.stage marks):
  // they replace the split by the cost model.
  for (Operation &op : func.getBody().front())
    if (auto stage = op.getAttrOfType<IntegerAttr>(LoomDialect::kStageAttrName))
      pipeline.nodeStages[sharding::nodeName(&op)] = stage.getInt();
  // The pipeline's costs: ops of the per-device program on the stage's
  // submesh, and sends from a rank to the same rank of the next stage.
  std::string error;
  groups = std::make_unique<sharding::GroupCache>(*mesh);
  // The whole mesh, the pipeline axis included (the mesh was checked by
  // loom-assign-mesh).
  std::vector<layout::MeshAxis> axes;
  llvm::SmallVector<StringRef> parts;
  StringRef(config.mesh).split(parts, ',');
  for (StringRef part : parts) {
    StringRef name, value;
    int64_t size = 1;
    if (splitAssignment(part.trim(), name, value))
      (void)value.getAsInteger(10, size);
    axes.push_back({name.str(), size});
  }
  std::optional<layout::Mesh> full = layout::Mesh::create(axes, error);
  bool fullGrown = false;
  fullProfile = sharding::profileForMesh(session.cluster, full ? *full : *mesh,
                                         fullGrown);
  const int64_t stageSize = mesh->numDevices();
  pipeline.opSeconds = [this](Operation *op) {
    return sharding::opSeconds(op, *groups, recorder.profile);
  };
  pipeline.sendSeconds = [this, stageSize](double bytes) {
    return cost::collectiveSeconds(fullProfile, cost::CollectiveKind::SendRecv,
                                   bytes, {0, stageSize});
  };
  if (int code = splitStages())
    return code;
  if (pipeline.stages > 1 || pipeline.microBatches > 1) {
    // loom-pipeline, with the costs its report gives the explanation.
    ModuleOp module = func->getParentOfType<ModuleOp>();
    PassManager pm(module->getContext());
    pm.addPass(sharding::createPipelinePass(pipeline));
    std::string diagnostics;
    ScopedDiagnosticHandler handler(module->getContext(), [&](Diagnostic &d) {
      diagnostics += d.str();
      return success();
    });
    if (failed(pm.run(module)))
      return fail(modelPath() + ": cannot pipeline the step on " + config.mesh +
                  ": " + diagnostics);
    // The pass manager owns the pass; its report is read before it goes.
    const sharding::PipelineReport *stages = nullptr;
    for (Pass &pass : pm.getPasses())
      if (!stages)
        stages = sharding::pipelineReport(pass);
    recorder.explanation->recordPipeline(*stages);
    session.chosenLayerStages = stages->layerStages;
  }
  return 0;
}

int Stager::splitStages() {
  StageCandidate *evaluating = attempt.evaluating;
  if (!(options.shardingMode() == ShardingMode::Auto &&
        options.training.enabled && pipeline.nodeStages.empty() &&
        pipeline.layerStages.empty() && (pipeline.stages > 1 || evaluating)))
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
      attempt.searchLimit > 0 ? attempt.searchLimit
                              : recorder.profile.memoryCapacity);
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
