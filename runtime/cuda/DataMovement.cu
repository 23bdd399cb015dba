//===- DataMovement.cu - Copies, gathers and their gradients on CUDA ------===//
//
// reshape (a copy), broadcast, transpose and slice (strided reads), concat
// (2-D copies per input), slice_grad (zeros, then a strided write), pad (a
// read per element, or the constant), pad_grad (one gathering sum per padded
// dimension, in the CPU's order: common/ops/PadIndex.h), gather
// (an embedding lookup; an index out of range is a device error) and
// gather_grad (zeros, then atomic adds: repeated indices accumulate in an
// unspecified order, so f32 sums may differ from the CPU's in the last
// bits). Elements are moved by size, whatever their type.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

#include "common/ops/PadIndex.h"

#include <limits>
#include <type_traits>

namespace loom::rt::cuda {
namespace {

template <typename T>
__global__ void stridedCopyKernel(const T *in, T *out, int64_t n,
                                  Indexer<1> ix) {
  LOOM_GRID_LOOP(i, n) {
    int64_t off;
    ix.offsets(i, &off);
    out[i] = in[off];
  }
}

/// Writes element i of `in` (dense) to out[offset(i)].
template <typename T>
__global__ void stridedWriteKernel(const T *in, T *out, int64_t n,
                                   Indexer<1> ix) {
  LOOM_GRID_LOOP(i, n) {
    int64_t off;
    ix.offsets(i, &off);
    out[off] = in[i];
  }
}

/// out = in read through `strides` (one per output dimension) from `base`.
std::string stridedCopy(CudaContext &ctx, std::string_view op,
                        const TensorView &in, const TensorView &out,
                        const std::vector<int64_t> &strides, int64_t base,
                        bool write = false) {
  Indexer<1> ix;
  if (!makeIndexer<1>(out.shape, {strides}, ix))
    return "cuda kernel '" + std::string(op) + "': more than " +
           std::to_string(kMaxRank) + " dimensions";
  ix.base[0] = base;
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  dispatchBySize(out.dtype, [&](auto t) {
    using T = decltype(t);
    if (write)
      stridedWriteKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          static_cast<const T *>(out.data), static_cast<T *>(in.data), n, ix);
    else
      stridedCopyKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          static_cast<const T *>(in.data), static_cast<T *>(out.data), n, ix);
  });
  return launchStatus(op);
}

std::string runReshape(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.bytes() != out.bytes())
    return "cuda kernel 'reshape': " + formatShape(in.shape) + " and " +
           formatShape(out.shape) + " differ in size";
  if (in.bytes() && in.data != out.data)
    cudaMemcpyAsync(out.data, in.data, in.bytes(), cudaMemcpyDeviceToDevice,
                    ctx.stream);
  return launchStatus(args.op);
}

std::string runBroadcast(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> s = broadcastStrides(in.shape, out.shape);
  if (s.empty() && !out.shape.empty())
    return "cuda kernel 'broadcast': " + formatShape(in.shape) +
           " does not broadcast to " + formatShape(out.shape);
  return stridedCopy(ctx, args.op, in, out, s, 0);
}

std::string runTranspose(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> perm = args.attrs.getInts("permutation");
  if (static_cast<int64_t>(perm.size()) != in.rank())
    return "cuda kernel 'transpose': permutation of the wrong length";
  std::vector<int64_t> dense = denseStrides(in.shape), s(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= in.rank() ||
        out.shape[d] != in.shape[perm[d]])
      return "cuda kernel 'transpose': invalid permutation";
    s[d] = dense[perm[d]];
  }
  return stridedCopy(ctx, args.op, in, out, s, 0);
}

/// The strides and base offset of a slice of `full` (starts, strides).
std::string sliceGeometry(const KernelArgs &args, const TensorView &full,
                          const TensorView &part, std::vector<int64_t> &s,
                          int64_t &base) {
  std::vector<int64_t> starts = args.attrs.getInts("starts"),
                       steps = args.attrs.getInts("strides");
  if (static_cast<int64_t>(starts.size()) != full.rank() ||
      static_cast<int64_t>(steps.size()) != full.rank() ||
      part.rank() != full.rank())
    return "cuda kernel '" + std::string(args.op) +
           "': starts and strides need one entry per dimension";
  std::vector<int64_t> dense = denseStrides(full.shape);
  s.assign(full.rank(), 0);
  base = 0;
  for (int64_t d = 0; d < full.rank(); ++d) {
    int64_t last = starts[d] + (part.shape[d] - 1) * steps[d];
    if (part.shape[d] > 0 && (starts[d] < 0 || starts[d] >= full.shape[d] ||
                              last < 0 || last >= full.shape[d]))
      return "cuda kernel '" + std::string(args.op) + "': dimension " +
             std::to_string(d) + " reads outside the tensor";
    s[d] = dense[d] * steps[d];
    base += starts[d] * dense[d];
  }
  return "";
}

