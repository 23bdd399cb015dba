//===- CheckpointStore.h - Checkpoint directories on disk -------*- C++ -*-===//
//
// How a checkpoint lies on disk, apart from what it holds (Checkpoint.h
// fills and reads it from an Executor). `--save ROOT` makes ROOT a
// checkpoint root:
//
//     ROOT/step-00000012/manifest.json   format 2: the step, and per tensor
//                                        its name, kind, file, dtype, shape,
//                                        size in bytes and CRC-32
//     ROOT/step-00000012/fc1.weight.npy  one .npy file per tensor
//     ROOT/latest -> step-00000012       a symbolic link to the newest
//
// A save is atomic: the step directory is written under a temporary name
// (ROOT/.tmp-...), every file and the directory are flushed to disk
// (fsync), the manifest is written last, the directory is renamed into
// place (an existing one of the same step is exchanged with it, renameat2
// RENAME_EXCHANGE, so that the name never goes missing), and `latest` is
// replaced through a rename of a new link. A process killed at any moment
// leaves `latest` naming a complete checkpoint: the previous one or the new
// one. Temporary entries a killed save left are removed by the next save.
//
// Reading verifies: the manifest is parsed strictly, a file must have the
// size and CRC-32 the manifest gives, so a checkpoint whose files were
// swapped, truncated, or mixed from two saves is refused naming the file.
// A format 1 checkpoint (a directory holding manifest.json and its files,
// without checksums, as Loom wrote before) is still read.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_CHECKPOINTSTORE_H
#define LOOM_RUNTIME_IO_CHECKPOINTSTORE_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::rt {

/// One tensor of a checkpoint's manifest.
struct CheckpointEntry {
  std::string name;
  /// "parameter", "buffer" or "optimizer_state".
  std::string kind;
  /// The file, relative to the checkpoint's directory (a plain name).
  std::string file;
  std::string dtype;
  Shape shape;
  /// Format 2: the file's size and CRC-32 (zlib's).
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// A checkpoint opened for reading.
struct CheckpointManifest {
  /// The step directory (ROOT/step-N, or a format 1 checkpoint's directory).
  std::string dir;
  int format = 2;
  int64_t step = 0;
  std::vector<CheckpointEntry> tensors;

  /// The entry named `name`, or null.
  const CheckpointEntry *find(const std::string &name) const;
};

/// Opens the checkpoint at `path`: a step directory (it holds
/// manifest.json) or a checkpoint root (its `latest`). Reads and checks the
/// manifest; nullopt and `error` (naming the file) on failure.
std::optional<CheckpointManifest> openCheckpoint(const std::string &path,
                                                 std::string &error);

/// Reads the tensor of `entry`, verifying its size and checksum (format 2)
/// and that the file holds the dtype and shape the manifest gives.
std::optional<HostBuffer> readCheckpointTensor(const CheckpointManifest &ckpt,
                                               const CheckpointEntry &entry,
                                               std::string &error);

/// Writes one checkpoint into a root, atomically (see above). Calls:
/// begin, add per tensor, commit. The first failure is kept (failed(),
/// error()) and every later call does nothing, so that a caller in a
/// collective can keep calling in step with its peers.
class CheckpointWriter {
public:
  /// Creates ROOT when missing, removes what killed saves left, and opens
  /// the temporary step directory of `step`.
  void begin(const std::string &root, int64_t step);
  /// Writes `t` as the tensor `name` of `kind`.
  void add(const std::string &name, const std::string &kind,
           const TensorView &t);
  /// Writes the manifest, renames the directory into place, points
  /// `latest` at it and, with keepLast > 0, removes all but the newest
  /// keepLast step directories. Returns the step directory, or "" on
  /// failure.
  std::string commit(int64_t keepLast);
  /// Removes the temporary directory of a save that will not be committed.
  void abandon();

  bool failed() const { return !failure.empty(); }
  const std::string &error() const { return failure; }

private:
  void fail(std::string message);

  std::string root, tmp, stepName;
  int64_t step = 0;
  std::vector<CheckpointEntry> written;
  std::string failure;
};

/// The file name a tensor has in a checkpoint ("fc1.weight::m" ->
/// "fc1.weight__m.npy").
std::string checkpointFileName(const std::string &name);

/// The directory name of a step's checkpoint: "step-00000012".
std::string checkpointStepName(int64_t step);

} // namespace loom::rt

#endif // LOOM_RUNTIME_IO_CHECKPOINTSTORE_H
