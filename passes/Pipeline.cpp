//===- Pipeline.cpp - Pipeline stages and micro-batch schedules -----------===//

#include "passes/Pipeline.h"
#include "passes/Passes.h"
#include "passes/StepCost.h"

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

using namespace mlir;

namespace loom::sharding {

namespace {

std::string describe(Operation *op) {
  std::string node = nodeName(op);
  std::string s = "'" + op->getName().getStringRef().str() + "'";
  return node.empty() ? s : s + " (ONNX node '" + node + "')";
}

/// Splits `weights` into `parts` contiguous groups, minimizing the largest
/// group's total; returns the first index of each group.
std::vector<size_t> balance(const std::vector<int64_t> &weights,
                            int64_t parts) {
  size_t n = weights.size();
  std::vector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + weights[i];
  const int64_t inf = std::numeric_limits<int64_t>::max();
  // best[p][i]: the smallest maximum over splitting the first i into p.
  std::vector<std::vector<int64_t>> best(parts + 1,
                                         std::vector<int64_t>(n + 1, inf));
  std::vector<std::vector<size_t>> cut(parts + 1, std::vector<size_t>(n + 1));
  best[0][0] = 0;
  for (int64_t p = 1; p <= parts; ++p)
    for (size_t i = p; i <= n; ++i)
      for (size_t j = p - 1; j < i; ++j) {
        if (best[p - 1][j] == inf)
          continue;
        int64_t cost = std::max(best[p - 1][j], prefix[i] - prefix[j]);
        if (cost < best[p][i]) {
          best[p][i] = cost;
          cut[p][i] = j;
        }
      }
  std::vector<size_t> starts(parts);
  size_t i = n;
  for (int64_t p = parts; p >= 1; --p) {
    starts[p - 1] = cut[p][i];
    i = cut[p][i];
  }
  return starts;
}

class Pipeliner {
public:
  /// With `perLayer`, every ONNX layer is a stage of its own (P becomes
  /// the layer count): what measureLayers costs.
  Pipeliner(func::FuncOp func, const PipelineOptions &options,
            std::string &error, bool perLayer = false)
      : func(func), options(options), error(error), perLayer(perLayer),
        P(options.stages), M(options.microBatches),
        V(perLayer ? 1
                   : search::chunksPerStage(options.schedule,
                                            options.virtualStages)),
        body(func.getBody().front()) {}
  FailureOr<PipelineReport> run();
  FailureOr<std::vector<search::LayerCost>> measure();

private:
  LogicalResult fail(const Twine &message) {
    error = message.str();
    return failure();
  }
  LogicalResult classify();
  LogicalResult assignStages();
  LogicalResult crossAtRoots();
  LogicalResult placeState();
  LogicalResult build(int64_t s, OpBuilder &builder);
  LogicalResult checkDeadlock();
  /// Per stage, what the cost model says of it (options.opSeconds).
  std::vector<search::LayerCost> stageCosts();
  /// The pipeline's chunks: stage s runs chunks s, s + P, ..., and
  /// stageOf gives forward and backward ops their chunk, the once-per-step
  /// ops their stage (chunk c is stage c mod P either way).
  int64_t chunks() const { return P * V; }
  int64_t stageOfOp(Operation *op) { return stageOf[op] % P; }
  int64_t tag(Value v, int64_t k, int64_t dst) const {
    return (crossIndex.lookup(v) * M + k) * P + dst;
  }
  int64_t lossTag(int64_t dst) const {
    return static_cast<int64_t>(crossIndex.size()) * M * P + dst;
  }
  bool isInput(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg &&
           func.getArgAttr(arg.getArgNumber(), LoomDialect::kInputAttrName);
  }

