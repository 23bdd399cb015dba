//===- OptimizerSharding.cpp - ZeRO over the data-parallel axes -----------===//

#include "passes/sharding/OptimizerSharding.h"
#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"
#include "passes/sharding/PropagateSharding.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <tuple>

namespace loom {
#define GEN_PASS_DEF_SHARDOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom::sharding {

namespace {

int64_t localBytes(RankedTensorType global, const layout::Mesh &mesh,
                   const layout::TensorLayout &l) {
  return localType(global, mesh, l).getNumElements() * elementBytes(global);
}

/// Argument attributes to set, applied in one go: each setArgAttr rebuilds
/// the array of every argument's attributes, which over the thousands of
/// parameters and optimizer states of a large model made the pass
/// quadratic.
class ArgAttrUpdates {
public:
  void set(unsigned arg, StringRef name, Attribute value) {
    updates.push_back({arg, name, value});
  }
  void apply(func::FuncOp func) const {
    if (updates.empty())
      return;
    SmallVector<NamedAttrList> attrs(func.getNumArguments());
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (DictionaryAttr dict = func.getArgAttrDict(i))
        attrs[i].append(dict.getValue());
    for (const auto &[arg, name, value] : updates)
      attrs[arg].set(name, value);
    SmallVector<DictionaryAttr> dicts;
    for (NamedAttrList &list : attrs)
      dicts.push_back(list.getDictionary(func.getContext()));
    func.setAllArgAttrs(dicts);
  }

private:
  SmallVector<std::tuple<unsigned, StringRef, Attribute>> updates;
};

/// `type` with dimension `pad.dim` of `pad.extent`.
RankedTensorType paddedType(RankedTensorType type, const ZeroPadding &pad) {
  SmallVector<int64_t> shape(type.getShape());
  shape[pad.dim] = pad.extent;
  return RankedTensorType::get(shape, type.getElementType());
}

/// Sets `op`'s loom.sharding to what `layout` for its operand `index`
/// (or result, when `result`) implies, the partial axes given passed on
/// when the op is linear; false if that is not a valid sharding.
bool layOut(Operation *op, bool result, unsigned index,
            const layout::TensorLayout &layout, ArrayRef<int> partial,
            const layout::Mesh &mesh) {
  ShardingRule rule = cast<ShardingOpInterface>(op).getShardingRule();
  FactorAxes factors(rule.factors.size());
  if (!(result ? induceFromResult(rule, index, layout, factors)
               : induceFromOperand(rule, index, layout, factors)))
    return false;
  std::string error;
  if (rule.linear && !partial.empty()) {
    FactorAxes through = factors;
    through.emplace_back(partial.begin(), partial.end());
    if (deriveLayouts(rule, through, mesh, error)) {
      op->setAttr(LoomDialect::kShardingAttrName,
                  factorsToAttr(op->getContext(), through, mesh));
      return true;
    }
  }
  if (!deriveLayouts(rule, factors, mesh, error))
    return false;
  op->setAttr(LoomDialect::kShardingAttrName,
              factorsToAttr(op->getContext(), factors, mesh));
  return true;
}

/// The dimension of reshape `op`'s operand that its result dimension `dim`
/// is, when the reshape only adds or drops dimensions of size 1 and `dim`
/// is not one: padding that dimension then commutes with the reshape.
std::optional<int64_t> unitReshapeDim(Operation *op, int64_t dim) {
  ArrayRef<int64_t>
      in = cast<RankedTensorType>(op->getOperand(0).getType()).getShape(),
      out = cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  if (out[dim] == 1)
    return std::nullopt;
  SmallVector<int64_t> inDims, outDims;
  for (auto [d, n] : llvm::enumerate(in))
    if (n != 1)
      inDims.push_back(d);
  for (auto [d, n] : llvm::enumerate(out))
    if (n != 1)
      outDims.push_back(d);
  if (inDims.size() != outDims.size())
    return std::nullopt;
  std::optional<int64_t> found;
  for (auto [i, o] : llvm::zip(inDims, outDims)) {
    if (in[i] != out[o])
      return std::nullopt;
    if (o == dim)
      found = i;
  }
  return found;
}

/// Gives every use of padded parameter `update`'s but the update the
/// leading block of shape `logical`: a slice before the use, after the
/// casts and transposes the parameter goes through (retyped, each laid out
/// from what it reads), so that ZeRO-3 runs them on the shard and gathers
/// the compute precision. The slices are laid out as the parameter was
/// (`before`). One slice per use: ZeRO-3 gathers the parameter again for
/// the backward (loom-partition), and a slice shared by the forward and
/// the backward would keep the gathered block alive between them.
LogicalResult readLeadingBlock(Operation *update, const ZeroPadding &pad,
                               RankedTensorType logical,
                               const layout::TensorLayout &before,
                               const layout::Mesh &mesh) {
  Value param = update->getOperand(0);
  // `dim` is the padded dimension of the value used, `layout` its layout.
  struct Use {
    OpOperand *operand;
    int64_t dim;
    layout::TensorLayout layout;
  };
  SmallVector<Use> uses;
  for (OpOperand &use : param.getUses())
    if (use.getOwner() != update)
      uses.push_back({&use, pad.dim, before});
  while (!uses.empty()) {
    Use use = uses.pop_back_val();
    Operation *user = use.operand->getOwner();
    auto type = cast<RankedTensorType>(use.operand->get().getType());
    if (isa<CastOp, TransposeOp>(user)) {
      int64_t dim = use.dim;
      if (auto transpose = dyn_cast<TransposeOp>(user))
        dim = llvm::find(transpose.getPermutation(), use.dim) -
              transpose.getPermutation().begin();
      Value result = user->getResult(0);
      auto resultType = cast<RankedTensorType>(result.getType());
      result.setType(
          paddedType(resultType, {static_cast<int>(dim), pad.extent}));
      std::string error;
      std::optional<OpLayouts> l;
      if (layOut(user, /*result=*/false, 0, use.layout, {}, mesh))
        l = layoutsOf(user, mesh, error);
      if (!l)
        return user->emitOpError("cannot be laid out as ")
               << use.layout.toString(mesh) << " once padded";
      for (OpOperand &next : result.getUses())
        uses.push_back({&next, dim, l->results[0]});
      continue;
    }
    SmallVector<int64_t> sizes(type.getShape());
    sizes[use.dim] = logical.getDimSize(pad.dim);
    OpBuilder builder(user);
    int64_t rank = type.getRank();
    auto slice = SliceOp::create(
        builder, user->getLoc(), use.operand->get(),
        builder.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 0)),
        builder.getDenseI64ArrayAttr(sizes),
        builder.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 1)));
    if (!layOut(slice, /*result=*/false, 0, use.layout, {}, mesh))
      return user->emitOpError("cannot read the padded parameter as ")
             << use.layout.toString(mesh);
    // Recomputed with its user: the backward slices (and gathers) again
    // instead of keeping the forward's block.
    if (Attribute mark = user->getAttr(LoomDialect::kRecomputeAttrName))
      slice->setAttr(LoomDialect::kRecomputeAttrName, mark);
    use.operand->set(slice);
  }
  return success();
}

