//===- Resize.cu - resize and resize_grad on CUDA -------------------------===//
//
// One thread per output element of resize: the taps of each dimension
// (common/ops/ResizeIndex.h, the CPU kernel's arithmetic) and the sum of
// their products, in the CPU's order. resize_grad is a gather, not a
// scatter of atomic adds: one thread per input element finds, per
// dimension, the contiguous range of outputs that read it (two binary
// searches) and sums grad times weight in increasing output order, zero
// weights skipped, as the CPU does. It is deterministic and, in f32, sums
// in double like the CPU, so the two agree to the last bit up to rounding
// of the final store.
//
//===----------------------------------------------------------------------===//

#include "common/ops/ResizeIndex.h"
#include "runtime/cuda/DeviceUtil.cuh"

namespace loom::rt::cuda {
namespace {

namespace rz = loom::ops::resize;

/// The modes, each dimension's Axis and both tensors' strides.
struct ResizeGeometry {
  rz::Params p;
  int rank = 0;
  rz::Axis axes[kMaxRank] = {};
  int64_t inStrides[kMaxRank] = {};
  int64_t outStrides[kMaxRank] = {};
};

/// `geometry` for `in` resized to `out` by the op's attributes, or what is
/// wrong.
std::string resizeGeometry(const KernelArgs &args, const Shape &in,
                           const Shape &out, ResizeGeometry &g) {
  std::string op = "cuda kernel '" + std::string(args.op) + "'";
  if (!rz::parseMode(args.attrs.getString("mode"), g.p.mode) ||
      !rz::parseCoord(args.attrs.getString("coordinate_transformation_mode"),
                      g.p.coord) ||
      !rz::parseRounding(args.attrs.getString("nearest_mode"), g.p.rounding))
    return op + ": unknown mode";
  g.p.cubicA = args.attrs.getFloat("cubic_coeff_a");
  g.p.excludeOutside = args.attrs.getBool("exclude_outside");
  std::vector<int64_t> num = args.attrs.getInts("scale_num"),
                       den = args.attrs.getInts("scale_den");
  size_t rank = in.size();
  if (num.size() != rank || den.size() != rank || out.size() != rank)
    return op + " needs one scale per dimension and operands of one rank";
  if (rank > static_cast<size_t>(kMaxRank))
    return op + " supports up to " + std::to_string(kMaxRank) + " dimensions";
  g.rank = static_cast<int>(rank);
  int64_t inStride = 1, outStride = 1;
  for (size_t d = rank; d-- > 0;) {
    int64_t size;
    if (num[d] <= 0 || den[d] <= 0 ||
        !rz::outputSize(in[d], num[d], den[d], size) || size != out[d])
      return op + ": dimension " + std::to_string(d) + " of size " +
             std::to_string(in[d]) + " does not resize to " +
             std::to_string(out[d]);
    g.axes[d] = {in[d], out[d],
                 static_cast<double>(num[d]) / static_cast<double>(den[d])};
    g.inStrides[d] = inStride;
    g.outStrides[d] = outStride;
    inStride *= in[d];
    outStride *= out[d];
  }
  return "";
}

template <typename T>
__global__ void resizeKernel(const T *in, T *out, ResizeGeometry g,
                             int64_t total) {
  LOOM_GRID_LOOP(i, total) {
    int64_t index[kMaxRank][rz::kMaxTaps];
    double weight[kMaxRank][rz::kMaxTaps];
    int count[kMaxRank], at[kMaxRank];
    int64_t rest = i;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t x = rest % g.axes[d].out;
      rest /= g.axes[d].out;
      count[d] = rz::taps(g.p, x, g.axes[d], index[d], weight[d]);
      at[d] = 0;
    }
    double sum = 0;
    while (true) {
      int64_t offset = 0;
      double w = 1;
      for (int d = 0; d < g.rank; ++d) {
        offset += index[d][at[d]] * g.inStrides[d];
        w *= weight[d][at[d]];
      }
      sum += w * static_cast<double>(toFloat(in[offset]));
      int d = g.rank - 1;
      while (d >= 0 && ++at[d] == count[d])
        at[d--] = 0;
      if (d < 0)
        break;
    }
    out[i] = fromFloat<T>(static_cast<float>(sum));
  }
}

template <typename T>
__global__ void resizeGradKernel(const T *grad, T *out, ResizeGeometry g,
                                 int64_t total) {
  LOOM_GRID_LOOP(i, total) {
    int64_t coord[kMaxRank], begin[kMaxRank], end[kMaxRank], at[kMaxRank];
    int64_t rest = i;
    bool empty = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      coord[d] = rest % g.axes[d].in;
      rest /= g.axes[d].in;
      rz::preimage(g.p, coord[d], g.axes[d], begin[d], end[d]);
      at[d] = begin[d];
      empty = empty || begin[d] == end[d];
    }
    double sum = 0;
    while (!empty) {
      int64_t offset = 0;
      double w = 1;
      for (int d = 0; d < g.rank; ++d) {
        offset += at[d] * g.outStrides[d];
        w *= rz::weightOf(g.p, at[d], g.axes[d], coord[d]);
      }
      if (w != 0)
        sum += w * static_cast<double>(toFloat(grad[offset]));
      int d = g.rank - 1;
      while (d >= 0 && ++at[d] == end[d]) {
        at[d] = begin[d];
        --d;
      }
      if (d < 0)
        break;
    }
    out[i] = fromFloat<T>(static_cast<float>(sum));
  }
}

std::string runResize(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != out.dtype)
    return "cuda kernel 'resize': input and result types differ";
  ResizeGeometry g;
  if (auto e = resizeGeometry(args, in.shape, out.shape, g); !e.empty())
    return e;
  int64_t total = out.numElements();
  if (total == 0)
    return "";
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        resizeKernel<T><<<blocksFor(total), kThreads, 0, ctx.stream>>>(
            in.as<T>(), out.as<T>(), g, total);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

std::string runResizeGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &dy = args.inputs[0], &out = args.outputs[0];
  if (dy.dtype != out.dtype)
    return "cuda kernel 'resize_grad': grad and result types differ";
  ResizeGeometry g;
  if (auto e = resizeGeometry(args, out.shape, dy.shape, g); !e.empty())
    return e;
  int64_t total = out.numElements();
  if (total == 0)
    return "";
  if (!dispatchFloat(out.dtype, [&](auto t) {
        using T = decltype(t);
        resizeGradKernel<T><<<blocksFor(total), kThreads, 0, ctx.stream>>>(
            dy.as<T>(), out.as<T>(), g, total);
      }))
    return unsupportedType(args.op, out.dtype);
  return launchStatus(args.op);
}

} // namespace

void registerResizeKernels(KernelTable &table) {
  table["resize"] = {runResize, 1, 1};
  table["resize_grad"] = {runResizeGrad, 1, 1};
}

} // namespace loom::rt::cuda
