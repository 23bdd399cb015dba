//===- Checkpoint.h - Save and restore training state -----------*- C++ -*-===//
//
// A checkpoint holds an Executor's state: every parameter, buffer and
// optimizer state, and the steps taken. How it lies on disk (a root with
// one directory per saved step, a `latest` link, a manifest with a CRC-32
// per file, atomic saves) is CheckpointStore.h's. Restoring checks every
// tensor against the plan and its checksum, so a checkpoint of another
// model or shape, or a damaged or mixed one, is an error naming the file.
//
// Checkpoints are sharded: every rank writes the blocks of its stage's
// tensors it holds (the first replica of each, without the padding
// optimizer sharding adds), so nothing is gathered and no rank ever holds
// more than its own shards. The manifest records each block's place in the
// global tensor, so a checkpoint is independent of the plan that wrote it:
// any plan of the same model (another mesh, strategy, stage split, or one
// device) resumes from it, each rank reading the blocks its own shards
// overlap.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CHECKPOINT_H
#define LOOM_RUNTIME_CHECKPOINT_H

#include "runtime/Executor.h"
#include "runtime/io/CheckpointStore.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace loom::rt {

/// Saves `exec`'s state as the checkpoint of its step in the root `root`,
/// atomically; with keepLast > 0, only the newest keepLast checkpoints of
/// the root remain. With several ranks this is a collective: every rank
/// calls it and writes its own blocks into the root (storage all ranks
/// share, for MPI across nodes), and rank 0 commits the checkpoint once
/// every rank has written. Every rank returns false if any rank failed. On
/// success `savedDir` (when given) is the step directory written.
bool saveCheckpoint(const Executor &exec, const std::string &root,
                    std::string &error, int64_t keepLast = 0,
                    std::string *savedDir = nullptr);
/// Restores `exec`'s state from the checkpoint at `path` (a root, whose
/// latest is read, or a step directory): every rank checks the manifest
/// against the plan and reads the blocks of its own shards from the files
/// they overlap, verifying each. With several ranks this is a collective:
/// the ranks agree that all of them read their part before any changes its
/// state, so that a bad checkpoint changes nothing.
bool loadCheckpoint(Executor &exec, const std::string &path,
                    std::string &error);

/// "" if every parameter and buffer of `ckpt` is among `planNames` (else
/// it is a checkpoint of another model: the error names the tensor). Its
/// optimizer states the plan lacks (another optimizer) are listed in
/// `dropped` when given.
std::string checkForeignState(const CheckpointManifest &ckpt,
                              const std::set<std::string> &planNames,
                              std::vector<std::string> *dropped);
/// Finds the plan's tensor `name` (of `kind`, `dtype`, `shape`) in `ckpt`:
/// "" and `entry`, or the error (missing, or of another type or shape;
/// bf16 and f32 read each other).
std::string findState(const CheckpointManifest &ckpt, const std::string &name,
                      int kind, DType dtype, const Shape &shape,
                      std::optional<CheckpointEntry> &entry);

/// The manifest's name of a state kind (a plan::Value kind): "parameter",
/// "buffer" or "optimizer_state".
const char *stateKindName(int kind);

} // namespace loom::rt

#endif // LOOM_RUNTIME_CHECKPOINT_H
