//===- BuildTrainingGraph.cpp - Loss, backward and optimizer --------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#include <cmath>

#define DEBUG_TYPE "loom-build-training-graph"

namespace loom {
#define GEN_PASS_DEF_BUILDTRAININGGRAPH
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

struct BuildTrainingGraphPass
    : public loom::impl::BuildTrainingGraphBase<BuildTrainingGraphPass> {
  using BuildTrainingGraphBase::BuildTrainingGraphBase;

  void runOnOperation() override {
    func::FuncOp func;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f.getSymName() == "main" && !f.isDeclaration())
        func = f;
    if (!func) {
      getOperation().emitError("no function @main to train");
      return signalPassFailure();
    }
    if (failed(build(func)))
      signalPassFailure();
  }

  /// Appends an argument with one attribute; returns it.
  BlockArgument addArgument(func::FuncOp func, Type type, StringRef attr,
                            Attribute value) {
    unsigned index = func.getNumArguments();
    OpBuilder b(func.getContext());
    NamedAttribute named(b.getStringAttr(attr), value);
    if (failed(func.insertArgument(index, type, b.getDictionaryAttr({named}),
                                   func.getLoc())))
      return nullptr;
    return func.getArgument(index);
  }

  /// The loss of `prediction` against `labels` (see the pass description);
  /// appends the ops it creates to `ops`, which backward() walks.
  Value buildLoss(OpBuilder &b, Location loc, Value prediction, Value labels,
                  SmallVectorImpl<Operation *> &ops) {
    Value result = buildLossOps(b, loc, prediction, labels);
    SmallVector<Operation *> created;
    for (Operation *op = result.getDefiningOp();
         op && op != prediction.getDefiningOp() && !llvm::is_contained(ops, op);
         op = op->getPrevNode())
      created.push_back(op);
    ops.append(created.rbegin(), created.rend());
    return result;
  }

