//===- PipelineStages.cpp - Which op runs on which pipeline stage ---------===//
//
// The Pipeliner's first phases (PipelineImpl.h): the step's ops sorted into
// per-micro-batch ops, once-per-step reductions and updates, and ops before
// or after them (classify); every per-micro-batch op given its chunk, the
// forward by the user's stages or its layer's, the backward by its forward
// node's (assignStages); and the once-per-step ops, state and values that
// cross stages placed after them (placeState).
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"
#include "passes/pipeline/PipelineImpl.h"

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <limits>
#include <set>

using namespace mlir;

namespace loom::sharding::detail {

namespace {

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

} // namespace

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
        // A buffer's new value (training-mode batch normalization's running
        // statistics) would chain from micro-batch to micro-batch, across
        // stages: not implemented here (one device's accumulation does it).
        auto of =
            isa<func::ReturnOp>(user)
                ? func.getResultAttrOfType<IntegerAttr>(
                      use.getOperandNumber(), LoomDialect::kUpdatesAttrName)
                : IntegerAttr();
        if (of && func.getArgAttr(of.getInt(), LoomDialect::kBufferAttrName))
          return fail(
              describe(op) + " gives the buffer '" +
              func.getArgAttrOfType<StringAttr>(of.getInt(),
                                                LoomDialect::kBufferAttrName)
                  .getValue()
                  .str() +
              "' a new value every micro-batch (training-mode "
              "BatchNormalization's running statistics): micro-batches on a "
              "mesh or a pipeline do not support that yet; use "
              "--micro-batches on one device, or export the model in eval "
              "mode");
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

  // The stage each forward op is given before it joins its operands'.
  llvm::DenseMap<Operation *, int64_t> given;
  if (!perLayer && !options.nodeStages.empty()) {
    if (failed(giveNodeStages(forwardOrder, given)))
      return failure();
  } else if (P > 1 || perLayer) {
    if (failed(giveLayerStages(forwardOrder, given)))
      return failure();
  }
  llvm::StringMap<int64_t> nodeStage;
  if (failed(placeForward(forwardOrder, given, nodeStage)))
    return failure();
  lossStage = stageOfOp(loss.getDefiningOp());
  placeBackward(nodeStage);
  return success();
}

int64_t Pipeliner::operandStage(Operation *op) {
  int64_t s = 0;
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp(); def && stageOf.count(def))
      s = std::max(s, stageOf[def]);
  return s;
}

LogicalResult
Pipeliner::giveNodeStages(ArrayRef<Operation *> forwardOrder,
                          llvm::DenseMap<Operation *, int64_t> &given) {
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
  return success();
}

LogicalResult
Pipeliner::giveLayerStages(ArrayRef<Operation *> forwardOrder,
                           llvm::DenseMap<Operation *, int64_t> &given) {
  // The layers in order of their first forward op, weighed by op count.
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
  if (failed(stageLayers(weights, layerStage)))
    return failure();
  for (Operation *op : forwardOrder) {
    std::string node = nodeName(op);
    StringRef layer = layerOf(node);
    if (!layer.empty())
      given[op] = layerStage[layer];
  }
  if (!perLayer)
    report.layerStages = layerStage;
  return success();
}

LogicalResult Pipeliner::stageLayers(const std::vector<int64_t> &weights,
                                     llvm::StringMap<int64_t> &layerStage) {
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
  return success();
}

/// Forward ops of no stage that use neither a parameter nor what an
/// anchored op computes (reshaping the labels, counting them) float: they
/// run on the earliest stage that uses them, not on stage 0 to be sent on.
llvm::DenseSet<Operation *>
Pipeliner::floatingOps(ArrayRef<Operation *> forwardOrder,
                       const llvm::DenseMap<Operation *, int64_t> &given) {
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
  return floating;
}

LogicalResult
Pipeliner::placeForward(ArrayRef<Operation *> forwardOrder,
                        const llvm::DenseMap<Operation *, int64_t> &given,
                        llvm::StringMap<int64_t> &nodeStage) {
  llvm::DenseSet<Operation *> floating = floatingOps(forwardOrder, given);
  // Anchored ops in program order: the later of their given stage and
  // their operands'.
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
  // Floating ops backwards, so that their users have their stages.
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
  return success();
}

/// Backward ops follow their node's forward ops; the others (collectives
/// without a node, the loss's gradient) the latest stage that uses them,
/// else the latest of their operands'.
void Pipeliner::placeBackward(const llvm::StringMap<int64_t> &nodeStage) {
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

  numberCrossings();
  return success();
}

/// Values crossing stages, numbered in program order (of the compute op
/// results they carry, with stages on submeshes of their own).
void Pipeliner::numberCrossings() {
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
}

} // namespace loom::sharding::detail
