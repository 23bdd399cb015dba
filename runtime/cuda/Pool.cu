//===- Pool.cu - max_pool2d, avg_pool2d and their gradients on cuDNN ------===//
//
// NCHW pooling with the CPU backend's semantics (runtime/cpu/Pooling.cpp,
// ConvPoolGrad.cpp): the same attributes, checks and window rules, computed
// by cuDNN wherever its windows are ONNX's: with the begin padding on both
// sides, cuDNN's floor formula gives ONNX's output size (an average counting
// padding also needs every window inside ONNX's end padding). Else
// (asymmetric padding, ceil mode) the input is copied into a padded scratch
// that holds every window whole (-inf around a max, 0 around an average),
// pooled with no padding, and an average is rescaled from cuDNN's divisor, the
// window's size, to ONNX's: the window positions inside the declared padding
// (count_include_pad) or inside the input; a window with no such position
// gives 0, as on the CPU. max_pool2d: NaN propagates; padding never wins;
// max_pool2d_grad recomputes the pooled values for cuDNN, which routes each
// window's gradient to its maximum.
//
// cuDNN's pooling has no dilation. Dilated pooling (rare; no bundled model
// has it) runs the direct kernels below, which gather rather than scatter:
// each input element sums, in row-major window order, the gradients of the
// windows that select it, so results are deterministic and, for
// max_pool2d_grad, summed in the CPU kernel's order (each window's first
// maximum, a NaN counting as larger than any number).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Cudnn.cuh"

namespace loom::rt::cuda {
namespace {

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

/// Dilated pooling, which cuDNN does not have: direct kernels, on operands
/// the caller has checked (`g` their geometry, none of them empty).
void poolDirect(CudaContext &ctx, const TensorView &x, const TensorView &y,
                const PoolGeometry &g, bool isMax, bool includePad) {
  int64_t n = y.numElements();
  dispatchFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    if (isMax)
      poolKernel<T, true><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          x.as<T>(), y.as<T>(), g, includePad, n);
    else
      poolKernel<T, false><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          x.as<T>(), y.as<T>(), g, includePad, n);
  });
}

/// max_pool2d_grad of dilated pooling; "" or why not.
std::string maxPoolGradDirect(CudaContext &ctx, std::string_view op,
                              const TensorView &x, const TensorView &dy,
                              const TensorView &dx, const PoolGeometry &g) {
  int64_t n = dx.numElements(), outputs = dy.numElements();
  Scratch argmax(ctx, sizeof(int64_t) * outputs);
  if (!argmax)
    return opError(op, "out of device memory");
  dispatchFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    maxPoolArgmaxKernel<T><<<blocksFor(outputs), kThreads, 0, ctx.stream>>>(
        x.as<T>(), argmax.as<int64_t>(), g, outputs);
    poolGradKernel<T, true><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        argmax.as<int64_t>(), dy.as<T>(), dx.as<T>(), g, false, n);
  });
  return "";
}

/// avg_pool2d_grad of dilated pooling.
void avgPoolGradDirect(CudaContext &ctx, const TensorView &dy,
                       const TensorView &dx, const PoolGeometry &g,
                       bool includePad) {
  int64_t n = dx.numElements();
  dispatchFloat(dx.dtype, [&](auto t) {
    using T = decltype(t);
    poolGradKernel<T, false><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        nullptr, dy.as<T>(), dx.as<T>(), g, includePad, n);
  });
}

/// Rescales averages from cuDNN's divisor (the whole window) to ONNX's:
/// out = in * window / divisor, 0 where the divisor is 0.
template <typename T>
__global__ void rescaleAverageKernel(const T *in, T *out, PoolGeometry g,
                                     bool includePad, int64_t n) {
  float window = static_cast<float>(g.h.kernel * g.w.kernel);
  LOOM_GRID_LOOP(i, n) {
    Window win = windowOf(g, i);
    int64_t divisor = divisorOf(g, includePad, win.oh, win.ow);
    out[i] = fromFloat<T>(divisor ? toFloat(in[i]) *
                                        (window / static_cast<float>(divisor))
                                  : 0.0f);
  }
}

/// A pooling as cuDNN sees it (dilation 1). Where cuDNN's symmetric
/// padding gives exactly ONNX's windows it pools the input itself;
/// otherwise a padded copy of hp x wp planes, holding every window whole at
/// (top, left), pooled with no padding (see the file comment).
struct CudnnPool {
  PoolDesc pool;
  TensorDesc x, y;
  bool explicitPad = false;
  int64_t hp = 0, wp = 0;
};

