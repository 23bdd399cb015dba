//===- Executor.h - Load, validate and run a plan ---------------*- C++ -*-===//
//
// The executor takes a plan, checks it completely (format version, values,
// memory plan, every instruction's shapes, the backend's support for every
// op), initialises parameters and constants, and then runs steps: inputs in,
// instructions in order through the backend's kernels, outputs out. Any
// problem is an error message naming the value or the instruction and its
// source location, never a crash.
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
/// optimizer state (`kind` is the plan::Value kind).
struct StateInfo {
  std::string name;
  int kind;
  int32_t value;
};

class Executor {
public:
  /// Validates `plan` for `backend` and allocates its memory; nullptr and
  /// `error` set if the plan is invalid.
  static std::unique_ptr<Executor> create(plan::Plan plan, Backend &backend,
                                          std::string &error);
  ~Executor();

  const std::vector<IOInfo> &inputs() const { return inputInfo; }
  const std::vector<IOInfo> &outputs() const { return outputInfo; }

  /// Copies `value` into the named input, converting between float types
  /// and between integer types. Fails on an unknown name or a shape or
  /// element-type mismatch.
  bool setInput(const std::string &name, const TensorView &value,
                std::string &error);
  /// Fills every input with seeded random data: floats uniform in [-1, 1),
  /// integers in [0, bound) where bound is the smallest axis they index
  /// (or 16).
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
  /// Parameters, buffers and optimizer state, and their storage.
  const std::vector<StateInfo> &state() const { return stateInfo; }
  TensorView stateTensor(const StateInfo &s) const;

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
