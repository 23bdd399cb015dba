//===- PropagateSharding.cpp - Choose every op's sharding -----------------===//
//
// Greedy propagation in program order (see Passes.td): fixed ops keep their
// assignment; every other op takes, among the assignments its operands'
// layouts imply, the one with the least redistribution on its incoming
// edges. Redistribution costs come from the layout library's planner, so
// the choice counts exactly the collectives loom-partition will insert.
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/PropagateSharding.h"
#include "compiler/analysis/ShardingSupport.h"
#include "compiler/analysis/StepCost.h"
#include "compiler/analysis/ZeroLayout.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

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
  /// The assignment keeping `op`'s operands' common partial axes partial
  /// in its results, where that is worth offering; `followed`: `op` takes
  /// its forward op's layouts.
  std::optional<FactorAxes>
  partialThrough(Operation *op, const ShardingRule &rule, bool followed);
  /// For an op of a gradient (loom.grad_of): the assignment its forward
  /// op's layouts give it, its unlinked factors taken from its operands'
  /// layouts.
  std::optional<FactorAxes> followForward(Operation *op,
                                          const ShardingRule &rule);
  /// `follow` with mesh axes added to the factors of `op`'s results that
  /// are a parameter's gradient: axes `follow` leaves unused, that no
  /// operand is a partial sum over, and that the parameter is stored split
  /// over. A weight gradient the forward op computed redundantly over them
  /// (its weight gathered, its batch not split over them) is then computed
  /// once, each device its block of it, from operands it holds whole, and
  /// is reduced to the parameter's layout in blocks.
  SmallVector<FactorAxes> refineWeightGradient(Operation *op,
                                               const ShardingRule &rule,
                                               const FactorAxes &follow);
  /// The parameter `v` is, or is made from by ops of one operand (a cast,
  /// a transpose); null if none.
  BlockArgument parameterOf(Value v);
  /// Backward from the fixed ops: the layout each value's users would like,
  /// pulled through the ops that produce it (a transposed weight makes the
  /// weight want the transposed split).
  LogicalResult computePreferences(Block &body);
  EdgeCost redistributionCost(Value v, const layout::TensorLayout &from,
                              const layout::TensorLayout &to);
  /// True when `v` reaches an optimizer update through linear ops only
  /// (a weight gradient on its way to the update: reshaped, widened,
  /// summed over micro-batches).
  bool reachesUpdate(Value v);
  llvm::DenseMap<Value, bool> reachesUpdateMemo;

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
  /// Forward ops by loom.grad_id.
  llvm::DenseMap<int64_t, Operation *> forwardOps;
  /// For results returned as updates: the argument they replace.
  llvm::DenseMap<Value, BlockArgument> updates;
  sharding::PlannerCache planners{mesh};
};

bool Propagator::reachesUpdate(Value v) {
  if (auto it = reachesUpdateMemo.find(v); it != reachesUpdateMemo.end())
    return it->second;
  reachesUpdateMemo[v] = false; // no cycles in SSA, but bound the walk
  bool reaches = false;
  for (Operation *user : v.getUsers()) {
    if (sharding::isOptimizerUpdate(user)) {
      reaches = true;
      break;
    }
    auto iface = dyn_cast<ShardingOpInterface>(user);
    if (iface && iface.getShardingRule().linear &&
        llvm::any_of(user->getResults(),
                     [&](Value r) { return reachesUpdate(r); })) {
      reaches = true;
      break;
    }
  }
  return reachesUpdateMemo[v] = reaches;
}

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

std::optional<FactorAxes> Propagator::followForward(Operation *op,
                                                    const ShardingRule &rule) {
  auto links =
      op->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kGradOfAttrName);
  if (!links || links.size() < 1)
    return std::nullopt;
  Operation *forward = forwardOps.lookup(links[0]);
  if (!forward)
    return std::nullopt;
  std::string error;
  std::optional<sharding::OpLayouts> given =
      sharding::layoutsOf(forward, mesh, error);
  if (!given)
    return std::nullopt;
  // The forward value entry `code` of loom.grad_of stands for, if it has
  // `v`'s type.
  auto layoutFor = [&](int64_t code, Value v) -> const layout::TensorLayout * {
    if (code < 0)
      return nullptr;
    size_t k = code / 2;
    bool result = code % 2;
    if (k >= (result ? forward->getNumResults() : forward->getNumOperands()))
      return nullptr;
    Value of = result ? forward->getResult(k) : forward->getOperand(k);
    if (cast<ShapedType>(of.getType()).getShape() != typeOf(v).getShape())
      return nullptr;
    return result ? &given->results[k] : &given->operands[k];
  };
  FactorAxes axes(rule.factors.size());
  // Factors the links decide (those that cannot be split need no link).
  llvm::SmallBitVector linked(rule.factors.size());
  for (auto [f, factor] : llvm::enumerate(rule.factors))
    if (factor.kind == FactorKind::Blocked || factor.size <= 1)
      linked.set(f);
  bool any = false;
  auto cover = [&](const DimFactors &dims) {
    any = true;
    for (const auto &factors : dims)
      for (int f : factors)
        linked.set(f);
  };
  unsigned numOperands = op->getNumOperands();
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (const layout::TensorLayout *l = layoutFor(links[1 + i], v)) {
      sharding::induceFromOperand(rule, i, *l, axes);
      cover(rule.operands[i]);
    }
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    if (const layout::TensorLayout *l =
            layoutFor(links[1 + numOperands + j], r)) {
      sharding::induceFromResult(rule, j, *l, axes);
      cover(rule.results[j]);
    }
  if (!any)
    return std::nullopt;
  // Factors no linked value has (the batch of a weight gradient's partial
  // products, summed by the op after it) follow the operands.
  if (!linked.all())
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (auto it = layouts.find(v); it != layouts.end()) {
        FactorAxes more = axes;
        sharding::induceFromOperand(rule, i, it->second, more);
        for (auto [f, a] : llvm::enumerate(more))
          if (!linked.test(f))
            axes[f] = a;
      }
  return axes;
}