/// Whether cuDNN's windows along axis `a` are ONNX's: with the begin
/// padding on both sides, cuDNN's floor formula gives ONNX's output size
/// (so every window starts where ONNX's does and ends within that padding),
/// and an average counting padding finds every window inside ONNX's
/// declared end padding, as cuDNN counts the whole window.
bool cudnnAxis(const PoolAxis &a, bool isMax, bool includePad) {
  int64_t span = a.in + 2 * a.padBegin - a.kernel;
  int64_t reached = (a.out - 1) * a.stride + a.kernel - a.in - a.padBegin;
  return a.padBegin >= 0 && span >= 0 && span / a.stride + 1 == a.out &&
         (isMax || !includePad || reached <= a.padEnd);
}

std::string describePool(std::string_view op, const PoolGeometry &g,
                         DType dtype, bool isMax, bool includePad,
                         CudnnPool &d) {
  CudnnStatus ok(op);
  d.explicitPad =
      !cudnnAxis(g.h, isMax, includePad) || !cudnnAxis(g.w, isMax, includePad);
  d.hp = d.explicitPad ? (g.h.out - 1) * g.h.stride + g.h.kernel : g.h.in;
  d.wp = d.explicitPad ? (g.w.out - 1) * g.w.stride + g.w.kernel : g.w.in;
  cudnnPoolingMode_t mode = isMax ? CUDNN_POOLING_MAX_DETERMINISTIC
                            : includePad || d.explicitPad
                                ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  int padH = d.explicitPad ? 0 : static_cast<int>(g.h.padBegin);
  int padW = d.explicitPad ? 0 : static_cast<int>(g.w.padBegin);
  if (!(ok(d.pool.created(), "descriptor") && ok(d.x.created(), "descriptor") &&
        ok(d.y.created(), "descriptor") &&
        ok(cudnnSetPooling2dDescriptor(
               d.pool, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(g.h.kernel),
               static_cast<int>(g.w.kernel), padH, padW,
               static_cast<int>(g.h.stride), static_cast<int>(g.w.stride)),
           "pooling descriptor") &&
        setNchw(ok, d.x, dtype, g.planes, 1, d.hp, d.wp, "input descriptor") &&
        setNchw(ok, d.y, dtype, g.planes, 1, g.h.out, g.w.out,
                "output descriptor")))
    return ok.error;
  int n = 0, c = 0, h = 0, w = 0;
  if (!ok(cudnnGetPooling2dForwardOutputDim(d.pool, d.x, &n, &c, &h, &w),
          "output size"))
    return ok.error;
  if (h != g.h.out || w != g.w.out)
    return opError(op, "cuDNN pools to " + std::to_string(h) + " x " +
                           std::to_string(w) + " where the plan has " +
                           std::to_string(g.h.out) + " x " +
                           std::to_string(g.w.out));
  return "";
}

/// The input cuDNN pools: x itself, or its padded copy (-inf around a max,
/// 0 around an average) in `copy`.
const void *poolInput(CudaContext &ctx, const CudnnPool &d,
                      const PoolGeometry &g, const TensorView &x, bool isMax,
                      std::unique_ptr<Scratch> &copy) {
  if (!d.explicitPad)
    return x.data;
  copy = padded(ctx, x, g.planes, g.h.in, g.w.in, d.hp, d.wp, g.h.padBegin,
                g.w.padBegin, isMax ? -INFINITY : 0.0f);
  return copy ? copy->as<void>() : nullptr;
}

/// out = in rescaled to ONNX's divisors (an average pooled from a padded
/// copy); in and out may be the same.
void rescaleAverage(CudaContext &ctx, const PoolGeometry &g, bool includePad,
                    DType dtype, const void *in, void *out, int64_t n) {
  dispatchFloat(dtype, [&](auto t) {
    using T = decltype(t);
    rescaleAverageKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        static_cast<const T *>(in), static_cast<T *>(out), g, includePad, n);
  });
}

