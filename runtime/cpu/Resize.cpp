//===- Resize.cpp - resize and resize_grad on the CPU ---------------------===//
//
// loom.resize reads, for every output element, the taps of each dimension
// (common/ops/ResizeIndex.h: one index in nearest mode, two weighted
// neighbours in linear mode, four in cubic) and sums their products.
// loom.resize_grad is its adjoint as a gather: every input element sums, over
// the outputs that read it (a contiguous range per dimension), the grad times
// the weight it was given, in increasing output order, so no two threads write
// one element and the result does not depend on the thread count. Floats
// accumulate in double; f16 and bf16 go through f32.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/TrainKernels.h"

#include "common/ops/ResizeIndex.h"
#include "runtime/cpu/KernelUtil.h"

#include <algorithm>

namespace loom::rt::cpu {
namespace {

namespace rz = loom::ops::resize;

/// The op's modes and one Axis per dimension of `in` resized to `out`, or
/// what is wrong.
std::string resizeGeometry(const KernelArgs &args, const Shape &in,
                           const Shape &out, rz::Params &p,
                           std::vector<rz::Axis> &axes) {
  std::string op(args.op);
  if (!rz::parseMode(args.attrs.getString("mode"), p.mode) ||
      !rz::parseCoord(args.attrs.getString("coordinate_transformation_mode"),
                      p.coord) ||
      !rz::parseRounding(args.attrs.getString("nearest_mode"), p.rounding))
    return op + ": unknown mode";
  p.cubicA = args.attrs.getFloat("cubic_coeff_a");
  p.excludeOutside = args.attrs.getBool("exclude_outside");
  std::vector<int64_t> num = args.attrs.getInts("scale_num"),
                       den = args.attrs.getInts("scale_den");
  size_t rank = in.size();
  if (num.size() != rank || den.size() != rank || out.size() != rank)
    return op + " needs one scale per dimension and operands of one rank";
  axes.clear();
  for (size_t d = 0; d < rank; ++d) {
    int64_t size;
    if (num[d] <= 0 || den[d] <= 0 ||
        !rz::outputSize(in[d], num[d], den[d], size) || size != out[d])
      return op + ": dimension " + std::to_string(d) + " of size " +
             std::to_string(in[d]) + " does not resize to " +
             std::to_string(out[d]);
    axes.push_back({in[d], out[d],
                    static_cast<double>(num[d]) / static_cast<double>(den[d])});
  }
  return {};
}

/// One tap: an offset (index times the dimension's stride) and a weight.
struct Tap {
  int64_t offset;
  double weight;
};

/// Per dimension, per output coordinate, its taps.
std::vector<std::vector<std::vector<Tap>>>
forwardTaps(const rz::Params &p, const std::vector<rz::Axis> &axes,
            const std::vector<int64_t> &strides) {
  std::vector<std::vector<std::vector<Tap>>> all(axes.size());
  for (size_t d = 0; d < axes.size(); ++d) {
    all[d].resize(axes[d].out);
    for (int64_t x = 0; x < axes[d].out; ++x) {
      int64_t index[rz::kMaxTaps];
      double weight[rz::kMaxTaps];
      int n = rz::taps(p, x, axes[d], index, weight);
      for (int k = 0; k < n; ++k)
        all[d][x].push_back({index[k] * strides[d], weight[k]});
    }
  }
  return all;
}

/// Per dimension, per input coordinate, the outputs that read it and the
/// weight each gave it (zero weights left out), in increasing order.
std::vector<std::vector<std::vector<Tap>>>
backwardTaps(const rz::Params &p, const std::vector<rz::Axis> &axes,
             const std::vector<int64_t> &strides) {
  std::vector<std::vector<std::vector<Tap>>> all(axes.size());
  for (size_t d = 0; d < axes.size(); ++d) {
    all[d].resize(axes[d].in);
    for (int64_t j = 0; j < axes[d].in; ++j) {
      int64_t begin, end;
      rz::preimage(p, j, axes[d], begin, end);
      for (int64_t x = begin; x < end; ++x)
        if (double w = rz::weightOf(p, x, axes[d], j); w != 0)
          all[d][j].push_back({x * strides[d], w});
    }
  }
  return all;
}

/// dst[i] = sum over the product of the taps of i's coordinates of
/// src[offset] * weight, for every element i of `shape`.
template <typename T>
void gatherTaps(const Shape &shape,
                const std::vector<std::vector<std::vector<Tap>>> &taps,
                const T *src, T *dst) {
  int64_t total = numElements(shape);
  size_t rank = shape.size();
#pragma omp parallel if (total > 4096)
  {
    // Per thread: each element's tap lists, and the odometer over them
    // (all zeros again whenever it has run through).
    std::vector<const std::vector<Tap> *> lists(rank);
    std::vector<size_t> at(rank, 0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < total; ++i) {
      int64_t rest = i;
      bool empty = false;
      for (size_t d = rank; d-- > 0;) {
        lists[d] = &taps[d][rest % shape[d]];
        rest /= shape[d];
        empty = empty || lists[d]->empty();
      }
      double sum = 0;
      while (!empty) {
        int64_t offset = 0;
        double weight = 1;
        for (size_t d = 0; d < rank; ++d) {
          offset += (*lists[d])[at[d]].offset;
          weight *= (*lists[d])[at[d]].weight;
        }
        sum += weight * static_cast<double>(src[offset]);
        size_t d = rank;
        while (d-- > 0 && ++at[d] == lists[d]->size())
          at[d] = 0;
        if (d == SIZE_MAX)
          break;
      }
      dst[i] = static_cast<T>(sum);
    }
  }
}

std::string resizeKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &in = a.inputs[0], &out = a.outputs[0];
    if (out.dtype != in.dtype)
      return "resize: input and result types differ";
    rz::Params p;
    std::vector<rz::Axis> axes;
    if (auto e = resizeGeometry(a, in.shape, out.shape, p, axes); !e.empty())
      return e;
    if (out.numElements() == 0)
      return {};
    auto taps = forwardTaps(p, axes, rowMajorStrides(in.shape));
    if (in.dtype != DType::F32)
      return unsupportedType(a.op, in.dtype);
    gatherTaps(out.shape, taps, in.as<float>(), out.as<float>());
    return {};
  });
}

std::string resizeGradKernel(CpuContext &, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &dy = a.inputs[0], &out = a.outputs[0];
    if (dy.dtype != out.dtype)
      return "resize_grad: grad and result types differ";
    rz::Params p;
    std::vector<rz::Axis> axes;
    if (auto e = resizeGeometry(a, out.shape, dy.shape, p, axes); !e.empty())
      return e;
    if (out.numElements() == 0)
      return {};
    auto taps = backwardTaps(p, axes, rowMajorStrides(dy.shape));
    if (out.dtype != DType::F32)
      return unsupportedType(a.op, out.dtype);
    gatherTaps(out.shape, taps, dy.as<float>(), out.as<float>());
    return {};
  });
}

} // namespace

void registerResizeKernels(KernelTable &table) {
  table["resize"] = {resizeKernel, 1, 1};
  table["resize_grad"] = {resizeGradKernel, 1, 1};
}

} // namespace loom::rt::cpu