BlockArgument Propagator::parameterOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (def->getNumOperands() != 1 || isa<ConstantOp>(def))
      return nullptr;
    v = def->getOperand(0);
  }
  auto arg = cast<BlockArgument>(v);
  if (arg.getOwner()->getParentOp() != func.getOperation() ||
      !func.getArgAttr(arg.getArgNumber(), LoomDialect::kParamAttrName))
    return nullptr;
  return arg;
}

SmallVector<FactorAxes>
Propagator::refineWeightGradient(Operation *op, const ShardingRule &rule,
                                 const FactorAxes &follow) {
  auto links =
      op->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kGradOfAttrName);
  Operation *forward = forwardOps.lookup(links[0]);
  SmallVector<FactorAxes> refined;
  unsigned numOperands = op->getNumOperands();
  for (auto [j, r] : llvm::enumerate(op->getResults())) {
    // A result that only the rest of the same gradient reduces to a
    // parameter's gradient (the batched products of a weight gradient,
    // summed over the batch after) counts as that gradient.
    int64_t code = links[1 + numOperands + j];
    for (Value v = r; code < 0 && v.hasOneUse();) {
      Operation *user = *v.getUsers().begin();
      auto next =
          user->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kGradOfAttrName);
      if (!next || next[0] != links[0] || user->getNumResults() != 1)
        break;
      v = user->getResult(0);
      code = next[1 + user->getNumOperands()];
    }
    if (code < 0 || code % 2 || code / 2 >= forward->getNumOperands())
      continue;
    BlockArgument param = parameterOf(forward->getOperand(code / 2));
    auto stored = layouts.find(param);
    if (!param || stored == layouts.end())
      continue;
    std::vector<int> unused;
    for (int a = 0; a < mesh.numAxes(); ++a) {
      auto has = [&](ArrayRef<int> axes) {
        return llvm::is_contained(axes, a);
      };
      bool splitsParam = false;
      for (int d = 0; d < stored->second.rank(); ++d)
        splitsParam |= has(stored->second.dimAxes(d));
      bool partial = llvm::any_of(op->getOperands(), [&](Value v) {
        auto it = layouts.find(v);
        return it != layouts.end() && has(it->second.partialAxes());
      });
      if (splitsParam && !partial &&
          llvm::none_of(follow, [&](const auto &axes) { return has(axes); }))
        unused.push_back(a);
    }
    if (unused.empty())
      continue;
    // A gradient shaped like its parameter splits the dimensions the
    // parameter is stored split over, so that its reduction lands in the
    // parameter's layout.
    bool likeParam = typeOf(r).getShape() == typeOf(param).getShape();
    for (auto [d, factors] : llvm::enumerate(rule.results[j]))
      for (int f : factors) {
        if (rule.factors[f].kind != FactorKind::Parallel || !follow[f].empty())
          continue;
        std::vector<int> axes;
        for (int a : unused)
          if (!likeParam || llvm::is_contained(
                                stored->second.dimAxes(static_cast<int>(d)), a))
            axes.push_back(a);
        for (int a : axes) {
          FactorAxes c = follow;
          c[f] = {a};
          refined.push_back(std::move(c));
        }
        if (axes.size() > 1) {
          FactorAxes c = follow;
          c[f].assign(axes.begin(), axes.end());
          refined.push_back(std::move(c));
        }
      }
  }
  return refined;
}

