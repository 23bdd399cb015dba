//===- Pipeline.cpp - The stages of a pipelined plan, seen from one rank --===//

#include "runtime/Pipeline.h"

#include "runtime/PlanLayout.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace loom::rt {

namespace {

/// The largest element count a shape read from another stage may have.
constexpr int64_t kMaxElements = int64_t(1) << 40;

std::optional<DType> dtypeOf(const plan::TensorType &type) {
  if (type.dtype() >= 1 && type.dtype() <= 6)
    return static_cast<DType>(type.dtype());
  return std::nullopt;
}

/// Whether no dimension of `shape` is negative and its element count is in
/// range.
bool validShape(const Shape &shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) ||
        count > kMaxElements)
      return false;
  return true;
}

/// `type`'s shape, or nullopt when it is not valid.
std::optional<Shape> shapeOf(const plan::TensorType &type) {
  Shape shape(type.shape().begin(), type.shape().end());
  if (!validShape(shape))
    return std::nullopt;
  return shape;
}

/// A value's global type: its global_type, else its local type.
const plan::TensorType &globalTypeOf(const plan::Value &v) {
  return v.has_global_type() ? v.global_type() : v.type();
}

/// What the model sees of a value: the logical shape of a padded one (a
/// leading block of its global shape), else its global shape; nullopt when
/// either is not valid.
std::optional<Shape> logicalShapeOf(const plan::Value &v) {
  std::optional<Shape> global = shapeOf(globalTypeOf(v));
  if (!global || v.logical_shape().empty())
    return global;
  Shape logical(v.logical_shape().begin(), v.logical_shape().end());
  if (logical.size() != global->size())
    return std::nullopt;
  for (size_t d = 0; d < logical.size(); ++d)
    if (logical[d] < 0 || logical[d] > (*global)[d])
      return std::nullopt;
  return logical;
}

/// "value #3 ('x')", prefixed with its stage in a pipelined plan.
std::string describeValue(const plan::Plan &plan, int32_t stage,
                          const plan::Value &v) {
  std::string where = plan.stages_size() > 1
                          ? "stage " + std::to_string(stage) + "'s value #"
                          : "value #";
  return where + std::to_string(v.id()) +
         (v.name().empty() ? "" : " ('" + v.name() + "')");
}

std::string describeType(DType dtype, const Shape &shape) {
  return dtypeName(dtype) + formatShape(shape);
}

std::optional<int64_t> intAttr(const plan::Instruction &inst,
                               const std::string &name) {
  for (const plan::Attribute &a : inst.attributes())
    if (a.name() == name && a.value_case() == plan::Attribute::kIntValue)
      return a.int_value();
  return std::nullopt;
}

bool isPersistentState(int kind) {
  return kind == plan::Value::PARAMETER || kind == plan::Value::BUFFER ||
         kind == plan::Value::OPTIMIZER_STATE;
}

} // namespace

