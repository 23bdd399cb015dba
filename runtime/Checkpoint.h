//===- Checkpoint.h - Save and restore training state -----------*- C++ -*-===//
//
// A checkpoint holds an Executor's state: every parameter, buffer and
// optimizer state, and the steps taken. How it lies on disk (a root with
// one directory per saved step, a `latest` link, a manifest with a CRC-32
// per file, atomic saves) is CheckpointStore.h's. Restoring checks every
// tensor against the plan and its checksum, so a checkpoint of another
// model or shape, or a damaged or mixed one, is an error naming the file.
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
#include "runtime/io/CheckpointStore.h"

#include <string>

namespace loom::rt {

/// Saves `exec`'s state as the checkpoint of its step in the root `root`,
/// atomically; with keepLast > 0, only the newest keepLast checkpoints of
/// the root remain. With several ranks this is a collective: every rank
/// calls it, every tensor is gathered, and rank 0 alone writes the files
/// (to storage all ranks share, for MPI across nodes). Every rank returns
/// false if rank 0 could not write. On success `savedDir` (when given) is
/// the step directory written.
bool saveCheckpoint(const Executor &exec, const std::string &root,
                    std::string &error, int64_t keepLast = 0,
                    std::string *savedDir = nullptr);
/// Restores `exec`'s state from the checkpoint at `path` (a root, whose
/// latest is read, or a step directory): every rank reads the files (of
/// every stage, so that all ranks check the same) and keeps its shard of
/// its stage's. Reads and checks everything first, so that a bad
/// checkpoint changes nothing. Involves no other rank.
bool loadCheckpoint(Executor &exec, const std::string &path,
                    std::string &error);

/// The manifest's name of a state kind (a plan::Value kind): "parameter",
/// "buffer" or "optimizer_state".
const char *stateKindName(int kind);

} // namespace loom::rt

#endif // LOOM_RUNTIME_CHECKPOINT_H
