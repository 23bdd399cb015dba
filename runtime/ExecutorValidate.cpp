//===- ExecutorValidate.cpp - Reading a plan and checking it for a rank ---===//
//
// parsePlan and readPlanFile, and everything Executor::create checks before
// it allocates (validate()): the mesh and the rank context, every value
// (types, layout, storage, initial data), then every instruction
// (ExecutorInstructions.cpp), then in-place updates and aliases, outputs,
// every value's local shape against its layout, and the memory plan (no two
// live values share bytes). A plan is trusted in nothing: each problem is an
// error naming the value or the instruction, never a crash.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutorImpl.h"

#include "common/plan/PlanChecksum.h"

#include <algorithm>
#include <fstream>

namespace loom::rt {

namespace {

constexpr int64_t kMaxBytes = int64_t(1) << 40;

std::optional<DType> toDType(int d) {
  if (d >= 1 && d <= 6)
    return static_cast<DType>(d);
  return std::nullopt;
}

/// The element count of `shape`, or -1 if a dimension is negative or the
/// count (or its bytes) exceeds kMaxBytes.
int64_t checkedCount(const Shape &shape, DType dtype) {
  int64_t count = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > kMaxBytes)
      return -1;
  if (count * static_cast<int64_t>(dtypeSize(dtype)) > kMaxBytes)
    return -1;
  return count;
}

} // namespace

namespace {

/// The checks every plan read passes: its format version, then its
/// checksum.
std::optional<plan::Plan> checkReadPlan(plan::Plan plan,
                                        const std::string &name,
                                        std::string &error,
                                        bool requireChecksum) {
  if (plan.format_version() != kPlanFormatVersion) {
    error = name + ": plan format version " +
            std::to_string(plan.format_version()) +
            " is not supported by this runtime, which reads version " +
            std::to_string(kPlanFormatVersion) +
            "; recompile the model with this Loom";
    return std::nullopt;
  }
  if (requireChecksum)
    if (std::string bad = plan::checkPlanChecksum(plan); !bad.empty()) {
      error = name + ": " + bad;
      return std::nullopt;
    }
  return plan;
}

const char *kUnparsable = ": not a Loom plan (the protobuf does not parse; "
                          "is the file truncated or corrupt?)";

} // namespace

std::optional<plan::Plan> parsePlan(std::string_view bytes,
                                    const std::string &name, std::string &error,
                                    bool requireChecksum) {
  plan::Plan plan;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !plan.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    error = name + kUnparsable;
    return std::nullopt;
  }
  return checkReadPlan(std::move(plan), name, error, requireChecksum);
}

std::optional<plan::Plan> readPlanFile(const std::string &path,
                                       std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open the plan file";
    return std::nullopt;
  }
  // Parsed as it is read: the plan is as large as the model's parameters,
  // and a second copy of its bytes would double what reading it takes.
  plan::Plan plan;
  if (!plan.ParseFromIstream(&in)) {
    error = path + kUnparsable;
    return std::nullopt;
  }
  in.close();
  return checkReadPlan(std::move(plan), path, error, true);
}

std::string Executor::Impl::validateMesh() {
  std::string error;
  if (!meshFromProto(plan.mesh(), mesh, error))
    return error;
  numDevices = mesh ? mesh->numDevices() : 1;
  return "";
}

std::string Executor::Impl::checkRankContext(const RankContext &ctx) {
  int64_t world = ctx.comm ? ctx.comm->worldSize() : 1;
  if (numDevices > 1 && world != numDevices)
    return "this plan is partitioned over " + std::to_string(numDevices) +
           " devices " + mesh->toString() + "; run it with --ranks " +
           std::to_string(numDevices) + " or under mpirun -np " +
           std::to_string(numDevices) +
           (ctx.comm ? " (the communicator has " + std::to_string(world) +
                           (world == 1 ? " rank)" : " ranks)")
                     : "");
  if (numDevices == 1 && world != 1)
    return "this plan runs on one device, but the communicator has " +
           std::to_string(world) +
           " ranks; run it with --ranks 1, or "
           "compile it for a mesh of " +
           std::to_string(world) + " devices";
  if (ctx.comm && ctx.comm->rank() != ctx.rank)
    return "rank " + std::to_string(ctx.rank) +
           " was given a communicator of rank " +
           std::to_string(ctx.comm->rank());
  if (ctx.rank < 0 || ctx.rank >= numDevices)
    return "rank " + std::to_string(ctx.rank) + " is not a rank of " +
           (mesh ? "the mesh " + mesh->toString() : "a one-device plan");
  rank = ctx.rank;
  comm = ctx.comm;
  return "";
}

