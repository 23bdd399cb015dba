//===- Elementwise.cpp - Binary arithmetic and unary math kernels ---------===//
//
// add/sub/mul/div/pow with numpy broadcasting and the unary ops. f32 runs on
// oneDNN binary/eltwise where oneDNN can express the op and shapes; integers
// wrap through unsigned arithmetic, so no op is undefined behaviour. The
// activations of common/ops/ElementwiseMath.h (cos ... clip) and their
// gradient unary_grad compute that header's value and derivative.
//
//===----------------------------------------------------------------------===//

#include "common/ops/ElementwiseMath.h"
#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include <atomic>
#include <cmath>
#include <type_traits>

namespace loom::rt::cpu {
namespace {

enum class BinaryKind { Add, Sub, Mul, Div, Pow, Mod, FMod };

/// The remainder of a / b truncated toward zero (C's fmod and %), or floored
/// (Python's %: the divisor's sign) when `floored`. An integer b of 0 sets
/// `bad`.
template <typename T> T remainderOf(T a, T b, bool floored, bool &bad) {
  T r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::fmod(a, b);
  } else {
    if (b == 0) {
      bad = true;
      return 0;
    }
    if (b == -1) // min % -1 overflows; the remainder is 0
      return 0;
    r = a % b;
  }
  if (floored && r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

/// base ** exponent with wrap-around. A negative exponent gives the
/// quotient truncated toward zero (1 for base 1, +-1 for base -1, else 0);
/// base 0 then sets `bad` (a division by zero).
template <typename T> T intPow(T base, T exponent, bool &bad) {
  using U = std::make_unsigned_t<T>;
  if (exponent < 0) {
    if (base == 0)
      bad = true;
    if (base == 1)
      return 1;
    if (base == -1)
      return (exponent & 1) ? -1 : 1;
    return 0;
  }
  U result = 1, factor = static_cast<U>(base);
  for (U e = static_cast<U>(exponent); e; e >>= 1) {
    if (e & 1)
      result *= factor;
    factor *= factor;
  }
  return static_cast<T>(result);
}

template <BinaryKind K, typename T> inline T binaryOp(T a, T b, bool &bad) {
  if constexpr (std::is_floating_point_v<T>) {
    if constexpr (K == BinaryKind::Add)
      return a + b;
    else if constexpr (K == BinaryKind::Sub)
      return a - b;
    else if constexpr (K == BinaryKind::Mul)
      return a * b;
    else if constexpr (K == BinaryKind::Div)
      return a / b;
    else if constexpr (K == BinaryKind::Mod || K == BinaryKind::FMod)
      return remainderOf(a, b, K == BinaryKind::Mod, bad);
    else
      return std::pow(a, b);
  } else {
    using U = std::make_unsigned_t<T>;
    if constexpr (K == BinaryKind::Add)
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    else if constexpr (K == BinaryKind::Sub)
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    else if constexpr (K == BinaryKind::Mul)
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    else if constexpr (K == BinaryKind::Div) {
      if (b == 0) {
        bad = true;
        return 0;
      }
      if (b == -1) // min / -1 overflows: wrap instead
        return static_cast<T>(U(0) - static_cast<U>(a));
      return a / b; // C++ truncates toward zero
    } else if constexpr (K == BinaryKind::Mod || K == BinaryKind::FMod) {
      return remainderOf(a, b, K == BinaryKind::Mod, bad);
    } else {
      return intPow(a, b, bad);
    }
  }
}

/// Plain broadcasting loop; false if some element set `bad`.
template <BinaryKind K, typename T>
bool binaryPlain(const TensorView &lhs, const TensorView &rhs,
                 const TensorView &out) {
  const T *a = lhs.as<T>(), *b = rhs.as<T>();
  T *c = out.as<T>();
  StridedLoop<2> loop(out.shape, {broadcastStrides(lhs.shape, out.shape),
                                  broadcastStrides(rhs.shape, out.shape)});
  std::atomic<bool> bad{false};
  loop.run([&](int64_t o, const std::array<int64_t, 2> &in) {
    bool elementBad = false;
    c[o] = binaryOp<K>(a[in[0]], b[in[1]], elementBad);
    if (elementBad)
      bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load();
}

template <typename T>
bool binaryPlain(BinaryKind kind, const TensorView &lhs, const TensorView &rhs,
                 const TensorView &out) {
  switch (kind) {
  case BinaryKind::Add:
    return binaryPlain<BinaryKind::Add, T>(lhs, rhs, out);
  case BinaryKind::Sub:
    return binaryPlain<BinaryKind::Sub, T>(lhs, rhs, out);
  case BinaryKind::Mul:
    return binaryPlain<BinaryKind::Mul, T>(lhs, rhs, out);
  case BinaryKind::Div:
    return binaryPlain<BinaryKind::Div, T>(lhs, rhs, out);
  case BinaryKind::Pow:
    return binaryPlain<BinaryKind::Pow, T>(lhs, rhs, out);
  case BinaryKind::Mod:
    return binaryPlain<BinaryKind::Mod, T>(lhs, rhs, out);
  case BinaryKind::FMod:
    return binaryPlain<BinaryKind::FMod, T>(lhs, rhs, out);
  }
  return false;
}

template <BinaryKind K> inline float applyF32(float x, float y) {
  if constexpr (K == BinaryKind::Add)
    return x + y;
  else if constexpr (K == BinaryKind::Sub)
    return x - y;
  else if constexpr (K == BinaryKind::Mul)
    return x * y;
  else
    return x / y;
}

/// c = a op b over [rows, cols], b one value per row (`perRow`) or one per
/// column; each branch a loop the compiler vectorises, the op fixed at
/// compile time, and split over the threads by elements where one row or
/// column makes everything. Same shapes are one row per element.
template <BinaryKind K>
void rowColumnF32(const float *a, const float *b, float *c, int64_t rows,
                  int64_t cols, bool perRow) {
  int64_t n = rows * cols;
  if ((perRow && cols == 1) || (!perRow && rows == 1)) {
#pragma omp parallel for simd schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      c[i] = applyF32<K>(a[i], b[i]);
    return;
  }
  if (perRow && rows == 1) { // a scalar
    const float v = b[0];
#pragma omp parallel for simd schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      c[i] = applyF32<K>(a[i], v);
    return;
  }
  if (perRow) {
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < rows; ++i) {
      const float s = b[i];
      const float *x = a + i * cols;
      float *y = c + i * cols;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j)
        y[j] = applyF32<K>(x[j], s);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < rows; ++i) {
    const float *x = a + i * cols;
    float *y = c + i * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j)
      y[j] = applyF32<K>(x[j], b[j]);
  }
}

/// f32 `lhs op rhs` where lhs has the result's shape and rhs has it too, or
/// broadcasts as a per-row scalar ([rows, 1...]) or a per-column vector
/// ([1..., cols]): the shapes of residual adds, softmax gradients and bias
/// adds, which oneDNN 2.6 may run in its slow reference kernel. False for
/// any other pattern.
bool binaryRowColumnF32(BinaryKind kind, const TensorView &lhs,
                        const TensorView &rhs, const TensorView &out) {
  if (kind == BinaryKind::Pow || kind == BinaryKind::Mod ||
      kind == BinaryKind::FMod || out.dtype != DType::F32 ||
      lhs.dtype != DType::F32 || rhs.dtype != DType::F32 ||
      lhs.shape != out.shape || out.rank() == 0)
    return false;
  Shape r = padLeft(rhs.shape, out.shape.size());
  const Shape &o = out.shape;
  int64_t rank = out.rank();
  // Split point k: rhs equals out before k and is 1 from k on (rows), or
  // is 1 before k and equals out from k on (columns).
  int rowsSplit = -1, colsSplit = -1;
  for (int64_t k = 0; k <= rank; ++k) {
    bool prefixEqual = true, suffixOnes = true, prefixOnes = true,
         suffixEqual = true;
    for (int64_t d = 0; d < rank; ++d) {
      if (d < k) {
        prefixEqual &= r[d] == o[d];
        prefixOnes &= r[d] == 1;
      } else {
        suffixOnes &= r[d] == 1;
        suffixEqual &= r[d] == o[d];
      }
    }
    if (rowsSplit < 0 && prefixEqual && suffixOnes)
      rowsSplit = k;
    if (colsSplit < 0 && prefixOnes && suffixEqual)
      colsSplit = k;
  }
  if (rowsSplit < 0 && colsSplit < 0)
    return false;
  int split = rowsSplit >= 0 ? rowsSplit : colsSplit;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < split ? rows : cols) *= o[d];
  const float *a = lhs.as<float>(), *b = rhs.as<float>();
  float *c = out.as<float>();
  bool perRow = rowsSplit >= 0;
  switch (kind) {
  case BinaryKind::Add:
    rowColumnF32<BinaryKind::Add>(a, b, c, rows, cols, perRow);
    break;
  case BinaryKind::Sub:
    rowColumnF32<BinaryKind::Sub>(a, b, c, rows, cols, perRow);
    break;
  case BinaryKind::Mul:
    rowColumnF32<BinaryKind::Mul>(a, b, c, rows, cols, perRow);
    break;
  default:
    rowColumnF32<BinaryKind::Div>(a, b, c, rows, cols, perRow);
    break;
  }
  return true;
}

/// oneDNN binary needs src0 to have the result's shape; src1 may broadcast.
/// Commutative ops swap their operands to get there.
bool binaryOneDnn(CpuContext &ctx, BinaryKind kind, const TensorView &lhs,
                  const TensorView &rhs, const TensorView &out) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || kind == BinaryKind::Pow || kind == BinaryKind::Mod ||
      kind == BinaryKind::FMod || out.numElements() == 0 ||
      out.rank() > DNNL_MAX_NDIMS)
    return false;
  size_t rank = std::max<size_t>(out.shape.size(), 1);
  Shape o = padLeft(out.shape, rank), l = padLeft(lhs.shape, rank),
        r = padLeft(rhs.shape, rank);
  const TensorView *src0 = &lhs, *src1 = &rhs;
  if (l != o) {
    if (r != o || kind == BinaryKind::Sub || kind == BinaryKind::Div)
      return false;
    std::swap(src0, src1);
    std::swap(l, r);
  }
  dnnl::algorithm alg = kind == BinaryKind::Add   ? dnnl::algorithm::binary_add
                        : kind == BinaryKind::Sub ? dnnl::algorithm::binary_sub
                        : kind == BinaryKind::Mul ? dnnl::algorithm::binary_mul
                                                  : dnnl::algorithm::binary_div;
  try {
    auto prim = ctx.primitives.get(
        CacheKey("binary").add(static_cast<int64_t>(alg)).add(l).add(r), [&] {
          dnnl::binary::desc desc(alg, plainDesc(l), plainDesc(r),
                                  plainDesc(o));
          return makeCached<dnnl::binary>(dnnl::binary::primitive_desc(
              desc, userScratchpadAttr(), cpuEngine()));
        });
    execute(*prim, {{DNNL_ARG_SRC_0, wrapMemory(plainDesc(l), src0->data)},
                    {DNNL_ARG_SRC_1, wrapMemory(plainDesc(r), src1->data)},
                    {DNNL_ARG_DST, wrapMemory(plainDesc(o), out.data)}});
  } catch (const dnnl::error &) {
    return false; // a shape oneDNN does not take: the plain loop does
  }
  return true;
#else
  return false;
#endif
}

