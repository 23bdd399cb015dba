//===- ExecutorTraining.cpp - Training steps and the state they update ----===//
//
// trainStep (the learning rate of the plan's schedule and the step number
// written into the plan's hyperparameters, then a step, then its loss), and
// the persistent state a checkpoint saves and restores: this rank's shard
// of a parameter, buffer or optimizer state, its global value gathered from
// every rank (and, in a pipelined plan, sent from the owner stage to every
// other), and its shard set from a global value.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutorImpl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loom::rt {

namespace {

/// Writes a float into a floating-point scalar of any width.
void setScalar(const TensorView &v, double x) {
  switch (v.dtype) {
  case DType::F32:
    *v.as<float>() = static_cast<float>(x);
    break;
  case DType::F16:
    *v.as<uint16_t>() = floatToHalf(static_cast<float>(x));
    break;
  default:
    *v.as<uint16_t>() = floatToBf16(static_cast<float>(x));
    break;
  }
}

double getScalar(const TensorView &v) {
  switch (v.dtype) {
  case DType::F32:
    return *v.as<float>();
  case DType::F16:
    return halfToFloat(*v.as<uint16_t>());
  case DType::BF16:
    return bf16ToFloat(*v.as<uint16_t>());
  default:
    return 0;
  }
}

} // namespace

bool Executor::isTraining() const { return impl->plan.has_training(); }

double Executor::learningRate(int64_t t) const {
  const plan::Training &training = impl->plan.training();
  double lr = training.lr();
  if (training.lr_schedule() != "cosine")
    return lr;
  int64_t warmup = training.warmup_steps(), total = training.total_steps();
  if (t <= warmup && warmup > 0)
    return lr * static_cast<double>(t) / warmup;
  double span = static_cast<double>(std::max<int64_t>(total - warmup, 1));
  double progress = std::clamp((t - warmup) / span, 0.0, 1.0);
  return training.min_lr() +
         0.5 * (lr - training.min_lr()) * (1.0 + std::cos(M_PI * progress));
}

bool Executor::trainStep(std::string &error, TraceWriter *trace, double &loss,
                         double &lr) {
  if (!isTraining()) {
    error = "the plan is not a training step; compile it with --train";
    return false;
  }
  int64_t t = steps + 1;
  lr = learningRate(t);
  auto lrIt = impl->hyperIds.find("lr"), stepIt = impl->hyperIds.find("step");
  if (lrIt != impl->hyperIds.end())
    impl->onHost(impl->views[lrIt->second], false, true,
                 [&](const TensorView &v) { setScalar(v, lr); });
  if (stepIt != impl->hyperIds.end())
    impl->onHost(
        impl->views[stepIt->second], false, true,
        [&](const TensorView &v) { setScalar(v, static_cast<double>(t)); });
  if (!run(error, trace))
    return false;
  TensorView lossView = output("loss");
  if (!lossView.data || lossView.numElements() != 1) {
    error = "the training plan has no scalar output 'loss'";
    return false;
  }
  loss = getScalar(lossView);
  steps = t;
  return true;
}

TensorView Executor::stateTensor(const StateInfo &s) const {
  if (s.stage != impl->stage)
    return {};
  return impl->hostView(s.value);
}

