//===- PlanEmitter.cpp - The loom dialect to a runtime plan ---------------===//

#include "compiler/plan/PlanEmitter.h"

#include "dialects/LoomDialect.h"
#include "common/plan/CollectiveScratch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace loom {
namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

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

bool convertAttribute(NamedAttribute named, plan::Attribute &out) {
  out.set_name(named.getName().str());
  Attribute a = named.getValue();
  if (isa<UnitAttr>(a)) {
    out.set_bool_value(true);
  } else if (auto b = dyn_cast<BoolAttr>(a)) {
    out.set_bool_value(b.getValue());
  } else if (auto i = dyn_cast<IntegerAttr>(a)) {
    out.set_int_value(i.getValue().getSExtValue());
  } else if (auto f = dyn_cast<FloatAttr>(a)) {
    out.set_float_value(f.getValueAsDouble());
  } else if (auto s = dyn_cast<StringAttr>(a)) {
    out.set_string_value(s.str());
  } else if (auto list = dyn_cast<DenseI64ArrayAttr>(a)) {
    for (int64_t v : list.asArrayRef())
      out.mutable_ints_value()->add_values(v);
  } else {
    return false;
  }
  return true;
}

/// Allocation of step-arena storage by liveness: a free block that holds
/// the value (the lowest, or with `bestFit` the smallest), else the free
/// block at the top of the arena grown to fit, else new space at the top.
/// Neither policy is better on every program; the emitter keeps the
/// smaller arena of the two.
class ArenaAllocator {
public:
  explicit ArenaAllocator(bool bestFit) : bestFit(bestFit) {}

  int64_t allocate(int64_t bytes) {
    bytes = alignUp(std::max<int64_t>(bytes, 1));
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes ||
          (best != free.end() && it->second >= best->second))
        continue;
      best = it;
      if (!bestFit)
        break;
    }
    if (best != free.end()) {
      int64_t offset = best->first, size = best->second;
      free.erase(best);
      if (size > bytes)
        free[offset + bytes] = size - bytes;
      return offset;
    }
    if (!free.empty()) {
      auto last = std::prev(free.end());
      if (last->first + last->second == top) {
        int64_t offset = last->first;
        free.erase(last);
        top = offset + bytes;
        return offset;
      }
    }
    int64_t offset = top;
    top += bytes;
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    bytes = alignUp(std::max<int64_t>(bytes, 1));
    auto [it, inserted] = free.emplace(offset, bytes);
    (void)inserted;
    // Merge with the following and preceding free blocks.
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }
  int64_t size() const { return top; }

private:
  bool bestFit;
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t top = 0;
};

/// When each value of a program lives in the step arena. Inputs (and the
/// hyperparameters) live for the whole step; a temporary lives from its
/// instruction to its last use (outputs to the end); a value stored in
/// place of a persistent one is not in the arena. An instruction's scratch
/// lives while it runs: the walk names it as item values_size() + its
/// index, after the values.
struct Liveness {
  explicit Liveness(const plan::Program &program) {
    int n = program.instructions_size();
    lastUse.assign(program.values_size(), -1);
    definedAt.assign(program.values_size(), -1);
    for (int i = 0; i < n; ++i) {
      for (int32_t id : program.instructions(i).operands())
        lastUse[id] = i;
      for (int32_t id : program.instructions(i).results())
        definedAt[id] = i;
    }
    for (const auto &out : program.outputs())
      lastUse[out.value()] = n;
    // An alias's uses keep its target's bytes live.
    for (const plan::Value &v : program.values())
      if (v.has_alias_of())
        lastUse[v.alias_of()] =
            std::max(lastUse[v.alias_of()], lastUse[v.id()]);
  }

  /// The bytes of item `id`: a value, or an instruction's scratch.
  static int64_t bytes(const plan::Program &program, int32_t id) {
    return id < program.values_size()
               ? program.values(id).bytes()
               : program.instructions(id - program.values_size())
                     .scratch_bytes();
  }
  static int32_t items(const plan::Program &program) {
    return program.values_size() + program.instructions_size();
  }

  /// The value whose bytes `id` is: its alias target, or itself.
  static int32_t home(const plan::Program &program, int32_t id) {
    const plan::Value &v = program.values(id);
    return v.has_alias_of() ? v.alias_of() : id;
  }

