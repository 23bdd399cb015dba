//===- ConvPoolGrad.cpp - Gradients of conv2d, max_pool2d, avg_pool2d -----===//
//
// conv2d_grad_input / conv2d_grad_weight: oneDNN convolution backward data /
// backward weights (f32, NCHW and (G)OIHW, groups and dilations); plain
// loops with double accumulation where oneDNN is off or rejects the shapes.
// conv_transpose2d is the backward data of its input, plus its bias.
// The plain loops give each thread whole output planes (an input-gradient
// plane, or one (out, in) channel pair of the weight gradient), so their
// sums have a fixed order.
//
// max_pool2d_grad: plain C++ on both paths. Each window's gradient goes to
// its first maximum in row-major window order, a NaN counting as larger
// than any number (so the first NaN); padding is never selected. oneDNN's
// max-pooling backward would need the forward's workspace and does not
// promise which of tied maxima it picks.
//
// avg_pool2d_grad: each window's gradient divided by the forward's divisor
// (Pooling.cpp: the real input positions, or with count_include_pad the
// window's positions inside the padded input, positions past the end
// padding in ceil mode not counting) and added to the window's real input
// positions. oneDNN pooling backward where the forward can use oneDNN
// (not an include-padding window reaching past the end padding).
//
// f16/bf16 run in f32 (runInF32).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/PoolGeometry.h"
#include "runtime/cpu/TrainKernels.h"

#include <cmath>

namespace loom::rt::cpu {
namespace {

#if LOOM_HAVE_DNNL
using dims = dnnl::memory::dims;
#endif

std::string firstErrorOf(std::string first, std::string second) {
  return first.empty() ? second : first;
}

std::string expectFloats(std::string_view op,
                         std::initializer_list<const TensorView *> tensors) {
  DType dtype = (*tensors.begin())->dtype;
  if (!isFloat(dtype))
    return std::string(op) + " operands must be float tensors, got " +
           dtypeName(dtype);
  for (const TensorView *t : tensors)
    if (t->dtype != dtype)
      return std::string(op) + " operands must have one element type, got " +
             dtypeName(dtype) + " and " + dtypeName(t->dtype);
  return {};
}

//===----------------------------------------------------------------------===//
// conv2d_grad_input / conv2d_grad_weight
//===----------------------------------------------------------------------===//

/// A convolution: input [batch, channels, height, width], weight
/// [outChannels, channels / groups, kernelH, kernelW], output [batch,
/// outChannels, outH, outW].
struct ConvGeometry {
  int64_t batch, channels, height, width;
  int64_t outChannels, kernelH, kernelW;
  int64_t outH, outW;
  int64_t strideH, strideW, dilationH, dilationW;
  int64_t padTop, padLeft, padBottom, padRight, groups;

  int64_t inPerGroup() const { return channels / groups; }
  int64_t outPerGroup() const { return outChannels / groups; }

#if LOOM_HAVE_DNNL
  dnnl::memory::desc srcDesc() const {
    return plainDesc({batch, channels, height, width});
  }
  dnnl::memory::desc dstDesc() const {
    return plainDesc({batch, outChannels, outH, outW});
  }
  dnnl::memory::desc weightsDesc() const {
    if (groups == 1)
      return plainDesc({outChannels, inPerGroup(), kernelH, kernelW});
    return plainDesc({groups, outPerGroup(), inPerGroup(), kernelH, kernelW});
  }
  CacheKey key(const char *tag) const {
    CacheKey k(tag);
    k.add({batch, channels, height, width, outChannels, kernelH, kernelW, outH,
           outW, strideH, strideW, dilationH, dilationW, padTop, padLeft,
           padBottom, padRight, groups});
    return k;
  }
  dnnl::convolution_forward::primitive_desc forwardHint() const {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_training,
            dnnl::algorithm::convolution_direct, srcDesc(), weightsDesc(),
            dstDesc(), dims{strideH, strideW},
            dims{dilationH - 1, dilationW - 1}, dims{padTop, padLeft},
            dims{padBottom, padRight}),
        cpuEngine());
  }
#endif
};

