//===- Executor.h - Load, validate and run a plan ---------------*- C++ -*-===//
//
// The executor takes a plan, checks it completely (format version, mesh,
// values and their layouts, memory plan, every instruction's shapes, the
// backend's support for every op), initialises parameters and constants, and
// then runs steps: inputs in, instructions in order through the backend's
// kernels (collectives through the communicator), outputs out. Any problem
// is an error message naming the value or the instruction and its source
// location, never a crash.
//
// A partitioned plan (a mesh of N > 1 devices) runs as N executors, one per
// rank, each on its own local shards. The executor's interface speaks of
// GLOBAL tensors: inputs() and state() report global shapes, setInput takes
// the global tensor and keeps this rank's shard, and gatherState assembles a
// global tensor from every rank's shard. Parameters are sliced from the
// plan's global data (or computed from their seeded initializer on the
// global index) at load time, so every rank starts from exactly its part of
// the single-device run's weights.
//
// A pipelined plan (several stages) runs each rank's stage only: the
// executor loads and runs the program of the stage whose ranks contain it,
// and exchanges activations with the other stages through the
// communicator's send and recv. Its interface still speaks of the whole
// plan: inputs() and state() list every stage's, setInput takes the whole
// step's input (every micro-batch) and keeps what this stage holds of it,
// and gatherState gives every rank any stage's tensor.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_H
#define LOOM_RUNTIME_EXECUTOR_H

#include "runtime/Backend.h"
#include "common/plan/PlanFormat.h"
#include "runtime/Tensor.h"
#include "common/plan/plan.pb.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::rt {

class Communicator;
class TraceWriter;

/// Parses a serialized plan. Fails on anything that is not a plan of a
/// version this runtime reads, and (with `requireChecksum`, as every reader
/// of plans from outside asks) on a plan whose CRC-32 is missing or does not
/// match its contents (common/plan/PlanChecksum.h).
std::optional<plan::Plan> parsePlan(std::string_view bytes,
                                    const std::string &name, std::string &error,
                                    bool requireChecksum = true);
std::optional<plan::Plan> readPlanFile(const std::string &path,
                                       std::string &error);

/// Checks every stage of `plan` as Executor::create checks its rank's (the
/// mesh, the stages, every value and instruction, the memory plan), against
/// `backend`'s kernels: "" or the first problem. For readers that do not
/// run the plan (loom explain).
std::string validatePlan(const plan::Plan &plan, Backend &backend);

struct IOInfo {
  std::string name;
  DType dtype;
  Shape shape;
};

/// A persistent tensor a checkpoint holds: a parameter, a buffer or an
/// optimizer state (`kind` is the plan::Value kind), with its global type.
/// `value` is its id in the program of stage `stage`.
struct StateInfo {
  std::string name;
  int kind;
  int32_t value;
  DType dtype = DType::F32;
  Shape shape;
  int32_t stage = 0;
};

/// The time of steps on one rank: the wall time of Executor::run, and the
/// part of it spent in recv waiting for another stage (the pipeline
/// bubble, with the copy of each received message).
struct StepTiming {
  double seconds = 0, recvWaitSeconds = 0;
  /// The steps these times add up.
  int64_t steps = 0;
  /// recvWaitSeconds / seconds, or 0 before any step.
  double bubbleFraction() const {
    return seconds > 0 ? recvWaitSeconds / seconds : 0;
  }
};

/// Which rank of a partitioned plan an executor runs and how it reaches the
/// others. A plan whose mesh has more than one device needs a communicator
/// whose world is exactly the mesh; `rank` must then equal comm->rank().
/// Without a communicator the plan must fit one device (rank 0).
struct RankContext {
  int64_t rank = 0;
  Communicator *comm = nullptr;
};

class Executor {
public:
  /// Validates `plan` for `backend` and for the rank `ctx` describes,
  /// allocates its memory and loads this rank's shards of the parameters;
  /// nullptr and `error` set if the plan is invalid or does not fit `ctx`.
  /// Collects nothing from other ranks, so ranks may be created in any
  /// order.
  static std::unique_ptr<Executor> create(plan::Plan plan, Backend &backend,
                                          std::string &error,
                                          RankContext ctx = {});
  ~Executor();

  /// The inputs of the whole plan (every stage's), each once, with the
  /// GLOBAL shape of the step's input: a micro-batched input's dimension 0
  /// counts every micro-batch.
  const std::vector<IOInfo> &inputs() const { return inputInfo; }
  /// This stage's outputs (replicated: local and global shapes agree).
  /// Every stage of a pipelined training plan has "loss".
  const std::vector<IOInfo> &outputs() const { return outputInfo; }

  /// This executor's rank and the plan's device count (1 for a plan
  /// without a mesh); the communicator: the one given, else a private
  /// one-rank one for a one-device mesh with collectives, else nullptr.
  int64_t rank() const;
  int64_t numRanks() const;
  Communicator *communicator() const;
  /// The stage this rank runs, the plan's stage count, and the global ranks
  /// of stage `s` (in the plan's order).
  int32_t stage() const;
  int32_t numStages() const;
  const std::vector<int64_t> &stageRanks(int32_t s) const;

  /// Copies this rank's shard of `value`, the GLOBAL tensor of the step,
  /// into the values of the named input: for a micro-batched input, each
  /// value's rows of it. Converts between float types and between integer
  /// types. Fails on a name no stage has or a shape or element-type
  /// mismatch; a name only other stages have is checked and ignored.
  bool setInput(const std::string &name, const TensorView &value,
                std::string &error);
  /// Fills every input with seeded random data: floats uniform in [-1, 1),
  /// integers in [0, bound) where bound is the smallest axis they index
  /// (or 16). For every input of the plan in name order, the global tensor
  /// of the step is drawn and then sliced, so every rank of every stage
  /// sees the data a single-device run of the whole batch with the same
  /// seed sees.
  void setRandomInputs(uint64_t seed);

