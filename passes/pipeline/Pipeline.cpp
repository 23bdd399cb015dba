//===- Pipeline.cpp - Pipeline stages and micro-batch schedules -----------===//
//
// pipelineStep and measureLayers (Pipeline.h), and the Pipeliner's driver
// (PipelineImpl.h): the options' checks, the phases in their order (ops
// classified and given stages in PipelineStages.cpp, the stage functions
// built in PipelineBuild.cpp), and what lies between them: the values that
// cross stages moved to their roots for stages on submeshes of their own
// (crossAtRoots), and the stages' costs for the report and the stage
// search (stageCosts).
//
//===----------------------------------------------------------------------===//

#include "passes/pipeline/Pipeline.h"
#include "compiler/analysis/StepCost.h"
#include "passes/pipeline/PipelineImpl.h"

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <map>
#include <set>

using namespace mlir;

namespace loom::sharding::detail {

std::string describe(Operation *op) {
  std::string node = nodeName(op);
  std::string s = "'" + op->getName().getStringRef().str() + "'";
  return node.empty() ? s : s + " (ONNX node '" + node + "')";
}

/// The layout loom-partition recorded for `v` (loom.layouts), if any.
TensorLayoutAttr recordedLayout(Value v) {
  auto result = dyn_cast<OpResult>(v);
  if (!result)
    return {};
  auto layouts = result.getOwner()->getAttrOfType<ArrayAttr>(
      LoomDialect::kResultLayoutsAttrName);
  return layouts ? dyn_cast<TensorLayoutAttr>(layouts[result.getResultNumber()])
                 : TensorLayoutAttr();
}

void recordLayout(Operation *op, TensorLayoutAttr layout) {
  op->setAttr(LoomDialect::kResultLayoutsAttrName,
              ArrayAttr::get(op->getContext(), {layout}));
}

/// Stages on submeshes of their own are compiled one submesh at a time,
/// and stage s is taken from the compile on its own submesh: the values
/// that cross stages must not depend on the submesh, although the
/// collectives the partitioner placed do. So a value crosses as the
/// compute op's result it is (its root), whatever redistributes it:
///  - collectives go to the chunk of their users (a copy per chunk where
///    users are on several), so that they run where their result is used;
///  - but a root's all-reduce over exactly its partial axes stays with the
///    root: a partial sum cannot cross to another submesh, so a partial
///    root crosses reduced (by that all-reduce, or one made here), and a
///    chunk that uses the root itself makes it partial again.
/// Each end of a crossing value is then laid out as its own compile says,
/// and the runtime moves it block by block.
LogicalResult Pipeliner::crossAtRoots() {
  auto partialAxes = [](TensorLayoutAttr layout) {
    return layout ? layout.getPartialAxes() : SmallVector<StringRef>();
  };
  auto meshAxes = [&](TensorLayoutAttr layout) {
    SmallVector<int64_t> axes;
    for (StringRef axis : layout.getPartialAxes())
      axes.push_back(*layout.getMesh().getAxisIndex(axis));
    llvm::sort(axes);
    return axes;
  };
  // A root's reduction to a whole value, which stays on the root's chunk.
  auto reducesRoot = [&](Operation *op) {
    auto reduce = dyn_cast<AllReduceOp>(op);
    if (!reduce)
      return false;
    Operation *def = reduce.getInput().getDefiningOp();
    TensorLayoutAttr layout = recordedLayout(reduce.getInput());
    return def && data.contains(def) && !isCollective(def) && layout &&
           ArrayRef<int64_t>(meshAxes(layout)) == reduce.getAxes();
  };
  std::vector<Operation *> ops;
  for (Operation &op : body)
    if (data.contains(&op)) {
      if (op.getNumResults() && !recordedLayout(op.getResult(0)))
        return fail(describe(&op) +
                    " has no recorded layout: stages on submeshes of their "
                    "own need loom-partition's record-layouts");
      ops.push_back(&op);
    }
  for (Operation *op : llvm::reverse(ops)) {
    if (!isCollective(op) || op->getResult(0) == loss)
      continue;
    if (reducesRoot(op)) {
      stageOf[op] = stageOf[op->getOperand(0).getDefiningOp()];
      continue;
    }
    std::map<int64_t, SmallVector<OpOperand *>> uses;
    bool local = true;
    for (OpOperand &use : op->getResult(0).getUses()) {
      local &= data.contains(use.getOwner());
      if (local)
        uses[stageOf[use.getOwner()]].push_back(&use);
    }
    if (!local || uses.empty())
      continue;
    bool first = true;
    for (auto &[chunk, chunkUses] : uses) {
      Operation *at = op;
      if (!first) {
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        at = b.clone(*op);
        data.insert(at);
        for (OpOperand *use : chunkUses)
          use->set(at->getResult(0));
      }
      stageOf[at] = chunk;
      if (llvm::any_of(at->getUsers(),
                       [&](Operation *u) { return forward.contains(u); }))
        forward.insert(at);
      else
        forward.erase(at);
      first = false;
    }
  }
  // Partial roots: reduced on their chunk, made partial again elsewhere.
  for (Operation *op : ops) {
    if (isCollective(op))
      continue;
    for (Value r : op->getResults()) {
      TensorLayoutAttr layout = recordedLayout(r);
      SmallVector<StringRef> partial = partialAxes(layout);
      std::map<int64_t, SmallVector<OpOperand *>> away;
      Operation *reduced = nullptr;
      for (OpOperand &use : r.getUses()) {
        Operation *user = use.getOwner();
        if (reducesRoot(user))
          reduced = user;
        else if (data.contains(user) && stageOf[user] != stageOf[op])
          away[stageOf[user]].push_back(&use);
      }
      if (reduced)
        rootOf[reduced->getResult(0)] = r;
      if (partial.empty() || away.empty())
        continue;
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      auto whole = TensorLayoutAttr::get(op->getContext(), layout.getMesh(),
                                         layout.getDims(),
                                         ArrayAttr::get(op->getContext(), {}));
      // Right after the root: a chunk that makes it partial again may use
      // it before the partitioner's place for the reduction.
      if (reduced) {
        reduced->moveAfter(op);
      } else {
        reduced = AllReduceOp::create(b, op->getLoc(), r.getType(), r,
                                      b.getDenseI64ArrayAttr(meshAxes(layout)),
                                      IntegerAttr());
        recordLayout(reduced, whole);
        data.insert(reduced);
        stageOf[reduced] = stageOf[op];
        rootOf[reduced->getResult(0)] = r;
      }
      b.setInsertionPointAfter(reduced);
      for (auto &[chunk, uses] : away) {
        Value v = reduced->getResult(0);
        SmallVector<Attribute> made;
        for (StringRef axis : partial) {
          made.push_back(StringAttr::get(op->getContext(), axis));
          auto partialOp = MakePartialOp::create(
              b, op->getLoc(), r.getType(), v,
              b.getI64IntegerAttr(*layout.getMesh().getAxisIndex(axis)),
              IntegerAttr());
          recordLayout(partialOp,
                       TensorLayoutAttr::get(
                           op->getContext(), layout.getMesh(), layout.getDims(),
                           ArrayAttr::get(op->getContext(), made)));
          data.insert(partialOp);
          stageOf[partialOp] = chunk;
          v = partialOp;
        }
        bool forwardUse = false;
        for (OpOperand *use : uses) {
          use->set(v);
          forwardUse |= forward.contains(use->getOwner());
        }
        for (Operation *def = v.getDefiningOp(); isa<MakePartialOp>(def);
             def = def->getOperand(0).getDefiningOp())
          if (forwardUse)
            forward.insert(def);
      }
      if (forward.contains(op))
        forward.insert(reduced);
    }
  }
  return success();
}

static double bytesOf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return static_cast<double>(type.getNumElements()) *
         static_cast<double>(type.getElementTypeBitWidth()) / 8.0;
}