std::string binaryKernel(CpuContext &ctx, const KernelArgs &args,
                         BinaryKind kind) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &lhs = a.inputs[0], &rhs = a.inputs[1],
                     &out = a.outputs[0];
    if (lhs.dtype != out.dtype || rhs.dtype != out.dtype)
      return "operands of '" + std::string(a.op) + "' have element types " +
             dtypeName(lhs.dtype) + " and " + dtypeName(rhs.dtype) +
             ", result " + dtypeName(out.dtype);
    if (!broadcastsTo(lhs.shape, out.shape) ||
        !broadcastsTo(rhs.shape, out.shape))
      return std::string(a.op) + ": operands " + formatShape(lhs.shape) +
             " and " + formatShape(rhs.shape) + " do not broadcast to " +
             formatShape(out.shape);
    if (ctx.useOneDnn && binaryRowColumnF32(kind, lhs, rhs, out))
      return {};
    if (out.dtype == DType::F32 && binaryOneDnn(ctx, kind, lhs, rhs, out))
      return {};
    return dispatchNumeric(out.dtype, a.op, [&](auto tag) -> std::string {
      if (binaryPlain<decltype(tag)>(kind, lhs, rhs, out))
        return {};
      if (kind == BinaryKind::Mod || kind == BinaryKind::FMod)
        return "integer remainder by zero";
      return kind == BinaryKind::Div ? "integer division by zero"
                                     : "zero raised to a negative integer "
                                       "power (a division by zero)";
    });
  });
}

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

