//===- Executor.cpp - Load, validate and run a plan -----------------------===//

#include "runtime/Executor.h"

#include "runtime/Initializer.h"
#include "runtime/Pipeline.h"
#include "runtime/PlanLayout.h"
#include "runtime/ShapeCheck.h"
#include "common/plan/CollectiveScratch.h"
#include "runtime/comm/Collectives.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/Trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

namespace loom::rt {

namespace {

constexpr int64_t kMaxBytes = int64_t(1) << 40;

std::optional<DType> toDType(int d) {
  if (d >= 1 && d <= 6)
    return static_cast<DType>(d);
  return std::nullopt;
}

/// What an executor holds: the bytes of its live allocations, and the most
/// it has held at once (Executor::peakBytes).
class MemoryAccount {
public:
  void charge(int64_t bytes) {
    held += bytes;
    peak = std::max(peak, held);
  }
  void release(int64_t bytes) { held -= bytes; }
  /// Charges an allocation of `bytes` at `ptr` until forget(ptr).
  void *remember(void *ptr, size_t bytes) {
    if (ptr) {
      sizes[ptr] = static_cast<int64_t>(bytes);
      charge(static_cast<int64_t>(bytes));
    }
    return ptr;
  }
  void forget(void *ptr) {
    auto it = sizes.find(ptr);
    if (it == sizes.end())
      return;
    release(it->second);
    sizes.erase(it);
  }
  int64_t peakBytes() const { return peak; }

private:
  int64_t held = 0, peak = 0;
  std::map<void *, int64_t> sizes;
};

/// Zero-initialised memory of the backend (host memory for the CPU).
struct AlignedBuffer {
  AlignedBuffer(Backend &backend, MemoryAccount &account, int64_t bytes)
      : backend(backend), account(account), size(bytes),
        data(static_cast<unsigned char *>(
            account.remember(backend.allocate(static_cast<size_t>(bytes)),
                             static_cast<size_t>(bytes)))) {}
  ~AlignedBuffer() {
    if (data) {
      account.forget(data);
      backend.deallocate(data);
    }
  }
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
  Backend &backend;
  MemoryAccount &account;
  int64_t size;
  unsigned char *data;
};

/// A collective's scratch in host memory, charged to the executor.
class HostBufferOps final : public BufferOps {
public:
  explicit HostBufferOps(MemoryAccount &account) : account(account) {}
  void *allocate(size_t bytes) override {
    return account.remember(BufferOps::allocate(bytes), bytes);
  }
  void deallocate(void *ptr) override {
    account.forget(ptr);
    BufferOps::deallocate(ptr);
  }

private:
  MemoryAccount &account;
};

/// A collective's byte moves on the backend's memory (device communicators).
class BackendBufferOps final : public BufferOps {
public:
  BackendBufferOps(Backend &backend, MemoryAccount &account)
      : backend(backend), account(account) {}
  void copy(void *dst, const void *src, size_t bytes) override {
    if (bytes && dst != src)
      backend.copyOnDevice(dst, src, bytes);
  }
  void copy2D(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
              size_t width, size_t height) override {
    if (width && height)
      backend.copy2DOnDevice(dst, dstPitch, src, srcPitch, width, height);
  }
  void zero(void *dst, size_t bytes) override {
    if (bytes)
      backend.zero(dst, bytes);
  }
  void *allocate(size_t bytes) override {
    return account.remember(backend.allocate(bytes), bytes);
  }
  void deallocate(void *ptr) override {
    account.forget(ptr);
    backend.deallocate(ptr);
  }

private:
  Backend &backend;
  MemoryAccount &account;
};

bool isPersistent(int kind) {
  return kind == plan::Value::PARAMETER || kind == plan::Value::BUFFER ||
         kind == plan::Value::CONSTANT || kind == plan::Value::OPTIMIZER_STATE;
}

Attrs toAttrs(const plan::Instruction &inst) {
  Attrs attrs;
  for (const plan::Attribute &a : inst.attributes()) {
    switch (a.value_case()) {
    case plan::Attribute::kIntValue:
      attrs.set(a.name(), a.int_value());
      break;
    case plan::Attribute::kFloatValue:
      attrs.set(a.name(), a.float_value());
      break;
    case plan::Attribute::kStringValue:
      attrs.set(a.name(), a.string_value());
      break;
    case plan::Attribute::kBoolValue:
      attrs.set(a.name(), a.bool_value());
      break;
    case plan::Attribute::kIntsValue:
      attrs.set(a.name(), std::vector<int64_t>(a.ints_value().values().begin(),
                                               a.ints_value().values().end()));
      break;
    default:
      break;
    }
  }
  return attrs;
}

/// The element count of `shape`, or -1 if a dimension is negative or the
/// count (or its bytes) exceeds kMaxBytes.
int64_t checkedCount(const Shape &shape, DType dtype) {
  int64_t count = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > kMaxBytes)
      return -1;
  if (count * static_cast<int64_t>(dtypeSize(dtype)) > kMaxBytes)
    return -1;
  return count;
}

/// `value` converted to element type `dtype` (between float types or
/// between integer types), or false and `error` naming `what`.
bool convertTensor(const TensorView &value, DType dtype, HostBuffer &out,
                   const std::string &what, std::string &error) {
  out.dtype = dtype;
  out.shape = value.shape;
  out.bytes.resize(value.numElements() * dtypeSize(dtype));
  TensorView dst = out.view();
  int64_t count = value.numElements();
  if (value.dtype == dtype) {
    std::memcpy(dst.data, value.data, dst.bytes());
    return true;
  }
  auto readFloat = [&](int64_t i) -> float {
    switch (value.dtype) {
    case DType::F32:
      return value.as<float>()[i];
    case DType::F16:
      return halfToFloat(value.as<uint16_t>()[i]);
    default:
      return bf16ToFloat(value.as<uint16_t>()[i]);
    }
  };
  if (isFloat(value.dtype) && isFloat(dtype)) {
    for (int64_t i = 0; i < count; ++i) {
      float f = readFloat(i);
      if (dtype == DType::F32)
        dst.as<float>()[i] = f;
      else if (dtype == DType::F16)
        dst.as<uint16_t>()[i] = floatToHalf(f);
      else
        dst.as<uint16_t>()[i] = floatToBf16(f);
    }
    return true;
  }
  bool srcInt = value.dtype == DType::I32 || value.dtype == DType::I64;
  bool dstInt = dtype == DType::I32 || dtype == DType::I64;
  if (srcInt && dstInt) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = value.dtype == DType::I32 ? value.as<int32_t>()[i]
                                            : value.as<int64_t>()[i];
      if (dtype == DType::I32) {
        if (v < INT32_MIN || v > INT32_MAX) {
          error = what + " has value " + std::to_string(v) +
                  ", which does not fit i32";
          return false;
        }
        dst.as<int32_t>()[i] = static_cast<int32_t>(v);
      } else {
        dst.as<int64_t>()[i] = v;
      }
    }
    return true;
  }
  error = what + " must have element type " + dtypeName(dtype) + ", got " +
          dtypeName(value.dtype);
  return false;
}

/// Fills `v` with seeded random data (see Executor::setRandomInputs).
void fillRandom(const TensorView &v, int64_t limit, std::mt19937_64 &rng) {
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (int64_t i = 0, count = v.numElements(); i < count; ++i) {
    switch (v.dtype) {
    case DType::F32:
      v.as<float>()[i] = real(rng);
      break;
    case DType::F16:
      v.as<uint16_t>()[i] = floatToHalf(real(rng));
      break;
    case DType::BF16:
      v.as<uint16_t>()[i] = floatToBf16(real(rng));
      break;
    case DType::I32:
      v.as<int32_t>()[i] =
          static_cast<int32_t>(rng() % std::max<int64_t>(limit, 1));
      break;
    case DType::I64:
      v.as<int64_t>()[i] =
          static_cast<int64_t>(rng() % std::max<int64_t>(limit, 1));
      break;
    case DType::Bool:
      v.as<uint8_t>()[i] = rng() & 1;
      break;
    }
  }
}

} // namespace

