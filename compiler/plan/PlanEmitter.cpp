//===- PlanEmitter.cpp - The loom dialect to a runtime plan ---------------===//

#include "compiler/plan/PlanEmitter.h"
#include "compiler/plan/MemoryPlan.h"

#include "common/ops/KernelScratch.h"
#include "common/plan/CollectiveScratch.h"
#include "dialects/LoomDialect.h"
#include "dialects/OpRuleAdaptor.h"
#include "dialects/PhaseContract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace loom {
namespace {

std::optional<plan::DType> toPlanDType(Type t) {
  if (t.isF32())
    return plan::F32;
  if (t.isF16())
    return plan::F16;
  if (t.isBF16())
    return plan::BF16;
  if (t.isInteger(32))
    return plan::I32;
  if (t.isInteger(64))
    return plan::I64;
  if (t.isInteger(1))
    return plan::BOOL;
  return std::nullopt;
}

int64_t elementBytes(plan::DType d) {
  switch (d) {
  case plan::F32:
  case plan::I32:
    return 4;
  case plan::F16:
  case plan::BF16:
    return 2;
  case plan::I64:
    return 8;
  default:
    return 1;
  }
}

std::string describe(Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (auto name = dyn_cast<NameLoc>(loc))
    os << name.getName().getValue();
  else
    loc.print(os);
  return s;
}

/// Little-endian element bytes of a constant, one byte per bool.
std::optional<std::string> elementsBytes(ElementsAttr attr) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    ArrayRef<char> data = blob->getData();
    return std::string(data.data(), data.size());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  Type elementType = dense.getElementType();
  std::string bytes;
  if (elementType.isInteger(1)) {
    for (bool b : dense.getValues<bool>())
      bytes.push_back(b ? 1 : 0);
    return bytes;
  }
  int64_t width = elementType.getIntOrFloatBitWidth() / 8;
  auto append = [&](const APInt &bits) {
    for (int64_t i = 0; i < width; ++i)
      bytes.push_back(static_cast<char>(bits.extractBitsAsZExtValue(8, 8 * i)));
  };
  if (isa<FloatType>(elementType)) {
    for (APFloat f : dense.getValues<APFloat>())
      append(f.bitcastToAPInt());
  } else {
    for (APInt i : dense.getValues<APInt>())
      append(i);
  }
  return bytes;
}

/// `named` as the plan carries it: the op rules' attribute vocabulary
/// (dialects/OpRuleAdaptor.h), which the runtime reads back into the same
/// `ops::Attrs` the dialect's type inference saw.
bool convertAttribute(NamedAttribute named, plan::Attribute &out) {
  ops::AttrValue value;
  if (!toRuleAttrValue(named.getValue(), value))
    return false;
  out.set_name(named.getName().str());
  if (auto *i = std::get_if<int64_t>(&value))
    out.set_int_value(*i);
  else if (auto *f = std::get_if<double>(&value))
    out.set_float_value(*f);
  else if (auto *s = std::get_if<std::string>(&value))
    out.set_string_value(*s);
  else if (auto *b = std::get_if<bool>(&value))
    out.set_bool_value(*b);
  else
    for (int64_t v : std::get<std::vector<int64_t>>(value))
      out.mutable_ints_value()->add_values(v);
  return true;
}

class Emitter {
public:
  explicit Emitter(std::string &error) : error(error) {}
  std::optional<plan::Plan> run(ModuleOp module);

private:
  bool emitProgram(func::FuncOp func, plan::Program &out);
  bool emitArguments(func::FuncOp func);
  /// The constant's data goes into the plan.
  bool emitConstant(ConstantOp constant);
  /// The outputs, and the updated state stored in place of its argument.
  bool emitReturn(func::FuncOp func, func::ReturnOp ret);
  /// Any other loom op, its attributes and results' layouts, and the
  /// scratch of a collective that packs.
  bool emitInstruction(Operation &op);
  bool fail(Operation *op, const Twine &message) {
    error = (Twine("cannot emit '") + op->getName().getStringRef() + "' at " +
             describe(op->getLoc()) + ": " + message)
                .str();
    return false;
  }
  plan::Value *addValue(Value v, plan::Value::Kind kind, Operation *where);

  std::string &error;
  plan::Program *program = nullptr;
  llvm::DenseMap<Value, int32_t> ids;
  int64_t stateBytes = 0;
  /// Added to collectives' mesh axes (1 in a pipelined plan).
  int64_t axisShift = 0;
};

