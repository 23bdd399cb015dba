//===- Elementwise.cu - Elementwise CUDA kernels --------------------------===//
//
// Binary ops with numpy broadcasting, unary ops (the activations of
// common/ops/ElementwiseMath.h among them), relu_grad, gelu_grad and
// unary_grad, cast and select. f16 and bf16 compute in f32; integer add, sub,
// mul, div, mod, fmod and neg compute in their own type (division by zero is a
// device error). Every kernel is a grid-stride loop over the output with
// strided operand offsets (Indexer), so broadcasting costs no copies; float
// binary ops whose operands are contiguous or scalars use 16-byte vectors.
//
//===----------------------------------------------------------------------===//

#include "common/ops/ElementwiseMath.h"
#include "runtime/cuda/DeviceUtil.cuh"

#include <algorithm>
#include <cstdint>

namespace loom::rt::cuda {

std::vector<int64_t> denseStrides(const Shape &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = stride;
    stride *= shape[d];
  }
  return s;
}

std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  if (in.size() > out.size())
    return {};
  std::vector<int64_t> dense = denseStrides(in), s(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == out[lead + d])
      s[lead + d] = in[d] == 1 ? 0 : dense[d];
    else if (in[d] != 1)
      return {};
  }
  return s;
}

std::string launchStatus(std::string_view op) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess)
    return "";
  return "cuda kernel '" + std::string(op) + "': " + cudaGetErrorString(e);
}

std::string unsupportedType(std::string_view op, DType dtype) {
  return "cuda kernel '" + std::string(op) +
         "' does not support element type " + dtypeName(dtype);
}

namespace {

enum class Binary { Add, Sub, Mul, Div, Pow, Mod, FMod };

/// The remainder's sign follows the divisor's for mod (floored), the
/// dividend's for fmod (truncated, what fmod and % give).
template <Binary K, typename T> __device__ T floorRemainder(T r, T divisor) {
  if (K == Binary::Mod && r != 0 && ((r < 0) != (divisor < 0)))
    r += divisor;
  return r;
}
enum class Unary {
  Neg,
  Exp,
  Log,
  Sqrt,
  Erf,
  Tanh,
  Relu,
  Sigmoid,
  Gelu,
  GeluTanh
};

constexpr float kSqrtHalf = 0.70710678118654752f;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

template <Binary K> __device__ float binaryFloat(float a, float b) {
  if constexpr (K == Binary::Add)
    return a + b;
  else if constexpr (K == Binary::Sub)
    return a - b;
  else if constexpr (K == Binary::Mul)
    return a * b;
  else if constexpr (K == Binary::Div)
    return a / b;
  else if constexpr (K == Binary::Mod || K == Binary::FMod)
    return floorRemainder<K>(fmodf(a, b), b);
  else
    return powf(a, b);
}

template <Binary K, typename T>
__device__ void binaryAt(const T *a, const T *b, T *out, int64_t i,
                         int64_t offA, int64_t offB, int *errorWord) {
  if constexpr (std::is_integral_v<T>) {
    T x = a[offA], y = b[offB];
    if constexpr (K == Binary::Add)
      out[i] = x + y;
    else if constexpr (K == Binary::Sub)
      out[i] = x - y;
    else if constexpr (K == Binary::Mul)
      out[i] = x * y;
    else if constexpr (K == Binary::Mod || K == Binary::FMod) {
      if (y == 0) {
        raise(errorWord, kIntegerDivisionByZero);
        out[i] = 0;
      } else {
        out[i] = y == -1 ? T(0) : floorRemainder<K>(T(x % y), y);
      }
    } else {
      if (y == 0) {
        raise(errorWord, kIntegerDivisionByZero);
        out[i] = 0;
      } else {
        out[i] = x / y;
      }
    }
  } else {
    out[i] = fromFloat<T>(binaryFloat<K>(toFloat(a[offA]), toFloat(b[offB])));
  }
}

/// One output per thread, or with `runs.grouped` kRun neighbours along the
/// innermost dimension per thread from one index split.
template <Binary K, typename T>
__global__ void binaryKernel(const T *a, const T *b, T *out, int64_t n,
                             Indexer<2> ix, InnerRuns<2> runs, int *errorWord) {
  if (runs.grouped) {
    LOOM_GRID_LOOP(g, n / kRun) {
      int64_t off[2];
      ix.offsets(g * kRun, off);
#pragma unroll
      for (int j = 0; j < kRun; ++j)
        binaryAt<K>(a, b, out, g * kRun + j, off[0] + j * runs.step[0],
                    off[1] + j * runs.step[1], errorWord);
    }
    return;
  }
  LOOM_GRID_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    binaryAt<K>(a, b, out, i, off[0], off[1], errorWord);
  }
}

