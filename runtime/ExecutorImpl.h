//===- ExecutorImpl.h - The executor's state, for its files -----*- C++ -*-===//
//
// Private to the executor: included only by its .cpp files, which each
// implement one part of Executor and Executor::Impl:
//
//   Executor.cpp              create(): validate, allocate, load; accessors
//   ExecutorValidate.cpp      parsePlan, and the checks of a plan for a
//                             rank: mesh, values, outputs, aliases, memory
//   ExecutorInstructions.cpp  each instruction checked and made a Step; the
//                             blocks each send and recv moves
//   ExecutorMemory.cpp        the memory account, state and arena, loading
//                             parameters, host copies of device memory
//   ExecutorRun.cpp           a step: inputs, kernels, collectives (and
//                             their overlap with kernels), send and recv,
//                             outputs
//   ExecutorTraining.cpp      trainStep, the learning rate, and the state a
//                             checkpoint reads and writes
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTORIMPL_H
#define LOOM_RUNTIME_EXECUTORIMPL_H

#include "runtime/Executor.h"
#include "runtime/ExecutorMemory.h"
#include "runtime/Pipeline.h"
#include "runtime/PlanLayout.h"
#include "runtime/comm/Collectives.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/Trace.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::rt {

/// Whether values of `kind` live in the state (across steps) rather than in
/// the step arena.
inline bool isPersistent(int kind) {
  return kind == plan::Value::PARAMETER || kind == plan::Value::BUFFER ||
         kind == plan::Value::CONSTANT || kind == plan::Value::OPTIMIZER_STATE;
}

/// "instruction #i (op at location)": how errors name an instruction.
std::string describeInstruction(int64_t index, const plan::Instruction &inst);

/// `value` converted to element type `dtype` (between float types or
/// between integer types), or false and `error` naming `what`.
bool convertTensor(const TensorView &value, DType dtype, HostBuffer &out,
                   const std::string &what, std::string &error);

struct Executor::Impl {
  plan::Plan plan;
  /// Which ranks run which stage; this rank's stage and its program.
  StageMap stages;
  int32_t stage = 0;
  const plan::Program *program = nullptr;
  Backend *backend = nullptr;
  /// The plan's mesh; unset for a plan without one (a single device).
  std::optional<layout::Mesh> mesh;
  /// Whether parameters and buffers must carry their initial data (not
  /// for validatePlan: a simulated plan has none, and nothing runs it).
  bool requireData = true;
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
  /// What the model sees of a padded persistent value (logical_shape); the
  /// global shape for every other.
  std::vector<Shape> logicalShapes;
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
    /// A kernel: where its first result lies in the global tensor.
    GlobalBlock block;
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
  /// This rank's shard of value `id`.
  /// The global ranks of this stage that differ from this one only on the
  /// axes `layout` sums over, in rank order: those holding the addends of
  /// this rank's block of a partial sum.
  RankGroup partialGroup(const layout::TensorLayout &layout) const;
  /// Loads this rank's shard `mine` of the padded value `v` (into `view`)
  /// from the logical value the plan defines (its data or its seeded
  /// initializer), computing or copying this rank's block alone. "" or the
  /// error.
  std::string loadPaddedBlock(const plan::Value &v, const Shard &mine,
                              const TensorView &view);
  Shard shard(int32_t id) const {
    return shardOf(layouts[id], stageMesh(), globalShapes[id],
                   stages.shardRank(rank));
  }

  //===--- Validation (ExecutorValidate.cpp, ExecutorInstructions.cpp) ----===//

