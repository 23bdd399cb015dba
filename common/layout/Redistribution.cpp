//===- Redistribution.cpp - Plans turning one layout into another ---------===//
//
// The planner is a Dijkstra search over layouts. Nodes are the valid layouts
// of the tensor on the mesh; edges are every applicable step (every subset
// of the partial axes for all-reduce, every dimension for reduce-scatter,
// local split and all-to-all, every innermost axis for all-gather, every
// unused axis for make-partial), weighted by `stepBytes`. Because a step's
// cost depends only on the layout it starts from, the search returns a plan
// that is OPTIMAL under this cost model among all sequences of these six
// step kinds (ties broken by fewer collectives, then fewer steps). It claims
// nothing beyond that vocabulary (e.g. collectives on a non-innermost axis,
// or latency terms other than the collective-count tie break).
//
// Cost of the search: at worst every valid layout is settled once; on a
// mesh of 5 axes of size 2 a worst-case pair of rank-4 layouts takes about
// 0.3 s, on 3 axes about 2 ms. `Planner` keeps and resumes the search per
// source, so many targets from one source cost about one search.
//
// Completeness: from any valid layout, all-reducing every partial axis and
// all-gathering innermost-first reaches the replicated layout through valid
// layouts; from it, make-partial on the target's partial axes and local
// splits of the target's dimension lists in order (each prefix divides)
// reach the target. So the target is always reachable, and the naive plan
// is that path.
//
//===----------------------------------------------------------------------===//

#include "common/layout/Redistribution.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