std::optional<plan::Plan>
parsePlan(std::string_view bytes, const std::string &name, std::string &error) {
  plan::Plan plan;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !plan.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    error = name + ": not a Loom plan (the protobuf does not parse; is the "
                   "file truncated or corrupt?)";
    return std::nullopt;
  }
  if (plan.format_version() != kPlanFormatVersion) {
    error = name + ": plan format version " +
            std::to_string(plan.format_version()) +
            " is not supported by this runtime, which reads version " +
            std::to_string(kPlanFormatVersion) +
            "; recompile the model with this Loom";
    return std::nullopt;
  }
  return plan;
}

std::optional<plan::Plan> readPlanFile(const std::string &path,
                                       std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open the plan file";
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parsePlan(ss.str(), path, error);
}

struct Executor::Impl {
  plan::Plan plan;
  /// Which ranks run which stage; this rank's stage and its program.
  StageMap stages;
  int32_t stage = 0;
  const plan::Program *program = nullptr;
  Backend *backend = nullptr;
  /// The plan's mesh; unset for a plan without one (a single device).
  std::optional<layout::Mesh> mesh;
  int64_t rank = 0, numDevices = 1;
  Communicator *comm = nullptr;
  /// A one-rank communicator for a one-device mesh run without one.
  std::unique_ptr<Communicator> ownComm;
  /// Everything allocated below is charged here (declared first, so that
  /// it outlives them).
  mutable MemoryAccount memory;
  /// How collectives allocate scratch and move bytes: host memory, or the
  /// backend's copies for a communicator that takes device memory.
  std::unique_ptr<HostBufferOps> hostOps;
  std::unique_ptr<BackendBufferOps> deviceOps;
  std::unique_ptr<CollectiveRunner> collectives;
  /// Whether collectives on the device communicator run on the backend's
  /// second queue while later kernels compute (Backend::beginCommunication).
  bool overlap = false;
  /// A collective queued there, not yet waited for: its token and the
  /// bytes it reads and writes.
  struct InFlight {
    int64_t token;
    const unsigned char *in, *inEnd, *out, *outEnd;
    /// Its scratch in the step arena (none: both null), which later
    /// values may reuse once it is done.
    const unsigned char *scratch, *scratchEnd;
  };
  std::vector<InFlight> inFlight;
  std::unique_ptr<AlignedBuffer> state, arena;
  /// Host copies of messages for a backend whose memory the host cannot
  /// touch (grown to the largest, charged to `memory`).
  std::vector<unsigned char> staging;
  /// The state messages gatherState has sent or received so far: the tags
  /// of the next are kReservedTagBase plus this.
  mutable int64_t stateMessages = 0;
  StepTiming lastTiming, totalTiming;
  /// Host copies of outputs and state read back from a device backend.
  mutable std::map<int32_t, HostBuffer> hostCopies;
  /// Per value: its view into state or arena memory (local type), its
  /// global shape and its layout.
  std::vector<TensorView> views;
  std::vector<Shape> globalShapes;
  std::vector<layout::TensorLayout> layouts;
  struct Step {
    enum Kind { Kernel, Collective, Send, Recv };
    Kind kind;
    /// The backend's kernel; nullptr for any other kind.
    const KernelFn *kernel;
    Attrs attrs;
    std::vector<int32_t> operands, results;
    const plan::Instruction *inst;
    /// Send and recv: the plan's tag, and per peer rank the block of this
    /// rank's value it sends or receives (messageBlocks), relative to the
    /// value's local buffer.
    int64_t tag = -1;
    struct Piece {
      int64_t peer;
      Shard block;
      /// The block is the whole buffer.
      bool whole;
    };
    std::vector<Piece> pieces;
  };
  std::vector<Step> steps;
  /// One per collective step, in step order; `statOf[i]` indexes it.
  std::vector<CollectiveStat> collectiveStats;
  std::vector<int32_t> statOf;
  /// The inputs of every stage; by name, their index there, and the ids of
  /// this stage's values of each (several for micro-batches).
  std::vector<PlanInput> planInputs;
  std::map<std::string, size_t> inputIndex;
  std::map<std::string, std::vector<int32_t>> inputIds;
  std::map<std::string, int32_t> outputIds, hyperIds;

  const layout::Mesh *meshPtr() const { return mesh ? &*mesh : nullptr; }
  /// The mesh this rank's stage's layouts and collectives name.
  const layout::Mesh *stageMesh() const {
    return stages.meshOf(stage, meshPtr());
  }
  std::string describeLayout(int32_t id) const {
    return stageMesh() ? layouts[id].toString(*stageMesh()) : "[]";
  }

  /// Makes the kernels queued from now on wait for every collective in
  /// flight that `reads` may read or `writes` may write: read after write,
  /// write after read and write after write. With neither, waits for all.
  void orderAfterCollectives(const std::vector<const TensorView *> &reads,
                             const std::vector<const TensorView *> &writes,
                             bool all = false) {
    auto hits = [](const TensorView *v, const unsigned char *begin,
                   const unsigned char *end) {
      auto *p = static_cast<const unsigned char *>(v->data);
      return v->bytes() && begin != end && p < end && begin < p + v->bytes();
    };
    auto it = inFlight.begin();
    while (it != inFlight.end()) {
      bool wait = all;
      for (const TensorView *v : reads)
        wait = wait || hits(v, it->out, it->outEnd);
      for (const TensorView *v : writes)
        wait = wait || hits(v, it->in, it->inEnd) ||
               hits(v, it->out, it->outEnd) ||
               hits(v, it->scratch, it->scratchEnd);
      if (!wait) {
        ++it;
        continue;
      }
      backend->waitCommunication(it->token);
      it = inFlight.erase(it);
    }
  }
  /// Whether the executor reads and writes the backend's memory directly.
  bool direct() const { return backend->hostAccessible(); }
  /// Calls `fn` on a host view of `v`: `v` itself when the backend's memory
  /// is host-accessible, else a host copy, read from the device first when
  /// `read` and written back after when `write`.
  template <typename F>
  void onHost(const TensorView &v, bool read, bool write, F &&fn) const {
    if (direct()) {
      fn(v);
      return;
    }
    HostBuffer host{v.dtype, v.shape, {}};
    host.bytes.resize(v.bytes());
    if (read && v.bytes())
      backend->copyToHost(host.bytes.data(), v.data, v.bytes());
    fn(host.view());
    if (write && v.bytes())
      backend->copyToDevice(v.data, host.bytes.data(), v.bytes());
  }
  /// A host view of value `id`: the value itself, or a copy read back from
  /// the device (valid until the next read of the same value).
  TensorView hostView(int32_t id) const {
    const TensorView &v = views[id];
    if (direct() || !v.data)
      return v;
    HostBuffer &copy = hostCopies[id];
    copy.dtype = v.dtype;
    copy.shape = v.shape;
    copy.bytes.resize(v.bytes());
    if (v.bytes())
      backend->copyToHost(copy.bytes.data(), v.data, v.bytes());
    return copy.view();
  }
  /// Host memory for a message of `bytes` (see `staging`).
  unsigned char *stagingFor(size_t bytes) {
    if (staging.size() < bytes) {
      memory.release(static_cast<int64_t>(staging.size()));
      staging.resize(bytes);
      memory.charge(static_cast<int64_t>(bytes));
    }
    return staging.data();
  }
  /// This rank's shard of value `id`.
  Shard shard(int32_t id) const {
    return shardOf(layouts[id], stageMesh(), globalShapes[id],
                   stages.shardRank(rank));
  }
  std::string validateMesh();
  std::string checkRankContext(const RankContext &ctx);
  std::string validateValue(const plan::Value &v, std::vector<bool> &defined);
  std::string checkPointToPoint(Step &step) const;
  /// Finds the blocks a send or recv moves (messageBlocks) from its
  /// partner instruction `partner` of the peer stage.
  std::string planMessage(Step &step, int32_t partner) const;
  std::string checkStageAxisUnused(const Step &step) const;
  std::string checkScratch(const Step &step) const;
  std::string checkLocalShapes() const;
  std::string validate();
  std::string load();
  /// Writes this rank's shard of the step's input `step` (global) into
  /// input value `id`: its micro-batch's rows, or all of it.
  void writeInput(int32_t id, const TensorView &step);
  /// Runs a send or a recv; a recv reports how long it waited, and from
  /// when (trace time).
  std::string send(const Step &step);
  std::string recv(const Step &step, TraceWriter *trace, double &waitSeconds,
                   double &waitStart);
  /// gatherState among the ranks of this rank's stage.
  bool gatherInStage(const StateInfo &s, HostBuffer &global,
                     std::string &error) const;
};

