//===- Kernel.h - What a backend kernel receives ----------------*- C++ -*-===//
//
// A kernel computes one instruction of a plan: a loom op (named as in the
// dialect without the `loom.` prefix, e.g. "matmul") on input and output
// tensor views whose shapes are static and already checked by the plan
// validator. Attributes carry the op's attributes by their dialect names;
// unit attributes appear as bools (absent means false). Optional trailing
// operands (layer_norm's bias, conv2d's bias) are simply absent.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNEL_H
#define LOOM_RUNTIME_KERNEL_H

#include "runtime/Tensor.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::rt {

using ops::Attrs;
using ops::AttrValue;

/// Where an instruction's first result lies in the global (unpartitioned)
/// tensor whose block this rank holds: the global shape and the block's
/// offset per dimension. For kernels whose values depend on an element's
/// global index (dropout's mask), so that every rank computes exactly its
/// block of the single-device result.
struct GlobalBlock {
  Shape globalShape;
  std::vector<int64_t> offsets;
};

struct KernelArgs {
  std::string_view op;
  const Attrs &attrs;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  /// The first result's block; nullptr: the result is the whole tensor.
  const GlobalBlock *block = nullptr;
  /// The instruction's scratch in the step arena (Instruction.scratch_bytes,
  /// sized by common/ops/KernelScratch.h); null and 0 where it has none.
  unsigned char *scratch = nullptr;
  size_t scratchBytes = 0;
};

/// Hands out a kernel's scratch in the order its rule lists the parts
/// (common/ops/KernelScratch.h), each on kScratchAlign bytes: from the
/// instruction's bytes in the step arena, or, where a part does not fit
/// there (a kernel called outside a plan, or taking more than its rule
/// says), from the heap for the pool's lifetime, which the measured-memory
/// oracle sees (test/e2e/memory_measured.py).
class ScratchPool {
public:
  explicit ScratchPool(const KernelArgs &args)
      : next(args.scratch), end(args.scratch + args.scratchBytes) {}
  ScratchPool(const ScratchPool &) = delete;
  ScratchPool &operator=(const ScratchPool &) = delete;

  /// Room for `n` elements of T, uninitialised.
  template <typename T> T *take(int64_t n) {
    return static_cast<T *>(takeBytes(static_cast<size_t>(n) * sizeof(T)));
  }
  /// How many bytes came from the heap: this pool's, and every pool's
  /// since the process started (the kernel tests check that a kernel given
  /// its rule's scratch takes none from the heap).
  size_t heapBytes() const { return onHeap; }
  static size_t heapBytesOfAllPools();

private:
  void *takeBytes(size_t bytes);

  unsigned char *next, *end;
  std::vector<std::unique_ptr<unsigned char[]>> heap;
  size_t onHeap = 0;
};

/// Checks a call's operand and result counts against a kernel's: "" or,
/// e.g., "cpu kernel 'add' expects 2 inputs and 1 output, got 3 and 1".
/// `maxInputs` may be INT_MAX (no upper bound).
std::string checkArity(std::string_view backend, std::string_view op,
                       const KernelArgs &args, int minInputs, int maxInputs,
                       int outputs);

/// Returns an empty string on success, else what went wrong (e.g. a gather
/// index out of range), which the executor reports with the op's location.
using KernelFn = std::function<std::string(const KernelArgs &)>;

} // namespace loom::rt

#endif // LOOM_RUNTIME_KERNEL_H
