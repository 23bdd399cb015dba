//===- Collectives.cpp - Redistribution instructions on one rank ----------===//
//
// Checks an instruction's attributes and shapes, then runs it on the rank's
// buffers. The communicator exchanges contiguous chunks, so a collective
// along a dimension other than the leading one packs or unpacks through
// scratch: a tensor is viewed as [outer, extent of dim, inner] and chunk j
// along dim is the j-th slice of the middle index for every outer index.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Collectives.h"
#include "common/plan/CollectiveScratch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace loom::rt {

bool isCollectiveOp(std::string_view op) {
  return op == "all_reduce" || op == "reduce_scatter" || op == "all_gather" ||
         op == "all_to_all" || op == "local_split" || op == "make_partial";
}

namespace {

/// A buffer viewed as [outer, extent, inner] around one dimension, with
/// `inner` in bytes.
struct Blocks {
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t innerBytes = 1;

  Blocks(const Shape &shape, int dim, size_t elementBytes) {
    for (int d = 0; d < dim; ++d)
      outer *= shape[d];
    extent = shape[dim];
    innerBytes = static_cast<int64_t>(elementBytes);
    for (size_t d = dim + 1; d < shape.size(); ++d)
      innerBytes *= shape[d];
  }
};

/// Writes the n chunks of `src` along the blocks' dimension one after the
/// other into `dst` (each chunk row-major).
void packChunks(BufferOps &ops, const unsigned char *src, const Blocks &b,
                int64_t n, unsigned char *dst) {
  const int64_t rowBytes = b.extent / n * b.innerBytes;
  for (int64_t j = 0; j < n; ++j)
    ops.copy2D(dst + j * b.outer * rowBytes, rowBytes, src + j * rowBytes,
               b.extent * b.innerBytes, rowBytes, b.outer);
}

/// Concatenates along the blocks' dimension the n row-major chunks stored
/// one after the other in `src`; `b` describes one chunk.
void unpackChunks(BufferOps &ops, const unsigned char *src, const Blocks &b,
                  int64_t n, unsigned char *dst) {
  const int64_t rowBytes = b.extent * b.innerBytes;
  for (int64_t j = 0; j < n; ++j)
    ops.copy2D(dst + j * rowBytes, n * rowBytes, src + j * b.outer * rowBytes,
               rowBytes, rowBytes, b.outer);
}

bool overlaps(const TensorView &a, const TensorView &b) {
  auto *a0 = static_cast<const unsigned char *>(a.data);
  auto *b0 = static_cast<const unsigned char *>(b.data);
  std::less<const unsigned char *> before;
  return a.bytes() && b.bytes() && before(a0, b0 + b.bytes()) &&
         before(b0, a0 + a.bytes());
}

/// A collective's checked attributes: its mesh axes, their group's size,
/// its dimensions and the prefix that names them in messages.
struct CollectiveArgs {
  std::vector<int> axes;
  int64_t n = 1;
  int dim = -1, toDim = -1;
  std::string where;
};

/// Reads all_reduce's list `axes` or the others' single `axis`, each an
/// axis of `mesh` (and all_reduce's listed once).
std::string readAxes(const std::string &name, bool isAllReduce,
                     const Attrs &attrs, const layout::Mesh &mesh,
                     std::vector<int> &axes) {
  if (isAllReduce) {
    if (!attrs.has("axes"))
      return name + ": missing attribute 'axes'";
    for (int64_t a : attrs.getInts("axes")) {
      if (a < 0 || a >= mesh.numAxes())
        return name + ": axis " + std::to_string(a) + " is not an axis of " +
               mesh.toString();
      if (std::find(axes.begin(), axes.end(), a) != axes.end())
        return name + ": axis " + std::to_string(a) + " is listed twice";
      axes.push_back(static_cast<int>(a));
    }
    return "";
  }
  if (!attrs.has("axis"))
    return name + ": missing attribute 'axis'";
  int64_t a = attrs.getInt("axis", -1);
  if (a < 0 || a >= mesh.numAxes())
    return name + ": axis " + std::to_string(a) + " is not an axis of " +
           mesh.toString();
  axes.push_back(static_cast<int>(a));
  return "";
}

/// Reads `dim` (and all_to_all's `to_dim`), in range for `in`, and adds
/// them to `args.where`.
std::string readDims(std::string_view op, const Attrs &attrs,
                     const TensorView &in, CollectiveArgs &args) {
  const bool hasDim = op != "all_reduce" && op != "make_partial";
  const bool isAllToAll = op == "all_to_all";
  std::string &where = args.where;
  auto readDim = [&](const char *attr, int &value) -> std::string {
    if (!attrs.has(attr))
      return where + ": missing attribute '" + attr + "'";
    int64_t d = attrs.getInt(attr, -1);
    if (d < 0 || d >= in.rank())
      return where + ": " + attr + " " + std::to_string(d) +
             " is out of range for rank " + std::to_string(in.rank());
    value = static_cast<int>(d);
    return "";
  };
  if (hasDim) {
    if (std::string e = readDim("dim", args.dim); !e.empty())
      return e;
  }
  if (isAllToAll) {
    if (std::string e = readDim("to_dim", args.toDim); !e.empty())
      return e;
    if (args.toDim == args.dim)
      return where + ": dim and to_dim are both " + std::to_string(args.dim);
    where += " from dim " + std::to_string(args.dim) + " to dim " +
             std::to_string(args.toDim);
  } else if (hasDim) {
    where += " along dim " + std::to_string(args.dim);
  }
  return "";
}

/// Checks `out` against the shape the collective makes of `in`.
std::string checkShapes(std::string_view op, const TensorView &in,
                        const TensorView &out, const CollectiveArgs &args) {
  const std::string &where = args.where;
  const int64_t n = args.n;
  const int dim = args.dim, toDim = args.toDim;
  Shape expected = in.shape;
  auto divide = [&](int d) -> std::string {
    if (in.shape[d] % n != 0)
      return where + ": input dim " + std::to_string(d) + " is " +
             std::to_string(in.shape[d]) + ", not divisible by " +
             std::to_string(n);
    expected[d] = in.shape[d] / n;
    return "";
  };
  std::string shapeError;
  if (op == "reduce_scatter" || op == "local_split")
    shapeError = divide(dim);
  else if (op == "all_gather")
    expected[dim] = in.shape[dim] * n;
  else if (op == "all_to_all") {
    shapeError = divide(toDim);
    expected[dim] = in.shape[dim] * n;
  }
  if (!shapeError.empty())
    return shapeError;
  for (size_t d = 0; d < expected.size(); ++d)
    if (out.shape[d] != expected[d])
      return where + ": output dim " + std::to_string(d) + " is " +
             std::to_string(out.shape[d]) + ", expected " +
             std::to_string(expected[d]);
  return "";
}
} // namespace

