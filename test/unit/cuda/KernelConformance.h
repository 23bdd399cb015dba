//===- KernelConformance.h - Kernel conformance cases ----------*- C++ -*-===//
//
// The CUDA kernel conformance test (KernelConformanceTest.cpp) runs every
// kernel of the device backend on random inputs and compares its results
// with the CPU backend's. A case is one kernel call: an op, its attributes,
// seeded random inputs and the types and shapes of its results. The case
// table (conformanceCases()) is the single list of what is covered: the
// coverage test derives the covered ops from it.
//
// Only the public runtime interface (runtime/Backend.h, Kernel.h, Tensor.h)
// is used, so the test builds wherever the runtime does.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_CUDA_KERNELCONFORMANCE_H
#define LOOM_TEST_UNIT_CUDA_KERNELCONFORMANCE_H

#include "runtime/Kernel.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace loom::rt::conformance {

/// |got - expected| <= atol + rtol * |expected|; both 0 means bit-exact
/// values (NaN matching NaN).
struct Tolerance {
  double atol = 0, rtol = 0;
};

/// The element type and shape of one kernel result.
struct OutputSpec {
  DType dtype;
  Shape shape;
};

/// One kernel call.
struct Case {
  Attrs attrs;
  std::vector<HostBuffer> inputs;
  std::vector<OutputSpec> outputs;
  /// The longest sum behind one result element (a matmul's K, a
  /// convolution's channels times window): float tolerances grow with it.
  int64_t reduction = 1;
  /// Replaces the tolerance of the results' element type (exact for data
  /// movement, casts and maxima).
  std::optional<Tolerance> tolerance;
  /// Where the first result lies in a larger global tensor (a rank's
  /// block, KernelArgs::block); unset: it is the whole tensor.
  std::optional<GlobalBlock> block;
};

/// A named case: `make` builds it from a generator seeded by the name.
struct CaseSpec {
  std::string name; ///< A gtest parameter name: letters, digits, '_'.
  std::string op;
  std::function<Case(std::mt19937 &)> make;
};

/// The tolerance of a float result of `dtype` behind sums of `reduction`
/// terms of inputs of magnitude about 1: the CPU backend sums in double or
/// in another order, and f16/bf16 results may round to a neighbouring value
/// or through a rounded intermediate. Exact for integers and bool.
Tolerance defaultTolerance(DType dtype, int64_t reduction);

//===--- Inputs -------------------------------------------------------===//

/// The element `index` of `t` as a double (f16/bf16 widened exactly).
double elementAt(const HostBuffer &t, int64_t index);
/// Stores `value` as element `index` of `t`, rounded to its element type.
void setElement(HostBuffer &t, int64_t index, double value);
/// A zero-filled tensor.
HostBuffer zeros(DType dtype, Shape shape);
/// Uniform values in [lo, hi], rounded to the element type.
HostBuffer uniform(DType dtype, Shape shape, std::mt19937 &rng, double lo = -1,
                   double hi = 1);
/// Values of magnitude in [lo, hi] with random signs (divisors).
HostBuffer awayFromZero(DType dtype, Shape shape, std::mt19937 &rng, double lo,
                        double hi);
/// Values lo, lo + step, ..., lo + (count - 1) * step drawn at random, so
/// that ties are frequent (maxima and their gradients).
HostBuffer levels(DType dtype, Shape shape, std::mt19937 &rng, double lo,
                  double step, int count);
/// Whole numbers in [lo, hi] (integer, bool or float tensors).
HostBuffer integers(DType dtype, Shape shape, std::mt19937 &rng, int64_t lo,
                    int64_t hi);
/// A rank-0 tensor holding `value`.
HostBuffer scalar(DType dtype, double value);

/// The floats, for loops over element types.
inline const std::vector<DType> kFloatTypes = {DType::F32, DType::F16,
                                               DType::BF16};

/// "<op>_<variant>_<dtype>" (the variant may be empty).
std::string caseName(const std::string &op, const std::string &variant,
                     DType dtype);

/// Appends the case caseName(op, variant, dtype) built by `make`.
void addCase(std::vector<CaseSpec> &cases, const std::string &op,
             const std::string &variant, DType dtype,
             std::function<Case(std::mt19937 &)> make);

/// Bit-exact results (data movement, casts, maxima).
inline Tolerance exact() { return {0, 0}; }

//===--- The case table -----------------------------------------------===//

/// add .. pow, the unary ops, relu_grad, gelu_grad, the activations of
/// common/ops/ElementwiseMath.h and unary_grad, cast, select.
void addElementwiseCases(std::vector<CaseSpec> &cases);
/// reshape, broadcast, transpose, slice, slice_grad, concat, gather,
/// gather_grad.
void addDataMovementCases(std::vector<CaseSpec> &cases);
/// reduce_sum, reduce_mean, reduce_max, reduce_max_grad, softmax,
/// log_softmax, layer_norm, layer_norm_grad, batch_norm.
void addReductionNormalizationCases(std::vector<CaseSpec> &cases);
/// The losses, label_count, the optimizer updates, matmul, fused_matmul.
void addLossOptimizerMatmulCases(std::vector<CaseSpec> &cases);
/// conv2d and pooling, their gradients, over many geometries
/// (ConvPoolCases.cpp).
void addConvPoolCases(std::vector<CaseSpec> &cases);
/// equal .. greater_equal, and, or, xor, not, max, min, trilu
/// (CompareCases.cpp).
void addCompareCases(std::vector<CaseSpec> &cases);

/// dropout, on whole tensors and on blocks of global ones
/// (DropoutCases.cpp).
void addDropoutCases(std::vector<CaseSpec> &cases);

/// Every case, in a fixed order.
/// gather_elements, scatter_elements, cumsum, top_k, reduce_prod,
/// reduce_prod_grad (IndexingCases.cpp).
void addIndexingCases(std::vector<CaseSpec> &cases);
/// resize and resize_grad (ResizeCases.cpp).
void addResizeCases(std::vector<CaseSpec> &cases);

const std::vector<CaseSpec> &conformanceCases();

/// The ops the CUDA backend registers (runtime/cuda: the register*Kernels
/// tables), as data: in cuda mode the test checks that the backend's
/// supportedOps() is exactly this list, and in cpu mode the coverage test
/// checks the cases against it.
extern const std::vector<std::string> kCudaBackendOps;

} // namespace loom::rt::conformance

#endif // LOOM_TEST_UNIT_CUDA_KERNELCONFORMANCE_H