/// Pads the gradient padded parameter `update` reads with zeros where it is
/// made, before the casts, transposes and unit reshapes on its way to the
/// update (retyped), but not past a value read elsewhere: ZeRO 2 and 3 then
/// reduce-scatter it there (loom-partition), in the precision it is made
/// in, and only the slice moves on. The pad passes the gradient's partial
/// sums on.
LogicalResult padGradient(Operation *update, const ZeroPadding &pad,
                          const layout::Mesh &mesh) {
  SmallVector<Operation *> chain;
  SmallVector<int64_t> dims; // the padded dimension of each op's result
  int64_t dim = pad.dim;
  Value grad = update->getOperand(1);
  while (Operation *def = grad.getDefiningOp()) {
    if (!isa<CastOp, TransposeOp, ReshapeOp>(def) || !grad.hasOneUse())
      break;
    std::optional<int64_t> from = dim;
    if (auto transpose = dyn_cast<TransposeOp>(def))
      from = transpose.getPermutation()[dim];
    if (isa<ReshapeOp>(def))
      from = unitReshapeDim(def, dim);
    if (!from)
      break;
    chain.push_back(def);
    dims.push_back(dim);
    dim = *from;
    grad = def->getOperand(0);
  }
  layout::TensorLayout made = layout::TensorLayout::replicated(
      cast<RankedTensorType>(grad.getType()).getRank());
  if (auto result = dyn_cast<OpResult>(grad)) {
    std::string error;
    if (std::optional<OpLayouts> l = layoutsOf(result.getOwner(), mesh, error))
      made = l->results[result.getResultNumber()];
  }
  OpBuilder builder(update);
  builder.setInsertionPointAfterValue(grad);
  auto gradType = cast<RankedTensorType>(grad.getType());
  SmallVector<int64_t> low(gradType.getRank(), 0), high(gradType.getRank(), 0);
  high[dim] = pad.extent - gradType.getDimSize(dim);
  auto padded = PadOp::create(
      builder, update->getLoc(), grad, builder.getDenseI64ArrayAttr(low),
      builder.getDenseI64ArrayAttr(high), builder.getStringAttr("constant"),
      builder.getF32FloatAttr(0.0f));
  // Laid out as the gradient is made, else (a split of the padded
  // dimension) replicated: a valid sharding the propagation that follows
  // refines.
  if (!layOut(padded, /*result=*/false, 0, made, made.partialAxes(), mesh) &&
      !layOut(padded, /*result=*/false, 0,
              layout::TensorLayout::replicated(gradType.getRank()), {}, mesh))
    return update->emitOpError("cannot pad its gradient");
  Operation *first = chain.empty() ? update : chain.back();
  first->setOperand(chain.empty() ? 1 : 0, padded);
  std::string error;
  std::optional<OpLayouts> last = layoutsOf(padded, mesh, error);
  for (auto [op, resultDim] : llvm::reverse(llvm::zip(chain, dims))) {
    Value result = op->getResult(0);
    result.setType(paddedType(cast<RankedTensorType>(result.getType()),
                              {static_cast<int>(resultDim), pad.extent}));
    if (!last || !layOut(op, /*result=*/false, 0, last->results[0],
                         last->results[0].partialAxes(), mesh))
      return op->emitOpError("cannot carry the padded gradient");
    last = layoutsOf(op, mesh, error);
  }
  return success();
}