std::string mapStages(const plan::Plan &plan, const layout::Mesh *mesh,
                      StageMap &map) {
  int64_t devices = mesh ? mesh->numDevices() : 1;
  std::string meshName =
      mesh ? "the mesh " + mesh->toString() : std::string("a one-device plan");
  int32_t p = plan.stages_size();
  if (p == 0)
    return "the plan has no stage";
  for (int32_t s = 0; s < p; ++s)
    if (plan.stages(s).index() != s)
      return "stage #" + std::to_string(s) + " has index " +
             std::to_string(plan.stages(s).index()) +
             "; stages must be listed in order, with indices 0, 1, 2, ...";
  map.ranks.assign(p, {});
  map.stageOf.assign(devices, -1);
  map.positionOf.assign(devices, -1);
  map.meshes.clear();
  int32_t withMesh = 0;
  for (int32_t s = 0; s < p; ++s)
    withMesh += plan.stages(s).mesh().axes_size() > 0;
  if (withMesh != 0 && withMesh != p)
    return std::to_string(withMesh) + " of the plan's " + std::to_string(p) +
           " stages have a mesh of their own; stage meshes are given for "
           "every stage or for none";
  for (int32_t s = 0; s < withMesh; ++s) {
    std::optional<layout::Mesh> own;
    std::string error;
    if (!meshFromProto(plan.stages(s).mesh(), own, error))
      return "stage " + std::to_string(s) + "'s mesh: " + error;
    map.meshes.push_back(std::move(*own));
  }
  if (p == 1 && withMesh == 0 && plan.stages(0).ranks().empty()) {
    for (int64_t r = 0; r < devices; ++r) {
      map.ranks[0].push_back(r);
      map.stageOf[r] = 0;
      map.positionOf[r] = r;
    }
    return "";
  }
  for (int32_t s = 0; s < p; ++s) {
    for (int64_t r : plan.stages(s).ranks()) {
      if (r < 0 || r >= devices)
        return "stage " + std::to_string(s) + " lists rank " +
               std::to_string(r) + ", which is not a rank of " + meshName;
      if (map.stageOf[r] == s)
        return "stage " + std::to_string(s) + " lists rank " +
               std::to_string(r) + " twice";
      if (map.stageOf[r] >= 0)
        return "rank " + std::to_string(r) + " is in stages " +
               std::to_string(map.stageOf[r]) + " and " + std::to_string(s) +
               "; every rank runs exactly one stage";
      map.stageOf[r] = s;
      map.positionOf[r] = static_cast<int64_t>(map.ranks[s].size());
      map.ranks[s].push_back(r);
    }
  }
  for (int64_t r = 0; r < devices; ++r)
    if (map.stageOf[r] < 0)
      return "rank " + std::to_string(r) + " of " + meshName +
             " is in no stage; every rank runs exactly one stage";
  if (map.ownMeshes()) {
    for (int32_t s = 0; s < p; ++s)
      if (static_cast<int64_t>(map.ranks[s].size()) !=
          map.meshes[s].numDevices())
        return "stage " + std::to_string(s) + " lists " +
               std::to_string(map.ranks[s].size()) + " ranks, but its mesh " +
               map.meshes[s].toString() + " has " +
               std::to_string(map.meshes[s].numDevices()) +
               " devices; a stage lists one rank per device of its mesh";
    return "";
  }
  for (int32_t s = 1; s < p; ++s)
    if (map.ranks[s].size() != map.ranks[0].size())
      return "stage " + std::to_string(s) + " runs on " +
             std::to_string(map.ranks[s].size()) + " ranks but stage 0 on " +
             std::to_string(map.ranks[0].size()) +
             "; stages without meshes of their own run on as many ranks";
  if (p == 1)
    return "";
  if (!mesh || mesh->axisSize(0) != p)
    return "the plan has " + std::to_string(p) + " stages, but " +
           (mesh ? "the first axis of its mesh " + mesh->toString() +
                       " has size " + std::to_string(mesh->axisSize(0))
                 : std::string("no mesh")) +
           "; a pipelined plan's mesh enumerates the stages on its first "
           "axis, unless every stage has a mesh of its own";
  for (int32_t s = 0; s < p; ++s)
    for (int64_t r : map.ranks[s]) {
      int64_t coordinate = mesh->coordinates(r)[0];
      if (coordinate != s)
        return "stage " + std::to_string(s) + " lists rank " +
               std::to_string(r) + ", whose coordinate on the stage axis '" +
               mesh->axisName(0) + "' of " + mesh->toString() + " is " +
               std::to_string(coordinate) + "; stage " + std::to_string(s) +
               " runs on the ranks whose coordinate on it is " +
               std::to_string(s);
    }
  return "";
}

