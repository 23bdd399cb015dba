//===- PipelinePass.cpp - loom-pipeline -----------------------------------===//
//
// The pass over pipelineStep (Pipeline.cpp): the stages from the ops'
// `loom.stage` marks (partitioning keeps them) or the layer stages given,
// and the report kept for a pass instrumentation (with the costs of the
// options the compiler library gives it).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "passes/StepCost.h"

namespace loom {
#define GEN_PASS_DEF_PIPELINESTAGES
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::sharding;

namespace {

struct PipelinePass : public loom::impl::PipelineStagesBase<PipelinePass> {
  using PipelineStagesBase::PipelineStagesBase;
  void runOnOperation() override;

  /// The costs for the report, when the compiler library gives them.
  PipelineOptions costs;
  std::optional<PipelineReport> report;
};

void PipelinePass::runOnOperation() {
  ModuleOp module = getOperation();
  report.reset();
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func) {
    module.emitError("loom-pipeline: no function @main");
    return signalPassFailure();
  }
  PipelineOptions options = costs;
  options.stages = stages;
  options.microBatches = microBatches;
  options.schedule = schedule;
  options.virtualStages = virtualStages;
  options.ownMeshes = ownMeshes;
  for (const std::string &entry : layerStages) {
    auto [layer, stage] = StringRef(entry).rsplit('=');
    int64_t s = 0;
    if (layer.empty() || stage.getAsInteger(10, s) || s < 0) {
      func.emitError() << "loom-pipeline: layer-stages expects LAYER=STAGE, "
                          "got '"
                       << entry << "'";
      return signalPassFailure();
    }
    options.layerStages[layer] = s;
  }
  // Stages given per ONNX node (a strategy file's "stage").
  for (Operation &op : func.getBody().front())
    if (auto stage = op.getAttrOfType<IntegerAttr>(LoomDialect::kStageAttrName))
      options.nodeStages[nodeName(&op)] = stage.getInt();
  std::string error;
  FailureOr<PipelineReport> done = pipelineStep(func, options, error);
  if (failed(done)) {
    module.emitError(error);
    return signalPassFailure();
  }
  report = std::move(*done);
}

} // namespace

std::unique_ptr<Pass>
loom::sharding::createPipelinePass(const PipelineOptions &options) {
  PipelineStagesOptions flags;
  flags.stages = options.stages;
  flags.microBatches = options.microBatches;
  flags.schedule = options.schedule;
  flags.virtualStages = options.virtualStages;
  flags.ownMeshes = options.ownMeshes;
  for (const auto &entry : options.layerStages)
    flags.layerStages.push_back(entry.getKey().str() + "=" +
                                std::to_string(entry.getValue()));
  auto pass = std::make_unique<PipelinePass>(flags);
  pass->costs.opSeconds = options.opSeconds;
  pass->costs.sendSeconds = options.sendSeconds;
  pass->costs.axis = options.axis;
  return pass;
}

const PipelineReport *loom::sharding::pipelineReport(Pass &pass) {
  if (pass.getTypeID() != TypeID::get<PipelinePass>())
    return nullptr;
  auto &pipeline = static_cast<PipelinePass &>(pass);
  return pipeline.report ? &*pipeline.report : nullptr;
}
