//===- Partition.cpp - From a sharded global graph to the SPMD program ----===//
//
// Walks the function once in program order, keeping for every global value
// its local value and layout. Each op is rebuilt on local operands after
// its operands are redistributed to the layouts its sharding needs; the
// redistribution steps come from the layout library's planner, one
// collective op per step.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/ShardingSupport.h"
#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <map>

namespace loom {
#define GEN_PASS_DEF_PARTITION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

struct Local {
  Value value;
  layout::TensorLayout layout;
};

class Partitioner {
public:
  Partitioner(func::FuncOp func, MeshAttr meshAttr, layout::Mesh mesh,
              bool recordLayouts)
      : func(func), meshAttr(meshAttr), mesh(std::move(mesh)),
        recordLayouts(recordLayouts) {}

  LogicalResult run();

private:
  /// `local` (of `global`, in `from`) redistributed to `to`.
  FailureOr<Value> redistribute(OpBuilder &b, Location loc, Value local,
                                RankedTensorType global,
                                const layout::TensorLayout &from,
                                const layout::TensorLayout &to);
  LogicalResult partitionOp(Operation *op);
  /// For a cross-entropy whose classes are split over mesh axes (Megatron's
  /// vocabulary-parallel loss): each row's log-sum-exp over all classes,
  /// from `x`, this rank's block of the logits `global` in layout `xl`: the
  /// blocks' log-sum-exps, all-gathered over the class axes, combined.
  /// Made once per logits value and layout (the loss's gradient reuses the
  /// loss's).
  FailureOr<Value> classLogSumExp(OpBuilder &b, Location loc, Value global,
                                  Value x, const layout::TensorLayout &xl);
  /// Records `local`'s layout on the op that makes it, for a kernel that
  /// reads where its operand's block lies (a function argument's layout is
  /// in the plan already).
  LogicalResult recordOperandBlock(Operation *user, Value local,
                                   const layout::TensorLayout &l);
  /// The ZeRO level `v` (an argument) was split by, 0 if none.
  int zeroLevelOf(Value v);
  /// With recordLayouts, or for an op whose values depend on an element's
  /// global index: `layouts` as `op`'s loom.layouts.
  void record(Operation *op, ArrayRef<layout::TensorLayout> layouts,
              bool always = false);

