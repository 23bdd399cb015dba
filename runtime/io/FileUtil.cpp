//===- FileUtil.cpp - Checked binary file reading and writing -------------===//

#include "runtime/io/FileUtil.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace loom::rt {

static std::string systemError(const char *what) {
  return std::string(what) + ": " + std::strerror(errno);
}

InputFile::InputFile(const std::string &path, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error = systemError("cannot open");
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    error = "cannot open: it is a directory";
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    error = "cannot open: it is not a regular file";
    return;
  }
  file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = systemError("cannot open");
    return;
  }
  fileSize = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (file)
    std::fclose(file);
}

bool InputFile::read(void *out, size_t count, std::string &error) {
  if (count == 0)
    return true;
  size_t got = std::fread(out, 1, count, file);
  if (got == count)
    return true;
  if (std::ferror(file))
    error = systemError("read failed");
  else
    error = "truncated: the file ended while reading (it changed while being "
            "read?)";
  return false;
}

bool InputFile::read(std::string &out, uint64_t count, std::string &error) {
  out.assign(static_cast<size_t>(count), '\0');
  return read(out.data(), out.size(), error);
}

OutputFile::OutputFile(const std::string &path, std::string &error) {
  file = std::fopen(path.c_str(), "wb");
  if (!file)
    error = systemError("cannot open for writing");
}

OutputFile::~OutputFile() {
  if (file)
    std::fclose(file);
}

bool OutputFile::write(const void *data, size_t count, std::string &error) {
  if (count == 0)
    return true;
  if (std::fwrite(data, 1, count, file) == count)
    return true;
  error = systemError("write failed");
  return false;
}

bool OutputFile::close(std::string &error) {
  if (!file) {
    error = "write failed: the file is not open";
    return false;
  }
  std::FILE *f = file;
  file = nullptr;
  bool flushed = std::fflush(f) == 0;
  int flushErrno = errno;
  bool closed = std::fclose(f) == 0;
  if (flushed && closed)
    return true;
  if (!flushed)
    errno = flushErrno;
  error = systemError("write failed");
  return false;
}

bool readWholeFile(const std::string &path, std::string &out,
                   std::string &error) {
  InputFile file(path, error);
  return file.ok() && file.read(out, file.size(), error);
}

} // namespace loom::rt
