//===- Recompute.h - Recompute forward results in the backward --*- C++ -*-===//
//
// Activation recomputation (checkpointing): a forward op marked
// `loom.recompute` does not keep its results for the backward pass; a copy
// of it, placed just before the first backward op that needs them, computes
// them again from its operands. Marked operands are recomputed in turn, so
// a marked region is recomputed from the unmarked values that enter it
// (its checkpoints), which the backward keeps. Activation memory drops to
// the checkpoints plus one region's recomputed values at a time, for one
// more forward pass of the marked ops.
//
// Marks come from the user (`loom.recompute` in MLIR, `"recompute": true`
// strategy file entries, `loom compile --recompute`) or from the search
// when activations do not fit. `layers` marks every forward op of each
// repeated layer (ops whose ONNX node names share their first path
// component, e.g. "/blocks.3") except the layer's last op, whose result
// (the layer's output) becomes the checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_TRAINING_RECOMPUTE_H
#define LOOM_PASSES_TRAINING_RECOMPUTE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace loom::sharding {

/// Marks forward ops of a training step for recompute: `spec` is "layers"
/// or comma-separated globs on ONNX node names. Returns how many ops it
/// marked; fails (with `error`) on a bad glob, a glob that matches no
/// forward op, or a function that is not a training step.
mlir::FailureOr<int> markRecompute(mlir::func::FuncOp func,
                                   llvm::StringRef spec, std::string &error);

struct RecomputeReport {
  /// Forward ops marked, and copies made for the backward pass.
  int marked = 0;
  int copies = 0;
  /// Bytes per device of the forward results the backward no longer
  /// keeps (their recomputed copies live only while their region's
  /// backward runs).
  double unsavedBytes = 0;
};

/// Rewrites the backward pass's uses of marked forward results into
/// recomputations (the copies carry `loom.recomputed` and every other
/// attribute of their original, its sharding included). A function without
/// marks is left alone.
RecomputeReport applyRecompute(mlir::func::FuncOp func);

/// What `pass` recomputed, when it is a loom-recompute that ran; nullptr
/// otherwise (for a pass instrumentation's report).
const RecomputeReport *recomputeReport(mlir::Pass &pass);

} // namespace loom::sharding

#endif // LOOM_PASSES_TRAINING_RECOMPUTE_H
