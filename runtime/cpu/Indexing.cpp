//===- Indexing.cpp - Element indexing, scans, top-k and products ---------===//
//
// gather_elements and scatter_elements (one data offset per index element,
// checked before anything is written), cumsum, top_k, reduce_prod and
// reduce_prod_grad. Floats accumulate in double; f16 and bf16 go through
// f32. scatter_elements applies updates in index order, so a repeated index
// without `accumulate` keeps the last update.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/TrainKernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

namespace loom::rt::cpu {
namespace {

/// The accumulator of a T: double for floats, T itself for integers.
template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

template <typename Index>
std::string indexOffsets(std::string_view op, const Shape &data,
                         const TensorView &indices, int64_t axis,
                         std::vector<int64_t> &offsets) {
  std::vector<int64_t> strides = rowMajorStrides(data);
  const Index *idx = indices.as<Index>();
  int64_t n = indices.numElements(), size = data[axis];
  offsets.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, offset = 0;
    for (int64_t d = indices.rank() - 1; d >= 0; --d) {
      int64_t c = rest % indices.shape[d];
      rest /= indices.shape[d];
      if (d != axis)
        offset += c * strides[d];
    }
    int64_t k = idx[i];
    if (k < -size || k >= size)
      return std::string(op) + " index " + std::to_string(k) +
             " is out of range for dimension " + std::to_string(axis) +
             " of size " + std::to_string(size);
    offsets[i] = offset + (k < 0 ? k + size : k) * strides[axis];
  }
  return {};
}

/// The offset in the data of every index element, or what is wrong with
/// the geometry or an index.
std::string elementOffsets(const KernelArgs &args, const TensorView &data,
                           const TensorView &indices,
                           std::vector<int64_t> &offsets) {
  int64_t axis = args.attrs.getInt("axis");
  std::string op(args.op);
  if (axis < 0 || axis >= data.rank() || indices.rank() != data.rank())
    return op + ": axis " + std::to_string(axis) + " or indices " +
           formatShape(indices.shape) + " do not fit the data " +
           formatShape(data.shape);
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.shape[d] > data.shape[d])
      return op + ": indices " + formatShape(indices.shape) +
             " exceed the data " + formatShape(data.shape);
  if (indices.dtype == DType::I32)
    return indexOffsets<int32_t>(op, data.shape, indices, axis, offsets);
  if (indices.dtype == DType::I64)
    return indexOffsets<int64_t>(op, data.shape, indices, axis, offsets);
  return op + ": indices must be i32 or i64";
}

std::string gatherElementsKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &indices = args.inputs[1],
                   &out = args.outputs[0];
  if (std::string e = expectShape(args.op, "result", out, indices.shape);
      !e.empty())
    return e;
  std::vector<int64_t> offsets;
  if (std::string e = elementOffsets(args, in, indices, offsets); !e.empty())
    return e;
  dispatchBySize(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *src = in.as<T>();
    T *dst = out.as<T>();
    for (size_t i = 0; i < offsets.size(); ++i)
      dst[i] = src[offsets[i]];
  });
  return {};
}

std::string scatterElementsKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &data = a.inputs[0], &indices = a.inputs[1],
                     &updates = a.inputs[2], &out = a.outputs[0];
    if (std::string e = expectShape(a.op, "result", out, data.shape);
        !e.empty())
      return e;
    if (std::string e = expectShape(a.op, "updates", updates, indices.shape);
        !e.empty())
      return e;
    std::vector<int64_t> offsets;
    if (std::string e = elementOffsets(a, data, indices, offsets); !e.empty())
      return e;
    if (out.data != data.data && data.bytes() != 0)
      std::memmove(out.data, data.data, data.bytes());
    if (a.attrs.getBool("accumulate"))
      return dispatchNumeric(out.dtype, a.op, [&](auto tag) -> std::string {
        using T = decltype(tag);
        const T *src = updates.as<T>();
        T *dst = out.as<T>();
        for (size_t i = 0; i < offsets.size(); ++i)
          dst[offsets[i]] = static_cast<T>(dst[offsets[i]] + src[i]);
        return {};
      });
    dispatchBySize(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *src = updates.as<T>();
      T *dst = out.as<T>();
      for (size_t i = 0; i < offsets.size(); ++i)
        dst[offsets[i]] = src[i];
    });
    return {};
  });
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

