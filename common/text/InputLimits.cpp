//===- InputLimits.cpp - Bounds on what Loom reads from files -------------===//

#include "common/text/InputLimits.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace loom::limits {

bool readBoundedFile(const std::string &path, uint64_t maxBytes,
                     std::string &out, std::string &error) {
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> file(
      std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  out.clear();
  char chunk[1 << 16];
  while (true) {
    size_t n = std::fread(chunk, 1, sizeof chunk, file.get());
    if (n > 0 && out.size() + n > maxBytes) {
      error = "larger than " + std::to_string(maxBytes) +
              " bytes, the most Loom reads from such a file";
      return false;
    }
    out.append(chunk, n);
    if (n < sizeof chunk) {
      if (std::ferror(file.get())) {
        error = std::string("cannot read: ") + std::strerror(errno);
        return false;
      }
      return true;
    }
  }
}

std::string jsonNestingError(std::string_view text, int maxDepth) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{') {
      if (++depth > maxDepth)
        return "nested deeper than " + std::to_string(maxDepth) +
               " levels (at byte " + std::to_string(i) + ")";
    } else if (c == ']' || c == '}')
      --depth;
  }
  return "";
}

} // namespace loom::limits