  /// Runs one step. With a trace, records one span per instruction (send
  /// and recv in category "p2p", and each recv's wait for its message as
  /// a "bubble" span in category "idle"), and one "step" span with the
  /// stage, peak and planned memory and the step's bubble.
  bool run(std::string &error, TraceWriter *trace = nullptr);
  /// The times of the last run() and of all of them so far.
  const StepTiming &lastStepTiming() const;
  const StepTiming &totalStepTiming() const;

  /// The named output of the last step (valid until the next run).
  TensorView output(const std::string &name) const;

  //===--- Training ---------------------------------------------------===//

  /// Whether the plan is a training step (it has a `Training` config).
  bool isTraining() const;
  /// Training steps taken so far (restored by a checkpoint).
  int64_t stepsTaken() const { return steps; }
  void setStepsTaken(int64_t n) { steps = n; }
  /// The learning rate of step `t` (1-based) under the plan's schedule.
  double learningRate(int64_t t) const;
  /// Sets lr and step for the next step, runs it, and returns its loss.
  bool trainStep(std::string &error, TraceWriter *trace, double &loss,
                 double &lr);
  /// Parameters, buffers and optimizer state of every stage (global
  /// types), and this rank's storage of those of its stage (local shards;
  /// an empty view for another stage's).
  const std::vector<StateInfo> &state() const { return stateInfo; }
  TensorView stateTensor(const StateInfo &s) const;
  /// Assembles the global value of `s` in `global` from every rank's shard
  /// (summing partial sums). A collective: every rank of the world calls it
  /// for the same tensors in the same order, and every rank receives the
  /// result. For a single-device plan, a copy. In a pipelined plan the
  /// ranks of the tensor's stage gather it among themselves, and the
  /// stage's first rank sends it to every rank of the other stages; every
  /// rank first waits at a barrier, so that no message of the plan is still
  /// on its way (tags: Pipeline.h's kReservedTagBase and up).
  bool gatherState(const StateInfo &s, HostBuffer &global,
                   std::string &error) const;
  /// Sets this rank's shard of `s` from its global value `global` (a float
  /// type converts to another); does nothing for another stage's tensor.
  /// Local: no other rank takes part.
  bool setStateFromGlobal(const StateInfo &s, const TensorView &global,
                          std::string &error);

  /// The block of `s`'s global value this rank stores: its shard, less the
  /// padding optimizer sharding added (so it may be empty). What a sharded
  /// checkpoint saves and loads rank by rank.
  struct StateBlock {
    std::vector<int64_t> offsets;
    Shape shape;
    /// Whether this rank stores the block's values: false for a partial
    /// sum's addend on a rank with a coordinate other than 0 on a summed
    /// axis (it is loaded as zeros).
    bool holdsValue = true;
    /// Whether this rank's copy is the one a save writes: it holds the
    /// value and is the first replica (coordinate 0 on the axes the layout
    /// neither splits nor sums over).
    bool saves = true;
    /// Whether the layout is a partial sum: the block's value is the sum of
    /// the addends the ranks along the summed axes hold.
    bool partial = false;
  };
  /// `s`'s block on this rank; nullopt for another stage's tensor.
  std::optional<StateBlock> stateBlock(const StateInfo &s) const;
  /// Copies this rank's block of `s` (of stateBlock's shape) to the host.
  /// For a partial sum, the value: a collective of the ranks of the stage
  /// (each sums its block with the ranks that differ from it on the summed
  /// axes alone, in rank order); every rank of the stage calls it for the
  /// same tensors in the same order.
  bool readStateBlock(const StateInfo &s, HostBuffer &block,
                      std::string &error) const;
  /// Sets this rank's shard of `s` from `block`, the values of its
  /// stateBlock (a float type converts to another). Local.
  bool setStateBlock(const StateInfo &s, const TensorView &block,
                     std::string &error);

  /// Per collective instruction of the plan: how often it ran, the bytes
  /// this rank received from other ranks in it (counted by the
  /// communicator), its time (host time: for a collective queued to
  /// overlap the kernels after it, on a device communicator without a
  /// trace, only the time to queue it), and the bytes per device the compiler's
  /// layout math predicted for one run (-1 when the plan does not say).
  struct CollectiveStat {
    int32_t instruction = 0;
    std::string op, location;
    Shape shape;
    int64_t predictedBytes = -1;
    int64_t calls = 0;
    int64_t bytesReceived = 0;
    double seconds = 0;
  };
  const std::vector<CollectiveStat> &collectiveStats() const;

  /// This stage's memory plan: its step arena and its state, in bytes.
  int64_t arenaBytes() const;
  int64_t stateBytes() const;
  /// stateBytes() + arenaBytes(): what the plan says this rank needs.
  int64_t plannedBytes() const;
  /// The most memory this executor has held at once: the high-water mark
  /// of its allocations through the backend (state, arena, scratch of a
  /// device communicator) and of its own scratch (collectives, host copies
  /// of messages on a device backend, gathered state), in bytes requested.
  int64_t peakBytes() const;

private:
  Executor() = default;
  struct Impl;
  friend std::string validatePlan(const plan::Plan &plan, Backend &backend);
  std::unique_ptr<Impl> impl;
  std::vector<IOInfo> inputInfo, outputInfo;
  std::vector<StateInfo> stateInfo;
  int64_t steps = 0;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_EXECUTOR_H