std::string Executor::Impl::validateMesh() {
  std::string error;
  if (!meshFromProto(plan.mesh(), mesh, error))
    return error;
  numDevices = mesh ? mesh->numDevices() : 1;
  return "";
}

std::string Executor::Impl::checkRankContext(const RankContext &ctx) {
  int64_t world = ctx.comm ? ctx.comm->worldSize() : 1;
  if (numDevices > 1 && world != numDevices)
    return "this plan is partitioned over " + std::to_string(numDevices) +
           " devices " + mesh->toString() + "; run it with --ranks " +
           std::to_string(numDevices) + " or under mpirun -np " +
           std::to_string(numDevices) +
           (ctx.comm ? " (the communicator has " + std::to_string(world) +
                           (world == 1 ? " rank)" : " ranks)")
                     : "");
  if (numDevices == 1 && world != 1)
    return "this plan runs on one device, but the communicator has " +
           std::to_string(world) +
           " ranks; run it with --ranks 1, or "
           "compile it for a mesh of " +
           std::to_string(world) + " devices";
  if (ctx.comm && ctx.comm->rank() != ctx.rank)
    return "rank " + std::to_string(ctx.rank) +
           " was given a communicator of rank " +
           std::to_string(ctx.comm->rank());
  if (ctx.rank < 0 || ctx.rank >= numDevices)
    return "rank " + std::to_string(ctx.rank) + " is not a rank of " +
           (mesh ? "the mesh " + mesh->toString() : "a one-device plan");
  rank = ctx.rank;
  comm = ctx.comm;
  return "";
}

/// Checks one value: kinds, local and global types, layout, storage and
/// initial data. Records its view, global shape and layout. Whether the
/// local shape is the layout's shard of the global one is checked later
/// (checkLocalShapes), so that a wrong instruction result is reported by
/// the instruction's rule, which names the op and its source.
std::string Executor::Impl::validateValue(const plan::Value &v,
                                          std::vector<bool> &defined) {
  std::string where = "value #" + std::to_string(v.id()) +
                      (v.name().empty() ? "" : " ('" + v.name() + "')");
  int32_t i = v.id();
  std::optional<DType> dtype = toDType(v.type().dtype());
  if (!dtype)
    return where + " has an unknown element type";
  Shape shape(v.type().shape().begin(), v.type().shape().end());
  if (checkedCount(shape, *dtype) < 0)
    return where + " has an invalid shape";
  int64_t bytes = numElements(shape) * static_cast<int64_t>(dtypeSize(*dtype));
  if (v.bytes() != bytes)
    return where + " declares " + std::to_string(v.bytes()) +
           " bytes but its type needs " + std::to_string(bytes);

  // The global type (unset: the local one) and the layout relating them.
  Shape global = shape;
  if (v.has_global_type()) {
    if (v.global_type().dtype() != v.type().dtype())
      return where + " has a global element type other than its local one";
    global.assign(v.global_type().shape().begin(),
                  v.global_type().shape().end());
    if (checkedCount(global, *dtype) < 0)
      return where + " has an invalid global shape";
  }
  std::string error;
  std::optional<layout::TensorLayout> layout =
      layoutFromProto(v.layout(), stageMesh(), global, error);
  if (!layout)
    return where + ": " + error;
  if (stages.numStages() > 1 && !stages.ownMeshes()) {
    // No layout names the stage axis: a stage holds whole tensors on it.
    const std::string &stageAxis = mesh->axisName(0);
    bool named =
        std::find(v.layout().partial().begin(), v.layout().partial().end(),
                  stageAxis) != v.layout().partial().end();
    for (const plan::Layout::DimAxes &d : v.layout().dims())
      named |= std::find(d.axes().begin(), d.axes().end(), stageAxis) !=
               d.axes().end();
    if (named)
      return where + " is laid out as " + layout->toString(*mesh) +
             ", over the stage axis '" + stageAxis +
             "'; a pipelined plan's layouts name only the other axes";
  }
  if (v.has_micro_batch() && v.kind() != plan::Value::INPUT)
    return where + " holds a micro-batch, but only inputs are split into "
                   "micro-batches";
  int64_t globalBytes =
      numElements(global) * static_cast<int64_t>(dtypeSize(*dtype));

  bool persistent = isPersistent(v.kind()) || v.has_in_place_of();
  if (!isPersistent(v.kind()) && v.kind() != plan::Value::INPUT &&
      v.kind() != plan::Value::TEMPORARY &&
      v.kind() != plan::Value::HYPERPARAMETER)
    return where + " has an unknown kind";
  if (v.kind() == plan::Value::HYPERPARAMETER &&
      (v.name() != "lr" && v.name() != "step"))
    return where + " is a hyperparameter other than lr and step";
  if (v.kind() == plan::Value::HYPERPARAMETER &&
      (!shape.empty() || !isFloat(*dtype)))
    return where + " must be a floating-point scalar";
  if ((v.kind() == plan::Value::HYPERPARAMETER ||
       v.kind() == plan::Value::CONSTANT) &&
      !layout->isReplicated())
    return where + " is laid out as " + layout->toString(*stageMesh()) +
           ", but constants and hyperparameters must be replicated";
  int64_t limit = persistent ? program->state_bytes() : program->arena_bytes();
  if (v.offset() < 0 || v.offset() > limit || bytes > limit - v.offset())
    return where + " lies outside its memory (offset " +
           std::to_string(v.offset()) + ", " + std::to_string(bytes) +
           " bytes)";
  if (v.has_in_place_of()) {
    int32_t t = v.in_place_of();
    if (v.kind() != plan::Value::TEMPORARY || t < 0 || t >= i ||
        !isPersistent(program->values(t).kind()) ||
        program->values(t).kind() == plan::Value::CONSTANT ||
        program->values(t).offset() != v.offset() ||
        program->values(t).bytes() != bytes || views[t].dtype != *dtype ||
        views[t].shape != shape)
      return where + " is not a valid in-place update of value #" +
             std::to_string(t);
  }
  // Initial data is the GLOBAL tensor; every rank keeps its shard.
  bool seeded =
      (v.kind() == plan::Value::PARAMETER || v.kind() == plan::Value::BUFFER) &&
      v.data().empty() && v.has_init();
  if (isPersistent(v.kind()) && v.kind() != plan::Value::OPTIMIZER_STATE &&
      !seeded) {
    if (v.data().empty() && globalBytes > 0)
      return where + " has no initial data (was the model compiled "
                     "without weights?)";
    if (static_cast<int64_t>(v.data().size()) != globalBytes)
      return where + " has " + std::to_string(v.data().size()) +
             " bytes of data but needs " + std::to_string(globalBytes) +
             (global != shape ? " (its global type)" : "");
  }
  if (v.kind() == plan::Value::OPTIMIZER_STATE && !v.data().empty() &&
      static_cast<int64_t>(v.data().size()) != globalBytes)
    return where + " has initial data of the wrong size";
  views[i] = {*dtype, std::move(shape), nullptr};
  globalShapes[i] = std::move(global);
  layouts[i] = std::move(*layout);
  defined[i] = v.kind() != plan::Value::TEMPORARY;
  return "";
}

std::string Executor::Impl::checkLocalShapes() const {
  for (const plan::Value &v : program->values()) {
    int32_t i = v.id();
    const layout::Mesh *on = stageMesh();
    Shape expected =
        on ? layouts[i].localShape(*on, globalShapes[i]) : globalShapes[i];
    if (expected != views[i].shape)
      return "value #" + std::to_string(i) +
             (v.name().empty() ? "" : " ('" + v.name() + "')") +
             " has local shape " + formatShape(views[i].shape) +
             ", but its global shape " + formatShape(globalShapes[i]) +
             (on ? " laid out as " + layouts[i].toString(*on) + " on mesh " +
                       on->toString()
                 : std::string(" in a plan without a mesh")) +
             " gives " + formatShape(expected);
  }
  return "";
}

