//===- Pooling.cpp - max_pool2d and avg_pool2d (NCHW) ---------------------===//
//
// Windows are computed for each output position of the given result shape
// (ceil mode only changes that shape). Padding never wins the max; the
// average divides by the real input positions, or with count_include_pad by
// the window's positions inside the padded input (ONNX/PyTorch: positions
// past the end padding in ceil mode do not count).
//
// oneDNN pooling_v2 takes a ceil-mode result by extending the end padding.
// That is exact for max and for the exclude-padding average; oneDNN's
// include-padding average would divide by the whole window, so a window
// reaching past the end padding takes the plain path.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/PoolGeometry.h"

#include <cmath>

namespace loom::rt::cpu {
namespace {

enum class PoolKind { Max, AvgExcludePad, AvgIncludePad };

void poolPlain(PoolKind kind, const PoolGeometry &g, const float *x, float *y) {
  int64_t planes = g.batch * g.channels;
  const PoolAxis &H = g.h, &W = g.w;
#pragma omp parallel for schedule(static) if (planes * H.out * W.out > kGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float *in = x + plane * H.in * W.in;
    float *out = y + plane * H.out * W.out;
    for (int64_t oh = 0; oh < H.out; ++oh)
      for (int64_t ow = 0; ow < W.out; ++ow) {
        int64_t h0 = oh * H.stride - H.padBegin,
                w0 = ow * W.stride - W.padBegin;
        float best = -INFINITY;
        double sum = 0;
        int64_t real, padded;
        windowCounts(g, oh, ow, real, padded);
        for (int64_t kh = 0; kh < H.kernel; ++kh) {
          int64_t ih = h0 + kh * H.dilation;
          if (ih < 0 || ih >= H.in)
            continue;
          for (int64_t kw = 0; kw < W.kernel; ++kw) {
            int64_t iw = w0 + kw * W.dilation;
            if (iw < 0 || iw >= W.in)
              continue;
            float v = in[ih * W.in + iw];
            sum += v;
            if (std::isnan(v) || (v > best && !std::isnan(best)))
              best = v;
          }
        }
        float &result = out[oh * W.out + ow];
        if (kind == PoolKind::Max)
          result = best;
        else if (kind == PoolKind::AvgExcludePad)
          result = real ? static_cast<float>(sum / real) : 0.0f;
        else
          result = padded ? static_cast<float>(sum / padded) : 0.0f;
      }
  }
}

bool poolOneDnn(CpuContext &ctx, PoolKind kind, const PoolGeometry &g,
                const float *x, float *y) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || g.batch * g.channels == 0 ||
      (kind == PoolKind::Max &&
       containsNan(x, g.batch * g.channels * g.h.in * g.w.in)))
    return false;
  int64_t padEndH = g.h.oneDnnPadEnd(), padEndW = g.w.oneDnnPadEnd();
  if (kind == PoolKind::AvgIncludePad &&
      (padEndH != g.h.padEnd || padEndW != g.w.padEnd))
    return false;
  dnnl::algorithm alg = kind == PoolKind::Max ? dnnl::algorithm::pooling_max
                        : kind == PoolKind::AvgExcludePad
                            ? dnnl::algorithm::pooling_avg_exclude_padding
                            : dnnl::algorithm::pooling_avg_include_padding;
  dnnl::memory::desc src = plainDesc({g.batch, g.channels, g.h.in, g.w.in});
  dnnl::memory::desc dst = plainDesc({g.batch, g.channels, g.h.out, g.w.out});
  try {
    CacheKey key =
        poolCacheKey("pool2d", static_cast<int64_t>(alg), g, padEndH, padEndW);
    auto prim = ctx.primitives.get(key, [&] {
      dnnl::pooling_v2_forward::desc desc(
          dnnl::prop_kind::forward_inference, alg, src, dst,
          {g.h.stride, g.w.stride}, {g.h.kernel, g.w.kernel},
          {g.h.dilation - 1, g.w.dilation - 1}, {g.h.padBegin, g.w.padBegin},
          {padEndH, padEndW});
      return makeCached<dnnl::pooling_v2_forward>(
          dnnl::pooling_v2_forward::primitive_desc(desc, userScratchpadAttr(),
                                                   cpuEngine()));
    });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(src, x)},
                    {DNNL_ARG_DST, wrapMemory(dst, y)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

std::string poolKernel(CpuContext &ctx, const KernelArgs &args, bool isMax) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &x = a.inputs[0], &y = a.outputs[0];
    std::vector<int64_t> kernel = a.attrs.getInts("kernel"),
                         strides = a.attrs.getInts("strides"),
                         padding = a.attrs.getInts("padding"),
                         dilations = a.attrs.getInts("dilations");
    if (dilations.empty())
      dilations = {1, 1};
    if (x.rank() != 4 || y.rank() != 4 || kernel.size() != 2 ||
        strides.size() != 2 || padding.size() != 4 || dilations.size() != 2)
      return std::string(a.op) + " needs NCHW operands, 2 kernel sizes, 2 "
                                 "strides, 4 paddings and 2 dilations";
    if (y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1])
      return std::string(a.op) + ": result " + formatShape(y.shape) +
             " does not match input " + formatShape(x.shape);
    PoolGeometry g{x.shape[0],
                   x.shape[1],
                   {x.shape[2], y.shape[2], kernel[0], strides[0], padding[0],
                    padding[2], dilations[0]},
                   {x.shape[3], y.shape[3], kernel[1], strides[1], padding[1],
                    padding[3], dilations[1]}};
    PoolKind kind = isMax ? PoolKind::Max
                    : a.attrs.getBool("count_include_pad")
                        ? PoolKind::AvgIncludePad
                        : PoolKind::AvgExcludePad;
    if (y.numElements() == 0)
      return {};
    if (x.numElements() == 0 ||
        !poolOneDnn(ctx, kind, g, x.as<float>(), y.as<float>()))
      poolPlain(kind, g, x.as<float>(), y.as<float>());
    return {};
  });
}

} // namespace

void registerPoolingKernels(KernelTable &table) {
  table["max_pool2d"] = {[](CpuContext &ctx, const KernelArgs &args) {
                           return poolKernel(ctx, args, /*isMax=*/true);
                         },
                         1, 1};
  table["avg_pool2d"] = {[](CpuContext &ctx, const KernelArgs &args) {
                           return poolKernel(ctx, args, /*isMax=*/false);
                         },
                         1, 1};
}

} // namespace loom::rt::cpu
