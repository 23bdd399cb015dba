//===- AutoSharding.cpp - Choose every forward op's sharding by cost ------===//
//
// `--mode auto`: the forward ops of a training step (or every op of an
// inference graph) become the nodes of a cost graph (compiler/search). Each
// node's candidates are the valid assignments of mesh axes to the factors
// of its sharding rule; a candidate costs the op's compute (roofline, the
// backward counted as twice the forward), the all-reduce of its parameters'
// gradients over the axes that split work the parameters do not index, and
// lambda times its per-device memory (parameters, gradients, optimizer
// state, saved activations). An edge costs the redistribution of the value
// from its producer's layout to what its consumer needs, and of the
// gradient back. The eliminations of `search::solve` find the cheapest
// assignment; lambda rises from 0 until the plan fits the device memory.
// The backward and optimizer ops then follow their forward ops through
// loom-propagate-sharding.
//
//===----------------------------------------------------------------------===//

#include "compiler/cost/CostModel.h"
#include "compiler/search/CostGraph.h"
#include "passes/Passes.h"
#include "passes/ShardingSupport.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <functional>
#include <map>

namespace loom {
#define GEN_PASS_DEF_AUTOSHARDING
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::vector<int64_t> shapeOf(RankedTensorType t) {
  return {t.getShape().begin(), t.getShape().end()};
}

std::string dtypeOf(RankedTensorType t) {
  Type e = t.getElementType();
  return e.isBF16() ? "bf16" : e.isF16() ? "f16" : "f32";
}


struct Candidate {
  FactorAxes axes;
  sharding::OpLayouts layouts;
  double seconds = 0;
  double memory = 0;
};

class AutoSharder {
public:
  AutoSharder(func::FuncOp func, MeshAttr meshAttr, layout::Mesh mesh,
              cost::HardwareProfile profile, int64_t memoryLimit)
      : func(func), meshAttr(meshAttr), mesh(std::move(mesh)),
        profile(std::move(profile)), memoryLimit(memoryLimit) {}

  LogicalResult run();

private:
  void enumerate(Operation *op, const ShardingRule &rule,
                 std::vector<Candidate> &out);
  /// Seconds to redistribute a tensor of `type` from `from` to `to`.
  double redistributionSeconds(RankedTensorType type,
                               const layout::TensorLayout &from,
                               const layout::TensorLayout &to);
  double stepSeconds(const layout::TensorLayout &before,
                     const layout::TensorLayout &after,
                     const layout::Step &step,
                     const std::vector<int64_t> &shape, int64_t elementBytes);
  /// The ranks of rank 0's group over `axes` (which link a collective uses).
  std::vector<int64_t> group(const std::vector<int> &axes) {
    return layout::commGroups(mesh, axes).front();
  }