  /// Calls `allocate` and `release` in program order, and `after(i)` once
  /// instruction i's results are allocated, before what dies there is
  /// released (so no kernel reads and writes the same bytes).
  template <typename Allocate, typename Release, typename After>
  void walk(const plan::Program &program, Allocate allocate, Release release,
            After after) const {
    auto inArena = [&](int32_t id) {
      return !program.values(id).has_in_place_of() &&
             !program.values(id).has_alias_of();
    };
    for (const plan::Value &v : program.values())
      if (v.kind() == plan::Value::INPUT ||
          v.kind() == plan::Value::HYPERPARAMETER)
        allocate(v.id());
    for (int i = 0; i < program.instructions_size(); ++i) {
      const plan::Instruction &inst = program.instructions(i);
      for (int32_t id : inst.results())
        if (inArena(id))
          allocate(id);
      const int32_t scratch = program.values_size() + i;
      if (inst.scratch_bytes() > 0)
        allocate(scratch);
      after(i);
      if (inst.scratch_bytes() > 0)
        release(scratch);
      for (int32_t id : inst.results())
        if (lastUse[id] < 0 && inArena(id)) // never used: free right away
          release(id);
      std::vector<int32_t> dying;
      for (int32_t operand : inst.operands()) {
        int32_t id = home(program, operand);
        if (lastUse[id] == i &&
            program.values(id).kind() == plan::Value::TEMPORARY &&
            inArena(id) && !llvm::is_contained(dying, id))
          dying.push_back(id);
      }
      for (int32_t id : dying)
        release(id);
    }
  }

  std::vector<int> lastUse, definedAt;
};

/// Offline placement, largest value first (the "greedy by size" policy of
/// static memory planners): each value of the arena at the lowest offset
/// clear of every value placed before it whose lifetime meets its own. A
/// lifetime runs from the value's allocation to its release in the
/// liveness walk, in the walk's order of events, so the placement is valid
/// exactly where the online allocators' are. Returns the arena's size, or
/// -1 past the work budget below (then `offsets` is unset).
constexpr double kPlaceBySizeBudget = 2e7;
int64_t placeBySize(const plan::Program &program, const Liveness &live,
                    std::vector<int64_t> &offsets) {
  const size_t n = static_cast<size_t>(Liveness::items(program));
  std::vector<int64_t> born(n, -1), dies(n, -1);
  int64_t event = 0;
  live.walk(
      program, [&](int32_t id) { born[id] = event++; },
      [&](int32_t id) { dies[id] = event++; }, [](int) {});
  std::vector<int32_t> order;
  for (size_t id = 0; id < n; ++id)
    if (born[id] >= 0) {
      if (dies[id] < 0) // live to the end
        dies[id] = event;
      order.push_back(static_cast<int32_t>(id));
    }
  // Each value meets up to the most values live at once: past a budget of
  // that product, no placement (a pipelined stage of GPT-3 shapes over 96
  // micro-batches has 154k values, 513 live at once: its 8 stages took 50 s
  // more, to save 2% of the arena).
  std::vector<int64_t> change(static_cast<size_t>(event) + 2, 0);
  for (int32_t id : order) {
    ++change[born[id]];
    --change[dies[id] + 1];
  }
  int64_t liveNow = 0, mostLive = 0;
  for (int64_t c : change)
    mostLive = std::max(mostLive, liveNow += c);
  if (static_cast<double>(order.size()) * static_cast<double>(mostLive) >
      kPlaceBySizeBudget)
    return -1;
  auto bytesOf = [&](int32_t id) {
    return alignUp(std::max<int64_t>(Liveness::bytes(program, id), 1));
  };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    int64_t x = bytesOf(a), y = bytesOf(b);
    return x != y ? x > y : born[a] < born[b];
  });
  offsets.assign(n, -1);
  // The placed values by birth, in a segment tree holding the latest
  // death among the placed ones in each range: the values placed so far
  // that meet [b, d] are those born by d whose death is at least b.
  std::vector<int32_t> byBirth = order;
  std::sort(byBirth.begin(), byBirth.end(), [&](int32_t a, int32_t b) {
    return born[a] != born[b] ? born[a] < born[b] : a < b;
  });
  const size_t m = byBirth.size();
  std::vector<size_t> slot(n, 0);
  std::vector<int64_t> bornAt(m);
  for (size_t k = 0; k < m; ++k) {
    slot[byBirth[k]] = k;
    bornAt[k] = born[byBirth[k]];
  }
  size_t leaves = 1;
  while (leaves < std::max<size_t>(m, 1))
    leaves *= 2;
  std::vector<int64_t> latest(2 * leaves, -1);
  std::vector<std::pair<int64_t, int64_t>> taken; // offset, end
  std::vector<std::pair<size_t, size_t>> stack;   // node, its first slot
  int64_t size = 0;
  for (int32_t id : order) {
    taken.clear();
    size_t hi = static_cast<size_t>(
        std::upper_bound(bornAt.begin(), bornAt.end(), dies[id]) -
        bornAt.begin());
    // The placed values in slots [0, hi) that die at born[id] or later.
    stack.assign(1, {1, 0});
    while (!stack.empty()) {
      auto [node, lo] = stack.back();
      stack.pop_back();
      if (lo >= hi || latest[node] < born[id])
        continue;
      if (node >= leaves) {
        int32_t other = byBirth[lo];
        taken.push_back({offsets[other], offsets[other] + bytesOf(other)});
        continue;
      }
      size_t half = leaves >> (63 - __builtin_clzll(node) + 1);
      stack.push_back({2 * node + 1, lo + half});
      stack.push_back({2 * node, lo});
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0, bytes = bytesOf(id);
    for (const auto &[begin, end] : taken) {
      if (begin >= offset + bytes)
        break;
      offset = std::max(offset, end);
    }
    offsets[id] = offset;
    size = std::max(size, offset + bytes);
    for (size_t node = leaves + slot[id]; node >= 1; node /= 2)
      latest[node] = std::max(latest[node], dies[id]);
  }
  return size;
}