namespace loom::layout {

namespace {

constexpr double kBytesTolerance = 1e-9;

bool fail(std::string &error, const std::string &message) {
  error = message;
  return false;
}

std::string axisName(const Mesh &mesh, int axis) {
  if (axis < 0 || axis >= mesh.numAxes())
    return "#" + std::to_string(axis);
  return mesh.axisName(axis);
}

/// Checks the preconditions of `step` on `layout` and applies it in place.
bool applyInPlace(const Mesh &mesh, TensorLayout &layout, const Step &step,
                  std::string &error) {
  // Built only on failure: the planner tries many steps that do not apply.
  auto what = [&] { return step.toString(mesh) + ": "; };
  if (step.axes.empty())
    return fail(error, what() + "the step names no mesh axis");
  for (int axis : step.axes)
    if (axis < 0 || axis >= mesh.numAxes())
      return fail(error, what() + "mesh axis " + std::to_string(axis) +
                             " does not exist");
  auto checkDim = [&](int dim) {
    return dim >= 0 && dim < layout.rank()
               ? true
               : fail(error, what() + "dimension " + std::to_string(dim) +
                                 " does not exist");
  };
  auto isInnermost = [&](int axis, int dim) {
    return !layout.dimAxes(dim).empty() && layout.dimAxes(dim).back() == axis;
  };
  switch (step.kind) {
  case StepKind::AllReduce:
    for (size_t i = 0; i < step.axes.size(); ++i) {
      int axis = step.axes[i];
      for (size_t j = 0; j < i; ++j)
        if (step.axes[j] == axis)
          return fail(error, what() + "mesh axis '" + axisName(mesh, axis) +
                                 "' is listed twice");
      if (!layout.isPartial(axis))
        return fail(error, what() + "mesh axis '" + axisName(mesh, axis) +
                               "' is not partial");
    }
    for (int axis : step.axes)
      layout.removePartial(axis);
    return true;
  case StepKind::ReduceScatter:
    if (!checkDim(step.dim))
      return false;
    if (!layout.isPartial(step.axis()))
      return fail(error, what() + "mesh axis '" + axisName(mesh, step.axis()) +
                             "' is not partial");
    layout.removePartial(step.axis());
    layout.appendSplit(step.dim, step.axis());
    return true;
  case StepKind::AllGather:
    if (!checkDim(step.dim))
      return false;
    if (!isInnermost(step.axis(), step.dim))
      return fail(error, what() + "mesh axis '" + axisName(mesh, step.axis()) +
                             "' is not the innermost split of dimension " +
                             std::to_string(step.dim));
    layout.popSplit(step.dim);
    return true;
  case StepKind::AllToAll:
    if (!checkDim(step.dim) || !checkDim(step.toDim))
      return false;
    if (step.dim == step.toDim)
      return fail(error, what() + "source and target dimension are the same");
    if (!isInnermost(step.axis(), step.dim))
      return fail(error, what() + "mesh axis '" + axisName(mesh, step.axis()) +
                             "' is not the innermost split of dimension " +
                             std::to_string(step.dim));
    layout.popSplit(step.dim);
    layout.appendSplit(step.toDim, step.axis());
    return true;
  case StepKind::LocalSplit:
  case StepKind::MakePartial:
    if (step.kind == StepKind::LocalSplit && !checkDim(step.dim))
      return false;
    if (!layout.isUnused(step.axis()))
      return fail(error, what() + "mesh axis '" + axisName(mesh, step.axis()) +
                             "' is already used by the layout");
    if (step.kind == StepKind::LocalSplit)
      layout.appendSplit(step.dim, step.axis());
    else
      layout.addPartial(step.axis());
    return true;
  }
  return fail(error, what() + "unknown step kind");
}

PlanCost addStep(PlanCost cost, const Step &step, double bytes) {
  cost.bytes += bytes;
  cost.collectives += step.isCommunication() ? 1 : 0;
  cost.steps += 1;
  return cost;
}

/// Every step that applies to `layout` (validity of the result is checked
/// by the caller through `applyStep`).
std::vector<Step> candidateSteps(const Mesh &mesh, const TensorLayout &layout) {
  std::vector<Step> steps;
  const std::vector<int> &partial = layout.partialAxes();
  for (uint64_t mask = 1; mask < (uint64_t(1) << partial.size()); ++mask) {
    std::vector<int> axes;
    for (size_t i = 0; i < partial.size(); ++i)
      if (mask & (uint64_t(1) << i))
        axes.push_back(partial[i]);
    steps.push_back(Step::allReduce(std::move(axes)));
  }
  for (int axis : partial)
    for (int d = 0; d < layout.rank(); ++d)
      steps.push_back(Step::reduceScatter(axis, d));
  for (int d = 0; d < layout.rank(); ++d) {
    if (layout.dimAxes(d).empty())
      continue;
    int axis = layout.dimAxes(d).back();
    steps.push_back(Step::allGather(axis, d));
    for (int t = 0; t < layout.rank(); ++t)
      if (t != d)
        steps.push_back(Step::allToAll(axis, d, t));
  }
  for (int axis = 0; axis < mesh.numAxes(); ++axis) {
    if (!layout.isUnused(axis))
      continue;
    steps.push_back(Step::makePartial(axis));
    for (int d = 0; d < layout.rank(); ++d)
      steps.push_back(Step::localSplit(axis, d));
  }
  return steps;
}

bool checkPair(const Mesh &mesh, const TensorLayout &source,
               const TensorLayout &target,
               const std::vector<int64_t> &globalShape, std::string &error) {
  std::string why;
  if (!source.verify(mesh, globalShape, why))
    return fail(error, "invalid source layout: " + why);
  if (!target.verify(mesh, globalShape, why))
    return fail(error, "invalid target layout: " + why);
  return true;
}

} // namespace

std::string Step::toString(const Mesh &mesh) const {
  std::string a = axes.empty() ? "?" : axisName(mesh, axes.front());
  switch (kind) {
  case StepKind::AllReduce: {
    std::string s = "all_reduce(";
    for (size_t i = 0; i < axes.size(); ++i)
      s += (i ? ", " : "") + axisName(mesh, axes[i]);
    return s + ")";
  }
  case StepKind::ReduceScatter:
    return "reduce_scatter(" + a + ", dim " + std::to_string(dim) + ")";
  case StepKind::AllGather:
    return "all_gather(" + a + ", dim " + std::to_string(dim) + ")";
  case StepKind::AllToAll:
    return "all_to_all(" + a + ", dim " + std::to_string(dim) + " -> " +
           std::to_string(toDim) + ")";
  case StepKind::LocalSplit:
    return "local_split(" + a + ", dim " + std::to_string(dim) + ")";
  case StepKind::MakePartial:
    return "make_partial(" + a + ")";
  }
  return "unknown_step";
}

std::optional<TensorLayout>
applyStep(const Mesh &mesh, const TensorLayout &layout, const Step &step,
          const std::vector<int64_t> &globalShape, std::string &error) {
  TensorLayout result = layout;
  if (!applyInPlace(mesh, result, step, error))
    return std::nullopt;
  std::string why;
  if (!result.verify(mesh, globalShape, why)) {
    error = step.toString(mesh) + ": the result is invalid: " + why;
    return std::nullopt;
  }
  return result;
}

double stepBytes(const Mesh &mesh, const TensorLayout &before, const Step &step,
                 const std::vector<int64_t> &globalShape,
                 int64_t elementBytes) {
  double n = static_cast<double>(mesh.groupSize(step.axes));
  double buffer =
      static_cast<double>(before.localNumElements(mesh, globalShape)) *
      static_cast<double>(elementBytes);
  switch (step.kind) {
  case StepKind::AllReduce:
    return 2.0 * (n - 1.0) / n * buffer;
  case StepKind::ReduceScatter: // Input buffer: the local buffer before.
  case StepKind::AllToAll:      // Same buffer size before and after.
    return (n - 1.0) / n * buffer;
  case StepKind::AllGather: // Output buffer: n times the input.
    return (n - 1.0) * buffer;
  case StepKind::LocalSplit:
  case StepKind::MakePartial:
    return 0.0;
  }
  return 0.0;
}

bool PlanCost::operator<(const PlanCost &o) const {
  double tol = kBytesTolerance * std::max(1.0, std::fabs(o.bytes));
  if (std::fabs(bytes - o.bytes) > tol)
    return bytes < o.bytes;
  if (collectives != o.collectives)
    return collectives < o.collectives;
  return steps < o.steps;
}

std::string
RedistributionPlan::toString(const Mesh &mesh,
                             const std::vector<int64_t> &globalShape) const {
  std::string s = source.toString(mesh) + "\n";
  TensorLayout layout = source;
  for (const Step &step : steps) {
    std::string error;
    std::optional<TensorLayout> next =
        applyStep(mesh, layout, step, globalShape, error);
    s += "  " + step.toString(mesh) + " -> " +
         (next ? next->toString(mesh) : "<" + error + ">") + "\n";
    if (next)
      layout = *next;
  }
  return s;
}

std::optional<RedistributionPlan>
naivePlan(const Mesh &mesh, const TensorLayout &source,
          const TensorLayout &target, const std::vector<int64_t> &globalShape,
          int64_t elementBytes, std::string &error) {
  if (!checkPair(mesh, source, target, globalShape, error))
    return std::nullopt;
  RedistributionPlan result{source, target, {}, {}};
  TensorLayout layout = source;
  auto push = [&](const Step &step) {
    double bytes = stepBytes(mesh, layout, step, globalShape, elementBytes);
    std::optional<TensorLayout> next =
        applyStep(mesh, layout, step, globalShape, error);
    if (!next)
      return false;
    layout = *next;
    result.steps.push_back(step);
    result.cost = addStep(result.cost, step, bytes);
    return true;
  };
  if (!source.partialAxes().empty() &&
      !push(Step::allReduce(source.partialAxes())))
    return std::nullopt;
  for (int d = 0; d < source.rank(); ++d)
    for (int i = static_cast<int>(source.dimAxes(d).size()) - 1; i >= 0; --i)
      if (!push(Step::allGather(source.dimAxes(d)[i], d)))
        return std::nullopt;
  for (int axis : target.partialAxes())
    if (!push(Step::makePartial(axis)))
      return std::nullopt;
  for (int d = 0; d < target.rank(); ++d)
    for (int axis : target.dimAxes(d))
      if (!push(Step::localSplit(axis, d)))
        return std::nullopt;
  return result;
}

/// A resumable Dijkstra search from one source layout. Nodes are settled in
/// cost order; a later target continues where the last one stopped, so the
/// plan for a target is the one a fresh search would return.
struct Planner::Search {
  struct Node {
    TensorLayout layout;
    PlanCost cost;
    int parent = -1;
    std::optional<Step> via;
    bool done = false;
  };
  using Entry = std::pair<PlanCost, int>;
  struct Worse {
    bool operator()(const Entry &a, const Entry &b) const {
      return b.first < a.first;
    }
  };