  func::FuncOp func;
  MeshAttr meshAttr;
  layout::Mesh mesh;
  const bool recordLayouts;
  /// Global value -> local value and its layout.
  llvm::DenseMap<Value, Local> locals;
  /// Global value -> its redistributions made so far, reused by later users
  /// (they come after, so they are dominated).
  llvm::DenseMap<Value, SmallVector<Local, 1>> copies;
  /// Global logits -> the log-sum-exps made for them, per layout.
  llvm::DenseMap<Value, SmallVector<Local, 1>> logSumExps;
  /// Global types of the arguments (they are retyped in place).
  llvm::DenseMap<Value, RankedTensorType> argGlobalTypes;
  /// Past the loss of a training step: ZeRO-3 parameters are gathered
  /// again rather than kept from the forward pass.
  bool inBackward = false;
  sharding::PlannerCache planners{mesh};
};

FailureOr<Value> Partitioner::redistribute(OpBuilder &b, Location loc,
                                           Value local, RankedTensorType global,
                                           const layout::TensorLayout &from,
                                           const layout::TensorLayout &to) {
  if (from == to)
    return local;
  std::vector<int64_t> shape(global.getShape().begin(),
                             global.getShape().end());
  int64_t bytes = sharding::elementBytes(global);
  std::string error;
  std::optional<layout::RedistributionPlan> plan =
      planners.plan(global, from, to, error);
  if (!plan)
    return emitError(loc) << "cannot redistribute " << global << " from "
                          << from.toString(mesh) << " to " << to.toString(mesh)
                          << ": " << error;
  layout::TensorLayout current = from;
  Value v = local;
  for (const layout::Step &step : plan->steps) {
    std::optional<layout::TensorLayout> next =
        layout::applyStep(mesh, current, step, shape, error);
    if (!next)
      return emitError(loc) << "redistribution step " << step.toString(mesh)
                            << " failed: " << error;
    RankedTensorType type = sharding::localType(global, mesh, *next);
    auto i64 = [&](int64_t x) { return b.getI64IntegerAttr(x); };
    IntegerAttr predicted = i64(static_cast<int64_t>(
        std::llround(layout::stepBytes(mesh, current, step, shape, bytes))));
    switch (step.kind) {
    case layout::StepKind::AllReduce: {
      SmallVector<int64_t> axes(step.axes.begin(), step.axes.end());
      llvm::sort(axes);
      v = AllReduceOp::create(b, loc, type, v, b.getDenseI64ArrayAttr(axes),
                              predicted);
      break;
    }
    case layout::StepKind::ReduceScatter:
      v = ReduceScatterOp::create(b, loc, type, v, i64(step.axis()),
                                  i64(step.dim), predicted);
      break;
    case layout::StepKind::AllGather: {
      auto gather = AllGatherOp::create(b, loc, type, v, i64(step.axis()),
                                        i64(step.dim), predicted);
      if (inBackward && zeroLevelOf(sharding::moveSource(local)) == 3)
        gather->setAttr(LoomDialect::kRegatherAttrName, b.getUnitAttr());
      v = gather;
      break;
    }
    case layout::StepKind::AllToAll:
      v = AllToAllOp::create(b, loc, type, v, i64(step.axis()), i64(step.dim),
                             i64(step.toDim), predicted);
      break;
    case layout::StepKind::LocalSplit:
      v = LocalSplitOp::create(b, loc, type, v, i64(step.axis()), i64(step.dim),
                               IntegerAttr());
      break;
    case layout::StepKind::MakePartial:
      v = MakePartialOp::create(b, loc, type, v, i64(step.axis()),
                                IntegerAttr());
      break;
    }
    current = *next;
    record(v.getDefiningOp(), current);
  }
  return v;
}

LogicalResult Partitioner::partitionOp(Operation *op) {
  auto iface = dyn_cast<ShardingOpInterface>(op);
  if (!iface || !op->hasAttr(LoomDialect::kShardingAttrName))
    return op->emitOpError("has no `loom.sharding`; run "
                           "loom-propagate-sharding before loom-partition");
  std::string error;
  std::optional<sharding::OpLayouts> layouts =
      sharding::layoutsOf(op, mesh, error);
  if (!layouts)
    return op->emitOpError("invalid `loom.sharding`: ") << error;

  OpBuilder b(op);
  // ZeRO 2 and 3 reduce-scatter a gradient where it is complete, not at
  // its update, so that only the slice lives until then; so is the gradient
  // of a parameter stored split over axes its gradient is not (a weight the
  // search split over the batch's axes): the whole gradients of every layer
  // would otherwise live together until the updates, where the search
  // counts the slices.
  bool update = sharding::isOptimizerUpdate(op);
  bool earlyGradient = update && zeroLevelOf(op->getOperand(0)) >= 2;
  SmallVector<Value> operands;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    const Local &in = locals.find(v)->second;
    const layout::TensorLayout &want = layouts->operands[i];
    auto &made = copies[v];
    auto copy =
        llvm::find_if(made, [&](const Local &c) { return c.layout == want; });
    if (in.layout == want || copy != made.end()) {
      operands.push_back(in.layout == want ? in.value : copy->value);
      continue;
    }
    RankedTensorType global = argGlobalTypes.lookup(v);
    if (!global)
      global = typeOf(v);
    OpBuilder at = b;
    // A parameter stored split (its own layout, not ZeRO-1's slice of a
    // replicated one) whose gradient is split further than it was made.
    auto storedSplit = [&] {
      if (locals.find(op->getOperand(0))->second.layout != want)
        return false;
      for (int d = 0; d < want.rank(); ++d)
        for (int axis : want.dimAxes(d))
          if (in.layout.dimOf(axis) != d)
            return true;
      return false;
    };
    if (update && i == 1 && (earlyGradient || storedSplit()))
      at.setInsertionPointAfterValue(in.value);
    FailureOr<Value> moved =
        redistribute(at, op->getLoc(), in.value, global, in.layout, want);
    if (failed(moved))
      return failure();
    made.push_back({*moved, want});
    operands.push_back(*moved);
  }
  // A cross-entropy split over the classes: its local op takes the rows'
  // log-sum-exp over all classes, combined from the blocks.
  bool classSplit = isa<SoftmaxCrossEntropyOp, SoftmaxCrossEntropyGradOp>(op) &&
                    !layouts->operands[0].dimAxes(1).empty();
  if (classSplit) {
    FailureOr<Value> lse = classLogSumExp(b, op->getLoc(), op->getOperand(0),
                                          operands[0], layouts->operands[0]);
    if (failed(lse))
      return failure();
    operands.push_back(*lse);
    if (isa<SoftmaxCrossEntropyOp>(op) &&
        failed(recordOperandBlock(op, operands[0], layouts->operands[0])))
      return failure();
  }
  SmallVector<Type> resultTypes;
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    resultTypes.push_back(
        sharding::localType(typeOf(r), mesh, layouts->results[j]));
  Operation *local = iface.buildLocalOp(b, operands, resultTypes);
  local->removeAttr(LoomDialect::kShardingAttrName);
  local->removeAttr(LoomDialect::kStrategyAttrName);
  local->removeAttr(LoomDialect::kGradIdAttrName);
  local->removeAttr(LoomDialect::kGradOfAttrName);
  record(local, layouts->results, /*always=*/classSplit);
  for (auto [j, r] : llvm::enumerate(op->getResults())) {
    Value v = local->getResult(j);
    if (layouts->meanDivisor > 1) {
      auto type = typeOf(v);
      if (!isa<FloatType>(type.getElementType()))
        return op->emitOpError("computes an integer mean over a split "
                               "dimension, which cannot be made exact");
      auto scalarType = RankedTensorType::get({}, type.getElementType());
      Value scale = ConstantOp::create(
          b, op->getLoc(),
          DenseElementsAttr::get(
              scalarType,
              b.getFloatAttr(type.getElementType(),
                             1.0 / static_cast<double>(layouts->meanDivisor))));
      v = MulOp::create(b, op->getLoc(), v, scale);
      record(v.getDefiningOp(), layouts->results[j]);
      record(scale.getDefiningOp(),
             layout::TensorLayout::replicated(/*rank=*/0));
    }
    locals[r] = {v, layouts->results[j]};
  }
  return success();
}