  func::FuncOp func;
  MeshAttr meshAttr;
  layout::Mesh mesh;
  cost::HardwareProfile profile;
  int64_t memoryLimit;
  bool training = false;
  double optimizerStateFactor = 0;
  sharding::PlannerCache planners{mesh};
  std::map<std::tuple<std::vector<int64_t>, int64_t, layout::TensorLayout,
                      layout::TensorLayout>,
           double>
      seconds;
};

double AutoSharder::stepSeconds(const layout::TensorLayout &before,
                                const layout::TensorLayout &after,
                                const layout::Step &step,
                                const std::vector<int64_t> &shape,
                                int64_t elementBytes) {
  double in = static_cast<double>(before.localNumElements(mesh, shape)) *
              static_cast<double>(elementBytes);
  double out = static_cast<double>(after.localNumElements(mesh, shape)) *
               static_cast<double>(elementBytes);
  std::vector<int> axes(step.axes.begin(), step.axes.end());
  switch (step.kind) {
  case layout::StepKind::AllReduce:
    return cost::collectiveSeconds(profile, cost::CollectiveKind::AllReduce,
                                   in, group(axes));
  case layout::StepKind::ReduceScatter:
    return cost::collectiveSeconds(
        profile, cost::CollectiveKind::ReduceScatter, in, group(axes));
  case layout::StepKind::AllGather:
    return cost::collectiveSeconds(profile, cost::CollectiveKind::AllGather,
                                   out, group(axes));
  case layout::StepKind::AllToAll:
    return cost::collectiveSeconds(profile, cost::CollectiveKind::AllToAll,
                                   in, group(axes));
  case layout::StepKind::LocalSplit:
  case layout::StepKind::MakePartial:
    return 0;
  }
  return 0;
}

double AutoSharder::redistributionSeconds(RankedTensorType type,
                                          const layout::TensorLayout &from,
                                          const layout::TensorLayout &to) {
  if (from == to)
    return 0;
  std::vector<int64_t> shape = shapeOf(type);
  int64_t bytes = sharding::elementBytes(type);
  auto key = std::make_tuple(shape, bytes, from, to);
  if (auto it = seconds.find(key); it != seconds.end())
    return it->second;
  std::string error;
  double total = 1e30;
  if (std::optional<layout::RedistributionPlan> plan =
          planners.plan(type, from, to, error)) {
    total = 0;
    layout::TensorLayout current = from;
    for (const layout::Step &step : plan->steps) {
      std::optional<layout::TensorLayout> next =
          layout::applyStep(mesh, current, step, shape, error);
      if (!next) {
        total = 1e30;
        break;
      }
      total += stepSeconds(current, *next, step, shape, bytes);
      current = *next;
    }
  }
  seconds[key] = total;
  return total;
}

void AutoSharder::enumerate(Operation *op, const ShardingRule &rule,
                            std::vector<Candidate> &out) {
  const int numFactors = static_cast<int>(rule.factors.size());
  const int numAxes = mesh.numAxes();
  // Every way of giving each mesh axis to one factor or to none; the axes
  // of a factor keep the mesh's order (outermost first).
  std::vector<int> pick(numAxes, -1);
  std::function<void(int)> visit = [&](int a) {
    if (a == numAxes) {
      FactorAxes axes(numFactors);
      for (int x = 0; x < numAxes; ++x)
        if (pick[x] >= 0)
          axes[pick[x]].push_back(x);
      std::string error;
      std::optional<sharding::OpLayouts> layouts =
          sharding::deriveLayouts(rule, axes, mesh, error);
      if (layouts)
        out.push_back({axes, std::move(*layouts)});
      return;
    }
    for (int f = -1; f < numFactors; ++f) {
      if (f >= 0 && (rule.factors[f].kind == FactorKind::Blocked ||
                     rule.factors[f].size <= 1))
        continue;
      pick[a] = f;
      visit(a + 1);
    }
  };
  visit(0);

  // Node costs: compute, parameter-gradient all-reduces, memory.
  auto iface = cast<CostOpInterface>(op);
  for (Candidate &c : out) {
    SmallVector<RankedTensorType> operands, results;
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      operands.push_back(
          sharding::localType(typeOf(v), mesh, c.layouts.operands[i]));
    for (auto [j, r] : llvm::enumerate(op->getResults()))
      results.push_back(
          sharding::localType(typeOf(r), mesh, c.layouts.results[j]));
    OpWork work = iface.estimateWork(operands, results);
    std::string dtype = results.empty() ? "f32" : dtypeOf(results.front());
    c.seconds = cost::computeSeconds(
                    profile, {work.flops, work.bytes, dtype, work.kernelClass}) *
                (training ? 3.0 : 1.0);
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg || !func.getArgAttr(arg.getArgNumber(),
                                   LoomDialect::kParamAttrName))
        continue;
      double bytes = static_cast<double>(operands[i].getNumElements()) *
                     static_cast<double>(sharding::elementBytes(operands[i]));
      if (training) {
        // Parameter, gradient and optimizer state stay for the whole step.
        c.memory += bytes * (2.0 + optimizerStateFactor);
        // The gradient sums over the work split on axes the parameter does
        // not index: one all-reduce over them.
        std::vector<int> summed;
        for (size_t f = 0; f < c.axes.size(); ++f) {
          bool indexed = llvm::any_of(rule.operands[i], [&](const auto &d) {
            return llvm::is_contained(d, static_cast<int>(f));
          });
          if (!indexed)
            summed.insert(summed.end(), c.axes[f].begin(), c.axes[f].end());
        }
        llvm::sort(summed);
        if (!summed.empty())
          c.seconds += cost::collectiveSeconds(
              profile, cost::CollectiveKind::AllReduce, bytes, group(summed));
      } else {
        c.memory += bytes;
      }
    }
    if (training)
      for (RankedTensorType r : results) // saved for the backward
        c.memory += static_cast<double>(r.getNumElements()) *
                    static_cast<double>(sharding::elementBytes(r));
  }
}

