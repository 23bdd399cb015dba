//===- Explain.cpp - What a plan is predicted to cost, and why ------------===//

#include "compiler/explain/Explain.h"
#include "compiler/plan/PlanEmitter.h"

#include "compiler/analysis/StepCost.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <numeric>

using namespace mlir;

namespace loom::explain {

/// A mesh of one device: plans without a mesh have every layout replicated.
static layout::Mesh oneDevice() {
  std::string error;
  return *layout::Mesh::create({{"device", 1}}, error);
}

ExplanationBuilder::ExplanationBuilder(cost::HardwareProfile profile,
                                       std::optional<layout::Mesh> mesh,
                                       std::string mode)
    : profile(std::move(profile)), mesh(mesh ? *mesh : oneDevice()),
      hasMesh(mesh.has_value()) {
  explanation.set_cluster(this->profile.name);
  explanation.set_cluster_nodes(this->profile.nodes);
  explanation.set_mode(std::move(mode));
}

plan::Explanation::Node &ExplanationBuilder::nodeFor(const std::string &name) {
  auto [it, inserted] = nodeIndex.try_emplace(name, explanation.nodes_size());
  if (inserted)
    explanation.add_nodes()->set_name(name);
  return *explanation.mutable_nodes(it->second);
}

void ExplanationBuilder::noteFixed(func::FuncOp func) {
  func.walk([&](Operation *op) {
    if (op->hasAttr(LoomDialect::kShardingAttrName) ||
        op->hasAttr(LoomDialect::kStrategyAttrName))
      fixed.insert(op);
  });
}

/// Appends `op` to a node's "matmul+add" list, once, and at most two.
static void addOpName(plan::Explanation::Node &node, Operation *op) {
  std::string name = op->getName().stripDialect().str();
  std::string list = node.op();
  SmallVector<StringRef> parts;
  StringRef(list).split(parts, '+');
  if (llvm::is_contained(parts, name) || llvm::is_contained(parts, "..."))
    return;
  node.set_op(list.empty()        ? name
              : parts.size() >= 2 ? list + "+..."
                                  : list + "+" + name);
}

void ExplanationBuilder::recordShardings(func::FuncOp func,
                                         const sharding::SearchReport *search) {
  std::string error;
  sharding::StepShape step = sharding::analyzeStep(func);
  sharding::NodeCoster coster(func, mesh, profile, step);
  std::map<Operation *, const sharding::SearchChoice *> choices;
  if (search)
    for (const sharding::SearchChoice &c : search->choices)
      choices[c.op] = &c;
  for (Operation *op : sharding::forwardOps(func, step)) {
    std::string name = sharding::nodeName(op);
    if (name.empty())
      name = sharding::describeOp(op);
    plan::Explanation::Node &node = nodeFor(name);
    forwardNodes.insert(name);
    addOpName(node, op);
    ShardingRule rule = cast<ShardingOpInterface>(op).getShardingRule();
    std::optional<FactorAxes> axes;
    if (auto attr =
            op->getAttrOfType<ArrayAttr>(LoomDialect::kShardingAttrName))
      axes = sharding::factorsFromAttr(attr, mesh, error);
    if (!axes)
      axes = FactorAxes(rule.factors.size());
    std::optional<sharding::OpLayouts> layouts =
        sharding::deriveLayouts(rule, *axes, mesh, error);
    if (!layouts)
      continue;
    node.set_memory_bytes(
        node.memory_bytes() +
        static_cast<int64_t>(
            coster.terms(op, rule, *axes, *layouts).memoryBytes));
    if (!node.layouts().empty() || !hasMesh)
      continue; // the node's first op speaks for it
    node.set_layouts(sharding::compactLayouts(*layouts, mesh));
    auto it = choices.find(op);
    if (it != choices.end()) {
      const sharding::SearchChoice &c = *it->second;
      node.set_chosen_by(c.fixed ? "fixed" : "search");
      node.set_runner_up(c.runnerUp);
      node.set_runner_up_seconds(c.runnerUpSeconds);
      node.set_runner_up_memory(static_cast<int64_t>(c.runnerUpMemory));
    } else {
      node.set_chosen_by(fixed.count(op) ? "fixed" : "propagated");
    }
  }
  if (search) {
    explanation.set_search_seconds(search->seconds);
    explanation.set_search_memory_bytes(
        static_cast<int64_t>(search->memoryBytes));
    explanation.set_search_exact(search->exact);
  }
}

void ExplanationBuilder::recordRecompute(
    const sharding::RecomputeReport &recompute, const std::string &policy) {
  if (recompute.marked == 0)
    return;
  explanation.set_recompute(policy.empty() ? "marks" : policy);
  explanation.set_recompute_ops(recompute.marked);
  explanation.set_recompute_unsaved_bytes(
      static_cast<int64_t>(recompute.unsavedBytes));
}

void ExplanationBuilder::recordPipeline(
    const sharding::PipelineReport &pipeline) {
  int64_t p = static_cast<int64_t>(pipeline.stages.size());
  int64_t m = pipeline.microBatches;
  // The plan's mesh is one stage's; the cluster holds every stage's devices.
  int64_t perNode = std::max<int64_t>(profile.devicesPerNode, 1);
  int64_t nodes = (p * mesh.numDevices() + perNode - 1) / perNode;
  if (nodes > explanation.cluster_nodes())
    explanation.set_cluster_nodes(nodes);
  for (const auto &[i, stage] : llvm::enumerate(pipeline.stages)) {
    plan::Explanation::Stage *out = explanation.add_stages();
    out->set_index(static_cast<int32_t>(i));
    out->set_first_layer(stage.firstLayer);
    out->set_last_layer(stage.lastLayer);
    out->set_sends(stage.sends);
    out->set_micro_batch_seconds(stage.microBatchSeconds);
    out->set_step_seconds(stage.stepSeconds);
    for (const auto &[first, last] : stage.chunks)
      out->add_chunks(first == last ? first : first + " to " + last);
  }
  explanation.set_schedule(stringifyPipelineSchedule(pipeline.schedule).str());
  if (pipeline.virtualStages > 1)
    explanation.set_virtual_stages(
        static_cast<int32_t>(pipeline.virtualStages));
  explanation.set_micro_batches(static_cast<int32_t>(m));
  explanation.set_bubble_fraction(pipeline.bubbleFraction);
  // The stages' own times when the pipeline was costed; else the program
  // (one micro-batch, every stage) as if the stages were equal.
  double before = explanation.step_seconds();
  double v = std::max<double>(static_cast<double>(pipeline.virtualStages), 1);
  double scale = (v * static_cast<double>(m) + static_cast<double>(p) - 1) /
                 (v * static_cast<double>(p));
  if (pipeline.seconds > 0 && before > 0)
    scale = pipeline.seconds / before;
  explanation.set_step_seconds(before * scale);
  explanation.set_compute_seconds(explanation.compute_seconds() * scale);
  explanation.set_comm_seconds(explanation.comm_seconds() * scale);
}

void ExplanationBuilder::recordZero(const sharding::ZeroReport &zero) {
  explanation.set_zero_level(zero.level);
  explanation.set_zero_sharded(static_cast<int32_t>(zero.sharded.size()));
  for (const std::string &name : zero.whole)
    explanation.add_zero_whole(name);
  for (const std::string &name : zero.padded)
    explanation.add_zero_padded(name);
  explanation.set_zero_saved_bytes(static_cast<int64_t>(zero.savedBytes));
}

void ExplanationBuilder::recordProgram(func::FuncOp program, bool fusedLater) {
  sharding::GroupCache groups(mesh);
  // The updates, one per parameter and named after it, make one line with
  // the collectives placed for them (the gradients' all-reduces).
  llvm::StringSet<> updates;
  for (Operation &op : program.getBody().front())
    if (sharding::isOptimizerUpdate(&op))
      updates.insert(sharding::nodeName(&op));
  for (Operation &op : program.getBody().front().without_terminator()) {
    if (isa<ConstantOp>(op) ||
        (fusedLater && (isFusedBiasAdd(&op) || isFoldedTranspose(&op))))
      continue;
    std::string name = sharding::nodeName(&op);
    if (updates.contains(name))
      name = "(optimizer updates)";
    if (name.empty())
      name = sharding::describeOp(&op);
    bool forward = forwardNodes.count(name);
    plan::Explanation::Node &node = nodeFor(name);
    // Nodes of the forward pass are named by their forward ops already.
    if (!forward && !isCollective(&op))
      addOpName(node, &op);
    double s = sharding::opSeconds(&op, groups, profile);
    if (sharding::isCommunication(&op)) {
      node.set_comm_seconds(node.comm_seconds() + s);
      node.set_collectives(node.collectives() + 1);
      explanation.set_comm_seconds(explanation.comm_seconds() + s);
      explanation.set_collectives(explanation.collectives() + 1);
      if (auto bytes = op.getAttrOfType<IntegerAttr>("predicted_bytes"))
        explanation.set_comm_bytes(explanation.comm_bytes() + bytes.getInt());
    } else {
      node.set_compute_seconds(node.compute_seconds() + s);
      explanation.set_compute_seconds(explanation.compute_seconds() + s);
    }
  }
  explanation.set_step_seconds(explanation.compute_seconds() +
                               explanation.comm_seconds());
}

std::string formatSeconds(double seconds) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (seconds >= 1)
    os << llvm::format("%.3f s", seconds);
  else if (seconds >= 1e-3)
    os << llvm::format("%.3f ms", seconds * 1e3);
  else
    os << llvm::format("%.1f us", seconds * 1e6);
  return s;
}

