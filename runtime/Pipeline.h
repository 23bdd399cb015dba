//===- Pipeline.h - The stages of a pipelined plan --------------*- C++ -*-===//
//
// A pipelined plan holds one program per stage; the mesh's first axis
// enumerates the stages and no layout names it (plan.proto's Stage). An
// executor loads only its own stage's program, but its interface speaks of
// the whole plan: inputs() lists every stage's inputs, state() every stage's
// persistent tensors, and random inputs are drawn as a single-device run of
// the whole batch draws them. This file reads what the executor needs of
// the other stages from the plan alone, checking what it reads (a corrupt
// plan is an error, never a crash): which stage each rank runs and its
// peers, the plan-wide inputs and state, and whether every recv of a stage
// has its send.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PIPELINE_H
#define LOOM_RUNTIME_PIPELINE_H

#include "compiler/layout/Mesh.h"
#include "runtime/Tensor.h"
#include "runtime/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::rt {

/// Which ranks run which stage.
struct StageMap {
  /// ranks[s]: the global ranks of stage s in the plan's order (peers are
  /// matched by position in it).
  std::vector<std::vector<int64_t>> ranks;
  /// Per global rank: its stage and its position in that stage's ranks.
  std::vector<int32_t> stageOf;
  std::vector<int64_t> positionOf;

  int32_t numStages() const { return static_cast<int32_t>(ranks.size()); }
  /// The rank of `peerStage` at `rank`'s position.
  int64_t peer(int64_t rank, int32_t peerStage) const {
    return ranks[peerStage][positionOf[rank]];
  }
  /// The rank whose shards `rank` holds under any layout of the plan: the
  /// one with the same coordinates on every mesh axis but the stage axis,
  /// and 0 there (`rank` itself for a single-stage plan). Layouts never
  /// name the stage axis, so both hold the same blocks; this one is also a
  /// first replica wherever `rank` is one within its stage.
  int64_t shardRank(int64_t rank) const {
    return numStages() > 1 ? rank % static_cast<int64_t>(ranks[0].size())
                           : rank;
  }
};

/// Checks the plan's stages against its mesh (nullptr: one device) and maps
/// them: indices 0, 1, 2, ... in order; every rank of the mesh in exactly
/// one stage; as many ranks in every stage; and, with several stages, a
/// mesh whose first axis has one coordinate per stage, stage s running on
/// the ranks whose coordinate on it is s. A single-stage plan that lists
/// no ranks runs on all of them. "" or what is wrong.
std::string mapStages(const plan::Plan &plan, const layout::Mesh *mesh,
                      StageMap &map);

/// One input name of the whole plan.
struct PlanInput {
  std::string name;
  DType dtype = DType::F32;
  /// The global shape of the step's input: a micro-batched input's value
  /// holds one micro-batch, so its dimension 0 is multiplied by the
  /// schedule's micro-batches.
  Shape shape;
  /// Whether its values hold micro-batches (Value.micro_batch is set).
  bool microBatched = false;
  /// Integers are drawn at random in [0, randomBound): the smallest axis a
  /// `gather` (its table's) or a cross-entropy (its classes) of any stage
  /// indexes with one of its values, else 16.
  int64_t randomBound = 16;
};

/// The schedule's micro-batches (at least 1).
int64_t microBatches(const plan::Plan &plan);

/// The inputs of every stage, by name, in the order the stages first list
/// them. Values that share a name must agree on element type and global
/// shape and either all hold micro-batches or none; a micro-batch index lies
/// in [0, micro-batches) and needs a dimension 0 to select rows on, and
/// every micro-batch of a micro-batched name has a value in some stage (so
/// the step's input is at most as many times one value as the plan has
/// values). "" or what is wrong, naming the stage and value.
std::string collectPlanInputs(const plan::Plan &plan,
                              std::vector<PlanInput> &inputs);

/// One persistent non-constant value of some stage (a parameter, buffer or
/// optimizer state): its stage, id there, kind, name, element type and
/// global shape.
struct PlanStateValue {
  int32_t stage = 0;
  int32_t value = 0;
  int kind = 0;
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

/// Every stage's persistent non-constant values, stage by stage in id
/// order. "" or what is wrong with one (an unknown element type, an invalid
/// global shape).
std::string collectPlanState(const plan::Plan &plan,
                             std::vector<PlanStateValue> &state);

/// Tags of plan messages lie below this; the runtime's own messages between
/// stages (gathered state, Executor::gatherState) use the tags from here.
inline constexpr int64_t kReservedTagBase = int64_t(1) << 62;

/// Checks that every send and recv of stage `stage` has its partner: per
/// peer stage and tag, the peer sends (receives) as many messages to (from)
/// this stage as this stage receives (sends), and the k-th of them has the
/// local type of this stage's k-th. Without this a recv could wait forever.
/// Assumes this stage's sends and recvs were validated (attributes, peer
/// stage in range); the peers' are read defensively. "" or what is wrong,
/// naming the instruction.
std::string checkMessages(const plan::Plan &plan, int32_t stage);

} // namespace loom::rt

#endif // LOOM_RUNTIME_PIPELINE_H