enum class UnaryKind {
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

template <UnaryKind K> inline float unaryOp(float x) {
  if constexpr (K == UnaryKind::Neg)
    return -x;
  else if constexpr (K == UnaryKind::Exp)
    return std::exp(x);
  else if constexpr (K == UnaryKind::Log)
    return std::log(x);
  else if constexpr (K == UnaryKind::Sqrt)
    return std::sqrt(x);
  else if constexpr (K == UnaryKind::Erf)
    return std::erf(x);
  else if constexpr (K == UnaryKind::Tanh)
    return std::tanh(x);
  else if constexpr (K == UnaryKind::Relu)
    return x < 0 ? 0.0f : x; // NaN stays NaN
  else if constexpr (K == UnaryKind::Sigmoid)
    return 1.0f / (1.0f + std::exp(-x));
  else if constexpr (K == UnaryKind::Gelu) // erfc keeps the negative tail
    return static_cast<float>(0.5 * x * std::erfc(-x * kSqrtHalf));
  else {
    double v = x, inner = kSqrt2OverPi * (v + 0.044715 * v * v * v);
    return static_cast<float>(0.5 * v * (1.0 + std::tanh(inner)));
  }
}

template <UnaryKind K> void unaryPlain(const float *in, float *out, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    out[i] = unaryOp<K>(in[i]);
}

void unaryPlain(UnaryKind kind, const float *in, float *out, int64_t n) {
  switch (kind) {
  case UnaryKind::Neg:
    return unaryPlain<UnaryKind::Neg>(in, out, n);
  case UnaryKind::Exp:
    return unaryPlain<UnaryKind::Exp>(in, out, n);
  case UnaryKind::Log:
    return unaryPlain<UnaryKind::Log>(in, out, n);
  case UnaryKind::Sqrt:
    return unaryPlain<UnaryKind::Sqrt>(in, out, n);
  case UnaryKind::Erf:
    return unaryPlain<UnaryKind::Erf>(in, out, n);
  case UnaryKind::Tanh:
    return unaryPlain<UnaryKind::Tanh>(in, out, n);
  case UnaryKind::Relu:
    return unaryPlain<UnaryKind::Relu>(in, out, n);
  case UnaryKind::Sigmoid:
    return unaryPlain<UnaryKind::Sigmoid>(in, out, n);
  case UnaryKind::Gelu:
    return unaryPlain<UnaryKind::Gelu>(in, out, n);
  case UnaryKind::GeluTanh:
    return unaryPlain<UnaryKind::GeluTanh>(in, out, n);
  }
}

/// oneDNN eltwise on the data as one flat vector.
bool unaryOneDnn(CpuContext &ctx, UnaryKind kind, const float *in, float *out,
                 int64_t n) {
#if LOOM_HAVE_DNNL
  using dnnl::algorithm;
  // erf has no eltwise; neg stays plain so that -0.0 keeps its sign, relu
  // so that NaN stays NaN (oneDNN's relu maps NaN to 0). Both are
  // memory-bound, so the plain loop is as fast. oneDNN's exp maps NaN to
  // inf: it is patched afterwards, which needs the input intact. oneDNN's
  // log is off by about 1e-6 near 1 (log(1) = -1e-6), beyond the 1e-7
  // absolute tolerance ONNX's tests hold it to: log stays plain too.
  if (!ctx.useOneDnn || kind == UnaryKind::Erf || kind == UnaryKind::Neg ||
      kind == UnaryKind::Relu || kind == UnaryKind::Log ||
      (kind == UnaryKind::Exp && in == out) || n == 0)
    return false;
  algorithm alg;
  switch (kind) {
  case UnaryKind::Exp:
    alg = algorithm::eltwise_exp;
    break;
  case UnaryKind::Log:
    alg = algorithm::eltwise_log;
    break;
  case UnaryKind::Sqrt:
    alg = algorithm::eltwise_sqrt;
    break;
  case UnaryKind::Tanh:
    alg = algorithm::eltwise_tanh;
    break;
  case UnaryKind::Sigmoid:
    alg = algorithm::eltwise_logistic;
    break;
  case UnaryKind::Gelu:
    alg = algorithm::eltwise_gelu_erf;
    break;
  default:
    alg = algorithm::eltwise_gelu_tanh;
    break;
  }
  dnnl::memory::desc md = plainDesc({n});
  try {
    auto prim = ctx.primitives.get(
        CacheKey("eltwise").add(static_cast<int64_t>(alg)).add(n), [&] {
          dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                           alg, md, 0.0f, 0.0f);
          return makeCached<dnnl::eltwise_forward>(
              dnnl::eltwise_forward::primitive_desc(desc, userScratchpadAttr(),
                                                    cpuEngine()));
        });
    execute(*prim, {{DNNL_ARG_SRC, wrapMemory(md, in)},
                    {DNNL_ARG_DST, wrapMemory(md, out)}});
  } catch (const dnnl::error &) {
    return false;
  }
  if (kind == UnaryKind::Exp) {
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      if (std::isnan(in[i]))
        out[i] = in[i];
  }
  return true;
#else
  return false;
#endif
}