  func::FuncOp func;
  const PipelineOptions &options;
  std::string &error;
  const bool perLayer;
  int64_t P;
  const int64_t M;
  /// Chunks per stage (interleaved), else 1.
  const int64_t V;
  Block &body;
  /// The ONNX layers of the forward ops, in order.
  std::vector<std::string> layers;
  Value loss;
  /// Optimizer updates and the collectives (and reshapes) that reduce
  /// their gradients (run once per step); per-micro-batch ops (they depend on
  /// an input); ops of the step after the updates; ops before any input.
  llvm::DenseSet<Operation *> reductions, data, post, pre;
  llvm::DenseSet<Operation *> forward;
  /// Gradients as the micro-batch computes them, before the collectives.
  llvm::SetVector<Value> gradients;
  llvm::DenseMap<Operation *, int64_t> stageOf;
  /// For arguments and pre ops: the stages that need them.
  llvm::DenseMap<Value, std::set<int64_t>> needs;
  /// Per-micro-batch values used on other stages, and by which.
  llvm::DenseMap<Value, std::vector<int64_t>> crossTo;
  llvm::DenseMap<Value, int64_t> crossIndex;
  /// options.ownMeshes: per value that crosses stages, the compute op's
  /// result it carries (itself, or what it reduces), which numbers it.
  llvm::DenseMap<Value, Value> rootOf;
  int64_t lossStage = 0;
  std::vector<func::FuncOp> stageFuncs;
  PipelineReport report;
};

LogicalResult Pipeliner::classify() {
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto name = func.getNumResults() ? func.getResultAttrOfType<StringAttr>(
                                         0, LoomDialect::kOutputAttrName)
                                   : StringAttr();
  if (!name || name.getValue() != "loss")
    return fail("pipelining and micro-batches need a training step (--train)");
  loss = ret.getOperand(0);

  for (Operation &op : body) {
    if (!isOptimizerUpdate(&op))
      continue;
    reductions.insert(&op);
    Value g = op.getOperand(1);
    // Collectives, reshapes and transposes are linear: they commute with
    // the sum over micro-batches, and run once on it.
    while (Operation *def = g.getDefiningOp()) {
      if (!(isCollective(def) || isa<ReshapeOp, TransposeOp>(def)) ||
          !g.hasOneUse())
        break;
      reductions.insert(def);
      g = def->getOperand(0);
    }
    gradients.insert(g);
  }
  for (Operation &op : body.without_terminator()) {
    if (reductions.contains(&op))
      continue;
    bool dependsOnInput = false, dependsOnStep = false;
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      dependsOnInput |= isInput(v) || (def && data.contains(def));
      dependsOnStep |= def && (reductions.contains(def) || post.contains(def));
    }
    if (dependsOnInput && dependsOnStep)
      return fail(describe(&op) +
                  " mixes a micro-batch's values with the updated step's");
    if (dependsOnInput)
      data.insert(&op);
    else if (dependsOnStep)
      post.insert(&op);
    else
      pre.insert(&op);
  }
  Operation *lossDef = loss.getDefiningOp();
  if (!lossDef || !data.contains(lossDef))
    return fail("the loss does not depend on the step's inputs");
  // A micro-batch's values leave it only as gradients and the loss.
  for (Operation *op : data)
    for (Value r : op->getResults())
      for (OpOperand &use : r.getUses()) {
        Operation *user = use.getOwner();
        if (data.contains(user))
          continue;
        if (isa<func::ReturnOp>(user) && r == loss &&
            use.getOperandNumber() == 0)
          continue;
        if (reductions.contains(user) && gradients.contains(r))
          continue;
        return fail(describe(op) +
                    " produces a value the step uses once per step (not a "
                    "gradient or the loss): " +
                    describe(user) + " cannot be split into micro-batches");
      }
  // The forward: what the loss depends on.
  SmallVector<Operation *> worklist{lossDef};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && data.contains(def))
        worklist.push_back(def);
  }
  return success();
}