/// Builds the geometry from input, weight and output shapes and checks
/// every relation the kernels index with.
std::string convGeometry(const KernelArgs &args, const Shape &x, const Shape &w,
                         const Shape &y, ConvGeometry &g) {
  std::vector<int64_t> strides = args.attrs.getInts("strides"),
                       padding = args.attrs.getInts("padding"),
                       dilations = args.attrs.getInts("dilations");
  std::string op(args.op);
  if (x.size() != 4 || w.size() != 4 || y.size() != 4 || strides.size() != 2 ||
      padding.size() != 4 || dilations.size() != 2)
    return op + " needs rank-4 operands, 2 strides, 4 paddings and 2 "
                "dilations";
  g = {x[0],         x[1],       x[2],
       x[3],         w[0],       w[2],
       w[3],         y[2],       y[3],
       strides[0],   strides[1], dilations[0],
       dilations[1], padding[0], padding[1],
       padding[2],   padding[3], args.attrs.getInt("groups", 1)};
  if (g.strideH < 1 || g.strideW < 1 || g.dilationH < 1 || g.dilationW < 1)
    return op + " strides and dilations must be positive";
  if (y[0] != g.batch || y[1] != g.outChannels)
    return op + ": output " + formatShape(y) + " does not match input " +
           formatShape(x) + " and weight " + formatShape(w);
  if (g.groups < 1 || g.channels % g.groups || g.outChannels % g.groups ||
      w[1] * g.groups != g.channels)
    return op + " groups (" + std::to_string(g.groups) +
           ") do not match input " + formatShape(x) + " and weight " +
           formatShape(w);
  return {};
}

