//===- ConvPool.cu - conv2d, max_pool2d, avg_pool2d and gradients on CUDA -===//
//
// NCHW convolution and pooling with the CPU backend's semantics
// (runtime/cpu/Linalg.cpp, Pooling.cpp, ConvPoolGrad.cpp): the same
// attributes, checks and window rules. Direct kernels, f32 accumulation.
//
// conv2d: one thread per output element, grouped weights [outChannels,
// channels / groups, kH, kW], optional bias. conv2d_grad_input: one thread
// per input-gradient element gathering over the windows that read it.
// conv2d_grad_weight: one block per weight element, a block sum over batch
// and output positions.
//
// max_pool2d: padding never wins; NaN propagates; an empty window gives
// -inf. avg_pool2d divides by the real input positions, or with
// count_include_pad by the positions inside the padded input.
//
// The pooling gradients gather rather than scatter: each input element
// sums, in row-major window order, the gradients of the windows that
// select it, so results are deterministic and, for max_pool2d_grad,
// summed in the CPU kernel's order. max_pool2d_grad first records each
// window's first maximum (a NaN counting as larger than any number).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

#include <algorithm>
#include <initializer_list>

namespace loom::rt::cuda {
namespace {

std::string opError(std::string_view op, const std::string &what) {
  return "cuda kernel '" + std::string(op) + "': " + what;
}

/// "" if every tensor has the first one's element type, a float type.
std::string expectOneFloatType(std::string_view op,
                               std::initializer_list<const TensorView *> ts) {
  DType dtype = (*ts.begin())->dtype;
  for (const TensorView *t : ts)
    if (t->dtype != dtype)
      return opError(op, std::string("operands must have one element type, "
                                     "got ") +
                             dtypeName(dtype) + " and " + dtypeName(t->dtype));
  if (!isFloat(dtype))
    return unsupportedType(op, dtype);
  return "";
}

unsigned blocksOf(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(n, 1 << 20));
}

//===----------------------------------------------------------------------===//
// conv2d, conv2d_grad_input, conv2d_grad_weight
//===----------------------------------------------------------------------===//

/// Input [batch, channels, height, width], weight [outChannels, channels /
/// groups, kernelH, kernelW], output [batch, outChannels, outH, outW].
struct ConvGeometry {
  int64_t batch, channels, height, width;
  int64_t outChannels, kernelH, kernelW;
  int64_t outH, outW;
  int64_t strideH, strideW, dilationH, dilationW;
  int64_t padTop, padLeft, padBottom, padRight, groups;

