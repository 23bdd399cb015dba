//===- DataMovement.cpp - Kernels that only move elements -----------------===//
//
// transpose, reshape, broadcast, gather, concat, slice and pad, for every
// element type: they copy elements by size and never look at values (except
// gather's indices; pad writes its constant converted to the element type).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include "common/ops/PadIndex.h"

#include <cstring>
#include <limits>

namespace loom::rt::cpu {
namespace {

/// out[i] = in[base + sum_d index_d(i) * strides[d]] for every output i.
void stridedCopy(const TensorView &in, const TensorView &out,
                 std::vector<int64_t> strides, int64_t base = 0) {
  StridedLoop<1> loop(out.shape, {std::move(strides)}, {base});
  dispatchBySize(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *src = in.as<T>();
    T *dst = out.as<T>();
    loop.run([&](int64_t o, const std::array<int64_t, 1> &i) {
      dst[o] = src[i[0]];
    });
  });
}

std::string transposeKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> perm = args.attrs.getInts("permutation");
  if (static_cast<int64_t>(perm.size()) != in.rank())
    return "transpose permutation has " + std::to_string(perm.size()) +
           " entries for an input of rank " + std::to_string(in.rank());
  std::vector<int64_t> inStrides = rowMajorStrides(in.shape), strides;
  Shape permuted;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.rank())
      return "transpose permutation entry " + std::to_string(p) +
             " is out of range";
    strides.push_back(inStrides[p]);
    permuted.push_back(in.shape[p]);
  }
  if (std::string error = expectShape(args.op, "result", out, permuted);
      !error.empty())
    return error;
  stridedCopy(in, out, std::move(strides));
  return {};
}

std::string reshapeKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.bytes() != out.bytes())
    return "reshape from " + formatShape(in.shape) + " to " +
           formatShape(out.shape) + " changes the element count";
  if (in.data != out.data && in.bytes() != 0)
    std::memmove(out.data, in.data, in.bytes());
  return {};
}

std::string broadcastKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (!broadcastsTo(in.shape, out.shape))
    return "broadcast: " + formatShape(in.shape) + " does not broadcast to " +
           formatShape(out.shape);
  stridedCopy(in, out, broadcastStrides(in.shape, out.shape));
  return {};
}

std::string sliceKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> starts = args.attrs.getInts("starts"),
                       steps = args.attrs.getInts("strides");
  size_t rank = in.shape.size();
  if (starts.size() != rank || steps.size() != rank || out.shape.size() != rank)
    return "slice needs one start and stride per dimension";
  std::vector<int64_t> inStrides = rowMajorStrides(in.shape), strides(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank && out.numElements() > 0; ++d) {
    int64_t last = starts[d] + (out.shape[d] - 1) * steps[d];
    if (starts[d] < 0 || starts[d] >= in.shape[d] || last < 0 ||
        last >= in.shape[d])
      return "slice reads outside dimension " + std::to_string(d) +
             " of size " + std::to_string(in.shape[d]);
  }
  for (size_t d = 0; d < rank; ++d) {
    base += starts[d] * inStrides[d];
    strides[d] = steps[d] * inStrides[d];
  }
  stridedCopy(in, out, std::move(strides), base);
  return {};
}

/// pad: every result row (the last dimension) reads one input row, or is
/// the constant when a leading index falls in a constant border.
std::string padKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  std::vector<int64_t> low = args.attrs.getInts("low"),
                       high = args.attrs.getInts("high");
  ops::pad::PadMode mode;
  if (!ops::pad::parsePadMode(args.attrs.getString("mode"), mode))
    return "pad mode '" + args.attrs.getString("mode") + "' is not one of " +
           ops::pad::kPadModeNames;
  size_t rank = in.shape.size();
  if (low.size() != rank || high.size() != rank || out.shape.size() != rank)
    return "pad needs one low and high pad per dimension";
  Shape expected;
  for (size_t d = 0; d < rank; ++d) {
    if (low[d] < 0 || high[d] < 0 ||
        (mode == ops::pad::PadMode::Reflect &&
         (low[d] >= in.shape[d] || high[d] >= in.shape[d])) ||
        (mode != ops::pad::PadMode::Constant && in.shape[d] == 0 &&
         low[d] + high[d] > 0))
      return "pad of dimension " + std::to_string(d) +
             " does not fit its size " + std::to_string(in.shape[d]);
    expected.push_back(low[d] + in.shape[d] + high[d]);
  }
  if (std::string error = expectShape(args.op, "result", out, expected);
      !error.empty())
    return error;
  if (out.numElements() == 0)
    return {};
  if (rank == 0) {
    std::memcpy(out.data, in.data, out.bytes());
    return {};
  }
  // The input index each result index reads, per dimension (-1: constant).
  std::vector<std::vector<int64_t>> source(rank);
  for (size_t d = 0; d < rank; ++d)
    for (int64_t i = 0; i < out.shape[d]; ++i)
      source[d].push_back(ops::pad::padSource(mode, i, low[d], in.shape[d]));
  std::vector<int64_t> inStrides = rowMajorStrides(in.shape);
  int64_t cols = out.shape[rank - 1], rows = out.numElements() / cols;
  uint64_t fill = elementBits(out.dtype, args.attrs.getFloat("value"));
  dispatchBySize(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *src = in.as<T>();
    T *dst = out.as<T>();
    T constant = static_cast<T>(fill);
    const std::vector<int64_t> &lastSource = source[rank - 1];
#pragma omp parallel for schedule(static) if (rows * cols > kGrain)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t base = 0, rem = r;
      bool border = false;
      for (size_t d = rank - 1; d-- > 0;) {
        int64_t j = source[d][rem % out.shape[d]];
        rem /= out.shape[d];
        border |= j < 0;
        base += j * inStrides[d];
      }
      T *row = dst + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        int64_t j = lastSource[c];
        row[c] = border || j < 0 ? constant : src[base + j];
      }
    }
  });
  return {};
}