void BufferOps::copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    std::memmove(dst, src, bytes);
}

void BufferOps::copy2D(void *dst, size_t dstPitch, const void *src,
                       size_t srcPitch, size_t width, size_t height) {
  for (size_t r = 0; r < height; ++r)
    copy(static_cast<unsigned char *>(dst) + r * dstPitch,
         static_cast<const unsigned char *>(src) + r * srcPitch, width);
}

void BufferOps::zero(void *dst, size_t bytes) {
  if (bytes)
    std::memset(dst, 0, bytes);
}

void *BufferOps::allocate(size_t bytes) { return std::malloc(bytes); }

void BufferOps::deallocate(void *ptr) { std::free(ptr); }

CollectiveRunner::CollectiveRunner(layout::Mesh mesh, Communicator &comm,
                                   BufferOps *ops, std::vector<int64_t> ranks)
    : mesh_(std::move(mesh)), comm_(comm), ranks_(std::move(ranks)),
      ops_(ops ? ops : &hostOps_) {
  if (ranks_.empty()) {
    if (comm_.rank() >= 0 && comm_.rank() < mesh_.numDevices())
      meshRank_ = comm_.rank();
  } else if (static_cast<int64_t>(ranks_.size()) == mesh_.numDevices()) {
    auto it = std::find(ranks_.begin(), ranks_.end(), comm_.rank());
    if (it != ranks_.end())
      meshRank_ = it - ranks_.begin();
  }
}