void Partitioner::record(Operation *op, ArrayRef<layout::TensorLayout> layouts,
                         bool always) {
  // Dropout draws its mask by the element's index in the global tensor:
  // the plan carries its result's layout, from which the runtime derives
  // where each rank's block lies (runtime/Kernel.h, GlobalBlock). So does a
  // class block of a cross-entropy (`always`).
  if (!recordLayouts && !always && !isa<DropoutOp>(op))
    return;
  SmallVector<Attribute> attrs;
  for (const layout::TensorLayout &l : layouts)
    attrs.push_back(sharding::toAttr(meshAttr, l));
  op->setAttr(LoomDialect::kResultLayoutsAttrName,
              ArrayAttr::get(op->getContext(), attrs));
}

FailureOr<Value> Partitioner::classLogSumExp(OpBuilder &b, Location loc,
                                             Value global, Value x,
                                             const layout::TensorLayout &xl) {
  auto &made = logSumExps[global];
  for (const Local &l : made)
    if (l.layout == xl)
      return l.value;
  RankedTensorType local = typeOf(x), globalType = typeOf(global);
  Type element = local.getElementType();
  int64_t rows = globalType.getDimSize(0), localRows = local.getDimSize(0);
  const std::vector<int> &rowAxes = xl.dimAxes(0), &classAxes = xl.dimAxes(1);
  int64_t blocks = xl.splitCount(mesh, 1);
  auto classDim = b.getDenseI64ArrayAttr({1});
  // The block's own row log-sum-exps from one log-softmax over the block
  // (x - log_softmax(x) is the block's log-sum-exp in every column; column
  // 0 is taken): a single block-sized temporary.
  Value logSoftmax = LogSoftmaxOp::create(b, loc, x, b.getI64IntegerAttr(1));
  auto firstColumn = [&](Value v) {
    return SliceOp::create(b, loc, v, b.getDenseI64ArrayAttr({0, 0}),
                           b.getDenseI64ArrayAttr({localRows, 1}),
                           b.getDenseI64ArrayAttr({1, 1}));
  };
  Value x0 = firstColumn(x);
  Value blockLse = SubOp::create(b, loc, x0, firstColumn(logSoftmax));
  // Gathered over the class axes ([rows, blocks], a few bytes per row),
  // the same on every rank; their log-sum-exp is the row's over all
  // classes.
  FailureOr<Value> gathered = redistribute(
      b, loc, blockLse, RankedTensorType::get({rows, blocks}, element),
      layout::TensorLayout::of({rowAxes, classAxes}),
      layout::TensorLayout::of({rowAxes, {}}));
  if (failed(gathered))
    return failure();
  Value m = ReduceMaxOp::create(b, loc, *gathered, classDim, b.getUnitAttr());
  Value rowMax = ReduceMaxOp::create(b, loc, *gathered, classDim, UnitAttr());
  Value sumExp = ReduceSumOp::create(
      b, loc, ExpOp::create(b, loc, SubOp::create(b, loc, *gathered, m)),
      classDim, UnitAttr());
  Value lse = AddOp::create(b, loc, rowMax, LogOp::create(b, loc, sumExp));
  made.push_back({lse, xl});
  return lse;
}