std::string runSlice(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> s;
  int64_t base = 0;
  if (std::string e = sliceGeometry(args, in, out, s, base); !e.empty())
    return e;
  return stridedCopy(ctx, args.op, in, out, s, base);
}

std::string runSliceGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &grad = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> s;
  int64_t base = 0;
  if (std::string e = sliceGeometry(args, out, grad, s, base); !e.empty())
    return e;
  cudaMemsetAsync(out.data, 0, out.bytes(), ctx.stream);
  // Writes grad's elements to their places in `out`.
  TensorView target = out, source = grad;
  return stridedCopy(ctx, args.op, target, source, s, base, /*write=*/true);
}

std::string runConcat(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &out = args.outputs[0];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= out.rank())
    return "cuda kernel 'concat': axis out of range";
  int64_t outer = 1, inner = dtypeSize(out.dtype);
  for (int64_t d = 0; d < axis; ++d)
    outer *= out.shape[d];
  for (int64_t d = axis + 1; d < out.rank(); ++d)
    inner *= out.shape[d];
  int64_t rowBytes = out.shape[axis] * inner, at = 0;
  for (const TensorView &in : args.inputs) {
    if (in.rank() != out.rank() || in.dtype != out.dtype)
      return "cuda kernel 'concat': inputs must match the result";
    int64_t width = in.shape[axis] * inner;
    if (width && outer)
      cudaMemcpy2DAsync(static_cast<char *>(out.data) + at, rowBytes, in.data,
                        width, width, outer, cudaMemcpyDeviceToDevice,
                        ctx.stream);
    at += width;
  }
  if (at != rowBytes)
    return "cuda kernel 'concat': the inputs do not fill the result";
  return launchStatus(args.op);
}

using ops::pad::PadMode;

/// A pad's dimensions (size-1 dimensions without padding dropped).
struct PadGeometry {
  int rank = 0;
  int64_t outDims[kMaxRank] = {}, inDims[kMaxRank] = {},
          inStrides[kMaxRank] = {}, low[kMaxRank] = {};
  PadMode mode = PadMode::Constant;
};

template <typename T>
__global__ void padKernel(const T *in, T *out, int64_t n, PadGeometry g,
                          T fill) {
  LOOM_GRID_LOOP(e, n) {
    int64_t rem = e, off = 0;
    bool border = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t i = rem % g.outDims[d];
      rem /= g.outDims[d];
      int64_t j = ops::pad::padSource(g.mode, i, g.low[d], g.inDims[d]);
      border |= j < 0;
      off += j * g.inStrides[d];
    }
    out[e] = border ? fill : in[off];
  }
}

/// The gradient along one padded dimension: dst[o, j, t] sums src[o, i, t]
/// over the padded positions i that copied input position j.
template <typename In, typename Out>
__global__ void padGradStepKernel(const In *src, Out *dst, int64_t n,
                                  int64_t size, int64_t inner, int64_t padded,
                                  int64_t low, int64_t high, PadMode mode) {
  LOOM_GRID_LOOP(e, n) {
    int64_t t = e % inner, line = e / inner, o = line / size, j = line % size;
    int64_t begin[3], end[3];
    ops::pad::padPreimage(mode, j, low, high, size, begin, end);
    float acc = 0.0f;
    for (int k = 0; k < 3; ++k)
      for (int64_t i = begin[k]; i < end[k]; ++i)
        acc += toFloat(src[(o * padded + i) * inner + t]);
    dst[e] = fromFloat<Out>(acc);
  }
}

/// The pad's low and high pads and mode, checked against the unpadded
/// shape `in` and the padded shape `out`.
std::string padAttrs(const KernelArgs &args, const Shape &in, const Shape &out,
                     std::vector<int64_t> &low, std::vector<int64_t> &high,
                     PadMode &mode) {
  std::string op(args.op);
  low = args.attrs.getInts("low");
  high = args.attrs.getInts("high");
  if (!ops::pad::parsePadMode(args.attrs.getString("mode"), mode))
    return "cuda kernel '" + op + "': mode '" + args.attrs.getString("mode") +
           "' is not one of " + ops::pad::kPadModeNames;
  if (low.size() != in.size() || high.size() != in.size() ||
      out.size() != in.size())
    return "cuda kernel '" + op +
           "': low and high need one entry per dimension";
  for (size_t d = 0; d < in.size(); ++d)
    if (low[d] < 0 || high[d] < 0 ||
        (mode == PadMode::Reflect && (low[d] >= in[d] || high[d] >= in[d])) ||
        (mode != PadMode::Constant && in[d] == 0 && low[d] + high[d] > 0) ||
        out[d] != low[d] + in[d] + high[d])
      return "cuda kernel '" + op + "': " + formatShape(out) +
             " is not a pad of " + formatShape(in) + " in dimension " +
             std::to_string(d);
  return "";
}

