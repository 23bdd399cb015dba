//===- Redistribution.h - Plans turning one layout into another -*- C++ -*-===//
//
// A redistribution plan is a sequence of steps (collectives and local
// operations) that turns every rank's shard of a global tensor in a source
// layout into its shard in a target layout, on the same mesh. The planner
// is complete (every pair of valid layouts has a plan) and picks the
// cheapest sequence under a bytes-per-device cost model.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_LAYOUT_REDISTRIBUTION_H
#define LOOM_COMMON_LAYOUT_REDISTRIBUTION_H

#include "common/layout/Mesh.h"
#include "common/layout/TensorLayout.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::layout {

enum class StepKind {
  /// Sum the partial values over `axes`; the result is replicated on them.
  AllReduce,
  /// Sum over the partial `axis` and scatter: `axis` becomes the innermost
  /// split of `dim`.
  ReduceScatter,
  /// Concatenate over `axis`, the innermost split of `dim`, which drops it.
  AllGather,
  /// Move `axis` from the innermost split of `dim` to the innermost split
  /// of `toDim`.
  AllToAll,
  /// Keep the local chunk: unused `axis` becomes the innermost split of
  /// `dim`. No communication.
  LocalSplit,
  /// Unused `axis` becomes partial: the rank with coordinate 0 on it keeps
  /// its value, the others zero theirs. No communication.
  MakePartial,
};

/// One redistribution step. `axes` holds the AllReduce axes, or the single
/// axis of every other kind.
struct Step {
  StepKind kind;
  std::vector<int> axes;
  int dim = -1;
  int toDim = -1;

  static Step allReduce(std::vector<int> axes) {
    return {StepKind::AllReduce, std::move(axes)};
  }
  static Step reduceScatter(int axis, int dim) {
    return {StepKind::ReduceScatter, {axis}, dim};
  }
  static Step allGather(int axis, int dim) {
    return {StepKind::AllGather, {axis}, dim};
  }
  static Step allToAll(int axis, int fromDim, int toDim) {
    return {StepKind::AllToAll, {axis}, fromDim, toDim};
  }
  static Step localSplit(int axis, int dim) {
    return {StepKind::LocalSplit, {axis}, dim};
  }
  static Step makePartial(int axis) { return {StepKind::MakePartial, {axis}}; }

  int axis() const { return axes.front(); }
  bool isCommunication() const {
    return kind != StepKind::LocalSplit && kind != StepKind::MakePartial;
  }
  /// E.g. `all_to_all(tp, dim 0 -> 1)`.
  std::string toString(const Mesh &mesh) const;
  bool operator==(const Step &o) const {
    return kind == o.kind && axes == o.axes && dim == o.dim && toDim == o.toDim;
  }
};

/// The layout after `step`, or nullopt (with `error`) when the step does
/// not apply to `layout` or its result would split a dimension unevenly.
std::optional<TensorLayout>
applyStep(const Mesh &mesh, const TensorLayout &layout, const Step &step,
          const std::vector<int64_t> &globalShape, std::string &error);

/// Bytes moved per device by `step` applied to `before`, with the
/// nccl-tests bus factors: all-reduce 2(n-1)/n of the buffer, reduce-scatter
/// (n-1)/n of its input, all-gather (n-1)/n of its output, all-to-all
/// (n-1)/n of the buffer; local steps 0. n is the group size.
double stepBytes(const Mesh &mesh, const TensorLayout &before, const Step &step,
                 const std::vector<int64_t> &globalShape, int64_t elementBytes);

/// The cost of a plan, compared lexicographically: bytes per device, then
/// the number of collectives, then the number of steps.
struct PlanCost {
  double bytes = 0;
  int collectives = 0;
  int steps = 0;
  bool operator<(const PlanCost &o) const;
};

struct RedistributionPlan {
  TensorLayout source;
  TensorLayout target;
  std::vector<Step> steps;
  PlanCost cost;
  /// One step per line with its layout after it.
  std::string toString(const Mesh &mesh,
                       const std::vector<int64_t> &globalShape) const;
};

struct PlannerOptions {
  /// The search gives up and returns the naive plan beyond this many
  /// distinct layouts. Meshes of up to 5 axes with tensors of rank up to 4
  /// have fewer than 22,000 layouts, so they never reach it.
  size_t maxStates = 200000;
};

/// Plans redistributions of tensors of one global shape on one mesh. The
/// search from each source is kept and resumed, so planning many targets
/// from one source costs about one search (the partitioner asks for many
/// redistributions of the same shapes). Plans are identical to `plan`'s.
class Planner {
public:
  Planner(Mesh mesh, std::vector<int64_t> globalShape, int64_t elementBytes,
          PlannerOptions options = {});
  ~Planner();
  Planner(Planner &&);
  Planner &operator=(Planner &&);

  /// As the free function `plan` below.
  std::optional<RedistributionPlan> plan(const TensorLayout &source,
                                         const TensorLayout &target,
                                         std::string &error);
  /// Drops the cached searches.
  void clear();

private:
  struct Search;
  Mesh mesh_;
  std::vector<int64_t> globalShape_;
  int64_t elementBytes_;
  PlannerOptions options_;
  std::map<TensorLayout, std::unique_ptr<Search>> searches_;
};

/// The cheapest plan from `source` to `target` (see Redistribution.cpp for
/// the search and its optimality claim). Returns nullopt with `error` only
/// when a layout is invalid for `mesh` and `globalShape`, or the ranks of
/// the layouts differ.
std::optional<RedistributionPlan>
plan(const Mesh &mesh, const TensorLayout &source, const TensorLayout &target,
     const std::vector<int64_t> &globalShape, int64_t elementBytes,
     std::string &error, const PlannerOptions &options = {});

/// The naive plan: all-reduce every partial axis, all-gather every split
/// (innermost first), then make the target's partial axes partial and split
/// locally. Always valid; a baseline for the planner.
std::optional<RedistributionPlan>
naivePlan(const Mesh &mesh, const TensorLayout &source,
          const TensorLayout &target, const std::vector<int64_t> &globalShape,
          int64_t elementBytes, std::string &error);

} // namespace loom::layout

#endif // LOOM_COMMON_LAYOUT_REDISTRIBUTION_H
