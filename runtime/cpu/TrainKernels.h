//===- TrainKernels.h - Registration of the training-op kernels -*- C++ -*-===//
//
// Internal to the CPU backend: the kernels of the ops in
// dialects/LoomTrainOps.td (gradients and optimizer updates). Some of them
// have more than one result (layer_norm_grad, momentum_update,
// adam_update); their registration records how many, and the backend checks
// the output count against it (every other kernel has one result).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_TRAINKERNELS_H
#define LOOM_RUNTIME_CPU_TRAINKERNELS_H

#include "runtime/cpu/CpuContext.h"

#include <functional>
#include <map>
#include <string>

namespace loom::rt::cpu {

/// Result counts of the kernels with more than one result, by op name.
using ResultCounts = std::map<std::string, int, std::less<>>;

/// relu_grad, gelu_grad, layer_norm_grad, gather_grad, slice_grad and
/// softmax_cross_entropy_grad (GradKernels.cpp).
void registerGradKernels(KernelTable &table, ResultCounts &results);
/// conv2d_grad_input, conv2d_grad_weight, max_pool2d_grad and
/// avg_pool2d_grad (ConvPoolGrad.cpp).
void registerConvPoolGradKernels(KernelTable &table, ResultCounts &results);
/// sgd_update, momentum_update and adam_update (OptimizerKernels.cpp).
void registerOptimizerKernels(KernelTable &table, ResultCounts &results);
void registerReduceGradKernels(KernelTable &table, ResultCounts &results);
/// gather_elements, scatter_elements, cumsum, top_k (two results),
/// reduce_prod and reduce_prod_grad (Indexing.cpp).
void registerIndexingKernels(KernelTable &table, ResultCounts &results);
/// resize and resize_grad (Resize.cpp).
void registerResizeKernels(KernelTable &table);

} // namespace loom::rt::cpu

#endif // LOOM_RUNTIME_CPU_TRAINKERNELS_H
