//===- StepCost.cpp - Cost terms of sharded and partitioned ops -----------===//

#include "compiler/analysis/StepCost.h"
#include "compiler/analysis/ZeroLayout.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <functional>

using namespace mlir;

namespace loom::sharding {

StepShape analyzeStep(func::FuncOp func, double stateShare, double savedShare,
                      int64_t bucketBytes) {
  StepShape step;
  step.stateShare = stateShare;
  step.savedShare = savedShare;
  if (bucketBytes > 0) {
    // A bucket holds at most the step's parameters (in their master type,
    // which their gradients are reduced in).
    double params = 0;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), LoomDialect::kParamAttrName))
        if (auto t = dyn_cast<RankedTensorType>(arg.getType()))
          params += static_cast<double>(t.getNumElements()) *
                    static_cast<double>(elementBytes(t));
    step.bucketBytes = std::min(static_cast<double>(bucketBytes), params);
  }
  Block &body = func.getBody().front();
  Operation *terminator = body.getTerminator();
  bool updates = false;
  for (Operation &op : body) {
    if (isa<AdamUpdateOp>(op))
      step.optimizerStateFactor = 2;
    else if (isa<MomentumUpdateOp>(op))
      step.optimizerStateFactor = std::max(step.optimizerStateFactor, 1.0);
    updates |= isOptimizerUpdate(&op);
  }
  auto name =
      func.getNumResults() > 0
          ? func.getResultAttrOfType<StringAttr>(0, LoomDialect::kOutputAttrName)
          : StringAttr();
  if (updates && name && name.getValue() == "loss") {
    step.training = true;
    step.zeroLevel = zeroLevel(func);
    step.loss = terminator->getOperand(0).getDefiningOp();
    for (Operation &op : body) {
      step.forward.insert(&op);
      if (auto id = op.getAttrOfType<IntegerAttr>(LoomDialect::kGradIdAttrName))
        step.forwardById[id.getInt()] = &op;
      if (op.hasAttr(LoomDialect::kRecomputeAttrName) && &op != step.loss)
        step.recomputed.insert(&op);
      if (&op == step.loss)
        break;
    }
    // Each backward op's forward op: its link's, else that of the backward
    // op it feeds (a derivative's helpers precede the linked op that reads
    // them), else that of the backward op feeding it.
    llvm::DenseMap<Operation *, Operation *> owner;
    SmallVector<Operation *> backwardOps;
    for (Operation &op : body)
      if (!step.forward.contains(&op) && &op != terminator &&
          !isa<ConstantOp>(op) && !isOptimizerUpdate(&op))
        backwardOps.push_back(&op);
    bool linked = false;
    for (Operation *op : llvm::reverse(backwardOps)) {
      if (auto links =
              op->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kGradOfAttrName);
          links && !links.empty()) {
        linked = true;
        if (Operation *of = step.forwardById.lookup(links[0])) {
          owner[op] = of;
          continue;
        }
      }
      for (Operation *user : op->getUsers())
        if (Operation *of = owner.lookup(user)) {
          owner[op] = of;
          break;
        }
    }
    for (Operation *op : backwardOps)
      if (!owner.count(op))
        for (Value v : op->getOperands())
          if (Operation *of = owner.lookup(v.getDefiningOp())) {
            owner[op] = of;
            break;
          }
    if (linked)
      for (Operation *op : backwardOps)
        if (Operation *of = owner.lookup(op))
          step.backward[of].push_back(op);
  }
  return step;
}

bool isOptimizerUpdate(Operation *op) {
  return isa<SgdUpdateOp, MomentumUpdateOp, AdamUpdateOp>(op);
}

bool StepShape::usedByBackward(Value result) const {
  return training && llvm::any_of(result.getUsers(), [&](Operation *user) {
           return !forward.contains(user) && !isa<func::ReturnOp>(user);
         });
}

bool StepShape::isSaved(Value result) const {
  if (!training || recomputed.contains(result.getDefiningOp()))
    return false;
  return usedByBackward(result) ||
         llvm::any_of(result.getUsers(), [&](Operation *user) {
           return recomputed.contains(user);
         });
}

