//===- Simulator.cpp - Host simulation of per-rank shards and plans -------===//

#include "test/unit/layout/Simulator.h"

#include <algorithm>
#include <random>

namespace loom::layout::sim {

namespace {

using Shape = std::vector<int64_t>;
using Buffer = std::vector<int64_t>;

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t e : shape)
    n *= e;
  return n;
}

Shape strides(const Shape &shape) {
  Shape s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/// Copies (or adds, with `add`) the block of `extent` at `srcOffsets` in
/// `src` to `dstOffsets` in `dst`.
void copyBlock(const Buffer &src, const Shape &srcShape,
               const Shape &srcOffsets, Buffer &dst, const Shape &dstShape,
               const Shape &dstOffsets, const Shape &extent, bool add = false) {
  int64_t count = numElements(extent);
  if (count == 0)
    return;
  Shape srcStrides = strides(srcShape), dstStrides = strides(dstShape);
  Shape index(extent.size(), 0);
  for (int64_t done = 0; done < count; ++done) {
    int64_t s = 0, d = 0;
    for (size_t k = 0; k < extent.size(); ++k) {
      s += (srcOffsets[k] + index[k]) * srcStrides[k];
      d += (dstOffsets[k] + index[k]) * dstStrides[k];
    }
    dst[d] = add ? dst[d] + src[s] : src[s];
    for (int k = static_cast<int>(extent.size()) - 1; k >= 0; --k) {
      if (++index[k] < extent[k])
        break;
      index[k] = 0;
    }
  }
}

/// Chunk `j` of `n` along `dim`.
Buffer chunk(const Buffer &src, const Shape &shape, int dim, int64_t n,
             int64_t j) {
  Shape extent = shape, offsets(shape.size(), 0);
  extent[dim] /= n;
  offsets[dim] = j * extent[dim];
  Buffer out(numElements(extent));
  copyBlock(src, shape, offsets, out, extent, Shape(shape.size(), 0), extent);
  return out;
}

/// Concatenates `parts` (each of `shape`) along `dim`.
Buffer concat(const std::vector<const Buffer *> &parts, const Shape &shape,
              int dim) {
  Shape outShape = shape;
  outShape[dim] *= static_cast<int64_t>(parts.size());
  Buffer out(numElements(outShape));
  for (size_t j = 0; j < parts.size(); ++j) {
    Shape offsets(shape.size(), 0);
    offsets[dim] = static_cast<int64_t>(j) * shape[dim];
    copyBlock(*parts[j], shape, Shape(shape.size(), 0), out, outShape, offsets,
              shape);
  }
  return out;
}

Buffer sum(const RankBuffers &buffers, const std::vector<int64_t> &group) {
  Buffer total(buffers[group.front()].size(), 0);
  for (int64_t r : group)
    for (size_t i = 0; i < total.size(); ++i)
      total[i] += buffers[r][i];
  return total;
}

/// A small summand in [-50, 50] for partial index `p` of global element `g`.
int64_t noise(uint64_t seed, int64_t p, int64_t g) {
  uint64_t x = seed ^ (uint64_t(p) * 0x9E3779B97F4A7C15ull) ^
               (uint64_t(g) * 0xC2B2AE3D27D4EB4Full);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<int64_t>(x % 101) - 50;
}

} // namespace

Tensor makeGlobal(const std::vector<int64_t> &shape, uint64_t seed) {
  Tensor t{shape, Buffer(numElements(shape))};
  std::mt19937_64 rng(seed);
  for (int64_t &v : t.data)
    v = static_cast<int64_t>(rng() % 2000001) - 1000000;
  return t;
}

RankBuffers materialize(const Mesh &mesh, const TensorLayout &layout,
                        const Tensor &global, uint64_t seed) {
  const Shape local = layout.localShape(mesh, global.shape);
  const Shape globalStrides = strides(global.shape);
  const std::vector<int> &partial = layout.partialAxes();
  const int64_t numPartial = mesh.groupSize(partial);
  RankBuffers buffers(mesh.numDevices());
  for (int64_t r = 0; r < mesh.numDevices(); ++r) {
    Shape offsets = layout.sliceOffsets(mesh, global.shape, r);
    std::vector<int64_t> coords = mesh.coordinates(r);
    int64_t p = 0; // Mixed-radix index of the rank over the partial axes.
    for (int axis : partial)
      p = p * mesh.axisSize(axis) + coords[axis];
    Buffer &buf = buffers[r];
    buf.resize(numElements(local));
    Shape index(local.size(), 0);
    for (int64_t i = 0; i < static_cast<int64_t>(buf.size()); ++i) {
      int64_t g = 0;
      for (size_t k = 0; k < local.size(); ++k)
        g += (offsets[k] + index[k]) * globalStrides[k];
      if (p != 0) {
        buf[i] = noise(seed, p, g);
      } else {
        buf[i] = global.data[g];
        for (int64_t q = 1; q < numPartial; ++q)
          buf[i] -= noise(seed, q, g);
      }
      for (int k = static_cast<int>(local.size()) - 1; k >= 0; --k) {
        if (++index[k] < local[k])
          break;
        index[k] = 0;
      }
    }
  }
  return buffers;
}