  __host__ __device__ int64_t inPerGroup() const { return channels / groups; }
  __host__ __device__ int64_t outPerGroup() const {
    return outChannels / groups;
  }
};

/// The geometry of input `x`, weight `w` and output `y` from the attributes
/// `strides`, `padding` (top, left, bottom, right), `dilations` and
/// `groups`. The gradients, which divide by strides and dilations, also
/// need them positive (as the CPU kernels do).
std::string convGeometry(const KernelArgs &args, const Shape &x, const Shape &w,
                         const Shape &y, const TensorView *bias, bool isGrad,
                         ConvGeometry &g) {
  std::vector<int64_t> strides = args.attrs.getInts("strides"),
                       padding = args.attrs.getInts("padding"),
                       dilations = args.attrs.getInts("dilations");
  if (x.size() != 4 || w.size() != 4 || y.size() != 4 || strides.size() != 2 ||
      padding.size() != 4 || dilations.size() != 2)
    return opError(args.op, "needs rank-4 operands, 2 strides, 4 paddings and "
                            "2 dilations");
  g = {x[0],         x[1],       x[2],
       x[3],         w[0],       w[2],
       w[3],         y[2],       y[3],
       strides[0],   strides[1], dilations[0],
       dilations[1], padding[0], padding[1],
       padding[2],   padding[3], args.attrs.getInt("groups", 1)};
  if (isGrad &&
      (g.strideH < 1 || g.strideW < 1 || g.dilationH < 1 || g.dilationW < 1))
    return opError(args.op, "strides and dilations must be positive");
  if (y[0] != g.batch || y[1] != g.outChannels ||
      (bias && bias->numElements() != g.outChannels))
    return opError(args.op, (isGrad ? "output " + formatShape(y)
                                    : "result " + formatShape(y) + " or bias") +
                                " does not match input " + formatShape(x) +
                                " and weight " + formatShape(w));
  if (g.groups < 1 || g.channels % g.groups || g.outChannels % g.groups ||
      w[1] * g.groups != g.channels)
    return opError(args.op, "groups (" + std::to_string(g.groups) +
                                ") do not match input " + formatShape(x) +
                                " and weight " + formatShape(w));
  return "";
}

/// y[b, o, oh, ow] = bias[o] + sum over the group's input channels c and
/// the window of x[b, c, ih, iw] * w[o, c, kh, kw].
template <typename T>
__global__ void convForwardKernel(const T *x, const T *w, const T *bias, T *y,
                                  ConvGeometry g, int64_t n) {
  LOOM_GRID_LOOP(i, n) {
    int64_t ow = i % g.outW, oh = (i / g.outW) % g.outH;
    int64_t plane = i / (g.outW * g.outH);
    int64_t o = plane % g.outChannels, b = plane / g.outChannels;
    int64_t cin = g.inPerGroup(), firstIn = (o / g.outPerGroup()) * cin;
    float acc = bias ? toFloat(bias[o]) : 0.0f;
    for (int64_t c = 0; c < cin; ++c) {
      const T *in = x + (b * g.channels + firstIn + c) * g.height * g.width;
      const T *ker = w + (o * cin + c) * g.kernelH * g.kernelW;
      for (int64_t kh = 0; kh < g.kernelH; ++kh) {
        int64_t ih = oh * g.strideH - g.padTop + kh * g.dilationH;
        if (ih < 0 || ih >= g.height)
          continue;
        for (int64_t kw = 0; kw < g.kernelW; ++kw) {
          int64_t iw = ow * g.strideW - g.padLeft + kw * g.dilationW;
          if (iw >= 0 && iw < g.width)
            acc += toFloat(in[ih * g.width + iw]) *
                   toFloat(ker[kh * g.kernelW + kw]);
        }
      }
    }
    y[i] = fromFloat<T>(acc);
  }
}

/// The output position whose window reads input position `in` at window
/// offset `k` along one axis, if any.
__device__ bool convOutputOf(int64_t in, int64_t k, int64_t stride,
                             int64_t padBegin, int64_t dilation, int64_t outs,
                             int64_t &out) {
  int64_t t = in + padBegin - k * dilation;
  if (t < 0 || t % stride != 0)
    return false;
  out = t / stride;
  return out < outs;
}

/// dx[b, c, ih, iw] = sum over the group's output channels o and the windows
/// reading (ih, iw) of dy[b, o, oh, ow] * w[o, c, kh, kw].
template <typename T>
__global__ void convGradInputKernel(const T *dy, const T *w, T *dx,
                                    ConvGeometry g, int64_t n) {
  LOOM_GRID_LOOP(i, n) {
    int64_t iw = i % g.width, ih = (i / g.width) % g.height;
    int64_t plane = i / (g.width * g.height);
    int64_t c = plane % g.channels, b = plane / g.channels;
    int64_t cin = g.inPerGroup(), cout = g.outPerGroup();
    int64_t group = c / cin, cInGroup = c % cin;
    float acc = 0.0f;
    for (int64_t oc = 0; oc < cout; ++oc) {
      int64_t o = group * cout + oc;
      const T *grad = dy + (b * g.outChannels + o) * g.outH * g.outW;
      const T *ker = w + (o * cin + cInGroup) * g.kernelH * g.kernelW;
      for (int64_t kh = 0; kh < g.kernelH; ++kh) {
        int64_t oh;
        if (!convOutputOf(ih, kh, g.strideH, g.padTop, g.dilationH, g.outH, oh))
          continue;
        for (int64_t kw = 0; kw < g.kernelW; ++kw) {
          int64_t ow;
          if (convOutputOf(iw, kw, g.strideW, g.padLeft, g.dilationW, g.outW,
                           ow))
            acc += toFloat(grad[oh * g.outW + ow]) *
                   toFloat(ker[kh * g.kernelW + kw]);
        }
      }
    }
    dx[i] = fromFloat<T>(acc);
  }
}

/// dw[o, c, kh, kw] = sum over b, oh, ow of dy[b, o, oh, ow] *
/// x[b, group(o) * cin + c, ih, iw]; one block per weight element.
template <typename T>
__global__ void convGradWeightKernel(const T *x, const T *dy, T *dw,
                                     ConvGeometry g, int64_t weights) {
  __shared__ float shared[32];
  int64_t area = g.outH * g.outW, count = g.batch * area;
  int64_t cin = g.inPerGroup(), window = g.kernelH * g.kernelW;
  for (int64_t k = blockIdx.x; k < weights; k += gridDim.x) {
    int64_t kw = k % g.kernelW, kh = (k / g.kernelW) % g.kernelH;
    int64_t pair = k / window, o = pair / cin;
    int64_t c = (o / g.outPerGroup()) * cin + pair % cin;
    float acc = 0.0f;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
      int64_t b = r / area, p = r % area;
      int64_t ih = (p / g.outW) * g.strideH - g.padTop + kh * g.dilationH;
      int64_t iw = (p % g.outW) * g.strideW - g.padLeft + kw * g.dilationW;
      if (ih >= 0 && ih < g.height && iw >= 0 && iw < g.width)
        acc +=
            toFloat(dy[(b * g.outChannels + o) * area + p]) *
            toFloat(x[((b * g.channels + c) * g.height + ih) * g.width + iw]);
    }
    acc = blockSum(acc, shared);
    if (threadIdx.x == 0)
      dw[k] = fromFloat<T>(acc);
    __syncthreads();
  }
}