class Emitter {
public:
  explicit Emitter(std::string &error) : error(error) {}
  std::optional<plan::Plan> run(ModuleOp module);

private:
  bool emitProgram(func::FuncOp func, plan::Program &out);
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
    stateBytes += alignUp(std::max<int64_t>(pv->bytes(), 1));
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
    pv->mutable_global_type()->set_shape(
        d, pv->type().shape(d) * layout.getSplitCount(d));
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
  std::string scheduleName, pipelineAxis;
  bool ownMeshes = false;
  if (auto pipeline = funcs.front()->getAttrOfType<DictionaryAttr>(
          LoomDialect::kPipelineAttrName)) {
    stages = pipeline.getAs<IntegerAttr>("stages").getInt();
    microBatches = pipeline.getAs<IntegerAttr>("micro_batches").getInt();
    scheduleName = pipeline.getAs<StringAttr>("schedule").str();
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
                     : scheduleName == "gpipe"        ? plan::Schedule::GPIPE
                     : scheduleName == "interleaved"
                         ? plan::Schedule::INTERLEAVED
                         : plan::Schedule::ONE_F_ONE_B);
  schedule->set_micro_batches(static_cast<int32_t>(microBatches));
  if (scheduleName == "interleaved")
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

  // Arguments: inputs, parameters and buffers.
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
    } else if (auto hyper = func.getArgAttrOfType<StringAttr>(
                   i, LoomDialect::kHyperAttrName)) {
      kind = plan::Value::HYPERPARAMETER;
      name = hyper;
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
    // Initial values are global: each rank takes its slice at load time.
    if (auto init = func.getArgAttrOfType<ElementsAttr>(
            i, LoomDialect::kInitAttrName)) {
      std::optional<std::string> bytes = elementsBytes(init);
      if (!bytes || static_cast<int64_t>(bytes->size()) != globalBytes(*pv)) {
        fail(func, "the initial value of '" + pv->name() +
                       "' is unreadable or of the wrong size");
        return false;
      }
      pv->set_data(std::move(*bytes));
    }
  }

  // Ops in program order (SSA order is a topological schedule).
  for (Operation &op : func.getBody().front()) {
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      plan::Value *pv =
          addValue(constant.getResult(), plan::Value::CONSTANT, &op);
      if (!pv)
        return false;
      std::optional<std::string> bytes = elementsBytes(constant.getValue());
      if (!bytes || static_cast<int64_t>(bytes->size()) != pv->bytes()) {
        fail(&op, "the constant's data is unreadable");
        return false;
      }
      pv->set_data(std::move(*bytes));
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        // Updated state is stored in place of the argument it replaces.
        if (auto of = func.getResultAttrOfType<IntegerAttr>(
                i, LoomDialect::kUpdatesAttrName)) {
          int32_t target = ids.lookup(func.getArgument(of.getInt()));
          plan::Value *pv = program->mutable_values(ids.lookup(v));
          if (pv->kind() != plan::Value::TEMPORARY || pv->has_in_place_of()) {
            fail(&op, "result #" + Twine(i) +
                          " must be a fresh value to update an argument");
            return false;
          }
          pv->set_in_place_of(target);
          *pv->mutable_layout() = program->values(target).layout();
          *pv->mutable_global_type() = program->values(target).global_type();
          continue;
        }
        plan::Program::Output *out = program->add_outputs();
        auto name = func.getResultAttrOfType<StringAttr>(
            i, LoomDialect::kOutputAttrName);
        out->set_name(name ? name.str() : "output" + std::to_string(i));
        out->set_value(ids.lookup(v));
      }
      continue;
    }
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
    }
  }

  // A reshape moves no bytes: its result is its operand's memory, when
  // both are arena temporaries (inputs are written from outside every step;
  // in-place updates live over their arguments). In program order, so that
  // a reshape of a reshape shares the first one's target.
  for (const plan::Instruction &inst : program->instructions()) {
    if (inst.op() != "reshape")
      continue;
    int32_t operand = Liveness::home(*program, inst.operands(0));
    const plan::Value &from = program->values(operand);
    plan::Value *to = program->mutable_values(inst.results(0));
    if (from.kind() == plan::Value::TEMPORARY && !from.has_in_place_of() &&
        !to->has_in_place_of() && from.bytes() == to->bytes())
      to->set_alias_of(operand);
  }

  // Memory plan of the step arena (see Liveness).
  const Liveness live(*program);
  const std::vector<int> &lastUse = live.lastUse, &definedAt = live.definedAt;
  // An in-place update must be the last reader of what it replaces.
  for (plan::Value &v : *program->mutable_values()) {
    if (!v.has_in_place_of())
      continue;
    const plan::Value &target = program->values(v.in_place_of());
    if (lastUse[target.id()] > definedAt[v.id()]) {
      error = "'" + target.name() +
              "' is read after the instruction that updates it in place";
      return false;
    }
    v.set_offset(target.offset());
  }
  // The arena's offsets under one policy, and its size.
  auto place = [&](bool bestFit, std::vector<int64_t> &offsets) {
    ArenaAllocator arena(bestFit);
    offsets.assign(Liveness::items(*program), -1);
    live.walk(
        *program,
        [&](int32_t id) {
          offsets[id] = arena.allocate(Liveness::bytes(*program, id));
        },
        [&](int32_t id) {
          arena.release(offsets[id], Liveness::bytes(*program, id));
        },
        [](int) {});
    return arena.size();
  };
  // Three policies; the smallest arena wins (the first at equal size).
  std::vector<int64_t> firstFit, bestFit, bySize;
  int64_t firstSize = place(false, firstFit), bestSize = place(true, bestFit),
          bySizeSize = placeBySize(*program, live, bySize);
  const std::vector<int64_t> *offsets = &firstFit;
  int64_t arenaBytes = firstSize;
  for (auto [size, placement] : {std::make_pair(bestSize, &bestFit),
                                 std::make_pair(bySizeSize, &bySize)})
    if (size >= 0 && size < arenaBytes) {
      arenaBytes = size;
      offsets = placement;
    }
  for (plan::Value &v : *program->mutable_values())
    if ((*offsets)[v.id()] >= 0)
      v.set_offset((*offsets)[v.id()]);
  for (int i = 0; i < program->instructions_size(); ++i)
    if (program->instructions(i).scratch_bytes() > 0)
      program->mutable_instructions(i)->set_scratch_offset(
          (*offsets)[program->values_size() + i]);
  for (plan::Value &v : *program->mutable_values())
    if (v.has_alias_of())
      v.set_offset(program->values(v.alias_of()).offset());
  program->set_arena_bytes(arenaBytes);
  program->set_state_bytes(stateBytes);
  return true;
}

} // namespace

