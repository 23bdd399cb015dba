//===- Pipeline.h - The stages of a pipelined plan --------------*- C++ -*-===//
//
// A pipelined plan holds one program per stage (plan.proto's Stage): either
// all on one submesh, the mesh's first axis enumerating the stages and no
// layout naming it, or each on its own submesh (Stage.mesh), of any size
// and shape. An executor loads only its own stage's program, but its
// interface speaks of the whole plan: inputs() lists every stage's inputs,
// state() every stage's persistent tensors, and random inputs are drawn as
// a single-device run of the whole batch draws them. This file reads what
// the executor needs of the other stages from the plan alone, checking what
// it reads (a corrupt plan is an error, never a crash): which stage each
// rank runs and on which mesh, which blocks of a message each rank sends
// and receives, the plan-wide inputs and state, and whether every recv of a
// stage has its send.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PIPELINE_H
#define LOOM_RUNTIME_PIPELINE_H

#include "common/layout/Mesh.h"
#include "common/layout/TensorLayout.h"
#include "runtime/Tensor.h"
#include "common/plan/plan.pb.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::rt {

/// Which ranks run which stage, and the mesh each stage's layouts name.
struct StageMap {
  /// ranks[s]: the global ranks of stage s in the plan's order (with stage
  /// meshes, rank i of the stage's mesh is ranks[s][i]).
  std::vector<std::vector<int64_t>> ranks;
  /// Per global rank: its stage and its position in that stage's ranks.
  std::vector<int32_t> stageOf;
  std::vector<int64_t> positionOf;
  /// Per stage, its own submesh (plan.proto's Stage.mesh) when the plan
  /// gives them; empty when every stage's layouts name the plan's mesh.
  std::vector<layout::Mesh> meshes;

  int32_t numStages() const { return static_cast<int32_t>(ranks.size()); }
  bool ownMeshes() const { return !meshes.empty(); }
  /// The mesh stage `s`'s layouts and collectives name: its own, else the
  /// plan's `planMesh` (nullptr: one device).
  const layout::Mesh *meshOf(int32_t s, const layout::Mesh *planMesh) const {
    return ownMeshes() ? &meshes[s] : planMesh;
  }
  /// The rank of that mesh whose shards `rank` holds under any layout of
  /// its stage. With stage meshes, its position in its stage. Otherwise the
  /// one with the same coordinates on every mesh axis but the stage axis,
  /// and 0 there (`rank` itself for a single-stage plan): layouts never
  /// name the stage axis, so both hold the same blocks, and this one is
  /// also a first replica wherever `rank` is one within its stage.
  int64_t shardRank(int64_t rank) const {
    if (ownMeshes())
      return positionOf[rank];
    return numStages() > 1 ? rank % static_cast<int64_t>(ranks[0].size())
                           : rank;
  }
};

/// Checks the plan's stages against its mesh (nullptr: one device) and maps
/// them: indices 0, 1, 2, ... in order; every rank of the mesh in exactly
/// one stage. With stage meshes (on every stage or none), each stage lists
/// as many ranks as its mesh has devices. Without, every stage has as many
/// ranks and, with several stages, the mesh's first axis has one coordinate
/// per stage, stage s running on the ranks whose coordinate on it is s. A
/// single-stage plan that lists no ranks runs on all of them. "" or what is
/// wrong.
std::string mapStages(const plan::Plan &plan, const layout::Mesh *mesh,
                      StageMap &map);

/// A block of a message between stages: the global ranks that send and
/// receive it, and where it lies in the global tensor.
struct MessageBlock {
  int64_t from = 0, to = 0;
  std::vector<int64_t> offsets;
  Shape shape;
};

/// One end of a message: its stage and the value's layout over the mesh
/// that stage's layouts name.
struct MessageEnd {
  int32_t stage = 0;
  const layout::TensorLayout *layout = nullptr;
};

/// The blocks that move a tensor of `globalShape` from stage `from` to
/// stage `to` (plan.proto's send and recv): every rank of `to` receives
/// each block of its shard from one rank of `from` that holds it, the rank
/// at its own position when that one does, else the holders in turn. A
/// partial sum moves only between stages on one mesh with one layout, shard
/// by shard. "" or why the layouts cannot be connected.
std::string messageBlocks(const StageMap &map, const layout::Mesh *planMesh,
                          const MessageEnd &from, const MessageEnd &to,
                          const Shape &globalShape,
                          std::vector<MessageBlock> &blocks);

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
/// global shape (a padded value's logical shape, what checkpoints hold).
struct PlanStateValue {
  int32_t stage = 0;
  int32_t value = 0;
  int kind = 0;
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  /// Its global shape as stored: padded by optimizer sharding, else `shape`.
  Shape storedShape;
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
/// global type of this stage's k-th. Without this a recv could wait
/// forever. Assumes this stage's sends and recvs were validated
/// (attributes, peer stage in range); the peers' are read defensively.
/// Records in `partners`, per send or recv instruction of the stage, its
/// partner's instruction index in the peer stage. "" or what is wrong,
/// naming the instruction.
std::string checkMessages(const plan::Plan &plan, int32_t stage,
                          std::map<int32_t, int32_t> &partners);

} // namespace loom::rt

#endif // LOOM_RUNTIME_PIPELINE_H
