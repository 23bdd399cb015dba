//===- Conv.cu - conv2d, its gradients and conv_transpose2d on cuDNN ------===//
//
// NCHW convolution with the CPU backend's semantics (runtime/cpu/Linalg.cpp,
// ConvPoolGrad.cpp): the same attributes and checks, computed by cuDNN
// (forward, backward data, backward filter) with f32 accumulation: f32
// without TF32 unless LOOM_CUDA_TF32=1, f16 and bf16 on tensor cores. Each
// problem's algorithm is the first deterministic one of cuDNN's heuristic
// (best first) within the workspace limit, cached per problem. cuDNN pads
// symmetrically: an asymmetric padding (ONNX's SAME_UPPER, or explicit
// pads) that the begin padding on both sides does not reproduce is made
// explicit, the input copied into a zero-padded scratch that the
// convolution reads with no padding of its own (and the input gradient
// computed there and cut out). conv_transpose2d is the backward data
// convolution of its input, then its bias.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Cudnn.cuh"

namespace loom::rt::cuda {
namespace {

constexpr size_t kMaxConvWorkspace = size_t(512) << 20;

/// The algorithm for one convolution problem (`key`): cached, else the
/// first of cuDNN's heuristic results (best first) that runs within the
/// workspace limit, deterministic if any is, and for f32 without TF32 on
/// FMA math. `get(perf, count, &returned)` asks the heuristic.
template <typename Perf, typename Get>
bool chooseAlgorithm(CudaContext &ctx, CudnnStatus &ok, const std::string &key,
                     bool fmaOnly, int count, Get &&get, CudnnAlgorithm &out) {
  if (auto it = ctx.cudnnAlgorithms.find(key);
      it != ctx.cudnnAlgorithms.end()) {
    out = it->second;
    return true;
  }
  std::vector<Perf> perf(count);
  int returned = 0;
  if (!ok(get(perf.data(), count, &returned), "algorithm heuristic"))
    return false;
  const Perf *best = nullptr;
  for (bool deterministicOnly : {true, false}) {
    for (int i = 0; i < returned && !best; ++i) {
      const Perf &p = perf[i];
      if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= kMaxConvWorkspace &&
          (!fmaOnly || p.mathType == CUDNN_FMA_MATH) &&
          (!deterministicOnly || p.determinism == CUDNN_DETERMINISTIC))
        best = &p;
    }
  }
  if (!best)
    return ok(CUDNN_STATUS_NOT_SUPPORTED, "no algorithm for this problem");
  out = {static_cast<int>(best->algo), best->memory,
         static_cast<int>(best->mathType)};
  ctx.cudnnAlgorithms.emplace(key, out);
  return true;
}

/// dst (planes of hp x wp) = src (planes of h x w) placed at (top, left);

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

/// y[b, o, oh, ow] += bias[o].
template <typename T>
__global__ void addChannelBiasKernel(T *y, const T *bias, int64_t channels,
                                     int64_t area, int64_t n) {
  LOOM_GRID_LOOP(i, n) {
    y[i] = fromFloat<T>(toFloat(y[i]) + toFloat(bias[(i / area) % channels]));
  }
}

/// A convolution as cuDNN sees it: the input (or its padded copy, when the
/// padding is asymmetric), weight, output and convolution descriptors.
struct CudnnConv {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  /// Whether cuDNN reads a zero-padded copy of the input (hp x wp planes)
  /// with no padding of its own.
  bool explicitPad = false;
  int64_t hp = 0, wp = 0;
  /// The problem's cache key (geometry, type, math).
  std::string key;
  bool fmaOnly = false;
};

std::string describeConv(CudaContext &ctx, std::string_view op,
                         const ConvGeometry &g, DType dtype, CudnnConv &d) {
  CudnnStatus ok(op);
  // cuDNN pads both sides by the same amount. The begin padding on both
  // sides serves where it gives the plan's output size (the windows then
  // start where the plan's do, and zeros add nothing); else the padding is
  // made explicit.
  auto symmetricFits = [](int64_t in, int64_t pad, int64_t kernel,
                          int64_t dilation, int64_t stride, int64_t out) {
    int64_t span = in + 2 * pad - (dilation * (kernel - 1) + 1);
    return pad >= 0 && span >= 0 && span / stride + 1 == out;
  };
  d.explicitPad = !symmetricFits(g.height, g.padTop, g.kernelH, g.dilationH,
                                 g.strideH, g.outH) ||
                  !symmetricFits(g.width, g.padLeft, g.kernelW, g.dilationW,
                                 g.strideW, g.outW);
  d.hp = d.explicitPad ? g.height + g.padTop + g.padBottom : g.height;
  d.wp = d.explicitPad ? g.width + g.padLeft + g.padRight : g.width;
  int padH = d.explicitPad ? 0 : static_cast<int>(g.padTop);
  int padW = d.explicitPad ? 0 : static_cast<int>(g.padLeft);
  // f32 stays f32 (cuDNN's default math would allow TF32) unless
  // LOOM_CUDA_TF32=1; f16 and bf16 on tensor cores, accumulating in f32.
  cudnnMathType_t math = dtype != DType::F32 ? CUDNN_TENSOR_OP_MATH
                         : ctx.tf32          ? CUDNN_DEFAULT_MATH
                                             : CUDNN_FMA_MATH;
  d.fmaOnly = dtype == DType::F32 && !ctx.tf32;
  if (!(ok(d.x.created(), "descriptor") && ok(d.y.created(), "descriptor") &&
        ok(d.w.created(), "descriptor") && ok(d.conv.created(), "descriptor") &&
        setNchw(ok, d.x, dtype, g.batch, g.channels, d.hp, d.wp,
                "input descriptor") &&
        setNchw(ok, d.y, dtype, g.batch, g.outChannels, g.outH, g.outW,
                "output descriptor") &&
        ok(cudnnSetFilter4dDescriptor(
               d.w, cudnnTypeOf(dtype), CUDNN_TENSOR_NCHW,
               static_cast<int>(g.outChannels),
               static_cast<int>(g.inPerGroup()), static_cast<int>(g.kernelH),
               static_cast<int>(g.kernelW)),
           "weight descriptor") &&
        ok(cudnnSetConvolution2dDescriptor(
               d.conv, padH, padW, static_cast<int>(g.strideH),
               static_cast<int>(g.strideW), static_cast<int>(g.dilationH),
               static_cast<int>(g.dilationW), CUDNN_CROSS_CORRELATION,
               CUDNN_DATA_FLOAT),
           "convolution descriptor") &&
        ok(cudnnSetConvolutionGroupCount(d.conv, static_cast<int>(g.groups)),
           "group count") &&
        ok(cudnnSetConvolutionMathType(d.conv, math), "math type")))
    return ok.error;
  int n = 0, c = 0, h = 0, w = 0;
  if (!ok(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &c, &h,
                                                &w),
          "output size"))
    return ok.error;
  if (h != g.outH || w != g.outW)
    return opError(op, "the output is " + std::to_string(g.outH) + " x " +
                           std::to_string(g.outW) +
                           ", but the input, weight, "
                           "strides, dilations and padding give " +
                           std::to_string(h) + " x " + std::to_string(w));
  d.key = std::string(dtypeName(dtype)) + (ctx.tf32 ? " tf32" : "");
  for (int64_t v :
       {g.batch, g.channels, d.hp, d.wp, g.outChannels, g.kernelH, g.kernelW,
        g.strideH, g.strideW, g.dilationH, g.dilationW,
        static_cast<int64_t>(padH), static_cast<int64_t>(padW), g.groups})
    d.key += " " + std::to_string(v);
  return "";
}

