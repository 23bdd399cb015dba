//===- LoomDialect.cpp - The loom dialect and its annotation checks -------===//

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace loom;

#include "dialects/LoomDialect.cpp.inc"
#include "dialects/LoomInterfaces.cpp.inc"

namespace {
/// Gives meshes a short alias (`#mesh`) in printed IR.
struct LoomOpAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (isa<MeshAttr>(attr)) {
      os << "mesh";
      return AliasResult::OverridableAlias;
    }
    return AliasResult::NoAlias;
  }
};
} // namespace

void LoomDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/LoomOps.cpp.inc"
      >();
  addInterfaces<LoomOpAsmInterface>();
}

/// The mesh of the function enclosing `op`, if it has one.
static MeshAttr getEnclosingMesh(Operation *op) {
  for (Operation *p = op; p; p = p->getParentOp())
    if (auto mesh = p->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName))
      return mesh;
  return {};
}

/// Checks one side (operands or results) of a strategy against its values.
static LogicalResult verifyStrategyEntries(Operation *op, StringRef side,
                                           ArrayRef<DenseI64ArrayAttr> entries,
                                           ValueRange values, MeshAttr mesh) {
  SmallVector<RankedTensorType> tensors;
  for (Value v : values)
    if (auto t = dyn_cast<RankedTensorType>(v.getType()))
      tensors.push_back(t);
  if (entries.size() != tensors.size())
    return op->emitOpError() << "strategy gives " << entries.size() << " "
                             << side << " entries but the op has "
                             << tensors.size() << " tensor " << side << "s";
  for (auto [i, counts, type] : llvm::enumerate(entries, tensors)) {
    if (counts.size() != type.getRank())
      return op->emitOpError()
             << "strategy " << side << " entry #" << i << " has "
             << counts.size() << " counts but " << side << " #" << i
             << " has rank " << type.getRank();
    // Saturating product: counts come from user IR.
    int64_t product = 1;
    for (auto [d, c] : llvm::enumerate(counts.asArrayRef())) {
      if (type.getDimSize(d) % c != 0)
        return op->emitOpError()
               << "strategy splits dimension " << d << " of " << side << " #"
               << i << " (size " << type.getDimSize(d) << ") " << c
               << " ways, which does not divide it";
      if (__builtin_mul_overflow(product, c, &product))
        product = INT64_MAX;
    }
    if (mesh && product > mesh.getNumDevices())
      return op->emitOpError()
             << "strategy " << side << " entry #" << i << " splits over "
             << product << " devices but the mesh has " << mesh.getNumDevices();
    if (mesh && mesh.getNumDevices() % product != 0)
      return op->emitOpError()
             << "strategy " << side << " entry #" << i << " splits over "
             << product << " devices, which does not divide the mesh's "
             << mesh.getNumDevices();
  }
  return success();
}

static LogicalResult verifyStrategyOnOp(Operation *op, StrategyAttr strategy) {
  MeshAttr mesh = getEnclosingMesh(op);
  if (failed(verifyStrategyEntries(op, "operand", strategy.getInputs(),
                                   op->getOperands(), mesh)))
    return failure();
  if (strategy.getOutputs().empty())
    return success();
  return verifyStrategyEntries(op, "result", strategy.getOutputs(),
                               op->getResults(), mesh);
}

/// Checks `loom.result_layouts`: one layout per result, of the result's rank.
static LogicalResult verifyResultLayoutsAttr(Operation *op, NamedAttribute attr,
                                             bool isFunctionOrModule) {
  StringRef name = attr.getName().getValue();
  auto layouts = dyn_cast<ArrayAttr>(attr.getValue());
  if (isFunctionOrModule || !layouts || layouts.size() != op->getNumResults() ||
      !llvm::all_of(layouts, llvm::IsaPred<TensorLayoutAttr>))
    return op->emitError() << "'" << name
                           << "' must be an array of #loom.layout, one "
                              "per result of the op";
  for (auto [layout, result] : llvm::zip(layouts, op->getResults())) {
    auto tensor = dyn_cast<RankedTensorType>(result.getType());
    if (!tensor || cast<TensorLayoutAttr>(layout).getRank() != tensor.getRank())
      return op->emitError() << "'" << name
                             << "': a layout's rank differs from its "
                                "result's";
  }
  return success();
}