/// Pads the parameter `update` updates, and the optimizer state it reads,
/// with zeros as `pad` says (ZeroPadding): retypes the arguments, the
/// update's results and so the function's (the caller retypes the
/// function), gives the model the leading block of the parameter
/// (readLeadingBlock) and pads the gradient where it is made
/// (padGradient).
LogicalResult padUpdate(func::FuncOp func, Operation *update,
                        const ZeroPadding &pad,
                        const layout::TensorLayout &before,
                        const layout::Mesh &mesh, ArgAttrUpdates &argAttrs) {
  auto param = cast<BlockArgument>(update->getOperand(0));
  auto logical = cast<RankedTensorType>(param.getType());
  for (Value r : update->getResults())
    for (Operation *user : r.getUsers())
      if (!isa<func::ReturnOp>(user))
        return update->emitOpError(
                   "cannot be padded for optimizer sharding: its result is "
                   "used by ")
               << describeOp(user);
  Builder b(func.getContext());
  DenseI64ArrayAttr logicalAttr = b.getDenseI64ArrayAttr(logical.getShape());
  for (Value v : update->getOperands()) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &func.getBody().front() ||
        arg.getType() != logical ||
        (arg != param &&
         !func.getArgAttr(arg.getArgNumber(), LoomDialect::kStateAttrName)))
      continue;
    arg.setType(paddedType(logical, pad));
    argAttrs.set(arg.getArgNumber(), LoomDialect::kLogicalShapeAttrName,
                 logicalAttr);
  }
  for (Value r : update->getResults())
    r.setType(paddedType(cast<RankedTensorType>(r.getType()), pad));
  if (failed(readLeadingBlock(update, pad, logical, before, mesh)))
    return failure();
  return padGradient(update, pad, mesh);
}

} // namespace

