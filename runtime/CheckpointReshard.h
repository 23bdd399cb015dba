//===- CheckpointReshard.h - A checkpoint for another plan ------*- C++ -*-===//
//
// A sharded checkpoint records where each block lies in its global tensor,
// so any plan of the same model can resume from it (Checkpoint.h). This
// file computes, from a plan alone, which blocks a run of it saves, and
// rewrites a checkpoint into exactly those blocks offline: `loom reshard`.
// Without a plan, the checkpoint is rewritten as whole tensors, one file
// each (what numpy or a single device reads most simply).
//
// The conversion streams: one block of the output is read (from the input
// shards it overlaps) and written at a time, so it needs the memory of one
// block, never of the model.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CHECKPOINTRESHARD_H
#define LOOM_RUNTIME_CHECKPOINTRESHARD_H

#include "common/plan/plan.pb.h"
#include "runtime/Pipeline.h"

#include <string>
#include <vector>

namespace loom::rt {

/// One block a checkpoint holds of a tensor.
struct SavedBlock {
  std::vector<int64_t> offsets;
  Shape shape;
};

/// A persistent tensor of a plan and the blocks a run of the plan saves of
/// it: per rank of its stage that holds its value as the first replica, its
/// shard less the padding optimizer sharding adds (empty blocks left out),
/// each block once, in rank order. A tensor several stages hold is the
/// first stage's.
struct SavedTensor {
  PlanStateValue value;
  std::vector<SavedBlock> blocks;
};

/// The tensors and blocks a sharded checkpoint of a run of `plan` holds
/// (of a partial sum, the blocks of the ranks that hold its value: it is
/// summed before it is saved). "" or what is wrong with the plan (its mesh,
/// stages or layouts).
std::string savedTensors(const plan::Plan &plan,
                         std::vector<SavedTensor> &tensors);

/// What reshardCheckpoint did.
struct ReshardSummary {
  int64_t step = 0;
  int64_t tensors = 0, files = 0;
  /// Optimizer states of the input that the plan has not (another
  /// optimizer), left out.
  std::vector<std::string> dropped;
  /// The step directory written.
  std::string dir;
};

/// Reads the checkpoint at `from` (a root or a step directory) and writes it
/// into the checkpoint root `to`, atomically, at the same step: as the
/// blocks a run of `plan` saves, or with `plan` null as whole tensors. With
/// a plan, every tensor the plan needs must be in the input with its type
/// and shape, and every parameter and buffer of the input in the plan
/// (else it is another model). False and `error` (naming the file, the
/// tensor) on failure; the root is then left as it was.
bool reshardCheckpoint(const std::string &from, const plan::Plan *plan,
                       const std::string &to, ReshardSummary &summary,
                       std::string &error);

} // namespace loom::rt

#endif // LOOM_RUNTIME_CHECKPOINTRESHARD_H
