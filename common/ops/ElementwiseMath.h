//===- ElementwiseMath.h - Value and derivative of the unary activations --===//
//
// The elementwise unary functions whose value and derivative both backends
// compute (cos, sin, abs, reciprocal, softplus, mish, hard_swish,
// leaky_relu, elu, selu, hard_sigmoid, clip), each written once here in f32
// for the CPU kernels and, compiled by nvcc, for the CUDA kernels. The
// derivatives are PyTorch autograd's, also at the kinks, so that
// `loom.unary_grad` matches torch. Also the comparison of arg_max and
// arg_min. Plain C++17, no LLVM: the runtime includes it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_ELEMENTWISEMATH_H
#define LOOM_COMMON_OPS_ELEMENTWISEMATH_H

#include <math.h>
#include <string_view>
#include <type_traits>

#ifdef __CUDACC__
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

namespace loom::ops::math {

/// A unary function of this header; its op and `loom.unary_grad`'s `fn`
/// have the name kUnaryFns gives it.
enum class UnaryFn : int {
  Cos,
  Sin,
  Abs,
  Reciprocal,
  Softplus,
  Mish,
  HardSwish,
  LeakyRelu,
  Elu,
  Selu,
  HardSigmoid,
  Clip,
};

/// A function's op name and the op's attributes that are its parameters
/// `alpha` and `beta` (null where it has fewer; the parameter is then 0).
struct UnaryFnInfo {
  const char *name;
  UnaryFn fn;
  const char *alpha;
  const char *beta;
};

inline constexpr UnaryFnInfo kUnaryFns[] = {
    {"cos", UnaryFn::Cos, nullptr, nullptr},
    {"sin", UnaryFn::Sin, nullptr, nullptr},
    {"abs", UnaryFn::Abs, nullptr, nullptr},
    {"reciprocal", UnaryFn::Reciprocal, nullptr, nullptr},
    {"softplus", UnaryFn::Softplus, nullptr, nullptr},
    {"mish", UnaryFn::Mish, nullptr, nullptr},
    {"hard_swish", UnaryFn::HardSwish, nullptr, nullptr},
    {"leaky_relu", UnaryFn::LeakyRelu, "alpha", nullptr},
    {"elu", UnaryFn::Elu, "alpha", nullptr},
    {"selu", UnaryFn::Selu, "alpha", "gamma"},
    {"hard_sigmoid", UnaryFn::HardSigmoid, "alpha", "beta"},
    {"clip", UnaryFn::Clip, "min", "max"},
};

/// The function named `name` (an op name without `loom.`), or null.
inline const UnaryFnInfo *findUnaryFn(std::string_view name) {
  for (const UnaryFnInfo &info : kUnaryFns)
    if (name == info.name)
      return &info;
  return nullptr;
}

/// The names kUnaryFns knows, comma-separated, for messages.
inline std::string_view unaryFnNames() {
  return "cos, sin, abs, reciprocal, softplus, mish, hard_swish, leaky_relu, "
         "elu, selu, hard_sigmoid, clip";
}

LOOM_HOST_DEVICE inline float stableSigmoid(float x) {
  if (x >= 0.0f)
    return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}

/// log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
LOOM_HOST_DEVICE inline float stableSoftplus(float x) {
  return (x > 0.0f ? x : 0.0f) + log1pf(expf(-fabsf(x)));
}

/// f(x) with parameters alpha and beta (kUnaryFns says which). NaN stays
/// NaN.
template <UnaryFn F>
LOOM_HOST_DEVICE inline float unaryValue(float x, float alpha, float beta) {
  if constexpr (F == UnaryFn::Cos)
    return cosf(x);
  else if constexpr (F == UnaryFn::Sin)
    return sinf(x);
  else if constexpr (F == UnaryFn::Abs)
    return fabsf(x);
  else if constexpr (F == UnaryFn::Reciprocal)
    return 1.0f / x;
  else if constexpr (F == UnaryFn::Softplus)
    return stableSoftplus(x);
  else if constexpr (F == UnaryFn::Mish)
    return x * tanhf(stableSoftplus(x));
  else if constexpr (F == UnaryFn::HardSwish) {
    float t = x / 6.0f + 0.5f;
    return x * (t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t);
  } else if constexpr (F == UnaryFn::LeakyRelu)
    return x > 0.0f ? x : alpha * x;
  else if constexpr (F == UnaryFn::Elu)
    return x > 0.0f ? x : alpha * expm1f(x);
  else if constexpr (F == UnaryFn::Selu) // beta is gamma
    return beta * (x > 0.0f ? x : alpha * expm1f(x));
  else if constexpr (F == UnaryFn::HardSigmoid) {
    float t = alpha * x + beta;
    return t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
  } else { // Clip to [alpha, beta]; max wins where min > max, as np.clip
    float r = x < alpha ? alpha : x;
    return r > beta ? beta : r;
  }
}

/// f'(x) as PyTorch's autograd takes it, kinks included.
template <UnaryFn F>
LOOM_HOST_DEVICE inline float unaryDerivative(float x, float alpha,
                                              float beta) {
  if constexpr (F == UnaryFn::Cos)
    return -sinf(x);
  else if constexpr (F == UnaryFn::Sin)
    return cosf(x);
  else if constexpr (F == UnaryFn::Abs) // sign(x), 0 at 0
    return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;
  else if constexpr (F == UnaryFn::Reciprocal)
    return -1.0f / (x * x);
  else if constexpr (F == UnaryFn::Softplus)
    return stableSigmoid(x);
  else if constexpr (F == UnaryFn::Mish) {
    float t = tanhf(stableSoftplus(x));
    return t + x * stableSigmoid(x) * (1.0f - t * t);
  } else if constexpr (F == UnaryFn::HardSwish)
    return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
  else if constexpr (F == UnaryFn::LeakyRelu)
    return x > 0.0f ? 1.0f : alpha;
  else if constexpr (F == UnaryFn::Elu)
    return x > 0.0f ? 1.0f : alpha * expf(x);
  else if constexpr (F == UnaryFn::Selu)
    return x > 0.0f ? beta : beta * alpha * expf(x);
  else if constexpr (F == UnaryFn::HardSigmoid) {
    float t = alpha * x + beta;
    return t > 0.0f && t < 1.0f ? alpha : 0.0f;
  } else // torch.clamp passes the gradient where min <= x <= max
    return x >= alpha && x <= beta ? 1.0f : 0.0f;
}

/// The function F as a type, for visitUnaryFn.
template <UnaryFn F> struct UnaryFnTag { static constexpr UnaryFn value = F; };

/// Calls `f(UnaryFnTag<F>{})` for the runtime `fn`, so that a kernel is
/// instantiated per function.
template <typename Visitor> auto visitUnaryFn(UnaryFn fn, Visitor &&f) {
  switch (fn) {
#define LOOM_UNARY_FN_CASE(NAME)                                               \
  case UnaryFn::NAME:                                                          \
    return f(UnaryFnTag<UnaryFn::NAME>{});
    LOOM_UNARY_FN_CASE(Cos)
    LOOM_UNARY_FN_CASE(Sin)
    LOOM_UNARY_FN_CASE(Abs)
    LOOM_UNARY_FN_CASE(Reciprocal)
    LOOM_UNARY_FN_CASE(Softplus)
    LOOM_UNARY_FN_CASE(Mish)
    LOOM_UNARY_FN_CASE(HardSwish)
    LOOM_UNARY_FN_CASE(LeakyRelu)
    LOOM_UNARY_FN_CASE(Elu)
    LOOM_UNARY_FN_CASE(Selu)
    LOOM_UNARY_FN_CASE(HardSigmoid)
#undef LOOM_UNARY_FN_CASE
  default:
    return f(UnaryFnTag<UnaryFn::Clip>{});
  }
}

/// Whether the element `x`, at a later index than the current candidate
/// `best`, takes its place in an arg-max (`isMax`) or arg-min: a NaN beats
/// any number (PyTorch's and numpy's argmax give the first NaN), and with
/// `last` an equal element, or a later NaN, wins, so that the last index of
/// the extreme is kept. Half types are compared as float.
template <typename T>
LOOM_HOST_DEVICE inline bool argBetter(T x, T best, bool isMax, bool last) {
  if constexpr (!std::is_integral_v<T>) {
    if (best != best)
      return last && x != x;
    if (x != x)
      return true;
  }
  return isMax ? (x > best || (last && x == best))
               : (x < best || (last && x == best));
}

} // namespace loom::ops::math

#endif // LOOM_COMMON_OPS_ELEMENTWISEMATH_H
