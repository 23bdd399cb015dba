//===- Indexing.cu - Element indexing, scans, top-k and products on CUDA --===//
//
// gather_elements and scatter_elements (one thread per index element; an
// index out of range is a device error; scatter_elements with `accumulate`
// adds atomically, so f32 sums over repeated indices may differ from the
// CPU's in the last bits, and without it a repeated index keeps one update
// of the several), cumsum and top_k (one thread per row along the axis;
// top_k selects k times, O(n k) per row), reduce_prod and reduce_prod_grad
// (one thread per reduction; floats multiply in double).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

#include <algorithm>
#include <type_traits>

namespace loom::rt::cuda {
namespace {

/// Calls f(T{}) with the device type of a float, i32 or i64 tensor.
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

template <typename T> __device__ double widen(T x) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<double>(x);
  else
    return static_cast<double>(toFloat(x));
}

template <typename T> __device__ T narrow(double x) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(x);
  else
    return fromFloat<T>(static_cast<float>(x));
}

/// Where the index elements point in the data: the indices' shape and the
/// data's strides.
struct ElementGeometry {
  int rank = 0, axis = 0;
  int64_t axisSize = 0;
  int64_t indexDims[kMaxRank] = {};
  int64_t dataStrides[kMaxRank] = {};
};

/// The data offset of index element `e` holding `k`, or -1 out of range.
__device__ int64_t elementOffset(const ElementGeometry &g, int64_t e,
                                 int64_t k) {
  if (k < 0)
    k += g.axisSize;
  if (k < 0 || k >= g.axisSize)
    return -1;
  int64_t offset = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    int64_t c = e % g.indexDims[d];
    e /= g.indexDims[d];
    offset += (d == g.axis ? k : c) * g.dataStrides[d];
  }
  return offset;
}

std::string elementGeometry(const KernelArgs &args, const TensorView &data,
                            const TensorView &indices, ElementGeometry &g) {
  std::string op = "cuda kernel '" + std::string(args.op) + "': ";
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= data.rank() || indices.rank() != data.rank())
    return op + "axis or indices do not fit the data";
  if (data.rank() > kMaxRank)
    return op + "more than " + std::to_string(kMaxRank) + " dimensions";
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return op + "indices must be i32 or i64";
  std::vector<int64_t> strides = denseStrides(data.shape);
  g.rank = static_cast<int>(data.rank());
  g.axis = static_cast<int>(axis);
  g.axisSize = data.shape[axis];
  for (int d = 0; d < g.rank; ++d) {
    if (d != axis && indices.shape[d] > data.shape[d])
      return op + "indices exceed the data outside the axis";
    g.indexDims[d] = indices.shape[d];
    g.dataStrides[d] = strides[d];
  }
  return "";
}

template <typename T, typename I>
__global__ void gatherElementsKernel(const T *in, const I *index, T *out,
                                     int64_t n, ElementGeometry g,
                                     int *errorWord) {
  LOOM_GRID_LOOP(e, n) {
    int64_t at = elementOffset(g, e, static_cast<int64_t>(index[e]));
    if (at < 0) {
      raise(errorWord, kIndexOutOfRange);
      out[e] = T{};
      continue;
    }
    out[e] = in[at];
  }
}

__device__ void atomicAccumulate(float *p, float v) { atomicAdd(p, v); }
__device__ void atomicAccumulate(__half *p, __half v) { atomicAdd(p, v); }
__device__ void atomicAccumulate(__nv_bfloat16 *p, __nv_bfloat16 v) {
  atomicAdd(p, v);
}
__device__ void atomicAccumulate(int32_t *p, int32_t v) { atomicAdd(p, v); }
__device__ void atomicAccumulate(int64_t *p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long *>(p),
            static_cast<unsigned long long>(v));
}

template <typename T, typename I, bool Accumulate>
__global__ void scatterElementsKernel(const I *index, const T *updates, T *out,
                                      int64_t n, ElementGeometry g,
                                      int *errorWord) {
  LOOM_GRID_LOOP(e, n) {
    int64_t at = elementOffset(g, e, static_cast<int64_t>(index[e]));
    if (at < 0) {
      raise(errorWord, kIndexOutOfRange);
      continue;
    }
    if constexpr (Accumulate)
      atomicAccumulate(out + at, updates[e]);
    else
      out[at] = updates[e];
  }
}