CollectiveRunner::CollectiveRunner(CollectiveRunner &&other) noexcept
    : mesh_(std::move(other.mesh_)), comm_(other.comm_),
      ranks_(std::move(other.ranks_)), meshRank_(other.meshRank_),
      ops_(other.ops_ == &other.hostOps_ ? &hostOps_ : other.ops_),
      groups_(std::move(other.groups_)) {
  for (int i = 0; i < 2; ++i) {
    scratch_[i] = other.scratch_[i];
    scratchBytes_[i] = other.scratchBytes_[i];
    other.scratch_[i] = nullptr;
    other.scratchBytes_[i] = 0;
  }
}

CollectiveRunner::~CollectiveRunner() {
  for (unsigned char *s : scratch_)
    if (s)
      ops_->deallocate(s);
}

unsigned char *CollectiveRunner::ownScratch(int which, size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (scratchBytes_[which] < bytes) {
    if (scratch_[which])
      ops_->deallocate(scratch_[which]);
    scratch_[which] = static_cast<unsigned char *>(ops_->allocate(bytes));
    scratchBytes_[which] = scratch_[which] ? bytes : 0;
  }
  return scratch_[which];
}

const RankGroup &CollectiveRunner::group(const std::vector<int> &axes) {
  auto it = groups_.find(axes);
  if (it != groups_.end())
    return it->second;
  RankGroup mine;
  bool valid = std::all_of(axes.begin(), axes.end(), [&](int a) {
    return a >= 0 && a < mesh_.numAxes();
  });
  if (valid && meshRank_ >= 0)
    for (std::vector<int64_t> &g : layout::commGroups(mesh_, axes))
      if (std::find(g.begin(), g.end(), meshRank_) != g.end()) {
        mine = std::move(g);
        break;
      }
  if (!ranks_.empty())
    for (int64_t &r : mine)
      r = ranks_[r];
  return groups_.emplace(axes, std::move(mine)).first->second;
}