template <Binary K, typename T>
__global__ void vectorBinaryKernel(const T *a, const T *b, T *out, int64_t n,
                                   bool aScalar, bool bScalar) {
  constexpr int V = 16 / sizeof(T);
  int64_t packs = n / V;
  T a0 = a[0], b0 = b[0];
  LOOM_GRID_LOOP(p, packs) {
    uint4 x, y, z;
    if (!aScalar)
      x = reinterpret_cast<const uint4 *>(a)[p];
    if (!bScalar)
      y = reinterpret_cast<const uint4 *>(b)[p];
    const T *xs = reinterpret_cast<const T *>(&x);
    const T *ys = reinterpret_cast<const T *>(&y);
    T *zs = reinterpret_cast<T *>(&z);
#pragma unroll
    for (int j = 0; j < V; ++j)
      zs[j] = fromFloat<T>(binaryFloat<K>(toFloat(aScalar ? a0 : xs[j]),
                                          toFloat(bScalar ? b0 : ys[j])));
    reinterpret_cast<uint4 *>(out)[p] = z;
  }
  int64_t i = packs * V + blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n)
    out[i] = fromFloat<T>(binaryFloat<K>(toFloat(aScalar ? a0 : a[i]),
                                         toFloat(bScalar ? b0 : b[i])));
}

/// Whether runBinary can use vectorBinaryKernel: after merging, at most one
/// dimension, every operand contiguous or broadcast from one element, and
/// 16-byte aligned arrays.
bool vectorizable(const Indexer<2> &ix, const void *a, const void *b,
                  const void *out) {
  if (ix.rank != 1 || !ix.narrow)
    return false;
  for (int k = 0; k < 2; ++k)
    if (ix.strides[k][0] != 0 && ix.strides[k][0] != 1)
      return false;
  auto aligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  return (ix.strides[0][0] == 0 || aligned(a)) &&
         (ix.strides[1][0] == 0 || aligned(b)) && aligned(out);
}

template <Unary K> __device__ float unaryFloat(float x) {
  if constexpr (K == Unary::Neg)
    return -x;
  else if constexpr (K == Unary::Exp)
    return expf(x);
  else if constexpr (K == Unary::Log)
    return logf(x);
  else if constexpr (K == Unary::Sqrt)
    return sqrtf(x);
  else if constexpr (K == Unary::Erf)
    return erff(x);
  else if constexpr (K == Unary::Tanh)
    return tanhf(x);
  else if constexpr (K == Unary::Relu)
    return x < 0 ? 0.0f : x;
  else if constexpr (K == Unary::Sigmoid)
    return 1.0f / (1.0f + expf(-x));
  else if constexpr (K == Unary::Gelu)
    return 0.5f * x * erfcf(-x * kSqrtHalf);
  else {
    double v = x, inner = kSqrt2OverPi * (v + 0.044715 * v * v * v);
    return static_cast<float>(0.5 * v * (1.0 + tanh(inner)));
  }
}

template <Unary K, typename T>
__global__ void unaryKernel(const T *in, T *out, int64_t n) {
  LOOM_GRID_LOOP(i, n) {
    if constexpr (std::is_integral_v<T>)
      out[i] = -in[i];
    else
      out[i] = fromFloat<T>(unaryFloat<K>(toFloat(in[i])));
  }
}

__device__ float geluDerivative(bool tanhForm, float xf) {
  double x = xf;
  if (isinf(x))
    return x > 0 ? 1.0f : 0.0f;
  constexpr double kPi = 3.14159265358979323846;
  if (!tanhForm)
    return static_cast<float>(0.5 * (1.0 + erf(x / sqrt(2.0))) +
                              x * exp(-0.5 * x * x) / sqrt(2.0 * kPi));
  const double k = sqrt(2.0 / kPi), c = 0.044715;
  double t = tanh(k * (x + c * x * x * x));
  return static_cast<float>(0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k *
                                                  (1.0 + 3.0 * c * x * x));
}