StepShape::BackwardUses StepShape::backwardUses(Value result) const {
  BackwardUses uses;
  if (!training)
    return uses;
  Operation *producer = result.getDefiningOp();
  for (OpOperand &use : result.getUses()) {
    Operation *user = use.getOwner();
    if (forward.contains(user) || isa<func::ReturnOp>(user))
      continue;
    // The forward value this operand of the gradient op stands for.
    auto links =
        user->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kGradOfAttrName);
    int64_t code = links && links.size() > 1 + use.getOperandNumber()
                       ? links[1 + use.getOperandNumber()]
                       : -1;
    Operation *of = code >= 0 ? forwardById.lookup(links[0]) : nullptr;
    size_t k = code / 2;
    if (of && code % 2 == 0 && k < of->getNumOperands() &&
        of->getOperand(k) == result && of != producer)
      uses.consumers.push_back({of, static_cast<unsigned>(k)});
    else
      uses.own = true;
    uses.unlinked |= !links;
  }
  return uses;
}

bool StepShape::isRecomputedForBackward(Value result) const {
  return recomputed.contains(result.getDefiningOp()) && usedByBackward(result);
}

std::vector<Operation *> forwardOps(func::FuncOp func, const StepShape &step) {
  std::vector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (!isa<ConstantOp>(op) && isa<ShardingOpInterface>(op))
      ops.push_back(&op);
    if (&op == step.loss)
      break;
  }
  return ops;
}

const std::vector<int64_t> &GroupCache::group(const std::vector<int> &axes) {
  auto it = groups.find(axes);
  if (it == groups.end())
    it = groups.emplace(axes, layout::commGroups(mesh, axes).front()).first;
  return it->second;
}

