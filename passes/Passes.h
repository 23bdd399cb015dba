//===- Passes.h - Loom's passes --------------------------------*- C++ -*-===//

#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "dialects/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Whether `op` is a transpose that loom-fuse-matmul-epilogue folds into
/// the matmuls using it (it swaps the last two dimensions and only matmuls
/// use it), so that plans compiled with fusion never run it.
bool isFoldedTranspose(mlir::Operation *op);

} // namespace loom

#endif // LOOM_PASSES_PASSES_H
