//===- CheckpointReshard.cpp - A checkpoint for another plan --------------===//

#include "runtime/CheckpointReshard.h"

#include "runtime/Checkpoint.h"
#include "runtime/ExecutorImpl.h"
#include "runtime/PlanLayout.h"
#include "runtime/io/CheckpointStore.h"

#include <algorithm>
#include <optional>
#include <set>

namespace loom::rt {

std::string savedTensors(const plan::Plan &plan,
                         std::vector<SavedTensor> &tensors) {
  tensors.clear();
  std::optional<layout::Mesh> mesh;
  std::string error;
  if (!meshFromProto(plan.mesh(), mesh, error))
    return error;
  const layout::Mesh *planMesh = mesh ? &*mesh : nullptr;
  StageMap map;
  if (std::string e = mapStages(plan, planMesh, map); !e.empty())
    return e;
  std::vector<PlanStateValue> state;
  if (std::string e = collectPlanState(plan, state); !e.empty())
    return e;
  std::set<std::string> seen;
  for (const PlanStateValue &value : state) {
    if (!seen.insert(value.name).second)
      continue;
    const plan::Program &program = plan.stages(value.stage).program();
    if (value.value < 0 || value.value >= program.values_size())
      return "'" + value.name + "': no value #" + std::to_string(value.value);
    const layout::Mesh *stageMesh = map.meshOf(value.stage, planMesh);
    std::optional<layout::TensorLayout> layout =
        layoutFromProto(program.values(value.value).layout(), stageMesh,
                        value.storedShape, error);
    if (!layout)
      return "'" + value.name + "': " + error;
    SavedTensor saved{value, {}};
    for (int64_t rank : map.ranks[value.stage]) {
      Shard shard =
          shardOf(*layout, stageMesh, value.storedShape, map.shardRank(rank));
      if (!shard.holdsValue || !shard.firstReplica)
        continue;
      SavedBlock block{shard.offsets, logicalBlockShape(shard, value.shape)};
      if (numElements(block.shape) == 0 && numElements(value.shape) > 0)
        continue;
      bool again = std::any_of(
          saved.blocks.begin(), saved.blocks.end(),
          [&](const SavedBlock &b) { return b.offsets == block.offsets; });
      if (!again)
        saved.blocks.push_back(std::move(block));
    }
    tensors.push_back(std::move(saved));
  }
  return "";
}

namespace {

/// The tensors to write: with a plan, its tensors and blocks, checked
/// against the input; without, every tensor of the input whole.
bool targetTensors(const CheckpointManifest &ckpt, const plan::Plan *plan,
                   std::vector<SavedTensor> &targets, ReshardSummary &summary,
                   std::string &error) {
  if (!plan) {
    for (const CheckpointEntry &e : ckpt.tensors) {
      SavedTensor t;
      t.value.name = e.name;
      t.value.shape = e.shape;
      t.blocks.push_back({std::vector<int64_t>(e.shape.size(), 0), e.shape});
      targets.push_back(std::move(t));
    }
    return true;
  }
  if (std::string e = savedTensors(*plan, targets); !e.empty()) {
    error = "the plan: " + e;
    return false;
  }
  std::set<std::string> planNames;
  for (const SavedTensor &t : targets)
    planNames.insert(t.value.name);
  if (std::string e = checkForeignState(ckpt, planNames, &summary.dropped);
      !e.empty()) {
    error = e;
    return false;
  }
  for (const SavedTensor &t : targets) {
    std::optional<CheckpointEntry> entry;
    if (std::string e = findState(ckpt, t.value.name, t.value.kind,
                                  t.value.dtype, t.value.shape, entry);
        !e.empty()) {
      error = e;
      return false;
    }
  }
  return true;
}

} // namespace

bool reshardCheckpoint(const std::string &from, const plan::Plan *plan,
                       const std::string &to, ReshardSummary &summary,
                       std::string &error) {
  std::optional<CheckpointManifest> ckpt = openCheckpoint(from, error);
  if (!ckpt)
    return false;
  std::vector<SavedTensor> targets;
  if (!targetTensors(*ckpt, plan, targets, summary, error))
    return false;
  summary.step = ckpt->step;
  CheckpointWriter out;
  out.begin(to, ckpt->step);
  for (const SavedTensor &t : targets) {
    // Checked by targetTensors (a first-format manifest may not list it).
    const CheckpointEntry entry =
        *ckpt->entryOf(t.value.name, t.value.dtype, t.value.shape);
    for (const SavedBlock &b : t.blocks) {
      if (out.failed())
        break;
      std::optional<HostBuffer> data =
          readCheckpointBlock(*ckpt, entry, b.offsets, b.shape, error);
      if (!data) {
        out.abandon();
        return false;
      }
      // bf16 is stored as f32 files: back to bf16 (exactly), so that the
      // manifest keeps the tensor's type.
      HostBuffer bf16;
      if (entry.dtype == "bf16" &&
          !convertTensor(data->view(), DType::BF16, bf16,
                         "'" + entry.name + "'", error)) {
        out.abandon();
        return false;
      }
      out.addShard(entry.name, entry.kind, entry.shape, b.offsets,
                   entry.dtype == "bf16" ? bf16.view() : data->view());
      ++summary.files;
    }
    ++summary.tensors;
  }
  summary.dir = out.commit(0);
  if (summary.dir.empty()) {
    error = out.error();
    return false;
  }
  return true;
}

} // namespace loom::rt