/// One convolution call's cuDNN state: descriptors, handle, algorithm and
/// workspace, and the padded copy of the input where the padding is
/// asymmetric.
struct ConvCall {
  CudnnConv d;
  cudnnHandle_t handle = nullptr;
  CudnnAlgorithm algo;
  std::unique_ptr<Scratch> workspace, paddedInput;
};

/// Sets `call` up for a convolution of geometry `g` in `direction`; `get`
/// asks cuDNN's heuristic for that direction's algorithms. "" or why not.
template <typename Perf, typename Get>
std::string setUp(CudaContext &ctx, std::string_view op, const ConvGeometry &g,
                  DType dtype, const char *direction, int algorithms, Get &&get,
                  ConvCall &call) {
  if (std::string e = describeConv(ctx, op, g, dtype, call.d); !e.empty())
    return e;
  CudnnStatus ok(op);
  call.handle = cudnnOf(ctx, ok);
  if (!call.handle ||
      !chooseAlgorithm<Perf>(
          ctx, ok, direction + (" " + call.d.key), call.d.fmaOnly, algorithms,
          [&](Perf *perf, int count, int *returned) {
            return get(call.handle, call.d, perf, count, returned);
          },
          call.algo) ||
      !ok(cudnnSetConvolutionMathType(
              call.d.conv, static_cast<cudnnMathType_t>(call.algo.mathType)),
          "math type"))
    return ok.error;
  call.workspace = std::make_unique<Scratch>(
      ctx, std::max<size_t>(call.algo.workspaceBytes, 1));
  if (!*call.workspace)
    return opError(op, "out of device memory for cuDNN's workspace");
  return "";
}

