//===- Collectives.h - Redistribution instructions on one rank --*- C++ -*-===//
//
// The redistribution instructions of a partitioned plan, executed on one
// rank's local buffers over a communicator. Their semantics are exactly
// those of the layout library's steps (common/layout/Redistribution.h);
// `axis` and `axes` are mesh axis indices, and a step's group is the set of
// ranks that differ from this one only along those axes (layout::commGroups),
// member i having coordinate i along the axis.
//
//   all_reduce     {axes}           out = sum over the group of in
//   reduce_scatter {axis, dim}      out = chunk c (c = this rank's
//                                   coordinate on axis) along dim of the
//                                   group's sum; out.shape[dim] = in/n
//   all_gather     {axis, dim}      out = the members' ins concatenated
//                                   along dim in member order
//   all_to_all     {axis, dim, to_dim}
//                                   in is cut into n chunks along to_dim;
//                                   chunk j goes to member j; out is the
//                                   received chunks concatenated along dim
//                                   in member order (out.shape[dim] = n *
//                                   in, out.shape[to_dim] = in / n)
//   local_split    {axis, dim}      out = chunk c along dim (no exchange)
//   make_partial   {axis}           out = in on the member with coordinate
//                                   0, zeros elsewhere (no exchange)
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_COLLECTIVES_H
#define LOOM_RUNTIME_COMM_COLLECTIVES_H

#include "common/layout/Mesh.h"
#include "runtime/Kernel.h"
#include "runtime/comm/Communicator.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace loom::rt {

/// Whether `op` is one of the instructions above.
bool isCollectiveOp(std::string_view op);

/// How a runner moves bytes inside a rank's buffers and gets scratch: host
/// memory by default. A communicator that takes device memory (NCCL) runs
/// with the backend's device copies instead.
class BufferOps {
public:
  virtual ~BufferOps() = default;
  virtual void copy(void *dst, const void *src, size_t bytes);
  /// `height` rows of `width` bytes, rows `srcPitch` and `dstPitch` apart.
  virtual void copy2D(void *dst, size_t dstPitch, const void *src,
                      size_t srcPitch, size_t width, size_t height);
  virtual void zero(void *dst, size_t bytes);
  virtual void *allocate(size_t bytes);
  virtual void deallocate(void *ptr);
};

/// Runs the instructions above for one rank. Keeps the rank groups it has
/// computed, so build one per rank and executor.
class CollectiveRunner {
public:
  /// `ops` (not owned; nullptr: host memory) moves the bytes of the
  /// buffers run() receives. `ranks` gives the communicator's rank of each
  /// rank of `mesh` (a stage's submesh); empty: the communicator's ranks
  /// are the mesh's.
  CollectiveRunner(layout::Mesh mesh, Communicator &comm,
                   BufferOps *ops = nullptr, std::vector<int64_t> ranks = {});
  ~CollectiveRunner();
  CollectiveRunner(CollectiveRunner &&other) noexcept;
  CollectiveRunner(const CollectiveRunner &) = delete;
  CollectiveRunner &operator=(const CollectiveRunner &) = delete;

  /// Checks `in` and `out` against the op's shape rule and runs it; returns
  /// "" on success or what went wrong. It packs through `scratch` when
  /// that holds `scratchBytes` of at least collectiveScratch()'s total (a
  /// plan's instruction scratch, in its memory plan); else through scratch
  /// of its own, kept for reuse.
  std::string run(std::string_view op, const Attrs &attrs, const TensorView &in,
                  const TensorView &out, void *scratch = nullptr,
                  size_t scratchBytes = 0);

  const layout::Mesh &mesh() const { return mesh_; }
  Communicator &communicator() { return comm_; }
  /// This rank's group over `axes` (member order as described above), as
  /// the communicator's ranks.
  const RankGroup &group(const std::vector<int> &axes);

private:
  /// Scratch buffer `which` (0: packing, 1: a copy of an input its
  /// output overlaps) of at least `bytes`, kept for reuse.
  unsigned char *ownScratch(int which, size_t bytes);

  layout::Mesh mesh_;
  Communicator &comm_;
  std::vector<int64_t> ranks_;
  /// This rank on mesh_ (-1: the communicator's rank is not on it).
  int64_t meshRank_ = -1;
  BufferOps hostOps_;
  BufferOps *ops_;
  std::map<std::vector<int>, RankGroup> groups_;
  unsigned char *scratch_[2] = {nullptr, nullptr};
  size_t scratchBytes_[2] = {0, 0};
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_COMM_COLLECTIVES_H
