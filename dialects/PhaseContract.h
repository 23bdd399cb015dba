//===- PhaseContract.h - What each phase boundary promises ------*- C++ -*-===//
//
// The contract between the compiler's phases as code: the annotations a
// module holds at each boundary (Phase, in LoomAttrs.td), so that one
// that is missing or misspelt is a diagnostic where it is made rather
// than a default where it is read. The dialect's verifier checks each
// annotation's type; this checks that the ones a phase needs are there
// and agree. loom-verify-phase runs it as a pass; the compile pipeline at
// its boundaries, and the plan emitter before it reads a pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_PHASECONTRACT_H
#define LOOM_DIALECTS_PHASECONTRACT_H

#include "dialects/LoomEnums.h"

#include "mlir/IR/BuiltinOps.h"

namespace loom {

/// Fails, with a diagnostic on the offending op, unless `module` keeps the
/// contract of `phase` (see loom-verify-phase's description in
/// passes/Passes.td). Expects a module that verifies.
mlir::LogicalResult verifyPhaseContract(mlir::ModuleOp module, Phase phase);

} // namespace loom

#endif // LOOM_DIALECTS_PHASECONTRACT_H