std::optional<FactorAxes> Propagator::partialThrough(Operation *op,
                                                     const ShardingRule &rule,
                                                     bool followed) {
  // A linear op whose operands are all partial sums over the same axes
  // can keep them partial: one reduction later instead of one per operand
  // now (the input gradient of q, k and v projections, and a weight
  // gradient widened before it is accumulated over micro-batches).
  //
  // Passing a partial sum through a widening cast widens the reduction
  // that follows, through a transpose or reshape it keeps the sum whole
  // for longer for nothing, and so does a gradient op whose forward op's
  // layouts would reduce it: these are offered only on a weight gradient's
  // way to its update (gradients are accumulated over micro-batches and
  // reduced once, in f32 under bf16, as Megatron does; an activation is
  // reduced where the search costed it, in its compute precision).
  // Under ZeRO 2 and 3 a weight gradient is reduce-scattered where it is
  // complete, and the slice moves on: a partial sum kept through a
  // transpose or reshape would live whole until its update.
  bool moves = sharding::isMove(op);
  bool scatterEarly = sharding::zeroLevel(func) >= 2 && !isa<CastOp>(op);
  if (rule.linear && op->getNumOperands() > 0 &&
      (!(moves || followed) ||
       (!scatterEarly && reachesUpdate(op->getResult(0))))) {
    std::optional<std::vector<int>> common;
    FactorAxes through(rule.factors.size());
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      auto it = layouts.find(v);
      std::vector<int> p;
      if (it != layouts.end()) {
        p = it->second.partialAxes();
        sharding::induceFromOperand(rule, i, it->second, through);
      }
      if (!common)
        common = p;
      else if (*common != p)
        common = std::vector<int>();
    }
    if (common && !common->empty()) {
      through.emplace_back(common->begin(), common->end());
      return through;
    }
  }
  return std::nullopt;
}

LogicalResult Propagator::chooseFor(Operation *op) {
  auto iface = dyn_cast<ShardingOpInterface>(op);
  if (!iface)
    return op->emitOpError("has no sharding rule, so it cannot be partitioned");
  ShardingRule rule = iface.getShardingRule();
  std::string error;

  FailureOr<std::optional<FactorAxes>> fixedOr =
      sharding::fixedAssignment(op, rule, mesh);
  if (failed(fixedOr))
    return failure();
  std::optional<FactorAxes> fixed = *fixedOr;

  SmallVector<FactorAxes> candidates;
  auto addCandidate = [&](FactorAxes c) {
    if (!llvm::is_contained(candidates, c))
      candidates.push_back(std::move(c));
  };
  std::optional<FactorAxes> follow;
  bool followed = false;
  if (!fixed)
    follow = followForward(op, rule);
  if (fixed) {
    addCandidate(*fixed);
  } else if ((followed = follow &&
                         sharding::deriveLayouts(rule, *follow, mesh, error))) {
    // A gradient op runs in its forward op's layouts: the search costed
    // its compute, its partial sums and the reductions of its weight
    // gradients that way, and incoming bytes alone cannot tell a cheap
    // transfer that leaves a large partial sum from one that does not.
    addCandidate(*follow);
    for (FactorAxes &c : refineWeightGradient(op, rule, *follow))
      addCandidate(std::move(c));
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
  }
  // Gradient ops too, beside their forward op's layouts.
  if (!fixed)
    if (std::optional<FactorAxes> through = partialThrough(op, rule, followed))
      addCandidate(std::move(*through));

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
    if (!best || cost < bestCost || (!(bestCost < cost) && work < bestWork)) {
      best = std::move(l);
      bestAxes = c;
      bestCost = cost;
      bestWork = work;
    }
  }
  if (!best)
    return op->emitError() << (fixed ? "the strategy of "
                                     : "no valid sharding for ")
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
    FailureOr<std::optional<FactorAxes>> fixed =
        sharding::fixedAssignment(&op, rule, mesh);
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
               << func.getArgAttrOfType<StringAttr>(i,
                                                    LoomDialect::kInputAttrName)
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
  for (Operation &op : body.without_terminator()) {
    if (failed(chooseFor(&op)))
      return failure();
    if (auto id = op.getAttrOfType<IntegerAttr>(LoomDialect::kGradIdAttrName))
      forwardOps.try_emplace(id.getInt(), &op);
  }

  // State no op has claimed yet (its update result decides: updates were
  // visited as ops), then whatever is left, replicated.
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    auto it = layouts.find(arg);
    layout::TensorLayout l =
        it != layouts.end() ? it->second
                            : layout::TensorLayout::replicated(type.getRank());
    func.setArgAttr(arg.getArgNumber(), LoomDialect::kLayoutAttrName,
                    sharding::toAttr(meshAttr, l));
  }
  return success();
}

struct PropagateShardingPass
    : public loom::impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;
  void runOnOperation() override {
    // Taken before propagation assigns every op, for loom-shard-optimizer.
    (void)getAnalysis<loom::sharding::GivenShardings>();
    if (failed(loom::sharding::propagateShardings(getOperation(), mode)))
      return signalPassFailure();
    markAnalysesPreserved<loom::sharding::GivenShardings>();
  }
};

} // namespace

LogicalResult loom::sharding::propagateShardings(func::FuncOp func,
                                                 StringRef mode) {
  if (mode != "data" && mode != "semi")
    return func.emitError()
           << "unknown sharding mode '" << mode << "' (expected data or semi)";
  auto mesh = sharding::meshOf(func, "loom-propagate-sharding");
  if (failed(mesh))
    return failure();
  Propagator propagator(func, mesh->first, mesh->second);
  return propagator.run(mode);
}

loom::sharding::GivenShardings::GivenShardings(Operation *func) {
  for (Operation &op : cast<func::FuncOp>(func).getBody().front())
    if (op.hasAttr(LoomDialect::kShardingAttrName) ||
        op.hasAttr(LoomDialect::kStrategyAttrName))
      ops.insert(&op);
}
