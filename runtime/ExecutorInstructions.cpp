//===- ExecutorInstructions.cpp - A plan's instructions, checked ----------===//
//
// Executor::Impl::validate() makes every instruction of this rank's stage a
// Step: a known op (a kernel of the backend, a collective, a send or a
// recv), operands defined before use and fresh results, the op's shape
// rule, and its scratch in the step arena; a collective never runs over a
// pipelined plan's stage axis, and a send or recv names another stage and a
// tag the runtime leaves to plans. planMessages then pairs every send with
// its recv in the peer stage and finds the blocks each rank sends or
// receives.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutorImpl.h"

#include "common/ops/KernelScratch.h"
#include "common/ops/OpRules.h"
#include "common/plan/CollectiveScratch.h"

#include <algorithm>

namespace loom::rt {

namespace {

Attrs toAttrs(const plan::Instruction &inst) {
  Attrs attrs;
  for (const plan::Attribute &a : inst.attributes()) {
    switch (a.value_case()) {
    case plan::Attribute::kIntValue:
      attrs.set(a.name(), a.int_value());
      break;
    case plan::Attribute::kFloatValue:
      attrs.set(a.name(), a.float_value());
      break;
    case plan::Attribute::kStringValue:
      attrs.set(a.name(), a.string_value());
      break;
    case plan::Attribute::kBoolValue:
      attrs.set(a.name(), a.bool_value());
      break;
    case plan::Attribute::kIntsValue:
      attrs.set(a.name(), std::vector<int64_t>(a.ints_value().values().begin(),
                                               a.ints_value().values().end()));
      break;
    default:
      break;
    }
  }
  return attrs;
}

} // namespace

std::string describeInstruction(int64_t index, const plan::Instruction &inst) {
  return "instruction #" + std::to_string(index) + " (" + inst.op() +
         (inst.location().empty() ? "" : " at " + inst.location()) + ")";
}

/// Checks instruction `index`: a known op, valid ids, operands defined
/// before use and fresh results, shapes right, its scratch; then records
/// it as a step (and a collective's statistics).
std::string Executor::Impl::validateInstruction(
    int index, const std::vector<layout::MeshAxis> &axes, Liveness &live) {
  int n = program->values_size();
  const plan::Instruction &inst = program->instructions(index);
  std::string at = describeInstruction(index, inst);
  Step::Kind kind = isCollectiveOp(inst.op()) ? Step::Collective
                    : inst.op() == "send"     ? Step::Send
                    : inst.op() == "recv"     ? Step::Recv
                                              : Step::Kernel;
  bool collective = kind == Step::Collective;
  const KernelFn *kernel =
      kind == Step::Kernel ? backend->findKernel(inst.op()) : nullptr;
  if (kind == Step::Kernel && !kernel)
    return at + ": backend '" + backend->name() + "' does not support op '" +
           inst.op() + "'";
  Step step{kind, kernel, toAttrs(inst), {}, {}, &inst, -1, {}, {}};
  std::vector<ops::TypeRef> operandTypes, resultTypes;
  for (int32_t id : inst.operands()) {
    if (id < 0 || id >= n || !live.defined[id])
      return at + ": operand " + std::to_string(id) +
             " is not a value defined earlier";
    operandTypes.push_back({views[id].dtype, &views[id].shape});
    step.operands.push_back(id);
    live.lastUse[id] = index;
  }
  for (int32_t id : inst.results()) {
    if (id < 0 || id >= n || live.defined[id] ||
        program->values(id).kind() != plan::Value::TEMPORARY)
      return at + ": result " + std::to_string(id) +
             " is not a fresh temporary value";
    live.defined[id] = true;
    live.definedAt[id] = index;
    resultTypes.push_back({views[id].dtype, &views[id].shape});
    step.results.push_back(id);
  }
  std::string e;
  if (kind == Step::Send || kind == Step::Recv) {
    e = ops::checkAttrs(inst.op(), step.attrs);
    if (e.empty())
      e = checkPointToPoint(step);
  } else if (collective)
    e = ops::checkCollective(inst.op(), step.attrs, axes, operandTypes,
                             resultTypes);
  else
    e = ops::checkOp(inst.op(), step.attrs, operandTypes, resultTypes);
  if (e.empty() && collective)
    e = checkStageAxisUnused(step);
  if (e.empty())
    e = checkScratch(step, operandTypes, resultTypes);
  if (!e.empty())
    return at + ": " + e;
  if (kind == Step::Kernel && !step.results.empty()) {
    // An op reducing to a scalar (a class block's loss) sees its first
    // operand's block.
    int32_t blockOf = step.results[0];
    if (views[blockOf].shape.empty() && !step.operands.empty())
      blockOf = step.operands[0];
    Shard s = shard(blockOf);
    step.block = {std::move(s.globalShape), std::move(s.offsets)};
  }
  statOf.push_back(collective ? static_cast<int32_t>(collectiveStats.size())
                              : -1);
  if (collective)
    collectiveStats.push_back({index, inst.op(), inst.location(),
                               views[step.operands[0]].shape,
                               step.attrs.getInt("predicted_bytes", -1)});
  steps.push_back(std::move(step));
  return "";
}

/// A collective packing along an inner dimension, and a kernel whose rule
/// lists scratch, has the scratch its rule needs in the step arena
/// (common/plan/CollectiveScratch.h, common/ops/KernelScratch.h); other
/// instructions have none.
std::string
Executor::Impl::checkScratch(const Step &step,
                             const std::vector<ops::TypeRef> &operands,
                             const std::vector<ops::TypeRef> &results) const {
  const plan::Instruction &inst = *step.inst;
  int64_t need = 0;
  if (step.kind == Step::Collective) {
    const TensorView &in = views[step.operands[0]];
    const TensorView &out = views[step.results[0]];
    need = collectiveScratch(inst.op(), in.shape, out.shape,
                             static_cast<int64_t>(dtypeSize(in.dtype)),
                             static_cast<int>(step.attrs.getInt("dim", -1)),
                             static_cast<int>(step.attrs.getInt("to_dim", -1)))
               .total();
  } else if (step.kind == Step::Kernel) {
    need = ops::kernelScratchBytes(inst.op(), step.attrs, operands, results);
  }
  if (inst.scratch_bytes() == 0 && need == 0)
    return "";
  if (need == 0)
    return "has " + std::to_string(inst.scratch_bytes()) +
           " bytes of scratch but needs none";
  if (inst.scratch_bytes() < need)
    return "needs " + std::to_string(need) +
           " bytes of scratch in the step arena" +
           (step.kind == Step::Collective ? " to pack its chunks" : "") +
           ", but the plan gives it " +
           std::to_string(inst.scratch_bytes()) + "; recompile the model";
  if (inst.scratch_offset() < 0 ||
      inst.scratch_offset() > program->arena_bytes() - inst.scratch_bytes())
    return "its scratch (" + std::to_string(inst.scratch_bytes()) +
           " bytes at offset " + std::to_string(inst.scratch_offset()) +
           ") is outside the step arena (" +
           std::to_string(program->arena_bytes()) + " bytes)";
  return "";
}

/// In a pipelined plan, a collective's group stays within a stage: it
/// never runs over the stage axis (mesh axis 0).
std::string Executor::Impl::checkStageAxisUnused(const Step &step) const {
  if (stages.numStages() == 1 || stages.ownMeshes())
    return "";
  std::vector<int64_t> axes = step.attrs.getInts("axes");
  if (step.attrs.has("axis"))
    axes.push_back(step.attrs.getInt("axis"));
  if (std::find(axes.begin(), axes.end(), 0) == axes.end())
    return "";
  return "runs over the stage axis '" + mesh->axisName(0) +
         "'; a pipelined plan's collectives stay within a stage";
}

/// Checks a send's or recv's operands, results and attributes, and finds
/// its peer rank.
std::string Executor::Impl::checkPointToPoint(Step &step) const {
  bool sending = step.kind == Step::Send;
  if (sending && (step.operands.size() != 1 || !step.results.empty()))
    return "a send has one operand and no result, got " +
           std::to_string(step.operands.size()) + " and " +
           std::to_string(step.results.size());
  if (!sending && (!step.operands.empty() || step.results.size() != 1))
    return "a recv has no operand and one result, got " +
           std::to_string(step.operands.size()) + " and " +
           std::to_string(step.results.size());
  for (const char *name : {"peer_stage", "tag"}) {
    auto it = step.attrs.all().find(name);
    if (it == step.attrs.all().end() ||
        !std::holds_alternative<int64_t>(it->second))
      return std::string("needs the integer attribute '") + name + "'";
  }
  int64_t peer = step.attrs.getInt("peer_stage");
  int64_t tag = step.attrs.getInt("tag");
  int32_t n = stages.numStages();
  if (peer < 0 || peer >= n)
    return "peer_stage " + std::to_string(peer) +
           " is not a stage of the plan, which has " + std::to_string(n) +
           (n == 1 ? " stage" : " stages");
  if (peer == stage)
    return "peer_stage " + std::to_string(peer) +
           " is this instruction's own stage; send and recv connect two "
           "stages";
  if (tag < 0 || tag >= kReservedTagBase)
    return "tag " + std::to_string(tag) +
           " is outside [0, 2^62); the runtime keeps the tags from 2^62 for "
           "its own messages";
  step.tag = tag;
  return "";
}

std::string Executor::Impl::planMessage(Step &step, int32_t partner) const {
  bool sending = step.kind == Step::Send;
  int32_t peerStage = static_cast<int32_t>(step.attrs.getInt("peer_stage"));
  int32_t own = sending ? step.operands[0] : step.results[0];
  const plan::Program &theirs = plan.stages(peerStage).program();
  const plan::Instruction &other = theirs.instructions(partner);
  int32_t id = sending ? other.results(0) : other.operands(0);
  // checkMessages compared the global types; the peer's layout is read
  // against the peer stage's mesh.
  const plan::Value &v = theirs.values(id);
  std::string error;
  std::optional<layout::TensorLayout> peerLayout =
      layoutFromProto(v.layout(), stages.meshOf(peerStage, meshPtr()),
                      globalShapes[own], error);
  if (!peerLayout)
    return "its partner, stage " + std::to_string(peerStage) +
           "'s instruction #" + std::to_string(partner) + ", has value #" +
           std::to_string(id) + ": " + error;
  MessageEnd mine{stage, &layouts[own]}, peer{peerStage, &*peerLayout};
  std::vector<MessageBlock> blocks;
  if (std::string e =
          messageBlocks(stages, meshPtr(), sending ? mine : peer,
                        sending ? peer : mine, globalShapes[own], blocks);
      !e.empty())
    return e;
  Shard local = shard(own);
  for (const MessageBlock &b : blocks) {
    if ((sending ? b.from : b.to) != rank)
      continue;
    // The block relative to this rank's buffer.
    Shard block;
    block.globalShape = local.localShape;
    block.localShape = b.shape;
    for (size_t d = 0; d < b.offsets.size(); ++d)
      block.offsets.push_back(b.offsets[d] - local.offsets[d]);
    bool whole = b.shape == local.localShape;
    step.pieces.push_back({sending ? b.to : b.from, std::move(block), whole});
  }
  return "";
}

/// In a pipelined plan, every send has its recv in the peer stage (and
/// back), and each moves the blocks the two ends' layouts give.
std::string Executor::Impl::planMessages() {
  std::map<int32_t, int32_t> partners;
  if (std::string e = checkMessages(plan, stage, partners); !e.empty())
    return e;
  for (int32_t i = 0; i < static_cast<int32_t>(steps.size()); ++i) {
    Step &step = steps[i];
    if (step.kind != Step::Send && step.kind != Step::Recv)
      continue;
    if (std::string e = planMessage(step, partners.at(i)); !e.empty())
      return describeInstruction(i, *step.inst) + ": " + e;
  }
  return "";
}

} // namespace loom::rt
