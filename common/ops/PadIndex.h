//===- PadIndex.h - Where loom.pad reads each element from ------*- C++ -*-===//
//
// The index arithmetic of `loom.pad` and `loom.pad_grad`, written once for
// the CPU kernels and, compiled by nvcc, for the CUDA kernels: along one
// dimension, which input element a padded position copies (or none, for a
// constant border), and which padded positions copy a given input element
// (the gradient sums them). Plain C++17, no LLVM: the runtime includes it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_PADINDEX_H
#define LOOM_COMMON_OPS_PADINDEX_H

#include <cstdint>
#include <string_view>

#ifdef __CUDACC__
#define LOOM_PAD_HOST_DEVICE __host__ __device__
#else
#define LOOM_PAD_HOST_DEVICE
#endif

namespace loom::ops::pad {

/// What fills a padded border (the op's `mode`).
enum class PadMode : int { Constant, Reflect, Edge };

/// The mode named `name`; false if it is none of "constant", "reflect",
/// "edge".
inline bool parsePadMode(std::string_view name, PadMode &mode) {
  if (name == "constant")
    mode = PadMode::Constant;
  else if (name == "reflect")
    mode = PadMode::Reflect;
  else if (name == "edge")
    mode = PadMode::Edge;
  else
    return false;
  return true;
}

/// The modes, as messages list them.
inline constexpr const char *kPadModeNames = "constant, reflect, edge";

/// The input index that padded position `i` copies along a dimension of
/// `size` elements padded by `low` in front, or -1 where a constant border
/// is written. The op's rule guarantees reflect pads smaller than `size`
/// and a non-empty padded dimension in edge mode.
LOOM_PAD_HOST_DEVICE inline int64_t padSource(PadMode mode, int64_t i,
                                              int64_t low, int64_t size) {
  int64_t j = i - low;
  if (j >= 0 && j < size)
    return j;
  if (mode == PadMode::Constant)
    return -1;
  if (mode == PadMode::Edge)
    return j < 0 ? 0 : size - 1;
  return j < 0 ? -j : 2 * (size - 1) - j; // reflect
}

/// The padded positions that copy input element `j`, as up to three ranges
/// [begin[k], end[k]) in increasing order (empty ranges have begin == end):
/// its own place, and the border places that mirror (reflect) or repeat
/// (edge) it. Sums over them in this order are the same on every backend.
LOOM_PAD_HOST_DEVICE inline void padPreimage(PadMode mode, int64_t j,
                                             int64_t low, int64_t high,
                                             int64_t size, int64_t begin[3],
                                             int64_t end[3]) {
  for (int k = 0; k < 3; ++k)
    begin[k] = end[k] = 0;
  begin[1] = low + j;
  end[1] = low + j + 1;
  if (mode == PadMode::Reflect) {
    if (j >= 1 && j <= low) { // left border position low - j
      begin[0] = low - j;
      end[0] = low - j + 1;
    }
    if (j <= size - 2 && j >= size - 1 - high) { // right border
      begin[2] = low + 2 * (size - 1) - j;
      end[2] = begin[2] + 1;
    }
  } else if (mode == PadMode::Edge) {
    if (j == 0) {
      begin[0] = 0;
      end[0] = low;
    }
    if (j == size - 1) {
      begin[2] = low + size;
      end[2] = low + size + high;
    }
  }
}

} // namespace loom::ops::pad

#endif // LOOM_COMMON_OPS_PADINDEX_H