plan::Value *Emitter::addValue(Value v, plan::Value::Kind kind,
                               Operation *where) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  std::optional<plan::DType> dtype =
      type ? toPlanDType(type.getElementType()) : std::nullopt;
  if (!dtype) {
    fail(where, "values must be ranked tensors of f32, f16, bf16, i32, i64 "
                "or i1");
    return nullptr;
  }
  plan::Value *pv = program->add_values();
  int32_t id = program->values_size() - 1;
  ids[v] = id;
  pv->set_id(id);
  pv->set_kind(kind);
  for (plan::TensorType *t : {pv->mutable_type(), pv->mutable_global_type()}) {
    t->set_dtype(*dtype);
    for (int64_t d : type.getShape())
      t->add_shape(d);
  }
  for (int64_t d = 0; d < type.getRank(); ++d)
    pv->mutable_layout()->add_dims();
  pv->set_bytes(type.getNumElements() * elementBytes(*dtype));
  if (kind == plan::Value::PARAMETER || kind == plan::Value::BUFFER ||
      kind == plan::Value::CONSTANT || kind == plan::Value::OPTIMIZER_STATE) {
    pv->set_offset(stateBytes);
    stateBytes += arena::alignUp(std::max<int64_t>(pv->bytes(), 1));
  }
  return pv;
}

/// Records `layout` (of a value whose type is local) in `pv`: the axes of
/// every dimension, the partial axes, and the global type they imply.
void setLayout(plan::Value *pv, TensorLayoutAttr layout) {
  plan::Layout *out = pv->mutable_layout();
  out->clear_dims();
  for (unsigned d = 0; d < layout.getRank(); ++d) {
    plan::Layout::DimAxes *dim = out->add_dims();
    for (StringRef axis : layout.getDimAxes(d))
      dim->add_axes(axis.str());
    pv->mutable_global_type()->set_shape(d, pv->type().shape(d) *
                                                layout.getSplitCount(d));
  }
  for (StringRef axis : layout.getPartialAxes())
    out->add_partial(axis.str());
}

int64_t globalBytes(const plan::Value &v) {
  int64_t n = elementBytes(v.type().dtype());
  for (int64_t d : v.global_type().shape())
    n *= d;
  return n;
}

