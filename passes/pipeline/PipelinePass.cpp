//===- PipelinePass.cpp - loom-pipeline -----------------------------------===//
//
// The pass over pipelineStep (Pipeline.cpp): the stages from the ops'
// `loom.stage` marks (partitioning keeps them) or the layer stages given,
// and the report kept for a pass instrumentation (with the costs of the
// options the compiler library gives it).
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/ShardingSupport.h"
#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"
#include "passes/pipeline/Pipeline.h"

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

  std::optional<PipelineReport> report;
  /// PipelineOptions::costedMicroBatches (no textual option: only the
  /// compiler library's simulation sets it).
  int64_t costedMicroBatches = 0;
};

void PipelinePass::runOnOperation() {
  ModuleOp module = getOperation();
  report.reset();
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func) {
    module.emitError("loom-pipeline: no function @main");
    return signalPassFailure();
  }
  PipelineOptions options;
  options.stages = stages;
  options.microBatches = microBatches;
  options.schedule = schedule;
  options.virtualStages = virtualStages;
  options.ownMeshes = ownMeshes;
  options.costedMicroBatches = costedMicroBatches;
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
  // Stages per layer from loom-split-stages (not kept in the stages).
  if (auto split = func->getAttrOfType<DictionaryAttr>(
          LoomDialect::kLayerStagesAttrName)) {
    if (layerStages.empty())
      for (NamedAttribute layer : split)
        options.layerStages[layer.getName().getValue()] =
            cast<IntegerAttr>(layer.getValue()).getInt();
    func->removeAttr(LoomDialect::kLayerStagesAttrName);
  }
  // Stages given per ONNX node (a strategy file's "stage").
  for (Operation &op : func.getBody().front())
    if (auto stage = op.getAttrOfType<IntegerAttr>(LoomDialect::kStageAttrName))
      options.nodeStages[nodeName(&op)] = stage.getInt();
  std::string error;
  // The report's stage times, on the profile given.
  std::unique_ptr<StageCosts> costs;
  if (!profile.empty()) {
    std::optional<cost::HardwareProfile> hw = cost::findProfile(profile, error);
    auto mesh = meshOf(func, "loom-pipeline");
    if (!hw || failed(mesh)) {
      if (!hw)
        func.emitError() << error;
      return signalPassFailure();
    }
    costs = std::make_unique<StageCosts>(*hw, mesh->second, stages);
    costs->apply(options);
  }
  FailureOr<PipelineReport> done = pipelineStep(func, options, error);
  if (failed(done)) {
    module.emitError(error);
    return signalPassFailure();
  }
  report = std::move(*done);
}

} // namespace

loom::sharding::StageCosts::StageCosts(const cost::HardwareProfile &profile,
                                       const layout::Mesh &mesh, int64_t stages)
    : mesh(mesh), devices(mesh.numDevices()), groups(this->mesh) {
  bool grown = false;
  stage = profileForMesh(profile, mesh, grown);
  // Only the whole mesh's device count matters to the profile.
  std::string error;
  std::optional<layout::Mesh> all =
      layout::Mesh::create({{"pp", stages * devices}}, error);
  whole = all ? profileForMesh(profile, *all, grown) : stage;
}

void loom::sharding::StageCosts::apply(PipelineOptions &options) const {
  options.opSeconds = [this](Operation *op) {
    return opSeconds(op, groups, stage);
  };
  options.sendSeconds = [this](double bytes) {
    return cost::collectiveSeconds(whole, cost::CollectiveKind::SendRecv, bytes,
                                   {0, devices});
  };
}

std::unique_ptr<Pass>
loom::sharding::createPipelinePass(const PipelineOptions &options,
                                   StringRef profile) {
  PipelineStagesOptions flags;
  flags.stages = options.stages;
  flags.microBatches = options.microBatches;
  flags.schedule = options.schedule;
  flags.virtualStages = options.virtualStages;
  flags.ownMeshes = options.ownMeshes;
  for (const auto &entry : options.layerStages)
    flags.layerStages.push_back(entry.getKey().str() + "=" +
                                std::to_string(entry.getValue()));
  flags.profile = profile.str();
  auto pass = std::make_unique<PipelinePass>(flags);
  pass->costedMicroBatches = options.costedMicroBatches;
  return pass;
}

const PipelineReport *loom::sharding::pipelineReport(Pass &pass) {
  if (pass.getTypeID() != TypeID::get<PipelinePass>())
    return nullptr;
  auto &pipeline = static_cast<PipelinePass &>(pass);
  return pipeline.report ? &*pipeline.report : nullptr;
}