BlockArgument NodeCoster::parameterOf(Value v) const {
  if (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getInput();
  auto arg = dyn_cast<BlockArgument>(v);
  if (arg && arg.getOwner()->getParentOp() == func.getOperation() &&
      func.getArgAttr(arg.getArgNumber(), LoomDialect::kParamAttrName))
    return arg;
  return nullptr;
}

bool NodeCoster::isParameterCast(Operation *op) const {
  return isa<CastOp>(op) && parameterOf(op->getOperand(0));
}

std::string dtypeName(Type elementType) {
  return elementType.isBF16()  ? "bf16"
         : elementType.isF16() ? "f16"
                               : "f32";
}

/// Roofline seconds of `op` on operands and results of the given types.
static double workSeconds(Operation *op, ArrayRef<RankedTensorType> operands,
                          ArrayRef<RankedTensorType> results,
                          const cost::HardwareProfile &profile) {
  OpWork work = cast<CostOpInterface>(op).estimateWork(operands, results);
  std::string dtype =
      results.empty() ? "f32" : dtypeName(results.front().getElementType());
  return cost::computeSeconds(
      profile, {work.flops, work.bytes, dtype, work.kernelClass, work.kernel});
}

static double bytesOf(RankedTensorType t) {
  return static_cast<double>(t.getNumElements()) *
         static_cast<double>(elementBytes(t));
}

/// How ZeRO splits the update of a parameter operand.
struct ZeroSplit {
  /// The size of its gradient's axes (1: not split).
  int64_t ways = 1;
  /// The padded tensor's size over the parameter's, when no dimension
  /// divides (zeroPadding).
  double padding = 1;
};

static ZeroSplit zeroSplit(Operation *op, unsigned i, const OpLayouts &layouts,
                           const layout::Mesh &mesh, const StepShape &step) {
  if (!step.training || step.zeroLevel == 0)
    return {};
  std::vector<int> axes = gradientAxes(layouts, i);
  auto global = cast<RankedTensorType>(op->getOperand(i).getType());
  int64_t ways = 1;
  for (int a : axes)
    ways *= mesh.axisSize(a);
  if (zeroLayout(layouts.operands[i], axes, global.getShape(), mesh))
    return {ways, 1.0};
  std::optional<ZeroPadding> pad =
      zeroPadding(layouts.operands[i], axes, global.getShape(), mesh);
  if (!pad)
    return {};
  return {ways, static_cast<double>(pad->extent) /
                    static_cast<double>(global.getDimSize(pad->dim))};
}

/// Bytes per device a parameter of `bytes` (its layout's share) holds for
/// the step with its gradient and optimizer state, its update split by
/// ZeRO as `split` says (padded when no dimension divides).
static double parameterBytes(double bytes, const StepShape &step,
                             ZeroSplit split) {
  if (!step.training)
    return bytes;
  if (split.ways > 1)
    bytes *= split.padding;
  double n = static_cast<double>(split.ways), s = step.optimizerStateFactor;
  switch (step.zeroLevel) {
  case 1:
    return bytes * (2.0 + s / n);
  case 2:
    return bytes * (1.0 + (1.0 + s) / n);
  case 3:
    return bytes * (2.0 + s) / n;
  default:
    return bytes * (2.0 + s);
  }
}

/// Calls `f(value, layout, bytes, isParameter, operand)` for each tensor
/// `op` holds for the whole step: its parameter operands (with gradients and
/// optimizer state in training; `operand` is the operand's index) and, in
/// training, its results the backward uses (`operand` -1) and a loss's
/// gradient of its input (`operand` 0).
template <typename F>
static void forEachHeld(Operation *op, const OpLayouts &layouts,
                        const layout::Mesh &mesh, const StepShape &step,
                        const NodeCoster &coster, F f) {
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    BlockArgument param = coster.parameterOf(v);
    if (!param || coster.isParameterCast(op))
      continue;
    // The parameter's own (master) type, in the operand's layout.
    double bytes = bytesOf(localType(cast<RankedTensorType>(param.getType()),
                                     mesh, layouts.operands[i]));
    f(v, layouts.operands[i],
      parameterBytes(bytes, step, zeroSplit(op, i, layouts, mesh, step)), true,
      static_cast<int>(i));
  }
  // A result the backward reads only as its consumers' copies is counted
  // with those (the search's edges).
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    if (step.isSaved(r) && step.backwardUses(r).own)
      f(r, layouts.results[j],
        bytesOf(localType(cast<RankedTensorType>(r.getType()), mesh,
                          layouts.results[j])),
        false, -1);
  // The step peaks where the backward begins: every saved result is live,
  // and so is the gradient of the loss's input (the logits'), made in the
  // input's layout.
  if (step.training && isa<SoftmaxCrossEntropyOp, MseLossOp>(op))
    f(op->getOperand(0), layouts.operands[0],
      bytesOf(localType(cast<RankedTensorType>(op->getOperand(0).getType()),
                        mesh, layouts.operands[0])),
      false, 0);
}

void NodeCoster::addTransients(Operation *op,
                               ArrayRef<RankedTensorType> operands,
                               ArrayRef<RankedTensorType> results,
                               NodeTerms &t) const {
  // The gradients the backward of `op` reads and makes. A loss's gradient
  // of its input is held already (forEachHeld), and so is that of a value
  // the loss reads through reshapes (the same bytes).
  std::function<bool(Value)> isLossInput = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      if (isa<ReshapeOp>(user))
        return isLossInput(user->getResult(0));
      return isa<SoftmaxCrossEntropyOp, MseLossOp>(user) &&
             user->getOperand(0) == v;
    });
  };
  auto differentiable = [](Value v) {
    return isa<FloatType>(getElementTypeOrSelf(v.getType()));
  };
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    if (differentiable(r) && !isLossInput(r))
      t.gradientBytes += bytesOf(results[j]);
  // What the forward of `op` has live that is not saved: its results and
  // its operands (in its layouts: a redistributed copy, or a partial sum's
  // reduction, is made beside the producer's result).
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    if (!step.isSaved(r))
      t.forwardBytes += bytesOf(results[j]);
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (!isa<BlockArgument>(v) && !v.getDefiningOp<ConstantOp>() &&
        !step.isSaved(v))
      t.forwardBytes += bytesOf(operands[i]);
  // An operand a later forward op reads too: the gradient the backward of
  // that op made of it, and this op's part, live together until added.
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (differentiable(v) && !isParameter(v) && !isa<BlockArgument>(v) &&
        !v.getDefiningOp<ConstantOp>() && !isLossInput(v))
      t.gradientBytes +=
          bytesOf(operands[i]) *
          (llvm::any_of(v.getUsers(),
                        [&](Operation *user) {
                          return user != op && step.forward.contains(user) &&
                                 user->getBlock() == op->getBlock() &&
                                 op->isBeforeInBlock(user);
                        })
               ? 2.0
               : 1.0);
}

