//===- Checkpoint.cpp - Save and restore training state -------------------===//

#include "runtime/Checkpoint.h"

#include "runtime/comm/Communicator.h"
#include "runtime/io/Npy.h"
#include "runtime/io/Trace.h"

#include <filesystem>
#include <set>

namespace loom::rt {

const char *stateKindName(int kind) {
  switch (kind) {
  case plan::Value::PARAMETER:
    return "parameter";
  case plan::Value::BUFFER:
    return "buffer";
  default:
    return "optimizer_state";
  }
}

bool saveCheckpoint(const Executor &exec, const std::string &root,
                    std::string &error, int64_t keepLast,
                    std::string *savedDir) {
  // Rank 0 writes; its first failure is kept by the writer rather than
  // returned, so that it keeps taking part in the gathers the other ranks
  // are in.
  bool writer = exec.rank() == 0;
  CheckpointWriter out;
  if (writer)
    out.begin(root, exec.stepsTaken());
  // A tensor that several stages hold (by one name) is written once.
  std::set<std::string> written;
  for (const StateInfo &s : exec.state()) {
    HostBuffer global;
    if (!exec.gatherState(s, global, error)) {
      if (writer)
        out.abandon();
      return false;
    }
    if (writer && written.insert(s.name).second)
      out.add(s.name, stateKindName(s.kind), global.view());
  }
  std::string stepDir = writer ? out.commit(keepLast) : "";
  std::string failure = out.error();
  // Every rank learns whether rank 0 succeeded.
  if (Communicator *comm = exec.communicator(); comm && exec.numRanks() > 1) {
    RankGroup world(exec.numRanks());
    for (int64_t r = 0; r < exec.numRanks(); ++r)
      world[r] = r;
    int32_t failed = failure.empty() ? 0 : 1;
    // A flag in host memory: through the host side of a device
    // communicator.
    if (std::string e = comm->hostCommunicator().allReduceSum(world, DType::I32,
                                                              &failed, 1);
        !e.empty()) {
      error = root + ": " + e;
      return false;
    }
    if (failed && failure.empty())
      failure = root + ": rank 0 could not write the checkpoint";
  }
  if (!failure.empty()) {
    error = failure;
    return false;
  }
  if (savedDir)
    *savedDir = writer ? stepDir
                       : (std::filesystem::path(root) /
                          checkpointStepName(exec.stepsTaken()))
                             .string();
  return true;
}

bool loadCheckpoint(Executor &exec, const std::string &path,
                    std::string &error) {
  std::optional<CheckpointManifest> ckpt = openCheckpoint(path, error);
  if (!ckpt)
    return false;
  std::string manifest = ckpt->dir + "/manifest.json";
  // A parameter or buffer the plan does not have: another model. (An
  // optimizer's state the plan lacks is left: training may go on under
  // another optimizer.)
  std::set<std::string> planNames;
  for (const StateInfo &s : exec.state())
    planNames.insert(s.name);
  for (const CheckpointEntry &e : ckpt->tensors)
    if (e.kind != "optimizer_state" && !planNames.count(e.name)) {
      error = manifest + ": the " + e.kind + " '" + e.name +
              "' is not in the plan: a checkpoint of another model";
      return false;
    }
  // Read everything first, so that a bad checkpoint changes nothing.
  std::vector<std::pair<const StateInfo *, HostBuffer>> loaded;
  for (const StateInfo &s : exec.state()) {
    const CheckpointEntry *entry = ckpt->find(s.name);
    std::optional<HostBuffer> data;
    std::string file =
        ckpt->dir + "/" + (entry ? entry->file : checkpointFileName(s.name));
    if (entry)
      data = readCheckpointTensor(*ckpt, *entry, error);
    else if (ckpt->format == 1) // its manifest need not list every tensor
      data = readNpy(file, error);
    else
      error = manifest + ": has no " + std::string(stateKindName(s.kind)) +
              " '" + s.name + "', which the plan needs";
    if (!data)
      return false;
    // BF16 tensors are saved as f32 .npy files.
    if (data->dtype != s.dtype &&
        !(s.dtype == DType::BF16 && data->dtype == DType::F32)) {
      error = file + ": element type " + dtypeName(data->dtype) +
              " but the plan's '" + s.name + "' is " + dtypeName(s.dtype);
      return false;
    }
    if (data->shape != s.shape) {
      error = file + ": shape " + formatShape(data->shape) +
              " but the plan's '" + s.name + "' is " + formatShape(s.shape);
      return false;
    }
    loaded.emplace_back(&s, std::move(*data));
  }
  for (auto &[s, data] : loaded)
    if (!exec.setStateFromGlobal(*s, data.view(), error))
      return false;
  exec.setStepsTaken(ckpt->step);
  return true;
}

} // namespace loom::rt
