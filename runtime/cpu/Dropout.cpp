//===- Dropout.cpp - Dropout with a mask on the global element index ------===//
//
// dropout keeps element i with probability 1 - ratio and scales it by
// 1 / (1 - ratio); whether it keeps it is a Philox draw (common/ops/
// Philox.h) at i's row-major index in the global tensor, so a rank holding
// a block of it (KernelArgs::block) draws that block of the single-device
// mask. Without a step operand it is the identity (an inference graph).
//
//===----------------------------------------------------------------------===//

#include "common/ops/Philox.h"
#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

#include <cstring>

namespace loom::rt::cpu {

namespace {

namespace philox = ops::philox;

/// The indexer from `args.block` (the whole tensor when there is none);
/// false with `error` when the block does not fit the result.
bool globalIndexer(const KernelArgs &args, philox::GlobalIndexer &indexer,
                   std::string &error) {
  const Shape &local = args.outputs[0].shape;
  const GlobalBlock *block = args.block;
  const std::vector<int64_t> zeros(local.size(), 0);
  const Shape &global = block ? block->globalShape : local;
  const std::vector<int64_t> &offsets = block ? block->offsets : zeros;
  if (global.size() != local.size() || offsets.size() != local.size()) {
    error = "the result's global block has " + std::to_string(global.size()) +
            " dimensions, the result " + std::to_string(local.size());
    return false;
  }
  if (!philox::makeGlobalIndexer(static_cast<int>(local.size()), local.data(),
                                 global.data(), offsets.data(), indexer)) {
    error = "tensors of rank " + std::to_string(local.size()) +
            " are not supported (at most " +
            std::to_string(philox::kMaxIndexRank) + ")";
    return false;
  }
  return true;
}

std::string dropout(CpuContext &, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (args.inputs.size() < 2) {
    if (y.data != x.data)
      std::memmove(y.data, x.data, x.bytes());
    return "";
  }
  philox::GlobalIndexer indexer;
  std::string error;
  if (!globalIndexer(args, indexer, error))
    return "dropout: " + error;
  indexer.base = static_cast<uint64_t>(args.attrs.getInt("index_offset"));
  return runInF32(args, [&](const KernelArgs &a) {
    const float ratio = static_cast<float>(a.attrs.getFloat("ratio"));
    const uint64_t seed = static_cast<uint64_t>(a.attrs.getInt("seed"));
    const uint32_t step = philox::stepWord(*a.inputs[1].as<float>());
    const float scale = philox::dropoutScale(ratio);
    const float *in = a.inputs[0].as<float>();
    float *out = a.outputs[0].as<float>();
    const int64_t n = a.outputs[0].numElements();
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i)
      out[i] = philox::dropoutKeeps(seed, step, indexer(i), ratio)
                   ? in[i] * scale
                   : 0.0f;
    return std::string();
  });
}

} // namespace

void registerDropoutKernels(KernelTable &table) {
  table["dropout"] = {dropout, 1, 2};
}

} // namespace loom::rt::cpu