LogicalResult Partitioner::recordOperandBlock(Operation *user, Value local,
                                              const layout::TensorLayout &l) {
  auto result = dyn_cast<OpResult>(local);
  if (!result)
    return success();
  Operation *producer = result.getOwner();
  if (producer->getNumResults() == 1) {
    record(producer, l, /*always=*/true);
    return success();
  }
  auto recorded =
      producer->getAttrOfType<ArrayAttr>(LoomDialect::kResultLayoutsAttrName);
  if (recorded &&
      recorded[result.getResultNumber()] == sharding::toAttr(meshAttr, l))
    return success();
  return user->emitOpError("splits its classes, but the op making its "
                           "logits has several results and no recorded "
                           "layouts");
}

int Partitioner::zeroLevelOf(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &func.getBody().front())
    return 0;
  auto level = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                  LoomDialect::kZeroAttrName);
  return level ? static_cast<int>(level.getInt()) : 0;
}

LogicalResult Partitioner::run() {
  Block &body = func.getBody().front();
  // Arguments: retyped to their local types.
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return func.emitError()
             << "argument #" << arg.getArgNumber() << " is not a ranked tensor";
    auto attr = func.getArgAttrOfType<TensorLayoutAttr>(
        arg.getArgNumber(), LoomDialect::kLayoutAttrName);
    layout::TensorLayout l =
        attr ? sharding::toLayout(attr, meshAttr)
             : layout::TensorLayout::replicated(type.getRank());
    std::string error;
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    if (!l.verify(mesh, shape, error))
      return func.emitError()
             << "argument #" << arg.getArgNumber() << ": " << error;
    if (!attr)
      func.setArgAttr(arg.getArgNumber(), LoomDialect::kLayoutAttrName,
                      sharding::toAttr(meshAttr, l));
    argGlobalTypes[arg] = type;
    locals[arg] = {arg, l};
  }

  Operation *loss = sharding::analyzeStep(func).loss;
  // A backward reshape, transpose or cast runs right after the backward op
  // it reads. The training graph places it where the forward op it
  // differentiates was: a parameter's transpose or cast to the compute
  // precision sits at the top of the forward, so its gradient comes last,
  // and a weight gradient kept a partial sum through it would live whole
  // until then (ZeRO reduce-scatters it where it is complete).
  llvm::SmallPtrSet<Operation *, 32> backward;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (!backward.empty() || &op == loss) {
      Operation *def =
          sharding::isMove(&op) ? op.getOperand(0).getDefiningOp() : nullptr;
      if (def && backward.contains(def))
        op.moveAfter(def);
      backward.insert(&op);
    }
  }
  SmallVector<Operation *> globalOps;
  for (Operation &op : body.without_terminator())
    globalOps.push_back(&op);
  for (Operation *op : globalOps) {
    if (failed(partitionOp(op)))
      return failure();
    if (op != loss)
      continue;
    // ZeRO-3 gathers a parameter again for the backward, so that the
    // forward's gathered copy dies after its last forward use: forget the
    // gathered copies of the parameters and of what the forward made of
    // them on their shards (the cast to the compute precision, so that the
    // gather moves the narrow type; a matmul's transpose).
    inBackward = true;
    SmallVector<Value> regather;
    for (auto &entry : copies)
      if (zeroLevelOf(sharding::moveSource(entry.first)) == 3)
        regather.push_back(entry.first);
    for (Value v : regather)
      copies.erase(v);
  }

  // Results: replicated, or the layout of the argument an update replaces.
  Operation *terminator = body.getTerminator();
  OpBuilder b(terminator);
  SmallVector<Value> results;
  for (auto [j, v] : llvm::enumerate(terminator->getOperands())) {
    const Local &in = locals.find(v)->second;
    RankedTensorType global = argGlobalTypes.lookup(v);
    if (!global)
      global = typeOf(v);
    layout::TensorLayout target =
        layout::TensorLayout::replicated(global.getRank());
    if (auto index = func.getResultAttrOfType<IntegerAttr>(
            j, LoomDialect::kUpdatesAttrName))
      target = locals.find(func.getArgument(index.getInt()))->second.layout;
    FailureOr<Value> moved = redistribute(b, terminator->getLoc(), in.value,
                                          global, in.layout, target);
    if (failed(moved))
      return failure();
    results.push_back(*moved);
    if (!target.isReplicated())
      func.setResultAttr(j, LoomDialect::kLayoutAttrName,
                         sharding::toAttr(meshAttr, target));
  }
  terminator->setOperands(results);

  // The global ops are dead now; local types everywhere.
  for (Operation *op : llvm::reverse(globalOps)) {
    op->dropAllUses();
    op->erase();
  }
  for (BlockArgument arg : func.getArguments()) {
    const Local &l = locals.find(arg)->second;
    arg.setType(
        sharding::localType(argGlobalTypes.lookup(arg), mesh, l.layout));
  }
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 terminator->getOperandTypes()));
  func->setAttr(LoomDialect::kSpmdAttrName, UnitAttr::get(func.getContext()));
  return success();
}

struct PartitionPass : public loom::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func->hasAttr(LoomDialect::kSpmdAttrName)) {
      func.emitError("the function is already partitioned");
      return signalPassFailure();
    }
    auto mesh = sharding::meshOf(func, "loom-partition");
    if (failed(mesh))
      return signalPassFailure();
    Partitioner partitioner(func, mesh->first, mesh->second, recordLayouts);
    if (failed(partitioner.run()))
      signalPassFailure();
  }
};

} // namespace