template <typename T> void negInt(const T *in, T *out, int64_t n) {
  using U = std::make_unsigned_t<T>;
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(U(0) - static_cast<U>(in[i]));
}

std::string unaryKernel(CpuContext &ctx, const KernelArgs &args,
                        UnaryKind kind) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    if (in.dtype != out.dtype)
      return "input and result of '" + std::string(a.op) +
             "' differ in element type";
    if (std::string error = expectShape(a.op, "result", out, in.shape);
        !error.empty())
      return error;
    int64_t n = out.numElements();
    switch (in.dtype) {
    case DType::F32:
      if (!unaryOneDnn(ctx, kind, in.as<float>(), out.as<float>(), n))
        unaryPlain(kind, in.as<float>(), out.as<float>(), n);
      return {};
    case DType::I32:
    case DType::I64:
      if (kind != UnaryKind::Neg)
        break;
      if (in.dtype == DType::I32)
        negInt(in.as<int32_t>(), out.as<int32_t>(), n);
      else
        negInt(in.as<int64_t>(), out.as<int64_t>(), n);
      return {};
    default:
      break;
    }
    return unsupportedType(a.op, in.dtype);
  });
}

//===--- The functions of ElementwiseMath.h and unary_grad ----------------===//

namespace math = loom::ops::math;