template <typename T>
__global__ void activationGradKernel(const T *x, const T *dy, T *dx, int64_t n,
                                     int form) {
  LOOM_GRID_LOOP(i, n) {
    float xi = toFloat(x[i]), g = toFloat(dy[i]);
    float r =
        form == 0 ? (xi > 0 ? g : 0.0f) : g * geluDerivative(form == 2, xi);
    dx[i] = fromFloat<T>(r);
  }
}

template <Binary K>
std::string runBinary(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &a = args.inputs[0], &b = args.inputs[1],
                   &out = args.outputs[0];
  if (a.dtype != b.dtype || a.dtype != out.dtype)
    return "cuda kernel '" + std::string(args.op) +
           "' needs one element type, got " + dtypeName(a.dtype) + ", " +
           dtypeName(b.dtype) + " -> " + dtypeName(out.dtype);
  std::vector<int64_t> sa = broadcastStrides(a.shape, out.shape),
                       sb = broadcastStrides(b.shape, out.shape);
  if ((sa.empty() && !out.shape.empty()) || (sb.empty() && !out.shape.empty()))
    return "cuda kernel '" + std::string(args.op) +
           "': " + formatShape(a.shape) + " and " + formatShape(b.shape) +
           " do not broadcast to " + formatShape(out.shape);
  Indexer<2> ix;
  if (!makeIndexer<2>(out.shape, {sa, sb}, ix))
    return "cuda kernel '" + std::string(args.op) + "': more than " +
           std::to_string(kMaxRank) + " dimensions";
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  bool vector = vectorizable(ix, a.data, b.data, out.data);
  auto launch = [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_integral_v<T>) {
      if (vector) {
        int64_t packs = n / (16 / static_cast<int64_t>(sizeof(T)));
        vectorBinaryKernel<K, T>
            <<<blocksFor(std::max<int64_t>(packs, 1)), kThreads, 0,
               ctx.stream>>>(a.as<T>(), b.as<T>(), out.as<T>(), n,
                             ix.strides[0][0] == 0, ix.strides[1][0] == 0);
        return;
      }
    }
    InnerRuns<2> runs = innerRunsOf(ix);
    binaryKernel<K, T>
        <<<blocksFor(runs.grouped ? n / kRun : n), kThreads, 0, ctx.stream>>>(
            a.as<T>(), b.as<T>(), out.as<T>(), n, ix, runs, ctx.errorWord);
  };
  bool integerOk = K != Binary::Pow;
  if (dispatchFloat(a.dtype, launch)) {
  } else if (a.dtype == DType::I32 && integerOk) {
    launch(int32_t{});
  } else if (a.dtype == DType::I64 && integerOk) {
    launch(int64_t{});
  } else {
    return unsupportedType(args.op, a.dtype);
  }
  return launchStatus(args.op);
}

template <Unary K>
std::string runUnary(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return "cuda kernel '" + std::string(args.op) +
           "' needs a result of its input's type";
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  auto launch = [&](auto t) {
    using T = decltype(t);
    unaryKernel<K, T>
        <<<blocksFor(n), kThreads, 0, ctx.stream>>>(in.as<T>(), out.as<T>(), n);
  };
  if (dispatchFloat(in.dtype, launch)) {
  } else if (K == Unary::Neg && in.dtype == DType::I32) {
    unaryKernel<Unary::Neg, int32_t><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in.as<int32_t>(), out.as<int32_t>(), n);
  } else if (K == Unary::Neg && in.dtype == DType::I64) {
    unaryKernel<Unary::Neg, int64_t><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in.as<int64_t>(), out.as<int64_t>(), n);
  } else {
    return unsupportedType(args.op, in.dtype);
  }
  return launchStatus(args.op);
}

