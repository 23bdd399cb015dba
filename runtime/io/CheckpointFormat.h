//===- CheckpointFormat.h - Checkpoint files, internal to io -----*- C++ -*-===//
//
// The pieces of the on-disk format (CheckpointStore.h) that the reader
// (CheckpointStore.cpp) and the writer (CheckpointWriter.cpp) share: durable
// writes, the manifest's JSON, rank lists. Internal to runtime/io.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_CHECKPOINTFORMAT_H
#define LOOM_RUNTIME_IO_CHECKPOINTFORMAT_H

#include "runtime/io/CheckpointStore.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace loom::rt::checkpoint_io {

/// strerror's message for `err`.
std::string systemMessage(int err);
/// The CRC-32 of `size` bytes (zlib's).
uint32_t crc32Of(const void *data, size_t size);
/// Flushes the file or directory at `path` to disk; "" or why not.
std::string syncPath(const std::string &path, bool directory);
/// Writes `bytes` to `path` and flushes them to disk; "" or why not.
std::string writeDurably(const std::string &path, const std::string &bytes);
/// Reads a JSON file of at most 256 MiB; nullopt and `error` (naming the
/// file) when it cannot be read or parsed.
std::optional<nlohmann::json> readJsonFile(const std::string &file,
                                           std::string &error);
/// Whether `name` is a step directory's name ("step-00000012"), and its step.
bool isStepName(const std::string &name, int64_t &step);
/// The name of rank `rank`'s list of shards in a temporary directory.
std::string rankListName(int64_t rank);
/// A manifest entry as JSON (format 3).
nlohmann::ordered_json entryJson(const CheckpointEntry &e);
/// "" if `e`'s shards tile its tensor exactly; else what is wrong.
std::string checkTiling(const CheckpointEntry &e);
/// Reads one manifest entry of a manifest of `format`; "" or what is wrong.
std::string readEntry(const nlohmann::json &j, int format, CheckpointEntry &e);

} // namespace loom::rt::checkpoint_io

#endif // LOOM_RUNTIME_IO_CHECKPOINTFORMAT_H