std::string CollectiveRunner::run(std::string_view op, const Attrs &attrs,
                                  const TensorView &in, const TensorView &out,
                                  void *scratch, size_t scratchBytes) {
  const std::string name(op);
  if (!isCollectiveOp(op))
    return "'" + name + "' is not a collective instruction";
  if (in.dtype != out.dtype)
    return name + ": input is " + dtypeName(in.dtype) + " but output is " +
           dtypeName(out.dtype);
  if (in.rank() != out.rank())
    return name + ": input has rank " + std::to_string(in.rank()) +
           " but output has rank " + std::to_string(out.rank());
  if (meshRank_ < 0)
    return name + ": rank " + std::to_string(comm_.rank()) +
           " is not on mesh " + mesh_.toString();

  // Attributes: the axes, then the dimensions, each checked in range.
  const bool isAllReduce = op == "all_reduce";
  CollectiveArgs args;
  if (std::string e = readAxes(name, isAllReduce, attrs, mesh_, args.axes);
      !e.empty())
    return e;
  args.n = mesh_.groupSize(args.axes);
  args.where = isAllReduce
                   ? name + " over axes " + mesh_.axisListToString(args.axes)
                   : name + " over axis " + std::to_string(args.axes[0]) +
                         " (size " + std::to_string(args.n) + ")";
  if (std::string e = readDims(op, attrs, in, args); !e.empty())
    return e;
  // Shapes: the output's expected shape from the input's.
  if (std::string e = checkShapes(op, in, out, args); !e.empty())
    return e;
  const std::vector<int> &axes = args.axes;
  const int64_t n = args.n;
  const int dim = args.dim, toDim = args.toDim;
  const std::string &where = args.where;
  const bool isAllToAll = op == "all_to_all";

  const RankGroup &members = group(axes);
  const int64_t member =
      std::find(members.begin(), members.end(), comm_.rank()) - members.begin();
  const size_t elementBytes = dtypeSize(in.dtype);
  auto *src = static_cast<const unsigned char *>(in.data);
  auto *dst = static_cast<unsigned char *>(out.data);

  // The collectives below read `in` after writing `out`; give them a copy
  // when the two overlap (never in a plan's memory plan).
  BufferOps &ops = *ops_;
  if (!isAllReduce && overlaps(in, out)) {
    unsigned char *copy = ownScratch(1, in.bytes());
    if (!copy)
      return where + ": cannot allocate " + std::to_string(in.bytes()) +
             " bytes of scratch";
    ops.copy(copy, src, in.bytes());
    src = copy;
  }
  // Packing scratch: the caller's when it holds the rule's bytes, else the
  // runner's own.
  const CollectiveScratch need = collectiveScratch(
      op, in.shape, out.shape, static_cast<int64_t>(elementBytes), dim, toDim);
  unsigned char *packing = nullptr;
  if (need.total() > 0) {
    packing = scratch && scratchBytes >= static_cast<size_t>(need.total())
                  ? static_cast<unsigned char *>(scratch)
                  : ownScratch(0, static_cast<size_t>(need.total()));
    if (!packing)
      return where + ": cannot allocate " + std::to_string(need.total()) +
             " bytes of scratch";
  }
  std::string error;

  if (isAllReduce) {
    ops.copy(dst, src, in.bytes());
    error = comm_.allReduceSum(members, in.dtype, dst, in.numElements());
  } else if (op == "make_partial") {
    if (member == 0)
      ops.copy(dst, src, in.bytes());
    else
      ops.zero(dst, out.bytes());
  } else if (op == "local_split") {
    Blocks b(in.shape, dim, elementBytes);
    const int64_t rowBytes = b.extent / n * b.innerBytes;
    ops.copy2D(dst, rowBytes, src + member * rowBytes, b.extent * b.innerBytes,
               rowBytes, b.outer);
  } else if (op == "reduce_scatter") {
    Blocks b(in.shape, dim, elementBytes);
    const unsigned char *send = src;
    if (need.sendBytes > 0) {
      packChunks(ops, src, b, n, packing);
      send = packing;
    }
    error =
        comm_.reduceScatterSum(members, in.dtype, send, dst, out.numElements());
  } else if (op == "all_gather") {
    Blocks b(in.shape, dim, elementBytes);
    if (need.recvBytes == 0) {
      error = comm_.allGather(members, src, dst, in.bytes());
    } else {
      error = comm_.allGather(members, src, packing, in.bytes());
      if (error.empty())
        unpackChunks(ops, packing, b, n, dst);
    }
  } else if (isAllToAll) {
    // Cut along to_dim into n contiguous chunks, exchange, and concatenate
    // the received chunks along dim.
    const unsigned char *send = src;
    if (need.sendBytes > 0) {
      packChunks(ops, src, Blocks(in.shape, toDim, elementBytes), n, packing);
      send = packing;
    }
    Shape chunkShape = in.shape;
    chunkShape[toDim] /= n;
    unsigned char *recv = need.recvBytes > 0 ? packing + need.sendBytes : dst;
    error = comm_.allToAll(members, send, recv, in.bytes() / n);
    if (error.empty() && need.recvBytes > 0)
      unpackChunks(ops, recv, Blocks(chunkShape, dim, elementBytes), n, dst);
  }
  return error.empty() ? "" : where + ": " + error;
}

} // namespace loom::rt