FailureOr<ZeroReport> shardOptimizer(func::FuncOp func, int level) {
  if (level < 1 || level > 3)
    return func.emitError()
           << "ZeRO level " << level << " does not exist; use 1, 2 or 3";
  auto mesh = meshOf(func, "optimizer sharding");
  if (failed(mesh))
    return failure();
  const layout::Mesh &m = mesh->second;
  MLIRContext *ctx = func.getContext();
  Builder b(ctx);
  ZeroReport report;
  report.level = level;
  SmallVector<Operation *> updates;
  for (Operation &op : func.getBody().front().without_terminator())
    if (isOptimizerUpdate(&op))
      updates.push_back(&op);
  if (updates.empty())
    return func.emitError("optimizer sharding (ZeRO) needs a training step "
                          "(--train)");
  // The data-parallel axes: those a gradient is a partial sum over where it
  // is made (the axes that split the batch). A gradient that was summed
  // before it reached its update (through a transpose, say) is replicated
  // over them, and its slice is taken locally.
  // Under ZeRO 2 and 3 propagation sums a gradient before a transpose or
  // reshape on its way (so that the slice moves on): the axes are those of
  // the partial sum it is made as, looked for through them.
  std::vector<int> dataAxes;
  for (Operation *op : updates) {
    Value grad = op->getOperand(1);
    Operation *producer = grad.getDefiningOp();
    while (isMove(producer)) {
      std::string error;
      std::optional<OpLayouts> made = layoutsOf(producer, m, error);
      if (made && !made->results[0].partialAxes().empty())
        break;
      grad = producer->getOperand(0);
      producer = grad.getDefiningOp();
    }
    if (!producer)
      continue;
    std::string error;
    std::optional<OpLayouts> made = layoutsOf(producer, m, error);
    if (!made)
      return producer->emitOpError(error)
             << "; shard the step before its optimizer";
    const layout::TensorLayout &l =
        made->results[cast<OpResult>(grad).getResultNumber()];
    dataAxes.insert(dataAxes.end(), l.partialAxes().begin(),
                    l.partialAxes().end());
  }
  llvm::sort(dataAxes);
  dataAxes.erase(std::unique(dataAxes.begin(), dataAxes.end()), dataAxes.end());
  report.axes = dataAxes;

  ArgAttrUpdates argAttrs;
  for (Operation *opPtr : updates) {
    Operation &op = *opPtr;
    auto param = dyn_cast<BlockArgument>(op.getOperand(0));
    auto name = param ? func.getArgAttrOfType<StringAttr>(
                            param.getArgNumber(), LoomDialect::kParamAttrName)
                      : StringAttr();
    if (!name)
      return op.emitOpError("updates a value that is not a parameter");
    std::string error;
    std::optional<OpLayouts> layouts = layoutsOf(&op, m, error);
    if (!layouts)
      return op.emitOpError(error) << "; shard the step before its optimizer";
    const layout::TensorLayout &update = layouts->operands[0];
    std::vector<int> axes;
    for (int a : dataAxes)
      if (update.isUnused(a))
        axes.push_back(a);
    auto global = cast<RankedTensorType>(param.getType());
    std::optional<layout::TensorLayout> split =
        zeroLayout(update, axes, global.getShape(), m);
    std::optional<ZeroPadding> pad =
        split ? std::nullopt : zeroPadding(update, axes, global.getShape(), m);
    if (pad) {
      if (failed(padUpdate(func, &op, *pad, update, m, argAttrs)))
        return failure();
      global = paddedType(global, *pad);
      split = zeroLayout(update, axes, global.getShape(), m);
      report.padded.push_back(name.str());
    }
    if (!split) {
      report.whole.push_back(name.str());
      continue;
    }
    auto iface = cast<ShardingOpInterface>(&op);
    ShardingRule rule = iface.getShardingRule();
    FactorAxes factors(rule.factors.size());
    if (!induceFromOperand(rule, 0, *split, factors))
      return op.emitOpError("cannot split its update as ")
             << split->toString(m);
    std::optional<OpLayouts> splitLayouts =
        deriveLayouts(rule, factors, m, error);
    if (!splitLayouts)
      return op.emitOpError("cannot split its update: ") << error;
    op.setAttr(LoomDialect::kShardingAttrName, factorsToAttr(ctx, factors, m));

    int64_t whole = localBytes(global, m, update);
    int64_t slice = localBytes(global, m, *split);
    double saved = 0;
    for (auto [i, v] : llvm::enumerate(op.getOperands())) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg || arg.getOwner() != &func.getBody().front())
        continue;
      unsigned n = arg.getArgNumber();
      bool state = func.getArgAttr(n, LoomDialect::kStateAttrName) != nullptr;
      if (!state && !(arg == param && level == 3))
        continue;
      argAttrs.set(n, LoomDialect::kLayoutAttrName,
                   toAttr(mesh->first, splitLayouts->operands[i]));
      saved += static_cast<double>(whole - slice);
    }
    argAttrs.set(param.getArgNumber(), LoomDialect::kZeroAttrName,
                 b.getI64IntegerAttr(level));
    if (level >= 2)
      saved += static_cast<double>(whole - slice);
    report.savedBytes += saved;
    report.sharded.push_back(name.str());
  }
  argAttrs.apply(func);
  if (!report.padded.empty())
    func.setType(FunctionType::get(
        ctx, func.getBody().getArgumentTypes(),
        func.getBody().front().getTerminator()->getOperandTypes()));
  func->setAttr(LoomDialect::kZeroAttrName, b.getI64IntegerAttr(level));
  return report;
}

} // namespace loom::sharding

