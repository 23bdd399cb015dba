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
