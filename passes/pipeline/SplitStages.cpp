//===- SplitStages.cpp - loom-split-stages --------------------------------===//
//
// Alpa's inter-op split as a pass: the layers of the partitioned step
// costed on the stage's submesh (measureLayers, Pipeline.cpp), split over
// the stages by search::splitStages, and the result set as @main's
// loom.layer_stages for loom-pipeline. The report (costs and split) is
// kept for a pass instrumentation: `--stages auto` costs its candidates
// with it.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/ShardingSupport.h"
#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"
#include "passes/pipeline/Pipeline.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_SPLITSTAGES
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::sharding;

namespace {

struct SplitStagesPass : public loom::impl::SplitStagesBase<SplitStagesPass> {
  using SplitStagesBase::SplitStagesBase;
  void runOnOperation() override;
  /// Fails with `message`; `why` is the report's short reason.
  void fail(Operation *at, const std::string &message, std::string why) {
    report->why = std::move(why);
    at->emitError(message);
    signalPassFailure();
  }

  std::optional<StageSplitReport> report;
};

void SplitStagesPass::runOnOperation() {
  ModuleOp module = getOperation();
  report.reset();
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func) {
    module.emitError("loom-split-stages: no function @main");
    return signalPassFailure();
  }
  // Stages a strategy file gave per node are the user's split.
  for (Operation &op : func.getBody().front())
    if (op.hasAttr(LoomDialect::kStageAttrName))
      return markAllAnalysesPreserved();
  auto mesh = meshOf(func, "loom-split-stages");
  if (failed(mesh))
    return signalPassFailure();
  std::string error;
  std::optional<cost::HardwareProfile> hw = cost::findProfile(profile, error);
  if (!hw) {
    func.emitError() << error;
    return signalPassFailure();
  }
  report.emplace();
  StageCosts costs(*hw, mesh->second, stages);
  PipelineOptions pipeline;
  pipeline.stages = stages;
  pipeline.microBatches = microBatches;
  pipeline.schedule = schedule;
  pipeline.virtualStages = virtualStages;
  pipeline.ownMeshes = ownMeshes;
  costs.apply(pipeline);
  FailureOr<std::vector<search::LayerCost>> layers =
      measureLayers(func, pipeline, error);
  if (failed(layers))
    return fail(func,
                "cannot split the step into " + std::to_string(stages) +
                    " pipeline stages: " + error,
                error);
  search::StageSplitOptions split;
  split.stages = stages;
  split.microBatches = microBatches;
  split.schedule = stringifyPipelineSchedule(schedule).str();
  split.virtualStages = virtualStages;
  split.memoryLimit = static_cast<double>(
      memoryLimit > 0 ? memoryLimit : costs.stageProfile().memoryCapacity);
  split.sendSeconds = pipeline.sendSeconds;
  report->split = search::splitStages(*layers, split);
  report->memoryLimit = split.memoryLimit;
  report->stageDevices = costs.stageDevices();
  // The sends' seconds by value: the candidates of --stages auto outlive
  // this pass's profile.
  for (const search::LayerCost &layer : *layers)
    for (double bytes : {layer.forwardBytes, layer.backwardBytes})
      if (bytes > 0)
        report->sendSeconds[bytes] = pipeline.sendSeconds(bytes);
  report->layers = std::move(*layers);
  if (!report->split)
    return fail(
        func,
        "the model has " + std::to_string(report->layers.size()) +
            " layers (ONNX node names' first path components), too "
            "few for " +
            std::to_string(stages * virtualStages) +
            (virtualStages > 1 ? " pipeline chunks" : " pipeline stages"),
        "too few layers");
  Builder b(func.getContext());
  SmallVector<NamedAttribute> stagesOf;
  const search::StageSplit &best = *report->split;
  for (size_t s = 0; s < best.starts.size(); ++s)
    for (size_t i = best.starts[s]; i < best.end(s, report->layers.size()); ++i)
      stagesOf.push_back(
          b.getNamedAttr(report->layers[i].name, b.getI64IntegerAttr(s)));
  func->setAttr(LoomDialect::kLayerStagesAttrName,
                b.getDictionaryAttr(stagesOf));
}

} // namespace

const StageSplitReport *loom::sharding::splitStagesReport(Pass &pass) {
  if (pass.getTypeID() != TypeID::get<SplitStagesPass>())
    return nullptr;
  auto &split = static_cast<SplitStagesPass &>(pass);
  return split.report ? &*split.report : nullptr;
}