std::string runGatherElements(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &index = args.inputs[1],
                   &out = args.outputs[0];
  ElementGeometry g;
  if (std::string e = elementGeometry(args, in, index, g); !e.empty())
    return e;
  if (out.shape != index.shape || out.dtype != in.dtype)
    return "cuda kernel 'gather_elements': the result does not match";
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  dispatchBySize(out.dtype, [&](auto t) {
    using T = decltype(t);
    if (index.dtype == DType::I32)
      gatherElementsKernel<T, int32_t>
          <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
              in.as<T>(), index.as<int32_t>(), out.as<T>(), n, g,
              ctx.errorWord);
    else
      gatherElementsKernel<T, int64_t>
          <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
              in.as<T>(), index.as<int64_t>(), out.as<T>(), n, g,
              ctx.errorWord);
  });
  return launchStatus(args.op);
}

std::string runScatterElements(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &data = args.inputs[0], &index = args.inputs[1],
                   &updates = args.inputs[2], &out = args.outputs[0];
  ElementGeometry g;
  if (std::string e = elementGeometry(args, data, index, g); !e.empty())
    return e;
  if (out.shape != data.shape || out.dtype != data.dtype ||
      updates.shape != index.shape || updates.dtype != data.dtype)
    return "cuda kernel 'scatter_elements': updates or the result do not "
           "match";
  if (out.data != data.data && data.bytes() != 0)
    cudaMemcpyAsync(out.data, data.data, data.bytes(), cudaMemcpyDeviceToDevice,
                    ctx.stream);
  int64_t n = updates.numElements();
  if (n == 0)
    return launchStatus(args.op);
  auto launch = [&](auto t, auto accumulate) {
    using T = decltype(t);
    constexpr bool kAdd = decltype(accumulate)::value;
    if (index.dtype == DType::I32)
      scatterElementsKernel<T, int32_t, kAdd>
          <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
              index.as<int32_t>(), updates.as<T>(), out.as<T>(), n, g,
              ctx.errorWord);
    else
      scatterElementsKernel<T, int64_t, kAdd>
          <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
              index.as<int64_t>(), updates.as<T>(), out.as<T>(), n, g,
              ctx.errorWord);
  };
  if (args.attrs.getBool("accumulate")) {
    if (!dispatchNumeric(out.dtype,
                         [&](auto t) { launch(t, std::true_type{}); }))
      return unsupportedType(args.op, out.dtype);
  } else {
    dispatchBySize(out.dtype, [&](auto t) { launch(t, std::false_type{}); });
  }
  return launchStatus(args.op);
}

/// outer, n (the axis) and inner of `shape` split at `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit splitAt(const Shape &shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis)
      s.n = shape[d];
    else
      s.inner *= shape[d];
  return s;
}

template <typename T>
__global__ void cumsumKernel(const T *in, T *out, AxisSplit s, bool exclusive,
                             bool reverse) {
  LOOM_GRID_LOOP(r, s.outer * s.inner) {
    int64_t base = (r / s.inner) * s.n * s.inner + r % s.inner;
    using Acc = std::conditional_t<std::is_integral_v<T>, T, double>;
    Acc sum = 0;
    for (int64_t j = 0; j < s.n; ++j) {
      int64_t at = base + (reverse ? s.n - 1 - j : j) * s.inner;
      Acc v;
      if constexpr (std::is_integral_v<T>)
        v = in[at];
      else
        v = widen(in[at]);
      Acc before = sum;
      sum += v;
      if constexpr (std::is_integral_v<T>)
        out[at] = exclusive ? before : sum;
      else
        out[at] = narrow<T>(exclusive ? before : sum);
    }
  }
}