/// The input cuDNN reads: `x`, or its zero-padded copy (kept in `call`).
const void *convInput(CudaContext &ctx, const ConvGeometry &g,
                      const TensorView &x, ConvCall &call) {
  if (!call.d.explicitPad)
    return x.data;
  call.paddedInput = padded(ctx, x, g.batch * g.channels, g.height, g.width,
                            call.d.hp, call.d.wp, g.padTop, g.padLeft, 0.0f);
  return call.paddedInput ? call.paddedInput->as<void>() : nullptr;
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
  ConvCall call;
  if (e = setUp<cudnnConvolutionFwdAlgoPerf_t>(
          ctx, args.op, g, x.dtype, "fwd", CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
          [](cudnnHandle_t h, const CudnnConv &d,
             cudnnConvolutionFwdAlgoPerf_t *perf, int count, int *returned) {
            return cudnnGetConvolutionForwardAlgorithm_v7(
                h, d.x, d.w, d.conv, d.y, count, returned, perf);
          },
          call);
      !e.empty())
    return e;
  const void *in = convInput(ctx, g, x, call);
  if (!in)
    return opError(args.op, "out of device memory");
  CudnnStatus ok(args.op);
  float one = 1.0f, zero = 0.0f;
  if (!ok(cudnnConvolutionForward(
              call.handle, &one, call.d.x, in, call.d.w, w.data, call.d.conv,
              static_cast<cudnnConvolutionFwdAlgo_t>(call.algo.algorithm),
              call.workspace->as<void>(), call.algo.workspaceBytes, &zero,
              call.d.y, y.data),
          "convolution forward"))
    return ok.error;
  if (bias)
    dispatchFloat(y.dtype, [&](auto t) {
      using T = decltype(t);
      addChannelBiasKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          y.as<T>(), bias->as<T>(), g.outChannels, g.outH * g.outW, n);
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
  if (dx.numElements() == 0)
    return "";
  if (dy.numElements() == 0 || w.numElements() == 0) {
    cudaMemsetAsync(dx.data, 0, dx.bytes(), ctx.stream);
    return launchStatus(args.op);
  }
  ConvCall call;
  if (std::string e = setUp<cudnnConvolutionBwdDataAlgoPerf_t>(
          ctx, args.op, g, dx.dtype, "bwd-data",
          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
          [](cudnnHandle_t h, const CudnnConv &d,
             cudnnConvolutionBwdDataAlgoPerf_t *perf, int count,
             int *returned) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(
                h, d.w, d.y, d.conv, d.x, count, returned, perf);
          },
          call);
      !e.empty())
    return e;
  // With explicit padding the gradient of the padded input is computed
  // whole and its interior cut out.
  std::unique_ptr<Scratch> dPadded;
  void *out = dx.data;
  if (call.d.explicitPad) {
    dPadded =
        std::make_unique<Scratch>(ctx, g.batch * g.channels * call.d.hp *
                                           call.d.wp * dtypeSize(dx.dtype));
    if (!*dPadded)
      return opError(args.op, "out of device memory");
    out = dPadded->as<void>();
  }
  CudnnStatus ok(args.op);
  float one = 1.0f, zero = 0.0f;
  if (!ok(cudnnConvolutionBackwardData(
              call.handle, &one, call.d.w, w.data, call.d.y, dy.data,
              call.d.conv,
              static_cast<cudnnConvolutionBwdDataAlgo_t>(call.algo.algorithm),
              call.workspace->as<void>(), call.algo.workspaceBytes, &zero,
              call.d.x, out),
          "convolution backward data"))
    return ok.error;
  if (call.d.explicitPad)
    crop(ctx, *dPadded, dx, g.batch * g.channels, g.height, g.width, call.d.hp,
         call.d.wp, g.padTop, g.padLeft);
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
  if (dw.numElements() == 0)
    return "";
  if (dy.numElements() == 0 || x.numElements() == 0) {
    cudaMemsetAsync(dw.data, 0, dw.bytes(), ctx.stream);
    return launchStatus(args.op);
  }
  ConvCall call;
  if (std::string e = setUp<cudnnConvolutionBwdFilterAlgoPerf_t>(
          ctx, args.op, g, x.dtype, "bwd-filter",
          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
          [](cudnnHandle_t h, const CudnnConv &d,
             cudnnConvolutionBwdFilterAlgoPerf_t *perf, int count,
             int *returned) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                h, d.x, d.y, d.conv, d.w, count, returned, perf);
          },
          call);
      !e.empty())
    return e;
  const void *in = convInput(ctx, g, x, call);
  if (!in)
    return opError(args.op, "out of device memory");
  CudnnStatus ok(args.op);
  float one = 1.0f, zero = 0.0f;
  if (!ok(cudnnConvolutionBackwardFilter(
              call.handle, &one, call.d.x, in, call.d.y, dy.data, call.d.conv,
              static_cast<cudnnConvolutionBwdFilterAlgo_t>(call.algo.algorithm),
              call.workspace->as<void>(), call.algo.workspaceBytes, &zero,
              call.d.w, dw.data),
          "convolution backward filter"))
    return ok.error;
  return launchStatus(args.op);
}