namespace {

std::string signedSeconds(double s) {
  return (s < 0 ? "-" : "+") + formatSeconds(std::abs(s));
}
std::string signedBytes(double b) {
  return (b < 0 ? "-" : "+") + sharding::formatBytes(std::abs(b));
}

/// Pads `text` to `width` columns.
std::string pad(const std::string &text, size_t width) {
  return text.size() >= width ? text
                              : text + std::string(width - text.size(), ' ');
}

} // namespace

std::string describeArenaPeak(const plan::Plan &plan, size_t top) {
  // The stages are separate allocations: the largest is found by index.
  const plan::Stage *largest = nullptr;
  int largestIndex = 0;
  for (int s = 0; s < plan.stages_size(); ++s) {
    const plan::Stage &stage = plan.stages(s);
    if (!largest ||
        stage.program().state_bytes() + stage.program().arena_bytes() >
            largest->program().state_bytes() +
                largest->program().arena_bytes()) {
      largest = &stage;
      largestIndex = s;
    }
  }
  if (!largest)
    return "";
  const plan::Program &program = largest->program();
  ArenaPeak peak = arenaPeak(program, top);
  if (peak.instruction < 0)
    return "";
  auto where = [&](int i) {
    const plan::Instruction &inst = program.instructions(i);
    return inst.op() + (inst.location().empty()
                            ? std::string()
                            : " of '" + inst.location() + "'");
  };
  std::string text = "at its peak";
  if (plan.stages_size() > 1)
    text += " on stage " + std::to_string(largestIndex);
  text += ", " + where(peak.instruction) + ", its step arena holds " +
          sharding::formatBytes(static_cast<double>(peak.bytes));
  if (peak.scratch > 0)
    text += ", " + sharding::formatBytes(static_cast<double>(peak.scratch)) +
            " of it the " + program.instructions(peak.instruction).op() +
            "'s scratch";
  text += " (state " +
          sharding::formatBytes(static_cast<double>(program.state_bytes())) +
          " beside it); the largest there:";
  for (auto [k, id] : llvm::enumerate(peak.largest)) {
    const plan::Value &v = program.values(id);
    std::string shape;
    for (int64_t d : v.type().shape())
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    text +=
        "\n  " + sharding::formatBytes(static_cast<double>(v.bytes())) + " [" +
        shape + "]: " +
        (peak.producers[k] >= 0 ? "the result of " + where(peak.producers[k])
                                : "input '" + v.name() + "'");
  }
  return text;
}

