//===- PropagateSharding.cpp - Choose every op's sharding -----------------===//
//
// Greedy propagation in program order (see Passes.td): fixed ops keep their
// assignment; every other op takes, among the assignments its operands'
// layouts imply, the one with the least redistribution on its incoming
// edges. Redistribution costs come from the layout library's planner, so
// the choice counts exactly the collectives loom-partition will insert.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ShardingSupport.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <map>

namespace loom {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::vector<int64_t> shapeOf(Value v) {
  ArrayRef<int64_t> s = typeOf(v).getShape();
  return {s.begin(), s.end()};
}


struct EdgeCost {
  double bytes = 0;
  int collectives = 0;
  bool operator<(const EdgeCost &o) const {
    if (bytes != o.bytes)
      return bytes < o.bytes;
    return collectives < o.collectives;
  }
  EdgeCost &operator+=(const EdgeCost &o) {
    bytes += o.bytes;
    collectives += o.collectives;
    return *this;
  }
};

class Propagator {
public:
  Propagator(func::FuncOp func, MeshAttr meshAttr, layout::Mesh mesh)
      : func(func), meshAttr(meshAttr), mesh(std::move(mesh)) {}

  LogicalResult run(StringRef mode);

private:
  LogicalResult chooseFor(Operation *op);
  /// Backward from the fixed ops: the layout each value's users would like,
  /// pulled through the ops that produce it (a transposed weight makes the
  /// weight want the transposed split).
  LogicalResult computePreferences(Block &body);
  EdgeCost redistributionCost(Value v, const layout::TensorLayout &from,
                              const layout::TensorLayout &to);

  func::FuncOp func;
  MeshAttr meshAttr;
  layout::Mesh mesh;
  llvm::DenseMap<Value, layout::TensorLayout> layouts;
  llvm::DenseMap<Value, layout::TensorLayout> preferred;
  /// Layouts a value has been redistributed to for earlier users: later
  /// users get them for free (loom-partition reuses them).
  llvm::DenseMap<Value, SmallVector<layout::TensorLayout, 1>> copies;
  /// The cost for `v` (in `from`, or any of its copies) to reach `to`.
  EdgeCost operandCost(Value v, const layout::TensorLayout &from,
                       const layout::TensorLayout &to) {
    auto it = copies.find(v);
    if (it != copies.end() && llvm::is_contained(it->second, to))
      return {};
    return redistributionCost(v, from, to);
  }
  /// For results returned as updates: the argument they replace.
  llvm::DenseMap<Value, BlockArgument> updates;
  sharding::PlannerCache planners{mesh};
};

EdgeCost Propagator::redistributionCost(Value v,
                                        const layout::TensorLayout &from,
                                        const layout::TensorLayout &to) {
  if (from == to)
    return {};
  std::string error;
  std::optional<layout::RedistributionPlan> plan =
      planners.plan(typeOf(v), from, to, error);
  if (!plan)
    return {1e30, 1 << 20};
  return {plan->cost.bytes, plan->cost.collectives};
}

LogicalResult Propagator::chooseFor(Operation *op) {
  auto iface = dyn_cast<ShardingOpInterface>(op);
  if (!iface)
    return op->emitOpError("has no sharding rule, so it cannot be partitioned");
  ShardingRule rule = iface.getShardingRule();
  std::string error;

  FailureOr<std::optional<FactorAxes>> fixedOr = sharding::fixedAssignment(op, rule, mesh);
  if (failed(fixedOr))
    return failure();
  std::optional<FactorAxes> fixed = *fixedOr;

  SmallVector<FactorAxes> candidates;
  auto addCandidate = [&](FactorAxes c) {
    if (!llvm::is_contained(candidates, c))
      candidates.push_back(std::move(c));
  };
  if (fixed) {
    addCandidate(*fixed);
  } else {
    FactorAxes merged(rule.factors.size());
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      auto it = layouts.find(v);
      if (it == layouts.end())
        continue;
      FactorAxes c(rule.factors.size());
      sharding::induceFromOperand(rule, i, it->second, c);
      addCandidate(c);
      sharding::induceFromOperand(rule, i, it->second, merged);
    }
    addCandidate(merged);
    // What the users downstream prefer, and what undecided operands
    // (parameters) prefer.
    FactorAxes wanted(rule.factors.size());
    for (auto [j, r] : llvm::enumerate(op->getResults()))
      if (auto it = preferred.find(r); it != preferred.end())
        sharding::induceFromResult(rule, j, it->second, wanted);
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (!layouts.count(v))
        if (auto it = preferred.find(v); it != preferred.end())
          sharding::induceFromOperand(rule, i, it->second, wanted);
    addCandidate(wanted);
    addCandidate(FactorAxes(rule.factors.size()));
    // A linear op whose operands are all partial sums over the same axes
    // can keep them partial: one reduction later instead of one per
    // operand now (the input gradient of q, k and v projections).
    if (rule.linear && op->getNumOperands() > 0) {
      std::optional<std::vector<int>> common;
      for (Value v : op->getOperands()) {
        auto it = layouts.find(v);
        std::vector<int> p =
            it == layouts.end() ? std::vector<int>() : it->second.partialAxes();
        if (!common)
          common = p;
        else if (*common != p)
          common = std::vector<int>();
      }
      if (common && !common->empty()) {
        FactorAxes through = merged;
        through.emplace_back(common->begin(), common->end());
        addCandidate(through);
      }
    }
  }

