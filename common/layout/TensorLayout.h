//===- TensorLayout.h - How a global tensor is spread over a mesh -*- C++ -*-//
//
// A tensor layout maps every tensor dimension to an ordered list of mesh
// axes it is split over (outermost first; empty = not split) plus a set of
// mesh axes over which the local value is a partial sum. Mesh axes used by
// neither hold replicas. This is MindSpore's tensor map generalised to
// several axes per dimension, with GSPMD's partial sums.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_LAYOUT_TENSORLAYOUT_H
#define LOOM_COMMON_LAYOUT_TENSORLAYOUT_H

#include "common/layout/Mesh.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::layout {

/// The layout of one tensor on one mesh. Axes are mesh axis indices. A
/// layout is a plain value; `verify` checks it against a mesh and a shape,
/// and the shape queries below assume a layout that verified.
class TensorLayout {
public:
  TensorLayout() = default;
  /// `dimAxes[d]` lists the mesh axes splitting dimension d, outermost
  /// first. `partialAxes` is kept sorted (duplicates are kept so that
  /// `verify` can report them). A factory rather than a constructor, so
  /// that `of({{}, {1}})` cannot be mistaken for a copy.
  static TensorLayout of(std::vector<std::vector<int>> dimAxes,
                         std::vector<int> partialAxes = {});
  /// The fully replicated layout of a tensor of rank `rank`.
  static TensorLayout replicated(int rank);

  int rank() const { return static_cast<int>(dimAxes_.size()); }
  const std::vector<std::vector<int>> &dimAxes() const { return dimAxes_; }
  const std::vector<int> &dimAxes(int dim) const { return dimAxes_[dim]; }
  const std::vector<int> &partialAxes() const { return partialAxes_; }
  bool isPartial(int axis) const;
  /// The dimension split over `axis`, or nullopt.
  std::optional<int> dimOf(int axis) const;
  /// True when `axis` neither splits a dimension nor is partial.
  bool isUnused(int axis) const { return !isPartial(axis) && !dimOf(axis); }
  /// True when no dimension is split and no axis is partial.
  bool isReplicated() const;

  /// Checks the layout against `mesh` and `globalShape`: the rank matches,
  /// every axis exists, no axis is used twice (across dimensions and the
  /// partial set), and every dimension is divisible by the product of its
  /// axes' sizes. Sets `error` and returns false on the first problem.
  bool verify(const Mesh &mesh, const std::vector<int64_t> &globalShape,
              std::string &error) const;

  /// The number of shards of dimension `dim` (product of its axes' sizes).
  int64_t splitCount(const Mesh &mesh, int dim) const;
  /// The shape of every rank's local buffer.
  std::vector<int64_t>
  localShape(const Mesh &mesh, const std::vector<int64_t> &globalShape) const;
  /// The number of elements of every rank's local buffer.
  int64_t localNumElements(const Mesh &mesh,
                           const std::vector<int64_t> &globalShape) const;
  /// The global index at which `rank`'s shard starts, per dimension. With
  /// several axes on one dimension the first listed axis is outermost: the
  /// shard index is the mixed-radix number of the rank's coordinates.
  std::vector<int64_t> sliceOffsets(const Mesh &mesh,
                                    const std::vector<int64_t> &globalShape,
                                    int64_t rank) const;

  /// E.g. `[[dp], [], [tp]] partial=[tp]` (partial printed when non-empty).
  std::string toString(const Mesh &mesh) const;

  bool operator==(const TensorLayout &other) const {
    return dimAxes_ == other.dimAxes_ && partialAxes_ == other.partialAxes_;
  }
  bool operator!=(const TensorLayout &other) const { return !(*this == other); }
  bool operator<(const TensorLayout &other) const {
    if (dimAxes_ != other.dimAxes_)
      return dimAxes_ < other.dimAxes_;
    return partialAxes_ < other.partialAxes_;
  }

  /// Mutators used by redistribution steps (no validation).
  void appendSplit(int dim, int axis) { dimAxes_[dim].push_back(axis); }
  void popSplit(int dim) { dimAxes_[dim].pop_back(); }
  void addPartial(int axis);
  void removePartial(int axis);

private:
  TensorLayout(std::vector<std::vector<int>> dimAxes,
               std::vector<int> partialAxes);
  std::vector<std::vector<int>> dimAxes_;
  std::vector<int> partialAxes_;
};

} // namespace loom::layout

#endif // LOOM_COMMON_LAYOUT_TENSORLAYOUT_H