std::vector<search::LayerCost> Pipeliner::stageCosts() {
  // Per chunk; the once-per-step work and the state of stage s count on
  // its first chunk, s.
  std::vector<search::LayerCost> costs(chunks());
  // A bias add runs in its matmul's epilogue (the plan is compiled with
  // loom-fuse-matmul-epilogue, as for the transposes below).
  auto seconds = [&](Operation *op) {
    return options.opSeconds && !isFusedBiasAdd(op) ? options.opSeconds(op)
                                                    : 0.0;
  };
  for (Operation &op : body.without_terminator()) {
    if (data.contains(&op)) {
      int64_t s = stageOf[&op];
      costs[s].microBatchSeconds += seconds(&op);
      // A forward result the backward uses is kept per micro-batch.
      if (forward.contains(&op))
        for (Value r : op.getResults())
          if (llvm::any_of(r.getUsers(), [&](Operation *user) {
                return data.contains(user) && !forward.contains(user);
              }))
            costs[s].savedBytes += bytesOf(r);
    } else if (reductions.contains(&op) || post.contains(&op)) {
      costs[stageOf[&op]].stepSeconds += seconds(&op);
    } else if (pre.contains(&op)) {
      // A weight's transpose for its matmuls is folded into them (the plan
      // is compiled with loom-fuse-matmul-epilogue; without it, this
      // undercounts by the transposes).
      if (isFoldedTranspose(&op))
        continue;
      // Once per step on every stage that needs it, and kept for the whole
      // step (ZeRO-3's gathered parameters serve every micro-batch).
      std::set<int64_t> stages;
      for (Value r : op.getResults())
        if (auto it = needs.find(r); it != needs.end())
          stages.insert(it->second.begin(), it->second.end());
      for (int64_t s : stages) {
        costs[s].stepSeconds += seconds(&op);
        for (Value r : op.getResults())
          costs[s].stateBytes += bytesOf(r);
      }
    }
  }
  // State: parameters, optimizer state and buffers, and the gradients the
  // micro-batches add up.
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (func.getArgAttr(i, LoomDialect::kInputAttrName) ||
        func.getArgAttr(i, LoomDialect::kHyperAttrName))
      continue;
    if (auto it = needs.find(arg); it != needs.end() && !it->second.empty())
      costs[*it->second.begin()].stateBytes += bytesOf(arg);
  }
  for (Value g : gradients)
    costs[stageOfOp(g.getDefiningOp())].stateBytes += bytesOf(g);
  // Transients: per-micro-batch values not saved for the backward, live
  // from their op to their last use in the micro-batch's program order (a
  // gradient, which joins its sum over the micro-batches at once, while its
  // op runs); a stage's peak is the most of them live while one of its ops
  // runs.
  {
    std::vector<Operation *> order;
    llvm::DenseMap<Operation *, size_t> position;
    for (Operation &op : body)
      if (data.contains(&op)) {
        position[&op] = order.size();
        order.push_back(&op);
      }
    std::vector<double> freed(order.size() + 1, 0);
    double live = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      Operation *op = order[i];
      for (Value r : op->getResults()) {
        bool saved = false;
        size_t last = i;
        for (Operation *user : r.getUsers()) {
          auto it = position.find(user);
          if (it == position.end())
            continue;
          saved |= forward.contains(op) && !forward.contains(user);
          last = std::max(last, it->second);
        }
        if (saved)
          continue;
        live += bytesOf(r);
        freed[last] += bytesOf(r);
      }
      double &peak = costs[stageOf[op]].transientBytes;
      peak = std::max(peak, live);
      live -= freed[i];
    }
  }
  // What crosses the cuts between stages: a value sent from stage a to d
  // crosses the cuts a .. d-1 (forward) or d .. a-1 (backward); the cut
  // after stage c is stage c's. (Measured per layer, where V is 1.)
  for (Operation &op : body) {
    if (V > 1)
      break;
    if (!data.contains(&op))
      continue;
    for (Value r : op.getResults()) {
      auto it = crossTo.find(r);
      if (it == crossTo.end())
        continue;
      int64_t a = stageOf[&op];
      double bytes = bytesOf(r);
      for (int64_t d : it->second) {
        for (int64_t c = a; c < d; ++c)
          costs[c].forwardBytes += bytes;
        for (int64_t c = d; c < a; ++c)
          costs[c].backwardBytes += bytes;
      }
    }
  }
  return costs;
}

