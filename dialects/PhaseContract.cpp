//===- PhaseContract.cpp - The annotations at each phase boundary ---------===//

#include "dialects/PhaseContract.h"

#include "dialects/LoomDialect.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace loom;

namespace {

using D = LoomDialect;

/// The diagnostic of a broken contract, on `op`, named by its phase.
InFlightDiagnostic breach(Operation *op, Phase phase) {
  return op->emitError() << "phase '" << stringifyPhase(phase) << "': ";
}

/// The module's @main with a body, or a diagnostic.
FunctionOpInterface lookupMain(ModuleOp module, Phase phase) {
  auto main = dyn_cast_or_null<FunctionOpInterface>(
      SymbolTable::lookupSymbolIn(module, "main"));
  if (!main || main.isExternal()) {
    breach(module, phase) << "the module has no function @main";
    return {};
  }
  return main;
}

/// Imported and training-step: every argument has one role, every result
/// is an output (or, in a training step, updates an argument), and a
/// training step has one learning rate and one step.
LogicalResult verifyRoles(FunctionOpInterface main, Phase phase) {
  const bool training = phase == Phase::TrainingStep;
  SmallVector<StringRef> roles = {D::kInputAttrName, D::kParamAttrName,
                                  D::kBufferAttrName};
  if (training)
    roles.append({D::kStateAttrName, D::kHyperAttrName});
  int hypers[2] = {0, 0};
  for (unsigned i = 0, e = main.getNumArguments(); i < e; ++i) {
    unsigned count = llvm::count_if(
        roles, [&](StringRef role) { return main.getArgAttr(i, role); });
    if (count != 1)
      return breach(main, phase)
             << "argument #" << i << " has " << count << " of the roles "
             << llvm::join(roles, ", ") << "; it needs exactly one";
    if (auto hyper = main.getArgAttrOfType<HyperAttr>(i, D::kHyperAttrName))
      ++hypers[static_cast<int>(hyper.getValue())];
  }
  // An imported graph may give buffers new values (training-mode batch
  // normalization's running statistics); a training step also updates
  // parameters and optimizer state.
  for (unsigned i = 0, e = main.getNumResults(); i < e; ++i) {
    if (main.getResultAttr(i, D::kOutputAttrName))
      continue;
    auto of = main.getResultAttrOfType<IntegerAttr>(i, D::kUpdatesAttrName);
    if (of && (training || main.getArgAttr(of.getInt(), D::kBufferAttrName)))
      continue;
    return breach(main, phase)
           << "result #" << i << " needs " << D::kOutputAttrName << " or "
           << D::kUpdatesAttrName
           << (training ? "" : " of a loom.buffer argument");
  }
  for (Hyper hyper : {Hyper::Lr, Hyper::Step})
    if (training && hypers[static_cast<int>(hyper)] != 1)
      return breach(main, phase)
             << "@main needs one argument #loom.hyper<" << stringifyHyper(hyper)
             << ">, not " << hypers[static_cast<int>(hyper)];
  return success();
}

/// Sharded: a mesh, and every op with a sharding rule has its axes.
LogicalResult verifySharded(FunctionOpInterface main) {
  if (!main->hasAttr(D::kMeshAttrName) &&
      !main->getParentOp()->hasAttr(D::kMeshAttrName))
    return breach(main, Phase::Sharded) << "@main has no " << D::kMeshAttrName;
  WalkResult walk = main.walk([&](ShardingOpInterface op) {
    if (op->hasAttr(D::kShardingAttrName))
      return WalkResult::advance();
    breach(op, Phase::Sharded) << "the op has no " << D::kShardingAttrName;
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

/// Partitioned: per-device types, and no sharding left to apply.
LogicalResult verifyPartitioned(FunctionOpInterface main) {
  if (!main->hasAttr(D::kSpmdAttrName))
    return breach(main, Phase::Partitioned)
           << "@main is not " << D::kSpmdAttrName;
  WalkResult walk = main.walk([&](Operation *op) {
    for (StringRef name : {D::kShardingAttrName, D::kStrategyAttrName})
      if (op->hasAttr(name)) {
        breach(op, Phase::Partitioned) << "the op still has " << name;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Pipelined: the stage functions, numbered 0 to P-1 once each, agree on
/// everything in loom.pipeline but the stage.
LogicalResult verifyPipelined(ModuleOp module) {
  const Phase phase = Phase::Pipelined;
  SmallVector<FunctionOpInterface> stages;
  FunctionOpInterface main;
  for (auto f : module.getOps<FunctionOpInterface>()) {
    if (f.isExternal())
      continue;
    if (f->hasAttr(D::kPipelineAttrName))
      stages.push_back(f);
    else if (f.getName() == "main")
      main = f;
  }
  if (stages.empty())
    return breach(module, phase) << "no function has " << D::kPipelineAttrName;
  if (main)
    return breach(main, phase) << "@main is left beside the stage functions";
  auto dictOf = [](FunctionOpInterface f) {
    return f->getAttrOfType<DictionaryAttr>(D::kPipelineAttrName);
  };
  DictionaryAttr first = dictOf(stages.front());
  int64_t count = first.getAs<IntegerAttr>("stages").getInt();
  SmallVector<FunctionOpInterface> byStage(stages.size());
  for (FunctionOpInterface f : stages) {
    DictionaryAttr dict = dictOf(f);
    for (StringRef key : {"stages", "micro_batches", "schedule",
                          "virtual_stages", "axis", "own_mesh"})
      if (dict.get(key) != first.get(key))
        return breach(f, phase)
               << D::kPipelineAttrName << " '" << key << "' differs from @"
               << stages.front().getName() << "'s";
    int64_t s = dict.getAs<IntegerAttr>("stage").getInt();
    if (s >= static_cast<int64_t>(byStage.size()) || byStage[s])
      return breach(f, phase)
             << "stage " << s << " is out of range or taken; the stage "
             << "functions must be stages 0 to " << stages.size() - 1;
    byStage[s] = f;
    if (dict.get("own_mesh") && !f->hasAttr(D::kMeshAttrName))
      return breach(f, phase) << "a stage on a submesh of its own needs its "
                              << D::kMeshAttrName;
  }
  if (count != static_cast<int64_t>(stages.size()))
    return breach(stages.front(), phase)
           << "'" << D::kPipelineAttrName << "' says " << count
           << " stages but the module has " << stages.size()
           << " stage function" << (stages.size() == 1 ? "" : "s");
  return success();
}

} // namespace

LogicalResult loom::verifyPhaseContract(ModuleOp module, Phase phase) {
  if (phase == Phase::Pipelined)
    return verifyPipelined(module);
  FunctionOpInterface main = lookupMain(module, phase);
  if (!main)
    return failure();
  switch (phase) {
  case Phase::Imported:
  case Phase::TrainingStep:
    return verifyRoles(main, phase);
  case Phase::Sharded:
    return verifySharded(main);
  case Phase::Partitioned:
    return verifyPartitioned(main);
  case Phase::Pipelined:
    break;
  }
  return success();
}