std::string runActivationGrad(CudaContext &ctx, const KernelArgs &args,
                              int form) {
  const TensorView &x = args.inputs[0], &dy = args.inputs[1],
                   &dx = args.outputs[0];
  if (x.dtype != dy.dtype || x.dtype != dx.dtype || x.shape != dy.shape ||
      x.shape != dx.shape)
    return "cuda kernel '" + std::string(args.op) +
           "' needs input, grad and result of one type";
  int64_t n = x.numElements();
  if (n == 0)
    return "";
  if (!dispatchFloat(x.dtype, [&](auto t) {
        using T = decltype(t);
        activationGradKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
            x.as<T>(), dy.as<T>(), dx.as<T>(), n, form);
      }))
    return unsupportedType(args.op, x.dtype);
  return launchStatus(args.op);
}

//===--- The functions of ElementwiseMath.h and unary_grad -----------===//

namespace math = loom::ops::math;

template <math::UnaryFn F, typename T>
__global__ void mathValueKernel(const T *in, T *out, int64_t n, float alpha,
                                float beta) {
  LOOM_GRID_LOOP(i, n) {
    out[i] = fromFloat<T>(math::unaryValue<F>(toFloat(in[i]), alpha, beta));
  }
}

/// |x| with wrap-around: the minimum stays itself.
template <typename T>
__global__ void absIntKernel(const T *in, T *out, int64_t n) {
  using U = std::make_unsigned_t<T>;
  LOOM_GRID_LOOP(i, n) {
    out[i] = in[i] < 0 ? static_cast<T>(U(0) - static_cast<U>(in[i])) : in[i];
  }
}

template <math::UnaryFn F, typename T>
__global__ void mathGradKernel(const T *x, const T *dy, T *dx, int64_t n,
                               float alpha, float beta) {
  LOOM_GRID_LOOP(i, n) {
    dx[i] = fromFloat<T>(toFloat(dy[i]) *
                         math::unaryDerivative<F>(toFloat(x[i]), alpha, beta));
  }
}

/// An op of ElementwiseMath.h, its parameters read from its attributes.
std::string runMath(CudaContext &ctx, const KernelArgs &args,
                    const math::UnaryFnInfo &info) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return "cuda kernel '" + std::string(args.op) +
           "' needs a result of its input's type";
  auto param = [&](const char *name) {
    return name ? static_cast<float>(args.attrs.getFloat(name)) : 0.0f;
  };
  float alpha = param(info.alpha), beta = param(info.beta);
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  if (dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        math::visitUnaryFn(info.fn, [&](auto f) {
          mathValueKernel<decltype(f)::value, T>
              <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
                  in.as<T>(), out.as<T>(), n, alpha, beta);
        });
      })) {
  } else if (info.fn == math::UnaryFn::Abs && in.dtype == DType::I32) {
    absIntKernel<int32_t><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in.as<int32_t>(), out.as<int32_t>(), n);
  } else if (info.fn == math::UnaryFn::Abs && in.dtype == DType::I64) {
    absIntKernel<int64_t><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in.as<int64_t>(), out.as<int64_t>(), n);
  } else {
    return unsupportedType(args.op, in.dtype);
  }
  return launchStatus(args.op);
}

/// unary_grad(x, dy) {fn, alpha, beta}: dy * fn'(x).
std::string runUnaryGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &dy = args.inputs[1],
                   &dx = args.outputs[0];
  std::string fn = args.attrs.getString("fn");
  const math::UnaryFnInfo *info = math::findUnaryFn(fn);
  if (!info)
    return "cuda kernel 'unary_grad': fn '" + fn + "' is not one of " +
           std::string(math::unaryFnNames());
  if (x.dtype != dy.dtype || x.dtype != dx.dtype || x.shape != dy.shape ||
      x.shape != dx.shape)
    return "cuda kernel '" + std::string(args.op) +
           "' needs input, grad and result of one type";
  float alpha = static_cast<float>(args.attrs.getFloat("alpha")),
        beta = static_cast<float>(args.attrs.getFloat("beta"));
  int64_t n = x.numElements();
  if (n == 0)
    return "";
  if (!dispatchFloat(x.dtype, [&](auto t) {
        using T = decltype(t);
        math::visitUnaryFn(info->fn, [&](auto f) {
          mathGradKernel<decltype(f)::value, T>
              <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
                  x.as<T>(), dy.as<T>(), dx.as<T>(), n, alpha, beta);
        });
      }))
    return unsupportedType(args.op, x.dtype);
  return launchStatus(args.op);
}

