//===- Npy.h - Reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// The .npy format (versions 1.0, 2.0 and 3.0) for the runtime's host tensors:
// inputs, expected outputs and parameters exchanged with NumPy. No MLIR or
// LLVM here.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_NPY_H
#define LOOM_RUNTIME_IO_NPY_H

#include "runtime/Tensor.h"

#include <optional>
#include <string>
#include <string_view>

namespace loom::rt {

/// Reads the .npy file at `path`. Supported element types, little-endian and
/// in C order: '<f4' (F32), '<f2' (F16), '<i4' (I32), '<i8' (I64), '|b1'
/// (Bool, any non-zero byte read as 1), and '<f8', which is converted to F32
/// (rounding to nearest; values beyond the F32 range become infinities).
/// Anything else (Fortran order, big-endian or other element types, object
/// or structured arrays, a truncated file, a header whose shape does not
/// match the data) returns std::nullopt and sets `error` to a message that
/// names the file and what is wrong.
std::optional<HostBuffer> readNpy(const std::string &path, std::string &error);

/// Parses the complete contents of a .npy file held in memory, with the same
/// rules as readNpy. `origin` names the source in error messages.
std::optional<HostBuffer> parseNpy(std::string_view bytes, std::string &error,
                                   const std::string &origin = "<memory>");

/// Writes `t` to `path` as a version 1.0 .npy file (2.0 only when the header
/// would not fit), in C order: F32 as '<f4', F16 as '<f2', I32 as '<i4', I64
/// as '<i8' and Bool as '|b1'. NumPy has no bfloat16, so BF16 is widened
/// exactly to '<f4'. Returns false and sets `error` (naming the file) when
/// the view is malformed or the file cannot be written.
bool writeNpy(const std::string &path, const TensorView &t, std::string &error);

/// Serializes `t` to the bytes writeNpy would write. Returns std::nullopt and
/// sets `error` when the view is malformed (a negative dimension, an element
/// count that overflows, or no data for a non-empty tensor).
std::optional<std::string> serializeNpy(const TensorView &t,
                                        std::string &error);

} // namespace loom::rt

#endif // LOOM_RUNTIME_IO_NPY_H
