//===- StageMeshes.cpp - Pipeline stages on submeshes of their own --------===//
//
// --stage-meshes dp=4/tp=2: the step is compiled once per distinct submesh
// (with P stages of it, P the number of stage meshes; every compile gives
// layers the same stages: --stages auto's, the auto-mode split over the
// stage meshes, or the first compile's), and stage s is taken from the
// compile on its own submesh. Every compile numbers the values that cross
// stages by the compute ops that make them, so the stages' sends and
// receives pair up; checkStageMessages checks that they do.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/CompileSession.h"

#include "compiler/analysis/StepCost.h"

#include <map>
#include <tuple>

using namespace llvm;

namespace loom::pipeline {

std::optional<std::string> checkStageMessages(const plan::Plan &plan) {
  using End = std::tuple<int64_t, int64_t, int64_t>; // from, to, tag
  std::map<End, std::string> sends, recvs;
  auto typeText = [](const plan::Value &v) {
    std::string text = plan::DType_Name(v.global_type().dtype()) + "[";
    for (int64_t d : v.global_type().shape())
      text += std::to_string(d) + ",";
    return text + "]";
  };
  for (const plan::Stage &stage : plan.stages()) {
    const plan::Program &program = stage.program();
    for (const plan::Instruction &inst : program.instructions()) {
      if (inst.op() != "send" && inst.op() != "recv")
        continue;
      int64_t peer = -1, tag = -1;
      for (const plan::Attribute &a : inst.attributes()) {
        if (a.name() == "peer_stage")
          peer = a.int_value();
        if (a.name() == "tag")
          tag = a.int_value();
      }
      if (inst.op() == "send")
        sends[{stage.index(), peer, tag}] =
            typeText(program.values(inst.operands(0)));
      else
        recvs[{peer, stage.index(), tag}] =
            typeText(program.values(inst.results(0)));
    }
  }
  for (const auto &[ends, type] : sends) {
    auto [from, to, tag] = ends;
    auto it = recvs.find(ends);
    std::string where = "stage " + std::to_string(from) + " sends tag " +
                        std::to_string(tag) + " (" + type + ") to stage " +
                        std::to_string(to);
    if (it == recvs.end())
      return where + ", which does not receive it";
    if (it->second != type)
      return where + ", which receives it as " + it->second;
  }
  for (const auto &[ends, type] : recvs)
    if (!sends.count(ends))
      return "stage " + std::to_string(std::get<1>(ends)) + " receives tag " +
             std::to_string(std::get<2>(ends)) + " from stage " +
             std::to_string(std::get<0>(ends)) + ", which does not send it";
  return std::nullopt;
}

/// --stage-meshes in auto mode: each distinct submesh's layer costs (from
/// a costing compile of P stages on it), and the layers split over the
/// stages on their own submeshes (search::splitOnSubmeshes with the
/// stages' shapes given). nullopt when a submesh's compile does not cost
/// layers (the user gave stages per node, or an interleaved schedule): the
/// first compile's split then stands; `code` 1 after an error.
std::optional<StringMap<int64_t>>
CompileSession::splitOverStageMeshes(const ParallelConfig &config,
                                     int64_t searchLimit,
                                     ArrayRef<StringRef> meshes, int &code) {
  if (options.mode != ShardingMode::Auto ||
      config.schedule == Schedule::Interleaved)
    return std::nullopt;
  std::vector<search::SubmeshShape> shapes;
  search::SubmeshSplitOptions split;
  split.devices = 0;
  split.microBatches = config.microBatches;
  split.schedule = toString(config.schedule).str();
  std::map<std::string, size_t> index;
  for (StringRef mesh : meshes) {
    auto [it, added] = index.try_emplace(mesh.str(), shapes.size());
    if (added) {
      StageCandidate c;
      Attempt attempt;
      attempt.parallel = config;
      attempt.parallel.mesh =
          "pp=" + std::to_string(meshes.size()) + "," + mesh.str();
      attempt.parallel.layerStages.reset();
      attempt.searchLimit = searchLimit;
      attempt.ownStageMeshes = true;
      attempt.evaluating = &c;
      int attemptCode = 0;
      std::optional<plan::Plan> none = buildPlan(attempt, attemptCode);
      if (attemptCode > 0) {
        code = attemptCode;
        return std::nullopt;
      }
      if (attemptCode != kEvaluated || !c.why.empty())
        return std::nullopt;
      shapes.push_back(
          {mesh.str(), c.stageDevices, std::move(c.layers), c.sendSeconds});
      split.memoryLimit = c.memoryLimit;
    }
    split.stageShapes.push_back(it->second);
    split.devices += shapes[it->second].devices;
  }
  std::optional<search::SubmeshSplit> best =
      search::splitOnSubmeshes(shapes, split);
  if (!best)
    return std::nullopt;
  const std::vector<search::LayerCost> &layers = shapes.front().layers;
  StringMap<int64_t> stages;
  log << "loom: pipeline stages over the stage meshes by the cost model:";
  for (size_t s = 0; s < best->starts.size(); ++s) {
    size_t end = best->end(s, layers.size());
    for (size_t i = best->starts[s]; i < end; ++i)
      stages[layers[i].name] = static_cast<int64_t>(s);
    log << (s ? ", " : " ") << end - best->starts[s];
  }
  log << " layers; predicted step " << explain::formatSeconds(best->seconds)
      << "\n";
  return stages;
}

namespace {

/// The predicted step of `out` from its stages' own times (1F1B and
/// GPipe), the totals' split between compute and communication kept.
void rescaleToStageTimes(plan::Plan &out, int64_t microBatches) {
  plan::Explanation &explanation = *out.mutable_explanation();
  std::vector<double> micro, step;
  for (const plan::Explanation::Stage &stage : explanation.stages()) {
    micro.push_back(stage.micro_batch_seconds());
    step.push_back(stage.step_seconds());
  }
  double seconds = search::pipelineSeconds(micro, step, microBatches);
  if (explanation.virtual_stages() <= 1 && seconds > 0 &&
      explanation.step_seconds() > 0) {
    double scale = seconds / explanation.step_seconds();
    explanation.set_step_seconds(seconds);
    explanation.set_compute_seconds(explanation.compute_seconds() * scale);
    explanation.set_comm_seconds(explanation.comm_seconds() * scale);
  }
}

} // namespace

std::optional<plan::Plan>
CompileSession::buildOnStageMeshes(const ParallelConfig &config,
                                   int64_t searchLimit, int &code) {
  auto failed = [&](const std::string &message) -> std::optional<plan::Plan> {
    code = fail(message);
    return std::nullopt;
  };
  SmallVector<StringRef> shapes;
  StringRef(config.stageMeshes).split(shapes, '/');
  if (shapes.size() < 2)
    return failed("--stage-meshes expects a submesh per stage separated by "
                  "'/', e.g. dp=4/tp=2, got '" +
                  config.stageMeshes + "'");
  for (StringRef shape : shapes)
    if (shape.empty() || shape.contains("pp="))
      return failed("--stage-meshes: each stage's submesh names its axes, "
                    "without pp (the stages are the list), got '" +
                    config.stageMeshes + "'");
  const std::string stages = std::to_string(shapes.size());
  std::optional<StringMap<int64_t>> fixed = config.layerStages;
  if (!fixed) {
    fixed = splitOverStageMeshes(config, searchLimit, shapes, code);
    if (code)
      return std::nullopt;
  }
  std::map<std::string, plan::Plan> plans;
  for (StringRef shape : shapes) {
    if (plans.count(shape.str()))
      continue;
    Attempt attempt;
    attempt.parallel = config;
    attempt.parallel.mesh = "pp=" + stages + "," + shape.str();
    attempt.parallel.layerStages = fixed;
    attempt.searchLimit = searchLimit;
    attempt.ownStageMeshes = true;
    std::optional<plan::Plan> plan = buildPlan(attempt, code);
    if (!plan)
      return std::nullopt;
    if (!fixed)
      fixed = chosenLayerStages;
    plans[shape.str()] = std::move(*plan);
  }
  plan::Plan out = plans[shapes.front().str()];
  out.clear_stages();
  int64_t next = 0;
  for (auto [s, shape] : llvm::enumerate(shapes)) {
    plan::Stage *stage = out.add_stages();
    *stage = plans[shape.str()].stages(static_cast<int>(s));
    stage->clear_ranks();
    int64_t devices = 1;
    for (const plan::Mesh::Axis &axis : stage->mesh().axes())
      devices *= axis.size();
    for (int64_t r = 0; r < devices; ++r)
      stage->add_ranks(next++);
    // The stage as its own compile explains it (the per-node table and the
    // totals are the first submesh's compile).
    const plan::Explanation &own = plans[shape.str()].explanation();
    if (static_cast<int>(s) < own.stages_size() &&
        static_cast<int>(s) < out.explanation().stages_size())
      *out.mutable_explanation()->mutable_stages(static_cast<int>(s)) =
          own.stages(static_cast<int>(s));
  }
  out.mutable_mesh()->mutable_axes(0)->set_size(next);
  rescaleToStageTimes(out, config.microBatches);
  if (std::optional<std::string> mismatch = checkStageMessages(out))
    return failed(modelPath() + ": the compiles on " + config.stageMeshes +
                  " disagree on the values that cross stages: " + *mismatch);
  return out;
}

} // namespace loom::pipeline