namespace {

/// The optimizer-sharding line: what ZeRO splits, what it left whole and
/// what it saves.
void printZero(const plan::Explanation &e, llvm::raw_ostream &os) {
  static const char *what[] = {"", "optimizer state",
                               "optimizer state and gradients",
                               "optimizer state, gradients and parameters"};
  os << "optimizer sharding: ZeRO-" << e.zero_level() << " ("
     << what[std::min(e.zero_level(), 3)]
     << " split over the data-parallel axes), " << e.zero_sharded()
     << (e.zero_sharded() == 1 ? " parameter" : " parameters") << " split";
  // Up to four names, in parentheses.
  auto names = [&](const auto &list) {
    os << " (";
    for (int i = 0; i < list.size() && i < 4; ++i)
      os << (i ? ", " : "") << list.Get(i);
    os << (list.size() > 4 ? ", ...)" : ")");
  };
  if (e.zero_padded_size() > 0) {
    os << ", " << e.zero_padded_size() << " of them padded to divide";
    names(e.zero_padded());
  }
  if (e.zero_whole_size() > 0) {
    os << ", " << e.zero_whole_size() << " left whole";
    names(e.zero_whole());
  }
  os << "; saves "
     << sharding::formatBytes(static_cast<double>(e.zero_saved_bytes()))
     << " per device\n";
}

/// The pipeline's schedule and bubble, then a line per stage.
void printPipeline(const plan::Plan &plan, const plan::Explanation &e,
                   llvm::raw_ostream &os) {
  const double v = std::max(e.virtual_stages(), 1);
  os << "pipeline: " << e.stages_size() << " stages, " << e.schedule()
     << " schedule";
  if (v > 1)
    os << " (" << e.virtual_stages() << " chunks per stage)";
  os << " over " << e.micro_batches()
     << " micro-batches; idle (bubble) fraction "
     << llvm::format("%.1f%%", 100 * e.bubble_fraction()) << " for equal "
     << (v > 1 ? "chunks" : "stages");
  double slowest = 0, total = 0;
  for (const plan::Explanation::Stage &s : e.stages()) {
    slowest = std::max(slowest, s.micro_batch_seconds());
    total += s.micro_batch_seconds();
  }
  if (slowest > 0) {
    // Every stage waits for the slowest once the pipe is full; it fills
    // through one chunk per stage (search::pipelineSeconds).
    double m = e.micro_batches(), busy = total / e.stages_size();
    double step = total / v + (m - 1 / v) * slowest;
    os << ", " << llvm::format("%.1f%%", 100 * (1 - m * busy / step))
       << " for these";
  }
  os << "\n";
  for (const plan::Explanation::Stage &s : e.stages()) {
    const plan::Program *program = s.index() < plan.stages_size()
                                       ? &plan.stages(s.index()).program()
                                       : nullptr;
    os << "  stage " << s.index();
    if (s.index() < plan.stages_size() &&
        plan.stages(s.index()).mesh().axes_size() > 0) {
      os << " on [";
      for (const plan::Mesh::Axis &axis : plan.stages(s.index()).mesh().axes())
        os << (&axis == &plan.stages(s.index()).mesh().axes(0) ? "" : ",")
           << axis.name() << "=" << axis.size();
      os << "]";
    }
    os << ": layers ";
    if (s.chunks_size() > 0) {
      for (int c = 0; c < s.chunks_size(); ++c)
        os << (c ? ", " : "") << "chunk " << c * e.stages_size() + s.index()
           << " " << s.chunks(c);
    } else {
      os << s.first_layer();
      if (s.last_layer() != s.first_layer())
        os << " to " << s.last_layer();
    }
    if (program)
      os << ", " << program->instructions_size() << " instructions, "
         << sharding::formatBytes(static_cast<double>(program->state_bytes()))
         << " state + "
         << sharding::formatBytes(static_cast<double>(program->arena_bytes()))
         << " arena per device";
    os << ", " << s.sends() << " sends";
    if (s.micro_batch_seconds() > 0)
      os << "; " << formatSeconds(s.micro_batch_seconds())
         << " per micro-batch, " << formatSeconds(s.step_seconds())
         << " per step";
    os << "\n";
  }
}

/// The memory per device: the largest state and arena over the stages,
/// the largest scratch of a collective (packing) and of a kernel
/// (common/ops/KernelScratch.h), and where the arena peaks.
void printMemory(const plan::Plan &plan, const plan::Explanation &e,
                 llvm::raw_ostream &os) {
  int64_t state = 0, arena = 0, packing = 0, kernel = 0;
  for (const plan::Stage &stage : plan.stages()) {
    state = std::max(state, stage.program().state_bytes());
    arena = std::max(arena, stage.program().arena_bytes());
    for (const plan::Instruction &inst : stage.program().instructions()) {
      // A collective's scratch is the only one its rule gives it.
      bool collective = llvm::StringRef(inst.op()).starts_with("all_") ||
                        inst.op() == "reduce_scatter";
      int64_t &largest = collective ? packing : kernel;
      largest = std::max(largest, inst.scratch_bytes());
    }
  }
  os << "memory per device "
     << sharding::formatBytes(static_cast<double>(state + arena)) << " ("
     << state + arena << " bytes): state "
     << sharding::formatBytes(static_cast<double>(state))
     << " (parameters, optimizer state, constants), step arena "
     << sharding::formatBytes(static_cast<double>(arena));
  if (packing > 0)
    os << " (with up to " << sharding::formatBytes(static_cast<double>(packing))
       << " of packing scratch for a collective while it runs)";
  if (kernel > 0)
    os << " (with up to " << sharding::formatBytes(static_cast<double>(kernel))
       << " of a kernel's scratch while it runs)";
  if (e.mode() == "auto")
    os << "; the search counted "
       << sharding::formatBytes(static_cast<double>(e.search_memory_bytes()))
       << " (" << e.search_memory_bytes() << " bytes) and predicted "
       << formatSeconds(e.search_seconds());
  os << "\n";
  if (std::string peak = describeArenaPeak(plan, /*top=*/4); !peak.empty())
    os << peak << "\n";
}

/// The node table: every node in program order, or the `options.top`
/// slowest.
void printNodeTable(const plan::Explanation &e, const PrintOptions &options,
                    llvm::raw_ostream &os) {
  std::vector<int> order(e.nodes_size());
  std::iota(order.begin(), order.end(), 0);
  auto secondsOf = [&](int i) {
    return e.nodes(i).compute_seconds() + e.nodes(i).comm_seconds();
  };
  if (options.top > 0) {
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return secondsOf(a) > secondsOf(b); });
    if (static_cast<int>(order.size()) > options.top)
      order.resize(options.top);
    os << "\nthe " << order.size()
       << " nodes with the largest predicted time:\n";
  } else {
    os << "\nper node, in program order (forward and backward together):\n";
  }
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"node", "ops", "layouts", "compute", "comm", "memory", "chosen by"});
  for (int i : order) {
    const plan::Explanation::Node &n = e.nodes(i);
    std::string comm = formatSeconds(n.comm_seconds());
    if (n.collectives())
      comm += " (" + std::to_string(n.collectives()) + ")";
    std::string chosen = n.chosen_by();
    if (!n.runner_up().empty())
      chosen += "; runner-up " + n.runner_up() + ": " +
                signedSeconds(n.runner_up_seconds()) + ", " +
                signedBytes(static_cast<double>(n.runner_up_memory()));
    rows.push_back(
        {n.name(), n.op(), n.layouts().empty() ? "" : n.layouts(),
         formatSeconds(n.compute_seconds()), comm,
         n.memory_bytes()
             ? sharding::formatBytes(static_cast<double>(n.memory_bytes()))
             : "",
         chosen});
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto &row : rows)
    for (size_t c = 0; c + 1 < row.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  for (const auto &row : rows) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c)
      line += " " + (c + 1 < row.size() ? pad(row[c], width[c]) : row[c]);
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    os << line << "\n";
  }
}

} // namespace

