//===- PoolGeometry.h - Pooling windows, forward and backward -*- C++ -*-===//
//
// The geometry of a 2-D pooling and its averaging divisor, used by the
// forward kernels (Pooling.cpp) and their gradients (ConvPoolGrad.cpp), so
// that both divide by exactly the same counts.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_POOLGEOMETRY_H
#define LOOM_RUNTIME_CPU_POOLGEOMETRY_H

#if LOOM_HAVE_DNNL
#include "runtime/cpu/OneDnnUtil.h"
#endif

#include <cstdint>

namespace loom::rt::cpu {

/// One spatial dimension of a pooling window.
struct PoolAxis {
  int64_t in, out, kernel, stride, padBegin, padEnd, dilation;

  int64_t extent() const { return dilation * (kernel - 1) + 1; }
  /// End padding that makes oneDNN's floor formula give `out`.
  int64_t oneDnnPadEnd() const {
    if ((in + padBegin + padEnd - extent()) / stride + 1 == out)
      return padEnd;
    return (out - 1) * stride + extent() - in - padBegin;
  }
};

struct PoolGeometry {
  int64_t batch, channels;
  PoolAxis h, w;
};

/// For output position (oh, ow): how many window positions lie in the input
/// (`real`) and how many lie within the padded input (`padded`), the two
/// divisors of average pooling (without and with count_include_pad).
inline void windowCounts(const PoolGeometry &g, int64_t oh, int64_t ow,
                         int64_t &real, int64_t &padded) {
  const PoolAxis &H = g.h, &W = g.w;
  int64_t h0 = oh * H.stride - H.padBegin, w0 = ow * W.stride - W.padBegin;
  real = padded = 0;
  for (int64_t kh = 0; kh < H.kernel; ++kh) {
    int64_t ih = h0 + kh * H.dilation;
    bool hIn = ih >= 0 && ih < H.in;
    bool hPadded = ih >= -H.padBegin && ih < H.in + H.padEnd;
    for (int64_t kw = 0; kw < W.kernel; ++kw) {
      int64_t iw = w0 + kw * W.dilation;
      if (hPadded && iw >= -W.padBegin && iw < W.in + W.padEnd)
        ++padded;
      if (hIn && iw >= 0 && iw < W.in)
        ++real;
    }
  }
}

#if LOOM_HAVE_DNNL
/// The oneDNN primitive-cache key of a pooling with this geometry.
inline CacheKey poolCacheKey(const char *name, int64_t algorithm,
                             const PoolGeometry &g, int64_t padEndH,
                             int64_t padEndW) {
  CacheKey key(name);
  key.add(algorithm)
      .add({g.batch, g.channels, g.h.in, g.w.in, g.h.out, g.w.out})
      .add({g.h.kernel, g.w.kernel, g.h.stride, g.w.stride, g.h.dilation,
            g.w.dilation, g.h.padBegin, g.w.padBegin, padEndH, padEndW});
  return key;
}
#endif

} // namespace loom::rt::cpu

#endif // LOOM_RUNTIME_CPU_POOLGEOMETRY_H