  // Pick the cheapest valid candidate.
  std::optional<sharding::OpLayouts> best;
  FactorAxes bestAxes;
  EdgeCost bestCost;
  int64_t bestWork = 0;
  std::string firstError;
  for (const FactorAxes &c : candidates) {
    std::optional<sharding::OpLayouts> l =
        sharding::deriveLayouts(rule, c, mesh, error);
    if (!l) {
      if (firstError.empty())
        firstError = error;
      continue;
    }
    EdgeCost cost;
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      auto it = layouts.find(v);
      if (it != layouts.end())
        cost += operandCost(v, it->second, l->operands[i]);
    }
    for (auto [j, r] : llvm::enumerate(op->getResults())) {
      auto it = updates.find(r);
      if (it == updates.end())
        continue;
      auto arg = layouts.find(it->second);
      if (arg != layouts.end())
        cost += redistributionCost(r, l->results[j], arg->second);
    }
    // Work per device: the local elements of the results.
    int64_t work = 0;
    for (auto [j, r] : llvm::enumerate(op->getResults()))
      work += l->results[j].localNumElements(mesh, shapeOf(r));
    if (!best || cost < bestCost ||
        (!(bestCost < cost) && work < bestWork)) {
      best = std::move(l);
      bestAxes = c;
      bestCost = cost;
      bestWork = work;
    }
  }
  if (!best)
    return op->emitError() << (fixed ? "the strategy of " : "no valid sharding for ")
                           << sharding::describeOp(op) << ": " << firstError;

  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    auto it = layouts.find(v);
    if (it == layouts.end())
      layouts[v] = best->operands[i];
    else if (it->second != best->operands[i] &&
             !llvm::is_contained(copies[v], best->operands[i]))
      copies[v].push_back(best->operands[i]);
  }
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    layouts[r] = best->results[j];
  op->setAttr(LoomDialect::kShardingAttrName,
              sharding::factorsToAttr(op->getContext(), bestAxes, mesh));
  op->removeAttr(LoomDialect::kStrategyAttrName);
  return success();
}

