//===- PlanLayout.h - A plan's mesh and layouts; shard copies ---*- C++ -*-===//
//
// A partitioned plan names mesh axes by their names (plan.proto's Mesh and
// Layout); the layout library (compiler/layout) works on axis indices. This
// file converts between the two, checking the plan's side as it goes (a
// corrupt plan is an error, never a crash), and moves one rank's shard
// between a global host tensor and the rank's local buffer: what the
// executor needs to load parameters and inputs, and to gather state for a
// checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLANLAYOUT_H
#define LOOM_RUNTIME_PLANLAYOUT_H

#include "common/layout/Mesh.h"
#include "common/layout/TensorLayout.h"
#include "runtime/Tensor.h"
#include "common/plan/plan.pb.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom::rt {

/// The most devices a plan's mesh may have.
inline constexpr int64_t kMaxMeshDevices = int64_t(1) << 20;

/// Converts and checks a plan's mesh: non-empty distinct axis names, sizes
/// of at least 1, at most kMaxMeshDevices devices in all. An empty mesh is a
/// single-device plan: `mesh` is left unset and the call succeeds. Returns
/// false and sets `error` for an invalid mesh.
bool meshFromProto(const plan::Mesh &proto, std::optional<layout::Mesh> &mesh,
                   std::string &error);
plan::Mesh meshToProto(const layout::Mesh &mesh);

/// "[dp=2, tp=2]", or "[]" for no mesh.
std::string describeMesh(const layout::Mesh *mesh);

/// Converts a value's layout (axes by name) to a TensorLayout over `mesh`
/// (nullptr: a plan without a mesh, where no layout may name an axis) and
/// verifies it for a tensor of `globalShape`: every name is an axis of the
/// mesh, no axis is used twice, every split dimension is divisible by its
/// axes' sizes, and the layout has one entry per dimension. A layout with
/// no dimensions is replicated. Returns nullopt and sets `error` otherwise.
std::optional<layout::TensorLayout> layoutFromProto(const plan::Layout &proto,
                                                    const layout::Mesh *mesh,
                                                    const Shape &globalShape,
                                                    std::string &error);
plan::Layout layoutToProto(const layout::TensorLayout &layout,
                           const layout::Mesh &mesh);

/// What one rank holds of a global tensor under a layout.
struct Shard {
  Shape globalShape, localShape;
  /// Where the rank's block starts in the global tensor, per dimension.
  std::vector<int64_t> offsets;
  /// False when the layout is a partial sum over some axes and the rank's
  /// coordinate on one of them is not 0: loaded from a global value, such a
  /// rank holds zeros, so that the sum over the partial axes is the value.
  bool holdsValue = true;
  /// True when the rank's coordinate is 0 on every mesh axis the layout
  /// neither splits over nor sums over: the one replica a gather reads.
  bool firstReplica = true;
};

/// `rank`'s shard of a tensor of `globalShape` laid out by `layout` (which
/// verified) over `mesh`; nullptr `mesh` is a single device.
Shard shardOf(const layout::TensorLayout &layout, const layout::Mesh *mesh,
              const Shape &globalShape, int64_t rank);

/// The part of `shard`'s block inside a leading block of shape `logical`
/// (a padded value's logical shape): its shape, empty when the shard holds
/// padding alone. The block starts at the shard's offsets.
Shape logicalBlockShape(const Shard &shard, const Shape &logical);

/// Calls `fn(localIndex, globalIndex, count)` for every contiguous run of
/// elements of the block of `localShape` at `offsets` in a row-major tensor
/// of `globalShape` (element indices, not bytes), in local order.
void forEachShardRun(const Shape &globalShape, const Shape &localShape,
                     const std::vector<int64_t> &offsets,
                     const std::function<void(int64_t, int64_t, int64_t)> &fn);

/// Copies `shard`'s block of `global` into `local` (zeros when the shard does
/// not hold the value). Both have one element type; `local` has the shard's
/// local shape and `global` its global shape.
void copyShardOut(const TensorView &global, const Shard &shard,
                  const TensorView &local);
/// Writes `local` into `shard`'s block of `global`: copies it, or adds it
/// elementwise when `accumulate` (partial sums; floats are summed in f32).
void copyShardIn(const TensorView &local, const Shard &shard,
                 const TensorView &global, bool accumulate);

/// The block of shape `blockShape` at `offsets` of `whole` (row-major), as
/// a buffer of its own: a rank's block of a global tensor, or with zero
/// offsets the leading block of a padded value (plan::Value's
/// logical_shape: what the model and its checkpoints see).
HostBuffer blockOf(const TensorView &whole, const Shape &blockShape,
                   const std::vector<int64_t> &offsets);
/// Writes `block` at the leading corner of `into` (one element type, every
/// dimension at least as long) and zeros the rest: how a value is stored in
/// its padded or shard-sized memory.
void placeLeading(const TensorView &block, const TensorView &into);

} // namespace loom::rt

#endif // LOOM_RUNTIME_PLANLAYOUT_H
