//===- CheckpointStore.h - Checkpoint directories on disk -------*- C++ -*-===//
//
// How a checkpoint lies on disk, apart from what it holds (Checkpoint.h
// fills and reads it from an Executor). `--save ROOT` makes ROOT a
// checkpoint root:
//
//     ROOT/step-00000012/manifest.json   format 3: the step, and per tensor
//                                        its name, kind, dtype and global
//                                        shape, and its shards: per shard
//                                        its file, where its block starts
//                                        (offsets), its shape, and the
//                                        file's size in bytes and CRC-32
//     ROOT/step-00000012/fc1.weight.npy        a tensor in one shard
//     ROOT/step-00000012/fc2.weight@0-32.npy   a block of a sharded one
//     ROOT/latest -> step-00000012       a symbolic link to the newest
//
// A tensor's shards tile it exactly: every element lies in one block. A
// partitioned run saves each block from the rank that holds it, so no rank
// ever holds more than its own shards; a reader assembles any block of a
// tensor (another plan's shard) from the shards it overlaps.
//
// A save is atomic: the step directory is written under a temporary name
// (ROOT/.tmp-step-...), every file and the directory are flushed to disk
// (fsync), the manifest is written last, the directory is renamed into
// place (an existing one of the same step is exchanged with it, renameat2
// RENAME_EXCHANGE, so that the name never goes missing), and `latest` is
// replaced through a rename of a new link. A process killed at any moment
// leaves `latest` naming a complete checkpoint: the previous one or the new
// one. Temporary entries a killed save left are removed by the next save.
// With several writers (ranks), the committing one prepares the temporary
// directory, every rank writes its shards and a list of them, and the
// committing one merges the lists into the manifest, checking that every
// tensor is tiled, before the rename.
//
// Reading verifies: the manifest is parsed strictly (every tensor tiled by
// its shards, every file a plain name used once), and a file must have the
// size, CRC-32, dtype and shape the manifest gives, so a checkpoint whose
// files were swapped, truncated, or mixed from two saves is refused naming
// the file. Checkpoints of the earlier formats (1: a directory holding
// manifest.json and one file per tensor, without checksums; 2: one
// checksummed file per tensor) are still read.
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

/// One file of a checkpoint: the block of its tensor at `offsets` of
/// shape `shape`.
struct CheckpointShard {
  /// The file, relative to the checkpoint's directory (a plain name).
  std::string file;
  std::vector<int64_t> offsets;
  Shape shape;
  /// The file's size and CRC-32 (zlib's); format 1 has neither.
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// One tensor of a checkpoint's manifest.
struct CheckpointEntry {
  std::string name;
  /// "parameter", "buffer" or "optimizer_state".
  std::string kind;
  std::string dtype;
  /// The global shape.
  Shape shape;
  /// Blocks that tile the tensor (one for formats 1 and 2).
  std::vector<CheckpointShard> shards;
};

/// A checkpoint opened for reading.
struct CheckpointManifest {
  /// The step directory (ROOT/step-N, or a format 1 checkpoint's directory).
  std::string dir;
  int format = 3;
  int64_t step = 0;
  std::vector<CheckpointEntry> tensors;

  /// The entry named `name`, or null.
  const CheckpointEntry *find(const std::string &name) const;
  /// The entry named `name`; in a first-format checkpoint, whose manifest
  /// need not list every tensor, one for its file, expected to hold `dtype`
  /// and `shape`. nullopt when there is none.
  std::optional<CheckpointEntry> entryOf(const std::string &name, DType dtype,
                                         const Shape &shape) const;
};

/// Opens the checkpoint at `path`: a step directory (it holds
/// manifest.json) or a checkpoint root (its `latest`). Reads and checks the
/// manifest; nullopt and `error` (naming the file) on failure.
std::optional<CheckpointManifest> openCheckpoint(const std::string &path,
                                                 std::string &error);

/// Reads the block of `entry`'s tensor at `offsets` of shape `shape` from
/// the shards it overlaps, verifying each file read (size and checksum,
/// dtype and shape). BF16 tensors are stored as f32 files, and read so.
std::optional<HostBuffer>
readCheckpointBlock(const CheckpointManifest &ckpt,
                    const CheckpointEntry &entry,
                    const std::vector<int64_t> &offsets, const Shape &shape,
                    std::string &error);
/// Reads the whole tensor of `entry` (readCheckpointBlock of all of it).
std::optional<HostBuffer> readCheckpointTensor(const CheckpointManifest &ckpt,
                                               const CheckpointEntry &entry,
                                               std::string &error);

/// Writes one checkpoint into a root, atomically (see above). The first
/// failure is kept (failed(), error()) and every later call does nothing,
/// so that a caller in a collective can keep calling in step with its
/// peers.
///
/// One writer: begin, add (or addShard for every block) per tensor,
/// commit. Several ranks: the committing rank calls prepare; then every
/// rank join, addShard per block it owns, finish; then, once every rank
/// has finished, the committing rank commitRanks.
class CheckpointWriter {
public:
  /// Creates ROOT when missing, removes what killed saves left, and creates
  /// the temporary directory of `step`.
  void prepare(const std::string &root, int64_t step);
  /// Writes into the temporary directory prepare made, as rank `rank`.
  void join(const std::string &root, int64_t step, int64_t rank);
  /// Writes `block`, the block at `offsets` of the tensor `name` of `kind`
  /// whose global shape is `shape` (and element type block's).
  void addShard(const std::string &name, const std::string &kind,
                const Shape &shape, const std::vector<int64_t> &offsets,
                const TensorView &block);
  /// Writes this rank's list of the shards it wrote, flushed to disk.
  void finish();
  /// Merges the lists of ranks 0 .. ranks-1 into the manifest (checking
  /// that every tensor is tiled and agrees between ranks), writes it,
  /// renames the directory into place, points `latest` at it and, with
  /// keepLast > 0, removes all but the newest keepLast step directories.
  /// Returns the step directory, or "" on failure.
  std::string commitRanks(int64_t keepLast, int64_t ranks);
  /// Removes the temporary directory of a save that will not be committed.
  void abandon();

  /// One writer: prepare and join as rank 0; a whole tensor; finish and
  /// commitRanks of one rank.
  void begin(const std::string &root, int64_t step);
  void add(const std::string &name, const std::string &kind,
           const TensorView &t);
  std::string commit(int64_t keepLast);

  bool failed() const { return !failure.empty(); }
  const std::string &error() const { return failure; }

private:
  void fail(std::string message);

  std::string root, tmp, stepName;
  int64_t step = 0, rank = 0;
  std::vector<CheckpointEntry> written;
  std::string failure;
};

/// The file name of a block of the tensor `name` at `offsets`:
/// "fc1.weight::m" at 0, 32 -> "fc1.weight__m@0-32.npy". A whole tensor is
/// given no offsets, and its file no suffix ("fc1.weight__m.npy").
std::string checkpointFileName(const std::string &name,
                               const std::vector<int64_t> &offsets = {});

/// The element type of the files of a tensor of element type `name` (a
/// manifest's dtype or dtypeName's): itself, but f32 for bf16 (.npy has no
/// bf16); nullopt for a name that is no element type.
std::optional<DType> storedDType(const std::string &name);

/// The directory name of a step's checkpoint: "step-00000012".
std::string checkpointStepName(int64_t step);

} // namespace loom::rt

#endif // LOOM_RUNTIME_IO_CHECKPOINTSTORE_H
