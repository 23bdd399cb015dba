//===- KernelUtil.cpp - Shape, broadcast and dtype helpers for CPU kernels ===//

#include "runtime/cpu/KernelUtil.h"

namespace loom::rt::cpu {

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i)
    n *= shape[i];
  return n;
}

std::vector<int64_t> rowMajorStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i > 1; --i)
    strides[i - 2] = strides[i - 1] * shape[i - 1];
  return strides;
}

Shape padLeft(const Shape &shape, size_t rank) {
  Shape padded(rank > shape.size() ? rank - shape.size() : 0, 1);
  padded.insert(padded.end(), shape.begin(), shape.end());
  return padded;
}

std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  Shape padded = padLeft(in, out.size());
  std::vector<int64_t> strides = rowMajorStrides(padded);
  for (size_t d = 0; d < padded.size(); ++d)
    if (padded[d] == 1 && out[d] != 1)
      strides[d] = 0;
  return strides;
}

bool broadcastsTo(const Shape &in, const Shape &out) {
  if (in.size() > out.size())
    return false;
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] != 1 && in[d] != out[lead + d])
      return false;
  return true;
}

std::string expectShape(std::string_view op, const char *what,
                        const TensorView &t, const Shape &expected) {
  if (t.shape == expected)
    return {};
  return std::string(op) + ": " + what + " has shape " + formatShape(t.shape) +
         ", expected " + formatShape(expected);
}

bool containsNan(const float *data, int64_t n) {
  bool found = false;
#pragma omp parallel for schedule(static) reduction(|| : found) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i)
    found = found || data[i] != data[i];
  return found;
}

void toF32(const TensorView &src, float *dst) {
  int64_t n = src.numElements();
  switch (src.dtype) {
  case DType::F16: {
    const uint16_t *in = src.as<uint16_t>();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(in[i]);
    break;
  }
  case DType::BF16: {
    const uint16_t *in = src.as<uint16_t>();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(in[i]);
    break;
  }
  default:
    std::copy(src.as<float>(), src.as<float>() + n, dst);
    break;
  }
}

void fromF32(const float *src, const TensorView &dst) {
  int64_t n = dst.numElements();
  switch (dst.dtype) {
  case DType::F16: {
    uint16_t *out = dst.as<uint16_t>();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToHalf(src[i]);
    break;
  }
  case DType::BF16: {
    uint16_t *out = dst.as<uint16_t>();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToBf16(src[i]);
    break;
  }
  default:
    std::copy(src, src + n, dst.as<float>());
    break;
  }
}

static bool isHalfWidth(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16;
}

std::string runInF32(const KernelArgs &args, const ArgsFn &fn) {
  auto staged = [](const TensorView &t) { return isHalfWidth(t.dtype); };
  if (std::none_of(args.inputs.begin(), args.inputs.end(), staged) &&
      std::none_of(args.outputs.begin(), args.outputs.end(), staged))
    return fn(args);
  std::vector<std::vector<float>> storage;
  KernelArgs f32Args{args.op,    args.attrs, args.inputs,
                     args.outputs, args.block, args.scratch,
                     args.scratchBytes};
  for (TensorView &t : f32Args.inputs) {
    if (!staged(t))
      continue;
    storage.emplace_back(t.numElements());
    toF32(t, storage.back().data());
    t = {DType::F32, t.shape, storage.back().data()};
  }
  for (TensorView &t : f32Args.outputs) {
    if (!staged(t))
      continue;
    storage.emplace_back(t.numElements());
    t = {DType::F32, t.shape, storage.back().data()};
  }
  std::string error = fn(f32Args);
  if (!error.empty())
    return error;
  for (size_t i = 0; i < args.outputs.size(); ++i)
    if (staged(args.outputs[i]))
      fromF32(f32Args.outputs[i].as<float>(), args.outputs[i]);
  return {};
}

std::string unsupportedType(std::string_view op, DType dtype) {
  return "op '" + std::string(op) + "' does not support element type " +
         dtypeName(dtype);
}

} // namespace loom::rt::cpu