std::string runPad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> low, high;
  PadGeometry g;
  if (std::string e = padAttrs(args, in.shape, out.shape, low, high, g.mode);
      !e.empty())
    return e;
  if (in.dtype != out.dtype)
    return "cuda kernel 'pad': the result's element type differs";
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  std::vector<int64_t> dense = denseStrides(in.shape);
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] == 1 && low[d] == 0 && high[d] == 0)
      continue;
    if (g.rank == kMaxRank)
      return "cuda kernel 'pad': more than " + std::to_string(kMaxRank) +
             " dimensions";
    g.outDims[g.rank] = out.shape[d];
    g.inDims[g.rank] = in.shape[d];
    g.inStrides[g.rank] = dense[d];
    g.low[g.rank] = low[d];
    ++g.rank;
  }
  uint64_t fill = elementBits(out.dtype, args.attrs.getFloat("value"));
  dispatchBySize(out.dtype, [&](auto t) {
    using T = decltype(t);
    padKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        in.as<T>(), out.as<T>(), n, g, static_cast<T>(fill));
  });
  return launchStatus(args.op);
}

std::string runPadGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &grad = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> low, high;
  PadMode mode;
  if (std::string e = padAttrs(args, out.shape, grad.shape, low, high, mode);
      !e.empty())
    return e;
  if (grad.dtype != out.dtype)
    return "cuda kernel 'pad_grad': grad and result types differ";
  std::vector<size_t> padded;
  for (size_t d = 0; d < low.size(); ++d)
    if (low[d] != 0 || high[d] != 0)
      padded.push_back(d);
  if (out.numElements() == 0)
    return "";
  if (padded.empty()) {
    cudaMemcpyAsync(out.data, grad.data, out.bytes(), cudaMemcpyDeviceToDevice,
                    ctx.stream);
    return launchStatus(args.op);
  }
  // Intermediate sums in f32, ping-ponged between two buffers.
  size_t scratchBytes =
      padded.size() > 1 ? sizeof(float) * grad.numElements() : 1;
  Scratch ping(ctx, scratchBytes), pong(ctx, scratchBytes);
  if (!ping || !pong)
    return "cuda kernel 'pad_grad': out of device memory for its sums";
  Shape shape = grad.shape;
  const void *src = grad.data;
  bool srcIsGrad = true;
  for (size_t k = 0; k < padded.size(); ++k) {
    size_t d = padded[k];
    int64_t outer = 1, inner = 1, size = out.shape[d], width = shape[d];
    for (size_t i = 0; i < d; ++i)
      outer *= shape[i];
    for (size_t i = d + 1; i < shape.size(); ++i)
      inner *= shape[i];
    int64_t n = outer * size * inner;
    bool last = k + 1 == padded.size();
    void *dst =
        last ? out.data : (k % 2 == 0 ? ping.as<void>() : pong.as<void>());
    if (n > 0 && !dispatchFloat(out.dtype, [&](auto t) {
          using T = decltype(t);
          auto step = [&](auto *in, auto *to) {
            using In = std::remove_cv_t<std::remove_pointer_t<decltype(in)>>;
            using Out = std::remove_pointer_t<decltype(to)>;
            padGradStepKernel<In, Out>
                <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
                    in, to, n, size, inner, width, low[d], high[d], mode);
          };
          if (srcIsGrad && last)
            step(static_cast<const T *>(src), static_cast<T *>(dst));
          else if (srcIsGrad)
            step(static_cast<const T *>(src), static_cast<float *>(dst));
          else if (last)
            step(static_cast<const float *>(src), static_cast<T *>(dst));
          else
            step(static_cast<const float *>(src), static_cast<float *>(dst));
        }))
      return unsupportedType(args.op, out.dtype);
    shape[d] = size;
    src = dst;
    srcIsGrad = false;
  }
  return launchStatus(args.op);
}

/// out[o, j, i] = table[o, index[j], i] with `count` indices and `inner`
/// elements after the axis.
template <typename T, typename I>
__global__ void gatherKernel(const T *table, const I *index, T *out, int64_t n,
                             int64_t count, int64_t inner, int64_t axisSize,
                             int *errorWord) {
  LOOM_GRID_LOOP(e, n) {
    int64_t i = e % inner, j = (e / inner) % count, o = e / (inner * count);
    int64_t k = index[j];
    if (k < 0)
      k += axisSize;
    if (k < 0 || k >= axisSize) {
      raise(errorWord, kIndexOutOfRange);
      out[e] = T{};
      continue;
    }
    out[e] = table[(o * axisSize + k) * inner + i];
  }
}