double NodeCoster::weightGradientGatherSeconds(
    Operation *op, ArrayRef<RankedTensorType> operands,
    const OpLayouts &layouts) {
  // The gradient of a batched matmul's 2-D weight flattens the input's
  // batch dimensions into the rows of one GEMM. A layout that splits any
  // of them but the outermost (a sequence split under a batch) does not
  // flatten locally: the partitioned backward gathers the input whole
  // over the axes that split them, and the search costs what runs.
  auto mm = dyn_cast<MatmulOp>(op);
  if (!mm || !step.training || mm.getTransposeLhs() || operands.size() != 2 ||
      operands[0].getRank() < 3 || operands[1].getRank() != 2)
    return 0;
  const layout::TensorLayout &lhs = layouts.operands[0];
  auto global = cast<RankedTensorType>(op->getOperand(0).getType());
  std::vector<int> axes;
  bool local = true, outer = false;
  for (int d = 0; d + 1 < lhs.rank(); ++d) {
    const std::vector<int> &split = lhs.dimAxes(d);
    if (!split.empty()) {
      if (outer)
        local = false;
      axes.insert(axes.end(), split.begin(), split.end());
    }
    outer |= global.getDimSize(d) > 1;
  }
  if (local)
    return 0;
  llvm::sort(axes);
  const std::vector<int64_t> &group = groups.group(axes);
  return cost::collectiveSeconds(
      profile, cost::CollectiveKind::AllGather,
      bytesOf(operands[0]) * static_cast<double>(group.size()), group);
}