bool convGradInputOneDnn(CpuContext &ctx, const ConvGeometry &g,
                         const float *dy, const float *w, float *dx) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn)
    return false;
  try {
    auto prim = ctx.primitives.get(g.key("conv2d_bwd_data"), [&] {
      dnnl::convolution_backward_data::desc desc(
          dnnl::algorithm::convolution_direct, g.srcDesc(), g.weightsDesc(),
          g.dstDesc(), dims{g.strideH, g.strideW},
          dims{g.dilationH - 1, g.dilationW - 1}, dims{g.padTop, g.padLeft},
          dims{g.padBottom, g.padRight});
      return makeCached<dnnl::convolution_backward_data>(
          dnnl::convolution_backward_data::primitive_desc(
              desc, userScratchpadAttr(), cpuEngine(), g.forwardHint()));
    });
    execute(*prim, {{DNNL_ARG_DIFF_DST, wrapMemory(g.dstDesc(), dy)},
                    {DNNL_ARG_WEIGHTS, wrapMemory(g.weightsDesc(), w)},
                    {DNNL_ARG_DIFF_SRC, wrapMemory(g.srcDesc(), dx)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

/// dx[n, c] = sum over the group's output channels o and window positions
/// of dy[n, o, oh, ow] * w[o, c, kh, kw], one input plane per task.
void convGradInputPlain(const ConvGeometry &g, const float *dy, const float *w,
                        float *dx) {
  int64_t planes = g.batch * g.channels, cin = g.inPerGroup(),
          cout = g.outPerGroup(), area = g.height * g.width;
#pragma omp parallel for schedule(static) if (planes > 1)
  for (int64_t plane = 0; plane < planes; ++plane) {
    int64_t n = plane / g.channels, c = plane % g.channels;
    int64_t group = c / cin, cInGroup = c % cin;
    std::vector<double> acc(area, 0.0);
    for (int64_t oc = 0; oc < cout; ++oc) {
      int64_t o = group * cout + oc;
      const float *grad = dy + (n * g.outChannels + o) * g.outH * g.outW;
      const float *ker = w + (o * cin + cInGroup) * g.kernelH * g.kernelW;
      for (int64_t oh = 0; oh < g.outH; ++oh)
        for (int64_t kh = 0; kh < g.kernelH; ++kh) {
          int64_t ih = oh * g.strideH - g.padTop + kh * g.dilationH;
          if (ih < 0 || ih >= g.height)
            continue;
          for (int64_t ow = 0; ow < g.outW; ++ow) {
            double gv = grad[oh * g.outW + ow];
            for (int64_t kw = 0; kw < g.kernelW; ++kw) {
              int64_t iw = ow * g.strideW - g.padLeft + kw * g.dilationW;
              if (iw >= 0 && iw < g.width)
                acc[ih * g.width + iw] += gv * ker[kh * g.kernelW + kw];
            }
          }
        }
    }
    float *out = dx + plane * area;
    for (int64_t i = 0; i < area; ++i)
      out[i] = static_cast<float>(acc[i]);
  }
}

bool convGradWeightOneDnn(CpuContext &ctx, const ConvGeometry &g,
                          const float *x, const float *dy, float *dw) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn)
    return false;
  try {
    auto prim = ctx.primitives.get(g.key("conv2d_bwd_weights"), [&] {
      dnnl::convolution_backward_weights::desc desc(
          dnnl::algorithm::convolution_direct, g.srcDesc(), g.weightsDesc(),
          g.dstDesc(), dims{g.strideH, g.strideW},
          dims{g.dilationH - 1, g.dilationW - 1}, dims{g.padTop, g.padLeft},
          dims{g.padBottom, g.padRight});
      return makeCached<dnnl::convolution_backward_weights>(
          dnnl::convolution_backward_weights::primitive_desc(
              desc, userScratchpadAttr(), cpuEngine(), g.forwardHint()));
    });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(g.srcDesc(), x)},
                    {DNNL_ARG_DIFF_DST, wrapMemory(g.dstDesc(), dy)},
                    {DNNL_ARG_DIFF_WEIGHTS, wrapMemory(g.weightsDesc(), dw)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

/// dw[o, c, kh, kw] = sum over n, oh, ow of dy[n, o, oh, ow] *
/// x[n, group(o) * cin + c, ih, iw], one (o, c) kernel per task.
void convGradWeightPlain(const ConvGeometry &g, const float *x, const float *dy,
                         float *dw) {
  int64_t cin = g.inPerGroup(), cout = g.outPerGroup(),
          kernels = g.outChannels * cin, window = g.kernelH * g.kernelW;
#pragma omp parallel for schedule(static) if (kernels > 1)
  for (int64_t k = 0; k < kernels; ++k) {
    int64_t o = k / cin, c = (o / cout) * cin + k % cin;
    std::vector<double> acc(window, 0.0);
    for (int64_t n = 0; n < g.batch; ++n) {
      const float *in = x + (n * g.channels + c) * g.height * g.width;
      const float *grad = dy + (n * g.outChannels + o) * g.outH * g.outW;
      for (int64_t kh = 0; kh < g.kernelH; ++kh)
        for (int64_t oh = 0; oh < g.outH; ++oh) {
          int64_t ih = oh * g.strideH - g.padTop + kh * g.dilationH;
          if (ih < 0 || ih >= g.height)
            continue;
          for (int64_t kw = 0; kw < g.kernelW; ++kw) {
            double sum = 0;
            for (int64_t ow = 0; ow < g.outW; ++ow) {
              int64_t iw = ow * g.strideW - g.padLeft + kw * g.dilationW;
              if (iw >= 0 && iw < g.width)
                sum += static_cast<double>(grad[oh * g.outW + ow]) *
                       in[ih * g.width + iw];
            }
            acc[kh * g.kernelW + kw] += sum;
          }
        }
    }
    for (int64_t i = 0; i < window; ++i)
      dw[k * window + i] = static_cast<float>(acc[i]);
  }
}

/// outputs[0] = the input gradient of the convolution `g` from inputs[0]
/// (its output gradient) and inputs[1] (its weight), all f32.
void convGradInput(CpuContext &ctx, const ConvGeometry &g,
                   const KernelArgs &a) {
  const TensorView &dy = a.inputs[0], &w = a.inputs[1], &dx = a.outputs[0];
  float *out = dx.as<float>();
  if (dx.numElements() == 0)
    return;
  if (dy.numElements() == 0 || w.numElements() == 0)
    std::fill(out, out + dx.numElements(), 0.0f);
  else if (!convGradInputOneDnn(ctx, g, dy.as<float>(), w.as<float>(), out))
    convGradInputPlain(g, dy.as<float>(), w.as<float>(), out);
}

std::string convGradInputKernel(CpuContext &ctx, const KernelArgs &args) {
  const TensorView &dy = args.inputs[0], &w = args.inputs[1],
                   &dx = args.outputs[0];
  ConvGeometry g;
  if (std::string e =
          firstErrorOf(expectFloats(args.op, {&dx, &dy, &w}),
                       convGeometry(args, dx.shape, w.shape, dy.shape, g));
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    convGradInput(ctx, g, a);
    return {};
  });
}

/// conv_transpose2d(x, w, bias): conv2d_grad_input with x as the output
/// gradient, then the bias per output channel.
std::string convTransposeKernel(CpuContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &w = args.inputs[1],
                   &y = args.outputs[0];
  const TensorView *bias = args.inputs.size() > 2 ? &args.inputs[2] : nullptr;
  ConvGeometry g;
  if (std::string e =
          firstErrorOf(bias ? expectFloats(args.op, {&y, &x, &w, bias})
                            : expectFloats(args.op, {&y, &x, &w}),
                       convGeometry(args, y.shape, w.shape, x.shape, g));
      !e.empty())
    return e;
  if (bias && bias->shape != Shape{g.channels})
    return std::string(args.op) + ": bias " + formatShape(bias->shape) +
           " does not match result " + formatShape(y.shape);
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    convGradInput(ctx, g, a);
    if (!bias)
      return {};
    float *out = a.outputs[0].as<float>();
    const float *b = a.inputs[2].as<float>();
    int64_t planes = g.batch * g.channels, area = g.height * g.width;
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t i = 0; i < area; ++i)
        out[p * area + i] += b[p % g.channels];
    return {};
  });
}