LogicalResult Pipeliner::assignStages() {
  std::vector<Operation *> forwardOrder;
  for (Operation &op : body)
    if (forward.contains(&op))
      forwardOrder.push_back(&op);
  auto operandStage = [&](Operation *op) {
    int64_t s = 0;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && stageOf.count(def))
        s = std::max(s, stageOf[def]);
    return s;
  };

  // The stage each forward op is given before it joins its operands'.
  llvm::DenseMap<Operation *, int64_t> given;
  if (!perLayer && !options.nodeStages.empty()) {
    for (Operation *op : forwardOrder) {
      auto it = options.nodeStages.find(nodeName(op));
      if (it == options.nodeStages.end())
        continue;
      if (it->second >= chunks())
        return fail("ONNX node '" + it->first().str() + "' is given stage " +
                    std::to_string(it->second) + ", but the pipeline has " +
                    (V > 1 ? std::to_string(chunks()) +
                                 " chunks (stages times virtual stages)"
                           : std::to_string(P) + " stages"));
      given[op] = it->second;
    }
  } else if (P > 1 || perLayer) {
    std::vector<int64_t> weights;
    llvm::StringMap<size_t> index;
    for (Operation *op : forwardOrder) {
      std::string node = nodeName(op);
      StringRef layer = layerOf(node);
      if (layer.empty())
        continue;
      auto [it, inserted] = index.try_emplace(layer, layers.size());
      if (inserted) {
        layers.push_back(layer.str());
        weights.push_back(0);
      }
      ++weights[it->second];
    }
    llvm::StringMap<int64_t> layerStage;
    if (perLayer) {
      if (layers.empty())
        return fail("the model's ONNX node names have no layers (first "
                    "path components) to split into pipeline stages");
      P = static_cast<int64_t>(layers.size());
      for (auto [i, layer] : llvm::enumerate(layers))
        layerStage[layer] = static_cast<int64_t>(i);
    } else if (static_cast<int64_t>(layers.size()) < chunks()) {
      return fail("the model has " + std::to_string(layers.size()) +
                  " layers (ONNX node names' first path components), too "
                  "few for " +
                  (V > 1 ? std::to_string(chunks()) + " pipeline chunks (" +
                               std::to_string(P) + " stages of " +
                               std::to_string(V) + " virtual stages)"
                         : std::to_string(P) + " pipeline stages") +
                  "; use fewer stages or give nodes stages "
                  "with `\"stage\"` in a strategy file");
    } else if (!options.layerStages.empty()) {
      for (const std::string &layer : layers) {
        auto it = options.layerStages.find(layer);
        if (it == options.layerStages.end() || it->second < 0 ||
            it->second >= chunks())
          return fail("layer '" + layer + "' has no stage of the " +
                      std::to_string(chunks()) + " in the stage split");
        layerStage[layer] = it->second;
      }
    } else {
      std::vector<size_t> starts = balance(weights, chunks());
      for (size_t i = 0, s = 0; i < layers.size(); ++i) {
        while (s + 1 < starts.size() && starts[s + 1] <= i)
          ++s;
        layerStage[layers[i]] = static_cast<int64_t>(s);
      }
    }
    for (Operation *op : forwardOrder) {
      std::string node = nodeName(op);
      StringRef layer = layerOf(node);
      if (!layer.empty())
        given[op] = layerStage[layer];
    }
    if (!perLayer)
      report.layerStages = layerStage;
  }
  // Forward ops of no stage that use neither a parameter nor what an
  // anchored op computes (reshaping the labels, counting them) float: they
  // run on the earliest stage that uses them, not on stage 0 to be sent on.
  llvm::DenseSet<Operation *> floating;
  for (Operation *op : forwardOrder) {
    if (given.count(op))
      continue;
    bool anchored = llvm::any_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def)
        return !isInput(v);
      if (pre.contains(def))
        return !isa<ConstantOp>(def);
      return forward.contains(def) && !floating.contains(def);
    });
    if (!anchored)
      floating.insert(op);
  }
  llvm::StringMap<int64_t> nodeStage;
  for (Operation *op : forwardOrder) {
    if (floating.contains(op))
      continue;
    int64_t from = operandStage(op);
    auto it = given.find(op);
    if (it != given.end() && it->second < from && !perLayer &&
        !options.nodeStages.empty())
      return fail(describe(op) + " is given stage " +
                  std::to_string(it->second) +
                  ", but one of its inputs is computed on stage " +
                  std::to_string(from));
    int64_t s = it != given.end() ? std::max(it->second, from) : from;
    stageOf[op] = s;
    nodeStage.try_emplace(nodeName(op), s);
  }
  for (Operation *op : llvm::reverse(forwardOrder)) {
    if (!floating.contains(op))
      continue;
    int64_t s = chunks() - 1;
    for (Operation *user : op->getUsers())
      if (auto it = stageOf.find(user); it != stageOf.end())
        s = std::min(s, it->second);
    stageOf[op] = s;
    nodeStage.try_emplace(nodeName(op), s);
  }
  lossStage = stageOfOp(loss.getDefiningOp());

  // Backward ops follow their node's forward ops; the others (collectives
  // without a node, the loss's gradient) the latest stage that uses them,
  // else the latest of their operands'.
  std::vector<Operation *> backward;
  for (Operation &op : body)
    if (data.contains(&op) && !forward.contains(&op))
      backward.push_back(&op);
  for (Operation *op : backward) {
    auto it = nodeStage.find(nodeName(op));
    if (it != nodeStage.end())
      stageOf[op] = it->second;
  }
  for (Operation *op : llvm::reverse(backward)) {
    if (stageOf.count(op))
      continue;
    int64_t s = -1;
    for (Operation *user : op->getUsers())
      if (auto it = stageOf.find(user); it != stageOf.end())
        s = std::max(s, it->second);
    if (s >= 0)
      stageOf[op] = s;
  }
  for (Operation *op : backward)
    if (!stageOf.count(op))
      stageOf[op] = operandStage(op);
  return success();
}

