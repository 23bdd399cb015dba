//===- PlanLayout.cpp - A plan's mesh and layouts; shard copies -----------===//

#include "runtime/PlanLayout.h"

#include <algorithm>
#include <cstring>

namespace loom::rt {

bool meshFromProto(const plan::Mesh &proto, std::optional<layout::Mesh> &mesh,
                   std::string &error) {
  mesh.reset();
  if (proto.axes().empty())
    return true;
  std::vector<layout::MeshAxis> axes;
  int64_t devices = 1;
  for (const plan::Mesh::Axis &axis : proto.axes()) {
    // Sizes are checked here, before the product can overflow.
    if (axis.size() < 1 || axis.size() > kMaxMeshDevices ||
        (devices *= axis.size()) > kMaxMeshDevices) {
      error = "mesh axis '" + axis.name() + "' has size " +
              std::to_string(axis.size()) +
              "; axis sizes must be at least 1 and the mesh at most " +
              std::to_string(kMaxMeshDevices) + " devices";
      return false;
    }
    axes.push_back({axis.name(), axis.size()});
  }
  std::string why;
  mesh = layout::Mesh::create(std::move(axes), why);
  if (!mesh) {
    error = "the mesh is invalid: " + why;
    return false;
  }
  return true;
}

plan::Mesh meshToProto(const layout::Mesh &mesh) {
  plan::Mesh proto;
  for (const layout::MeshAxis &axis : mesh.axes()) {
    plan::Mesh::Axis *a = proto.add_axes();
    a->set_name(axis.name);
    a->set_size(axis.size);
  }
  return proto;
}

std::string describeMesh(const layout::Mesh *mesh) {
  return mesh ? mesh->toString() : "[]";
}

std::optional<layout::TensorLayout> layoutFromProto(const plan::Layout &proto,
                                                    const layout::Mesh *mesh,
                                                    const Shape &globalShape,
                                                    std::string &error) {
  int rank = static_cast<int>(globalShape.size());
  if (proto.dims_size() != 0 && proto.dims_size() != rank) {
    error = "the layout has " + std::to_string(proto.dims_size()) +
            " dimensions but the tensor has rank " + std::to_string(rank);
    return std::nullopt;
  }
  auto axisOf = [&](const std::string &name) -> std::optional<int> {
    if (!mesh) {
      error =
          "the layout names mesh axis '" + name + "', but the plan has no mesh";
      return std::nullopt;
    }
    std::optional<int> index = mesh->axisIndex(name);
    if (!index)
      error = "the layout names mesh axis '" + name + "', which the mesh " +
              mesh->toString() + " does not have";
    return index;
  };
  std::vector<std::vector<int>> dims(rank);
  for (int d = 0; d < proto.dims_size(); ++d)
    for (const std::string &name : proto.dims(d).axes()) {
      std::optional<int> axis = axisOf(name);
      if (!axis)
        return std::nullopt;
      dims[d].push_back(*axis);
    }
  std::vector<int> partial;
  for (const std::string &name : proto.partial()) {
    std::optional<int> axis = axisOf(name);
    if (!axis)
      return std::nullopt;
    partial.push_back(*axis);
  }
  layout::TensorLayout result =
      layout::TensorLayout::of(std::move(dims), std::move(partial));
  // Without a mesh no axis was named, so the layout is replicated.
  if (mesh) {
    std::string why;
    if (!result.verify(*mesh, globalShape, why)) {
      error = "layout " + result.toString(*mesh) + " on mesh " +
              mesh->toString() + ": " + why;
      return std::nullopt;
    }
  }
  return result;
}

plan::Layout layoutToProto(const layout::TensorLayout &layout,
                           const layout::Mesh &mesh) {
  plan::Layout proto;
  for (const std::vector<int> &axes : layout.dimAxes()) {
    plan::Layout::DimAxes *dim = proto.add_dims();
    for (int axis : axes)
      dim->add_axes(mesh.axisName(axis));
  }
  for (int axis : layout.partialAxes())
    proto.add_partial(mesh.axisName(axis));
  return proto;
}

Shard shardOf(const layout::TensorLayout &layout, const layout::Mesh *mesh,
              const Shape &globalShape, int64_t rank) {
  Shard shard;
  shard.globalShape = globalShape;
  if (!mesh) {
    shard.localShape = globalShape;
    shard.offsets.assign(globalShape.size(), 0);
    return shard;
  }
  shard.localShape = layout.localShape(*mesh, globalShape);
  shard.offsets = layout.sliceOffsets(*mesh, globalShape, rank);
  std::vector<int64_t> coords = mesh->coordinates(rank);
  for (int axis = 0; axis < mesh->numAxes(); ++axis) {
    if (layout.isPartial(axis) && coords[axis] != 0)
      shard.holdsValue = false;
    if (layout.isUnused(axis) && coords[axis] != 0)
      shard.firstReplica = false;
  }
  return shard;
}

Shape logicalBlockShape(const Shard &shard, const Shape &logical) {
  Shape shape(logical.size());
  for (size_t d = 0; d < logical.size(); ++d)
    shape[d] = std::clamp<int64_t>(logical[d] - shard.offsets[d], 0,
                                   shard.localShape[d]);
  return shape;
}

void forEachShardRun(const Shape &globalShape, const Shape &localShape,
                     const std::vector<int64_t> &offsets,
                     const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  int rank = static_cast<int>(localShape.size());
  if (rank == 0) {
    fn(0, 0, 1);
    return;
  }
  for (int64_t d : localShape)
    if (d == 0)
      return;
  // One run covers the innermost dimension and every dimension outside it
  // as long as the dimensions inside are whole (not split).
  int inner = rank - 1;
  int64_t run = localShape[inner];
  while (inner > 0 && localShape[inner] == globalShape[inner]) {
    --inner;
    run *= localShape[inner];
  }
  std::vector<int64_t> strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * globalShape[d + 1];
  // An odometer over the dimensions outside the run.
  std::vector<int64_t> index(inner, 0);
  int64_t local = 0;
  while (true) {
    int64_t global = offsets[inner] * strides[inner];
    for (int d = 0; d < inner; ++d)
      global += (index[d] + offsets[d]) * strides[d];
    fn(local, global, run);
    local += run;
    int d = inner - 1;
    while (d >= 0 && ++index[d] == localShape[d])
      index[d--] = 0;
    if (d < 0)
      return;
  }
}

void copyShardOut(const TensorView &global, const Shard &shard,
                  const TensorView &local) {
  size_t size = dtypeSize(local.dtype);
  if (!shard.holdsValue) {
    std::memset(local.data, 0, local.bytes());
    return;
  }
  const auto *src = static_cast<const unsigned char *>(global.data);
  auto *dst = static_cast<unsigned char *>(local.data);
  forEachShardRun(shard.globalShape, shard.localShape, shard.offsets,
                  [&](int64_t l, int64_t g, int64_t n) {
                    std::memcpy(dst + l * size, src + g * size, n * size);
                  });
}

namespace {
/// dst[i] += src[i] for `n` elements of `dtype`.
void addElements(DType dtype, void *dst, const void *src, int64_t n) {
  switch (dtype) {
  case DType::F32: {
    auto *d = static_cast<float *>(dst);
    auto *s = static_cast<const float *>(src);
    for (int64_t i = 0; i < n; ++i)
      d[i] += s[i];
    break;
  }
  case DType::F16:
  case DType::BF16: {
    auto *d = static_cast<uint16_t *>(dst);
    auto *s = static_cast<const uint16_t *>(src);
    bool half = dtype == DType::F16;
    for (int64_t i = 0; i < n; ++i) {
      float sum = half ? halfToFloat(d[i]) + halfToFloat(s[i])
                       : bf16ToFloat(d[i]) + bf16ToFloat(s[i]);
      d[i] = half ? floatToHalf(sum) : floatToBf16(sum);
    }
    break;
  }
  case DType::I32: {
    auto *d = static_cast<int32_t *>(dst);
    auto *s = static_cast<const int32_t *>(src);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<int32_t>(static_cast<uint32_t>(d[i]) +
                                  static_cast<uint32_t>(s[i]));
    break;
  }
  case DType::I64: {
    auto *d = static_cast<int64_t *>(dst);
    auto *s = static_cast<const int64_t *>(src);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<int64_t>(static_cast<uint64_t>(d[i]) +
                                  static_cast<uint64_t>(s[i]));
    break;
  }
  case DType::Bool: {
    auto *d = static_cast<uint8_t *>(dst);
    auto *s = static_cast<const uint8_t *>(src);
    for (int64_t i = 0; i < n; ++i)
      d[i] = d[i] | s[i];
    break;
  }
  }
}
} // namespace

void copyShardIn(const TensorView &local, const Shard &shard,
                 const TensorView &global, bool accumulate) {
  size_t size = dtypeSize(local.dtype);
  const auto *src = static_cast<const unsigned char *>(local.data);
  auto *dst = static_cast<unsigned char *>(global.data);
  forEachShardRun(shard.globalShape, shard.localShape, shard.offsets,
                  [&](int64_t l, int64_t g, int64_t n) {
                    if (accumulate)
                      addElements(local.dtype, dst + g * size, src + l * size,
                                  n);
                    else
                      std::memcpy(dst + g * size, src + l * size, n * size);
                  });
}

HostBuffer blockOf(const TensorView &whole, const Shape &blockShape,
                   const std::vector<int64_t> &offsets) {
  HostBuffer out;
  out.dtype = whole.dtype;
  out.shape = blockShape;
  size_t size = dtypeSize(whole.dtype);
  out.bytes.resize(static_cast<size_t>(numElements(blockShape)) * size);
  const auto *src = static_cast<const unsigned char *>(whole.data);
  forEachShardRun(
      whole.shape, blockShape, offsets, [&](int64_t l, int64_t g, int64_t n) {
        std::memcpy(out.bytes.data() + l * size, src + g * size, n * size);
      });
  return out;
}

void placeLeading(const TensorView &block, const TensorView &into) {
  size_t size = dtypeSize(into.dtype);
  auto *dst = static_cast<unsigned char *>(into.data);
  if (into.bytes())
    std::memset(dst, 0, into.bytes());
  const auto *src = static_cast<const unsigned char *>(block.data);
  forEachShardRun(into.shape, block.shape,
                  std::vector<int64_t>(into.shape.size(), 0),
                  [&](int64_t l, int64_t g, int64_t n) {
                    std::memcpy(dst + g * size, src + l * size, n * size);
                  });
}

} // namespace loom::rt
