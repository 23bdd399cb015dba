//===- ReduceGrad.cpp - Gradient of reduce_max ----------------------------===//

#include "runtime/cpu/TrainKernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <vector>

namespace loom::rt::cpu {
namespace {

/// reduce_max_grad(input, max, grad): each output position's gradient is
/// shared evenly by the input elements equal to its maximum (as PyTorch's
/// amax). Operands and result are f32; other float types go through f32.
std::string reduceMaxGradKernel(CpuContext &, const KernelArgs &args) {
  const TensorView &x = args.inputs[0], &m = args.inputs[1],
                   &g = args.inputs[2], &out = args.outputs[0];
  if (x.dtype != DType::F32 || m.dtype != DType::F32 || g.dtype != DType::F32 ||
      out.dtype != DType::F32)
    return "reduce_max_grad supports f32";
  std::vector<int64_t> axes = args.attrs.getInts("axes");
  int64_t rank = x.rank();
  // Strides of the reduced (keep_dims) shape: 0 along reduced dimensions.
  std::vector<int64_t> keptStride(rank, 0);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) {
      keptStride[d] = stride;
      stride *= x.shape[d];
    }
  }
  int64_t outCount = stride, n = x.numElements();
  if (m.numElements() != outCount || g.numElements() != outCount)
    return "reduce_max_grad: the maximum and gradient do not match the "
           "reduction";
  // For each input element, its reduced position.
  std::vector<int64_t> position(n);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = 0;
    for (int64_t d = 0; d < rank; ++d)
      p += idx[d] * keptStride[d];
    position[i] = p;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < x.shape[d])
        break;
      idx[d] = 0;
    }
  }
  const float *xs = x.as<float>(), *ms = m.as<float>(), *gs = g.as<float>();
  std::vector<int64_t> ties(outCount, 0);
  for (int64_t i = 0; i < n; ++i)
    ties[position[i]] += xs[i] == ms[position[i]];
  float *os = out.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = position[i];
    os[i] = xs[i] == ms[p] ? gs[p] / static_cast<float>(ties[p]) : 0.0f;
  }
  return "";
}

} // namespace

void registerReduceGradKernels(KernelTable &table, ResultCounts &) {
  table["reduce_max_grad"] = {reduceMaxGradKernel, 3, 3};
}

} // namespace loom::rt::cpu