std::string runConv2d(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &w = args.inputs[1],
                   &y = args.outputs[0];
  const TensorView *bias = args.inputs.size() > 2 ? &args.inputs[2] : nullptr;
  std::string e = bias ? expectOneFloatType(args.op, {&x, &w, bias, &y})
                       : expectOneFloatType(args.op, {&x, &w, &y});
  if (!e.empty())
    return e;
  ConvGeometry g;
  if (e = convGeometry(args, x.shape, w.shape, y.shape, bias, false, g);
      !e.empty())
    return e;
  int64_t n = y.numElements();
  if (n == 0)
    return "";
  dispatchFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    convForwardKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        x.as<T>(), w.as<T>(), bias ? bias->as<T>() : nullptr, y.as<T>(), g, n);
  });
  return launchStatus(args.op);
}

std::string runConvGradInput(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &dy = args.inputs[0], &w = args.inputs[1],
                   &dx = args.outputs[0];
  ConvGeometry g;
  if (std::string e = expectOneFloatType(args.op, {&dx, &dy, &w}); !e.empty())
    return e;
  if (std::string e =
          convGeometry(args, dx.shape, w.shape, dy.shape, nullptr, true, g);
      !e.empty())
    return e;
  int64_t n = dx.numElements();
  if (n == 0)
    return "";
  dispatchFloat(dx.dtype, [&](auto t) {
    using T = decltype(t);
    convGradInputKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        dy.as<T>(), w.as<T>(), dx.as<T>(), g, n);
  });
  return launchStatus(args.op);
}

