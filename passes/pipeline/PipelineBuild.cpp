//===- PipelineBuild.cpp - The pipeline stages' functions -----------------===//
//
// The Pipeliner's last phase (PipelineImpl.h): once every op has its stage,
// each stage becomes a function of its own, `@main_stage<s>`: its
// arguments and the updates it returns, the once-per-step ops before the
// micro-batches, every micro-batch's forward and backward units in the
// schedule's order with a receive before an operand from another stage and
// a send after a result another stage uses, then the gradients' mean, their
// reductions and updates, and the loss. Last, the stages' sends and
// receives are played through to reject a schedule that deadlocks.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/StepCost.h"
#include "passes/pipeline/PipelineImpl.h"

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

#include <set>
#include <tuple>

using namespace mlir;

namespace loom::sharding::detail {

struct StageBuild {
  StageBuild(int64_t s, MLIRContext *ctx, int64_t M, int64_t V)
      : s(s), b(ctx), micro(M), forwardOps(V), backwardOps(V) {}
  /// The stage.
  const int64_t s;
  /// Its function's arguments, each with the argument of @main it stands
  /// for and its micro-batch (-1 for one that serves them all).
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  std::vector<std::pair<BlockArgument, int64_t>> argSources;
  /// Its results: the loss, and the updates of the stage's state (the
  /// values of @main they return).
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  SmallVector<Value> updates;
  /// Builds at the end of the function's body.
  OpBuilder b;
  /// @main's values in the function: once per step, and per micro-batch.
  IRMapping shared;
  std::vector<IRMapping> micro;
  /// 1/M, per element type, made where first needed.
  llvm::DenseMap<Type, Value> factors;
  /// The schedule's units: one micro-batch's forward or backward ops of
  /// one of the stage's chunks.
  std::vector<std::vector<Operation *>> forwardOps, backwardOps;
  /// The micro-batches' losses and gradients, summed as they come.
  Value lossSum;
  llvm::DenseMap<Value, Value> gradientSums;
};

LogicalResult Pipeliner::build(int64_t s, OpBuilder &builder) {
  StageBuild st(s, func.getContext(), M, V);
  stageArguments(st, builder);
  if (failed(stageResults(st, builder)))
    return failure();
  Block *entry = createStageFunc(st, builder);
  st.b.setInsertionPointToEnd(entry);
  if (failed(clonePre(st, entry)))
    return failure();
  groupChunks(st);

  // A mean cross-entropy divides by the labels counted: the step's mean
  // divides by all of the step's labels, so each micro-batch divides by
  // the count's mean over the micro-batches (counted up front from the
  // labels, which are arguments), and the micro-batch losses' mean and its
  // gradient are the batch's also when ignored labels fall unevenly.
  for (const std::vector<Operation *> &chunk : st.forwardOps)
    for (Operation *op : chunk)
      if (auto count = dyn_cast<LabelCountOp>(op))
        precount(st, count);

  if (failed(emitSchedule(st)))
    return failure();
  return finishStep(st);
}

/// Arguments: what the stage uses; an input once per micro-batch.
void Pipeliner::stageArguments(StageBuild &st, OpBuilder &builder) {
  MLIRContext *ctx = func.getContext();
  for (BlockArgument arg : func.getArguments()) {
    if (!needs.count(arg) || !needs[arg].count(st.s))
      continue;
    DictionaryAttr attrs = func.getArgAttrDict(arg.getArgNumber());
    if (!isInput(arg)) {
      st.argTypes.push_back(arg.getType());
      st.argAttrs.push_back(attrs);
      st.argSources.push_back({arg, -1});
      continue;
    }
    for (int64_t k = 0; k < M; ++k) {
      NamedAttrList list(attrs);
      if (M > 1)
        list.set(LoomDialect::kMicroBatchAttrName,
                 builder.getI64IntegerAttr(k));
      st.argTypes.push_back(arg.getType());
      st.argAttrs.push_back(list.getDictionary(ctx));
      st.argSources.push_back({arg, k});
    }
  }
}

/// Results: the loss, and the updates of the stage's state, each naming
/// the stage's argument it updates.
LogicalResult Pipeliner::stageResults(StageBuild &st, OpBuilder &builder) {
  MLIRContext *ctx = func.getContext();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  st.resultTypes.push_back(loss.getType());
  st.resultAttrs.push_back(func.getResultAttrDict(0));
  for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
    Value v = ret.getOperand(i);
    Operation *def = v.getDefiningOp();
    if (!def || !stageOf.count(def) || stageOf[def] != st.s)
      continue;
    auto of =
        func.getResultAttrOfType<IntegerAttr>(i, LoomDialect::kUpdatesAttrName);
    if (!of)
      return fail("result #" + std::to_string(i) +
                  " of the step is neither the loss nor an update");
    auto pos = llvm::find_if(st.argSources, [&](auto &src) {
      return src.first.getArgNumber() == of.getInt();
    });
    if (pos == st.argSources.end())
      return fail("result #" + std::to_string(i) +
                  " updates an argument stage " + std::to_string(st.s) +
                  " does not use");
    NamedAttrList list(func.getResultAttrDict(i));
    list.set(LoomDialect::kUpdatesAttrName,
             builder.getI64IntegerAttr(pos - st.argSources.begin()));
    st.resultTypes.push_back(v.getType());
    st.resultAttrs.push_back(list.getDictionary(ctx));
    st.updates.push_back(v);
  }
  return success();
}