  std::vector<Node> nodes;
  std::map<TensorLayout, int> index;
  std::priority_queue<Entry, std::vector<Entry>, Worse> queue;

  explicit Search(const TensorLayout &source) {
    nodes.push_back({source, {}, -1, std::nullopt, false});
    index.emplace(source, 0);
    queue.push({PlanCost{}, 0});
  }

  /// Pops and expands nodes until `target` is settled; its node id, or -1
  /// past `maxStates`.
  int settle(const TensorLayout &target, const Planner &p) {
    auto known = index.find(target);
    if (known != index.end() && nodes[known->second].done)
      return known->second;
    while (!queue.empty() && nodes.size() <= p.options_.maxStates) {
      auto [cost, id] = queue.top();
      queue.pop();
      if (nodes[id].done || nodes[id].cost < cost)
        continue;
      nodes[id].done = true;
      expand(id, p);
      if (nodes[id].layout == target)
        return id;
    }
    return -1;
  }

  void expand(int id, const Planner &p) {
    const TensorLayout here = nodes[id].layout;
    const PlanCost cost = nodes[id].cost;
    for (const Step &step : candidateSteps(p.mesh_, here)) {
      std::string ignored;
      std::optional<TensorLayout> next =
          applyStep(p.mesh_, here, step, p.globalShape_, ignored);
      if (!next)
        continue;
      PlanCost nextCost = addStep(
          cost, step,
          stepBytes(p.mesh_, here, step, p.globalShape_, p.elementBytes_));
      auto [it, inserted] =
          index.emplace(*next, static_cast<int>(nodes.size()));
      if (inserted) {
        nodes.push_back({*next, nextCost, id, step, false});
      } else {
        Node &node = nodes[it->second];
        if (node.done || !(nextCost < node.cost))
          continue;
        node.cost = nextCost;
        node.parent = id;
        node.via = step;
      }
      queue.push({nextCost, it->second});
    }
  }
};

Planner::Planner(Mesh mesh, std::vector<int64_t> globalShape,
                 int64_t elementBytes, PlannerOptions options)
    : mesh_(std::move(mesh)), globalShape_(std::move(globalShape)),
      elementBytes_(elementBytes), options_(options) {}

Planner::~Planner() = default;
Planner::Planner(Planner &&) = default;
Planner &Planner::operator=(Planner &&) = default;

void Planner::clear() { searches_.clear(); }

std::optional<RedistributionPlan> Planner::plan(const TensorLayout &source,
                                                const TensorLayout &target,
                                                std::string &error) {
  if (!checkPair(mesh_, source, target, globalShape_, error))
    return std::nullopt;
  std::unique_ptr<Search> &search = searches_[source];
  if (!search)
    search = std::make_unique<Search>(source);
  int id = search->settle(target, *this);
  if (id < 0) // Only past options.maxStates: the naive plan is valid.
    return naivePlan(mesh_, source, target, globalShape_, elementBytes_, error);
  RedistributionPlan result{source, target, {}, search->nodes[id].cost};
  for (int n = id; search->nodes[n].parent >= 0; n = search->nodes[n].parent)
    result.steps.push_back(*search->nodes[n].via);
  std::reverse(result.steps.begin(), result.steps.end());
  return result;
}

std::optional<RedistributionPlan>
plan(const Mesh &mesh, const TensorLayout &source, const TensorLayout &target,
     const std::vector<int64_t> &globalShape, int64_t elementBytes,
     std::string &error, const PlannerOptions &options) {
  return Planner(mesh, globalShape, elementBytes, options)
      .plan(source, target, error);
}

} // namespace loom::layout