std::string runConvGradWeight(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &dy = args.inputs[1],
                   &dw = args.outputs[0];
  ConvGeometry g;
  if (std::string e = expectOneFloatType(args.op, {&dw, &x, &dy}); !e.empty())
    return e;
  if (std::string e =
          convGeometry(args, x.shape, dw.shape, dy.shape, nullptr, true, g);
      !e.empty())
    return e;
  int64_t weights = dw.numElements();
  if (weights == 0)
    return "";
  dispatchFloat(dw.dtype, [&](auto t) {
    using T = decltype(t);
    convGradWeightKernel<T>
        <<<blocksOf(weights), rowThreadsFor(g.batch * g.outH * g.outW), 0,
           ctx.stream>>>(x.as<T>(), dy.as<T>(), dw.as<T>(), g, weights);
  });
  return launchStatus(args.op);
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d and their gradients
//===----------------------------------------------------------------------===//

/// One spatial axis of a pooling window.
struct PoolAxis {
  int64_t in, out, kernel, stride, padBegin, padEnd, dilation;
};

struct PoolGeometry {
  int64_t planes;
  PoolAxis h, w;
};

/// The geometry of input `x` and pooled `y` from the attributes `kernel`,
/// `strides`, `padding` (top, left, bottom, right) and `dilations` (default
/// 1, 1). The gradients also need a positive window, strides and dilations
/// and no negative padding (as the CPU kernels do).
std::string poolGeometry(const KernelArgs &args, const Shape &x, const Shape &y,
                         bool isGrad, PoolGeometry &g) {
  std::vector<int64_t> kernel = args.attrs.getInts("kernel"),
                       strides = args.attrs.getInts("strides"),
                       padding = args.attrs.getInts("padding"),
                       dilations = args.attrs.getInts("dilations");
  if (dilations.empty())
    dilations = {1, 1};
  if (x.size() != 4 || y.size() != 4 || kernel.size() != 2 ||
      strides.size() != 2 || padding.size() != 4 || dilations.size() != 2)
    return opError(args.op, "needs NCHW operands, 2 kernel sizes, 2 strides, "
                            "4 paddings and 2 dilations");
  if (y[0] != x[0] || y[1] != x[1])
    return opError(args.op, std::string(isGrad ? "grad " : "result ") +
                                formatShape(y) + " does not match input " +
                                formatShape(x));
  for (int i = 0; i < 2 && isGrad; ++i)
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || padding[i] < 0 ||
        padding[i + 2] < 0)
      return opError(args.op, "kernel, strides and dilations must be positive "
                              "and padding not negative");
  g = {
      x[0] * x[1],
      {x[2], y[2], kernel[0], strides[0], padding[0], padding[2], dilations[0]},
      {x[3], y[3], kernel[1], strides[1], padding[1], padding[3],
       dilations[1]}};
  return "";
}

/// How many positions of window `o` along axis `a` lie in the input
/// (`real`) and within the padded input (`padded`). A window's counts are
/// the products over the two axes: the divisors of average pooling without
/// and with count_include_pad.
__device__ void axisCounts(const PoolAxis &a, int64_t o, int64_t &real,
                           int64_t &padded) {
  int64_t start = o * a.stride - a.padBegin;
  real = padded = 0;
  for (int64_t k = 0; k < a.kernel; ++k) {
    int64_t i = start + k * a.dilation;
    padded += i >= -a.padBegin && i < a.in + a.padEnd;
    real += i >= 0 && i < a.in;
  }
}

__device__ int64_t divisorOf(const PoolGeometry &g, bool includePad, int64_t oh,
                             int64_t ow) {
  int64_t realH, paddedH, realW, paddedW;
  axisCounts(g.h, oh, realH, paddedH);
  axisCounts(g.w, ow, realW, paddedW);
  return includePad ? paddedH * paddedW : realH * realW;
}

/// The window of output `i` (plane-major) and its start in the input.
struct Window {
  int64_t plane, oh, ow, h0, w0;
};

__device__ Window windowOf(const PoolGeometry &g, int64_t i) {
  Window win;
  win.ow = i % g.w.out;
  win.oh = (i / g.w.out) % g.h.out;
  win.plane = i / (g.w.out * g.h.out);
  win.h0 = win.oh * g.h.stride - g.h.padBegin;
  win.w0 = win.ow * g.w.stride - g.w.padBegin;
  return win;
}

