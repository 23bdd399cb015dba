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
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_H
#define LOOM_RUNTIME_EXECUTOR_H

#include "runtime/Backend.h"
#include "runtime/Tensor.h"
#include "runtime/plan.pb.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::rt {

class Communicator;
class TraceWriter;

/// The plan format version this runtime reads.
inline constexpr uint32_t kPlanFormatVersion = 1;

/// Parses a serialized plan. Fails on anything that is not a plan of a
/// version this runtime reads.
std::optional<plan::Plan>
parsePlan(std::string_view bytes, const std::string &name, std::string &error);
std::optional<plan::Plan> readPlanFile(const std::string &path,
                                       std::string &error);

struct IOInfo {
  std::string name;
  DType dtype;
  Shape shape;
};

/// A persistent tensor a checkpoint holds: a parameter, a buffer or an
/// optimizer state (`kind` is the plan::Value kind), with its global type.
struct StateInfo {
  std::string name;
  int kind;
  int32_t value;
  DType dtype = DType::F32;
  Shape shape;
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

  /// Inputs with their GLOBAL shapes.
  const std::vector<IOInfo> &inputs() const { return inputInfo; }
  /// Outputs (replicated: local and global shapes agree).
  const std::vector<IOInfo> &outputs() const { return outputInfo; }

  /// This executor's rank and the plan's device count (1 for a plan
  /// without a mesh); the communicator: the one given, else a private
  /// one-rank one for a one-device mesh with collectives, else nullptr.
  int64_t rank() const;
  int64_t numRanks() const;
  Communicator *communicator() const;

  /// Copies this rank's shard of `value`, the GLOBAL tensor, into the named
  /// input, converting between float types and between integer types.
  /// Fails on an unknown name or a shape or element-type mismatch.
  bool setInput(const std::string &name, const TensorView &value,
                std::string &error);
  /// Fills every input with seeded random data: floats uniform in [-1, 1),
  /// integers in [0, bound) where bound is the smallest axis they index
  /// (or 16). The global tensor is drawn and then sliced, so every rank
  /// sees the data a single-device run with the same seed sees.
  void setRandomInputs(uint64_t seed);

  /// Runs one step. With a trace, records one span per instruction.
  bool run(std::string &error, TraceWriter *trace = nullptr);

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
  /// Parameters, buffers and optimizer state (global types), and this
  /// rank's storage of them (local shards).
  const std::vector<StateInfo> &state() const { return stateInfo; }
  TensorView stateTensor(const StateInfo &s) const;
  /// Assembles the global value of `s` in `global` from every rank's shard
  /// (summing partial sums). A collective: every rank calls it for the same
  /// tensors in the same order, and every rank receives the result. For a
  /// single-device plan, a copy.
  bool gatherState(const StateInfo &s, HostBuffer &global,
                   std::string &error) const;
  /// Sets this rank's shard of `s` from its global value `global` (a float
  /// type converts to another). Local: no other rank takes part.
  bool setStateFromGlobal(const StateInfo &s, const TensorView &global,
                          std::string &error);

  /// Per collective instruction of the plan: how often it ran, the bytes
  /// this rank received from other ranks in it (counted by the
  /// communicator), its time, and the bytes per device the compiler's
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

  int64_t arenaBytes() const;
  int64_t stateBytes() const;

private:
  Executor() = default;
  struct Impl;
  std::unique_ptr<Impl> impl;
  std::vector<IOInfo> inputInfo, outputInfo;
  std::vector<StateInfo> stateInfo;
  int64_t steps = 0;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_EXECUTOR_H