std::string convGradWeightKernel(CpuContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &dy = args.inputs[1],
                   &dw = args.outputs[0];
  ConvGeometry g;
  if (std::string e =
          firstErrorOf(expectFloats(args.op, {&dw, &x, &dy}),
                       convGeometry(args, x.shape, dw.shape, dy.shape, g));
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    float *out = a.outputs[0].as<float>();
    if (dw.numElements() == 0)
      return {};
    if (dy.numElements() == 0 || x.numElements() == 0) {
      std::fill(out, out + dw.numElements(), 0.0f);
      return {};
    }
    if (!convGradWeightOneDnn(ctx, g, a.inputs[0].as<float>(),
                              a.inputs[1].as<float>(), out))
      convGradWeightPlain(g, a.inputs[0].as<float>(), a.inputs[1].as<float>(),
                          out);
    return {};
  });
}

//===----------------------------------------------------------------------===//
// max_pool2d_grad / avg_pool2d_grad
//===----------------------------------------------------------------------===//

/// Geometry of a pooling from its input and output shapes; checks what the
/// kernels index with.
std::string poolGeometry(const KernelArgs &args, const Shape &x, const Shape &y,
                         PoolGeometry &g) {
  std::vector<int64_t> kernel = args.attrs.getInts("kernel"),
                       strides = args.attrs.getInts("strides"),
                       padding = args.attrs.getInts("padding"),
                       dilations = args.attrs.getInts("dilations");
  if (dilations.empty())
    dilations = {1, 1};
  std::string op(args.op);
  if (x.size() != 4 || y.size() != 4 || kernel.size() != 2 ||
      strides.size() != 2 || padding.size() != 4 || dilations.size() != 2)
    return op + " needs NCHW operands, 2 kernel sizes, 2 strides, 4 paddings "
                "and 2 dilations";
  if (y[0] != x[0] || y[1] != x[1])
    return op + ": grad " + formatShape(y) + " does not match input " +
           formatShape(x);
  for (int i = 0; i < 2; ++i)
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || padding[i] < 0 ||
        padding[i + 2] < 0)
      return op + " kernel, strides and dilations must be positive and "
                  "padding not negative";
  g = {
      x[0],
      x[1],
      {x[2], y[2], kernel[0], strides[0], padding[0], padding[2], dilations[0]},
      {x[3], y[3], kernel[1], strides[1], padding[1], padding[3],
       dilations[1]}};
  return {};
}