template <typename T, bool IsMax>
__global__ void poolKernel(const T *x, T *y, PoolGeometry g, bool includePad,
                           int64_t n) {
  const PoolAxis &H = g.h, &W = g.w;
  LOOM_GRID_LOOP(i, n) {
    Window win = windowOf(g, i);
    const T *in = x + win.plane * H.in * W.in;
    float best = -INFINITY, sum = 0.0f;
    for (int64_t kh = 0; kh < H.kernel; ++kh) {
      int64_t ih = win.h0 + kh * H.dilation;
      if (ih < 0 || ih >= H.in)
        continue;
      for (int64_t kw = 0; kw < W.kernel; ++kw) {
        int64_t iw = win.w0 + kw * W.dilation;
        if (iw < 0 || iw >= W.in)
          continue;
        float v = toFloat(in[ih * W.in + iw]);
        if constexpr (IsMax) {
          if (v != v || (v > best && best == best))
            best = v;
        } else {
          sum += v;
        }
      }
    }
    if constexpr (IsMax) {
      y[i] = fromFloat<T>(best);
    } else {
      int64_t divisor = divisorOf(g, includePad, win.oh, win.ow);
      y[i] = fromFloat<T>(divisor ? sum / static_cast<float>(divisor) : 0.0f);
    }
  }
}

/// Each window's first maximum in row-major order (a NaN counting as larger
/// than any number), as an index into its input plane; -1 if the window
/// holds no input position.
template <typename T>
__global__ void maxPoolArgmaxKernel(const T *x, int64_t *argmax, PoolGeometry g,
                                    int64_t n) {
  const PoolAxis &H = g.h, &W = g.w;
  LOOM_GRID_LOOP(i, n) {
    Window win = windowOf(g, i);
    const T *in = x + win.plane * H.in * W.in;
    int64_t best = -1;
    float bestValue = 0.0f;
    for (int64_t kh = 0; kh < H.kernel; ++kh) {
      int64_t ih = win.h0 + kh * H.dilation;
      if (ih < 0 || ih >= H.in)
        continue;
      for (int64_t kw = 0; kw < W.kernel; ++kw) {
        int64_t iw = win.w0 + kw * W.dilation;
        if (iw < 0 || iw >= W.in)
          continue;
        float v = toFloat(in[ih * W.in + iw]);
        if (best < 0 || (v != v && bestValue == bestValue) || v > bestValue) {
          best = ih * W.in + iw;
          bestValue = v;
        }
      }
    }
    argmax[i] = best;
  }
}

/// The output position along axis `a` whose window holds input position
/// `in` at window offset `k`, if any.
__device__ bool poolOutputOf(const PoolAxis &a, int64_t in, int64_t k,
                             int64_t &out) {
  return convOutputOf(in, k, a.stride, a.padBegin, a.dilation, a.out, out);
}

/// dx at each input position: the sum of the gradients of the windows that
/// select it (max) or include it (average, divided by the forward's
/// divisor). Descending window offsets visit the windows in row-major
/// order.
template <typename T, bool IsMax>
__global__ void poolGradKernel(const int64_t *argmax, const T *dy, T *dx,
                               PoolGeometry g, bool includePad, int64_t n) {
  const PoolAxis &H = g.h, &W = g.w;
  LOOM_GRID_LOOP(i, n) {
    int64_t iw = i % W.in, ih = (i / W.in) % H.in;
    int64_t plane = i / (W.in * H.in), self = ih * W.in + iw;
    int64_t outBase = plane * H.out * W.out;
    float acc = 0.0f;
    for (int64_t kh = H.kernel - 1; kh >= 0; --kh) {
      int64_t oh;
      if (!poolOutputOf(H, ih, kh, oh))
        continue;
      for (int64_t kw = W.kernel - 1; kw >= 0; --kw) {
        int64_t ow;
        if (!poolOutputOf(W, iw, kw, ow))
          continue;
        int64_t o = outBase + oh * W.out + ow;
        if constexpr (IsMax) {
          if (argmax[o] == self)
            acc += toFloat(dy[o]);
        } else {
          // Never 0: (ih, iw) is one of the window's real positions.
          int64_t divisor = divisorOf(g, includePad, oh, ow);
          acc += toFloat(dy[o]) / static_cast<float>(divisor);
        }
      }
    }
    dx[i] = fromFloat<T>(acc);
  }
}

