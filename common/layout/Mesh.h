//===- Mesh.h - The device matrix: named mesh axes over ranks ---*- C++ -*-===//
//
// A mesh (MindSpore's device matrix) is an ordered list of named axes with
// sizes. Ranks are numbered row-major over the axes, so the last axis varies
// fastest. This header has no MLIR or LLVM dependency.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_LAYOUT_MESH_H
#define LOOM_COMMON_LAYOUT_MESH_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::layout {

/// One named axis of a mesh.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

/// An ordered list of named axes; rank = row-major index over them.
class Mesh {
public:
  /// Validates `axes` (at least one axis, non-empty distinct names, sizes at
  /// least 1). On failure returns nullopt and sets `error`.
  static std::optional<Mesh> create(std::vector<MeshAxis> axes,
                                    std::string &error);

  int numAxes() const { return static_cast<int>(axes_.size()); }
  const std::vector<MeshAxis> &axes() const { return axes_; }
  const MeshAxis &axis(int index) const { return axes_[index]; }
  int64_t axisSize(int index) const { return axes_[index].size; }
  const std::string &axisName(int index) const { return axes_[index].name; }
  /// The index of the axis called `name`, or nullopt.
  std::optional<int> axisIndex(std::string_view name) const;

  /// The product of all axis sizes.
  int64_t numDevices() const;
  /// The product of the sizes of `axisIndices`.
  int64_t groupSize(const std::vector<int> &axisIndices) const;
  /// The coordinate of `rank` along every axis (last axis fastest).
  std::vector<int64_t> coordinates(int64_t rank) const;
  /// The rank at `coords` (one coordinate per axis).
  int64_t rank(const std::vector<int64_t> &coords) const;

  /// E.g. `[dp=2, tp=4]`.
  std::string toString() const;
  /// E.g. `[dp, tp]` for axis indices {0, 1}.
  std::string axisListToString(const std::vector<int> &axisIndices) const;

private:
  explicit Mesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {}
  std::vector<MeshAxis> axes_;
};

/// The communication groups of a collective over `axisIndices`: the sets of
/// ranks that differ only in their coordinates along those axes. Each group
/// lists its ranks row-major over `axisIndices` in the order given (the
/// first listed axis outermost), so a group's i-th member has mixed-radix
/// index i over those axes; groups are ordered by their first rank. An empty
/// axis list gives one singleton group per rank.
std::vector<std::vector<int64_t>>
commGroups(const Mesh &mesh, const std::vector<int> &axisIndices);

} // namespace loom::layout

#endif // LOOM_COMMON_LAYOUT_MESH_H