/// Checks `loom.pipeline`, the dictionary a stage function carries: each
/// entry by name, so that a missing or misspelt one says which.
static LogicalResult verifyPipelineAttr(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
  if (!isa<FunctionOpInterface>(op) || !dict)
    return op->emitError()
           << "'" << name
           << "' must be a dictionary {stage, stages, micro_batches, "
              "schedule, optional axis, virtual_stages and own_mesh} on a "
              "function";
  auto integer = [&](StringRef key, int64_t least) {
    auto v = dict.getAs<IntegerAttr>(key);
    return v && !v.getType().isInteger(1) && v.getInt() >= least;
  };
  for (StringRef key : {"stage", "stages", "micro_batches"})
    if (!integer(key, 0))
      return op->emitError() << "'" << name << "' needs '" << key
                             << "', a non-negative integer";
  if (!dict.getAs<PipelineScheduleAttr>("schedule"))
    return op->emitError() << "'" << name
                           << "' needs 'schedule', a #loom.schedule (gpipe, "
                              "1f1b or interleaved)";
  for (NamedAttribute entry : dict) {
    StringRef key = entry.getName().getValue();
    if (key == "stage" || key == "stages" || key == "micro_batches" ||
        key == "schedule")
      continue;
    if (key == "virtual_stages" ? !integer(key, 1)
        : key == "axis"         ? !isa<StringAttr>(entry.getValue())
        : key == "own_mesh"     ? !isa<UnitAttr>(entry.getValue())
                                : true)
      return op->emitError()
             << "'" << name << "': unknown or ill-typed entry '" << key
             << "' (optional: axis, a string; virtual_stages, an integer "
                ">= 1; own_mesh, a unit)";
  }
  return success();
}

/// Checks `loom.sharding` against the op's sharding rule: one axis list per
/// factor, plus one for partial axes when the rule is linear.
static LogicalResult verifyShardingAttr(Operation *op, NamedAttribute attr,
                                        bool isFunctionOrModule) {
  StringRef name = attr.getName().getValue();
  if (isFunctionOrModule)
    return op->emitError() << "'" << name << "' belongs on an op";
  auto factors = dyn_cast<ArrayAttr>(attr.getValue());
  auto iface = dyn_cast<ShardingOpInterface>(op);
  if (!factors || !iface)
    return op->emitError() << "'" << name
                           << "' must be an array (one entry per factor) "
                              "on an op with a sharding rule";
  ShardingRule rule = iface.getShardingRule();
  size_t numFactors = rule.factors.size();
  if (factors.size() != numFactors &&
      !(rule.linear && factors.size() == numFactors + 1))
    return op->emitError() << "'" << name << "' has " << factors.size()
                           << " entries; the op's sharding rule has "
                           << numFactors << " factors"
                           << (rule.linear ? " (and may add partial axes)"
                                           : "");
  for (Attribute f : factors) {
    auto axes = dyn_cast<ArrayAttr>(f);
    if (!axes || !llvm::all_of(axes, llvm::IsaPred<StringAttr>))
      return op->emitError()
             << "'" << name << "' entries must be arrays of axis names";
  }
  return success();
}