  Value buildLossOps(OpBuilder &b, Location loc, Value prediction,
                     Value labels) {
    RankedTensorType predType = typeOf(prediction);
    Type element = predType.getElementType();
    if (loss != "cross_entropy")
      return MseLossOp::create(b, loc, prediction, labels, UnitAttr());
    int64_t classes = predType.getShape().back();
    int64_t rows = predType.getNumElements() / std::max<int64_t>(classes, 1);
    Value logits = prediction;
    if (predType.getRank() != 2)
      logits = ReshapeOp::create(
          b, loc, RankedTensorType::get({rows, classes}, element), prediction);
    Value flatLabels = labels;
    if (typeOf(labels).getRank() != 1)
      flatLabels = ReshapeOp::create(
          b, loc,
          RankedTensorType::get({rows}, IntegerType::get(b.getContext(), 64)),
          labels);
    // The mean over counted rows, as the summed loss over the count: both
    // split over the batch as partial sums, so a data-parallel loss needs
    // no special case. The count gets the smallest normal float added,
    // which leaves any count of at least 1 unchanged and makes a batch
    // whose rows are all ignored a loss of 0 (0 / tiny) instead of NaN.
    IntegerAttr ignore = b.getI64IntegerAttr(ignoreIndex);
    auto scalar = RankedTensorType::get({}, element);
    Value sum = SoftmaxCrossEntropyOp::create(b, loc, logits, flatLabels,
                                              Value(), ignore, b.getUnitAttr());
    Value count = LabelCountOp::create(b, loc, scalar, flatLabels, ignore);
    const llvm::fltSemantics &semantics =
        cast<FloatType>(element).getFloatSemantics();
    Value tiny = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            scalar, llvm::APFloat::getSmallestNormalized(semantics)));
    return DivOp::create(b, loc, sum, AddOp::create(b, loc, count, tiny));
  }

  /// Marks `forward` and the ops of its gradient, [begin, end), with the
  /// links of loom.grad_id / loom.grad_of: which forward value each operand
  /// and result of a gradient op stands for.
  void linkGradient(Operation *forward, Block::iterator begin,
                    Block::iterator end, ArrayRef<Value> resultGrads,
                    ArrayRef<Value> operandGrads) {
    llvm::DenseMap<Value, int64_t> standsFor;
    for (auto [i, v] : llvm::enumerate(forward->getOperands()))
      standsFor.try_emplace(v, 2 * i);
    for (auto [j, v] : llvm::enumerate(forward->getResults()))
      standsFor.try_emplace(v, 2 * j + 1);
    for (auto [j, v] : llvm::enumerate(resultGrads))
      if (v)
        standsFor.try_emplace(v, 2 * j + 1);
    for (auto [i, v] : llvm::enumerate(operandGrads))
      if (v)
        standsFor.try_emplace(v, 2 * i);
    bool linked = false;
    for (Operation &op : llvm::make_range(begin, end)) {
      if (isa<ConstantOp>(op) || !isa<ShardingOpInterface>(op))
        continue;
      SmallVector<int64_t> links{nextGradId};
      bool any = false;
      auto link = [&](Value v) {
        auto it = standsFor.find(v);
        links.push_back(it == standsFor.end() ? -1 : it->second);
        any |= it != standsFor.end();
      };
      llvm::for_each(op.getOperands(), link);
      llvm::for_each(op.getResults(), link);
      if (!any)
        continue;
      op.setAttr(LoomDialect::kGradOfAttrName,
                 DenseI64ArrayAttr::get(op.getContext(), links));
      linked = true;
    }
    if (linked)
      forward->setAttr(
          LoomDialect::kGradIdAttrName,
          Builder(forward->getContext()).getI64IntegerAttr(nextGradId++));
  }

  /// Reverse mode over `ops` (in program order) from d(loss) = seed, adding
  /// the parameters' gradients into `grads`.
  LogicalResult backward(OpBuilder &b, ArrayRef<Operation *> ops,
                         ArrayRef<BlockArgument> params, Value lossValue,
                         double seed, llvm::DenseMap<Value, Value> &grads) {
    llvm::DenseSet<Value> requiresGrad(params.begin(), params.end());
    // A bool result (a comparison's or a logic op's mask) is a constant of
    // the loss, as in PyTorch: nothing differentiates through it. Integer
    // results still do, so that a cast through integers on the path to a
    // parameter is an error rather than a silently missing gradient.
    for (Operation *op : ops)
      if (llvm::any_of(op->getOperands(),
                       [&](Value v) { return requiresGrad.contains(v); }))
        for (Value r : op->getResults())
          if (!typeOf(r).getElementType().isInteger(1))
            requiresGrad.insert(r);
    // Gradients of this pass's values; parameters accumulate into `grads`.
    llvm::DenseMap<Value, Value> local;
    auto type = cast<RankedTensorType>(lossValue.getType());
    local[lossValue] = ConstantOp::create(
        b, lossValue.getLoc(),
        DenseElementsAttr::get(type,
                               b.getFloatAttr(type.getElementType(), seed)));
    for (Operation *op : llvm::reverse(ops)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(local.lookup(r));
        any |= bool(resultGrads.back());
      }
      SmallVector<bool> needed;
      for (Value v : op->getOperands())
        needed.push_back(requiresGrad.contains(v));
      if (!any || llvm::none_of(needed, [](bool n) { return n; }))
        continue;
      auto differentiable = dyn_cast<GradientOpInterface>(op);
      if (!differentiable)
        return op->emitOpError("is not differentiable");
      SmallVector<Value> operandGrads;
      Block *block = b.getInsertionBlock();
      Block::iterator end = b.getInsertionPoint();
      Operation *before = end == block->begin() ? nullptr : &*std::prev(end);
      if (failed(differentiable.emitGradient(b, resultGrads, needed,
                                             operandGrads)))
        return failure();
      linkGradient(op,
                   before ? std::next(before->getIterator()) : block->begin(),
                   end, resultGrads, operandGrads);
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!g || !requiresGrad.contains(operand))
          continue;
        Value &slot = local[operand];
        slot = slot ? Value(AddOp::create(b, op->getLoc(), slot, g)) : g;
      }
    }
    for (BlockArgument p : params)
      if (Value g = local.lookup(p)) {
        Value &slot = grads[p];
        slot = slot ? Value(AddOp::create(b, p.getLoc(), slot, g)) : g;
      }
    return success();
  }

  /// Gradient accumulation: the graph holds one micro-batch; the step
  /// takes M of them, slices each out of the full-batch inputs, and runs
  /// forward, loss and backward per micro-batch before the next, so only
  /// one micro-batch's activations are live at a time. Gradients add up;
  /// each micro-batch's loss counts 1/M.
  /// Returns the step's loss.
  FailureOr<Value> buildMicroBatches(
      func::FuncOp func, OpBuilder &b, Location loc,
      ArrayRef<Operation *> templateOps, ArrayRef<BlockArgument> params,
      Value prediction, Value labels, llvm::DenseMap<Value, Value> &grads,
      SmallVectorImpl<std::pair<BlockArgument, Value>> &bufferUpdates) {
    Type element = typeOf(prediction).getElementType();
    auto scalarType = RankedTensorType::get({}, element);
    Value lossValue;
    SmallVector<BlockArgument> oldInputs;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), LoomDialect::kInputAttrName))
        oldInputs.push_back(arg);
    llvm::DenseMap<Value, Value> fullBatch;
    for (BlockArgument arg : oldInputs) {
      RankedTensorType t = typeOf(arg);
      if (t.getRank() < 1)
        return func.emitError("input #")
               << arg.getArgNumber()
               << " has no batch dimension to split into micro-batches";
      SmallVector<int64_t> shape(t.getShape());
      shape[0] *= microBatches;
      fullBatch[arg] =
          addArgument(func, RankedTensorType::get(shape, t.getElementType()),
                      LoomDialect::kInputAttrName,
                      func.getArgAttrOfType<StringAttr>(
                          arg.getArgNumber(), LoomDialect::kInputAttrName));
    }
    Value scale = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(scalarType,
                               b.getFloatAttr(element, 1.0 / microBatches)));
    // Buffers updated by the forward graph: micro-batch k reads what
    // micro-batch k - 1 wrote, as M forward passes in a row would.
    llvm::DenseMap<Value, Value> bufferNow;
    for (auto &[buffer, v] : bufferUpdates)
      bufferNow[buffer] = buffer;
    for (int64_t k = 0; k < microBatches; ++k) {
      IRMapping mapping;
      for (auto &[buffer, v] : bufferUpdates)
        if (bufferNow[buffer] != Value(buffer))
          mapping.map(Value(buffer), bufferNow[buffer]);
      for (BlockArgument arg : oldInputs) {
        RankedTensorType t = typeOf(arg);
        SmallVector<int64_t> starts(t.getRank(), 0), strides(t.getRank(), 1);
        starts[0] = k * t.getDimSize(0);
        mapping.map(arg, SliceOp::create(b, loc, fullBatch[arg],
                                         b.getDenseI64ArrayAttr(starts),
                                         b.getDenseI64ArrayAttr(t.getShape()),
                                         b.getDenseI64ArrayAttr(strides)));
      }
      SmallVector<Operation *> ops;
      for (Operation *op : templateOps) {
        ops.push_back(b.clone(*op, mapping));
        // Micro-batch k draws its rows of the full batch's dropout mask.
        auto dropout = dyn_cast<DropoutOp>(ops.back());
        if (dropout && k > 0)
          dropout.setIndexOffsetAttr(b.getI64IntegerAttr(
              dropout.getIndexOffset().value_or(0) +
              k * typeOf(dropout.getResult()).getNumElements()));
      }
      for (auto &[buffer, v] : bufferUpdates)
        bufferNow[buffer] = mapping.lookupOrDefault(v);
      Value microLoss = buildLoss(b, loc, mapping.lookup(prediction),
                                  mapping.lookup(labels), ops);
      if (failed(backward(b, ops, params, microLoss, lossScale / microBatches,
                          grads)))
        return failure();
      Value weighted = MulOp::create(b, loc, microLoss, scale);
      lossValue = lossValue ? Value(AddOp::create(b, loc, lossValue, weighted))
                            : weighted;
    }
    // The template and the micro-batch-sized inputs are no longer used (but
    // for the old return, which the caller replaces: its operand goes first,
    // or it would point into an erased op).
    for (Operation *op : llvm::reverse(templateOps)) {
      op->dropAllUses();
      op->erase();
    }
    for (auto &[buffer, v] : bufferUpdates)
      v = bufferNow[buffer];
    llvm::BitVector erase(func.getNumArguments());
    for (BlockArgument arg : oldInputs)
      erase.set(arg.getArgNumber());
    if (failed(func.eraseArguments(erase)))
      return func.emitError("cannot remove the micro-batch inputs");
    return lossValue;
  }

  /// One update per parameter, in argument order: appends each updated
  /// tensor to `results` and the argument it updates to `updates`.
  void buildUpdates(func::FuncOp func, OpBuilder &b, Location loc,
                    ArrayRef<BlockArgument> params,
                    const llvm::DenseMap<Value, Value> &grads, Value lr,
                    Value step, SmallVectorImpl<Value> &results,
                    SmallVectorImpl<int64_t> &updates) {
    auto f32 = [&](double v) { return b.getF32FloatAttr(v); };
    // Optimizer state arguments go on the block as they are made, and on
    // the function's type and argument attributes once at the end:
    // inserting each into the function rebuilds both, quadratic in the
    // parameters (a 96-layer GPT has 1541, with two states each).
    SmallVector<DictionaryAttr> stateAttrs;
    for (BlockArgument p : params) {
      Value g = grads.lookup(p);
      if (!g)
        continue; // the loss does not depend on it
      if (lossScale != 1.0) {
        // At the gradient's own location (its node's layer and stage).
        auto type = typeOf(g);
        g = MulOp::create(
            b, g.getLoc(), g,
            ConstantOp::create(
                b, g.getLoc(),
                DenseElementsAttr::get(
                    RankedTensorType::get({}, type.getElementType()),
                    b.getFloatAttr(type.getElementType(), 1.0 / lossScale))));
      }
      StringRef name = func.getArgAttrOfType<StringAttr>(
                               p.getArgNumber(), LoomDialect::kParamAttrName)
                           .getValue();
      Location ploc = NameLoc::get(b.getStringAttr(name), loc);
      auto state = [&](StringRef suffix) {
        stateAttrs.push_back(b.getDictionaryAttr(
            {b.getNamedAttr(LoomDialect::kStateAttrName,
                            b.getStringAttr(name + "::" + suffix))}));
        return func.getBody().front().addArgument(p.getType(), func.getLoc());
      };
      auto record = [&](Value v, BlockArgument of) {
        results.push_back(v);
        updates.push_back(of.getArgNumber());
      };
      if (optimizer == "sgd") {
        record(SgdUpdateOp::create(b, ploc, p, g, lr, f32(weightDecay)), p);
      } else if (optimizer == "momentum") {
        BlockArgument v = state("velocity");
        auto u = MomentumUpdateOp::create(
            b, ploc, p, g, v, lr, f32(momentum), f32(weightDecay),
            nesterov ? b.getUnitAttr() : UnitAttr());
        record(u.getNewParam(), p);
        record(u.getNewVelocity(), v);
      } else {
        BlockArgument m = state("m"), v = state("v");
        auto u = AdamUpdateOp::create(
            b, ploc, p, g, m, v, lr, step, f32(beta1), f32(beta2), f32(epsilon),
            f32(weightDecay),
            optimizer == "adamw" ? b.getUnitAttr() : UnitAttr());
        record(u.getNewParam(), p);
        record(u.getNewM(), m);
        record(u.getNewV(), v);
      }
    }
    SmallVector<DictionaryAttr> argAttrs;
    func.getAllArgAttrs(argAttrs);
    argAttrs.append(stateAttrs);
    func.setFunctionType(FunctionType::get(
        func.getContext(), func.getBody().front().getArgumentTypes(),
        func.getResultTypes()));
    func.setAllArgAttrs(argAttrs);
  }

  /// The next loom.grad_id.
  int64_t nextGradId = 0;

  LogicalResult build(func::FuncOp func) {
    MLIRContext *ctx = &getContext();
    nextGradId = 0;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (ret.getNumOperands() == 0)
      return func.emitError("@main returns nothing to train against");
    Value prediction = ret.getOperand(0);
    RankedTensorType predType = typeOf(prediction);
    Type element = predType.getElementType();
    if (!isa<FloatType>(element))
      return func.emitError("the model's output must be floating point");
    auto scalarType = RankedTensorType::get({}, element);

    // New arguments: labels, learning rate and step.
    Type labelsType;
    if (loss == "cross_entropy") {
      if (predType.getRank() < 1)
        return func.emitError("cross_entropy needs logits of rank >= 1");
      labelsType = RankedTensorType::get(predType.getShape().drop_back(),
                                         IntegerType::get(ctx, 64));
    } else if (loss == "mse") {
      labelsType = predType;
    } else {
      return func.emitError("unknown loss '")
             << loss << "'; use cross_entropy or mse";
    }
    if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "adam" &&
        optimizer != "adamw")
      return func.emitError("unknown optimizer '")
             << optimizer << "'; use sgd, momentum, adam or adamw";
    Value labels = addArgument(func, labelsType, LoomDialect::kInputAttrName,
                               StringAttr::get(ctx, "labels"));
    Value lr = addArgument(func, scalarType, LoomDialect::kHyperAttrName,
                           HyperAttr::get(ctx, Hyper::Lr));
    Value step = addArgument(func, scalarType, LoomDialect::kHyperAttrName,
                             HyperAttr::get(ctx, Hyper::Step));
    if (!labels || !lr || !step)
      return func.emitError("cannot add the training arguments");
    // Dropout draws its mask from the step (the identity without one).
    func.walk([&](DropoutOp dropout) {
      if (!dropout.getStep())
        dropout.getStepMutable().assign(step);
    });

    if (!(lossScale > 0) || !std::isfinite(lossScale))
      return func.emitError("the loss scale must be positive and finite, not ")
             << lossScale;
    {
      APFloat scale(lossScale);
      bool lostInfo = false;
      scale.convert(cast<FloatType>(element).getFloatSemantics(),
                    APFloat::rmNearestTiesToEven, &lostInfo);
      if (scale.isInfinity())
        return func.emitError("the loss scale ")
               << lossScale << " overflows the loss's type " << element;
    }

    OpBuilder b(ret);
    // The loss and its gradient are a node of their own ("loss"), so that
    // messages and strategy files can name them.
    Location loc = NameLoc::get(b.getStringAttr("loss"), ret.getLoc());
    SmallVector<BlockArgument> params;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), LoomDialect::kParamAttrName))
        params.push_back(arg);
    SmallVector<Operation *> templateOps;
    for (Operation &op : func.getBody().front())
      if (&op != ret.getOperation())
        templateOps.push_back(&op);
    // The forward graph's new values of buffers (training-mode batch
    // normalization's running statistics) stay results of the step.
    SmallVector<std::pair<BlockArgument, Value>> bufferUpdates;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (auto of = func.getResultAttrOfType<IntegerAttr>(
              i, LoomDialect::kUpdatesAttrName))
        bufferUpdates.emplace_back(func.getArgument(of.getInt()),
                                   ret.getOperand(i));

    llvm::DenseMap<Value, Value> grads;
    Value lossValue;
    if (microBatches <= 1) {
      SmallVector<Operation *> ops(templateOps);
      lossValue = buildLoss(b, loc, prediction, labels, ops);
      if (failed(backward(b, ops, params, lossValue, lossScale, grads)))
        return failure();
    } else {
      FailureOr<Value> accumulated =
          buildMicroBatches(func, b, loc, templateOps, params, prediction,
                            labels, grads, bufferUpdates);
      if (failed(accumulated))
        return failure();
      lossValue = *accumulated;
    }

    SmallVector<Value> results{lossValue};
    SmallVector<int64_t> updates{-1};
    buildUpdates(func, b, loc, params, grads, lr, step, results, updates);
    for (auto &[buffer, v] : bufferUpdates) {
      results.push_back(v);
      updates.push_back(buffer.getArgNumber());
    }

    func::ReturnOp::create(b, loc, results);
    ret.erase();
    func.setFunctionType(FunctionType::get(ctx, func.getArgumentTypes(),
                                           ValueRange(results).getTypes()));
    SmallVector<DictionaryAttr> resultAttrs{b.getDictionaryAttr({b.getNamedAttr(
        LoomDialect::kOutputAttrName, b.getStringAttr("loss"))})};
    for (size_t i = 1; i < results.size(); ++i)
      resultAttrs.push_back(b.getDictionaryAttr({b.getNamedAttr(
          LoomDialect::kUpdatesAttrName, b.getI64IntegerAttr(updates[i]))}));
    func.setAllResultAttrs(resultAttrs);
    LLVM_DEBUG(llvm::dbgs()
               << "training graph: " << params.size() << " parameters, "
               << results.size() - 1 << " updated tensors\n");
    return success();
  }
};

} // namespace