/// Checks a send's or recv's operands, results and attributes, and finds
/// its peer rank.
std::string Executor::Impl::checkPointToPoint(Step &step) const {
  bool sending = step.kind == Step::Send;
  if (sending && (step.operands.size() != 1 || !step.results.empty()))
    return "a send has one operand and no result, got " +
           std::to_string(step.operands.size()) + " and " +
           std::to_string(step.results.size());
  if (!sending && (!step.operands.empty() || step.results.size() != 1))
    return "a recv has no operand and one result, got " +
           std::to_string(step.operands.size()) + " and " +
           std::to_string(step.results.size());
  for (const char *name : {"peer_stage", "tag"}) {
    auto it = step.attrs.all().find(name);
    if (it == step.attrs.all().end() ||
        !std::holds_alternative<int64_t>(it->second))
      return std::string("needs the integer attribute '") + name + "'";
  }
  int64_t peer = step.attrs.getInt("peer_stage");
  int64_t tag = step.attrs.getInt("tag");
  int32_t n = stages.numStages();
  if (peer < 0 || peer >= n)
    return "peer_stage " + std::to_string(peer) +
           " is not a stage of the plan, which has " + std::to_string(n) +
           (n == 1 ? " stage" : " stages");
  if (peer == stage)
    return "peer_stage " + std::to_string(peer) +
           " is this instruction's own stage; send and recv connect two "
           "stages";
  if (tag < 0 || tag >= kReservedTagBase)
    return "tag " + std::to_string(tag) +
           " is outside [0, 2^62); the runtime keeps the tags from 2^62 for "
           "its own messages";
  step.tag = tag;
  return "";
}

std::string Executor::Impl::planMessage(Step &step, int32_t partner) const {
  bool sending = step.kind == Step::Send;
  int32_t peerStage = static_cast<int32_t>(step.attrs.getInt("peer_stage"));
  int32_t own = sending ? step.operands[0] : step.results[0];
  const plan::Program &theirs = plan.stages(peerStage).program();
  const plan::Instruction &other = theirs.instructions(partner);
  int32_t id = sending ? other.results(0) : other.operands(0);
  // checkMessages compared the global types; the peer's layout is read
  // against the peer stage's mesh.
  const plan::Value &v = theirs.values(id);
  std::string error;
  std::optional<layout::TensorLayout> peerLayout =
      layoutFromProto(v.layout(), stages.meshOf(peerStage, meshPtr()),
                      globalShapes[own], error);
  if (!peerLayout)
    return "its partner, stage " + std::to_string(peerStage) +
           "'s instruction #" + std::to_string(partner) + ", has value #" +
           std::to_string(id) + ": " + error;
  MessageEnd mine{stage, &layouts[own]}, peer{peerStage, &*peerLayout};
  std::vector<MessageBlock> blocks;
  if (std::string e =
          messageBlocks(stages, meshPtr(), sending ? mine : peer,
                        sending ? peer : mine, globalShapes[own], blocks);
      !e.empty())
    return e;
  Shard local = shard(own);
  for (const MessageBlock &b : blocks) {
    if ((sending ? b.from : b.to) != rank)
      continue;
    // The block relative to this rank's buffer.
    Shard block;
    block.globalShape = local.localShape;
    block.localShape = b.shape;
    for (size_t d = 0; d < b.offsets.size(); ++d)
      block.offsets.push_back(b.offsets[d] - local.offsets[d]);
    bool whole = b.shape == local.localShape;
    step.pieces.push_back({sending ? b.to : b.from, std::move(block), whole});
  }
  return "";
}

/// A collective packing along an inner dimension has the scratch its rule
/// needs (common/plan/CollectiveScratch.h) in the step arena; other
/// instructions have none.
std::string Executor::Impl::checkScratch(const Step &step) const {
  const plan::Instruction &inst = *step.inst;
  int64_t need = 0;
  if (step.kind == Step::Collective) {
    const TensorView &in = views[step.operands[0]];
    const TensorView &out = views[step.results[0]];
    need = collectiveScratch(inst.op(), in.shape, out.shape,
                             static_cast<int64_t>(dtypeSize(in.dtype)),
                             static_cast<int>(step.attrs.getInt("dim", -1)),
                             static_cast<int>(step.attrs.getInt("to_dim", -1)))
               .total();
  }
  if (inst.scratch_bytes() == 0 && need == 0)
    return "";
  if (need == 0)
    return "has " + std::to_string(inst.scratch_bytes()) +
           " bytes of scratch but needs none";
  if (inst.scratch_bytes() < need)
    return "needs " + std::to_string(need) +
           " bytes of scratch in the step arena to pack its chunks, but the "
           "plan gives it " +
           std::to_string(inst.scratch_bytes()) + "; recompile the model";
  if (inst.scratch_offset() < 0 ||
      inst.scratch_offset() > program->arena_bytes() - inst.scratch_bytes())
    return "its scratch (" + std::to_string(inst.scratch_bytes()) +
           " bytes at offset " + std::to_string(inst.scratch_offset()) +
           ") is outside the step arena (" +
           std::to_string(program->arena_bytes()) + " bytes)";
  return "";
}

/// In a pipelined plan, a collective's group stays within a stage: it
/// never runs over the stage axis (mesh axis 0).
std::string Executor::Impl::checkStageAxisUnused(const Step &step) const {
  if (stages.numStages() == 1 || stages.ownMeshes())
    return "";
  std::vector<int64_t> axes = step.attrs.getInts("axes");
  if (step.attrs.has("axis"))
    axes.push_back(step.attrs.getInt("axis"));
  if (std::find(axes.begin(), axes.end(), 0) == axes.end())
    return "";
  return "runs over the stage axis '" + mesh->axisName(0) +
         "'; a pipelined plan's collectives stay within a stage";
}