FailureOr<std::vector<search::LayerCost>> Pipeliner::measure() {
  if (!llvm::hasSingleElement(func.getBody())) {
    error = "@main must have a single block";
    return failure();
  }
  // Costs only: the IR is left as it is (no crossAtRoots).
  if (failed(classify()) || failed(assignStages()) || failed(placeState()))
    return failure();
  std::vector<search::LayerCost> costs = stageCosts();
  for (auto [cost, layer] : llvm::zip(costs, layers))
    cost.name = layer;
  return costs;
}

FailureOr<PipelineReport> Pipeliner::run() {
  if (P < 1 || M < 1) {
    error = "stages and micro-batches must be at least 1";
    return failure();
  }
  if (options.schedule == PipelineSchedule::Interleaved &&
      options.virtualStages < 1) {
    error = "the interleaved schedule needs at least 1 virtual stage";
    return failure();
  }
  if (V > 1 && M % P != 0) {
    error = "the interleaved schedule runs the micro-batches in groups of "
            "the stage count: " +
            std::to_string(M) + " micro-batches are not a multiple of " +
            std::to_string(P) + " stages";
    return failure();
  }
  if (!llvm::hasSingleElement(func.getBody())) {
    error = "@main must have a single block";
    return failure();
  }
  report.stages.resize(P);
  report.schedule = options.schedule;
  const int64_t costedM =
      options.costedMicroBatches > 0 ? options.costedMicroBatches : M;
  report.microBatches = costedM;
  report.virtualStages = V;
  report.bubbleFraction =
      static_cast<double>(P - 1) / (V * costedM + P - 1);
  if (failed(classify()) || failed(assignStages()) ||
      (options.ownMeshes && failed(crossAtRoots())) || failed(placeState()))
    return failure();
  if (options.opSeconds) {
    // A chunk sends each value crossing from it once per micro-batch.
    std::vector<search::LayerCost> costs = stageCosts();
    std::vector<double> micro, step;
    for (auto [c, cost] : llvm::enumerate(costs)) {
      double sends = 0;
      for (auto &[v, to] : crossTo)
        if (stageOf[v.getDefiningOp()] == static_cast<int64_t>(c) &&
            options.sendSeconds)
          sends +=
              static_cast<double>(to.size()) * options.sendSeconds(bytesOf(v));
      PipelineReport::Stage &stage = report.stages[c % P];
      stage.microBatchSeconds += cost.microBatchSeconds + sends;
      stage.stepSeconds += cost.stepSeconds;
      micro.push_back(cost.microBatchSeconds + sends);
      step.push_back(cost.stepSeconds);
    }
    report.seconds = search::pipelineSeconds(micro, step, costedM, V);
  }
  OpBuilder builder(func);
  bool built = true;
  for (int64_t s = 0; s < P && built; ++s)
    built = succeeded(build(s, builder));
  if (!built || failed(checkDeadlock())) {
    for (func::FuncOp f : stageFuncs)
      f.erase();
    return failure();
  }
  func.erase();
  return report;
}

} // namespace loom::sharding::detail

namespace loom::sharding {

FailureOr<PipelineReport> pipelineStep(func::FuncOp func,
                                       const PipelineOptions &options,
                                       std::string &error) {
  detail::Pipeliner pipeliner(func, options, error);
  return pipeliner.run();
}

FailureOr<std::vector<search::LayerCost>>
measureLayers(func::FuncOp func, const PipelineOptions &options,
              std::string &error) {
  detail::Pipeliner pipeliner(func, options, error, /*perLayer=*/true);
  return pipeliner.measure();
}

} // namespace loom::sharding
