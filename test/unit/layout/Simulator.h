//===- Simulator.h - Host simulation of per-rank shards and plans -*- C++ -*-//
//
// Test support for the layout library: materialises every rank's local
// buffer of a global integer tensor under a layout (partial sums split into
// deterministic summands), executes redistribution steps on those buffers
// with the exact semantics of each collective over its comm groups, and
// reconstructs the global tensor from the buffers under a layout.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_LAYOUT_SIMULATOR_H
#define LOOM_TEST_UNIT_LAYOUT_SIMULATOR_H

#include "common/layout/Redistribution.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::layout::sim {

/// A dense row-major int64 tensor (exact arithmetic for sums).
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> data;
};

/// One local buffer per rank, all of the layout's local shape.
using RankBuffers = std::vector<std::vector<int64_t>>;

/// A global tensor of `shape` holding distinct-looking pseudo-random values.
Tensor makeGlobal(const std::vector<int64_t> &shape, uint64_t seed);

/// Every rank's buffer of `global` under `layout`. On a partial axis the
/// rank whose partial coordinates are all 0 holds value minus the others'
/// summands; the others hold small pseudo-random integers that depend only
/// on their partial coordinates and the global element, so replicas agree.
RankBuffers materialize(const Mesh &mesh, const TensorLayout &layout,
                        const Tensor &global, uint64_t seed);

/// Executes `step` on `buffers` (in `layout`); updates both. Returns false
/// with `error` if the step does not apply.
bool executeStep(const Mesh &mesh, TensorLayout &layout, const Step &step,
                 const std::vector<int64_t> &globalShape, RankBuffers &buffers,
                 std::string &error);

/// The global tensor that `buffers` represent under `layout`: shards
/// placed at their offsets and summed over partial axes. Fails with `error`
/// if a buffer has the wrong size or two replicas disagree.
std::optional<Tensor> reconstruct(const Mesh &mesh, const TensorLayout &layout,
                                  const std::vector<int64_t> &globalShape,
                                  const RankBuffers &buffers,
                                  std::string &error);

/// Materialises `global` under the plan's source, executes every step, and
/// reconstructs under the plan's target (which the steps must reach).
std::optional<Tensor> simulatePlan(const Mesh &mesh,
                                   const RedistributionPlan &plan,
                                   const Tensor &global, uint64_t seed,
                                   std::string &error);

/// Every valid layout of a rank-`rank` tensor of `globalShape` on `mesh`:
/// each axis unused, partial, or on one dimension, in every order when
/// several axes share a dimension.
std::vector<TensorLayout>
enumerateLayouts(const Mesh &mesh, const std::vector<int64_t> &globalShape);

} // namespace loom::layout::sim

#endif // LOOM_TEST_UNIT_LAYOUT_SIMULATOR_H