std::string Executor::Impl::validate() {
  program = &plan.stages(stage).program();
  int64_t arenaSize = program->arena_bytes(),
          stateSize = program->state_bytes();
  if (arenaSize < 0 || arenaSize > kMaxBytes || stateSize < 0 ||
      stateSize > kMaxBytes)
    return "the plan's memory sizes are invalid";

  int n = program->values_size();
  views.assign(n, {});
  globalShapes.assign(n, {});
  layouts.assign(n, {});
  std::vector<bool> defined(n, false);
  for (int i = 0; i < n; ++i) {
    const plan::Value &v = program->values(i);
    if (v.id() != i)
      return "value ids must be 0, 1, 2, ... in order";
    if (std::string e = validateValue(v, defined); !e.empty())
      return e;
  }

  // Instructions: known ops, valid ids, defined before use, shapes right.
  std::vector<layout::MeshAxis> meshAxes;
  if (stageMesh())
    meshAxes = stageMesh()->axes();
  std::vector<int> lastUse(n, -1), definedAt(n, -1);
  for (int i = 0; i < program->instructions_size(); ++i) {
    const plan::Instruction &inst = program->instructions(i);
    std::string at = "instruction #" + std::to_string(i) + " (" + inst.op() +
                     (inst.location().empty() ? "" : " at " + inst.location()) +
                     ")";
    Step::Kind kind = isCollectiveOp(inst.op()) ? Step::Collective
                      : inst.op() == "send"     ? Step::Send
                      : inst.op() == "recv"     ? Step::Recv
                                                : Step::Kernel;
    bool collective = kind == Step::Collective;
    const KernelFn *kernel =
        kind == Step::Kernel ? backend->findKernel(inst.op()) : nullptr;
    if (kind == Step::Kernel && !kernel)
      return at + ": backend '" + backend->name() + "' does not support op '" +
             inst.op() + "'";
    Step step{kind, kernel, toAttrs(inst), {}, {}, &inst, -1, {}};
    std::vector<TypeRef> operandTypes, resultTypes;
    for (int32_t id : inst.operands()) {
      if (id < 0 || id >= n || !defined[id])
        return at + ": operand " + std::to_string(id) +
               " is not a value defined earlier";
      operandTypes.push_back({views[id].dtype, &views[id].shape});
      step.operands.push_back(id);
      lastUse[id] = i;
    }
    for (int32_t id : inst.results()) {
      if (id < 0 || id >= n || defined[id] ||
          program->values(id).kind() != plan::Value::TEMPORARY)
        return at + ": result " + std::to_string(id) +
               " is not a fresh temporary value";
      defined[id] = true;
      definedAt[id] = i;
      resultTypes.push_back({views[id].dtype, &views[id].shape});
      step.results.push_back(id);
    }
    std::string e;
    if (kind == Step::Send || kind == Step::Recv)
      e = checkPointToPoint(step);
    else if (collective)
      e = checkCollective(inst.op(), step.attrs, meshAxes, operandTypes,
                          resultTypes);
    else
      e = checkInstruction(inst.op(), step.attrs, operandTypes, resultTypes);
    if (e.empty() && collective)
      e = checkStageAxisUnused(step);
    if (e.empty())
      e = checkScratch(step);
    if (!e.empty())
      return at + ": " + e;
    statOf.push_back(collective ? static_cast<int32_t>(collectiveStats.size())
                                : -1);
    if (collective)
      collectiveStats.push_back({i, inst.op(), inst.location(),
                                 views[step.operands[0]].shape,
                                 step.attrs.getInt("predicted_bytes", -1)});
    steps.push_back(std::move(step));
  }
  std::vector<bool> updated(n, false);
  for (int i = 0; i < n; ++i) {
    const plan::Value &v = program->values(i);
    if (!v.has_in_place_of())
      continue;
    int32_t t = v.in_place_of();
    if (updated[t])
      return "value #" + std::to_string(t) + " is updated in place twice";
    updated[t] = true;
    if (definedAt[i] < 0 || lastUse[t] > definedAt[i])
      return "value #" + std::to_string(t) +
             " is read after it is updated in place";
  }
  for (const auto &out : program->outputs()) {
    if (out.value() < 0 || out.value() >= n || !defined[out.value()])
      return "output '" + out.name() + "' is not a defined value";
    if (!layouts[out.value()].isReplicated())
      return "output '" + out.name() + "' (value #" +
             std::to_string(out.value()) + ") is laid out as " +
             describeLayout(out.value()) +
             "; model outputs must be replicated on every rank";
    lastUse[out.value()] = program->instructions_size();
    outputIds[out.name()] = out.value();
  }
  // A reshape's result may share its operand's bytes; the operand then
  // lives as long as either is used.
  for (int i = 0; i < n; ++i) {
    const plan::Value &v = program->values(i);
    if (!v.has_alias_of())
      continue;
    int32_t t = v.alias_of();
    const plan::Instruction *def =
        definedAt[i] >= 0 ? &program->instructions(definedAt[i]) : nullptr;
    // The reshape reads the target, or another alias of it.
    auto reads = [&](const plan::Instruction &inst) {
      int32_t operand = inst.operands_size() ? inst.operands(0) : -1;
      return operand == t || (operand >= 0 && operand < n &&
                              program->values(operand).has_alias_of() &&
                              program->values(operand).alias_of() == t);
    };
    if (t < 0 || t >= n || !def || def->op() != "reshape" || !reads(*def) ||
        program->values(t).kind() != plan::Value::TEMPORARY ||
        program->values(t).has_in_place_of() ||
        program->values(t).has_alias_of() ||
        program->values(t).bytes() != v.bytes() ||
        program->values(t).offset() != v.offset())
      return "value #" + std::to_string(i) +
             " is not a valid alias of value #" + std::to_string(t) +
             " (the result of a reshape of it, at the same offset)";
    lastUse[t] = std::max(lastUse[t], lastUse[i]);
  }
  if (std::string e = checkLocalShapes(); !e.empty())
    return e;

  // The memory plan: no two step-arena values that are live at once may
  // share bytes. Inputs live from the start, temporaries from their
  // instruction, both until their last use (outputs to the end).
  struct Interval {
    int from, to;
    int64_t begin, end;
    int32_t id;
  };
  std::vector<Interval> live;
  for (int i = 0; i < n; ++i) {
    const plan::Value &v = program->values(i);
    if (v.kind() == plan::Value::INPUT ||
        v.kind() == plan::Value::HYPERPARAMETER)
      live.push_back(
          {-1, std::max(lastUse[i], 0), v.offset(), v.offset() + v.bytes(), i});
    else if (v.kind() == plan::Value::TEMPORARY && !v.has_in_place_of() &&
             !v.has_alias_of())
      live.push_back({definedAt[i], std::max(lastUse[i], definedAt[i]),
                      v.offset(), v.offset() + v.bytes(), i});
  }
  // An instruction's scratch lives while it runs.
  for (int i = 0; i < program->instructions_size(); ++i) {
    const plan::Instruction &inst = program->instructions(i);
    if (inst.scratch_bytes() > 0)
      live.push_back({i, i, inst.scratch_offset(),
                      inst.scratch_offset() + inst.scratch_bytes(), -1 - i});
  }
  auto describe = [](const Interval &a) {
    return (a.id >= 0
                ? "value #" + std::to_string(a.id)
                : "the scratch of instruction #" + std::to_string(-1 - a.id)) +
           " (bytes [" + std::to_string(a.begin) + ", " +
           std::to_string(a.end) + "), instructions " + std::to_string(a.from) +
           " to " + std::to_string(a.to) + ")";
  };
  std::sort(live.begin(), live.end(), [](const Interval &a, const Interval &b) {
    return a.begin < b.begin;
  });
  for (size_t a = 0; a < live.size(); ++a)
    for (size_t b = a + 1; b < live.size() && live[b].begin < live[a].end; ++b)
      if (live[a].from <= live[b].to && live[b].from <= live[a].to &&
          live[a].begin < live[a].end && live[b].begin < live[b].end)
        return "the memory plan overlaps " + describe(live[a]) + " and " +
               describe(live[b]) + " while both are live";
  if (stages.numStages() == 1)
    return "";
  std::map<int32_t, int32_t> partners;
  if (std::string e = checkMessages(plan, stage, partners); !e.empty())
    return e;
  for (int32_t i = 0; i < static_cast<int32_t>(steps.size()); ++i) {
    Step &step = steps[i];
    if (step.kind != Step::Send && step.kind != Step::Recv)
      continue;
    if (std::string e = planMessage(step, partners.at(i)); !e.empty())
      return "instruction #" + std::to_string(i) + " (" + step.inst->op() +
             (step.inst->location().empty() ? ""
                                            : " at " + step.inst->location()) +
             "): " + e;
  }
  return "";
}

/// Points every value at its memory and loads this rank's shard of every
/// persistent value; then drops the plan's copy of the data.
std::string Executor::Impl::load() {
  std::string error;
  for (const plan::Value &v : program->values()) {
    bool persistent = isPersistent(v.kind()) || v.has_in_place_of();
    unsigned char *base = persistent ? state->data : arena->data;
    TensorView &view = views[v.id()];
    view.data = base + v.offset();
    if (!isPersistent(v.kind()))
      continue;
    Shard mine = shard(v.id());
    if (!v.data().empty()) {
      TensorView global{view.dtype, globalShapes[v.id()],
                        const_cast<char *>(v.data().data())};
      onHost(view, false, true, [&](const TensorView &local) {
        copyShardOut(global, mine, local);
      });
    } else if ((v.kind() == plan::Value::PARAMETER ||
                v.kind() == plan::Value::BUFFER) &&
               v.has_init() && mine.holdsValue) {
      bool filled = true;
      onHost(view, false, true, [&](const TensorView &local) {
        filled = fillShardFromInitializer(v.init(), v.name(), mine.globalShape,
                                          mine.offsets, local, error);
      });
      if (!filled)
        return error;
    }
  }
  for (plan::Stage &s : *plan.mutable_stages())
    for (plan::Value &v : *s.mutable_program()->mutable_values())
      v.clear_data();
  return "";
}