ArenaPeak arenaPeak(const plan::Program &program, size_t top) {
  const Liveness live(program);
  ArenaPeak peak;
  int64_t bytes = 0;
  std::vector<char> alive(Liveness::items(program), 0);
  auto allocate = [&](int32_t id) {
    alive[id] = 1;
    bytes += Liveness::bytes(program, id);
  };
  auto release = [&](int32_t id) {
    alive[id] = 0;
    bytes -= Liveness::bytes(program, id);
  };
  live.walk(program, allocate, release, [&](int i) {
    if (bytes > peak.bytes) {
      peak.bytes = bytes;
      peak.instruction = i;
    }
  });
  if (peak.instruction < 0)
    return peak;
  peak.scratch = program.instructions(peak.instruction).scratch_bytes();
  // The values live there: walk again up to it.
  std::fill(alive.begin(), alive.end(), 0);
  bool done = false;
  live.walk(
      program,
      [&](int32_t id) {
        if (!done)
          alive[id] = 1;
      },
      [&](int32_t id) {
        if (!done)
          alive[id] = 0;
      },
      [&](int i) { done |= i == peak.instruction; });
  for (const plan::Value &v : program.values())
    if (alive[v.id()])
      peak.largest.push_back(v.id());
  llvm::stable_sort(peak.largest, [&](int32_t a, int32_t b) {
    return program.values(a).bytes() > program.values(b).bytes();
  });
  if (peak.largest.size() > top)
    peak.largest.resize(top);
  for (int32_t id : peak.largest)
    peak.producers.push_back(live.definedAt[id]);
  return peak;
}

std::optional<plan::Plan> emitPlan(ModuleOp module, std::string &error) {
  Emitter emitter(error);
  return emitter.run(module);
}

} // namespace loom