template <typename Index>
std::string gatherRows(const TensorView &in, const TensorView &indices,
                       const TensorView &out, int64_t axis) {
  int64_t outer = product(in.shape, 0, axis), size = in.shape[axis],
          inner = product(in.shape, axis + 1, in.shape.size());
  int64_t count = indices.numElements();
  const Index *idx = indices.as<Index>();
  for (int64_t i = 0; i < count; ++i)
    if (idx[i] < -size || idx[i] >= size)
      return "gather index " + std::to_string(idx[i]) +
             " is out of range for dimension " + std::to_string(axis) +
             " of size " + std::to_string(size);
  size_t rowBytes = inner * dtypeSize(in.dtype);
  const auto *src = static_cast<const unsigned char *>(in.data);
  auto *dst = static_cast<unsigned char *>(out.data);
  int64_t rows = outer * count;
#pragma omp parallel for schedule(static) if (rows * inner > kGrain)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t o = r / count;
    int64_t j = idx[r % count];
    if (j < 0)
      j += size;
    std::memcpy(dst + r * rowBytes, src + (o * size + j) * rowBytes, rowBytes);
  }
  return {};
}

std::string gatherKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &indices = args.inputs[1],
                   &out = args.outputs[0];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= in.rank())
    return "gather axis " + std::to_string(axis) + " is out of range";
  Shape expected(in.shape.begin(), in.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), in.shape.begin() + axis + 1, in.shape.end());
  if (std::string error = expectShape(args.op, "result", out, expected);
      !error.empty())
    return error;
  if (indices.dtype == DType::I32)
    return gatherRows<int32_t>(in, indices, out, axis);
  if (indices.dtype == DType::I64)
    return gatherRows<int64_t>(in, indices, out, axis);
  return "gather indices must be i32 or i64, got " +
         std::string(dtypeName(indices.dtype));
}

std::string concatKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &out = args.outputs[0];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= out.rank())
    return "concat axis " + std::to_string(axis) + " is out of range";
  int64_t outer = product(out.shape, 0, axis);
  size_t elem = dtypeSize(out.dtype);
  std::vector<size_t> chunk, offset;
  size_t rowBytes = 0;
  for (const TensorView &in : args.inputs) {
    if (in.dtype != out.dtype || in.rank() != out.rank())
      return "concat inputs must match the result's element type and rank";
    chunk.push_back(product(in.shape, axis, in.shape.size()) * elem);
    offset.push_back(rowBytes);
    rowBytes += chunk.back();
  }
  if (rowBytes != product(out.shape, axis, out.shape.size()) * elem)
    return "concat inputs do not add up to the result's shape " +
           formatShape(out.shape);
  auto *dst = static_cast<unsigned char *>(out.data);
  int64_t inputs = static_cast<int64_t>(args.inputs.size());
  int64_t pieces = outer * inputs;
#pragma omp parallel for schedule(static) if (outer * rowBytes > kGrain * 4)
  for (int64_t p = 0; p < pieces; ++p) {
    int64_t o = p / inputs, k = p % inputs;
    if (chunk[k] == 0)
      continue;
    const auto *src = static_cast<const unsigned char *>(args.inputs[k].data);
    std::memcpy(dst + o * rowBytes + offset[k], src + o * chunk[k], chunk[k]);
  }
  return {};
}

} // namespace

void registerDataMovementKernels(KernelTable &table) {
  table["transpose"] = {transposeKernel, 1, 1};
  table["reshape"] = {reshapeKernel, 1, 1};
  table["broadcast"] = {broadcastKernel, 1, 1};
  table["slice"] = {sliceKernel, 1, 1};
  table["pad"] = {padKernel, 1, 1};
  table["gather"] = {gatherKernel, 2, 2};
  table["concat"] = {concatKernel, 1, std::numeric_limits<int>::max()};
}

} // namespace loom::rt::cpu