/// conv_transpose2d(x, w, bias): conv2d_grad_input with x as the output
/// gradient, then the bias per output channel.
std::string runConvTranspose2d(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &y = args.outputs[0];
  const TensorView *bias = args.inputs.size() > 2 ? &args.inputs[2] : nullptr;
  if (bias) {
    if (std::string e = expectOneFloatType(args.op, {&y, bias}); !e.empty())
      return e;
    if (y.shape.size() != 4 || bias->shape != Shape{y.shape[1]})
      return opError(args.op, "bias " + formatShape(bias->shape) +
                                  " does not match result " +
                                  formatShape(y.shape));
  }
  if (std::string e = runConvGradInput(ctx, args); !e.empty() || !bias)
    return e;
  int64_t n = y.numElements();
  if (n == 0)
    return "";
  dispatchFloat(y.dtype, [&](auto t) {
    using T = decltype(t);
    addChannelBiasKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        y.as<T>(), bias->as<T>(), y.shape[1], y.shape[2] * y.shape[3], n);
  });
  return launchStatus(args.op);
}

} // namespace

void registerConvKernels(KernelTable &table) {
  table["conv2d"] = {runConv2d, 2, 3};
  table["conv2d_grad_input"] = {runConvGradInput, 2, 2};
  table["conv2d_grad_weight"] = {runConvGradWeight, 2, 2};
  table["conv_transpose2d"] = {runConvTranspose2d, 2, 3};
}

} // namespace loom::rt::cuda