template <math::UnaryFn F>
void mathValue(const float *in, float *out, int64_t n, float alpha,
               float beta) {
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    out[i] = math::unaryValue<F>(in[i], alpha, beta);
}

template <math::UnaryFn F>
void mathGrad(const float *x, const float *dy, float *dx, int64_t n,
              float alpha, float beta) {
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * math::unaryDerivative<F>(x[i], alpha, beta);
}

/// |x| with wrap-around: the minimum stays itself.
template <typename T> void absInt(const T *in, T *out, int64_t n) {
  using U = std::make_unsigned_t<T>;
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    out[i] = in[i] < 0 ? static_cast<T>(U(0) - static_cast<U>(in[i])) : in[i];
}

/// An op of ElementwiseMath.h, its parameters read from its attributes.
std::string mathKernel(const KernelArgs &args, const math::UnaryFnInfo &info) {
  auto param = [&](const char *name) {
    return name ? static_cast<float>(args.attrs.getFloat(name)) : 0.0f;
  };
  float alpha = param(info.alpha), beta = param(info.beta);
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    if (in.dtype != out.dtype)
      return "input and result of '" + std::string(a.op) +
             "' differ in element type";
    if (std::string error = expectShape(a.op, "result", out, in.shape);
        !error.empty())
      return error;
    int64_t n = out.numElements();
    if (in.dtype == DType::F32) {
      math::visitUnaryFn(info.fn, [&](auto f) {
        mathValue<decltype(f)::value>(in.as<float>(), out.as<float>(), n, alpha,
                                      beta);
      });
      return {};
    }
    if (info.fn == math::UnaryFn::Abs && in.dtype == DType::I32) {
      absInt(in.as<int32_t>(), out.as<int32_t>(), n);
      return {};
    }
    if (info.fn == math::UnaryFn::Abs && in.dtype == DType::I64) {
      absInt(in.as<int64_t>(), out.as<int64_t>(), n);
      return {};
    }
    return unsupportedType(a.op, in.dtype);
  });
}

