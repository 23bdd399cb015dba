//===- KernelScratch.h - The memory a kernel uses beyond its tensors -*- C++ -*-===//
//
// Some kernels need memory beyond their operands and results: a block of
// log-probabilities, index tables, per-row statistics. The rule below is
// the one the CPU kernels take their scratch by (runtime/Kernel.h,
// `ScratchPool`) and the one the plan emitter sizes each instruction's
// scratch by (Instruction.scratch_bytes, as for a collective's packing), so
// that the static memory plan and `loom explain` count it. Parts are listed
// in the order the kernel takes them, each rounded up to kScratchAlign
// bytes; shapes are one rank's.
//
//   softmax_cross_entropy  (without a class block's lse) a block of
//                          log-softmax rows, f32: blockRows x classes,
//                          blockRows = clamp(2^16 / classes, 1, rows)
//                          (256 KiB, or one row of more classes);
//   gather_grad            each index's position and the order of the
//                          indices by bucket (i64 each), the buckets'
//                          bounds and fill pointers (i64);
//   layer_norm_grad        per row mean, variance and 1/std (f64), then
//                          oneDNN's mean and variance (f32 per row) and the
//                          scale gradient it computes and Loom drops (f32
//                          per column);
//   pad_grad               the gradient and the gradient unpadded one
//                          dimension further, f32, each the operand's size;
//   others                 none.
//
// Not here yet: the f32 copies in which the CPU kernels compute f16/bf16
// tensors (runtime/cpu, runInF32), the plain loops' per-thread rows when
// oneDNN declines a shape, oneDNN's own scratchpads and buffers, and the
// CUDA libraries' workspaces (docs/reliability.md, "Memory the plan does
// not count"). The CUDA kernels take none of these bytes; the plan reserves
// them whatever the backend.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_KERNELSCRATCH_H
#define LOOM_COMMON_OPS_KERNELSCRATCH_H

#include "common/ops/OpTypes.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::ops {

/// Every part of a kernel's scratch starts on this many bytes.
inline constexpr int64_t kScratchAlign = 64;

/// gather_grad adds each destination row's contributions in index order
/// within this many buckets of rows (at most the dimension's size).
inline constexpr int64_t kGatherGradBuckets = 256;

/// cross-entropy's log-softmax block holds about this many elements.
inline constexpr int64_t kCrossEntropyBlockElements = int64_t(1) << 16;

/// The rows of one log-softmax block of softmax_cross_entropy.
int64_t crossEntropyBlockRows(int64_t rows, int64_t classes);

/// The parts of `op`'s scratch in bytes (unaligned, in the order the kernel
/// takes them) for operands and results that fit the op's rule.
std::vector<int64_t> kernelScratchParts(std::string_view op,
                                        const Attrs &attrs,
                                        const std::vector<TypeRef> &operands,
                                        const std::vector<TypeRef> &results);

/// The bytes the plan reserves for `op`'s scratch: its parts, each rounded
/// up to kScratchAlign.
int64_t kernelScratchBytes(std::string_view op, const Attrs &attrs,
                           const std::vector<TypeRef> &operands,
                           const std::vector<TypeRef> &results);

} // namespace loom::ops

#endif // LOOM_COMMON_OPS_KERNELSCRATCH_H