NodeTerms NodeCoster::terms(Operation *op, const ShardingRule &rule,
                            const FactorAxes &axes, const OpLayouts &layouts) {
  NodeTerms t;
  SmallVector<RankedTensorType> operands, results;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    operands.push_back(localType(cast<RankedTensorType>(v.getType()), mesh,
                                 layouts.operands[i]));
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    results.push_back(localType(cast<RankedTensorType>(r.getType()), mesh,
                                layouts.results[j]));
  // The plan runs a bias add in its matmul's epilogue and a weight's
  // transpose as the GEMM's flag (loom-fuse-matmul-epilogue): their
  // forward passes cost nothing (the gradients' remain).
  double forward = workSeconds(op, operands, results, profile);
  double passes = step.recomputed.contains(op) ? 2.0 : 1.0;
  if (isFusedBiasAdd(op) || isFoldedTranspose(op))
    passes -= 1;
  t.computeSeconds = forward * passes;
  if (step.training)
    t.computeSeconds += backwardSeconds(op, operands, results, forward);
  // A cross-entropy split over its classes (vocabulary-parallel): the rows'
  // log-sum-exp is combined from the blocks' by an all_gather over the
  // class axes, once (the gradient reuses it), after a log-softmax over the
  // block. Charged conservatively as well with a row all_reduce's latency
  // (which an earlier form of the combine made): the searched plans of the
  // small models (tests pin them) stay as they were.
  if (isa<SoftmaxCrossEntropyOp>(op) &&
      !layouts.operands[0].dimAxes(1).empty()) {
    std::vector<int> classAxes = layouts.operands[0].dimAxes(1);
    llvm::sort(classAxes);
    double rowBytes = static_cast<double>(operands[0].getDimSize(0)) *
                      static_cast<double>(elementBytes(operands[0]));
    double blocks =
        static_cast<double>(layouts.operands[0].splitCount(mesh, 1));
    const std::vector<int64_t> &group = groups.group(classAxes);
    t.commSeconds +=
        cost::collectiveSeconds(profile, cost::CollectiveKind::AllGather,
                                rowBytes * blocks, group) +
        cost::collectiveSeconds(profile, cost::CollectiveKind::AllReduce,
                                rowBytes, group);
    t.computeSeconds += cost::computeSeconds(
        profile, {4.0 * static_cast<double>(operands[0].getNumElements()),
                  3.0 * bytesOf(operands[0]),
                  dtypeName(operands[0].getElementType()), "elementwise", ""});
  }
  t.commSeconds += weightGradientGatherSeconds(op, operands, layouts);
  forEachHeld(
      op, layouts, mesh, step, *this,
      [&](Value, const layout::TensorLayout &, double bytes, bool parameter,
          int operand) {
        t.memoryBytes +=
            bytes * (parameter ? step.stateShare : step.savedShare);
        if (parameter) {
          t.parameterBytes.push_back(
              {static_cast<unsigned>(operand), bytes * step.stateShare});
          return;
        }
        t.resultBytes += bytes * step.savedShare;
        if (operand >= 0)
          t.lossGradientBytes += bytes * step.savedShare;
      });
  if (!step.training)
    return t;
  addTransients(op, operands, results, t);
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    if (step.isRecomputedForBackward(r) && step.backwardUses(r).own)
      t.recomputedBytes += bytesOf(results[j]);
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    BlockArgument param = parameterOf(v);
    if (!param || isParameterCast(op))
      continue;
    // The optimizer update of the local parameter: it reads the parameter,
    // its gradient and its state, and writes the parameter and the state
    // (about ten operations per element for Adam).
    // With ZeRO, each device updates a 1/ways slice.
    ZeroSplit split = zeroSplit(op, i, layouts, mesh, step);
    int64_t ways = split.ways;
    double share = split.padding / static_cast<double>(ways);
    // The update is in the parameter's type, and so is the gradient's
    // reduction: under --precision the cast's gradient brings it back to
    // the master type first, where it sums with the parameter's other uses.
    RankedTensorType master = localType(cast<RankedTensorType>(param.getType()),
                                        mesh, layouts.operands[i]);
    double elements = static_cast<double>(operands[i].getNumElements());
    double bytes = bytesOf(master);
    t.computeSeconds += cost::computeSeconds(
        profile,
        {share * elements * (2.0 + 4.0 * step.optimizerStateFactor),
         share * bytesOf(master) * (3.0 + 2.0 * step.optimizerStateFactor),
         dtypeName(master.getElementType()), "elementwise", ""});
    // Each parameter's gradient sums over the work split on axes the
    // parameter does not index: one all-reduce over them. ZeRO
    // reduce-scatters it and all-gathers the updated slices instead (and
    // at level 3 gathers the parameter for the forward and the backward).
    std::vector<int> summed;
    for (size_t f = 0; f < axes.size() && f < rule.factors.size(); ++f) {
      bool indexed = llvm::any_of(rule.operands[i], [&](const auto &d) {
        return llvm::is_contained(d, static_cast<int>(f));
      });
      if (!indexed)
        summed.insert(summed.end(), axes[f].begin(), axes[f].end());
    }
    llvm::sort(summed);
    if (summed.empty())
      continue;
    const std::vector<int64_t> &group = groups.group(summed);
    if (ways == 1) {
      // Packed into a bucket with other gradients (loom-bucket-gradients):
      // its share of the bucket's latency.
      double latency = cost::collectiveSeconds(
          profile, cost::CollectiveKind::AllReduce, 0, group);
      double share =
          step.bucketBytes > 0 ? std::min(1.0, bytes / step.bucketBytes) : 1.0;
      t.commSeconds += cost::collectiveSeconds(
                           profile, cost::CollectiveKind::AllReduce, bytes,
                           group) -
                       (1.0 - share) * latency;
      continue;
    }
    double padded = bytes * split.padding;
    t.commSeconds +=
        cost::collectiveSeconds(profile, cost::CollectiveKind::ReduceScatter,
                                padded, group) +
        (step.zeroLevel == 3 ? 2.0 : 1.0) *
            cost::collectiveSeconds(profile, cost::CollectiveKind::AllGather,
                                    padded, group);
  }
  return t;
}