std::optional<plan::Plan> Emitter::run(ModuleOp module) {
  // The stage functions of a pipelined step, in stage order, else @main.
  std::vector<func::FuncOp> funcs;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(LoomDialect::kPipelineAttrName) && !f.isDeclaration())
      funcs.push_back(f);
  // A pipeline's annotations are read unchecked below: its contract first.
  if (!funcs.empty()) {
    std::string contract;
    ScopedDiagnosticHandler capture(module.getContext(), [&](Diagnostic &d) {
      if (contract.empty())
        contract = d.str();
      return success();
    });
    if (failed(verifyPhaseContract(module, Phase::Pipelined))) {
      error = "cannot emit a plan: " + contract;
      return std::nullopt;
    }
  }
  auto stageOf = [](func::FuncOp f) {
    return f->getAttrOfType<DictionaryAttr>(LoomDialect::kPipelineAttrName)
        .getAs<IntegerAttr>("stage")
        .getInt();
  };
  llvm::sort(funcs, [&](func::FuncOp a, func::FuncOp b) {
    return stageOf(a) < stageOf(b);
  });
  if (funcs.empty()) {
    auto all = module.getOps<func::FuncOp>();
    auto mainIt = llvm::find_if(all, [](func::FuncOp f) {
      return f.getSymName() == "main" && !f.isDeclaration();
    });
    if (mainIt == all.end()) {
      error = "the module has no function @main to compile";
      return std::nullopt;
    }
    funcs.push_back(*mainIt);
  }

  plan::Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  plan.set_producer("loom");
  if (auto source =
          module->getAttrOfType<StringAttr>(LoomDialect::kSourceAttrName))
    plan.set_source(source.str());
  int64_t stages = 1, microBatches = 1, virtualStages = 1;
  PipelineSchedule scheduleKind = PipelineSchedule::OneFOneB;
  std::string pipelineAxis;
  bool ownMeshes = false;
  if (auto pipeline = funcs.front()->getAttrOfType<DictionaryAttr>(
          LoomDialect::kPipelineAttrName)) {
    stages = pipeline.getAs<IntegerAttr>("stages").getInt();
    microBatches = pipeline.getAs<IntegerAttr>("micro_batches").getInt();
    scheduleKind = pipeline.getAs<PipelineScheduleAttr>("schedule").getValue();
    if (auto chunks = pipeline.getAs<IntegerAttr>("virtual_stages"))
      virtualStages = chunks.getInt();
    auto axis = pipeline.getAs<StringAttr>("axis");
    pipelineAxis = axis ? axis.str() : "pp";
    ownMeshes = static_cast<bool>(pipeline.get("own_mesh"));
    for (auto [i, f] : llvm::enumerate(funcs))
      if (stageOf(f) != static_cast<int64_t>(i)) {
        fail(f, "the pipeline's stage functions must be stages 0 to " +
                    Twine(stages - 1) + ", once each");
        return std::nullopt;
      }
    if (static_cast<int64_t>(funcs.size()) != stages) {
      fail(funcs.front(), "the pipeline has " + Twine(stages) + " stages but " +
                              Twine(funcs.size()) + " stage functions");
      return std::nullopt;
    }
  }
  plan::Schedule *schedule = plan.mutable_schedule();
  schedule->set_kind(stages == 1 && microBatches == 1 ? plan::Schedule::SINGLE
                     : scheduleKind == PipelineSchedule::GPipe
                         ? plan::Schedule::GPIPE
                     : scheduleKind == PipelineSchedule::Interleaved
                         ? plan::Schedule::INTERLEAVED
                         : plan::Schedule::ONE_F_ONE_B);
  schedule->set_micro_batches(static_cast<int32_t>(microBatches));
  if (scheduleKind == PipelineSchedule::Interleaved)
    schedule->set_virtual_stages(static_cast<int32_t>(virtualStages));
  // Stages on submeshes of their own: each stage's mesh is its function's,
  // its ranks follow the previous stage's, and the plan's mesh counts them.
  if (ownMeshes) {
    int64_t next = 0;
    for (auto [s, f] : llvm::enumerate(funcs)) {
      auto mesh = f->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName);
      if (!mesh) {
        fail(f, "a stage on a submesh of its own needs its loom.mesh");
        return std::nullopt;
      }
      plan::Stage *stage = plan.add_stages();
      stage->set_index(static_cast<int32_t>(s));
      for (auto [name, size] :
           llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())) {
        plan::Mesh::Axis *axis = stage->mutable_mesh()->add_axes();
        axis->set_name(name.str());
        axis->set_size(size);
      }
      for (int64_t r = 0; r < mesh.getNumDevices(); ++r)
        stage->add_ranks(next++);
      if (!emitProgram(f, *stage->mutable_program()))
        return std::nullopt;
    }
    plan::Mesh::Axis *axis = plan.mutable_mesh()->add_axes();
    axis->set_name("devices");
    axis->set_size(next);
    return plan;
  }
  // The mesh: the stages' submesh, after the pipeline axis.
  int64_t devices = 1;
  if (auto mesh =
          funcs.front()->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName)) {
    if (stages > 1) {
      plan::Mesh::Axis *axis = plan.mutable_mesh()->add_axes();
      axis->set_name(pipelineAxis);
      axis->set_size(stages);
    }
    for (auto [name, size] :
         llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())) {
      plan::Mesh::Axis *axis = plan.mutable_mesh()->add_axes();
      axis->set_name(name.str());
      axis->set_size(size);
    }
    devices = mesh.getNumDevices();
  }
  axisShift = stages > 1 ? 1 : 0;
  for (auto [s, f] : llvm::enumerate(funcs)) {
    plan::Stage *stage = plan.add_stages();
    stage->set_index(static_cast<int32_t>(s));
    for (int64_t r = 0; r < devices; ++r)
      stage->add_ranks(static_cast<int64_t>(s) * devices + r);
    if (!emitProgram(f, *stage->mutable_program()))
      return std::nullopt;
  }
  return plan;
}