/// The stage's function, with @main's attributes and the pipeline's; its
/// entry block.
Block *Pipeliner::createStageFunc(StageBuild &st, OpBuilder &builder) {
  auto stageFunc = func::FuncOp::create(
      builder, func.getLoc(), ("main_stage" + Twine(st.s)).str(),
      builder.getFunctionType(st.argTypes, st.resultTypes));
  for (NamedAttribute attr : func->getDiscardableAttrs())
    stageFunc->setAttr(attr.getName(), attr.getValue());
  SmallVector<NamedAttribute> pipelineAttrs{
      builder.getNamedAttr("stage", builder.getI64IntegerAttr(st.s)),
      builder.getNamedAttr("stages", builder.getI64IntegerAttr(P)),
      builder.getNamedAttr("micro_batches", builder.getI64IntegerAttr(M)),
      builder.getNamedAttr(
          "schedule",
          PipelineScheduleAttr::get(builder.getContext(), options.schedule)),
      builder.getNamedAttr("axis", builder.getStringAttr(options.axis))};
  if (V > 1)
    pipelineAttrs.push_back(
        builder.getNamedAttr("virtual_stages", builder.getI64IntegerAttr(V)));
  if (options.ownMeshes)
    pipelineAttrs.push_back(
        builder.getNamedAttr("own_mesh", builder.getUnitAttr()));
  stageFunc->setAttr(LoomDialect::kPipelineAttrName,
                     builder.getDictionaryAttr(pipelineAttrs));
  for (unsigned i = 0; i < st.argAttrs.size(); ++i)
    stageFunc.setArgAttrs(i, st.argAttrs[i]);
  for (unsigned i = 0; i < st.resultAttrs.size(); ++i)
    stageFunc.setResultAttrs(i, st.resultAttrs[i]);
  stageFuncs.push_back(stageFunc);
  return stageFunc.addEntryBlock();
}

/// Clones a once-per-step op, whose operands the stage must have.
LogicalResult Pipeliner::cloneShared(StageBuild &st, Operation &op) {
  for (Value v : op.getOperands())
    if (!st.shared.contains(v))
      return fail(describe(&op) + " on stage " + std::to_string(st.s) +
                  " uses a value the stage does not have");
  st.b.clone(op, st.shared);
  return success();
}

