//===- Mesh.cpp - The device matrix: named mesh axes over ranks -----------===//

#include "common/layout/Mesh.h"

#include <algorithm>

namespace loom::layout {

std::optional<Mesh> Mesh::create(std::vector<MeshAxis> axes,
                                 std::string &error) {
  if (axes.empty()) {
    error = "a mesh needs at least one axis";
    return std::nullopt;
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].name.empty()) {
      error = "mesh axis " + std::to_string(i) + " has an empty name";
      return std::nullopt;
    }
    if (axes[i].size < 1) {
      error = "mesh axis '" + axes[i].name + "' has size " +
              std::to_string(axes[i].size) + "; sizes must be at least 1";
      return std::nullopt;
    }
    for (size_t j = 0; j < i; ++j)
      if (axes[j].name == axes[i].name) {
        error = "mesh axis name '" + axes[i].name + "' is used twice";
        return std::nullopt;
      }
  }
  return Mesh(std::move(axes));
}

std::optional<int> Mesh::axisIndex(std::string_view name) const {
  for (int i = 0; i < numAxes(); ++i)
    if (axes_[i].name == name)
      return i;
  return std::nullopt;
}

int64_t Mesh::numDevices() const {
  int64_t n = 1;
  for (const MeshAxis &a : axes_)
    n *= a.size;
  return n;
}

int64_t Mesh::groupSize(const std::vector<int> &axisIndices) const {
  int64_t n = 1;
  for (int a : axisIndices)
    n *= axes_[a].size;
  return n;
}

std::vector<int64_t> Mesh::coordinates(int64_t rank) const {
  std::vector<int64_t> coords(axes_.size());
  for (int i = numAxes() - 1; i >= 0; --i) {
    coords[i] = rank % axes_[i].size;
    rank /= axes_[i].size;
  }
  return coords;
}

int64_t Mesh::rank(const std::vector<int64_t> &coords) const {
  int64_t r = 0;
  for (int i = 0; i < numAxes(); ++i)
    r = r * axes_[i].size + coords[i];
  return r;
}

std::string Mesh::toString() const {
  std::string s = "[";
  for (int i = 0; i < numAxes(); ++i) {
    if (i)
      s += ", ";
    s += axes_[i].name + "=" + std::to_string(axes_[i].size);
  }
  return s + "]";
}

std::string Mesh::axisListToString(const std::vector<int> &axisIndices) const {
  std::string s = "[";
  for (size_t i = 0; i < axisIndices.size(); ++i) {
    if (i)
      s += ", ";
    int a = axisIndices[i];
    s += (a >= 0 && a < numAxes()) ? axes_[a].name : "#" + std::to_string(a);
  }
  return s + "]";
}

std::vector<std::vector<int64_t>>
commGroups(const Mesh &mesh, const std::vector<int> &axisIndices) {
  std::vector<std::vector<int64_t>> groups;
  int64_t groupSize = mesh.groupSize(axisIndices);
  for (int64_t r = 0; r < mesh.numDevices(); ++r) {
    std::vector<int64_t> coords = mesh.coordinates(r);
    // A group is led by the rank whose coordinates on the axes are all 0.
    bool leader = std::all_of(axisIndices.begin(), axisIndices.end(),
                              [&](int a) { return coords[a] == 0; });
    if (!leader)
      continue;
    std::vector<int64_t> group;
    group.reserve(groupSize);
    for (int64_t i = 0; i < groupSize; ++i) {
      // Mixed-radix digits of i over the axes, first axis outermost.
      int64_t rest = i;
      for (int k = static_cast<int>(axisIndices.size()) - 1; k >= 0; --k) {
        int a = axisIndices[k];
        coords[a] = rest % mesh.axisSize(a);
        rest /= mesh.axisSize(a);
      }
      group.push_back(mesh.rank(coords));
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

} // namespace loom::layout