void maxPoolGradPlain(const PoolGeometry &g, const float *x, const float *dy,
                      float *dx) {
  int64_t planes = g.batch * g.channels;
  const PoolAxis &H = g.h, &W = g.w;
#pragma omp parallel for schedule(static) if (planes * H.in * W.in > kGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float *in = x + plane * H.in * W.in;
    const float *grad = dy + plane * H.out * W.out;
    float *out = dx + plane * H.in * W.in;
    std::fill(out, out + H.in * W.in, 0.0f);
    for (int64_t oh = 0; oh < H.out; ++oh)
      for (int64_t ow = 0; ow < W.out; ++ow) {
        int64_t h0 = oh * H.stride - H.padBegin,
                w0 = ow * W.stride - W.padBegin;
        int64_t best = -1;
        float bestValue = 0;
        for (int64_t kh = 0; kh < H.kernel; ++kh) {
          int64_t ih = h0 + kh * H.dilation;
          if (ih < 0 || ih >= H.in)
            continue;
          for (int64_t kw = 0; kw < W.kernel; ++kw) {
            int64_t iw = w0 + kw * W.dilation;
            if (iw < 0 || iw >= W.in)
              continue;
            float v = in[ih * W.in + iw];
            bool better = best < 0 ||
                          (std::isnan(v) && !std::isnan(bestValue)) ||
                          v > bestValue;
            if (better) {
              best = ih * W.in + iw;
              bestValue = v;
            }
          }
        }
        if (best >= 0)
          out[best] += grad[oh * W.out + ow];
      }
  }
}

void avgPoolGradPlain(const PoolGeometry &g, bool includePad, const float *dy,
                      float *dx) {
  int64_t planes = g.batch * g.channels;
  const PoolAxis &H = g.h, &W = g.w;
#pragma omp parallel for schedule(static) if (planes * H.in * W.in > kGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float *grad = dy + plane * H.out * W.out;
    std::vector<double> acc(H.in * W.in, 0.0);
    for (int64_t oh = 0; oh < H.out; ++oh)
      for (int64_t ow = 0; ow < W.out; ++ow) {
        int64_t h0 = oh * H.stride - H.padBegin,
                w0 = ow * W.stride - W.padBegin;
        // The forward's divisor (PoolGeometry.h).
        int64_t real, padded;
        windowCounts(g, oh, ow, real, padded);
        int64_t divisor = includePad ? padded : real;
        if (divisor == 0 || real == 0)
          continue;
        double share = static_cast<double>(grad[oh * W.out + ow]) / divisor;
        for (int64_t kh = 0; kh < H.kernel; ++kh) {
          int64_t ih = h0 + kh * H.dilation;
          if (ih < 0 || ih >= H.in)
            continue;
          for (int64_t kw = 0; kw < W.kernel; ++kw) {
            int64_t iw = w0 + kw * W.dilation;
            if (iw >= 0 && iw < W.in)
              acc[ih * W.in + iw] += share;
          }
        }
      }
    float *out = dx + plane * H.in * W.in;
    for (int64_t i = 0; i < H.in * W.in; ++i)
      out[i] = static_cast<float>(acc[i]);
  }
}