bool Emitter::emitProgram(func::FuncOp func, plan::Program &out) {
  if (!llvm::hasSingleElement(func.getBody()))
    return fail(func, "@" + func.getSymName() + " must have a single block");
  if (func->hasAttr(LoomDialect::kMeshAttrName) &&
      !func->hasAttr(LoomDialect::kSpmdAttrName))
    return fail(func, "@" + func.getSymName() +
                          " has a mesh but is not partitioned; run "
                          "loom-propagate-sharding and loom-partition first");
  program = &out;
  ids.clear();
  stateBytes = 0;
  if (!emitArguments(func))
    return false;
  // Ops in program order (SSA order is a topological schedule).
  for (Operation &op : func.getBody().front()) {
    bool emitted = false;
    if (auto constant = dyn_cast<ConstantOp>(op))
      emitted = emitConstant(constant);
    else if (auto ret = dyn_cast<func::ReturnOp>(op))
      emitted = emitReturn(func, ret);
    else
      emitted = emitInstruction(op);
    if (!emitted)
      return false;
  }
  if (!arena::planMemory(*program, error))
    return false;
  program->set_state_bytes(stateBytes);
  return true;
}

/// Arguments: inputs, parameters, buffers, optimizer state and
/// hyperparameters, with their layouts and initial values.
bool Emitter::emitArguments(func::FuncOp func) {
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    plan::Value::Kind kind = plan::Value::INPUT;
    StringAttr name =
        func.getArgAttrOfType<StringAttr>(i, LoomDialect::kInputAttrName);
    if (auto param =
            func.getArgAttrOfType<StringAttr>(i, LoomDialect::kParamAttrName)) {
      kind = plan::Value::PARAMETER;
      name = param;
    } else if (auto buffer = func.getArgAttrOfType<StringAttr>(
                   i, LoomDialect::kBufferAttrName)) {
      kind = plan::Value::BUFFER;
      name = buffer;
    } else if (auto state = func.getArgAttrOfType<StringAttr>(
                   i, LoomDialect::kStateAttrName)) {
      kind = plan::Value::OPTIMIZER_STATE;
      name = state;
    } else if (auto hyper = func.getArgAttrOfType<HyperAttr>(
                   i, LoomDialect::kHyperAttrName)) {
      kind = plan::Value::HYPERPARAMETER;
      name =
          StringAttr::get(func.getContext(), stringifyHyper(hyper.getValue()));
    }
    plan::Value *pv = addValue(arg, kind, func);
    if (!pv)
      return false;
    pv->set_name(name ? name.str() : "arg" + std::to_string(i));
    if (auto k = func.getArgAttrOfType<IntegerAttr>(
            i, LoomDialect::kMicroBatchAttrName))
      pv->set_micro_batch(static_cast<int32_t>(k.getInt()));
    if (auto layout = func.getArgAttrOfType<TensorLayoutAttr>(
            i, LoomDialect::kLayoutAttrName))
      setLayout(pv, layout);
    // A padded value's initial value is its logical (leading) block.
    int64_t initBytes = globalBytes(*pv);
    if (auto logical = func.getArgAttrOfType<DenseI64ArrayAttr>(
            i, LoomDialect::kLogicalShapeAttrName)) {
      initBytes = elementBytes(pv->type().dtype());
      for (int64_t d : logical.asArrayRef()) {
        pv->add_logical_shape(d);
        initBytes *= d;
      }
    }
    // Initial values are global: each rank takes its slice at load time.
    if (auto init = func.getArgAttrOfType<ElementsAttr>(
            i, LoomDialect::kInitAttrName)) {
      std::optional<std::string> bytes = elementsBytes(init);
      if (!bytes || static_cast<int64_t>(bytes->size()) != initBytes) {
        fail(func, "the initial value of '" + pv->name() +
                       "' is unreadable or of the wrong size");
        return false;
      }
      pv->set_data(std::move(*bytes));
    }
  }
  return true;
}

bool Emitter::emitConstant(ConstantOp constant) {
  Operation *op = constant;
  plan::Value *pv = addValue(constant.getResult(), plan::Value::CONSTANT, op);
  if (!pv)
    return false;
  std::optional<std::string> bytes = elementsBytes(constant.getValue());
  if (!bytes || static_cast<int64_t>(bytes->size()) != pv->bytes()) {
    fail(op, "the constant's data is unreadable");
    return false;
  }
  pv->set_data(std::move(*bytes));
  return true;
}