namespace {

/// `op` is a move (loom::sharding::isMove) of a parameter that optimizer
/// sharding split (its layout now says so), through moves alone.
bool derivesFromShardedParameter(func::FuncOp func, Operation *op) {
  if (!loom::sharding::isMove(op))
    return false;
  auto arg =
      dyn_cast<BlockArgument>(loom::sharding::moveSource(op->getOperand(0)));
  return arg && arg.getOwner() == &func.getBody().front() &&
         func.getArgAttr(arg.getArgNumber(), loom::LoomDialect::kZeroAttrName);
}

struct ShardOptimizerPass
    : public loom::impl::ShardOptimizerBase<ShardOptimizerPass> {
  using ShardOptimizerBase::ShardOptimizerBase;
  void runOnOperation() override;
  std::optional<loom::sharding::ZeroReport> report;
};

void ShardOptimizerPass::runOnOperation() {
  using namespace loom::sharding;
  func::FuncOp func = getOperation();
  int zero = level > 0 ? static_cast<int>(level) : zeroLevel(func);
  report.reset();
  if (zero <= 0) {
    markAllAnalysesPreserved();
    return;
  }
  // The layouts given before propagation, when it ran in this pipeline.
  std::optional<std::reference_wrapper<GivenShardings>> given =
      getCachedAnalysis<GivenShardings>();
  FailureOr<ZeroReport> done = shardOptimizer(func, zero);
  if (failed(done))
    return signalPassFailure();
  report = std::move(*done);
  if (repropagate.empty() || !given)
    return;
  // The updates now want split gradients: the backward ops (but those
  // whose layouts were given) are propagated again, so that a gradient
  // stays a partial sum up to its reduce-scatter instead of being
  // all-reduced on the way.
  // Under ZeRO-3 so is what the forward makes of a parameter by casts and
  // transposes: it then runs on the parameter's shard, the gather moves the
  // narrow type (half the bytes of gathering f32 under bf16), and the
  // backward gathers it again rather than keeping the whole of it
  // (loom-partition).
  Operation *loss = analyzeStep(func).loss;
  bool backward = false;
  for (Operation &op : func.getBody().front()) {
    bool redo =
        backward || (zero == 3 && derivesFromShardedParameter(func, &op));
    if (redo && !given->get().ops.contains(&op) && !isOptimizerUpdate(&op))
      op.removeAttr(loom::LoomDialect::kShardingAttrName);
    backward |= &op == loss;
  }
  if (failed(propagateShardings(func, repropagate)))
    signalPassFailure();
}

} // namespace

const loom::sharding::ZeroReport *
loom::sharding::shardOptimizerReport(Pass &pass) {
  if (pass.getTypeID() != TypeID::get<ShardOptimizerPass>())
    return nullptr;
  auto &shard = static_cast<ShardOptimizerPass &>(pass);
  return shard.report ? &*shard.report : nullptr;
}