std::string cumsumKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis >= in.rank())
      return "cumsum axis " + std::to_string(axis) + " is out of range";
    if (std::string e = expectShape(a.op, "result", out, in.shape); !e.empty())
      return e;
    bool exclusive = a.attrs.getBool("exclusive"),
         reverse = a.attrs.getBool("reverse");
    AxisSplit s = splitAt(in.shape, axis);
    return dispatchNumeric(in.dtype, a.op, [&](auto tag) -> std::string {
      using T = decltype(tag);
      const T *x = in.as<T>();
      T *y = out.as<T>();
#pragma omp parallel for schedule(static) if (s.outer * s.inner > 4096)
      for (int64_t r = 0; r < s.outer * s.inner; ++r) {
        int64_t base = (r / s.inner) * s.n * s.inner + r % s.inner;
        Acc<T> sum = 0;
        for (int64_t j = 0; j < s.n; ++j) {
          int64_t at = base + (reverse ? s.n - 1 - j : j) * s.inner;
          if (exclusive) {
            T v = x[at];
            y[at] = static_cast<T>(sum);
            sum += v;
          } else {
            sum += x[at];
            y[at] = static_cast<T>(sum);
          }
        }
      }
      return {};
    });
  });
}

std::string topKKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &values = a.outputs[0],
                     &indices = a.outputs[1];
    int64_t axis = a.attrs.getInt("axis"), k = a.attrs.getInt("k");
    if (axis < 0 || axis >= in.rank() || k < 0 || k > in.shape[axis])
      return "top_k: axis " + std::to_string(axis) + " or k " +
             std::to_string(k) + " do not fit the input " +
             formatShape(in.shape);
    Shape shape = in.shape;
    shape[axis] = k;
    if (std::string e = expectShape(a.op, "values", values, shape); !e.empty())
      return e;
    if (std::string e = expectShape(a.op, "indices", indices, shape);
        !e.empty())
      return e;
    if (indices.dtype != DType::I64)
      return "top_k: indices must be i64";
    bool smallest = a.attrs.getBool("smallest");
    AxisSplit s = splitAt(in.shape, axis);
    return dispatchNumeric(in.dtype, a.op, [&](auto tag) -> std::string {
      using T = decltype(tag);
      const T *x = in.as<T>();
      T *v = values.as<T>();
      int64_t *ix = indices.as<int64_t>();
#pragma omp parallel for schedule(static) if (s.outer * s.inner > 256)
      for (int64_t r = 0; r < s.outer * s.inner; ++r) {
        int64_t o = r / s.inner, i = r % s.inner;
        const T *row = x + o * s.n * s.inner + i;
        // Strictly ordered: NaN above every number, ties by lower index.
        auto before = [&](int64_t p, int64_t q) {
          T xp = row[p * s.inner], xq = row[q * s.inner];
          if constexpr (std::is_floating_point_v<T>) {
            bool np = std::isnan(xp), nq = std::isnan(xq);
            if (np || nq)
              return np != nq ? np != smallest : p < q;
          }
          if (xp != xq)
            return smallest ? xp < xq : xp > xq;
          return p < q;
        };
        std::vector<int64_t> order(s.n);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t at = (o * k + j) * s.inner + i;
          ix[at] = order[j];
          v[at] = row[order[j] * s.inner];
        }
      }
      return {};
    });
  });
}