/// Checks `loom.grad_of`: the forward op's id, then one link per operand and
/// per result.
static LogicalResult verifyGradOfAttr(Operation *op, NamedAttribute attr,
                                      bool isFunctionOrModule) {
  StringRef name = attr.getName().getValue();
  auto links = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (isFunctionOrModule || !links ||
      links.size() !=
          static_cast<int64_t>(1 + op->getNumOperands() + op->getNumResults()))
    return op->emitError()
           << "'" << name
           << "' must be an i64 array on an op: the forward op's id, then "
              "one entry per operand and per result";
  if (llvm::any_of(links.asArrayRef(), [](int64_t v) { return v < -1; }))
    return op->emitError() << "'" << name << "' entries must be -1 or more";
  return success();
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  bool isFunctionOrModule = isa<FunctionOpInterface, ModuleOp>(op);
  if (name == kMeshAttrName) {
    if (!isFunctionOrModule)
      return op->emitError()
             << "'" << name << "' belongs on a function or module";
    if (!isa<MeshAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a #loom.mesh";
    return success();
  }
  if (name == kSourceAttrName || name == kOpsetAttrName) {
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name << "' belongs on a module";
    if (name == kSourceAttrName ? !isa<StringAttr>(attr.getValue())
                                : !isa<IntegerAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be "
             << (name == kSourceAttrName ? "a string" : "an integer");
    return success();
  }
  if (name == kStrategyAttrName || name == kStageAttrName ||
      name == kRecomputeAttrName || name == kRecomputedAttrName) {
    if (isFunctionOrModule)
      return op->emitError()
             << "'" << name << "' belongs on an op, not a function or module";
  }
  if (name == kStrategyAttrName) {
    auto strategy = dyn_cast<StrategyAttr>(attr.getValue());
    if (!strategy)
      return op->emitError() << "'" << name << "' must be a #loom.strategy";
    return verifyStrategyOnOp(op, strategy);
  }
  if (name == kStageAttrName) {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    if (!stage || stage.getType().isInteger(1) || stage.getValue().isNegative())
      return op->emitError()
             << "'" << name << "' must be a non-negative integer";
    return success();
  }
  if (name == kSearchAttrName) {
    if (!isa<FunctionOpInterface>(op) || !isa<DictionaryAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a dictionary on a function";
    return success();
  }
  if (name == kZeroAttrName) {
    auto level = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !level ||
        level.getType().isInteger(1) || level.getInt() < 0 ||
        level.getInt() > 3)
      return op->emitError()
             << "'" << name << "' must be an integer from 0 to 3 on a function";
    return success();
  }
  if (name == kRegatherAttrName) {
    if (!isa<AllGatherOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a unit attribute on loom.all_gather";
    return success();
  }
  if (name == kResultLayoutsAttrName)
    return verifyResultLayoutsAttr(op, attr, isFunctionOrModule);
  if (name == kPipelineAttrName)
    return verifyPipelineAttr(op, attr);
  if (name == kLayerStagesAttrName) {
    auto stages = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!stages || !isa<FunctionOpInterface>(op))
      return op->emitError()
             << "'" << name << "' must be a dictionary on a function";
    for (NamedAttribute layer : stages) {
      auto stage = dyn_cast<IntegerAttr>(layer.getValue());
      if (!stage || stage.getInt() < 0)
        return op->emitError()
               << "'" << name << "': layer '" << layer.getName().getValue()
               << "' must have a non-negative integer stage";
    }
    return success();
  }
  if (name == kSpmdAttrName) {
    if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a unit attribute on a function";
    return success();
  }
  if (name == kShardingAttrName)
    return verifyShardingAttr(op, attr, isFunctionOrModule);
  if (name == kGradIdAttrName) {
    auto id = dyn_cast<IntegerAttr>(attr.getValue());
    if (isFunctionOrModule || !id || id.getType().isInteger(1) ||
        id.getValue().isNegative())
      return op->emitError()
             << "'" << name << "' must be a non-negative integer on an op";
    return success();
  }
  if (name == kGradOfAttrName)
    return verifyGradOfAttr(op, attr, isFunctionOrModule);
  if (name == kRecomputeAttrName || name == kRecomputedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a unit attribute";
    return success();
  }
  return op->emitError() << "unknown loom annotation '" << name << "'";
}

/// Checks a `loom.layout` on a function argument or result of type `type`.
static LogicalResult verifyLayoutOn(Operation *op, StringRef what,
                                    unsigned index, Attribute attr, Type type) {
  auto layout = dyn_cast<TensorLayoutAttr>(attr);
  if (!layout)
    return op->emitError() << "'" << LoomDialect::kLayoutAttrName
                           << "' must be a #loom.layout";
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return op->emitError() << "'" << LoomDialect::kLayoutAttrName
                           << "' is only valid on a ranked tensor " << what;
  if (auto mesh = op->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName))
    if (layout.getMesh() != mesh)
      return op->emitError() << what << " #" << index
                             << ": the layout's mesh differs from the "
                                "function's loom.mesh";
  // In a partitioned (SPMD) function the types are local: only the rank
  // can be checked.
  if (op->hasAttr(LoomDialect::kSpmdAttrName)) {
    if (layout.getRank() != tensor.getRank())
      return op->emitError() << what << " #" << index
                             << ": the layout's rank differs from the type's";
    return success();
  }
  return layout.verifyForShape(tensor.getShape(), [&] {
    return op->emitError() << what << " #" << index << ": ";
  });
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  // Declarations have no entry block: take the type from the signature.
  Type argType;
  if (auto func = dyn_cast<FunctionOpInterface>(op))
    argType = func.getArgumentTypes()[argIndex];
  else
    argType = op->getRegion(regionIndex).getArgument(argIndex).getType();
  if (name == kLayoutAttrName)
    return verifyLayoutOn(op, "argument", argIndex, attr.getValue(), argType);
  if (name == kHyperAttrName) {
    auto type = dyn_cast<RankedTensorType>(argType);
    if (!isa<HyperAttr>(attr.getValue()) || !type || type.getRank() != 0)
      return op->emitError() << "'" << name
                             << "' must be a #loom.hyper (lr or step) on a "
                                "scalar argument";
    return success();
  }
  if (name == kMicroBatchAttrName) {
    auto k = dyn_cast<IntegerAttr>(attr.getValue());
    if (!k || k.getType().isInteger(1) || k.getInt() < 0)
      return op->emitError()
             << "'" << name << "' must be a non-negative integer";
    return success();
  }
  if (name == kInputAttrName || name == kParamAttrName ||
      name == kBufferAttrName || name == kStateAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a string";
    return success();
  }
  if (name == kZeroAttrName) {
    auto level = dyn_cast<IntegerAttr>(attr.getValue());
    if (!level || level.getType().isInteger(1) || level.getInt() < 1 ||
        level.getInt() > 3)
      return op->emitError()
             << "'" << name
             << "' must be an integer from 1 to 3 on an argument";
    return success();
  }
  auto fn = dyn_cast<FunctionOpInterface>(op);
  auto logical = fn ? fn.getArgAttrOfType<DenseI64ArrayAttr>(
                          argIndex, kLogicalShapeAttrName)
                    : DenseI64ArrayAttr();
  if (name == kLogicalShapeAttrName) {
    // Checked against the global type before partitioning; after it, the
    // argument's type is one device's and only the rank is checked.
    auto type = dyn_cast<RankedTensorType>(argType);
    bool valid = logical && type && logical.size() == type.getRank();
    bool spmd = fn && fn->hasAttr(kSpmdAttrName);
    for (int64_t d = 0; valid && d < type.getRank(); ++d)
      valid = logical[d] >= 0 && (spmd || logical[d] <= type.getDimSize(d));
    if (!valid)
      return op->emitError()
             << "'" << name << "' of argument #" << argIndex
             << " must be a shape of the argument's rank, each dimension at "
                "most the argument's";
    return success();
  }
  if (name == kInitAttrName) {
    // After partitioning, the argument is one device's shard and the
    // initial value stays global: its shape is the local one times the
    // split counts of the argument's layout. A padded argument's initial
    // value has its logical shape.
    auto init = dyn_cast<ElementsAttr>(attr.getValue());
    auto local = dyn_cast<RankedTensorType>(argType);
    TensorLayoutAttr layout =
        fn ? fn.getArgAttrOfType<TensorLayoutAttr>(argIndex, kLayoutAttrName)
           : TensorLayoutAttr();
    if (logical && init && local) {
      auto global = cast<ShapedType>(init.getType());
      if (global.getShape() != logical.asArrayRef() ||
          global.getElementType() != local.getElementType())
        return op->emitError()
               << "'" << name << "' of argument #" << argIndex
               << " must have the argument's element type and its "
                  "loom.logical_shape";
      return success();
    }
    bool matches = init && init.getType() == argType;
    if (!matches && init && local && layout &&
        layout.getRank() == local.getRank()) {
      auto global = cast<ShapedType>(init.getType());
      matches = global.getElementType() == local.getElementType() &&
                global.getRank() == local.getRank();
      for (unsigned d = 0; matches && d < layout.getRank(); ++d)
        matches = global.getDimSize(d) ==
                  local.getDimSize(d) * layout.getSplitCount(d);
    }
    if (!matches)
      return op->emitError() << "'" << name << "' of argument #" << argIndex
                             << " must be elements of the argument's type "
                                "(its global type, if it has a layout)";
    return success();
  }
  return op->emitError() << "unknown loom argument attribute '" << name << "'";
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError() << "loom result attributes belong on functions";
  if (name == kLayoutAttrName)
    return verifyLayoutOn(op, "result", resultIndex, attr.getValue(),
                          func.getResultTypes()[resultIndex]);
  if (name == kOutputAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a string";
    return success();
  }
  if (name == kUpdatesAttrName) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!index || index.getInt() < 0 ||
        index.getInt() >= static_cast<int64_t>(func.getNumArguments()) ||
        func.getArgumentTypes()[index.getInt()] !=
            func.getResultTypes()[resultIndex])
      return op->emitError() << "'" << name << "' of result #" << resultIndex
                             << " must be the index of an argument of the "
                                "same type";
    return success();
  }
  return op->emitError() << "unknown loom result attribute '" << name << "'";
}