//===--- cast and select ---------------------------------------------===//

/// Reads element i of any type as double (floats) and int64 (integers).
__device__ void loadAny(const void *p, int dtype, int64_t i, double &f,
                        int64_t &k) {
  switch (dtype) {
  case 1:
    f = static_cast<const float *>(p)[i];
    k = 0;
    return;
  case 2:
    f = toFloat(static_cast<const __half *>(p)[i]);
    k = 0;
    return;
  case 3:
    f = toFloat(static_cast<const __nv_bfloat16 *>(p)[i]);
    k = 0;
    return;
  case 4:
    k = static_cast<const int32_t *>(p)[i];
    break;
  case 5:
    k = static_cast<const int64_t *>(p)[i];
    break;
  default:
    k = static_cast<const uint8_t *>(p)[i] != 0;
    break;
  }
  f = static_cast<double>(k);
}

__global__ void castKernel(const void *in, int from, void *out, int to,
                           int64_t n) {
  bool fromFloat_ = from >= 1 && from <= 3;
  LOOM_GRID_LOOP(i, n) {
    double f;
    int64_t k;
    loadAny(in, from, i, f, k);
    switch (to) {
    case 1:
      static_cast<float *>(out)[i] = static_cast<float>(f);
      break;
    case 2:
      static_cast<__half *>(out)[i] = fromFloat<__half>(static_cast<float>(f));
      break;
    case 3:
      static_cast<__nv_bfloat16 *>(out)[i] =
          fromFloat<__nv_bfloat16>(static_cast<float>(f));
      break;
    case 4:
      static_cast<int32_t *>(out)[i] =
          fromFloat_ ? static_cast<int32_t>(f) : static_cast<int32_t>(k);
      break;
    case 5:
      static_cast<int64_t *>(out)[i] = fromFloat_ ? static_cast<int64_t>(f) : k;
      break;
    default:
      static_cast<uint8_t *>(out)[i] = fromFloat_ ? f != 0.0 : k != 0;
      break;
    }
  }
}

template <typename T>
__global__ void selectKernel(const uint8_t *cond, const T *a, const T *b,
                             T *out, int64_t n, Indexer<3> ix,
                             InnerRuns<3> runs) {
  if (runs.grouped) {
    LOOM_GRID_LOOP(g, n / kRun) {
      int64_t off[3];
      ix.offsets(g * kRun, off);
#pragma unroll
      for (int j = 0; j < kRun; ++j)
        out[g * kRun + j] = cond[off[0] + j * runs.step[0]]
                                ? a[off[1] + j * runs.step[1]]
                                : b[off[2] + j * runs.step[2]];
    }
    return;
  }
  LOOM_GRID_LOOP(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    out[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

std::string runCast(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.shape != out.shape)
    return "cuda kernel 'cast' needs a result of its input's shape";
  int64_t n = in.numElements();
  if (n == 0)
    return "";
  if (in.dtype == out.dtype) {
    cudaMemcpyAsync(out.data, in.data, in.bytes(), cudaMemcpyDeviceToDevice,
                    ctx.stream);
    return launchStatus(args.op);
  }
  castKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(
      in.data, static_cast<int>(in.dtype), out.data,
      static_cast<int>(out.dtype), n);
  return launchStatus(args.op);
}

std::string runSelect(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &c = args.inputs[0], &a = args.inputs[1],
                   &b = args.inputs[2], &out = args.outputs[0];
  if (c.dtype != DType::Bool || a.dtype != b.dtype || a.dtype != out.dtype)
    return "cuda kernel 'select' needs a bool condition and values of the "
           "result's type";
  std::vector<int64_t> sc = broadcastStrides(c.shape, out.shape),
                       sa = broadcastStrides(a.shape, out.shape),
                       sb = broadcastStrides(b.shape, out.shape);
  if (!out.shape.empty() && (sc.empty() || sa.empty() || sb.empty()))
    return "cuda kernel 'select': the operands do not broadcast to " +
           formatShape(out.shape);
  Indexer<3> ix;
  if (!makeIndexer<3>(out.shape, {sc, sa, sb}, ix))
    return "cuda kernel 'select': more than " + std::to_string(kMaxRank) +
           " dimensions";
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  auto launch = [&](auto t) {
    using T = decltype(t);
    InnerRuns<3> runs = innerRunsOf(ix);
    selectKernel<T>
        <<<blocksFor(runs.grouped ? n / kRun : n), kThreads, 0, ctx.stream>>>(
            c.as<uint8_t>(), a.as<T>(), b.as<T>(), out.as<T>(), n, ix, runs);
  };
  switch (dtypeSize(out.dtype)) {
  case 1:
    launch(uint8_t{});
    break;
  case 2:
    launch(uint16_t{});
    break;
  case 4:
    launch(uint32_t{});
    break;
  default:
    launch(uint64_t{});
    break;
  }
  return launchStatus(args.op);
}

} // namespace

namespace {

template <typename T>
__global__ void biasEpilogueKernel(T *out, const T *bias, int64_t total,
                                   int64_t n, bool relu) {
  LOOM_GRID_LOOP(i, total) {
    float v = toFloat(out[i]) + toFloat(bias[i % n]);
    out[i] = fromFloat<T>(relu && v < 0.0f ? 0.0f : v);
  }
}

} // namespace

std::string launchBiasEpilogue(CudaContext &ctx, const TensorView &bias,
                               bool relu, const TensorView &out) {
  int64_t total = out.numElements(), n = out.shape.back();
  if (total == 0)
    return "";
  bool known = dispatchFloat(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    biasEpilogueKernel<T><<<blocksFor(total), kThreads, 0, ctx.stream>>>(
        static_cast<T *>(out.data), static_cast<const T *>(bias.data), total, n,
        relu);
  });
  return known ? launchStatus("fused_matmul")
               : unsupportedType("fused_matmul", out.dtype);
}