std::string runPool(CudaContext &ctx, const KernelArgs &args, bool isMax) {
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  PoolGeometry g;
  if (std::string e = expectOneFloatType(args.op, {&x, &y}); !e.empty())
    return e;
  if (std::string e = poolGeometry(args, x.shape, y.shape, false, g);
      !e.empty())
    return e;
  bool includePad = args.attrs.getBool("count_include_pad");
  int64_t n = y.numElements();
  if (n == 0)
    return "";
  dispatchFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    if (isMax)
      poolKernel<T, true><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          x.as<T>(), y.as<T>(), g, includePad, n);
    else
      poolKernel<T, false><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          x.as<T>(), y.as<T>(), g, includePad, n);
  });
  return launchStatus(args.op);
}

std::string runMaxPoolGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &dy = args.inputs[1],
                   &dx = args.outputs[0];
  PoolGeometry g;
  if (std::string e = expectOneFloatType(args.op, {&x, &dy, &dx}); !e.empty())
    return e;
  if (dx.shape != x.shape)
    return opError(args.op, "result has shape " + formatShape(dx.shape) +
                                ", expected " + formatShape(x.shape));
  if (std::string e = poolGeometry(args, x.shape, dy.shape, true, g);
      !e.empty())
    return e;
  int64_t n = dx.numElements(), outputs = dy.numElements();
  if (n == 0)
    return "";
  if (outputs == 0) {
    cudaMemsetAsync(dx.data, 0, dx.bytes(), ctx.stream);
    return launchStatus(args.op);
  }
  Scratch argmax(ctx, sizeof(int64_t) * outputs);
  if (!argmax)
    return opError(args.op, "out of device memory");
  dispatchFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    maxPoolArgmaxKernel<T><<<blocksFor(outputs), kThreads, 0, ctx.stream>>>(
        x.as<T>(), argmax.as<int64_t>(), g, outputs);
    poolGradKernel<T, true><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        argmax.as<int64_t>(), dy.as<T>(), dx.as<T>(), g, false, n);
  });
  return launchStatus(args.op);
}

std::string runAvgPoolGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &dy = args.inputs[0], &dx = args.outputs[0];
  PoolGeometry g;
  if (std::string e = expectOneFloatType(args.op, {&dy, &dx}); !e.empty())
    return e;
  if (std::string e = poolGeometry(args, dx.shape, dy.shape, true, g);
      !e.empty())
    return e;
  bool includePad = args.attrs.getBool("count_include_pad");
  int64_t n = dx.numElements();
  if (n == 0)
    return "";
  dispatchFloat(dx.dtype, [&](auto t) {
    using T = decltype(t);
    poolGradKernel<T, false><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        nullptr, dy.as<T>(), dx.as<T>(), g, includePad, n);
  });
  return launchStatus(args.op);
}

} // namespace

void registerConvPoolKernels(KernelTable &table) {
  table["conv2d"] = {runConv2d, 2, 3};
  table["conv2d_grad_input"] = {runConvGradInput, 2, 2};
  table["conv2d_grad_weight"] = {runConvGradWeight, 2, 2};
  table["max_pool2d"] = {[](CudaContext &ctx, const KernelArgs &args) {
                           return runPool(ctx, args, /*isMax=*/true);
                         },
                         1, 1};
  table["avg_pool2d"] = {[](CudaContext &ctx, const KernelArgs &args) {
                           return runPool(ctx, args, /*isMax=*/false);
                         },
                         1, 1};
  table["max_pool2d_grad"] = {runMaxPoolGrad, 2, 2};
  table["avg_pool2d_grad"] = {runAvgPoolGrad, 1, 1};
}

} // namespace loom::rt::cuda