LogicalResult Pipeliner::placeState() {
  // Reductions and updates run where their parameter is used.
  auto need = [&](Value v, int64_t s) {
    if (isa<BlockArgument>(v) || pre.contains(v.getDefiningOp()))
      needs[v].insert(s);
  };
  auto propagatePre = [&] {
    for (Operation &op : llvm::reverse(body))
      if (pre.contains(&op))
        for (Value r : op.getResults()) {
          // A copy: need() may grow the map under the set.
          std::set<int64_t> stages = needs[r];
          for (int64_t s : stages)
            for (Value v : op.getOperands())
              need(v, s);
        }
  };
  for (Operation &op : body)
    if (data.contains(&op))
      for (Value v : op.getOperands())
        need(v, stageOfOp(&op));
  propagatePre();
  for (Operation &op : body) {
    if (!reductions.contains(&op) && !post.contains(&op))
      continue;
    if (isOptimizerUpdate(&op)) {
      // The parameter argument, through what is made of it before the step
      // (ZeRO's slice of it).
      Value param = op.getOperand(0);
      while (Operation *def = param.getDefiningOp()) {
        if (!pre.contains(def) || def->getNumOperands() == 0)
          break;
        param = def->getOperand(0);
      }
      if (!isa<BlockArgument>(param))
        return fail(describe(&op) + " updates a value that is not a parameter");
      const std::set<int64_t> &users = needs[param];
      if (users.size() > 1) {
        auto arg = cast<BlockArgument>(param);
        auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), LoomDialect::kParamAttrName);
        return fail("parameter '" + (name ? name.str() : "?") +
                    "' is used by stages " + std::to_string(*users.begin()) +
                    " and " + std::to_string(*users.rbegin()) +
                    "; parameters shared across pipeline stages are not "
                    "supported");
      }
      stageOf[&op] = users.empty() ? 0 : *users.begin();
      continue;
    }
    int64_t s = -1;
    for (Value v : op.getOperands()) {
      if (Operation *def = v.getDefiningOp();
          def && stageOf.count(def) && !data.contains(def))
        s = std::max(s, stageOf[def]);
      else if (isa<BlockArgument>(v) && needs[v].size() == 1 &&
               !func.getArgAttr(cast<BlockArgument>(v).getArgNumber(),
                                LoomDialect::kHyperAttrName))
        s = std::max(s, *needs[v].begin());
    }
    stageOf[&op] = std::max<int64_t>(s, 0);
  }
  // A gradient's collectives take its update's stage: walk them back.
  for (Operation &op : llvm::reverse(body))
    if (reductions.contains(&op) && !isOptimizerUpdate(&op)) {
      Operation *user = *op.getUsers().begin();
      stageOf[&op] = stageOf[user];
    }
  for (Value g : gradients) {
    Operation *head = *g.getUsers().begin();
    for (Operation *user : g.getUsers())
      if (reductions.contains(user))
        head = user;
    if (stageOfOp(g.getDefiningOp()) != stageOf[head])
      return fail("the gradient " + describe(g.getDefiningOp()) +
                  " is computed on stage " +
                  std::to_string(stageOfOp(g.getDefiningOp())) +
                  " but its parameter is updated on stage " +
                  std::to_string(stageOf[head]));
  }
  for (Operation &op : body)
    if (reductions.contains(&op) || post.contains(&op))
      for (Value v : op.getOperands())
        need(v, stageOf[&op]);
  propagatePre();
  // Persistent state lives on one stage.
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (func.getArgAttr(i, LoomDialect::kInputAttrName) ||
        func.getArgAttr(i, LoomDialect::kHyperAttrName))
      continue;
    if (needs[arg].size() > 1) {
      std::string name = "#" + std::to_string(i);
      for (StringRef attr :
           {LoomDialect::kParamAttrName, LoomDialect::kStateAttrName,
            LoomDialect::kBufferAttrName})
        if (auto n = func.getArgAttrOfType<StringAttr>(i, attr))
          name = n.str();
      return fail("'" + name + "' is used by stages " +
                  std::to_string(*needs[arg].begin()) + " and " +
                  std::to_string(*needs[arg].rbegin()) +
                  "; state shared across pipeline stages is not supported");
    }
  }

  // Values crossing stages, numbered in program order (of the compute op
  // results they carry, with stages on submeshes of their own).
  std::vector<Value> crossing;
  for (Operation &op : body) {
    if (!data.contains(&op))
      continue;
    for (Value r : op.getResults()) {
      std::set<int64_t> to;
      for (Operation *user : r.getUsers())
        if (data.contains(user) && stageOfOp(user) != stageOfOp(&op))
          to.insert(stageOfOp(user));
      if (to.empty())
        continue;
      crossTo[r] = std::vector<int64_t>(to.begin(), to.end());
      crossing.push_back(r);
    }
  }
  if (options.ownMeshes) {
    llvm::DenseMap<Operation *, int64_t> position;
    for (Operation &op : body)
      position[&op] = static_cast<int64_t>(position.size());
    auto key = [&](Value v) {
      auto root = cast<OpResult>(rootOf.lookup(v) ? rootOf.lookup(v) : v);
      return std::make_pair(position.lookup(root.getOwner()),
                            root.getResultNumber());
    };
    llvm::stable_sort(crossing,
                      [&](Value a, Value b) { return key(a) < key(b); });
  }
  for (Value v : crossing)
    crossIndex[v] = static_cast<int64_t>(crossIndex.size());
  return success();
}