  /// The type a value declares: element type, local and global shapes and
  /// their bytes, and the layout relating them.
  struct ValueType {
    DType dtype = DType::F32;
    Shape shape, global, logical;
    int64_t bytes = 0, globalBytes = 0, logicalBytes = 0;
    layout::TensorLayout layout;
  };
  /// What validate() learns of every value of the program: whether it is
  /// defined yet, and the instructions that define it and use it last.
  struct Liveness {
    std::vector<bool> defined;
    std::vector<int> definedAt, lastUse;
  };
  /// Before the stages are known: the mesh, and this rank's place in it.
  std::string validateMesh();
  std::string checkRankContext(const RankContext &ctx);
  /// Checks this rank's stage's program, in this order, and records its
  /// values and steps.
  std::string validate();
  std::string validateValue(const plan::Value &v, std::vector<bool> &defined);
  std::string validateInstruction(int index,
                                  const std::vector<layout::MeshAxis> &axes,
                                  Liveness &live);
  std::string checkInPlaceUpdates(const Liveness &live) const;
  std::string checkOutputs(Liveness &live);
  std::string checkAliases(Liveness &live) const;
  std::string checkLocalShapes() const;
  std::string checkMemoryPlan(const Liveness &live) const;
  /// Finds the blocks every send and recv of this stage moves.
  std::string planMessages();
  /// The parts of validateValue.
  std::string readValueType(const plan::Value &v, const std::string &where,
                            ValueType &type) const;
  std::string checkValueStorage(const plan::Value &v, const std::string &where,
                                const ValueType &type) const;
  std::string checkInitialData(const plan::Value &v, const std::string &where,
                               const ValueType &type) const;
  /// The parts of validateInstruction and planMessages.
  std::string checkPointToPoint(Step &step) const;
  std::string checkStageAxisUnused(const Step &step) const;
  std::string checkScratch(const Step &step,
                           const std::vector<ops::TypeRef> &operands,
                           const std::vector<ops::TypeRef> &results) const;
  /// Finds the blocks a send or recv moves (messageBlocks) from its
  /// partner instruction `partner` of the peer stage.
  std::string planMessage(Step &step, int32_t partner) const;

  //===--- Memory (ExecutorMemory.cpp) ------------------------------------===//

  /// Allocates the state; load() fills it from the plan and lets the
  /// plan's data go; then allocateArena() allocates the step arena and
  /// points the values it holds there.
  std::string allocateState();
  std::string load();
  std::string allocateArena();
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
  TensorView hostView(int32_t id) const;
  /// Host memory for a message of `bytes` (see `staging`).
  unsigned char *stagingFor(size_t bytes);

  //===--- Running a step (ExecutorRun.cpp) -------------------------------===//

  /// Gives a plan with collectives its runner, its communicator (a private
  /// one-rank one where it has none) and the way it moves bytes.
  void setUpCollectives();
  /// Makes the kernels queued from now on wait for every collective in
  /// flight that `reads` may read or `writes` may write: read after write,
  /// write after read and write after write. With neither, waits for all.
  void orderAfterCollectives(const std::vector<const TensorView *> &reads,
                             const std::vector<const TensorView *> &writes,
                             bool all = false);
  /// Writes this rank's shard of the step's input `step` (global) into
  /// input value `id`: its micro-batch's rows, or all of it.
  void writeInput(int32_t id, const TensorView &step);
  /// Runs a kernel or a collective. With `traced` (a trace times every
  /// instruction) a kernel is synchronized and no collective left in flight.
  std::string runKernel(const Step &step, bool traced);
  std::string runCollective(const Step &step, CollectiveStat &stat,
                            bool traced);
  /// Runs a send or a recv, adds the message to the instruction's trace
  /// `args`, and a recv's wait for it to `waited`.
  std::string runMessage(const Step &step, TraceWriter *trace,
                         TraceWriter::Args &args, double &waited);
  /// Runs a send or a recv; a recv reports how long it waited, and from
  /// when (trace time).
  std::string send(const Step &step);
  std::string recv(const Step &step, TraceWriter *trace, double &waitSeconds,
                   double &waitStart);

  //===--- State (ExecutorTraining.cpp) -----------------------------------===//

  /// gatherState among the ranks of this rank's stage.
  /// gatherInStage, then a padded value's logical block.
  bool gatherLogical(const StateInfo &s, HostBuffer &global,
                     std::string &error) const;
  bool gatherInStage(const StateInfo &s, HostBuffer &global,
                     std::string &error) const;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_EXECUTORIMPL_H