bool dilated(const PoolGeometry &g) {
  return g.h.dilation != 1 || g.w.dilation != 1;
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
  if (dilated(g)) {
    poolDirect(ctx, x, y, g, isMax, includePad);
    return launchStatus(args.op);
  }
  CudnnPool d;
  if (std::string e = describePool(args.op, g, x.dtype, isMax, includePad, d);
      !e.empty())
    return e;
  CudnnStatus ok(args.op);
  cudnnHandle_t handle = cudnnOf(ctx, ok);
  std::unique_ptr<Scratch> copy;
  const void *in = poolInput(ctx, d, g, x, isMax, copy);
  if (!in)
    return opError(args.op, "out of device memory");
  float one = 1.0f, zero = 0.0f;
  if (!handle || !ok(cudnnPoolingForward(handle, d.pool, &one, d.x, in, &zero,
                                         d.y, y.data),
                     "pooling forward"))
    return ok.error;
  if (d.explicitPad && !isMax)
    rescaleAverage(ctx, g, includePad, y.dtype, y.data, y.data, n);
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
  if (dx.numElements() == 0)
    return "";
  if (dy.numElements() == 0) {
    cudaMemsetAsync(dx.data, 0, dx.bytes(), ctx.stream);
    return launchStatus(args.op);
  }
  if (dilated(g)) {
    std::string e = maxPoolGradDirect(ctx, args.op, x, dy, dx, g);
    return e.empty() ? launchStatus(args.op) : e;
  }
  CudnnPool d;
  if (std::string e = describePool(args.op, g, x.dtype, true, false, d);
      !e.empty())
    return e;
  CudnnStatus ok(args.op);
  cudnnHandle_t handle = cudnnOf(ctx, ok);
  std::unique_ptr<Scratch> copy;
  const void *in = poolInput(ctx, d, g, x, true, copy);
  size_t elem = dtypeSize(x.dtype);
  // cuDNN finds each window's maximum by comparing with the pooled values.
  Scratch pooled(ctx, dy.numElements() * elem);
  std::unique_ptr<Scratch> dPadded;
  void *out = dx.data;
  if (d.explicitPad) {
    dPadded = std::make_unique<Scratch>(ctx, g.planes * d.hp * d.wp * elem);
    out = *dPadded ? dPadded->as<void>() : nullptr;
  }
  if (!in || !pooled || !out)
    return opError(args.op, "out of device memory");
  float one = 1.0f, zero = 0.0f;
  if (!handle ||
      !ok(cudnnPoolingForward(handle, d.pool, &one, d.x, in, &zero, d.y,
                              pooled.as<void>()),
          "pooling forward") ||
      !ok(cudnnPoolingBackward(handle, d.pool, &one, d.y, pooled.as<void>(),
                               d.y, dy.data, d.x, in, &zero, d.x, out),
          "pooling backward"))
    return ok.error;
  if (d.explicitPad)
    crop(ctx, *dPadded, dx, g.planes, g.h.in, g.w.in, d.hp, d.wp, g.h.padBegin,
         g.w.padBegin);
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
  int64_t n = dx.numElements(), outputs = dy.numElements();
  if (n == 0)
    return "";
  if (outputs == 0) {
    cudaMemsetAsync(dx.data, 0, dx.bytes(), ctx.stream);
    return launchStatus(args.op);
  }
  if (dilated(g)) {
    avgPoolGradDirect(ctx, dy, dx, g, includePad);
    return launchStatus(args.op);
  }
  CudnnPool d;
  if (std::string e = describePool(args.op, g, dx.dtype, false, includePad, d);
      !e.empty())
    return e;
  CudnnStatus ok(args.op);
  cudnnHandle_t handle = cudnnOf(ctx, ok);
  size_t elem = dtypeSize(dx.dtype);
  // From a padded copy, each window's gradient is first rescaled from
  // ONNX's divisor to cuDNN's (the window size), then spread by cuDNN over
  // the padded planes, whose interior is the input's gradient.
  const void *grad = dy.data;
  std::unique_ptr<Scratch> scaled, dPadded;
  void *out = dx.data;
  if (d.explicitPad) {
    scaled = std::make_unique<Scratch>(ctx, outputs * elem);
    dPadded = std::make_unique<Scratch>(ctx, g.planes * d.hp * d.wp * elem);
    if (!*scaled || !*dPadded)
      return opError(args.op, "out of device memory");
    rescaleAverage(ctx, g, includePad, dy.dtype, dy.data, scaled->as<void>(),
                   outputs);
    grad = scaled->as<void>();
    out = dPadded->as<void>();
  }
  // An average's gradient reads neither the input nor the pooled values:
  // cuDNN is given the gradients' own buffers of those shapes.
  float one = 1.0f, zero = 0.0f;
  if (!handle || !ok(cudnnPoolingBackward(handle, d.pool, &one, d.y, grad, d.y,
                                          grad, d.x, out, &zero, d.x, out),
                     "pooling backward"))
    return ok.error;
  if (d.explicitPad)
    crop(ctx, *dPadded, dx, g.planes, g.h.in, g.w.in, d.hp, d.wp, g.h.padBegin,
         g.w.padBegin);
  return launchStatus(args.op);
}

} // namespace

void registerPoolKernels(KernelTable &table) {
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
