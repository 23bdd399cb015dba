//===- Recompute.cpp - Recompute forward results in the backward ----------===//

#include "passes/training/Recompute.h"
#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/GlobPattern.h"

namespace loom {
#define GEN_PASS_DEF_RECOMPUTE
#define GEN_PASS_DEF_MARKRECOMPUTE
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom::sharding {

namespace {

/// The forward ops that may be recomputed: those with a sharding rule
/// (constants excepted: they cost nothing to keep).
std::vector<Operation *> candidates(func::FuncOp func, const StepShape &step) {
  std::vector<Operation *> ops;
  for (Operation *op : forwardOps(func, step))
    if (op != step.loss)
      ops.push_back(op);
  return ops;
}

} // namespace

FailureOr<int> markRecompute(func::FuncOp func, StringRef spec,
                             std::string &error) {
  StepShape step = analyzeStep(func);
  if (!step.training) {
    error = "recompute needs a training step (--train)";
    return failure();
  }
  UnitAttr unit = UnitAttr::get(func.getContext());
  std::vector<Operation *> ops = candidates(func, step);
  int marked = 0;
  if (spec == "layers") {
    // Every op of a layer but its last, in program order.
    llvm::StringMap<std::vector<Operation *>> layers;
    std::vector<std::string> order;
    for (Operation *op : ops) {
      std::string node = nodeName(op);
      StringRef layer = layerOf(node);
      if (layer.empty())
        continue;
      auto &members = layers[layer];
      if (members.empty())
        order.push_back(layer.str());
      members.push_back(op);
    }
    for (const std::string &layer : order) {
      const std::vector<Operation *> &members = layers[layer];
      for (size_t i = 0; i + 1 < members.size(); ++i) {
        members[i]->setAttr(LoomDialect::kRecomputeAttrName, unit);
        ++marked;
      }
    }
    if (marked == 0) {
      error = "--recompute layers: the model has no layers (ONNX node "
              "names with two path components, such as /blocks.0/MatMul)";
      return failure();
    }
    return marked;
  }
  SmallVector<StringRef> globs;
  spec.split(globs, ',', -1, false);
  if (globs.empty()) {
    error = "--recompute needs `layers` or ONNX node name patterns";
    return failure();
  }
  for (StringRef text : globs) {
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(text);
    if (!glob) {
      error = "--recompute: invalid pattern '" + text.str() +
              "': " + llvm::toString(glob.takeError());
      return failure();
    }
    int matched = 0;
    for (Operation *op : ops)
      if (glob->match(nodeName(op))) {
        if (!op->hasAttr(LoomDialect::kRecomputeAttrName))
          ++marked;
        op->setAttr(LoomDialect::kRecomputeAttrName, unit);
        ++matched;
      }
    if (matched == 0) {
      error = "--recompute: the pattern '" + text.str() +
              "' matches no forward op (patterns match ONNX node names, "
              "e.g. '/blocks.*/mlp/*')";
      return failure();
    }
  }
  return marked;
}

RecomputeReport applyRecompute(func::FuncOp func) {
  RecomputeReport report;
  StepShape step = analyzeStep(func);
  if (!step.training)
    return report;
  llvm::SmallPtrSet<Operation *, 16> marked;
  for (Operation *op : candidates(func, step))
    if (op->hasAttr(LoomDialect::kRecomputeAttrName))
      marked.insert(op);
  report.marked = static_cast<int>(marked.size());
  if (marked.empty())
    return report;

  // Recomputed values, made before the first backward op that needs them
  // and reused by later ones (program order is a valid schedule, so they
  // dominate every later use).
  IRMapping recomputed;
  StringAttr copyMark =
      StringAttr::get(func.getContext(), LoomDialect::kRecomputedAttrName);
  std::function<Value(Value, Operation *)> recompute = [&](Value v,
                                                           Operation *before) {
    if (Value done = recomputed.lookupOrNull(v))
      return done;
    Operation *original = v.getDefiningOp();
    IRMapping operands;
    for (Value operand : original->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && marked.contains(producer))
        operands.map(operand, recompute(operand, before));
    }
    OpBuilder b(before);
    Operation *copy = b.clone(*original, operands);
    copy->removeAttr(LoomDialect::kRecomputeAttrName);
    copy->setAttr(copyMark, b.getUnitAttr());
    ++report.copies;
    for (auto [from, to] :
         llvm::zip(original->getResults(), copy->getResults()))
      recomputed.map(from, to);
    return recomputed.lookup(v);
  };

  SmallVector<Operation *> backward;
  bool past = false;
  for (Operation &op : func.getBody().front()) {
    if (past)
      backward.push_back(&op);
    past |= &op == step.loss;
  }
  std::optional<layout::Mesh> mesh;
  if (auto attr = func->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName)) {
    std::string error;
    mesh = toMesh(attr, error);
  }
  llvm::DenseSet<Value> unsaved;
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      Operation *producer = v.getDefiningOp();
      if (!producer || !marked.contains(producer))
        continue;
      use.set(recompute(v, op));
      if (!unsaved.insert(v).second)
        continue;
      auto type = cast<RankedTensorType>(v.getType());
      std::string error;
      std::optional<OpLayouts> layouts =
          mesh ? layoutsOf(producer, *mesh, error) : std::nullopt;
      if (layouts)
        type = localType(type, *mesh,
                         layouts->results[cast<OpResult>(v).getResultNumber()]);
      report.unsavedBytes += static_cast<double>(type.getNumElements()) *
                             static_cast<double>(elementBytes(type));
    }
  return report;
}

} // namespace loom::sharding

namespace {

struct RecomputePass : public loom::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!spec.empty()) {
      std::string error;
      if (failed(loom::sharding::markRecompute(func, spec, error))) {
        func.emitError(error);
        return signalPassFailure();
      }
    }
    report = loom::sharding::applyRecompute(func);
  }
  loom::sharding::RecomputeReport report;
};

struct MarkRecomputePass
    : public loom::impl::MarkRecomputeBase<MarkRecomputePass> {
  using MarkRecomputeBase::MarkRecomputeBase;
  void runOnOperation() override {
    std::string error;
    if (failed(loom::sharding::markRecompute(getOperation(), spec, error))) {
      getOperation().emitError(error);
      signalPassFailure();
    }
  }
};

} // namespace

const loom::sharding::RecomputeReport *
loom::sharding::recomputeReport(Pass &pass) {
  if (pass.getTypeID() != TypeID::get<RecomputePass>())
    return nullptr;
  return &static_cast<RecomputePass &>(pass).report;
}