/// Reads and checks a value's element type, local and global shapes and
/// layout.
std::string Executor::Impl::readValueType(const plan::Value &v,
                                          const std::string &where,
                                          ValueType &type) const {
  std::optional<DType> dtype = toDType(v.type().dtype());
  if (!dtype)
    return where + " has an unknown element type";
  type.dtype = *dtype;
  type.shape.assign(v.type().shape().begin(), v.type().shape().end());
  if (checkedCount(type.shape, *dtype) < 0)
    return where + " has an invalid shape";
  type.bytes =
      numElements(type.shape) * static_cast<int64_t>(dtypeSize(*dtype));
  if (v.bytes() != type.bytes)
    return where + " declares " + std::to_string(v.bytes()) +
           " bytes but its type needs " + std::to_string(type.bytes);

  // The global type (unset: the local one) and the layout relating them.
  type.global = type.shape;
  if (v.has_global_type()) {
    if (v.global_type().dtype() != v.type().dtype())
      return where + " has a global element type other than its local one";
    type.global.assign(v.global_type().shape().begin(),
                       v.global_type().shape().end());
    if (checkedCount(type.global, *dtype) < 0)
      return where + " has an invalid global shape";
  }
  std::string error;
  std::optional<layout::TensorLayout> layout =
      layoutFromProto(v.layout(), stageMesh(), type.global, error);
  if (!layout)
    return where + ": " + error;
  if (stages.numStages() > 1 && !stages.ownMeshes()) {
    // No layout names the stage axis: a stage holds whole tensors on it.
    const std::string &stageAxis = mesh->axisName(0);
    bool named =
        std::find(v.layout().partial().begin(), v.layout().partial().end(),
                  stageAxis) != v.layout().partial().end();
    for (const plan::Layout::DimAxes &d : v.layout().dims())
      named |= std::find(d.axes().begin(), d.axes().end(), stageAxis) !=
               d.axes().end();
    if (named)
      return where + " is laid out as " + layout->toString(*mesh) +
             ", over the stage axis '" + stageAxis +
             "'; a pipelined plan's layouts name only the other axes";
  }
  type.globalBytes =
      numElements(type.global) * static_cast<int64_t>(dtypeSize(*dtype));
  type.layout = std::move(*layout);
  // A padded value: persistent state whose leading block the model sees.
  type.logical = type.global;
  type.logicalBytes = type.globalBytes;
  if (!v.logical_shape().empty()) {
    if (v.kind() != plan::Value::PARAMETER && v.kind() != plan::Value::BUFFER &&
        v.kind() != plan::Value::OPTIMIZER_STATE)
      return where + " has a logical shape, but only parameters, buffers "
                     "and optimizer state are padded";
    type.logical.assign(v.logical_shape().begin(), v.logical_shape().end());
    bool within = type.logical.size() == type.global.size();
    for (size_t d = 0; within && d < type.logical.size(); ++d)
      within = type.logical[d] >= 0 && type.logical[d] <= type.global[d];
    if (!within)
      return where + " has logical shape " + formatShape(type.logical) +
             ", not a leading block of its global shape " +
             formatShape(type.global);
    type.logicalBytes =
        numElements(type.logical) * static_cast<int64_t>(dtypeSize(*dtype));
  }
  return "";
}