LogicalResult AutoSharder::run() {
  Block &body = func.getBody().front();
  Operation *terminator = body.getTerminator();
  // Forward ops: up to the loss (result 0 of a training step).
  Operation *lastForward = nullptr;
  if (auto name = func.getResultAttrOfType<StringAttr>(
          0, LoomDialect::kOutputAttrName);
      name && name.getValue() == "loss" &&
      llvm::any_of(body, [](Operation &op) {
        return isa<SgdUpdateOp, MomentumUpdateOp, AdamUpdateOp>(op);
      })) {
    training = true;
    lastForward = terminator->getOperand(0).getDefiningOp();
  }
  for (Operation &op : body)
    if (isa<AdamUpdateOp>(op))
      optimizerStateFactor = 2;
    else if (isa<MomentumUpdateOp>(op) && optimizerStateFactor < 1)
      optimizerStateFactor = 1;

  std::vector<Operation *> nodes;
  for (Operation &op : body.without_terminator()) {
    if (!isa<ConstantOp>(op) && isa<ShardingOpInterface>(op))
      nodes.push_back(&op);
    if (&op == lastForward)
      break;
  }
  llvm::DenseMap<Operation *, int> index;
  std::vector<std::vector<Candidate>> candidates(nodes.size());
  for (auto [n, op] : llvm::enumerate(nodes)) {
    index[op] = static_cast<int>(n);
    enumerate(op, cast<ShardingOpInterface>(op).getShardingRule(),
              candidates[n]);
    if (candidates[n].empty())
      return op->emitError() << "no valid sharding for " << sharding::describeOp(op);
  }

  // Edges: producer result -> consumer operand, both forward ops. Values
  // returned (the loss, outputs) must end replicated.
  struct EdgeInfo {
    int from, to;
    std::vector<std::vector<double>> costs;
  };
  std::vector<EdgeInfo> edges;
  std::vector<std::vector<double>> sinkCost(nodes.size());
  for (auto [n, op] : llvm::enumerate(nodes)) {
    sinkCost[n].assign(candidates[n].size(), 0);
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      Operation *producer = v.getDefiningOp();
      if (!producer || !index.count(producer))
        continue;
      int p = index[producer];
      unsigned result = cast<OpResult>(v).getResultNumber();
      EdgeInfo e{p, static_cast<int>(n), {}};
      e.costs.assign(candidates[p].size(),
                     std::vector<double>(candidates[n].size(), 0));
      for (size_t a = 0; a < candidates[p].size(); ++a)
        for (size_t b = 0; b < candidates[n].size(); ++b) {
          const layout::TensorLayout &have =
              candidates[p][a].layouts.results[result];
          const layout::TensorLayout &want = candidates[n][b].layouts.operands[i];
          double s = redistributionSeconds(typeOf(v), have, want);
          if (training) {
            // The gradient flows back: from what the consumer's operand
            // was to the producer's result layout, without its partial
            // sums.
            layout::TensorLayout back = have;
            for (int axis : std::vector<int>(back.partialAxes()))
              back.removePartial(axis);
            s += redistributionSeconds(typeOf(v), want, back);
          }
          e.costs[a][b] = s;
        }
      edges.push_back(std::move(e));
    }
    for (auto [j, r] : llvm::enumerate(op->getResults()))
      if (llvm::is_contained(terminator->getOperands(), r))
        for (size_t a = 0; a < candidates[n].size(); ++a)
          sinkCost[n][a] += redistributionSeconds(
              typeOf(r), candidates[n][a].layouts.results[j],
              layout::TensorLayout::replicated(typeOf(r).getRank()));
  }

  // Solve, raising lambda (seconds per byte) until the memory fits.
  int64_t limit = memoryLimit > 0 ? memoryLimit : profile.memoryCapacity;
  auto solveWith = [&](double lambda, double &memory) {
    search::CostGraph graph;
    for (size_t n = 0; n < nodes.size(); ++n) {
      std::vector<double> costs;
      for (size_t a = 0; a < candidates[n].size(); ++a)
        costs.push_back(candidates[n][a].seconds + sinkCost[n][a] +
                        lambda * candidates[n][a].memory);
      graph.addNode(std::move(costs));
    }
    for (const EdgeInfo &e : edges)
      graph.addEdge(e.from, e.to, e.costs);
    search::Solution s = search::solve(graph);
    memory = 0;
    for (size_t n = 0; n < nodes.size(); ++n)
      memory += candidates[n][s.choice[n]].memory;
    return s;
  };
  double memory = 0;
  search::Solution best = solveWith(0, memory);
  if (limit > 0 && memory > static_cast<double>(limit)) {
    double high = 1e-15, bestMemory = memory;
    bool fits = false;
    for (int k = 0; k < 60 && !fits; ++k) {
      high *= 4;
      search::Solution s = solveWith(high, bestMemory);
      if (bestMemory <= static_cast<double>(limit)) {
        fits = true;
        best = s;
        memory = bestMemory;
      }
    }
    if (!fits) {
      // Name the largest per-device tensors of the most compact plan.
      return func.emitError()
             << "no sharding on " << mesh.toString() << " fits in "
             << limit << " bytes per device: the most compact plan found "
             << "needs " << static_cast<int64_t>(bestMemory)
             << " bytes; use more devices or a smaller batch";
    }
    double low = high / 4;
    for (int k = 0; k < 30; ++k) {
      double mid = std::sqrt(low * high);
      double m = 0;
      search::Solution s = solveWith(mid, m);
      if (m <= static_cast<double>(limit)) {
        high = mid;
        best = s;
        memory = m;
      } else {
        low = mid;
      }
    }
  }

  for (auto [n, op] : llvm::enumerate(nodes))
    op->setAttr(LoomDialect::kShardingAttrName,
                sharding::factorsToAttr(func.getContext(),
                                        candidates[n][best.choice[n]].axes,
                                        mesh));
  func->setAttr(LoomDialect::kSearchAttrName,
                DictionaryAttr::get(
                    func.getContext(),
                    {NamedAttribute(StringAttr::get(func.getContext(), "cost"),
                                    FloatAttr::get(Float64Type::get(func.getContext()),
                                                   best.cost)),
                     NamedAttribute(
                         StringAttr::get(func.getContext(), "memory"),
                         IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                                          static_cast<int64_t>(memory))),
                     NamedAttribute(
                         StringAttr::get(func.getContext(), "exact"),
                         BoolAttr::get(func.getContext(), best.exact))}));
  return success();
}

struct AutoShardingPass
    : public loom::impl::AutoShardingBase<AutoShardingPass> {
  using AutoShardingBase::AutoShardingBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto mesh = sharding::meshOf(func, "loom-auto-sharding");
    if (failed(mesh))
      return signalPassFailure();
    std::string error;
    std::optional<cost::HardwareProfile> hw =
        cost::builtinProfile(profile);
    if (!hw)
      hw = cost::loadProfile(profile, error);
    if (!hw) {
      func.emitError() << "hardware profile '" << profile
                       << "' is neither built in nor a readable file: "
                       << error;
      return signalPassFailure();
    }
    AutoSharder sharder(func, mesh->first, mesh->second, *hw, memoryLimit);
    if (failed(sharder.run()))
      signalPassFailure();
  }
};

} // namespace