/// The layout loom-partition recorded for `v` (loom.layouts), if any.
static TensorLayoutAttr recordedLayout(Value v) {
  auto result = dyn_cast<OpResult>(v);
  if (!result)
    return {};
  auto layouts = result.getOwner()->getAttrOfType<ArrayAttr>(
      LoomDialect::kResultLayoutsAttrName);
  return layouts ? dyn_cast<TensorLayoutAttr>(layouts[result.getResultNumber()])
                 : TensorLayoutAttr();
}

static void recordLayout(Operation *op, TensorLayoutAttr layout) {
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

LogicalResult Pipeliner::build(int64_t s, OpBuilder &builder) {
  MLIRContext *ctx = func.getContext();
  Location loc = func.getLoc();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Arguments: what the stage uses; an input once per micro-batch.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  std::vector<std::pair<BlockArgument, int64_t>> argSources;
  for (BlockArgument arg : func.getArguments()) {
    if (!needs.count(arg) || !needs[arg].count(s))
      continue;
    DictionaryAttr attrs = func.getArgAttrDict(arg.getArgNumber());
    if (!isInput(arg)) {
      argTypes.push_back(arg.getType());
      argAttrs.push_back(attrs);
      argSources.push_back({arg, -1});
      continue;
    }
    for (int64_t k = 0; k < M; ++k) {
      NamedAttrList list(attrs);
      if (M > 1)
        list.set(LoomDialect::kMicroBatchAttrName,
                 builder.getI64IntegerAttr(k));
      argTypes.push_back(arg.getType());
      argAttrs.push_back(list.getDictionary(ctx));
      argSources.push_back({arg, k});
    }
  }
  // Results: the loss, and the updates of the stage's state.
  SmallVector<Type> resultTypes{loss.getType()};
  SmallVector<DictionaryAttr> resultAttrs{func.getResultAttrDict(0)};
  SmallVector<Value> updates;
  for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
    Value v = ret.getOperand(i);
    Operation *def = v.getDefiningOp();
    if (!def || !stageOf.count(def) || stageOf[def] != s)
      continue;
    auto of =
        func.getResultAttrOfType<IntegerAttr>(i, LoomDialect::kUpdatesAttrName);
    if (!of)
      return fail("result #" + std::to_string(i) +
                  " of the step is neither the loss nor an update");
    auto pos = llvm::find_if(argSources, [&](auto &src) {
      return src.first.getArgNumber() == of.getInt();
    });
    if (pos == argSources.end())
      return fail("result #" + std::to_string(i) +
                  " updates an argument stage " + std::to_string(s) +
                  " does not use");
    NamedAttrList list(func.getResultAttrDict(i));
    list.set(LoomDialect::kUpdatesAttrName,
             builder.getI64IntegerAttr(pos - argSources.begin()));
    resultTypes.push_back(v.getType());
    resultAttrs.push_back(list.getDictionary(ctx));
    updates.push_back(v);
  }

  auto stageFunc =
      func::FuncOp::create(builder, loc, ("main_stage" + Twine(s)).str(),
                           builder.getFunctionType(argTypes, resultTypes));
  for (NamedAttribute attr : func->getDiscardableAttrs())
    stageFunc->setAttr(attr.getName(), attr.getValue());
  SmallVector<NamedAttribute> pipelineAttrs{
      builder.getNamedAttr("stage", builder.getI64IntegerAttr(s)),
      builder.getNamedAttr("stages", builder.getI64IntegerAttr(P)),
      builder.getNamedAttr("micro_batches", builder.getI64IntegerAttr(M)),
      builder.getNamedAttr("schedule", builder.getStringAttr(options.schedule)),
      builder.getNamedAttr("axis", builder.getStringAttr(options.axis))};
  if (V > 1)
    pipelineAttrs.push_back(
        builder.getNamedAttr("virtual_stages", builder.getI64IntegerAttr(V)));
  if (options.ownMeshes)
    pipelineAttrs.push_back(
        builder.getNamedAttr("own_mesh", builder.getUnitAttr()));
  stageFunc->setAttr(LoomDialect::kPipelineAttrName,
                     builder.getDictionaryAttr(pipelineAttrs));
  for (unsigned i = 0; i < argAttrs.size(); ++i)
    stageFunc.setArgAttrs(i, argAttrs[i]);
  for (unsigned i = 0; i < resultAttrs.size(); ++i)
    stageFunc.setResultAttrs(i, resultAttrs[i]);
  stageFuncs.push_back(stageFunc);
  Block *entry = stageFunc.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(entry);

  IRMapping shared;
  std::vector<IRMapping> micro(M);
  for (auto [i, src] : llvm::enumerate(argSources)) {
    if (src.second < 0)
      shared.map(src.first, entry->getArgument(i));
    else
      micro[src.second].map(src.first, entry->getArgument(i));
  }
  auto cloneShared = [&](Operation &op) -> LogicalResult {
    for (Value v : op.getOperands())
      if (!shared.contains(v))
        return fail(describe(&op) + " on stage " + std::to_string(s) +
                    " uses a value the stage does not have");
    b.clone(op, shared);
    return success();
  };
  for (Operation &op : body)
    if (pre.contains(&op) && llvm::any_of(op.getResults(), [&](Value r) {
          return needs.count(r) && needs[r].count(s);
        }))
      if (failed(cloneShared(op)))
        return failure();
  for (IRMapping &m : micro)
    for (auto [from, to] : shared.getValueMap())
      m.map(from, to);

  // The schedule's units: one micro-batch's forward or backward ops of one
  // of the stage's chunks.
  std::vector<std::vector<Operation *>> forwardOps(V), backwardOps(V);
  for (Operation &op : body)
    if (data.contains(&op) && stageOfOp(&op) == s)
      (forward.contains(&op) ? forwardOps : backwardOps)[stageOf[&op] / P]
          .push_back(&op);
  Value lossSum;
  llvm::DenseMap<Value, Value> gradientSums;
  PipelineReport::Stage &info = report.stages[s];
  for (const std::vector<Operation *> &chunk : forwardOps) {
    std::pair<std::string, std::string> range;
    for (Operation *op : chunk) {
      std::string node = nodeName(op);
      StringRef layer = layerOf(node);
      if (layer.empty())
        continue;
      if (range.first.empty())
        range.first = layer.str();
      range.second = layer.str();
    }
    if (info.firstLayer.empty())
      info.firstLayer = range.first;
    if (!range.second.empty())
      info.lastLayer = range.second;
    if (V > 1)
      info.chunks.push_back(range);
    info.forwardOps += static_cast<int>(chunk.size());
  }

  // A mean cross-entropy divides by the labels counted: the step's mean
  // divides by all of the step's labels, so each micro-batch divides by
  // the count's mean over the micro-batches (counted up front from the
  // labels, which are arguments), and the micro-batch losses' mean and its
  // gradient are the batch's also when ignored labels fall unevenly.
  llvm::DenseMap<Type, Value> factors; // 1/M, per element type
  auto scale = [&](Value v) -> Value {
    if (M == 1)
      return v;
    Type element = cast<RankedTensorType>(v.getType()).getElementType();
    Value &factor = factors[element];
    if (!factor)
      factor = ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({}, element),
                                 b.getFloatAttr(element, 1.0 / M)));
    return MulOp::create(b, v.getLoc(), v, factor);
  };
  auto precount = [&](LabelCountOp count) {
    SmallVector<Operation *> chain{count};
    Value total = count.getResult();
    while (total.hasOneUse() && isa<AllReduceOp>(*total.getUsers().begin())) {
      chain.push_back(*total.getUsers().begin());
      total = chain.back()->getResult(0);
    }
    // What the count needs: ops of this stage on the labels only.
    llvm::SetVector<Operation *> slice;
    SmallVector<Operation *> worklist{count};
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!slice.insert(op))
        continue;
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || pre.contains(def))
          continue;
        if (!data.contains(def) || stageOfOp(def) != s)
          return;
        worklist.push_back(def);
      }
    }
    for (Operation *op : chain)
      slice.insert(op);
    std::vector<Operation *> ordered;
    for (Operation &op : body)
      if (slice.contains(&op))
        ordered.push_back(&op);
    Value sum;
    for (IRMapping &m : micro) {
      for (Operation *op : ordered)
        b.clone(*op, m);
      Value c = m.lookup(total);
      sum = sum ? Value(AddOp::create(b, count.getLoc(), sum, c)) : c;
    }
    Value mean = scale(sum);
    for (IRMapping &m : micro)
      m.map(total, mean);
  };
  for (const std::vector<Operation *> &chunk : forwardOps)
    for (Operation *op : chunk)
      if (auto count = dyn_cast<LabelCountOp>(op))
        precount(count);

  for (const search::ScheduleUnit &unit :
       search::scheduleOrder(options.schedule, P, M, s, V)) {
    IRMapping &m = micro[unit.microBatch];
    for (Operation *op :
         (unit.backward ? backwardOps : forwardOps)[unit.chunk]) {
      // Counted up front.
      if (op->getNumResults() && llvm::all_of(op->getResults(), [&](Value r) {
            return m.contains(r);
          }))
        continue;
      for (Value v : op->getOperands()) {
        if (m.contains(v))
          continue;
        Operation *def = v.getDefiningOp();
        if (!def || !data.contains(def) || stageOfOp(def) == s)
          return fail(describe(op) + " on stage " + std::to_string(s) +
                      " runs before its operand from " +
                      (def ? describe(def) : std::string("an argument")) +
                      " in the " + options.schedule + " schedule");
        auto recv = RecvOp::create(b, def->getLoc(), v.getType(),
                                   stageOfOp(def), tag(v, unit.microBatch, s));
        if (options.ownMeshes)
          recordLayout(recv, recordedLayout(v));
        m.map(v, recv);
      }
      Operation *copy = b.clone(*op, m);
      for (auto [r, c] : llvm::zip(op->getResults(), copy->getResults())) {
        if (auto it = crossTo.find(r); it != crossTo.end())
          for (int64_t dst : it->second) {
            SendOp::create(b, op->getLoc(), c, dst,
                           tag(r, unit.microBatch, dst));
            ++info.sends;
          }
        if (r == loss)
          lossSum =
              lossSum ? Value(AddOp::create(b, loc, lossSum, c)) : Value(c);
        if (gradients.contains(r)) {
          Value &sum = gradientSums[r];
          sum = sum ? Value(AddOp::create(b, op->getLoc(), sum, c)) : Value(c);
        }
      }
    }
  }

  // Once per step: the gradients' mean over the micro-batches, their
  // reductions and the updates.
  for (Value g : gradients)
    if (stageOfOp(g.getDefiningOp()) == s)
      shared.map(g, scale(gradientSums.lookup(g)));
  for (Operation &op : body)
    if ((reductions.contains(&op) || post.contains(&op)) && stageOf[&op] == s)
      if (failed(cloneShared(op)))
        return failure();
  Value stageLoss;
  if (s == lossStage) {
    stageLoss = scale(lossSum);
    for (int64_t dst = 0; dst < P; ++dst)
      if (dst != s) {
        SendOp::create(b, loc, stageLoss, dst, lossTag(dst));
        ++info.sends;
      }
  } else {
    stageLoss = RecvOp::create(b, loc, loss.getType(), lossStage, lossTag(s));
  }
  SmallVector<Value> results{stageLoss};
  for (Value v : updates)
    results.push_back(shared.lookup(v));
  func::ReturnOp::create(b, ret.getLoc(), results);
  return success();
}