void printExplanation(const plan::Plan &plan, const std::string &title,
                      const PrintOptions &options, llvm::raw_ostream &os) {
  const plan::Explanation &e = plan.explanation();
  os << title << ": "
     << (plan.has_training()
             ? "training step (" + plan.training().optimizer() + ")"
             : std::string("inference"));
  int64_t devices = 1;
  std::string meshText;
  for (const auto &axis : plan.mesh().axes()) {
    devices *= axis.size();
    meshText += (meshText.empty() ? "" : ", ") + axis.name() + "=" +
                std::to_string(axis.size());
  }
  os << " on " << (meshText.empty() ? "one device" : "mesh [" + meshText + "]")
     << (devices > 1 ? " (" + std::to_string(devices) + " devices)" : "")
     << "\n";
  if (e.cluster().empty()) {
    os << "This plan carries no explanation (it was compiled by an older "
          "Loom); compile it again.\n";
    return;
  }
  os << "cluster " << e.cluster() << " (" << e.cluster_nodes()
     << (e.cluster_nodes() == 1 ? " node" : " nodes")
     << "), strategies: " << e.mode();
  if (e.mode() == "auto")
    os << (e.search_exact() ? " (exact search)" : " (heuristic search)");
  os << "\n";
  os << "predicted step " << formatSeconds(e.step_seconds())
     << " per device: compute " << formatSeconds(e.compute_seconds())
     << ", communication " << formatSeconds(e.comm_seconds()) << " ("
     << e.collectives() << " collectives, "
     << sharding::formatBytes(static_cast<double>(e.comm_bytes()))
     << " per device)\n";
  if (e.zero_level() > 0)
    printZero(e, os);
  if (e.stages_size() > 0)
    printPipeline(plan, e, os);
  if (e.recompute_ops() > 0)
    os << "recompute (" << e.recompute() << "): " << e.recompute_ops()
       << " forward ops recomputed in the backward; it no longer keeps "
       << sharding::formatBytes(
              static_cast<double>(e.recompute_unsaved_bytes()))
       << " of their results per device\n";
  printMemory(plan, e, os);

  printNodeTable(e, options, os);
}

} // namespace loom::explain
