//===- NpyHeader.h - The preamble and header of .npy files ------*- C++ -*-===//
//
// Parsing and formatting of the part of a .npy file before the data: the
// magic string, the version, the header length and the Python dict literal
// describing the array. Internal to runtime/io; the public API is Npy.h.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_NPYHEADER_H
#define LOOM_RUNTIME_IO_NPYHEADER_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom::rt::npy {

/// Magic, two version bytes and the widest (4-byte) header length.
constexpr size_t kMaxPreamble = 12;

/// The element types a .npy file may hold for us, as written in 'descr'.
enum class Elem { F4, F2, I4, I8, B1, F8 };

struct ElemInfo {
  Elem elem;
  const char *descr;
  size_t size;
  DType dtype; // what the runtime holds after reading
};

const ElemInfo &infoOf(Elem elem);

/// What a header says: element type, shape and where the data starts.
struct Layout {
  Elem elem = Elem::F4;
  Shape shape;
  size_t dataOffset = 0;
  uint64_t dataBytes = 0;
};

/// Checks the magic string and version at the start of `prefix` (at least
/// kMaxPreamble bytes, or the whole file if shorter) and returns the offset
/// of the data, i.e. the size of the preamble plus header. On failure sets
/// `error` (without the file name).
std::optional<size_t> dataOffsetOf(std::string_view prefix, std::string &error);

/// Parses the preamble and header in `head`, which holds exactly the first
/// dataOffsetOf(head) bytes of a file, and checks that the remaining
/// `dataSize` bytes of the file are exactly the data the header describes.
/// On failure sets `error` (without the file name).
std::optional<Layout> parseLayout(std::string_view head, uint64_t dataSize,
                                  std::string &error);

/// The version 1.0 preamble and header for `t` (2.0 if the header does not
/// fit), padded with spaces to a multiple of 64 bytes as NumPy does. BF16 is
/// described as '<f4'.
std::string formatHeader(const TensorView &t);

} // namespace loom::rt::npy

#endif // LOOM_RUNTIME_IO_NPYHEADER_H
