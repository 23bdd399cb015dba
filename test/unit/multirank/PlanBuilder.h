//===- PlanBuilder.h - Hand-built partitioned plans for tests ---*- C++ -*-===//
//
// Builds plan::Plan protos by hand the way the partitioner emits them: one
// SPMD program (or one per pipeline stage), every value with its local
// type, global type and layout, collectives with mesh axis indices. Every
// value gets its own bytes (no storage reuse), so any instruction order is
// a valid memory plan. Also runs a plan on N ranks of the threads
// communicator, one thread, backend and executor per rank.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_MULTIRANK_PLANBUILDER_H
#define LOOM_TEST_UNIT_MULTIRANK_PLANBUILDER_H

#include "common/layout/Mesh.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"
#include "common/plan/plan.pb.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::test {

/// Per dimension the mesh axis names splitting it.
using DimAxes = std::vector<std::vector<std::string>>;

class PlanBuilder {
public:
  /// A plan on a mesh of `axes` (name, size); none: a single device.
  explicit PlanBuilder(std::vector<std::pair<std::string, int64_t>> axes = {});

  /// Adds a value with its GLOBAL shape and layout; its local shape is
  /// derived from the mesh. Returns its id.
  int32_t value(plan::Value::Kind kind, const std::string &name,
                rt::Shape global, DimAxes dims = {},
                std::vector<std::string> partial = {},
                rt::DType dtype = rt::DType::F32);
  int32_t input(const std::string &name, rt::Shape global, DimAxes dims = {}) {
    return value(plan::Value::INPUT, name, std::move(global), std::move(dims));
  }
  /// A parameter holding `data` (the global tensor, row-major).
  int32_t parameter(const std::string &name, rt::Shape global,
                    const std::vector<float> &data, DimAxes dims = {},
                    std::vector<std::string> partial = {});
  /// A parameter with a seeded uniform initializer.
  int32_t seededParameter(const std::string &name, rt::Shape global,
                          DimAxes dims, double low, double high, uint64_t seed);
  int32_t temp(rt::Shape global, DimAxes dims = {},
               std::vector<std::string> partial = {}) {
    return value(plan::Value::TEMPORARY, "", std::move(global), std::move(dims),
                 std::move(partial));
  }

  /// Appends an instruction; returns it for adding attributes.
  plan::Instruction &instruction(const std::string &op,
                                 std::vector<int32_t> operands,
                                 std::vector<int32_t> results,
                                 const std::string &location = "");
  static void setInt(plan::Instruction &inst, const std::string &name,
                     int64_t v);
  static void setInts(plan::Instruction &inst, const std::string &name,
                      std::vector<int64_t> v);
  static void setBool(plan::Instruction &inst, const std::string &name, bool v);

  /// Shorthands for the collectives (axis indices, as plans hold them).
  int32_t allGather(int32_t in, int64_t axis, int64_t dim, rt::Shape global,
                    DimAxes dims = {}, std::vector<std::string> partial = {});
  int32_t allReduce(int32_t in, std::vector<int64_t> axes, rt::Shape global,
                    DimAxes dims = {}, std::vector<std::string> partial = {});
  int32_t reduceScatter(int32_t in, int64_t axis, int64_t dim, rt::Shape global,
                        DimAxes dims = {},
                        std::vector<std::string> partial = {});

  void output(const std::string &name, int32_t id);
  void training(const std::string &optimizer, double lr);

  //===--- Pipelines ----------------------------------------------------===//

  /// Makes the plan pipelined over the mesh's first axis: one stage per
  /// coordinate on it, stage s on the ranks whose coordinate is s, each with
  /// an empty program; `microBatches` under `kind`. Later calls build stage
  /// 0's program until useStage.
  void pipeline(plan::Schedule::Kind kind = plan::Schedule::GPIPE,
                int32_t microBatches = 1);
  /// Makes the plan pipelined over stages on submeshes of their own, stage
  /// s on `meshes[s]` and the next ranks in order; the plan's mesh is one
  /// axis counting them all. Values of a stage are laid out on its mesh.
  void pipelineOnSubmeshes(
      const std::vector<std::vector<std::pair<std::string, int64_t>>> &meshes,
      plan::Schedule::Kind kind = plan::Schedule::GPIPE,
      int32_t microBatches = 1);
  /// The stage whose program later calls build.
  void useStage(int32_t stage) { stage_ = stage; }
  /// An input value holding micro-batch `k` of `name` (`global`: one
  /// micro-batch's global shape).
  int32_t microBatchInput(const std::string &name, int32_t k, rt::Shape global,
                          DimAxes dims = {}, rt::DType dtype = rt::DType::F32);
  /// send `value` to `peerStage` with `tag`; returns the instruction.
  plan::Instruction &send(int32_t value, int64_t peerStage, int64_t tag);
  /// A fresh temporary of `global` received from `peerStage` with `tag`.
  int32_t recv(rt::Shape global, int64_t peerStage, int64_t tag,
               DimAxes dims = {});

  /// The plan so far, with the scratch its collectives need (see
  /// common/plan/CollectiveScratch.h) added on top of each stage's arena
  /// where not set yet.
  plan::Plan &plan();
  plan::Program &program() {
    return *plan_.mutable_stages(stage_)->mutable_program();
  }

private:
  /// The mesh the current stage's layouts name (nullptr: one device).
  const layout::Mesh *meshOfStage() const;

  plan::Plan plan_;
  std::optional<layout::Mesh> mesh_;
  std::vector<layout::Mesh> stageMeshes_;
  int32_t stage_ = 0;
};

/// A row-major float tensor with values i * scale + offset.
std::vector<float> iota(int64_t n, float scale = 1, float offset = 0);

/// The elements of an f32 tensor.
std::vector<float> values(const rt::TensorView &v);
/// An f32 view of `data` with `shape`.
rt::TensorView viewOf(std::vector<float> &data, rt::Shape shape);
/// a [n, k] times b [k, m], row-major, in double (exact for the tests'
/// small multiples of powers of two).
std::vector<double> matmul(const std::vector<double> &a,
                           const std::vector<double> &b, int64_t n, int64_t k,
                           int64_t m);
std::vector<double> toDouble(const std::vector<float> &v);

/// One rank of a multi-rank run.
struct RankRun {
  int64_t rank = 0;
  rt::Communicator *comm = nullptr;
  rt::Backend *backend = nullptr;
  std::unique_ptr<rt::Executor> exec;
  std::string error;
};

/// Creates an executor of `plan` for each of `n` ranks (each with its own
/// threads communicator and one-thread CPU backend), then runs `body` on
/// `n` threads, one per rank, and joins them. Returns "" or the first
/// creation error, prefixed with its rank (then `body` does not run).
std::string runRanks(const plan::Plan &plan, int64_t n,
                     const std::function<void(RankRun &)> &body);

/// Every tensor of the checkpoint at `path`, whole (assembled from its
/// shards), by name; `files` (when given) the number of shard files. Empty
/// and `error` set when it cannot be read.
std::map<std::string, std::vector<float>>
checkpointTensors(const std::string &path, std::string &error,
                  int *files = nullptr);

} // namespace loom::test

#endif // LOOM_TEST_UNIT_MULTIRANK_PLANBUILDER_H