std::string messageBlocks(const StageMap &map, const layout::Mesh *planMesh,
                          const MessageEnd &from, const MessageEnd &to,
                          const Shape &globalShape,
                          std::vector<MessageBlock> &blocks) {
  blocks.clear();
  const std::vector<int64_t> &senders = map.ranks[from.stage];
  const std::vector<int64_t> &receivers = map.ranks[to.stage];
  const layout::Mesh *fromMesh = map.meshOf(from.stage, planMesh);
  const layout::Mesh *toMesh = map.meshOf(to.stage, planMesh);
  auto shardAt = [&](const MessageEnd &end, const layout::Mesh *mesh,
                     int64_t rank) {
    return shardOf(*end.layout, mesh, globalShape, map.shardRank(rank));
  };
  bool sameMesh =
      (!fromMesh && !toMesh) ||
      (fromMesh && toMesh && fromMesh->toString() == toMesh->toString());
  // Whether every rank holds what the rank at its position in the other
  // stage needs (a partial sum: the same summand).
  bool aligned = sameMesh && *from.layout == *to.layout &&
                 senders.size() == receivers.size();
  for (size_t q = 0; aligned && q < receivers.size(); ++q)
    aligned = map.shardRank(senders[q]) == map.shardRank(receivers[q]);
  if (aligned) {
    for (size_t q = 0; q < receivers.size(); ++q) {
      Shard shard = shardAt(to, toMesh, receivers[q]);
      blocks.push_back(
          {senders[q], receivers[q], shard.offsets, shard.localShape});
    }
    return "";
  }
  if (!from.layout->partialAxes().empty() || !to.layout->partialAxes().empty())
    return std::string("a partial sum (laid out as ") +
           (fromMesh ? from.layout->toString(*fromMesh) : "[]") + " on stage " +
           std::to_string(from.stage) +
           ") crosses only to a stage on the same mesh with the same "
           "layout; reduce it before it is sent";
  // The distinct blocks the senders hold, each with its holders' positions.
  struct Held {
    std::vector<int64_t> offsets;
    Shape shape;
    std::vector<size_t> holders;
  };
  std::vector<Held> held;
  std::map<std::vector<int64_t>, size_t> heldIndex;
  std::vector<size_t> heldBy(senders.size());
  for (size_t p = 0; p < senders.size(); ++p) {
    Shard shard = shardAt(from, fromMesh, senders[p]);
    auto [it, inserted] = heldIndex.emplace(shard.offsets, held.size());
    if (inserted)
      held.push_back({shard.offsets, shard.localShape, {}});
    held[it->second].holders.push_back(p);
    heldBy[p] = it->second;
  }
  for (size_t q = 0; q < receivers.size(); ++q) {
    Shard mine = shardAt(to, toMesh, receivers[q]);
    for (size_t h = 0; h < held.size(); ++h) {
      const Held &block = held[h];
      MessageBlock piece{0, receivers[q], {}, {}};
      bool empty = false;
      for (size_t d = 0; d < globalShape.size(); ++d) {
        int64_t lo = std::max(mine.offsets[d], block.offsets[d]);
        int64_t hi = std::min(mine.offsets[d] + mine.localShape[d],
                              block.offsets[d] + block.shape[d]);
        empty |= hi <= lo;
        piece.offsets.push_back(lo);
        piece.shape.push_back(std::max<int64_t>(hi - lo, 0));
      }
      if (empty)
        continue;
      size_t sender = q < senders.size() && heldBy[q] == h
                          ? q
                          : block.holders[q % block.holders.size()];
      piece.from = senders[sender];
      blocks.push_back(std::move(piece));
    }
  }
  return "";
}

int64_t microBatches(const plan::Plan &plan) {
  return std::max<int64_t>(plan.schedule().micro_batches(), 1);
}

namespace {
/// Ops whose result holds (some of) their first operand's values unchanged:
/// the index values an input feeds a gather or a loss with pass through
/// them, reshaped, sliced, or moved between the ranks of a partitioned plan.
bool movesValues(const std::string &op) {
  return op == "reshape" || op == "slice" || op == "local_split" ||
         op == "all_gather" || op == "all_to_all" || op == "broadcast";
}
} // namespace