/// unary_grad(x, dy) {fn, alpha, beta}: dy * fn'(x).
std::string unaryGradKernel(const KernelArgs &args) {
  std::string fn = args.attrs.getString("fn");
  const math::UnaryFnInfo *info = math::findUnaryFn(fn);
  if (!info)
    return "unary_grad: fn '" + fn + "' is not one of " +
           std::string(math::unaryFnNames());
  float alpha = static_cast<float>(args.attrs.getFloat("alpha")),
        beta = static_cast<float>(args.attrs.getFloat("beta"));
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &x = a.inputs[0], &dy = a.inputs[1], &dx = a.outputs[0];
    if (x.dtype != DType::F32)
      return unsupportedType(a.op, x.dtype);
    if (dy.dtype != x.dtype || dx.dtype != x.dtype)
      return "input, grad and result of '" + std::string(a.op) +
             "' differ in element type";
    for (std::string error : {expectShape(a.op, "grad", dy, x.shape),
                              expectShape(a.op, "result", dx, x.shape)})
      if (!error.empty())
        return error;
    math::visitUnaryFn(info->fn, [&](auto f) {
      mathGrad<decltype(f)::value>(x.as<float>(), dy.as<float>(),
                                   dx.as<float>(), x.numElements(), alpha,
                                   beta);
    });
    return {};
  });
}

} // namespace

void registerElementwiseKernels(KernelTable &table) {
  auto binary = [](BinaryKind kind) {
    return KernelEntry{[kind](CpuContext &ctx, const KernelArgs &args) {
                         return binaryKernel(ctx, args, kind);
                       },
                       2, 2};
  };
  table["add"] = binary(BinaryKind::Add);
  table["sub"] = binary(BinaryKind::Sub);
  table["mul"] = binary(BinaryKind::Mul);
  table["div"] = binary(BinaryKind::Div);
  table["pow"] = binary(BinaryKind::Pow);
  table["mod"] = binary(BinaryKind::Mod);
  table["fmod"] = binary(BinaryKind::FMod);

  auto unary = [](UnaryKind kind) {
    return KernelEntry{[kind](CpuContext &ctx, const KernelArgs &args) {
                         return unaryKernel(ctx, args, kind);
                       },
                       1, 1};
  };
  table["neg"] = unary(UnaryKind::Neg);
  table["exp"] = unary(UnaryKind::Exp);
  table["log"] = unary(UnaryKind::Log);
  table["sqrt"] = unary(UnaryKind::Sqrt);
  table["erf"] = unary(UnaryKind::Erf);
  table["tanh"] = unary(UnaryKind::Tanh);
  table["relu"] = unary(UnaryKind::Relu);
  table["sigmoid"] = unary(UnaryKind::Sigmoid);
  table["gelu"] = {[](CpuContext &ctx, const KernelArgs &args) {
                     return unaryKernel(ctx, args,
                                        args.attrs.getBool("tanh_approximation")
                                            ? UnaryKind::GeluTanh
                                            : UnaryKind::Gelu);
                   },
                   1, 1};
  for (const math::UnaryFnInfo &info : math::kUnaryFns)
    table[info.name] = {[&info](CpuContext &, const KernelArgs &args) {
                          return mathKernel(args, info);
                        },
                        1, 1};
  table["unary_grad"] = {[](CpuContext &, const KernelArgs &args) {
                           return unaryGradKernel(args);
                         },
                         2, 2};
}

} // namespace loom::rt::cpu