/// Checks a value's kind and where it lives: in the state or the step
/// arena, within its bounds, or in place of an earlier persistent value.
std::string Executor::Impl::checkValueStorage(const plan::Value &v,
                                              const std::string &where,
                                              const ValueType &type) const {
  int32_t i = v.id();
  bool persistent = isPersistent(v.kind()) || v.has_in_place_of();
  if (!isPersistent(v.kind()) && v.kind() != plan::Value::INPUT &&
      v.kind() != plan::Value::TEMPORARY &&
      v.kind() != plan::Value::HYPERPARAMETER)
    return where + " has an unknown kind";
  if (v.kind() == plan::Value::HYPERPARAMETER &&
      (v.name() != "lr" && v.name() != "step"))
    return where + " is a hyperparameter other than lr and step";
  if (v.kind() == plan::Value::HYPERPARAMETER &&
      (!type.shape.empty() || !isFloat(type.dtype)))
    return where + " must be a floating-point scalar";
  if ((v.kind() == plan::Value::HYPERPARAMETER ||
       v.kind() == plan::Value::CONSTANT) &&
      !type.layout.isReplicated())
    return where + " is laid out as " + type.layout.toString(*stageMesh()) +
           ", but constants and hyperparameters must be replicated";
  int64_t bytes = type.bytes;
  int64_t limit = persistent ? program->state_bytes() : program->arena_bytes();
  if (v.offset() < 0 || v.offset() > limit || bytes > limit - v.offset())
    return where + " lies outside its memory (offset " +
           std::to_string(v.offset()) + ", " + std::to_string(bytes) +
           " bytes)";
  // Kernels read and write whole elements in place.
  const auto elementBytes = static_cast<int64_t>(dtypeSize(type.dtype));
  if (v.offset() % elementBytes != 0)
    return where + " is at offset " + std::to_string(v.offset()) +
           ", not a multiple of its " + std::to_string(elementBytes) +
           "-byte " + dtypeName(type.dtype) + " elements";
  if (v.has_in_place_of()) {
    int32_t t = v.in_place_of();
    if (v.kind() != plan::Value::TEMPORARY || t < 0 || t >= i ||
        !isPersistent(program->values(t).kind()) ||
        program->values(t).kind() == plan::Value::CONSTANT ||
        program->values(t).offset() != v.offset() ||
        program->values(t).bytes() != bytes || views[t].dtype != type.dtype ||
        views[t].shape != type.shape)
      return where + " is not a valid in-place update of value #" +
             std::to_string(t);
  }
  return "";
}

/// A parameter's, buffer's or constant's initial data is the GLOBAL tensor
/// (every rank keeps its shard; a padded value's logical block), unless a
/// seeded initializer computes it; an optimizer state's is optional.
std::string Executor::Impl::checkInitialData(const plan::Value &v,
                                             const std::string &where,
                                             const ValueType &type) const {
  bool seeded =
      (v.kind() == plan::Value::PARAMETER || v.kind() == plan::Value::BUFFER) &&
      v.data().empty() && v.has_init();
  if (isPersistent(v.kind()) && v.kind() != plan::Value::OPTIMIZER_STATE &&
      !seeded) {
    if (v.data().empty() && type.logicalBytes > 0) {
      if (!requireData)
        return "";
      return where + " has no initial data (was the model compiled "
                     "without weights?)";
    }
    if (static_cast<int64_t>(v.data().size()) != type.logicalBytes)
      return where + " has " + std::to_string(v.data().size()) +
             " bytes of data but needs " + std::to_string(type.logicalBytes) +
             (type.logical != type.global ? " (its logical shape)"
              : type.global != type.shape ? " (its global type)"
                                          : "");
  }
  if (v.kind() == plan::Value::OPTIMIZER_STATE && !v.data().empty() &&
      static_cast<int64_t>(v.data().size()) != type.logicalBytes)
    return where + " has initial data of the wrong size";
  return "";
}

/// Checks one value: kinds, local and global types, layout, storage and
/// initial data. Records its view, global shape and layout. Whether the
/// local shape is the layout's shard of the global one is checked later
/// (checkLocalShapes), so that a wrong instruction result is reported by
/// the instruction's rule, which names the op and its source.
std::string Executor::Impl::validateValue(const plan::Value &v,
                                          std::vector<bool> &defined) {
  std::string where = "value #" + std::to_string(v.id()) +
                      (v.name().empty() ? "" : " ('" + v.name() + "')");
  int32_t i = v.id();
  ValueType type;
  if (std::string e = readValueType(v, where, type); !e.empty())
    return e;
  if (v.has_micro_batch() && v.kind() != plan::Value::INPUT)
    return where + " holds a micro-batch, but only inputs are split into "
                   "micro-batches";
  if (std::string e = checkValueStorage(v, where, type); !e.empty())
    return e;
  if (std::string e = checkInitialData(v, where, type); !e.empty())
    return e;
  views[i] = {type.dtype, std::move(type.shape), nullptr};
  globalShapes[i] = std::move(type.global);
  logicalShapes[i] = std::move(type.logical);
  layouts[i] = std::move(type.layout);
  defined[i] = v.kind() != plan::Value::TEMPORARY;
  return "";
}