std::string collectPlanInputs(const plan::Plan &plan,
                              std::vector<PlanInput> &inputs) {
  inputs.clear();
  int64_t m = microBatches(plan);
  std::map<std::string, size_t> index;
  // Per micro-batched name, the micro-batches some value holds.
  std::map<std::string, std::set<int64_t>> held;
  for (int32_t s = 0; s < plan.stages_size(); ++s) {
    for (const plan::Value &v : plan.stages(s).program().values()) {
      if (v.kind() != plan::Value::INPUT)
        continue;
      std::string where = describeValue(plan, s, v);
      std::optional<DType> dtype = dtypeOf(v.type());
      std::optional<Shape> shape = shapeOf(globalTypeOf(v));
      if (!dtype || !shape)
        return where + " has an invalid type";
      PlanInput input{v.name(), *dtype, *shape, v.has_micro_batch()};
      if (v.has_micro_batch()) {
        if (v.micro_batch() < 0 || v.micro_batch() >= m)
          return where + " holds micro-batch " +
                 std::to_string(v.micro_batch()) + ", but the schedule has " +
                 std::to_string(m) +
                 (m == 1 ? " micro-batch" : " micro-batches");
        if (shape->empty())
          return where +
                 " holds a micro-batch, but it is a scalar: micro-batches "
                 "are rows of dimension 0";
        if (__builtin_mul_overflow(input.shape[0], m, &input.shape[0]) ||
            !validShape(input.shape))
          return where + " is too large for " + std::to_string(m) +
                 " micro-batches";
        held[v.name()].insert(v.micro_batch());
      }
      auto [it, inserted] = index.emplace(v.name(), inputs.size());
      if (inserted) {
        inputs.push_back(std::move(input));
        continue;
      }
      const PlanInput &first = inputs[it->second];
      if (first.dtype != input.dtype || first.shape != input.shape ||
          first.microBatched != input.microBatched)
        return where + " gives input '" + v.name() + "' the type " +
               describeType(input.dtype, input.shape) +
               (input.microBatched ? " (in micro-batches)" : "") +
               ", but an earlier value gives it " +
               describeType(first.dtype, first.shape) +
               (first.microBatched ? " (in micro-batches)" : "") +
               "; the values of one input must agree";
    }
  }
  for (const auto &[name, ks] : held)
    if (static_cast<int64_t>(ks.size()) != m)
      return "input '" + name + "' has values for " +
             std::to_string(ks.size()) + " of the schedule's " +
             std::to_string(m) + " micro-batches; every micro-batch needs one";
  // Random integers index what they gather from (a gather's table axis, a
  // cross-entropy's classes), through the reshapes and slices between the
  // input and its use: the smallest such axis.
  std::map<std::string, int64_t> bounds;
  for (int32_t s = 0; s < plan.stages_size(); ++s) {
    const plan::Program &program = plan.stages(s).program();
    std::map<int32_t, const plan::Instruction *> definedBy;
    for (const plan::Instruction &inst : program.instructions())
      for (int32_t r : inst.results())
        definedBy[r] = &inst;
    auto validId = [&](int32_t id) {
      return id >= 0 && id < program.values_size();
    };
    for (const plan::Instruction &inst : program.instructions()) {
      bool gather = inst.op() == "gather";
      if ((!gather && inst.op() != "softmax_cross_entropy" &&
           inst.op() != "softmax_cross_entropy_grad") ||
          inst.operands_size() < 2)
        continue;
      int32_t table = inst.operands(0), indices = inst.operands(1);
      while (validId(indices) &&
             program.values(indices).kind() != plan::Value::INPUT) {
        auto def = definedBy.find(indices);
        if (def == definedBy.end() || def->second->operands_size() < 1 ||
            !movesValues(def->second->op()))
          break;
        indices = def->second->operands(0);
      }
      if (!validId(table) || !validId(indices) ||
          program.values(indices).kind() != plan::Value::INPUT)
        continue;
      std::optional<Shape> shape = logicalShapeOf(program.values(table));
      if (!shape || shape->empty())
        continue;
      int64_t axis = gather ? intAttr(inst, "axis").value_or(0)
                            : static_cast<int64_t>(shape->size()) - 1;
      if (axis < 0 || axis >= static_cast<int64_t>(shape->size()))
        continue;
      auto [it, inserted] =
          bounds.emplace(program.values(indices).name(), (*shape)[axis]);
      if (!inserted)
        it->second = std::min(it->second, (*shape)[axis]);
    }
  }
  for (PlanInput &input : inputs)
    if (auto it = bounds.find(input.name); it != bounds.end())
      input.randomBound = it->second;
  return "";
}

std::string collectPlanState(const plan::Plan &plan,
                             std::vector<PlanStateValue> &state) {
  state.clear();
  for (int32_t s = 0; s < plan.stages_size(); ++s) {
    for (const plan::Value &v : plan.stages(s).program().values()) {
      if (!isPersistentState(v.kind()))
        continue;
      std::optional<DType> dtype = dtypeOf(v.type());
      std::optional<Shape> shape = logicalShapeOf(v);
      std::optional<Shape> stored = shapeOf(globalTypeOf(v));
      if (!dtype || !shape || !stored)
        return describeValue(plan, s, v) + " has an invalid type";
      state.push_back({s, v.id(), v.kind(), v.name(), *dtype, *shape, *stored});
    }
  }
  return "";
}