/// Runs the stages' sends and receives with buffered sends: fails if some
/// stage would wait forever.
LogicalResult Pipeliner::checkDeadlock() {
  struct Event {
    bool send;
    int64_t peer, tag;
  };
  std::vector<std::vector<Event>> events(P);
  for (int64_t s = 0; s < P; ++s)
    stageFuncs[s].walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op))
        events[s].push_back({true, static_cast<int64_t>(send.getPeerStage()),
                             static_cast<int64_t>(send.getTag())});
      else if (auto recv = dyn_cast<RecvOp>(op))
        events[s].push_back({false, static_cast<int64_t>(recv.getPeerStage()),
                             static_cast<int64_t>(recv.getTag())});
    });
  std::set<std::tuple<int64_t, int64_t, int64_t>> sent; // from, to, tag
  std::vector<size_t> next(P, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < P; ++s)
      while (next[s] < events[s].size()) {
        const Event &e = events[s][next[s]];
        if (e.send)
          sent.insert({s, e.peer, e.tag});
        else if (!sent.count({e.peer, s, e.tag}))
          break;
        ++next[s];
        progress = true;
      }
  }
  for (int64_t s = 0; s < P; ++s)
    if (next[s] < events[s].size())
      return fail("the " + options.schedule + " schedule deadlocks: stage " +
                  std::to_string(s) + " waits for tag " +
                  std::to_string(events[s][next[s]].tag) + " from stage " +
                  std::to_string(events[s][next[s]].peer));
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
  auto seconds = [&](Operation *op) {
    return options.opSeconds ? options.opSeconds(op) : 0.0;
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
  if (options.schedule != "gpipe" && options.schedule != "1f1b" &&
      options.schedule != "interleaved") {
    error = "unknown pipeline schedule '" + options.schedule +
            "'; use gpipe, 1f1b or interleaved";
    return failure();
  }
  if (options.schedule == "interleaved" && options.virtualStages < 1) {
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
  report.microBatches = M;
  report.virtualStages = V;
  report.bubbleFraction = static_cast<double>(P - 1) / (V * M + P - 1);
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
    report.seconds = search::pipelineSeconds(micro, step, M, V);
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

} // namespace

FailureOr<PipelineReport> pipelineStep(func::FuncOp func,
                                       const PipelineOptions &options,
                                       std::string &error) {
  Pipeliner pipeliner(func, options, error);
  return pipeliner.run();
}

FailureOr<std::vector<search::LayerCost>>
measureLayers(func::FuncOp func, const PipelineOptions &options,
              std::string &error) {
  Pipeliner pipeliner(func, options, error, /*perLayer=*/true);
  return pipeliner.measure();
}

} // namespace loom::sharding
