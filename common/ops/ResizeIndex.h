//===- ResizeIndex.h - Where loom.resize reads each element -----*- C++ -*-===//
//
// The coordinate arithmetic of `loom.resize` and `loom.resize_grad`, written
// once for the CPU kernels and, compiled by nvcc, for the CUDA kernels:
// along one dimension, which input elements an output element reads and
// with what weights (its taps), and which output elements read a given
// input element (the gradient gathers them). It follows the ONNX reference
// (onnx/backend/test/case/node/resize.py): coordinates in double, the
// output length `scale * in` as a real number, neighbours outside the input
// clamped to its edge. Plain C++17, no LLVM: the runtime includes it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_RESIZEINDEX_H
#define LOOM_COMMON_OPS_RESIZEINDEX_H

#include <cmath>
#include <cstdint>
#include <string_view>

#ifdef __CUDACC__
#define LOOM_RESIZE_HOST_DEVICE __host__ __device__
#else
#define LOOM_RESIZE_HOST_DEVICE
#endif

namespace loom::ops::resize {

enum class Mode : int { Nearest, Linear, Cubic };
enum class Coord : int {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn
};
enum class Rounding : int { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

inline constexpr const char *kModeNames = "nearest, linear, cubic";
inline constexpr const char *kCoordNames =
    "half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
    "tf_half_pixel_for_nn";
inline constexpr const char *kRoundingNames =
    "round_prefer_floor, round_prefer_ceil, floor, ceil";

inline bool parseMode(std::string_view s, Mode &m) {
  if (s == "nearest")
    m = Mode::Nearest;
  else if (s == "linear")
    m = Mode::Linear;
  else if (s == "cubic")
    m = Mode::Cubic;
  else
    return false;
  return true;
}

inline bool parseCoord(std::string_view s, Coord &c) {
  if (s == "half_pixel")
    c = Coord::HalfPixel;
  else if (s == "pytorch_half_pixel")
    c = Coord::PytorchHalfPixel;
  else if (s == "align_corners")
    c = Coord::AlignCorners;
  else if (s == "asymmetric")
    c = Coord::Asymmetric;
  else if (s == "tf_half_pixel_for_nn")
    c = Coord::TfHalfPixelForNn;
  else
    return false;
  return true;
}

inline bool parseRounding(std::string_view s, Rounding &r) {
  if (s == "round_prefer_floor")
    r = Rounding::RoundPreferFloor;
  else if (s == "round_prefer_ceil")
    r = Rounding::RoundPreferCeil;
  else if (s == "floor")
    r = Rounding::Floor;
  else if (s == "ceil")
    r = Rounding::Ceil;
  else
    return false;
  return true;
}

/// One dimension of a resize: the input and output sizes and the scale
/// (`scale_num / scale_den`, as a double).
struct Axis {
  int64_t in;
  int64_t out;
  double scale;
};

/// The most taps of one output coordinate along one dimension (cubic).
inline constexpr int kMaxTaps = 4;

/// The op's modes, parsed, and the cubic's parameters.
struct Params {
  Mode mode;
  Coord coord;
  Rounding rounding;
  double cubicA = -0.75;
  bool excludeOutside = false;
};

/// The input coordinate of output coordinate `x` (ONNX's x_original).
LOOM_RESIZE_HOST_DEVICE inline double sourceCoord(Coord c, int64_t x,
                                                  const Axis &a) {
  double xd = static_cast<double>(x), length = a.scale * a.in;
  switch (c) {
  case Coord::AlignCorners:
    return length == 1 ? 0.0 : xd * (a.in - 1) / (length - 1);
  case Coord::Asymmetric:
    return xd / a.scale;
  case Coord::PytorchHalfPixel:
    return length == 1 ? -0.5 : (xd + 0.5) / a.scale - 0.5;
  case Coord::TfHalfPixelForNn:
    return (xd + 0.5) / a.scale;
  case Coord::HalfPixel:
  default:
    return (xd + 0.5) / a.scale - 0.5;
  }
}

LOOM_RESIZE_HOST_DEVICE inline int64_t clampIndex(int64_t i, int64_t n) {
  return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

/// Keys' cubic weights of the four neighbours left - 1 .. left + 2 of a
/// point `ratio` past `left` (ONNX's cubic_coeffs).
LOOM_RESIZE_HOST_DEVICE inline void cubicWeights(double A, double r,
                                                 double w[4]) {
  double r1 = r + 1, s = 1 - r, s1 = s + 1;
  w[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
  w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
  w[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
  w[3] = ((A * s1 - 5 * A) * s1 + 8 * A) * s1 - 4 * A;
}

/// The taps of output coordinate `x`: up to kMaxTaps input indices (clamped
/// into the input) and their weights, in increasing index order; returns
/// how many. Nearest has one tap, linear two, cubic four (several may be
/// the same index at an edge).
LOOM_RESIZE_HOST_DEVICE inline int taps(const Params &p, int64_t x,
                                        const Axis &a, int64_t index[kMaxTaps],
                                        double weight[kMaxTaps]) {
  double src = sourceCoord(p.coord, x, a), lo = std::floor(src);
  double ratio = src - lo;
  int64_t left = static_cast<int64_t>(lo);
  if (p.mode == Mode::Nearest) {
    bool up = false;
    if (ratio != 0) {
      switch (p.rounding) {
      case Rounding::RoundPreferFloor:
        up = ratio > 0.5;
        break;
      case Rounding::RoundPreferCeil:
        up = ratio >= 0.5;
        break;
      case Rounding::Floor:
        up = false;
        break;
      case Rounding::Ceil:
        up = true;
        break;
      }
    }
    index[0] = clampIndex(up ? left + 1 : left, a.in);
    weight[0] = 1;
    return 1;
  }
  if (p.mode == Mode::Linear) {
    index[0] = clampIndex(left, a.in);
    index[1] = clampIndex(left + 1, a.in);
    weight[0] = 1 - ratio;
    weight[1] = ratio;
    return 2;
  }
  cubicWeights(p.cubicA, ratio, weight);
  double total = 0;
  for (int k = 0; k < 4; ++k) {
    int64_t j = left - 1 + k;
    if (p.excludeOutside && (j < 0 || j >= a.in))
      weight[k] = 0;
    total += weight[k];
    index[k] = clampIndex(j, a.in);
  }
  if (p.excludeOutside)
    for (int k = 0; k < 4; ++k)
      weight[k] /= total;
  return 4;
}

/// The weight output coordinate `x` gives input index `j`: the sum of its
/// taps landing on `j` (0 if none).
LOOM_RESIZE_HOST_DEVICE inline double weightOf(const Params &p, int64_t x,
                                               const Axis &a, int64_t j) {
  int64_t index[kMaxTaps];
  double weight[kMaxTaps];
  int n = taps(p, x, a, index, weight);
  double w = 0;
  for (int k = 0; k < n; ++k)
    if (index[k] == j)
      w += weight[k];
  return w;
}

/// The output coordinates that read input index `j`, as [begin, end): the
/// taps' lowest and highest index never decrease with `x`, so the outputs
/// whose taps span `j` are contiguous. Found by two binary searches.
LOOM_RESIZE_HOST_DEVICE inline void preimage(const Params &p, int64_t j,
                                             const Axis &a, int64_t &begin,
                                             int64_t &end) {
  int64_t index[kMaxTaps];
  double weight[kMaxTaps];
  // begin: the first x whose highest tap is at least j.
  int64_t lo = 0, hi = a.out;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int n = taps(p, mid, a, index, weight);
    if (index[n - 1] >= j)
      hi = mid;
    else
      lo = mid + 1;
  }
  begin = lo;
  // end: the first x whose lowest tap is above j.
  hi = a.out;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    taps(p, mid, a, index, weight);
    if (index[0] > j)
      hi = mid;
    else
      lo = mid + 1;
  }
  end = lo;
}

/// The output size of a dimension of `in` elements scaled by num / den:
/// floor(in * num / den); false on overflow.
inline bool outputSize(int64_t in, int64_t num, int64_t den, int64_t &out) {
  int64_t product;
  if (__builtin_mul_overflow(in, num, &product))
    return false;
  out = product / den;
  return true;
}

} // namespace loom::ops::resize

#endif // LOOM_COMMON_OPS_RESIZEINDEX_H