std::string checkMessages(const plan::Plan &plan, int32_t stage,
                          std::map<int32_t, int32_t> &partners) {
  // One message end: its instruction and the local type of its value.
  struct End {
    int32_t inst;
    std::optional<DType> dtype;
    std::optional<Shape> shape;
  };
  // Both ends are one global tensor, each laid out on its own stage.
  using Key = std::tuple<std::string, int64_t, int64_t>; // op, peer, tag
  // The message ends of stage `s` with op `op`, peer stage `peer` and `tag`,
  // in program order.
  auto endsOf = [&](int32_t s, const std::string &op, int64_t peer,
                    int64_t tag) {
    const plan::Program &program = plan.stages(s).program();
    std::vector<End> ends;
    for (int32_t i = 0; i < program.instructions_size(); ++i) {
      const plan::Instruction &inst = program.instructions(i);
      if (inst.op() != op || intAttr(inst, "peer_stage") != peer ||
          intAttr(inst, "tag") != tag)
        continue;
      End end{i, std::nullopt, std::nullopt};
      const auto &ids = op == "send" ? inst.operands() : inst.results();
      if (ids.size() == 1 && ids[0] >= 0 && ids[0] < program.values_size()) {
        const plan::Value &v = program.values(ids[0]);
        end.dtype = dtypeOf(v.type());
        end.shape = shapeOf(globalTypeOf(v));
      }
      ends.push_back(std::move(end));
    }
    return ends;
  };
  const plan::Program &program = plan.stages(stage).program();
  std::map<Key, bool> checked;
  for (const plan::Instruction &inst : program.instructions()) {
    if (inst.op() != "send" && inst.op() != "recv")
      continue;
    int64_t peer = intAttr(inst, "peer_stage").value_or(-1);
    int64_t tag = intAttr(inst, "tag").value_or(-1);
    if (!checked.emplace(Key{inst.op(), peer, tag}, true).second)
      continue;
    bool sending = inst.op() == "send";
    std::vector<End> mine = endsOf(stage, inst.op(), peer, tag);
    std::vector<End> theirs = endsOf(static_cast<int32_t>(peer),
                                     sending ? "recv" : "send", stage, tag);
    auto at = [&](int32_t i) {
      const plan::Instruction &in = program.instructions(i);
      return "instruction #" + std::to_string(i) + " (" + in.op() +
             (in.location().empty() ? "" : " at " + in.location()) + "): ";
    };
    std::string peerName = "stage " + std::to_string(peer);
    std::string own = "stage " + std::to_string(stage);
    if (mine.size() != theirs.size())
      return at(mine.size() > theirs.size() ? mine[theirs.size()].inst
                                            : mine.back().inst) +
             peerName + (sending ? " receives " : " sends ") +
             std::to_string(theirs.size()) + " message" +
             (theirs.size() == 1 ? "" : "s") + " with tag " +
             std::to_string(tag) + (sending ? " from " : " to ") + own +
             ", but " + own + (sending ? " sends " : " receives ") +
             std::to_string(mine.size()) +
             (sending ? "" : "; a recv without its send would wait forever");
    for (size_t k = 0; k < mine.size(); ++k) {
      const End &a = mine[k], &b = theirs[k];
      partners[a.inst] = b.inst;
      if (b.dtype && b.shape && a.dtype == b.dtype && a.shape == b.shape)
        continue;
      std::string other = b.dtype && b.shape ? describeType(*b.dtype, *b.shape)
                                             : std::string("an invalid type");
      return at(a.inst) + (sending ? "sends " : "receives ") +
             describeType(*a.dtype, *a.shape) + ", but " + peerName +
             "'s instruction #" + std::to_string(b.inst) +
             (sending ? " receives " : " sends ") + other +
             "; both ends of a message are one global tensor";
    }
  }
  return "";
}

} // namespace loom::rt