bool avgPoolGradOneDnn(CpuContext &ctx, const PoolGeometry &g, bool includePad,
                       const float *dy, float *dx) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || g.batch * g.channels == 0)
    return false;
  int64_t padEndH = g.h.oneDnnPadEnd(), padEndW = g.w.oneDnnPadEnd();
  if (includePad && (padEndH != g.h.padEnd || padEndW != g.w.padEnd))
    return false;
  dnnl::algorithm alg = includePad
                            ? dnnl::algorithm::pooling_avg_include_padding
                            : dnnl::algorithm::pooling_avg_exclude_padding;
  dnnl::memory::desc src = plainDesc({g.batch, g.channels, g.h.in, g.w.in});
  dnnl::memory::desc dst = plainDesc({g.batch, g.channels, g.h.out, g.w.out});
  try {
    CacheKey key = poolCacheKey("pool2d_bwd", static_cast<int64_t>(alg), g,
                                padEndH, padEndW);
    auto prim = ctx.primitives.get(key, [&] {
      dims strides{g.h.stride, g.w.stride}, kernel{g.h.kernel, g.w.kernel},
          dilation{g.h.dilation - 1, g.w.dilation - 1},
          padL{g.h.padBegin, g.w.padBegin}, padR{padEndH, padEndW};
      dnnl::pooling_v2_forward::primitive_desc hint(
          dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_training, alg,
                                         src, dst, strides, kernel, dilation,
                                         padL, padR),
          cpuEngine());
      dnnl::pooling_v2_backward::desc desc(alg, src, dst, strides, kernel,
                                           dilation, padL, padR);
      return makeCached<dnnl::pooling_v2_backward>(
          dnnl::pooling_v2_backward::primitive_desc(desc, userScratchpadAttr(),
                                                    cpuEngine(), hint));
    });
    execute(*prim, {{DNNL_ARG_DIFF_DST, wrapMemory(dst, dy)},
                    {DNNL_ARG_DIFF_SRC, wrapMemory(src, dx)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

std::string maxPoolGradKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &dy = args.inputs[1],
                   &dx = args.outputs[0];
  PoolGeometry g;
  if (std::string e =
          firstErrorOf(expectFloats(args.op, {&x, &dy, &dx}),
                       firstErrorOf(expectShape(args.op, "result", dx, x.shape),
                                    poolGeometry(args, x.shape, dy.shape, g)));
      !e.empty())
    return e;
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    float *out = a.outputs[0].as<float>();
    if (dy.numElements() == 0)
      std::fill(out, out + dx.numElements(), 0.0f);
    else
      maxPoolGradPlain(g, a.inputs[0].as<float>(), a.inputs[1].as<float>(),
                       out);
    return {};
  });
}

std::string avgPoolGradKernel(CpuContext &ctx, const KernelArgs &args) {
  const TensorView &dy = args.inputs[0], &dx = args.outputs[0];
  PoolGeometry g;
  if (std::string e = firstErrorOf(expectFloats(args.op, {&dy, &dx}),
                                   poolGeometry(args, dx.shape, dy.shape, g));
      !e.empty())
    return e;
  bool includePad = args.attrs.getBool("count_include_pad");
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    float *out = a.outputs[0].as<float>();
    if (dy.numElements() == 0)
      std::fill(out, out + dx.numElements(), 0.0f);
    else if (dx.numElements() != 0 &&
             !avgPoolGradOneDnn(ctx, g, includePad, a.inputs[0].as<float>(),
                                out))
      avgPoolGradPlain(g, includePad, a.inputs[0].as<float>(), out);
    return {};
  });
}

} // namespace

void registerConvPoolGradKernels(KernelTable &table, ResultCounts &) {
  table["conv2d_grad_input"] = {convGradInputKernel, 2, 2};
  table["conv2d_grad_weight"] = {convGradWeightKernel, 2, 2};
  table["conv_transpose2d"] = {convTransposeKernel, 2, 3};
  table["max_pool2d_grad"] = {maxPoolGradKernel, 2, 2};
  table["avg_pool2d_grad"] = {avgPoolGradKernel, 1, 1};
}

} // namespace loom::rt::cpu
