//===- ApplyStrategies.cpp - loom-apply-strategies ------------------------===//
//
// A JSON strategy file (docs/partitioning.md) applied to the function on
// its mesh: shardings, pipeline stages and recompute marks on the ops of
// the ONNX nodes its entries name (StrategyFile.cpp parses and applies).
//
//===----------------------------------------------------------------------===//

#include "common/text/InputLimits.h"
#include "compiler/analysis/ShardingSupport.h"
#include "passes/Passes.h"
#include "passes/sharding/StrategyFile.h"

#include "llvm/Support/MemoryBuffer.h"

namespace loom {
#define GEN_PASS_DEF_APPLYSTRATEGIES
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct ApplyStrategiesPass
    : public loom::impl::ApplyStrategiesBase<ApplyStrategiesPass> {
  using ApplyStrategiesBase::ApplyStrategiesBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (file.empty())
      return markAllAnalysesPreserved();
    auto mesh = sharding::meshOf(func, "loom-apply-strategies");
    if (failed(mesh))
      return signalPassFailure();
    std::string text, error;
    if (!limits::readBoundedFile(file, limits::kMaxJsonBytes, text, error)) {
      func.emitError() << file << ": cannot read the strategy file: " << error;
      return signalPassFailure();
    }
    std::optional<sharding::StrategyFile> strategies =
        sharding::parseStrategyFile(text, file, error);
    if (!strategies || !sharding::applyStrategies(func, *strategies, file,
                                                  mesh->second, error)) {
      func.emitError() << error;
      signalPassFailure();
    }
  }
};

} // namespace
