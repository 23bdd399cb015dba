//===- Dropout.cu - Dropout with a mask on the global element index -------===//
//
// The CUDA twin of runtime/cpu/Dropout.cpp: the same Philox draw
// (common/ops/Philox.h, compiled here for the device) at each element's
// row-major index in the global tensor (KernelArgs::block), so the mask
// is bit for bit the CPU's. The step is read on the device, where the
// runtime wrote it, so the kernel queues without a host round trip.
//
//===----------------------------------------------------------------------===//

#include "common/ops/Philox.h"
#include "runtime/cuda/DeviceUtil.cuh"

namespace loom::rt::cuda {
namespace {

namespace philox = ops::philox;

template <typename T, typename S>
__global__ void dropoutKernel(const T *in, T *out, const S *step, int64_t n,
                              float ratio, float scale, uint64_t seed,
                              philox::GlobalIndexer indexer) {
  const uint32_t stepWord = philox::stepWord(toFloat(*step));
  LOOM_GRID_LOOP(i, n) {
    out[i] = philox::dropoutKeeps(seed, stepWord, indexer(i), ratio)
                 ? fromFloat<T>(toFloat(in[i]) * scale)
                 : fromFloat<T>(0.0f);
  }
}

std::string dropout(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (x.dtype != y.dtype || x.shape != y.shape)
    return "cuda kernel 'dropout' needs a result of its input's type";
  const int64_t n = y.numElements();
  if (n == 0)
    return "";
  if (args.inputs.size() < 2) {
    if (y.data != x.data)
      cudaMemcpyAsync(y.data, x.data, x.bytes(), cudaMemcpyDeviceToDevice,
                      ctx.stream);
    return launchStatus(args.op);
  }
  const Shape &local = y.shape;
  const std::vector<int64_t> zeros(local.size(), 0);
  const Shape &global = args.block ? args.block->globalShape : local;
  const std::vector<int64_t> &offsets =
      args.block ? args.block->offsets : zeros;
  philox::GlobalIndexer indexer;
  if (global.size() != local.size() || offsets.size() != local.size() ||
      !philox::makeGlobalIndexer(static_cast<int>(local.size()), local.data(),
                                 global.data(), offsets.data(), indexer))
    return "cuda kernel 'dropout': the result's global block does not fit "
           "its shape " +
           formatShape(local);
  indexer.base = static_cast<uint64_t>(args.attrs.getInt("index_offset"));
  const float ratio = static_cast<float>(args.attrs.getFloat("ratio"));
  const float scale = philox::dropoutScale(ratio);
  const uint64_t seed = static_cast<uint64_t>(args.attrs.getInt("seed"));
  const TensorView &step = args.inputs[1];
  bool stepFloat = false;
  bool known = dispatchFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    stepFloat = dispatchFloat(step.dtype, [&](auto s) {
      using S = decltype(s);
      dropoutKernel<T, S><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          x.as<T>(), y.as<T>(), step.as<S>(), n, ratio, scale, seed, indexer);
    });
  });
  if (!known)
    return unsupportedType(args.op, x.dtype);
  if (!stepFloat)
    return unsupportedType(args.op, step.dtype);
  return launchStatus(args.op);
}

} // namespace

void registerDropoutKernels(KernelTable &table) {
  table["dropout"] = {dropout, 1, 2, 1};
}

} // namespace loom::rt::cuda