bool executeStep(const Mesh &mesh, TensorLayout &layout, const Step &step,
                 const std::vector<int64_t> &globalShape, RankBuffers &buffers,
                 std::string &error) {
  std::optional<TensorLayout> next =
      applyStep(mesh, layout, step, globalShape, error);
  if (!next)
    return false;
  const Shape shape = layout.localShape(mesh, globalShape);
  RankBuffers out(buffers.size());
  switch (step.kind) {
  case StepKind::AllReduce:
    for (const auto &group : commGroups(mesh, step.axes)) {
      Buffer total = sum(buffers, group);
      for (int64_t r : group)
        out[r] = total;
    }
    break;
  case StepKind::ReduceScatter:
    for (const auto &group : commGroups(mesh, step.axes)) {
      Buffer total = sum(buffers, group);
      int64_t n = static_cast<int64_t>(group.size());
      for (int64_t j = 0; j < n; ++j)
        out[group[j]] = chunk(total, shape, step.dim, n, j);
    }
    break;
  case StepKind::AllGather:
    for (const auto &group : commGroups(mesh, step.axes)) {
      std::vector<const Buffer *> parts;
      for (int64_t r : group)
        parts.push_back(&buffers[r]);
      Buffer gathered = concat(parts, shape, step.dim);
      for (int64_t r : group)
        out[r] = gathered;
    }
    break;
  case StepKind::AllToAll:
    for (const auto &group : commGroups(mesh, step.axes)) {
      int64_t n = static_cast<int64_t>(group.size());
      Shape partShape = shape;
      partShape[step.toDim] /= n;
      // Member j receives chunk j (along toDim) of every member i, and
      // concatenates them along dim in member order.
      for (int64_t j = 0; j < n; ++j) {
        std::vector<Buffer> received;
        for (int64_t i = 0; i < n; ++i)
          received.push_back(chunk(buffers[group[i]], shape, step.toDim, n, j));
        std::vector<const Buffer *> parts;
        for (const Buffer &b : received)
          parts.push_back(&b);
        out[group[j]] = concat(parts, partShape, step.dim);
      }
    }
    break;
  case StepKind::LocalSplit:
    for (int64_t r = 0; r < mesh.numDevices(); ++r)
      out[r] = chunk(buffers[r], shape, step.dim, mesh.axisSize(step.axis()),
                     mesh.coordinates(r)[step.axis()]);
    break;
  case StepKind::MakePartial:
    for (int64_t r = 0; r < mesh.numDevices(); ++r) {
      out[r] = buffers[r];
      if (mesh.coordinates(r)[step.axis()] != 0)
        std::fill(out[r].begin(), out[r].end(), 0);
    }
    break;
  }
  buffers = std::move(out);
  layout = *next;
  return true;
}

std::optional<Tensor> reconstruct(const Mesh &mesh, const TensorLayout &layout,
                                  const std::vector<int64_t> &globalShape,
                                  const RankBuffers &buffers,
                                  std::string &error) {
  const Shape local = layout.localShape(mesh, globalShape);
  Tensor result{globalShape, Buffer(numElements(globalShape), 0)};
  if (static_cast<int64_t>(buffers.size()) != mesh.numDevices()) {
    error = "expected one buffer per rank";
    return std::nullopt;
  }
  for (int64_t r = 0; r < mesh.numDevices(); ++r) {
    if (static_cast<int64_t>(buffers[r].size()) != numElements(local)) {
      error = "rank " + std::to_string(r) + " holds " +
              std::to_string(buffers[r].size()) + " elements, expected " +
              std::to_string(numElements(local));
      return std::nullopt;
    }
    // A rank with a non-zero coordinate on an unused (replica) axis must
    // equal the replica at coordinate 0; only those at 0 contribute.
    std::vector<int64_t> coords = mesh.coordinates(r);
    for (int axis = 0; axis < mesh.numAxes(); ++axis)
      if (layout.isUnused(axis))
        coords[axis] = 0;
    int64_t representative = mesh.rank(coords);
    if (representative != r) {
      if (buffers[r] != buffers[representative]) {
        error = "rank " + std::to_string(r) +
                " differs from its replica rank " +
                std::to_string(representative);
        return std::nullopt;
      }
      continue;
    }
    copyBlock(buffers[r], local, Shape(local.size(), 0), result.data,
              globalShape, layout.sliceOffsets(mesh, globalShape, r), local,
              /*add=*/true);
  }
  return result;
}

std::optional<Tensor> simulatePlan(const Mesh &mesh,
                                   const RedistributionPlan &plan,
                                   const Tensor &global, uint64_t seed,
                                   std::string &error) {
  RankBuffers buffers = materialize(mesh, plan.source, global, seed);
  TensorLayout layout = plan.source;
  for (const Step &step : plan.steps)
    if (!executeStep(mesh, layout, step, global.shape, buffers, error))
      return std::nullopt;
  if (layout != plan.target) {
    error = "the steps end in " + layout.toString(mesh) + ", not in " +
            plan.target.toString(mesh);
    return std::nullopt;
  }
  return reconstruct(mesh, layout, global.shape, buffers, error);
}

std::vector<TensorLayout>
enumerateLayouts(const Mesh &mesh, const std::vector<int64_t> &globalShape) {
  const int rank = static_cast<int>(globalShape.size());
  std::vector<TensorLayout> result;
  std::vector<std::vector<int>> dims(rank);
  std::vector<int> partial;
  // Places axis `axis` unused, partial, or at every position of every
  // dimension's list; every ordering arises exactly once.
  auto place = [&](auto &&self, int axis) -> void {
    if (axis == mesh.numAxes()) {
      TensorLayout layout = TensorLayout::of(dims, partial);
      std::string error;
      if (layout.verify(mesh, globalShape, error))
        result.push_back(layout);
      return;
    }
    self(self, axis + 1);
    partial.push_back(axis);
    self(self, axis + 1);
    partial.pop_back();
    for (int d = 0; d < rank; ++d)
      for (size_t pos = 0; pos <= dims[d].size(); ++pos) {
        dims[d].insert(dims[d].begin() + pos, axis);
        self(self, axis + 1);
        dims[d].erase(dims[d].begin() + pos);
      }
  };
  place(place, 0);
  return result;
}

} // namespace loom::layout::sim