LogicalResult Propagator::computePreferences(Block &body) {
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    auto iface = dyn_cast<ShardingOpInterface>(op);
    if (!iface)
      continue;
    ShardingRule rule = iface.getShardingRule();
    FailureOr<std::optional<FactorAxes>> fixed = sharding::fixedAssignment(&op, rule, mesh);
    if (failed(fixed))
      return failure();
    FactorAxes axes(rule.factors.size());
    if (*fixed) {
      axes = **fixed;
    } else {
      bool any = false;
      for (auto [j, r] : llvm::enumerate(op.getResults()))
        if (auto it = preferred.find(r); it != preferred.end()) {
          sharding::induceFromResult(rule, j, it->second, axes);
          any = true;
        }
      if (!any)
        continue;
    }
    std::string error;
    std::optional<sharding::OpLayouts> l =
        sharding::deriveLayouts(rule, axes, mesh, error);
    if (!l)
      continue;
    for (auto [i, v] : llvm::enumerate(op.getOperands()))
      if (!preferred.count(v))
        preferred[v] = l->operands[i];
  }
  return success();
}

LogicalResult Propagator::run(StringRef mode) {
  Block &body = func.getBody().front();
  // Given argument layouts; data mode decides inputs and parameters.
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    unsigned i = arg.getArgNumber();
    if (auto l = func.getArgAttrOfType<TensorLayoutAttr>(
            i, LoomDialect::kLayoutAttrName)) {
      layouts[arg] = sharding::toLayout(l, meshAttr);
      continue;
    }
    if (func.getArgAttr(i, LoomDialect::kHyperAttrName)) {
      layouts[arg] = layout::TensorLayout::replicated(type.getRank());
      continue;
    }
    if (mode != "data")
      continue;
    if (func.getArgAttr(i, LoomDialect::kInputAttrName) && type.getRank() > 0) {
      std::vector<std::vector<int>> dims(type.getRank());
      for (int a = 0; a < mesh.numAxes(); ++a)
        dims[0].push_back(a);
      layout::TensorLayout l = layout::TensorLayout::of(dims);
      std::string error;
      if (!l.verify(mesh, shapeOf(arg), error))
        return func.emitError()
               << "--mode data splits the batch (dimension 0) of input '"
               << func.getArgAttrOfType<StringAttr>(
                      i, LoomDialect::kInputAttrName)
                      .getValue()
               << "' " << type << " over all " << mesh.numDevices()
               << " devices " << mesh.toString() << ": " << error
               << "; choose a batch size divisible by the device count";
      layouts[arg] = l;
    } else if (func.getArgAttr(i, LoomDialect::kParamAttrName) ||
               func.getArgAttr(i, LoomDialect::kBufferAttrName)) {
      layouts[arg] = layout::TensorLayout::replicated(type.getRank());
    }
  }
  Operation *terminator = body.getTerminator();
  for (auto [j, v] : llvm::enumerate(terminator->getOperands()))
    if (auto index = func.getResultAttrOfType<IntegerAttr>(
            j, LoomDialect::kUpdatesAttrName))
      updates[v] = func.getArgument(index.getInt());

  if (failed(computePreferences(body)))
    return failure();
  for (Operation &op : body.without_terminator())
    if (failed(chooseFor(&op)))
      return failure();

  // State no op has claimed yet (its update result decides: updates were
  // visited as ops), then whatever is left, replicated.
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    auto it = layouts.find(arg);
    layout::TensorLayout l = it != layouts.end()
                                 ? it->second
                                 : layout::TensorLayout::replicated(
                                       type.getRank());
    func.setArgAttr(arg.getArgNumber(), LoomDialect::kLayoutAttrName,
                    sharding::toAttr(meshAttr, l));
  }
  return success();
}

struct PropagateShardingPass
    : public loom::impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (mode != "data" && mode != "semi") {
      func.emitError() << "unknown sharding mode '" << mode
                       << "' (expected data or semi)";
      return signalPassFailure();
    }
    auto mesh = sharding::meshOf(func, "loom-propagate-sharding");
    if (failed(mesh))
      return signalPassFailure();
    Propagator propagator(func, mesh->first, mesh->second);
    if (failed(propagator.run(mode)))
      signalPassFailure();
  }
};

} // namespace