double NodeCoster::backwardSeconds(Operation *op,
                                   ArrayRef<RankedTensorType> operands,
                                   ArrayRef<RankedTensorType> results,
                                   double forwardSeconds) const {
  if (step.backward.empty())
    return 2.0 * forwardSeconds;
  // A weight's transpose the matmul takes as its GEMM flag: so does the
  // matmul making the weight's gradient.
  if (isFoldedTranspose(op))
    return 0;
  auto it = step.backward.find(op);
  if (it == step.backward.end())
    return 0;
  // The backward splits as the forward does: each backward op does the
  // forward's share of its work (of its flops, or of its bytes for an op
  // without arithmetic).
  auto globalTypes = [](TypeRange types, SmallVectorImpl<RankedTensorType> &out) {
    for (Type t : types) {
      auto r = dyn_cast<RankedTensorType>(t);
      if (!r)
        return false;
      out.push_back(r);
    }
    return true;
  };
  SmallVector<RankedTensorType> globalOperands, globalResults;
  if (!globalTypes(op->getOperandTypes(), globalOperands) ||
      !globalTypes(op->getResultTypes(), globalResults))
    return 2.0 * forwardSeconds;
  auto costOp = cast<CostOpInterface>(op);
  OpWork global = costOp.estimateWork(globalOperands, globalResults);
  OpWork local = costOp.estimateWork(operands, results);
  double share = global.flops > 0   ? local.flops / global.flops
                 : global.bytes > 0 ? local.bytes / global.bytes
                                    : 1.0;
  double seconds = 0;
  for (Operation *b : it->second) {
    // A batched matmul's 2-D weight gradient is made as a batch of products
    // summed over the batch; the partitioned program flattens the batch
    // into the rows of one GEMM (loom-partition), without the sum.
    if (auto sum = dyn_cast<ReduceSumOp>(b);
        sum && sum.getInput().getDefiningOp<MatmulOp>() &&
        llvm::is_contained(it->second, sum.getInput().getDefiningOp()))
      continue;
    auto backwardOp = dyn_cast<CostOpInterface>(b);
    SmallVector<RankedTensorType> bOperands, bResults;
    if (!backwardOp || !globalTypes(b->getOperandTypes(), bOperands) ||
        !globalTypes(b->getResultTypes(), bResults))
      continue;
    OpWork work = backwardOp.estimateWork(bOperands, bResults);
    std::string dtype =
        bResults.empty() ? "f32" : dtypeName(bResults.front().getElementType());
    seconds += cost::computeSeconds(profile, {work.flops * share,
                                              work.bytes * share, dtype,
                                              work.kernelClass, work.kernel});
  }
  return seconds;
}

std::vector<NodeCoster::MemoryItem>
NodeCoster::memoryItems(Operation *op, const OpLayouts &layouts) const {
  std::vector<MemoryItem> items;
  forEachHeld(op, layouts, mesh, step, *this,
              [&](Value v, const layout::TensorLayout &l, double bytes,
                  bool parameter, int) {
                std::string what;
                if (parameter) {
                  BlockArgument arg = parameterOf(v);
                  auto name = func.getArgAttrOfType<StringAttr>(
                      arg.getArgNumber(), LoomDialect::kParamAttrName);
                  what = "parameter '" + name.getValue().str() + "'";
                  if (step.training)
                    what += step.optimizerStateFactor > 0
                                ? " (with its gradient and optimizer state)"
                                : " (with its gradient)";
                } else {
                  what =
                      (v.getDefiningOp() == op ? "result of "
                                               : "gradient of the input of ") +
                      describeOp(op);
                }
                items.push_back({what, bytes, compactLayout(l, mesh)});
              });
  return items;
}

