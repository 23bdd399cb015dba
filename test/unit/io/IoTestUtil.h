//===- IoTestUtil.h - Temp dirs and Python for I/O tests -------*- C++ -*-===//

#ifndef LOOM_TEST_UNIT_IO_IOTESTUTIL_H
#define LOOM_TEST_UNIT_IO_IOTESTUTIL_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace loom::rt::testing {

/// A fresh directory under the test temp dir, removed with its contents.
class TempDir {
public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "loom-io-XXXXXX";
    if (::mkdtemp(pattern.data()))
      dir = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir.empty())
      std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  bool ok() const { return !dir.empty(); }
  std::string path(const std::string &name) const { return dir + "/" + name; }
  const std::string &str() const { return dir; }

private:
  std::string dir;
};

constexpr const char *kPython = "/usr/bin/python3";

/// Whether /usr/bin/python3 exists and can import numpy (checked once).
inline bool havePythonNumpy() {
  static const bool have = [] {
    if (::access(kPython, X_OK) != 0)
      return false;
    int status =
        std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1");
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
  return have;
}

/// Whether /usr/bin/python3 exists (for scripts that need only the
/// standard library).
inline bool havePython() { return ::access(kPython, X_OK) == 0; }

/// Writes `script` to `dir` and runs it with /usr/bin/python3 in `dir`,
/// with warnings as errors. Returns the exit code, or -1 when it did not
/// exit normally.
inline int runPython(const TempDir &dir, const std::string &script) {
  std::string file = dir.path("script.py");
  {
    std::ofstream out(file);
    out << script;
  }
  std::string command =
      "cd '" + dir.str() + "' && " + kPython + " -W error '" + file + "'";
  int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

/// Writes `bytes` to `path` as is.
inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

} // namespace loom::rt::testing

#define LOOM_REQUIRE_NUMPY()                                                   \
  do {                                                                         \
    if (!::loom::rt::testing::havePythonNumpy())                               \
      GTEST_SKIP() << "needs /usr/bin/python3 with numpy";                     \
  } while (0)

#endif // LOOM_TEST_UNIT_IO_IOTESTUTIL_H