/// For each element of `shape`, its offset in the reduction over `axes`
/// (kept as size 1); `count` gets the reduction's element count.
std::vector<int64_t> reducedPositions(const Shape &shape,
                                      const std::vector<int64_t> &axes,
                                      int64_t &count) {
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> keptStride(rank, 0);
  count = 1;
  for (int64_t d = rank - 1; d >= 0; --d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      keptStride[d] = count;
      count *= shape[d];
    }
  int64_t n = product(shape, 0, shape.size());
  std::vector<int64_t> position(n), idx(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = 0;
    for (int64_t d = 0; d < rank; ++d)
      p += idx[d] * keptStride[d];
    position[i] = p;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return position;
}

std::string axesOf(const KernelArgs &a, const TensorView &in,
                   std::vector<int64_t> &axes) {
  axes = a.attrs.getInts("axes");
  for (int64_t d : axes)
    if (d < 0 || d >= in.rank())
      return std::string(a.op) + ": axis " + std::to_string(d) +
             " is out of range for " + formatShape(in.shape);
  return {};
}

std::string reduceProdKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    std::vector<int64_t> axes;
    if (std::string e = axesOf(a, in, axes); !e.empty())
      return e;
    int64_t count;
    std::vector<int64_t> position = reducedPositions(in.shape, axes, count);
    if (out.numElements() != count)
      return "reduce_prod: the result " + formatShape(out.shape) +
             " does not match the input " + formatShape(in.shape);
    return dispatchNumeric(in.dtype, a.op, [&](auto tag) -> std::string {
      using T = decltype(tag);
      const T *x = in.as<T>();
      T *y = out.as<T>();
      if constexpr (std::is_floating_point_v<T>) {
        std::vector<double> prod(count, 1.0);
        for (size_t i = 0; i < position.size(); ++i)
          prod[position[i]] *= x[i];
        for (int64_t p = 0; p < count; ++p)
          y[p] = static_cast<T>(prod[p]);
      } else {
        // Integers multiply as unsigned: a product wraps, as numpy's.
        using U = std::make_unsigned_t<T>;
        std::vector<U> prod(count, U(1));
        for (size_t i = 0; i < position.size(); ++i)
          prod[position[i]] = static_cast<U>(prod[position[i]] * U(x[i]));
        for (int64_t p = 0; p < count; ++p)
          y[p] = static_cast<T>(prod[p]);
      }
      return {};
    });
  });
}

/// reduce_prod_grad(input, grad): grad times the product of the other
/// elements of each reduction: prod / x without zeros; with one zero, the
/// product of the rest at the zero and 0 elsewhere; with more, 0.
std::string reduceProdGradKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &grad = a.inputs[1],
                     &out = a.outputs[0];
    if (in.dtype != DType::F32 || grad.dtype != DType::F32 ||
        out.dtype != DType::F32)
      return "reduce_prod_grad supports float tensors";
    std::vector<int64_t> axes;
    if (std::string e = axesOf(a, in, axes); !e.empty())
      return e;
    if (std::string e = expectShape(a.op, "result", out, in.shape); !e.empty())
      return e;
    int64_t count;
    std::vector<int64_t> position = reducedPositions(in.shape, axes, count);
    if (grad.numElements() != count)
      return "reduce_prod_grad: grad " + formatShape(grad.shape) +
             " does not match the input " + formatShape(in.shape);
    const float *x = in.as<float>(), *g = grad.as<float>();
    std::vector<double> nonZero(count, 1.0);
    std::vector<int64_t> zeros(count, 0);
    for (size_t i = 0; i < position.size(); ++i) {
      if (x[i] == 0)
        ++zeros[position[i]];
      else
        nonZero[position[i]] *= x[i];
    }
    float *dx = out.as<float>();
    for (size_t i = 0; i < position.size(); ++i) {
      int64_t p = position[i];
      double others = 0;
      if (zeros[p] == 0)
        others = nonZero[p] / x[i];
      else if (zeros[p] == 1 && x[i] == 0)
        others = nonZero[p];
      dx[i] = static_cast<float>(g[p] * others);
    }
    return {};
  });
}

} // namespace

void registerIndexingKernels(KernelTable &table, ResultCounts &results) {
  table["gather_elements"] = {gatherElementsKernel, 2, 2};
  table["scatter_elements"] = {scatterElementsKernel, 3, 3};
  table["cumsum"] = {cumsumKernel, 1, 1};
  table["top_k"] = {topKKernel, 1, 1};
  results["top_k"] = 2;
  table["reduce_prod"] = {reduceProdKernel, 1, 1};
  table["reduce_prod_grad"] = {reduceProdGradKernel, 2, 2};
}

} // namespace loom::rt::cpu
