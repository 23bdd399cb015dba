//===- Checkpoint.h - Save and restore training state -----------*- C++ -*-===//
//
// A checkpoint is a directory: manifest.json (format, the steps taken, and
// per tensor its name, kind, file, element type and shape) and one .npy file
// per parameter, buffer and optimizer state. Restoring checks every tensor
// against the plan, so a checkpoint of another model or shape is an error.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CHECKPOINT_H
#define LOOM_RUNTIME_CHECKPOINT_H

#include "runtime/Executor.h"

#include <string>

namespace loom::rt {

bool saveCheckpoint(const Executor &exec, const std::string &dir,
                    std::string &error);
bool loadCheckpoint(Executor &exec, const std::string &dir, std::string &error);

/// The file name a tensor has in a checkpoint ("fc1.weight::m" ->
/// "fc1.weight__m.npy").
std::string checkpointFileName(const std::string &name);

} // namespace loom::rt

#endif // LOOM_RUNTIME_CHECKPOINT_H