bool Executor::Impl::gatherInStage(const StateInfo &s, HostBuffer &global,
                                   std::string &error) const {
  const TensorView local = hostView(s.value);
  const layout::TensorLayout &layout = layouts[s.value];
  global.dtype = local.dtype;
  global.shape = globalShapes[s.value];
  global.bytes.assign(numElements(global.shape) * dtypeSize(local.dtype), 0);
  // Every rank of the stage takes the same branch: it depends on the plan
  // alone.
  const RankGroup &group = stages.ranks[stage];
  int64_t n = static_cast<int64_t>(group.size());
  if (n == 1 || layout.isReplicated()) {
    std::memcpy(global.bytes.data(), local.data, local.bytes());
    return true;
  }
  size_t bytes = local.bytes();
  if (bytes == 0)
    return true;
  std::vector<unsigned char> all(bytes * n);
  memory.charge(static_cast<int64_t>(all.size()));
  std::string e;
  if (comm->takesDeviceMemory() && !direct()) {
    // A device communicator gathers device memory; read the result back.
    void *gathered = memory.remember(backend->allocate(bytes * n), bytes * n);
    if (!gathered) {
      memory.release(static_cast<int64_t>(all.size()));
      error = "gathering '" + s.name + "': out of device memory";
      return false;
    }
    e = comm->allGather(group, views[s.value].data, gathered,
                        static_cast<int64_t>(bytes));
    if (e.empty())
      backend->copyToHost(all.data(), gathered, bytes * n);
    memory.forget(gathered);
    backend->deallocate(gathered);
  } else {
    e = comm->allGather(group, local.data, all.data(),
                        static_cast<int64_t>(bytes));
  }
  memory.release(static_cast<int64_t>(all.size()));
  if (!e.empty()) {
    error = "gathering '" + s.name + "' from every rank: " + e;
    return false;
  }
  // One replica of every block; partial sums added in member order, so
  // that every rank computes bitwise the same result.
  bool partial = !layout.partialAxes().empty();
  for (int64_t i = 0; i < n; ++i) {
    Shard theirs =
        shardOf(layout, stageMesh(), global.shape, stages.shardRank(group[i]));
    if (!theirs.firstReplica)
      continue;
    TensorView block{local.dtype, local.shape, all.data() + i * bytes};
    copyShardIn(block, theirs, global.view(), partial);
  }
  return true;
}

bool Executor::Impl::gatherLogical(const StateInfo &s, HostBuffer &global,
                                   std::string &error) const {
  if (!gatherInStage(s, global, error))
    return false;
  if (global.shape != logicalShapes[s.value])
    global = blockOf(global.view(), logicalShapes[s.value],
                     std::vector<int64_t>(global.shape.size(), 0));
  return true;
}

bool Executor::gatherState(const StateInfo &s, HostBuffer &global,
                           std::string &error) const {
  if (impl->stages.numStages() == 1)
    return impl->gatherLogical(s, global, error);
  // Pipelined: the owner stage gathers, its first rank sends the result to
  // every other rank. The barrier first: once every rank is here, every
  // message of the plan has been received, so the runtime's tags cannot be
  // taken for a plan's (MPI maps tags modulo its bound).
  Communicator &comm = *impl->comm;
  RankGroup world(impl->numDevices);
  for (int64_t r = 0; r < impl->numDevices; ++r)
    world[r] = r;
  if (std::string e = comm.barrier(world); !e.empty()) {
    error = "gathering '" + s.name + "': " + e;
    return false;
  }
  int64_t tag = kReservedTagBase + impl->stateMessages++;
  const std::vector<int64_t> &owners = impl->stages.ranks[s.stage];
  int64_t bytes =
      numElements(s.shape) * static_cast<int64_t>(dtypeSize(s.dtype));
  if (s.stage == impl->stage) {
    if (!impl->gatherLogical(s, global, error))
      return false;
    if (impl->rank != owners[0])
      return true;
    for (int64_t r = 0; r < impl->numDevices; ++r) {
      if (impl->stages.stageOf[r] == s.stage)
        continue;
      if (std::string e = comm.send(r, tag, global.bytes.data(), bytes);
          !e.empty()) {
        error =
            "sending '" + s.name + "' to rank " + std::to_string(r) + ": " + e;
        return false;
      }
    }
    return true;
  }
  global.dtype = s.dtype;
  global.shape = s.shape;
  global.bytes.assign(static_cast<size_t>(bytes), 0);
  if (std::string e = comm.recv(owners[0], tag, global.bytes.data(), bytes);
      !e.empty()) {
    error = "receiving '" + s.name + "' from stage " + std::to_string(s.stage) +
            ": " + e;
    return false;
  }
  return true;
}

