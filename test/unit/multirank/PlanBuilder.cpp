//===- PlanBuilder.cpp - Hand-built partitioned plans for tests -----------===//

#include "PlanBuilder.h"

#include "StagedBackend.h"
#include "runtime/io/CheckpointStore.h"

#include "common/layout/TensorLayout.h"
#include "runtime/PlanLayout.h"
#include "common/plan/CollectiveScratch.h"
#include "runtime/comm/Collectives.h"

#include <cstring>
#include <stdexcept>
#include <thread>

namespace loom::test {

namespace {
int64_t alignUp(int64_t n) { return (n + 63) / 64 * 64; }

bool isState(plan::Value::Kind kind) {
  return kind == plan::Value::PARAMETER || kind == plan::Value::BUFFER ||
         kind == plan::Value::CONSTANT || kind == plan::Value::OPTIMIZER_STATE;
}
} // namespace

PlanBuilder::PlanBuilder(std::vector<std::pair<std::string, int64_t>> axes) {
  plan_.set_format_version(kPlanFormatVersion);
  plan_.set_producer("test");
  plan_.mutable_schedule()->set_kind(plan::Schedule::SINGLE);
  plan_.mutable_schedule()->set_micro_batches(1);
  plan::Stage *stage = plan_.add_stages();
  std::vector<layout::MeshAxis> meshAxes;
  for (auto &[name, size] : axes) {
    plan::Mesh::Axis *a = plan_.mutable_mesh()->add_axes();
    a->set_name(name);
    a->set_size(size);
    meshAxes.push_back({name, size});
  }
  int64_t devices = 1;
  if (!meshAxes.empty()) {
    std::string error;
    mesh_ = layout::Mesh::create(meshAxes, error);
    if (!mesh_)
      throw std::runtime_error(error);
    devices = mesh_->numDevices();
  }
  for (int64_t r = 0; r < devices; ++r)
    stage->add_ranks(r);
}

int32_t PlanBuilder::value(plan::Value::Kind kind, const std::string &name,
                           rt::Shape global, DimAxes dims,
                           std::vector<std::string> partial, rt::DType dtype) {
  plan::Program &p = program();
  plan::Value *v = p.add_values();
  int32_t id = p.values_size() - 1;
  v->set_id(id);
  v->set_kind(kind);
  v->set_name(name);
  plan::Layout *layout = v->mutable_layout();
  for (const std::vector<std::string> &axes : dims) {
    plan::Layout::DimAxes *d = layout->add_dims();
    for (const std::string &a : axes)
      d->add_axes(a);
  }
  for (const std::string &a : partial)
    layout->add_partial(a);
  // The local shape: the global one divided by each dimension's axes (a
  // name the mesh lacks divides by 1, for tests of invalid layouts).
  rt::Shape local = global;
  for (size_t d = 0; d < dims.size() && d < local.size(); ++d)
    for (const std::string &a : dims[d])
      if (const layout::Mesh *mesh = meshOfStage())
        if (std::optional<int> index = mesh->axisIndex(a))
          local[d] /= mesh->axisSize(*index);
  v->mutable_type()->set_dtype(static_cast<plan::DType>(dtype));
  v->mutable_global_type()->set_dtype(static_cast<plan::DType>(dtype));
  for (int64_t e : local)
    v->mutable_type()->add_shape(e);
  for (int64_t e : global)
    v->mutable_global_type()->add_shape(e);
  int64_t bytes = rt::numElements(local) * rt::dtypeSize(dtype);
  v->set_bytes(bytes);
  if (isState(kind)) {
    v->set_offset(p.state_bytes());
    p.set_state_bytes(p.state_bytes() + alignUp(std::max<int64_t>(bytes, 1)));
  } else {
    v->set_offset(p.arena_bytes());
    p.set_arena_bytes(p.arena_bytes() + alignUp(std::max<int64_t>(bytes, 1)));
  }
  return id;
}

int32_t PlanBuilder::parameter(const std::string &name, rt::Shape global,
                               const std::vector<float> &data, DimAxes dims,
                               std::vector<std::string> partial) {
  int32_t id = value(plan::Value::PARAMETER, name, std::move(global),
                     std::move(dims), std::move(partial));
  program().mutable_values(id)->set_data(
      std::string(reinterpret_cast<const char *>(data.data()),
                  data.size() * sizeof(float)));
  return id;
}

int32_t PlanBuilder::seededParameter(const std::string &name, rt::Shape global,
                                     DimAxes dims, double low, double high,
                                     uint64_t seed) {
  int32_t id =
      value(plan::Value::PARAMETER, name, std::move(global), std::move(dims));
  plan::Initializer *init = program().mutable_values(id)->mutable_init();
  init->set_distribution("uniform");
  init->set_low(low);
  init->set_high(high);
  init->set_seed(seed);
  return id;
}

plan::Instruction &PlanBuilder::instruction(const std::string &op,
                                            std::vector<int32_t> operands,
                                            std::vector<int32_t> results,
                                            const std::string &location) {
  plan::Instruction *inst = program().add_instructions();
  inst->set_op(op);
  for (int32_t id : operands)
    inst->add_operands(id);
  for (int32_t id : results)
    inst->add_results(id);
  inst->set_location(location);
  return *inst;
}

void PlanBuilder::setInt(plan::Instruction &inst, const std::string &name,
                         int64_t v) {
  plan::Attribute *a = inst.add_attributes();
  a->set_name(name);
  a->set_int_value(v);
}

void PlanBuilder::setInts(plan::Instruction &inst, const std::string &name,
                          std::vector<int64_t> v) {
  plan::Attribute *a = inst.add_attributes();
  a->set_name(name);
  for (int64_t x : v)
    a->mutable_ints_value()->add_values(x);
}

void PlanBuilder::setBool(plan::Instruction &inst, const std::string &name,
                          bool v) {
  plan::Attribute *a = inst.add_attributes();
  a->set_name(name);
  a->set_bool_value(v);
}

int32_t PlanBuilder::allGather(int32_t in, int64_t axis, int64_t dim,
                               rt::Shape global, DimAxes dims,
                               std::vector<std::string> partial) {
  int32_t out = temp(std::move(global), std::move(dims), std::move(partial));
  plan::Instruction &inst = instruction("all_gather", {in}, {out});
  setInt(inst, "axis", axis);
  setInt(inst, "dim", dim);
  return out;
}

int32_t PlanBuilder::allReduce(int32_t in, std::vector<int64_t> axes,
                               rt::Shape global, DimAxes dims,
                               std::vector<std::string> partial) {
  int32_t out = temp(std::move(global), std::move(dims), std::move(partial));
  setInts(instruction("all_reduce", {in}, {out}), "axes", std::move(axes));
  return out;
}

int32_t PlanBuilder::reduceScatter(int32_t in, int64_t axis, int64_t dim,
                                   rt::Shape global, DimAxes dims,
                                   std::vector<std::string> partial) {
  int32_t out = temp(std::move(global), std::move(dims), std::move(partial));
  plan::Instruction &inst = instruction("reduce_scatter", {in}, {out});
  setInt(inst, "axis", axis);
  setInt(inst, "dim", dim);
  return out;
}

void PlanBuilder::output(const std::string &name, int32_t id) {
  plan::Program::Output *out = program().add_outputs();
  out->set_name(name);
  out->set_value(id);
}

void PlanBuilder::training(const std::string &optimizer, double lr) {
  plan::Training *t = plan_.mutable_training();
  t->set_loss("mse");
  t->set_optimizer(optimizer);
  t->set_lr(lr);
  t->set_lr_schedule("constant");
}

void PlanBuilder::pipeline(plan::Schedule::Kind kind, int32_t microBatches) {
  if (!mesh_)
    throw std::runtime_error("a pipelined plan needs a mesh");
  plan_.mutable_schedule()->set_kind(kind);
  plan_.mutable_schedule()->set_micro_batches(microBatches);
  plan_.clear_stages();
  int64_t stages = mesh_->axisSize(0);
  for (int64_t s = 0; s < stages; ++s) {
    plan::Stage *stage = plan_.add_stages();
    stage->set_index(static_cast<int32_t>(s));
    for (int64_t r = 0; r < mesh_->numDevices(); ++r)
      if (mesh_->coordinates(r)[0] == s)
        stage->add_ranks(r);
  }
  stage_ = 0;
}

void PlanBuilder::pipelineOnSubmeshes(
    const std::vector<std::vector<std::pair<std::string, int64_t>>> &meshes,
    plan::Schedule::Kind kind, int32_t microBatches) {
  plan_.mutable_schedule()->set_kind(kind);
  plan_.mutable_schedule()->set_micro_batches(microBatches);
  plan_.clear_stages();
  stageMeshes_.clear();
  int64_t devices = 0;
  for (size_t s = 0; s < meshes.size(); ++s) {
    plan::Stage *stage = plan_.add_stages();
    stage->set_index(static_cast<int32_t>(s));
    std::vector<layout::MeshAxis> axes;
    for (const auto &[name, size] : meshes[s]) {
      plan::Mesh::Axis *a = stage->mutable_mesh()->add_axes();
      a->set_name(name);
      a->set_size(size);
      axes.push_back({name, size});
    }
    std::string error;
    std::optional<layout::Mesh> mesh = layout::Mesh::create(axes, error);
    if (!mesh)
      throw std::runtime_error(error);
    for (int64_t r = 0; r < mesh->numDevices(); ++r)
      stage->add_ranks(devices + r);
    devices += mesh->numDevices();
    stageMeshes_.push_back(std::move(*mesh));
  }
  plan_.mutable_mesh()->clear_axes();
  plan::Mesh::Axis *world = plan_.mutable_mesh()->add_axes();
  world->set_name("devices");
  world->set_size(devices);
  stage_ = 0;
}

const layout::Mesh *PlanBuilder::meshOfStage() const {
  if (!stageMeshes_.empty())
    return &stageMeshes_[stage_];
  return mesh_ ? &*mesh_ : nullptr;
}

int32_t PlanBuilder::microBatchInput(const std::string &name, int32_t k,
                                     rt::Shape global, DimAxes dims,
                                     rt::DType dtype) {
  int32_t id = value(plan::Value::INPUT, name, std::move(global),
                     std::move(dims), {}, dtype);
  program().mutable_values(id)->set_micro_batch(k);
  return id;
}

plan::Plan &PlanBuilder::plan() {
  for (plan::Stage &stage : *plan_.mutable_stages()) {
    plan::Program &p = *stage.mutable_program();
    for (plan::Instruction &inst : *p.mutable_instructions()) {
      if (!rt::isCollectiveOp(inst.op()) || inst.scratch_bytes() > 0 ||
          inst.operands_size() != 1 || inst.results_size() != 1)
        continue;
      const plan::Value &in = p.values(inst.operands(0));
      const plan::Value &out = p.values(inst.results(0));
      int dim = -1, toDim = -1;
      for (const plan::Attribute &a : inst.attributes()) {
        if (a.name() == "dim")
          dim = static_cast<int>(a.int_value());
        if (a.name() == "to_dim")
          toDim = static_cast<int>(a.int_value());
      }
      int64_t bytes =
          rt::collectiveScratch(
              inst.op(), {in.type().shape().begin(), in.type().shape().end()},
              {out.type().shape().begin(), out.type().shape().end()},
              static_cast<int64_t>(
                  rt::dtypeSize(static_cast<rt::DType>(in.type().dtype()))),
              dim, toDim)
              .total();
      if (bytes == 0)
        continue;
      inst.set_scratch_bytes(bytes);
      inst.set_scratch_offset(p.arena_bytes());
      p.set_arena_bytes(p.arena_bytes() + alignUp(bytes));
    }
  }
  return plan_;
}

plan::Instruction &PlanBuilder::send(int32_t value, int64_t peerStage,
                                     int64_t tag) {
  plan::Instruction &inst = instruction("send", {value}, {});
  setInt(inst, "peer_stage", peerStage);
  setInt(inst, "tag", tag);
  return inst;
}

int32_t PlanBuilder::recv(rt::Shape global, int64_t peerStage, int64_t tag,
                          DimAxes dims) {
  int32_t out = temp(std::move(global), std::move(dims));
  plan::Instruction &inst = instruction("recv", {}, {out});
  setInt(inst, "peer_stage", peerStage);
  setInt(inst, "tag", tag);
  return out;
}

std::vector<float> iota(int64_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(i) * scale + offset;
  return v;
}

std::vector<float> values(const rt::TensorView &v) {
  const float *p = v.as<float>();
  return std::vector<float>(p, p + v.numElements());
}

rt::TensorView viewOf(std::vector<float> &data, rt::Shape shape) {
  return {rt::DType::F32, std::move(shape), data.data()};
}

std::vector<double> matmul(const std::vector<double> &a,
                           const std::vector<double> &b, int64_t n, int64_t k,
                           int64_t m) {
  std::vector<double> c(n * m, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t l = 0; l < k; ++l)
        c[i * m + j] += a[i * k + l] * b[l * m + j];
  return c;
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

std::string runRanks(const plan::Plan &plan, int64_t n,
                     const std::function<void(RankRun &)> &body) {
  std::vector<std::unique_ptr<rt::Communicator>> comms =
      rt::createThreadsCommunicators(n);
  std::vector<std::unique_ptr<rt::Backend>> backends(n);
  std::vector<RankRun> runs(n);
  // Creation involves no other rank: create every executor, and run the
  // body (which may communicate) only if all of them exist.
  auto onEveryRank = [&](const std::function<void(RankRun &)> &fn) {
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < n; ++r)
      threads.emplace_back([&, r] { fn(runs[r]); });
    for (std::thread &t : threads)
      t.join();
  };
  for (int64_t r = 0; r < n; ++r) {
    runs[r].rank = r;
    runs[r].comm = comms[r].get();
  }
  onEveryRank([&](RankRun &run) {
    backends[run.rank] = createTestBackend();
    backends[run.rank]->setNumThreads(1);
    run.backend = backends[run.rank].get();
    comms[run.rank] =
        wrapTestCommunicator(std::move(comms[run.rank]), *run.backend);
    run.comm = comms[run.rank].get();
    run.exec = rt::Executor::create(plan, *run.backend, run.error,
                                    {run.rank, run.comm});
  });
  for (RankRun &run : runs)
    if (!run.exec)
      return "rank " + std::to_string(run.rank) + ": " + run.error;
  onEveryRank(body);
  return "";
}

std::map<std::string, std::vector<float>>
checkpointTensors(const std::string &path, std::string &error, int *files) {
  std::map<std::string, std::vector<float>> out;
  std::optional<rt::CheckpointManifest> ckpt = rt::openCheckpoint(path, error);
  if (!ckpt)
    return out;
  if (files)
    *files = 0;
  for (const rt::CheckpointEntry &e : ckpt->tensors) {
    std::optional<rt::HostBuffer> data =
        rt::readCheckpointTensor(*ckpt, e, error);
    if (!data || data->dtype != rt::DType::F32) {
      if (data)
        error = e.name + ": not f32";
      return {};
    }
    out[e.name] = values(data->view());
    if (files)
      *files += static_cast<int>(e.shards.size());
  }
  return out;
}

} // namespace loom::test