std::unique_ptr<Executor> Executor::create(plan::Plan plan, Backend &backend,
                                           std::string &error,
                                           RankContext ctx) {
  std::unique_ptr<Executor> exec(new Executor());
  exec->impl = std::make_unique<Impl>();
  Impl &impl = *exec->impl;
  impl.plan = std::move(plan);
  impl.backend = &backend;
  if (std::string e = impl.validateMesh(); !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  if (std::string e = impl.checkRankContext(ctx); !e.empty()) {
    error = e;
    return nullptr;
  }
  if (std::string e = mapStages(impl.plan, impl.meshPtr(), impl.stages);
      !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  impl.stage = impl.stages.stageOf[impl.rank];
  if (impl.stages.numStages() > 1 && !impl.comm) {
    // Unreachable past checkRankContext (a pipelined mesh has several
    // devices), but the stages must be able to message each other.
    error = "this plan is pipelined over " +
            std::to_string(impl.stages.numStages()) +
            " stages and needs a communicator";
    return nullptr;
  }
  if (std::string e = impl.validate(); !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  std::vector<PlanStateValue> planState;
  std::string e = collectPlanInputs(impl.plan, impl.planInputs);
  if (e.empty())
    e = collectPlanState(impl.plan, planState);
  if (!e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  bool hasCollectives = std::any_of(
      impl.steps.begin(), impl.steps.end(), [](const Impl::Step &step) {
        return step.kind == Impl::Step::Collective;
      });
  if (hasCollectives) {
    // A collective's validation needs a mesh; on one device without a
    // communicator, the groups are this rank alone.
    if (!impl.comm) {
      impl.ownComm = std::move(createThreadsCommunicators(1).front());
      impl.comm = impl.ownComm.get();
    }
    // A device communicator exchanges the backend's memory in place; any
    // other is given host copies (see run()).
    BufferOps *ops;
    if (!backend.hostAccessible() && impl.comm->takesDeviceMemory()) {
      impl.deviceOps = std::make_unique<BackendBufferOps>(backend, impl.memory);
      ops = impl.deviceOps.get();
      impl.overlap = backend.overlapsCommunication();
    } else {
      impl.hostOps = std::make_unique<HostBufferOps>(impl.memory);
      ops = impl.hostOps.get();
    }
    std::vector<int64_t> meshRanks;
    if (impl.stages.ownMeshes())
      meshRanks = impl.stages.ranks[impl.stage];
    impl.collectives = std::make_unique<CollectiveRunner>(
        *impl.stageMesh(), *impl.comm, ops, std::move(meshRanks));
  }
  impl.state = std::make_unique<AlignedBuffer>(backend, impl.memory,
                                               impl.program->state_bytes());
  impl.arena = std::make_unique<AlignedBuffer>(backend, impl.memory,
                                               impl.program->arena_bytes());
  if (!impl.state->data || !impl.arena->data) {
    error = "cannot allocate the plan's memory (" +
            std::to_string(impl.program->state_bytes() +
                           impl.program->arena_bytes()) +
            " bytes)";
    return nullptr;
  }
  if (std::string e = impl.load(); !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  for (const PlanStateValue &s : planState)
    exec->stateInfo.push_back(
        {s.name, s.kind, s.value, s.dtype, s.shape, s.stage});
  for (size_t i = 0; i < impl.planInputs.size(); ++i) {
    const PlanInput &in = impl.planInputs[i];
    impl.inputIndex.emplace(in.name, i);
    exec->inputInfo.push_back({in.name, in.dtype, in.shape});
  }
  for (const plan::Value &v : impl.program->values()) {
    if (v.kind() == plan::Value::HYPERPARAMETER)
      impl.hyperIds[v.name()] = v.id();
    if (v.kind() == plan::Value::INPUT)
      impl.inputIds[v.name()].push_back(v.id());
  }
  for (const auto &out : impl.program->outputs())
    exec->outputInfo.push_back({out.name(), impl.views[out.value()].dtype,
                                impl.views[out.value()].shape});
  return exec;
}

Executor::~Executor() = default;

int64_t Executor::rank() const { return impl->rank; }
int64_t Executor::numRanks() const { return impl->numDevices; }
Communicator *Executor::communicator() const { return impl->comm; }
int32_t Executor::stage() const { return impl->stage; }
int32_t Executor::numStages() const { return impl->stages.numStages(); }
const std::vector<int64_t> &Executor::stageRanks(int32_t s) const {
  return impl->stages.ranks[s];
}

void Executor::Impl::writeInput(int32_t id, const TensorView &step) {
  TensorView global = step;
  const plan::Value &v = program->values(id);
  if (v.has_micro_batch()) {
    // Rows [k * b, (k + 1) * b) of the step's input.
    const Shape &shape = globalShapes[id];
    int64_t rowElements = 1;
    for (size_t d = 1; d < shape.size(); ++d)
      rowElements *= shape[d];
    global.shape = shape;
    global.data = static_cast<unsigned char *>(step.data) +
                  v.micro_batch() * shape[0] * rowElements *
                      static_cast<int64_t>(dtypeSize(step.dtype));
  }
  Shard mine = shard(id);
  onHost(views[id], false, true,
         [&](const TensorView &local) { copyShardOut(global, mine, local); });
}

bool Executor::setInput(const std::string &name, const TensorView &value,
                        std::string &error) {
  auto it = impl->inputIndex.find(name);
  if (it == impl->inputIndex.end()) {
    error = "the plan has no input named '" + name + "'";
    return false;
  }
  const PlanInput &input = impl->planInputs[it->second];
  if (value.shape != input.shape) {
    error = "input '" + name + "' must have shape " + formatShape(input.shape) +
            ", got " + formatShape(value.shape);
    return false;
  }
  HostBuffer converted;
  TensorView step = value;
  if (value.dtype != input.dtype) {
    if (!convertTensor(value, input.dtype, converted, "input '" + name + "'",
                       error))
      return false;
    step = converted.view();
  }
  // A name only other stages have leaves nothing to write.
  auto ids = impl->inputIds.find(name);
  if (ids != impl->inputIds.end())
    for (int32_t id : ids->second)
      impl->writeInput(id, step);
  return true;
}

void Executor::setRandomInputs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Every name of the plan in name order, drawn whole whether or not this
  // stage has it, so that the stream stays in step with a single-device
  // run of the whole batch.
  for (const auto &[name, index] : impl->inputIndex) {
    const PlanInput &input = impl->planInputs[index];
    HostBuffer global{input.dtype, input.shape, {}};
    global.bytes.resize(numElements(input.shape) * dtypeSize(input.dtype));
    fillRandom(global.view(), input.randomBound, rng);
    auto ids = impl->inputIds.find(name);
    if (ids != impl->inputIds.end())
      for (int32_t id : ids->second)
        impl->writeInput(id, global.view());
  }
}

/// Sizes `buffer` to hold a block of `shape` of `dtype` elements, packed.
static void shapeBlockBuffer(HostBuffer &buffer, DType dtype,
                             const Shape &shape) {
  buffer.dtype = dtype;
  buffer.shape = shape;
  buffer.bytes.resize(numElements(shape) * dtypeSize(dtype));
}

std::string Executor::Impl::send(const Step &step) {
  const TensorView &v = views[step.operands[0]];
  if (step.pieces.size() == 1 && step.pieces[0].whole) {
    int64_t bytes = static_cast<int64_t>(v.bytes());
    int64_t peer = step.pieces[0].peer;
    if (direct())
      return comm->send(peer, step.tag, v.data, bytes);
    unsigned char *host = stagingFor(v.bytes());
    if (bytes)
      backend->copyToHost(host, v.data, v.bytes());
    return comm->send(peer, step.tag, host, bytes);
  }
  // Blocks of the buffer to several ranks (stages on different submeshes):
  // each packed, then sent (sends are buffered).
  std::string e;
  onHost(v, true, false, [&](const TensorView &local) {
    HostBuffer packed;
    for (const Step::Piece &piece : step.pieces) {
      shapeBlockBuffer(packed, v.dtype, piece.block.localShape);
      copyShardOut(local, piece.block, packed.view());
      memory.charge(static_cast<int64_t>(packed.bytes.size()));
      e = comm->send(piece.peer, step.tag, packed.bytes.data(),
                     static_cast<int64_t>(packed.bytes.size()));
      memory.release(static_cast<int64_t>(packed.bytes.size()));
      if (!e.empty())
        return;
    }
  });
  return e;
}

std::string Executor::Impl::recv(const Step &step, TraceWriter *trace,
                                 double &waitSeconds, double &waitStart) {
  const TensorView &v = views[step.results[0]];
  waitStart = trace ? trace->elapsedMicros() : 0;
  auto began = std::chrono::steady_clock::now();
  std::string e;
  if (step.pieces.size() == 1 && step.pieces[0].whole) {
    int64_t bytes = static_cast<int64_t>(v.bytes());
    void *dst = direct() ? v.data : stagingFor(v.bytes());
    e = comm->recv(step.pieces[0].peer, step.tag, dst, bytes);
    waitSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count();
    if (e.empty() && !direct() && bytes)
      backend->copyToDevice(v.data, dst, v.bytes());
    return e;
  }
  // Blocks from several ranks, each received whole and written into place.
  onHost(v, false, true, [&](const TensorView &local) {
    HostBuffer packed;
    for (const Step::Piece &piece : step.pieces) {
      shapeBlockBuffer(packed, v.dtype, piece.block.localShape);
      memory.charge(static_cast<int64_t>(packed.bytes.size()));
      e = comm->recv(piece.peer, step.tag, packed.bytes.data(),
                     static_cast<int64_t>(packed.bytes.size()));
      if (e.empty())
        copyShardIn(packed.view(), piece.block, local, /*accumulate=*/false);
      memory.release(static_cast<int64_t>(packed.bytes.size()));
      if (!e.empty())
        return;
    }
  });
  waitSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  return e;
}

bool Executor::run(std::string &error, TraceWriter *trace) {
  using Clock = std::chrono::steady_clock;
  using us = std::chrono::duration<double, std::micro>;
  int traceRank = static_cast<int>(impl->rank);
  double stepStart = trace ? trace->elapsedMicros() : 0;
  auto stepBegan = Clock::now();
  double waited = 0;
  for (size_t i = 0; i < impl->steps.size(); ++i) {
    const Impl::Step &step = impl->steps[i];
    double start = trace ? trace->elapsedMicros() : 0;
    auto began = Clock::now();
    std::string e;
    const char *category = "kernel";
    TraceWriter::Args args{{"location", step.inst->location()}};
    switch (step.kind) {
    case Impl::Step::Kernel: {
      KernelArgs kernelArgs{step.inst->op(), step.attrs, {}, {}};
      for (int32_t id : step.operands)
        kernelArgs.inputs.push_back(impl->views[id]);
      for (int32_t id : step.results)
        kernelArgs.outputs.push_back(impl->views[id]);
      if (!impl->inFlight.empty()) {
        std::vector<const TensorView *> reads, writes;
        for (const TensorView &v : kernelArgs.inputs)
          reads.push_back(&v);
        for (const TensorView &v : kernelArgs.outputs)
          writes.push_back(&v);
        impl->orderAfterCollectives(reads, writes);
      }
      e = (*step.kernel)(kernelArgs);
      // Asynchronous kernels: time each with --trace, else only report
      // their errors at the end of the step.
      if (e.empty() && trace)
        e = impl->backend->synchronize();
      break;
    }
    case Impl::Step::Collective: {
      category = "collective";
      int64_t before = impl->comm->bytesReceived();
      const TensorView &in = impl->views[step.operands[0]];
      const TensorView &out = impl->views[step.results[0]];
      // Its scratch in the step arena (validated against its rule).
      unsigned char *scratch =
          step.inst->scratch_bytes() > 0
              ? impl->arena->data + step.inst->scratch_offset()
              : nullptr;
      const size_t scratchBytes =
          static_cast<size_t>(step.inst->scratch_bytes());
      if (impl->overlap && !trace) {
        // Queued on the backend's second stream; kernels that touch its
        // buffers wait for it (above), the others run meanwhile.
        impl->backend->beginCommunication();
        impl->comm->setQueued(true);
        e = impl->collectives->run(step.inst->op(), step.attrs, in, out,
                                   scratch, scratchBytes);
        impl->comm->setQueued(false);
        auto *inBytes = static_cast<const unsigned char *>(in.data);
        auto *outBytes = static_cast<const unsigned char *>(out.data);
        impl->inFlight.push_back({impl->backend->endCommunication(), inBytes,
                                  inBytes + in.bytes(), outBytes,
                                  outBytes + out.bytes(), scratch,
                                  scratch + scratchBytes});
      } else if (impl->direct() || impl->deviceOps) {
        e = impl->collectives->run(step.inst->op(), step.attrs, in, out,
                                   scratch, scratchBytes);
      } else {
        // A host communicator on device memory: through host copies, and
        // host scratch of the runner's own beside the staging.
        impl->onHost(in, true, false, [&](const TensorView &hostIn) {
          impl->onHost(out, false, true, [&](const TensorView &hostOut) {
            e = impl->collectives->run(step.inst->op(), step.attrs, hostIn,
                                       hostOut);
          });
        });
      }
      CollectiveStat &stat = impl->collectiveStats[impl->statOf[i]];
      ++stat.calls;
      stat.bytesReceived += impl->comm->bytesReceived() - before;
      stat.seconds +=
          std::chrono::duration<double>(Clock::now() - began).count();
      break;
    }
    case Impl::Step::Send:
    case Impl::Step::Recv: {
      category = "p2p";
      impl->orderAfterCollectives({}, {}, /*all=*/true);
      std::string peers;
      for (const Impl::Step::Piece &piece : step.pieces)
        peers += (peers.empty() ? "" : ",") + std::to_string(piece.peer);
      TraceWriter::Args messageArgs{
          {"peer", peers},
          {"tag", std::to_string(step.tag)},
          {"bytes",
           std::to_string(
               impl->views[step.kind == Impl::Step::Send ? step.operands[0]
                                                         : step.results[0]]
                   .bytes())}};
      args.insert(args.end(), messageArgs.begin(), messageArgs.end());
      if (step.kind == Impl::Step::Send) {
        e = impl->send(step);
        break;
      }
      double wait = 0, waitStart = 0;
      e = impl->recv(step, trace, wait, waitStart);
      waited += wait;
      if (trace && e.empty())
        trace->addSpan(traceRank, "bubble", "idle", waitStart, wait * 1e6,
                       std::move(messageArgs));
      break;
    }
    }
    if (!e.empty()) {
      impl->orderAfterCollectives({}, {}, /*all=*/true);
      impl->backend->synchronize();
      error = "instruction #" + std::to_string(i) + " (" + step.inst->op() +
              (step.inst->location().empty() ? ""
                                             : " at " + step.inst->location()) +
              "): " + e;
      return false;
    }
    if (trace)
      trace->addSpan(traceRank, step.inst->op(), category, start,
                     us(Clock::now() - began).count(), std::move(args));
  }
  impl->orderAfterCollectives({}, {}, /*all=*/true);
  if (std::string e = impl->backend->synchronize(); !e.empty()) {
    error = "running the step on backend '" + impl->backend->name() + "': " + e;
    return false;
  }
  StepTiming &last = impl->lastTiming, &total = impl->totalTiming;
  last.seconds =
      std::chrono::duration<double>(Clock::now() - stepBegan).count();
  last.recvWaitSeconds = waited;
  last.steps = 1;
  total.seconds += last.seconds;
  total.recvWaitSeconds += last.recvWaitSeconds;
  ++total.steps;
  if (trace)
    trace->addSpan(
        traceRank, "step", "step", stepStart, last.seconds * 1e6,
        {{"stage", std::to_string(impl->stage)},
         {"peak_bytes", std::to_string(peakBytes())},
         {"planned_bytes", std::to_string(plannedBytes())},
         {"state_bytes", std::to_string(stateBytes())},
         {"recv_wait_us", std::to_string(waited * 1e6)},
         {"bubble_fraction", std::to_string(last.bubbleFraction())}});
  return true;
}

const StepTiming &Executor::lastStepTiming() const { return impl->lastTiming; }
const StepTiming &Executor::totalStepTiming() const {
  return impl->totalTiming;
}

const std::vector<Executor::CollectiveStat> &
Executor::collectiveStats() const {
  return impl->collectiveStats;
}

TensorView Executor::output(const std::string &name) const {
  auto it = impl->outputIds.find(name);
  if (it == impl->outputIds.end())
    return {};
  return impl->hostView(it->second);
}

bool Executor::isTraining() const { return impl->plan.has_training(); }

TensorView Executor::stateTensor(const StateInfo &s) const {
  if (s.stage != impl->stage)
    return {};
  return impl->hostView(s.value);
}

bool Executor::Impl::gatherInStage(const StateInfo &s, HostBuffer &global,
                                   std::string &error) const {
  const TensorView local = hostView(s.value);
  const layout::TensorLayout &layout = layouts[s.value];
  global.dtype = local.dtype;
  global.shape = globalShapes[s.value];
  global.bytes.assign(numElements(global.shape) * dtypeSize(local.dtype), 0);
  // Every rank of the stage takes the same branch: it depends on the plan
  // alone.
  const RankGroup &group = stages.ranks[stage];
  int64_t n = static_cast<int64_t>(group.size());
  if (n == 1 || layout.isReplicated()) {
    std::memcpy(global.bytes.data(), local.data, local.bytes());
    return true;
  }
  size_t bytes = local.bytes();
  if (bytes == 0)
    return true;
  std::vector<unsigned char> all(bytes * n);
  memory.charge(static_cast<int64_t>(all.size()));
  std::string e;
  if (comm->takesDeviceMemory() && !direct()) {
    // A device communicator gathers device memory; read the result back.
    void *gathered = memory.remember(backend->allocate(bytes * n), bytes * n);
    if (!gathered) {
      memory.release(static_cast<int64_t>(all.size()));
      error = "gathering '" + s.name + "': out of device memory";
      return false;
    }
    e = comm->allGather(group, views[s.value].data, gathered,
                        static_cast<int64_t>(bytes));
    if (e.empty())
      backend->copyToHost(all.data(), gathered, bytes * n);
    memory.forget(gathered);
    backend->deallocate(gathered);
  } else {
    e = comm->allGather(group, local.data, all.data(),
                        static_cast<int64_t>(bytes));
  }
  memory.release(static_cast<int64_t>(all.size()));
  if (!e.empty()) {
    error = "gathering '" + s.name + "' from every rank: " + e;
    return false;
  }
  // One replica of every block; partial sums added in member order, so
  // that every rank computes bitwise the same result.
  bool partial = !layout.partialAxes().empty();
  for (int64_t i = 0; i < n; ++i) {
    Shard theirs =
        shardOf(layout, stageMesh(), global.shape, stages.shardRank(group[i]));
    if (!theirs.firstReplica)
      continue;
    TensorView block{local.dtype, local.shape, all.data() + i * bytes};
    copyShardIn(block, theirs, global.view(), partial);
  }
  return true;
}

bool Executor::gatherState(const StateInfo &s, HostBuffer &global,
                           std::string &error) const {
  if (impl->stages.numStages() == 1)
    return impl->gatherInStage(s, global, error);
  // Pipelined: the owner stage gathers, its first rank sends the result to
  // every other rank. The barrier first: once every rank is here, every
  // message of the plan has been received, so the runtime's tags cannot be
  // taken for a plan's (MPI maps tags modulo its bound).
  Communicator &comm = *impl->comm;
  RankGroup world(impl->numDevices);
  for (int64_t r = 0; r < impl->numDevices; ++r)
    world[r] = r;
  if (std::string e = comm.barrier(world); !e.empty()) {
    error = "gathering '" + s.name + "': " + e;
    return false;
  }
  int64_t tag = kReservedTagBase + impl->stateMessages++;
  const std::vector<int64_t> &owners = impl->stages.ranks[s.stage];
  int64_t bytes =
      numElements(s.shape) * static_cast<int64_t>(dtypeSize(s.dtype));
  if (s.stage == impl->stage) {
    if (!impl->gatherInStage(s, global, error))
      return false;
    if (impl->rank != owners[0])
      return true;
    for (int64_t r = 0; r < impl->numDevices; ++r) {
      if (impl->stages.stageOf[r] == s.stage)
        continue;
      if (std::string e = comm.send(r, tag, global.bytes.data(), bytes);
          !e.empty()) {
        error =
            "sending '" + s.name + "' to rank " + std::to_string(r) + ": " + e;
        return false;
      }
    }
    return true;
  }
  global.dtype = s.dtype;
  global.shape = s.shape;
  global.bytes.assign(static_cast<size_t>(bytes), 0);
  if (std::string e = comm.recv(owners[0], tag, global.bytes.data(), bytes);
      !e.empty()) {
    error = "receiving '" + s.name + "' from stage " + std::to_string(s.stage) +
            ": " + e;
    return false;
  }
  return true;
}

bool Executor::setStateFromGlobal(const StateInfo &s, const TensorView &global,
                                  std::string &error) {
  if (s.stage != impl->stage)
    return true;
  const TensorView &local = impl->views[s.value];
  const Shape &shape = impl->globalShapes[s.value];
  if (global.shape != shape) {
    error = "'" + s.name + "' has shape " + formatShape(shape) + ", got " +
            formatShape(global.shape);
    return false;
  }
  Shard mine = impl->shard(s.value);
  if (global.dtype == local.dtype) {
    impl->onHost(local, false, true, [&](const TensorView &host) {
      copyShardOut(global, mine, host);
    });
    return true;
  }
  HostBuffer converted;
  if (!isFloat(global.dtype) || !isFloat(local.dtype) ||
      !convertTensor(global, local.dtype, converted, "'" + s.name + "'",
                     error)) {
    error = "'" + s.name + "' has element type " + dtypeName(local.dtype) +
            ", got " + dtypeName(global.dtype);
    return false;
  }
  impl->onHost(local, false, true, [&](const TensorView &host) {
    copyShardOut(converted.view(), mine, host);
  });
  return true;
}

double Executor::learningRate(int64_t t) const {
  const plan::Training &training = impl->plan.training();
  double lr = training.lr();
  if (training.lr_schedule() != "cosine")
    return lr;
  int64_t warmup = training.warmup_steps(), total = training.total_steps();
  if (t <= warmup && warmup > 0)
    return lr * static_cast<double>(t) / warmup;
  double span = static_cast<double>(std::max<int64_t>(total - warmup, 1));
  double progress = std::clamp((t - warmup) / span, 0.0, 1.0);
  return training.min_lr() +
         0.5 * (lr - training.min_lr()) * (1.0 + std::cos(M_PI * progress));
}

/// Writes a float into a floating-point scalar of any width.
static void setScalar(const TensorView &v, double x) {
  switch (v.dtype) {
  case DType::F32:
    *v.as<float>() = static_cast<float>(x);
    break;
  case DType::F16:
    *v.as<uint16_t>() = floatToHalf(static_cast<float>(x));
    break;
  default:
    *v.as<uint16_t>() = floatToBf16(static_cast<float>(x));
    break;
  }
}

static double getScalar(const TensorView &v) {
  switch (v.dtype) {
  case DType::F32:
    return *v.as<float>();
  case DType::F16:
    return halfToFloat(*v.as<uint16_t>());
  case DType::BF16:
    return bf16ToFloat(*v.as<uint16_t>());
  default:
    return 0;
  }
}

bool Executor::trainStep(std::string &error, TraceWriter *trace, double &loss,
                         double &lr) {
  if (!isTraining()) {
    error = "the plan is not a training step; compile it with --train";
    return false;
  }
  int64_t t = steps + 1;
  lr = learningRate(t);
  auto lrIt = impl->hyperIds.find("lr"), stepIt = impl->hyperIds.find("step");
  if (lrIt != impl->hyperIds.end())
    impl->onHost(impl->views[lrIt->second], false, true,
                 [&](const TensorView &v) { setScalar(v, lr); });
  if (stepIt != impl->hyperIds.end())
    impl->onHost(
        impl->views[stepIt->second], false, true,
        [&](const TensorView &v) { setScalar(v, static_cast<double>(t)); });
  if (!run(error, trace))
    return false;
  TensorView lossView = output("loss");
  if (!lossView.data || lossView.numElements() != 1) {
    error = "the training plan has no scalar output 'loss'";
    return false;
  }
  loss = getScalar(lossView);
  steps = t;
  return true;
}

int64_t Executor::arenaBytes() const { return impl->program->arena_bytes(); }
int64_t Executor::stateBytes() const { return impl->program->state_bytes(); }
int64_t Executor::plannedBytes() const { return stateBytes() + arenaBytes(); }
int64_t Executor::peakBytes() const { return impl->memory.peakBytes(); }

} // namespace loom::rt
