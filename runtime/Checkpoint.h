//===- Checkpoint.h - Save and restore training state -----------*- C++ -*-===//
//
// A checkpoint is a directory: manifest.json (format, the steps taken, and
// per tensor its name, kind, file, element type and shape) and one .npy file
// per parameter, buffer and optimizer state. Restoring checks every tensor
// against the plan, so a checkpoint of another model or shape is an error.
//
// Checkpoints hold GLOBAL tensors: a partitioned run gathers every tensor
// from its ranks' shards, so its checkpoint has exactly the files of a
// single-device run of the same model, and either run can resume from the
// other's checkpoint (each rank keeps its own shard when loading). A
// pipelined run is no different: every stage's tensors are gathered to rank
// 0, and each rank loads only its stage's.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CHECKPOINT_H
#define LOOM_RUNTIME_CHECKPOINT_H

#include "runtime/Executor.h"

#include <string>

namespace loom::rt {

/// Writes `exec`'s state to `dir`. With several ranks this is a collective:
/// every rank calls it, every tensor is gathered, and rank 0 alone writes
/// the files (to storage all ranks share, for MPI across nodes). Every
/// rank returns false if rank 0 could not write.
bool saveCheckpoint(const Executor &exec, const std::string &dir,
                    std::string &error);
/// Restores `exec`'s state from `dir`: every rank reads the files (of every
/// stage, so that all ranks check the same) and keeps its shard of its
/// stage's. Reads and checks everything first, so that a bad checkpoint
/// changes nothing. Involves no other rank.
bool loadCheckpoint(Executor &exec, const std::string &dir, std::string &error);

/// The manifest's name of a state kind (a plan::Value kind): "parameter",
/// "buffer" or "optimizer_state".
const char *stateKindName(int kind);

/// The file name a tensor has in a checkpoint ("fc1.weight::m" ->
/// "fc1.weight__m.npy").
std::string checkpointFileName(const std::string &name);

} // namespace loom::rt

#endif // LOOM_RUNTIME_CHECKPOINT_H
