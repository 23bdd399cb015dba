//===- TensorLayout.cpp - How a global tensor is spread over a mesh -------===//

#include "common/layout/TensorLayout.h"

#include <algorithm>

namespace loom::layout {

TensorLayout::TensorLayout(std::vector<std::vector<int>> dimAxes,
                           std::vector<int> partialAxes)
    : dimAxes_(std::move(dimAxes)), partialAxes_(std::move(partialAxes)) {
  std::sort(partialAxes_.begin(), partialAxes_.end());
}

TensorLayout TensorLayout::of(std::vector<std::vector<int>> dimAxes,
                              std::vector<int> partialAxes) {
  return TensorLayout(std::move(dimAxes), std::move(partialAxes));
}

TensorLayout TensorLayout::replicated(int rank) {
  return TensorLayout(std::vector<std::vector<int>>(rank), {});
}

bool TensorLayout::isPartial(int axis) const {
  return std::binary_search(partialAxes_.begin(), partialAxes_.end(), axis);
}

std::optional<int> TensorLayout::dimOf(int axis) const {
  for (int d = 0; d < rank(); ++d)
    if (std::find(dimAxes_[d].begin(), dimAxes_[d].end(), axis) !=
        dimAxes_[d].end())
      return d;
  return std::nullopt;
}

bool TensorLayout::isReplicated() const {
  if (!partialAxes_.empty())
    return false;
  return std::all_of(dimAxes_.begin(), dimAxes_.end(),
                     [](const std::vector<int> &a) { return a.empty(); });
}

void TensorLayout::addPartial(int axis) {
  partialAxes_.insert(
      std::upper_bound(partialAxes_.begin(), partialAxes_.end(), axis), axis);
}

void TensorLayout::removePartial(int axis) {
  auto it = std::find(partialAxes_.begin(), partialAxes_.end(), axis);
  if (it != partialAxes_.end())
    partialAxes_.erase(it);
}

bool TensorLayout::verify(const Mesh &mesh,
                          const std::vector<int64_t> &globalShape,
                          std::string &error) const {
  if (static_cast<size_t>(rank()) != globalShape.size()) {
    error = "layout has " + std::to_string(rank()) +
            " dimensions but the tensor has rank " +
            std::to_string(globalShape.size());
    return false;
  }
  std::vector<int> uses(mesh.numAxes(), 0);
  // `dim` is the dimension using `axis`, or -1 for the partial set.
  auto useAxis = [&](int axis, int dim) {
    if (axis < 0 || axis >= mesh.numAxes()) {
      error = (dim < 0 ? std::string("the partial set")
                       : "dimension " + std::to_string(dim)) +
              " uses mesh axis " + std::to_string(axis) +
              ", but the mesh has " + std::to_string(mesh.numAxes()) + " axes";
      return false;
    }
    if (uses[axis]++) {
      error =
          "mesh axis '" + mesh.axisName(axis) + "' is used twice in the layout";
      return false;
    }
    return true;
  };
  for (int d = 0; d < rank(); ++d)
    for (int axis : dimAxes_[d])
      if (!useAxis(axis, d))
        return false;
  for (int axis : partialAxes_)
    if (!useAxis(axis, -1))
      return false;
  for (int d = 0; d < rank(); ++d) {
    if (globalShape[d] < 0) {
      error = "dimension " + std::to_string(d) + " has negative size " +
              std::to_string(globalShape[d]);
      return false;
    }
    int64_t count = splitCount(mesh, d);
    if (globalShape[d] % count != 0) {
      error = "dimension " + std::to_string(d) + " of size " +
              std::to_string(globalShape[d]) + " is not divisible by " +
              std::to_string(count) + " (the product of mesh axes " +
              mesh.axisListToString(dimAxes_[d]) +
              "); uneven splits are not supported";
      return false;
    }
  }
  return true;
}

int64_t TensorLayout::splitCount(const Mesh &mesh, int dim) const {
  return mesh.groupSize(dimAxes_[dim]);
}

std::vector<int64_t>
TensorLayout::localShape(const Mesh &mesh,
                         const std::vector<int64_t> &globalShape) const {
  std::vector<int64_t> shape(globalShape);
  for (int d = 0; d < rank(); ++d)
    shape[d] /= splitCount(mesh, d);
  return shape;
}

int64_t
TensorLayout::localNumElements(const Mesh &mesh,
                               const std::vector<int64_t> &globalShape) const {
  int64_t n = 1;
  for (int64_t e : localShape(mesh, globalShape))
    n *= e;
  return n;
}

std::vector<int64_t>
TensorLayout::sliceOffsets(const Mesh &mesh,
                           const std::vector<int64_t> &globalShape,
                           int64_t rank) const {
  std::vector<int64_t> coords = mesh.coordinates(rank);
  std::vector<int64_t> local = localShape(mesh, globalShape);
  std::vector<int64_t> offsets(globalShape.size(), 0);
  for (int d = 0; d < this->rank(); ++d) {
    int64_t shard = 0;
    for (int axis : dimAxes_[d])
      shard = shard * mesh.axisSize(axis) + coords[axis];
    offsets[d] = shard * local[d];
  }
  return offsets;
}

std::string TensorLayout::toString(const Mesh &mesh) const {
  std::string s = "[";
  for (int d = 0; d < rank(); ++d) {
    if (d)
      s += ", ";
    s += mesh.axisListToString(dimAxes_[d]);
  }
  s += "]";
  if (!partialAxes_.empty())
    s += " partial=" + mesh.axisListToString(partialAxes_);
  return s;
}

} // namespace loom::layout