template <typename T, typename I>
__global__ void gatherGradKernel(const I *index, const T *grad, T *out,
                                 int64_t n, int64_t count, int64_t inner,
                                 int64_t axisSize, int *errorWord) {
  LOOM_GRID_LOOP(e, n) {
    int64_t i = e % inner, j = (e / inner) % count, o = e / (inner * count);
    int64_t k = index[j];
    if (k < 0)
      k += axisSize;
    if (k < 0 || k >= axisSize) {
      raise(errorWord, kIndexOutOfRange);
      continue;
    }
    atomicAdd(out + (o * axisSize + k) * inner + i, grad[e]);
  }
}

struct GatherGeometry {
  int64_t outer = 1, inner = 1, count = 1, axisSize = 1;
};

std::string gatherGeometry(const KernelArgs &args, const TensorView &table,
                           const TensorView &index, const TensorView &result,
                           GatherGeometry &g) {
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= table.rank())
    return "cuda kernel '" + std::string(args.op) + "': axis out of range";
  if (index.dtype != DType::I32 && index.dtype != DType::I64)
    return "cuda kernel '" + std::string(args.op) +
           "': indices must be i32 or i64";
  for (int64_t d = 0; d < axis; ++d)
    g.outer *= table.shape[d];
  for (int64_t d = axis + 1; d < table.rank(); ++d)
    g.inner *= table.shape[d];
  g.axisSize = table.shape[axis];
  g.count = index.numElements();
  if (g.outer * g.count * g.inner != result.numElements())
    return "cuda kernel '" + std::string(args.op) +
           "': the gathered shape does not match";
  return "";
}

std::string runGather(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &table = args.inputs[0], &index = args.inputs[1],
                   &out = args.outputs[0];
  GatherGeometry g;
  if (std::string e = gatherGeometry(args, table, index, out, g); !e.empty())
    return e;
  int64_t n = out.numElements();
  if (n == 0)
    return "";
  dispatchBySize(out.dtype, [&](auto t) {
    using T = decltype(t);
    if (index.dtype == DType::I32)
      gatherKernel<T, int32_t><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          table.as<T>(), index.as<int32_t>(), out.as<T>(), n, g.count, g.inner,
          g.axisSize, ctx.errorWord);
    else
      gatherKernel<T, int64_t><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          table.as<T>(), index.as<int64_t>(), out.as<T>(), n, g.count, g.inner,
          g.axisSize, ctx.errorWord);
  });
  return launchStatus(args.op);
}

std::string runGatherGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &index = args.inputs[0], &grad = args.inputs[1],
                   &out = args.outputs[0];
  if (grad.dtype != out.dtype)
    return "cuda kernel 'gather_grad': grad and result types differ";
  GatherGeometry g;
  if (std::string e = gatherGeometry(args, out, index, grad, g); !e.empty())
    return e;
  cudaMemsetAsync(out.data, 0, out.bytes(), ctx.stream);
  int64_t n = grad.numElements();
  if (n == 0)
    return launchStatus(args.op);
  if (!dispatchFloat(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (index.dtype == DType::I32)
          gatherGradKernel<T, int32_t>
              <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
                  index.as<int32_t>(), grad.as<T>(), out.as<T>(), n, g.count,
                  g.inner, g.axisSize, ctx.errorWord);
        else
          gatherGradKernel<T, int64_t>
              <<<blocksFor(n), kThreads, 0, ctx.stream>>>(
                  index.as<int64_t>(), grad.as<T>(), out.as<T>(), n, g.count,
                  g.inner, g.axisSize, ctx.errorWord);
      }))
    return unsupportedType(args.op, out.dtype);
  return launchStatus(args.op);
}

} // namespace

void registerDataMovementKernels(KernelTable &table) {
  table["reshape"] = {runReshape, 1, 1};
  table["broadcast"] = {runBroadcast, 1, 1};
  table["transpose"] = {runTranspose, 1, 1};
  table["slice"] = {runSlice, 1, 1};
  table["slice_grad"] = {runSliceGrad, 1, 1};
  table["pad"] = {runPad, 1, 1};
  table["pad_grad"] = {runPadGrad, 1, 1};
  table["concat"] = {runConcat, 1, std::numeric_limits<int>::max()};
  table["gather"] = {runGather, 2, 2};
  table["gather_grad"] = {runGatherGrad, 2, 2};
}

} // namespace loom::rt::cuda