/// Maps @main's arguments to the function's, and clones the ops before the
/// micro-batches that the stage needs; every micro-batch sees them.
LogicalResult Pipeliner::clonePre(StageBuild &st, Block *entry) {
  for (auto [i, src] : llvm::enumerate(st.argSources)) {
    if (src.second < 0)
      st.shared.map(src.first, entry->getArgument(i));
    else
      st.micro[src.second].map(src.first, entry->getArgument(i));
  }
  for (Operation &op : body)
    if (pre.contains(&op) && llvm::any_of(op.getResults(), [&](Value r) {
          return needs.count(r) && needs[r].count(st.s);
        }))
      if (failed(cloneShared(st, op)))
        return failure();
  for (IRMapping &m : st.micro)
    for (auto [from, to] : st.shared.getValueMap())
      m.map(from, to);
  return success();
}

/// Sorts the stage's per-micro-batch ops into its chunks' forward and
/// backward units, and reports each chunk's layers.
void Pipeliner::groupChunks(StageBuild &st) {
  for (Operation &op : body)
    if (data.contains(&op) && stageOfOp(&op) == st.s)
      (forward.contains(&op) ? st.forwardOps : st.backwardOps)[stageOf[&op] / P]
          .push_back(&op);
  PipelineReport::Stage &info = report.stages[st.s];
  for (const std::vector<Operation *> &chunk : st.forwardOps) {
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
}

/// `v` times 1/M (the factor made at its first use, per element type).
Value Pipeliner::scale(StageBuild &st, Value v) {
  if (M == 1)
    return v;
  Type element = cast<RankedTensorType>(v.getType()).getElementType();
  Value &factor = st.factors[element];
  if (!factor)
    factor = ConstantOp::create(
        st.b, func.getLoc(),
        DenseElementsAttr::get(RankedTensorType::get({}, element),
                               st.b.getFloatAttr(element, 1.0 / M)));
  return MulOp::create(st.b, v.getLoc(), v, factor);
}

/// Counts the labels of every micro-batch up front, where the count
/// depends on the stage's labels only, and gives each micro-batch the
/// counts' mean (after the count's all-reduces).
void Pipeliner::precount(StageBuild &st, LabelCountOp count) {
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
      if (!data.contains(def) || stageOfOp(def) != st.s)
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
  for (IRMapping &m : st.micro) {
    for (Operation *op : ordered)
      st.b.clone(*op, m);
    Value c = m.lookup(total);
    sum = sum ? Value(AddOp::create(st.b, count.getLoc(), sum, c)) : c;
  }
  Value mean = scale(st, sum);
  for (IRMapping &m : st.micro)
    m.map(total, mean);
}

/// The micro-batches' units in the schedule's order.
LogicalResult Pipeliner::emitSchedule(StageBuild &st) {
  for (const search::ScheduleUnit &unit :
       search::scheduleOrder(scheduleName(), P, M, st.s, V)) {
    IRMapping &m = st.micro[unit.microBatch];
    for (Operation *op :
         (unit.backward ? st.backwardOps : st.forwardOps)[unit.chunk]) {
      // Counted up front.
      if (op->getNumResults() && llvm::all_of(op->getResults(), [&](Value r) {
            return m.contains(r);
          }))
        continue;
      if (failed(emitUnitOp(st, op, unit)))
        return failure();
    }
  }
  return success();
}

/// Micro-batch k of the step draws its rows of the full batch's dropout
/// mask: its global indices shifted by k times the elements of the global
/// (micro-batch) tensor, whose layout loom-partition recorded.
static void offsetDropout(DropoutOp dropout, int64_t microBatch) {
  auto type = cast<RankedTensorType>(dropout.getResult().getType());
  int64_t elements = type.getNumElements();
  if (TensorLayoutAttr layout = recordedLayout(dropout.getResult()))
    for (unsigned d = 0; d < layout.getRank(); ++d)
      elements *= layout.getSplitCount(d);
  dropout.setIndexOffsetAttr(IntegerAttr::get(
      IntegerType::get(dropout.getContext(), 64),
      dropout.getIndexOffset().value_or(0) + microBatch * elements));
}

/// One op of a unit: receives for its operands from other stages, its
/// clone, sends of its results to the stages that use them, and its loss
/// or gradient added to the micro-batches' sum.
LogicalResult Pipeliner::emitUnitOp(StageBuild &st, Operation *op,
                                    const search::ScheduleUnit &unit) {
  IRMapping &m = st.micro[unit.microBatch];
  int64_t s = st.s;
  OpBuilder &b = st.b;
  for (Value v : op->getOperands()) {
    if (m.contains(v))
      continue;
    Operation *def = v.getDefiningOp();
    if (!def || !data.contains(def) || stageOfOp(def) == s)
      return fail(describe(op) + " on stage " + std::to_string(s) +
                  " runs before its operand from " +
                  (def ? describe(def) : std::string("an argument")) +
                  " in the " + scheduleName() + " schedule");
    auto recv = RecvOp::create(b, def->getLoc(), v.getType(), stageOfOp(def),
                               tag(v, unit.microBatch, s));
    if (options.ownMeshes)
      recordLayout(recv, recordedLayout(v));
    m.map(v, recv);
  }
  Operation *copy = b.clone(*op, m);
  if (auto dropout = dyn_cast<DropoutOp>(copy); dropout && unit.microBatch)
    offsetDropout(dropout, unit.microBatch);
  for (auto [r, c] : llvm::zip(op->getResults(), copy->getResults())) {
    if (auto it = crossTo.find(r); it != crossTo.end())
      for (int64_t dst : it->second) {
        SendOp::create(b, op->getLoc(), c, dst, tag(r, unit.microBatch, dst));
        ++report.stages[s].sends;
      }
    if (r == loss)
      st.lossSum = st.lossSum
                       ? Value(AddOp::create(b, func.getLoc(), st.lossSum, c))
                       : Value(c);
    if (gradients.contains(r)) {
      Value &sum = st.gradientSums[r];
      sum = sum ? Value(AddOp::create(b, op->getLoc(), sum, c)) : Value(c);
    }
  }
  return success();
}

/// Once per step: the gradients' mean over the micro-batches, their
/// reductions and the updates; the loss, sent from its stage to the others.
LogicalResult Pipeliner::finishStep(StageBuild &st) {
  int64_t s = st.s;
  OpBuilder &b = st.b;
  Location loc = func.getLoc();
  for (Value g : gradients)
    if (stageOfOp(g.getDefiningOp()) == s)
      st.shared.map(g, scale(st, st.gradientSums.lookup(g)));
  for (Operation &op : body)
    if ((reductions.contains(&op) || post.contains(&op)) && stageOf[&op] == s)
      if (failed(cloneShared(st, op)))
        return failure();
  Value stageLoss;
  if (s == lossStage) {
    stageLoss = scale(st, st.lossSum);
    for (int64_t dst = 0; dst < P; ++dst)
      if (dst != s) {
        SendOp::create(b, loc, stageLoss, dst, lossTag(dst));
        ++report.stages[s].sends;
      }
  } else {
    stageLoss = RecvOp::create(b, loc, loss.getType(), lossStage, lossTag(s));
  }
  SmallVector<Value> results{stageLoss};
  for (Value v : st.updates)
    results.push_back(st.shared.lookup(v));
  auto ret = cast<func::ReturnOp>(body.getTerminator());
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
      return fail("the " + scheduleName() + " schedule deadlocks: stage " +
                  std::to_string(s) + " waits for tag " +
                  std::to_string(events[s][next[s]].tag) + " from stage " +
                  std::to_string(events[s][next[s]].peer));
  return success();
}

} // namespace loom::sharding::detail
