//===- Compare.cu - Comparisons, logic, max, min and trilu CUDA kernels ---===//
//
// The comparisons and logic ops write bool masks (one byte per element);
// max and min pick one operand per element (NaN wins, as in numpy); all
// broadcast through an Indexer, as the binary ops do. f16 and bf16 compare
// in f32. trilu zeroes the elements of each matrix outside its triangle.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

namespace loom::rt::cuda {
namespace {

enum class Mask { Equal, Less, LessEqual, Greater, GreaterEqual, And, Or, Xor };

template <typename T> __device__ auto widen(T x) {
  if constexpr (std::is_integral_v<T>)
    return x;
  else
    return toFloat(x);
}

template <Mask K, typename T>
__global__ void maskKernel(const T *a, const T *b, uint8_t *out, int64_t n,
                           Indexer<2> ix) {
  LOOM_GRID_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    auto x = widen(a[off[0]]), y = widen(b[off[1]]);
    bool r;
    if constexpr (K == Mask::Equal)
      r = x == y;
    else if constexpr (K == Mask::Less)
      r = x < y;
    else if constexpr (K == Mask::LessEqual)
      r = x <= y;
    else if constexpr (K == Mask::Greater)
      r = x > y;
    else if constexpr (K == Mask::GreaterEqual)
      r = x >= y;
    else if constexpr (K == Mask::And)
      r = x != 0 && y != 0;
    else if constexpr (K == Mask::Or)
      r = x != 0 || y != 0;
    else
      r = (x != 0) != (y != 0);
    out[i] = r;
  }
}

template <bool Max, typename T>
__global__ void extremumKernel(const T *a, const T *b, T *out, int64_t n,
                               Indexer<2> ix) {
  LOOM_GRID_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    T x = a[off[0]], y = b[off[1]];
    auto xv = widen(x), yv = widen(y);
    bool takeX = Max ? xv > yv : xv < yv;
    if constexpr (!std::is_integral_v<T>)
      takeX = takeX || isnan(xv); // NaN propagates
    out[i] = takeX ? x : y;
  }
}

__global__ void notKernel(const uint8_t *in, uint8_t *out, int64_t n) {
  LOOM_GRID_LOOP(i, n) { out[i] = in[i] == 0; }
}

template <typename T>
__global__ void triluKernel(const T *in, T *out, int64_t n, int64_t rows,
                            int64_t cols, bool upper, int64_t k) {
  LOOM_GRID_LOOP(i, n) {
    int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = upper ? col - row >= k : col - row <= k;
    out[i] = keep ? in[i] : T(0);
  }
}

/// The indexer of a binary op over `out`, or an error.
std::string binaryIndexer(const KernelArgs &args, Indexer<2> &ix) {
  const TensorView &a = args.inputs[0], &b = args.inputs[1],
                   &out = args.outputs[0];
  std::vector<int64_t> sa = broadcastStrides(a.shape, out.shape),
                       sb = broadcastStrides(b.shape, out.shape);
  if (!out.shape.empty() && (sa.empty() || sb.empty()))
    return "cuda kernel '" + std::string(args.op) +
           "': " + formatShape(a.shape) + " and " + formatShape(b.shape) +
           " do not broadcast to " + formatShape(out.shape);
  if (!makeIndexer<2>(out.shape, {sa, sb}, ix))
    return "cuda kernel '" + std::string(args.op) + "': more than " +
           std::to_string(kMaxRank) + " dimensions";
  return "";
}

/// Calls f(T{}) with the device type of a float, i32 or i64 tensor; false
/// for others.
template <typename F> bool dispatchNumeric(DType dtype, F &&f) {
  if (dispatchFloat(dtype, f))
    return true;
  if (dtype == DType::I32)
    f(int32_t{});
  else if (dtype == DType::I64)
    f(int64_t{});
  else
    return false;
  return true;
}

template <Mask K>
std::string runMask(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &a = args.inputs[0], &b = args.inputs[1],
                   &out = args.outputs[0];
  if (a.dtype != b.dtype || out.dtype != DType::Bool)
    return "cuda kernel '" + std::string(args.op) +
           "' needs operands of one element type and a bool result, got " +
           dtypeName(a.dtype) + ", " + dtypeName(b.dtype) + " -> " +
           dtypeName(out.dtype);
  Indexer<2> ix;
  if (auto e = binaryIndexer(args, ix); !e.empty())
    return e;
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  auto launch = [&](auto t) {
    using T = decltype(t);
    maskKernel<K, T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        a.as<T>(), b.as<T>(), out.as<uint8_t>(), n, ix);
  };
  constexpr bool logic = K == Mask::And || K == Mask::Or || K == Mask::Xor;
  if (a.dtype == DType::Bool && (logic || K == Mask::Equal))
    launch(uint8_t{});
  else if (logic || a.dtype == DType::Bool || !dispatchNumeric(a.dtype, launch))
    return unsupportedType(args.op, a.dtype);
  return launchStatus(args.op);
}

template <bool Max>
std::string runExtremum(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &a = args.inputs[0], &b = args.inputs[1],
                   &out = args.outputs[0];
  if (a.dtype != b.dtype || a.dtype != out.dtype)
    return "cuda kernel '" + std::string(args.op) +
           "' needs one element type, got " + dtypeName(a.dtype) + ", " +
           dtypeName(b.dtype) + " -> " + dtypeName(out.dtype);
  Indexer<2> ix;
  if (auto e = binaryIndexer(args, ix); !e.empty())
    return e;
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  bool known = dispatchNumeric(a.dtype, [&](auto t) {
    using T = decltype(t);
    extremumKernel<Max, T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        a.as<T>(), b.as<T>(), out.as<T>(), n, ix);
  });
  return known ? launchStatus(args.op) : unsupportedType(args.op, a.dtype);
}

std::string runNot(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != DType::Bool || out.dtype != DType::Bool ||
      in.shape != out.shape)
    return "cuda kernel 'not' needs a bool input and a result of its shape";
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  notKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(in.as<uint8_t>(),
                                                       out.as<uint8_t>(), n);
  return launchStatus(args.op);
}

std::string runTrilu(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape || in.rank() < 2)
    return "cuda kernel 'trilu' needs a result of its input's type, rank at "
           "least 2";
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  int64_t rows = in.shape[in.rank() - 2], cols = in.shape[in.rank() - 1];
  bool upper = args.attrs.getBool("upper");
  int64_t k = args.attrs.getInt("k");
  dispatchBySize(in.dtype, [&](auto t) {
    using T = decltype(t);
    triluKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in.as<T>(), out.as<T>(), n, rows, cols, upper, k);
  });
  return launchStatus(args.op);
}

} // namespace

void registerCompareKernels(KernelTable &table) {
  table["equal"] = {runMask<Mask::Equal>, 2, 2};
  table["less"] = {runMask<Mask::Less>, 2, 2};
  table["less_equal"] = {runMask<Mask::LessEqual>, 2, 2};
  table["greater"] = {runMask<Mask::Greater>, 2, 2};
  table["greater_equal"] = {runMask<Mask::GreaterEqual>, 2, 2};
  table["and"] = {runMask<Mask::And>, 2, 2};
  table["or"] = {runMask<Mask::Or>, 2, 2};
  table["xor"] = {runMask<Mask::Xor>, 2, 2};
  table["not"] = {runNot, 1, 1};
  table["max"] = {runExtremum<true>, 2, 2};
  table["min"] = {runExtremum<false>, 2, 2};
  table["trilu"] = {runTrilu, 1, 1};
}

} // namespace loom::rt::cuda