double localComputeSeconds(Operation *op, const cost::HardwareProfile &profile) {
  if (!isa<CostOpInterface>(op))
    return 0;
  SmallVector<RankedTensorType> operands, results;
  for (Type t : op->getOperandTypes())
    if (auto r = dyn_cast<RankedTensorType>(t))
      operands.push_back(r);
  for (Type t : op->getResultTypes())
    if (auto r = dyn_cast<RankedTensorType>(t))
      results.push_back(r);
  if (operands.size() != op->getNumOperands() ||
      results.size() != op->getNumResults())
    return 0;
  return workSeconds(op, operands, results, profile);
}

bool isCommunication(Operation *op) {
  return isa<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp>(op);
}

double collectiveOpSeconds(Operation *op, GroupCache &groups,
                           const cost::HardwareProfile &profile) {
  if (!isCommunication(op))
    return 0;
  double in = bytesOf(cast<RankedTensorType>(op->getOperand(0).getType()));
  double out = bytesOf(cast<RankedTensorType>(op->getResult(0).getType()));
  auto axis = [](int64_t a) { return std::vector<int>{static_cast<int>(a)}; };
  if (auto ar = dyn_cast<AllReduceOp>(op)) {
    std::vector<int> axes(ar.getAxes().begin(), ar.getAxes().end());
    return cost::collectiveSeconds(profile, cost::CollectiveKind::AllReduce, in,
                                   groups.group(axes));
  }
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    return cost::collectiveSeconds(profile,
                                   cost::CollectiveKind::ReduceScatter, in,
                                   groups.group(axis(rs.getAxis())));
  if (auto ag = dyn_cast<AllGatherOp>(op))
    return cost::collectiveSeconds(profile, cost::CollectiveKind::AllGather,
                                   out, groups.group(axis(ag.getAxis())));
  auto a2a = cast<AllToAllOp>(op);
  return cost::collectiveSeconds(profile, cost::CollectiveKind::AllToAll, in,
                                 groups.group(axis(a2a.getAxis())));
}

double opSeconds(Operation *op, GroupCache &groups,
                 const cost::HardwareProfile &profile) {
  return isCommunication(op) ? collectiveOpSeconds(op, groups, profile)
                             : localComputeSeconds(op, profile);
}

std::string compactLayout(const layout::TensorLayout &layout,
                          const layout::Mesh &mesh) {
  std::string s = "[";
  for (int d = 0; d < layout.rank(); ++d) {
    if (d)
      s += ",";
    const std::vector<int> &axes = layout.dimAxes(d);
    if (axes.empty())
      s += "-";
    for (size_t k = 0; k < axes.size(); ++k)
      s += (k ? "*" : "") + mesh.axisName(axes[k]);
  }
  s += "]";
  if (!layout.partialAxes().empty()) {
    s += "+sum(";
    for (size_t k = 0; k < layout.partialAxes().size(); ++k)
      s += (k ? "," : "") + mesh.axisName(layout.partialAxes()[k]);
    s += ")";
  }
  return s;
}

std::string compactLayouts(const OpLayouts &layouts, const layout::Mesh &mesh) {
  std::string s;
  for (size_t i = 0; i < layouts.operands.size(); ++i)
    s += (i ? " x " : "") + compactLayout(layouts.operands[i], mesh);
  s += " -> ";
  for (size_t j = 0; j < layouts.results.size(); ++j)
    s += (j ? ", " : "") + compactLayout(layouts.results[j], mesh);
  return s;
}

StringRef layerOf(StringRef node) {
  size_t second = node.find('/', 1);
  return second == StringRef::npos ? StringRef() : node.take_front(second);
}

std::string nodeName(Operation *op) {
  Location loc = op->getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (isa<NameLoc>(l)) {
        loc = l;
        break;
      }
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  return "";
}

cost::HardwareProfile profileForMesh(const cost::HardwareProfile &profile,
                                     const layout::Mesh &mesh, bool &grown) {
  cost::HardwareProfile p = profile;
  int64_t per = std::max<int64_t>(p.devicesPerNode, 1);
  int64_t needed = (mesh.numDevices() + per - 1) / per;
  grown = needed > p.nodes;
  p.nodes = std::max(p.nodes, needed);
  return p;
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return s;
}

} // namespace loom::sharding