std::string Executor::Impl::checkLocalShapes() const {
  for (const plan::Value &v : program->values()) {
    int32_t i = v.id();
    const layout::Mesh *on = stageMesh();
    Shape expected =
        on ? layouts[i].localShape(*on, globalShapes[i]) : globalShapes[i];
    if (expected != views[i].shape)
      return "value #" + std::to_string(i) +
             (v.name().empty() ? "" : " ('" + v.name() + "')") +
             " has local shape " + formatShape(views[i].shape) +
             ", but its global shape " + formatShape(globalShapes[i]) +
             (on ? " laid out as " + layouts[i].toString(*on) + " on mesh " +
                       on->toString()
                 : std::string(" in a plan without a mesh")) +
             " gives " + formatShape(expected);
  }
  return "";
}

/// An in-place update is the last word on its target: once per target, and
/// no instruction reads the target after it.
std::string Executor::Impl::checkInPlaceUpdates(const Liveness &live) const {
  int n = program->values_size();
  std::vector<bool> updated(n, false);
  for (int i = 0; i < n; ++i) {
    const plan::Value &v = program->values(i);
    if (!v.has_in_place_of())
      continue;
    int32_t t = v.in_place_of();
    if (updated[t])
      return "value #" + std::to_string(t) + " is updated in place twice";
    updated[t] = true;
    if (live.definedAt[i] < 0 || live.lastUse[t] > live.definedAt[i])
      return "value #" + std::to_string(t) +
             " is read after it is updated in place";
  }
  return "";
}

/// Outputs are defined and replicated; they live to the end of the step.
std::string Executor::Impl::checkOutputs(Liveness &live) {
  int n = program->values_size();
  for (const auto &out : program->outputs()) {
    if (out.value() < 0 || out.value() >= n || !live.defined[out.value()])
      return "output '" + out.name() + "' is not a defined value";
    if (!layouts[out.value()].isReplicated())
      return "output '" + out.name() + "' (value #" +
             std::to_string(out.value()) + ") is laid out as " +
             describeLayout(out.value()) +
             "; model outputs must be replicated on every rank";
    live.lastUse[out.value()] = program->instructions_size();
    outputIds[out.name()] = out.value();
  }
  return "";
}

/// A reshape's result may share its operand's bytes; the operand then
/// lives as long as either is used.
std::string Executor::Impl::checkAliases(Liveness &live) const {
  int n = program->values_size();
  for (int i = 0; i < n; ++i) {
    const plan::Value &v = program->values(i);
    if (!v.has_alias_of())
      continue;
    int32_t t = v.alias_of();
    const plan::Instruction *def =
        live.definedAt[i] >= 0 ? &program->instructions(live.definedAt[i])
                               : nullptr;
    // The reshape reads the target, or another alias of it.
    auto reads = [&](const plan::Instruction &inst) {
      int32_t operand = inst.operands_size() ? inst.operands(0) : -1;
      return operand == t || (operand >= 0 && operand < n &&
                              program->values(operand).has_alias_of() &&
                              program->values(operand).alias_of() == t);
    };
    if (t < 0 || t >= n || !def || def->op() != "reshape" || !reads(*def) ||
        program->values(t).kind() != plan::Value::TEMPORARY ||
        program->values(t).has_in_place_of() ||
        program->values(t).has_alias_of() ||
        program->values(t).bytes() != v.bytes() ||
        program->values(t).offset() != v.offset())
      return "value #" + std::to_string(i) +
             " is not a valid alias of value #" + std::to_string(t) +
             " (the result of a reshape of it, at the same offset)";
    live.lastUse[t] = std::max(live.lastUse[t], live.lastUse[i]);
  }
  return "";
}

