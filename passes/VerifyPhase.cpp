//===- VerifyPhase.cpp - loom-verify-phase --------------------------------===//
//
// Fails unless the module keeps the contract of a phase boundary
// (verifyPhaseContract); changes nothing.
//
//===----------------------------------------------------------------------===//

#include "dialects/PhaseContract.h"
#include "passes/Passes.h"

namespace loom {
#define GEN_PASS_DEF_VERIFYPHASE
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace {

struct VerifyPhasePass : public loom::impl::VerifyPhaseBase<VerifyPhasePass> {
  using VerifyPhaseBase::VerifyPhaseBase;
  void runOnOperation() override {
    if (failed(loom::verifyPhaseContract(getOperation(), phase)))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
