//===- InputLimits.h - Bounds on what Loom reads from files -----*- C++ -*-===//
//
// Every file Loom reads is bounded before it is parsed: its size (a path
// such as /dev/zero never ends, and a huge file is not a profile) and, for
// JSON, its nesting (parsers that recurse would overflow the stack on a
// file nested 100,000 deep). The limits are far above what Loom writes or
// any real input holds; exceeding one is an error naming the file and the
// limit, never a crash.
//
// Plain C++17, no LLVM: the compiler and the runtime share it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_TEXT_INPUTLIMITS_H
#define LOOM_COMMON_TEXT_INPUTLIMITS_H

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::limits {

/// The largest JSON file Loom reads (strategies, profiles, manifests).
constexpr uint64_t kMaxJsonBytes = uint64_t(256) << 20;
/// The deepest nesting of arrays and objects a JSON input may have.
constexpr int kMaxJsonDepth = 64;
/// The largest ONNX model file (protobuf's own limit is 2 GiB).
constexpr uint64_t kMaxModelBytes = uint64_t(2) << 30;

/// Reads the file at `path` whole into `out` if it holds at most `maxBytes`
/// bytes. Works on files whose size is not known up front (pipes, devices),
/// reading no more than maxBytes + 1 of them. On failure returns false and
/// sets `error` to why, without the path ("cannot open: No such file or
/// directory", "larger than ... bytes").
bool readBoundedFile(const std::string &path, uint64_t maxBytes,
                     std::string &out, std::string &error);

/// "" if the arrays and objects of the JSON `text` nest at most `maxDepth`
/// deep, else what is wrong ("nested deeper than 64 levels at byte 65").
/// Only counts brackets outside strings; the parser checks the rest.
std::string jsonNestingError(std::string_view text,
                             int maxDepth = kMaxJsonDepth);

} // namespace loom::limits

#endif // LOOM_COMMON_TEXT_INPUTLIMITS_H
