//===- Executor.cpp - Create an executor for a plan and a rank ------------===//
//
// Executor::create, which makes a runnable executor of a plan, in order:
// the mesh and this rank's place in it, the stages, the validation of this
// rank's stage's program, the plan-wide inputs and state, the collectives'
// runner, memory, and the initial data; then the executor's interface
// (inputs, outputs, state) and its accessors. Its other parts are in the
// files ExecutorImpl.h lists.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"

#include "runtime/ExecutorImpl.h"

namespace loom::rt {

std::unique_ptr<Executor> Executor::create(plan::Plan plan, Backend &backend,
                                           std::string &error,
                                           RankContext ctx) {
  std::unique_ptr<Executor> exec(new Executor());
  exec->impl = std::make_unique<Impl>();
  Impl &impl = *exec->impl;
  impl.plan = std::move(plan);
  impl.backend = &backend;
  if (std::string e = impl.validateMesh(); !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  if (std::string e = impl.checkRankContext(ctx); !e.empty()) {
    error = e;
    return nullptr;
  }
  if (std::string e = mapStages(impl.plan, impl.meshPtr(), impl.stages);
      !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  impl.stage = impl.stages.stageOf[impl.rank];
  if (impl.stages.numStages() > 1 && !impl.comm) {
    // Unreachable past checkRankContext (a pipelined mesh has several
    // devices), but the stages must be able to message each other.
    error = "this plan is pipelined over " +
            std::to_string(impl.stages.numStages()) +
            " stages and needs a communicator";
    return nullptr;
  }
  if (std::string e = impl.validate(); !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  std::vector<PlanStateValue> planState;
  std::string e = collectPlanInputs(impl.plan, impl.planInputs);
  if (e.empty())
    e = collectPlanState(impl.plan, planState);
  if (!e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  impl.setUpCollectives();
  if (std::string e = impl.allocateState(); !e.empty()) {
    error = e;
    return nullptr;
  }
  if (std::string e = impl.load(); !e.empty()) {
    error = "invalid plan: " + e;
    return nullptr;
  }
  if (std::string e = impl.allocateArena(); !e.empty()) {
    error = e;
    return nullptr;
  }
  for (const PlanStateValue &s : planState)
    exec->stateInfo.push_back(
        {s.name, s.kind, s.value, s.dtype, s.shape, s.stage});
  for (size_t i = 0; i < impl.planInputs.size(); ++i) {
    const PlanInput &in = impl.planInputs[i];
    impl.inputIndex.emplace(in.name, i);
    exec->inputInfo.push_back({in.name, in.dtype, in.shape});
  }
  for (const plan::Value &v : impl.program->values()) {
    if (v.kind() == plan::Value::HYPERPARAMETER)
      impl.hyperIds[v.name()] = v.id();
    if (v.kind() == plan::Value::INPUT)
      impl.inputIds[v.name()].push_back(v.id());
  }
  for (const auto &out : impl.program->outputs())
    exec->outputInfo.push_back({out.name(), impl.views[out.value()].dtype,
                                impl.views[out.value()].shape});
  return exec;
}

Executor::~Executor() = default;

int64_t Executor::rank() const { return impl->rank; }
int64_t Executor::numRanks() const { return impl->numDevices; }
Communicator *Executor::communicator() const { return impl->comm; }
int32_t Executor::stage() const { return impl->stage; }
int32_t Executor::numStages() const { return impl->stages.numStages(); }
const std::vector<int64_t> &Executor::stageRanks(int32_t s) const {
  return impl->stages.ranks[s];
}

} // namespace loom::rt