bool Emitter::emitReturn(func::FuncOp func, func::ReturnOp ret) {
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    // Updated state is stored in place of the argument it replaces.
    if (auto of = func.getResultAttrOfType<IntegerAttr>(
            i, LoomDialect::kUpdatesAttrName)) {
      int32_t target = ids.lookup(func.getArgument(of.getInt()));
      plan::Value *pv = program->mutable_values(ids.lookup(v));
      if (pv->kind() != plan::Value::TEMPORARY || pv->has_in_place_of()) {
        fail(ret, "result #" + Twine(i) +
                      " must be a fresh value to update an argument");
        return false;
      }
      pv->set_in_place_of(target);
      *pv->mutable_layout() = program->values(target).layout();
      *pv->mutable_global_type() = program->values(target).global_type();
      continue;
    }
    plan::Program::Output *out = program->add_outputs();
    auto name =
        func.getResultAttrOfType<StringAttr>(i, LoomDialect::kOutputAttrName);
    out->set_name(name ? name.str() : "output" + std::to_string(i));
    out->set_value(ids.lookup(v));
  }
  return true;
}

bool Emitter::emitInstruction(Operation &op) {
  if (!isa<LoomDialect>(op.getDialect()) || op.getNumRegions() != 0) {
    fail(&op, "only loom ops can be compiled to a plan");
    return false;
  }
  plan::Instruction *inst = program->add_instructions();
  inst->set_op(op.getName().stripDialect().str());
  inst->set_location(describe(op.getLoc()));
  for (Value operand : op.getOperands())
    inst->add_operands(ids.lookup(operand));
  const bool collective = isCollective(&op);
  for (NamedAttribute attr : op.getAttrs()) {
    if (attr.getName().strref().starts_with("loom."))
      continue; // annotations, not semantics
    plan::Attribute *converted = inst->add_attributes();
    if (!convertAttribute(attr, *converted)) {
      fail(&op, "attribute '" + attr.getName().strref() +
                    "' has a kind plans cannot carry");
      return false;
    }
    // Mesh axes count from the plan's mesh, which puts the pipeline
    // axis first.
    if (collective && attr.getName() == "axis")
      converted->set_int_value(converted->int_value() + axisShift);
    if (collective && attr.getName() == "axes")
      for (int64_t &a : *converted->mutable_ints_value()->mutable_values())
        a += axisShift;
  }
  auto layouts =
      op.getAttrOfType<ArrayAttr>(LoomDialect::kResultLayoutsAttrName);
  for (Value result : op.getResults()) {
    plan::Value *pv = addValue(result, plan::Value::TEMPORARY, &op);
    if (!pv)
      return false;
    if (layouts)
      setLayout(pv, cast<TensorLayoutAttr>(
                        layouts[cast<OpResult>(result).getResultNumber()]));
    inst->add_results(pv->id());
  }
  // A collective along an inner dimension packs through scratch, which
  // the memory plan places like a value living while it runs.
  if (collective && inst->operands_size() == 1 && inst->results_size() == 1) {
    const plan::Value &in = program->values(inst->operands(0));
    const plan::Value &res = program->values(inst->results(0));
    auto dimAttr = [&](StringRef name) {
      auto a = op.getAttrOfType<IntegerAttr>(name);
      return a ? static_cast<int>(a.getInt()) : -1;
    };
    std::vector<int64_t> inShape(in.type().shape().begin(),
                                 in.type().shape().end()),
        outShape(res.type().shape().begin(), res.type().shape().end());
    inst->set_scratch_bytes(
        rt::collectiveScratch(inst->op(), inShape, outShape,
                              elementBytes(in.type().dtype()), dimAttr("dim"),
                              dimAttr("to_dim"))
            .total());
  } else if (!collective) {
    // A kernel's scratch (common/ops/KernelScratch.h), placed the same way.
    std::vector<ops::Shape> shapes;
    shapes.reserve(inst->operands_size() + inst->results_size());
    std::vector<ops::TypeRef> operands, results;
    auto typeOf = [&](int32_t id) {
      const plan::TensorType &t = program->values(id).type();
      shapes.emplace_back(t.shape().begin(), t.shape().end());
      return ops::TypeRef{static_cast<ops::DType>(t.dtype()), &shapes.back()};
    };
    for (int32_t id : inst->operands())
      operands.push_back(typeOf(id));
    for (int32_t id : inst->results())
      results.push_back(typeOf(id));
    inst->set_scratch_bytes(ops::kernelScratchBytes(
        inst->op(), toRuleAttrs(op.getAttrDictionary()), operands, results));
  }
  return true;
}

} // namespace

std::optional<plan::Plan> emitPlan(ModuleOp module, std::string &error) {
  Emitter emitter(error);
  return emitter.run(module);
}

} // namespace loom