void registerElementwiseKernels(KernelTable &table) {
  table["add"] = {runBinary<Binary::Add>, 2, 2};
  table["sub"] = {runBinary<Binary::Sub>, 2, 2};
  table["mul"] = {runBinary<Binary::Mul>, 2, 2};
  table["div"] = {runBinary<Binary::Div>, 2, 2};
  table["pow"] = {runBinary<Binary::Pow>, 2, 2};
  table["mod"] = {runBinary<Binary::Mod>, 2, 2};
  table["fmod"] = {runBinary<Binary::FMod>, 2, 2};
  table["neg"] = {runUnary<Unary::Neg>, 1, 1};
  table["exp"] = {runUnary<Unary::Exp>, 1, 1};
  table["log"] = {runUnary<Unary::Log>, 1, 1};
  table["sqrt"] = {runUnary<Unary::Sqrt>, 1, 1};
  table["erf"] = {runUnary<Unary::Erf>, 1, 1};
  table["tanh"] = {runUnary<Unary::Tanh>, 1, 1};
  table["relu"] = {runUnary<Unary::Relu>, 1, 1};
  table["sigmoid"] = {runUnary<Unary::Sigmoid>, 1, 1};
  table["gelu"] = {[](CudaContext &ctx, const KernelArgs &args) {
                     return args.attrs.getBool("tanh_approximation")
                                ? runUnary<Unary::GeluTanh>(ctx, args)
                                : runUnary<Unary::Gelu>(ctx, args);
                   },
                   1, 1};
  table["relu_grad"] = {[](CudaContext &ctx, const KernelArgs &args) {
                          return runActivationGrad(ctx, args, 0);
                        },
                        2, 2};
  table["gelu_grad"] = {[](CudaContext &ctx, const KernelArgs &args) {
                          return runActivationGrad(
                              ctx, args,
                              args.attrs.getBool("tanh_approximation") ? 2 : 1);
                        },
                        2, 2};
  for (const math::UnaryFnInfo &info : math::kUnaryFns)
    table[info.name] = {[&info](CudaContext &ctx, const KernelArgs &args) {
                          return runMath(ctx, args, info);
                        },
                        1, 1};
  table["unary_grad"] = {runUnaryGrad, 2, 2};
  table["cast"] = {runCast, 1, 1};
  table["select"] = {runSelect, 3, 3};
}

} // namespace loom::rt::cuda