/// The memory plan: no two step-arena values that are live at once may
/// share bytes. Inputs live from the start, temporaries from their
/// instruction, both until their last use (outputs to the end).
std::string Executor::Impl::checkMemoryPlan(const Liveness &live) const {
  struct Interval {
    int from, to;
    int64_t begin, end;
    int32_t id;
  };
  std::vector<Interval> intervals;
  for (int i = 0; i < program->values_size(); ++i) {
    const plan::Value &v = program->values(i);
    int lastUse = live.lastUse[i], definedAt = live.definedAt[i];
    if (v.kind() == plan::Value::INPUT ||
        v.kind() == plan::Value::HYPERPARAMETER)
      intervals.push_back(
          {-1, std::max(lastUse, 0), v.offset(), v.offset() + v.bytes(), i});
    else if (v.kind() == plan::Value::TEMPORARY && !v.has_in_place_of() &&
             !v.has_alias_of())
      intervals.push_back({definedAt, std::max(lastUse, definedAt), v.offset(),
                           v.offset() + v.bytes(), i});
  }
  // An instruction's scratch lives while it runs.
  for (int i = 0; i < program->instructions_size(); ++i) {
    const plan::Instruction &inst = program->instructions(i);
    if (inst.scratch_bytes() > 0)
      intervals.push_back({i, i, inst.scratch_offset(),
                           inst.scratch_offset() + inst.scratch_bytes(),
                           -1 - i});
  }
  auto describe = [](const Interval &a) {
    return (a.id >= 0
                ? "value #" + std::to_string(a.id)
                : "the scratch of instruction #" + std::to_string(-1 - a.id)) +
           " (bytes [" + std::to_string(a.begin) + ", " +
           std::to_string(a.end) + "), instructions " + std::to_string(a.from) +
           " to " + std::to_string(a.to) + ")";
  };
  std::sort(
      intervals.begin(), intervals.end(),
      [](const Interval &a, const Interval &b) { return a.begin < b.begin; });
  for (size_t a = 0; a < intervals.size(); ++a)
    for (size_t b = a + 1;
         b < intervals.size() && intervals[b].begin < intervals[a].end; ++b)
      if (intervals[a].from <= intervals[b].to &&
          intervals[b].from <= intervals[a].to &&
          intervals[a].begin < intervals[a].end &&
          intervals[b].begin < intervals[b].end)
        return "the memory plan overlaps " + describe(intervals[a]) + " and " +
               describe(intervals[b]) + " while both are live";
  return "";
}

std::string Executor::Impl::validate() {
  program = &plan.stages(stage).program();
  int64_t arenaSize = program->arena_bytes(),
          stateSize = program->state_bytes();
  if (arenaSize < 0 || arenaSize > kMaxBytes || stateSize < 0 ||
      stateSize > kMaxBytes)
    return "the plan's memory sizes are invalid";

  int n = program->values_size();
  views.assign(n, {});
  globalShapes.assign(n, {});
  logicalShapes.assign(n, {});
  layouts.assign(n, {});
  Liveness live{std::vector<bool>(n, false), std::vector<int>(n, -1),
                std::vector<int>(n, -1)};
  for (int i = 0; i < n; ++i) {
    const plan::Value &v = program->values(i);
    if (v.id() != i)
      return "value ids must be 0, 1, 2, ... in order";
    if (std::string e = validateValue(v, live.defined); !e.empty())
      return e;
  }

  // Instructions: known ops, valid ids, defined before use, shapes right.
  std::vector<layout::MeshAxis> meshAxes;
  if (stageMesh())
    meshAxes = stageMesh()->axes();
  for (int i = 0; i < program->instructions_size(); ++i)
    if (std::string e = validateInstruction(i, meshAxes, live); !e.empty())
      return e;
  if (std::string e = checkInPlaceUpdates(live); !e.empty())
    return e;
  if (std::string e = checkOutputs(live); !e.empty())
    return e;
  if (std::string e = checkAliases(live); !e.empty())
    return e;
  if (std::string e = checkLocalShapes(); !e.empty())
    return e;
  if (std::string e = checkMemoryPlan(live); !e.empty())
    return e;
  if (stages.numStages() == 1)
    return "";
  return planMessages();
}

std::string validatePlan(const plan::Plan &plan, Backend &backend) {
  // Each stage as its first rank checks it, in an executor of its own (a
  // check leaves its steps behind); the one copy of the plan moves between
  // them.
  plan::Plan copy = plan;
  int32_t numStages = 1;
  for (int32_t s = 0; s < numStages; ++s) {
    Executor::Impl impl;
    impl.plan = std::move(copy);
    impl.backend = &backend;
    // A plan loom simulate wrote has no weights; nothing here runs it.
    impl.requireData = false;
    std::string e = impl.validateMesh();
    if (e.empty())
      e = mapStages(impl.plan, impl.meshPtr(), impl.stages);
    if (e.empty()) {
      numStages = impl.stages.numStages();
      impl.stage = s;
      impl.rank = impl.stages.ranks[s].front();
      e = impl.validate();
      if (!e.empty() && numStages > 1)
        e = "stage " + std::to_string(s) + ": " + e;
    }
    if (!e.empty())
      return e;
    copy = std::move(impl.plan);
  }
  std::vector<PlanInput> inputs;
  std::vector<PlanStateValue> state;
  std::string e = collectPlanInputs(copy, inputs);
  return e.empty() ? collectPlanState(copy, state) : e;
}

} // namespace loom::rt