std::optional<Executor::StateBlock>
Executor::stateBlock(const StateInfo &s) const {
  if (s.stage != impl->stage)
    return std::nullopt;
  Shard mine = impl->shard(s.value);
  const Shape &logical = impl->logicalShapes[s.value];
  StateBlock block;
  block.offsets = mine.offsets;
  block.shape = logicalBlockShape(mine, logical);
  block.holdsValue = mine.holdsValue;
  block.partial = !impl->layouts[s.value].partialAxes().empty();
  block.saves = mine.holdsValue && mine.firstReplica;
  return block;
}

RankGroup
Executor::Impl::partialGroup(const layout::TensorLayout &layout) const {
  const layout::Mesh &mesh = *stageMesh(); // a partial sum names mesh axes
  const std::vector<int> &summed = layout.partialAxes();
  std::vector<int64_t> mine = mesh.coordinates(stages.shardRank(rank));
  RankGroup group;
  for (int64_t r : stages.ranks[stage]) {
    std::vector<int64_t> theirs = mesh.coordinates(stages.shardRank(r));
    bool same = true;
    for (int a = 0; same && a < mesh.numAxes(); ++a)
      same = theirs[a] == mine[a] ||
             std::find(summed.begin(), summed.end(), a) != summed.end();
    if (same)
      group.push_back(r);
  }
  return group;
}

bool Executor::readStateBlock(const StateInfo &s, HostBuffer &block,
                              std::string &error) const {
  std::optional<StateBlock> where = stateBlock(s);
  if (!where) {
    error = "'" + s.name + "' is stage " + std::to_string(s.stage) +
            "'s, not this rank's";
    return false;
  }
  // The block is the leading corner of the local storage.
  const TensorView local = impl->hostView(s.value);
  block =
      blockOf(local, where->shape, std::vector<int64_t>(local.shape.size(), 0));
  if (!where->partial || !impl->comm)
    return true;
  RankGroup group = impl->partialGroup(impl->layouts[s.value]);
  if (std::string e = impl->comm->hostCommunicator().allReduceSum(
          group, block.dtype, block.bytes.data(), numElements(block.shape));
      !e.empty()) {
    error = "summing the addends of '" + s.name + "': " + e;
    return false;
  }
  return true;
}

bool Executor::setStateBlock(const StateInfo &s, const TensorView &block,
                             std::string &error) {
  std::optional<StateBlock> where = stateBlock(s);
  if (!where)
    return true;
  const TensorView &local = impl->views[s.value];
  if (block.shape != where->shape) {
    error = "'" + s.name + "': this rank's block has shape " +
            formatShape(where->shape) + ", got " + formatShape(block.shape);
    return false;
  }
  HostBuffer converted;
  TensorView value = block;
  if (block.dtype != local.dtype) {
    if (!isFloat(block.dtype) || !isFloat(local.dtype) ||
        !convertTensor(block, local.dtype, converted, "'" + s.name + "'",
                       error)) {
      error = "'" + s.name + "' has element type " + dtypeName(local.dtype) +
              ", got " + dtypeName(block.dtype);
      return false;
    }
    value = converted.view();
  }
  impl->onHost(local, false, true, [&](const TensorView &host) {
    if (where->holdsValue)
      placeLeading(value, host);
    else if (host.bytes())
      std::memset(host.data, 0, host.bytes());
  });
  return true;
}

bool Executor::setStateFromGlobal(const StateInfo &s, const TensorView &global,
                                  std::string &error) {
  if (s.stage != impl->stage)
    return true;
  const Shape &shape = impl->logicalShapes[s.value];
  if (global.shape != shape) {
    error = "'" + s.name + "' has shape " + formatShape(shape) + ", got " +
            formatShape(global.shape);
    return false;
  }
  // This rank's block of the global value.
  StateBlock where = *stateBlock(s);
  HostBuffer block = blockOf(global, where.shape, where.offsets);
  return setStateBlock(s, block.view(), error);
}

} // namespace loom::rt