std::string runCumsum(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= in.rank() || out.shape != in.shape)
    return "cuda kernel 'cumsum': axis or result do not fit the input";
  AxisSplit s = splitAt(in.shape, axis);
  int64_t rows = s.outer * s.inner;
  if (rows == 0 || s.n == 0)
    return "";
  bool exclusive = args.attrs.getBool("exclusive"),
       reverse = args.attrs.getBool("reverse");
  if (!dispatchNumeric(in.dtype, [&](auto t) {
        using T = decltype(t);
        cumsumKernel<T><<<blocksFor(rows), kThreads, 0, ctx.stream>>>(
            in.as<T>(), out.as<T>(), s, exclusive, reverse);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

/// Whether element p goes before q in top_k's order: NaN above every
/// number, then by value, ties by lower index.
template <typename T>
__device__ bool topBefore(const T *row, int64_t inner, int64_t p, int64_t q,
                          bool smallest) {
  if constexpr (std::is_integral_v<T>) {
    T xp = row[p * inner], xq = row[q * inner];
    if (xp != xq)
      return smallest ? xp < xq : xp > xq;
  } else {
    float xp = toFloat(row[p * inner]), xq = toFloat(row[q * inner]);
    bool np = isnan(xp), nq = isnan(xq);
    if (np || nq)
      return np != nq ? np != smallest : p < q;
    if (xp != xq)
      return smallest ? xp < xq : xp > xq;
  }
  return p < q;
}

template <typename T>
__global__ void topKKernel(const T *in, T *values, int64_t *indices,
                           AxisSplit s, int64_t k, bool smallest) {
  LOOM_GRID_LOOP(r, s.outer * s.inner) {
    int64_t o = r / s.inner, i = r % s.inner;
    const T *row = in + o * s.n * s.inner + i;
    int64_t prev = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t q = 0; q < s.n; ++q)
        if ((prev < 0 || topBefore(row, s.inner, prev, q, smallest)) &&
            (best < 0 || topBefore(row, s.inner, q, best, smallest)))
          best = q;
      int64_t at = (o * k + j) * s.inner + i;
      indices[at] = best;
      values[at] = row[best * s.inner];
      prev = best;
    }
  }
}

std::string runTopK(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &values = args.outputs[0],
                   &indices = args.outputs[1];
  int64_t axis = args.attrs.getInt("axis"), k = args.attrs.getInt("k");
  if (axis < 0 || axis >= in.rank() || k < 0 || k > in.shape[axis] ||
      indices.dtype != DType::I64 || values.dtype != in.dtype ||
      values.numElements() != indices.numElements())
    return "cuda kernel 'top_k': axis, k or the results do not fit the input";
  AxisSplit s = splitAt(in.shape, axis);
  int64_t rows = s.outer * s.inner;
  if (rows == 0 || k == 0)
    return "";
  bool smallest = args.attrs.getBool("smallest");
  if (!dispatchNumeric(in.dtype, [&](auto t) {
        using T = decltype(t);
        topKKernel<T><<<blocksFor(rows), kThreads, 0, ctx.stream>>>(
            in.as<T>(), values.as<T>(), indices.as<int64_t>(), s, k, smallest);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

/// A reduction's kept and reduced dimensions: output o covers the input
/// elements base(o) + offset(r) for r in [0, count).
struct ReduceGeometry {
  int kept = 0, reduced = 0;
  int64_t keptDims[kMaxRank] = {}, keptStrides[kMaxRank] = {};
  int64_t reducedDims[kMaxRank] = {}, reducedStrides[kMaxRank] = {};
  int64_t outputs = 1, count = 1;

  __device__ int64_t base(int64_t o) const {
    int64_t offset = 0;
    for (int d = kept - 1; d >= 0; --d) {
      offset += (o % keptDims[d]) * keptStrides[d];
      o /= keptDims[d];
    }
    return offset;
  }
  __device__ int64_t offset(int64_t r) const {
    int64_t offset = 0;
    for (int d = reduced - 1; d >= 0; --d) {
      offset += (r % reducedDims[d]) * reducedStrides[d];
      r /= reducedDims[d];
    }
    return offset;
  }
};

std::string reduceGeometry(const KernelArgs &args, const TensorView &in,
                           ReduceGeometry &g) {
  std::string op = "cuda kernel '" + std::string(args.op) + "': ";
  if (in.rank() > kMaxRank)
    return op + "more than " + std::to_string(kMaxRank) + " dimensions";
  std::vector<int64_t> axes = args.attrs.getInts("axes"),
                       strides = denseStrides(in.shape);
  for (int64_t a : axes)
    if (a < 0 || a >= in.rank())
      return op + "a reduction axis is out of range";
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) {
      g.reducedDims[g.reduced] = in.shape[d];
      g.reducedStrides[g.reduced++] = strides[d];
      g.count *= in.shape[d];
    } else {
      g.keptDims[g.kept] = in.shape[d];
      g.keptStrides[g.kept++] = strides[d];
      g.outputs *= in.shape[d];
    }
  }
  return "";
}

template <typename T>
__global__ void reduceProdKernel(const T *in, T *out, ReduceGeometry g) {
  LOOM_GRID_LOOP(o, g.outputs) {
    int64_t base = g.base(o);
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      U prod = 1;
      for (int64_t r = 0; r < g.count; ++r)
        prod = static_cast<U>(prod * static_cast<U>(in[base + g.offset(r)]));
      out[o] = static_cast<T>(prod);
    } else {
      double prod = 1;
      for (int64_t r = 0; r < g.count; ++r)
        prod *= widen(in[base + g.offset(r)]);
      out[o] = narrow<T>(prod);
    }
  }
}

std::string runReduceProd(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  ReduceGeometry g;
  if (std::string e = reduceGeometry(args, in, g); !e.empty())
    return e;
  if (out.numElements() != g.outputs || out.dtype != in.dtype)
    return "cuda kernel 'reduce_prod': the result does not match";
  if (g.outputs == 0)
    return "";
  if (!dispatchNumeric(in.dtype, [&](auto t) {
        using T = decltype(t);
        reduceProdKernel<T><<<blocksFor(g.outputs), kThreads, 0, ctx.stream>>>(
            in.as<T>(), out.as<T>(), g);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

/// grad times the product of the other elements of each reduction (see
/// the CPU kernel): counted zeros and the product of the rest.
template <typename T>
__global__ void reduceProdGradKernel(const T *in, const T *grad, T *out,
                                     ReduceGeometry g) {
  LOOM_GRID_LOOP(o, g.outputs) {
    int64_t base = g.base(o), zeros = 0;
    double nonZero = 1;
    for (int64_t r = 0; r < g.count; ++r) {
      double x = widen(in[base + g.offset(r)]);
      if (x == 0)
        ++zeros;
      else
        nonZero *= x;
    }
    double dy = widen(grad[o]);
    for (int64_t r = 0; r < g.count; ++r) {
      int64_t at = base + g.offset(r);
      double x = widen(in[at]), others = 0;
      if (zeros == 0)
        others = nonZero / x;
      else if (zeros == 1 && x == 0)
        others = nonZero;
      out[at] = narrow<T>(dy * others);
    }
  }
}

std::string runReduceProdGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &grad = args.inputs[1],
                   &out = args.outputs[0];
  ReduceGeometry g;
  if (std::string e = reduceGeometry(args, in, g); !e.empty())
    return e;
  if (grad.numElements() != g.outputs || out.shape != in.shape ||
      grad.dtype != in.dtype || out.dtype != in.dtype)
    return "cuda kernel 'reduce_prod_grad': grad or the result do not match";
  if (g.outputs == 0)
    return "";
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        reduceProdGradKernel<T>
            <<<blocksFor(g.outputs), kThreads, 0, ctx.stream>>>(
                in.as<T>(), grad.as<T>(), out.as<T>(), g);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

} // namespace

void registerIndexingKernels(KernelTable &table) {
  table["gather_elements"] = {runGatherElements, 2, 2};
  table["scatter_elements"] = {runScatterElements, 3, 3};
  table["cumsum"] = {runCumsum, 1, 1};
  table["top_k"] = {runTopK, 1, 1, 2};
  table["reduce_prod"] = {runReduceProd, 1, 1};
  table["reduce_prod_grad"] = {runReduceProdGrad, 2, 2};
}

} // namespace loom::rt::cuda
