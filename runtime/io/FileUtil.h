//===- FileUtil.h - Checked binary file reading and writing -----*- C++ -*-===//
//
// Small RAII wrappers over stdio used by the readers and writers in
// runtime/io: every failure becomes an error string with the system's
// reason, never an exception or a crash. Errors do not name the file; the
// callers prefix the path.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_FILEUTIL_H
#define LOOM_RUNTIME_IO_FILEUTIL_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace loom::rt {

/// A regular file opened for reading, with its size known up front.
class InputFile {
public:
  /// Opens `path`; on failure ok() is false and `error` says why.
  InputFile(const std::string &path, std::string &error);
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  bool ok() const { return file != nullptr; }
  /// The file's size in bytes when it was opened.
  uint64_t size() const { return fileSize; }
  /// Reads exactly `count` bytes into `out`; false and `error` if fewer come.
  bool read(void *out, size_t count, std::string &error);
  /// Reads exactly `count` bytes, replacing the contents of `out`.
  bool read(std::string &out, uint64_t count, std::string &error);

private:
  std::FILE *file = nullptr;
  uint64_t fileSize = 0;
};

/// A file opened (created or truncated) for writing.
class OutputFile {
public:
  /// Opens `path`; on failure ok() is false and `error` says why.
  OutputFile(const std::string &path, std::string &error);
  /// Closes the file if close() was not called, ignoring errors.
  ~OutputFile();
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;

  bool ok() const { return file != nullptr; }
  bool write(const void *data, size_t count, std::string &error);
  /// Flushes and closes; false and `error` if the data did not reach the
  /// file (a full disk, for one).
  bool close(std::string &error);

private:
  std::FILE *file = nullptr;
};

/// Reads the whole of the regular file `path` into `out`. On failure returns
/// false and sets `error` (without the path).
bool readWholeFile(const std::string &path, std::string &out,
                   std::string &error);

} // namespace loom::rt

#endif // LOOM_RUNTIME_IO_FILEUTIL_H
