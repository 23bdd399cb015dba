//===- Checkpoint.cpp - Save and restore training state -------------------===//

#include "runtime/Checkpoint.h"

#include "runtime/comm/Communicator.h"
#include "runtime/io/Npy.h"
#include "runtime/io/Trace.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace loom::rt {

namespace fs = std::filesystem;

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

std::string checkpointFileName(const std::string &name) {
  std::string file;
  for (char c : name)
    file.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                           c == '-' || c == '_'
                       ? c
                       : '_');
  return file + ".npy";
}

bool saveCheckpoint(const Executor &exec, const std::string &dir,
                    std::string &error) {
  // Rank 0 writes; its first failure is remembered rather than returned, so
  // that it keeps taking part in the gathers the other ranks are in.
  bool writer = exec.rank() == 0;
  std::string failure;
  if (writer) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      failure =
          dir + ": cannot create the checkpoint directory: " + ec.message();
  }
  std::string manifest =
      "{\"format\": 1, \"step\": " + std::to_string(exec.stepsTaken()) +
      ", \"tensors\": [";
  bool first = true;
  // A tensor that several stages hold (by one name) is written once.
  std::set<std::string> written;
  for (const StateInfo &s : exec.state()) {
    HostBuffer global;
    if (!exec.gatherState(s, global, error))
      return false;
    if (!written.insert(s.name).second)
      continue;
    std::string file = checkpointFileName(s.name);
    if (writer && failure.empty() &&
        !writeNpy((fs::path(dir) / file).string(), global.view(), failure))
      failure = failure.empty() ? dir + ": cannot write " + file : failure;
    manifest += first ? "\n  " : ",\n  ";
    first = false;
    manifest += "{\"name\": ";
    appendJsonString(manifest, s.name);
    manifest += std::string(", \"kind\": \"") + stateKindName(s.kind) +
                "\", \"file\": ";
    appendJsonString(manifest, file);
    manifest += std::string(", \"dtype\": \"") + dtypeName(global.dtype) +
                "\", \"shape\": [";
    for (size_t d = 0; d < global.shape.size(); ++d)
      manifest += (d ? ", " : "") + std::to_string(global.shape[d]);
    manifest += "]}";
  }
  manifest += "\n]}\n";
  if (writer && failure.empty()) {
    std::ofstream out(fs::path(dir) / "manifest.json");
    out << manifest;
    if (!out)
      failure = dir + ": cannot write manifest.json";
  }
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
      error = dir + ": " + e;
      return false;
    }
    if (failed && failure.empty())
      failure = dir + ": rank 0 could not write the checkpoint";
  }
  if (!failure.empty()) {
    error = failure;
    return false;
  }
  return true;
}

bool loadCheckpoint(Executor &exec, const std::string &dir,
                    std::string &error) {
  std::ifstream in(fs::path(dir) / "manifest.json");
  if (!in) {
    error = dir + ": not a checkpoint (no manifest.json)";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string manifest = ss.str();
  size_t at = manifest.find("\"step\":");
  long long step = -1;
  if (at == std::string::npos ||
      std::sscanf(manifest.c_str() + at + 7, "%lld", &step) != 1 || step < 0) {
    error = dir + "/manifest.json: no valid \"step\"";
    return false;
  }
  // Read everything first, so that a bad checkpoint changes nothing.
  std::vector<std::pair<const StateInfo *, HostBuffer>> loaded;
  for (const StateInfo &s : exec.state()) {
    std::string path = (fs::path(dir) / checkpointFileName(s.name)).string();
    std::optional<HostBuffer> data = readNpy(path, error);
    if (!data)
      return false;
    // BF16 tensors are saved as f32 .npy files.
    if (data->dtype != s.dtype &&
        !(s.dtype == DType::BF16 && data->dtype == DType::F32)) {
      error = path + ": element type " + dtypeName(data->dtype) +
              " but the plan's '" + s.name + "' is " + dtypeName(s.dtype);
      return false;
    }
    if (data->shape != s.shape) {
      error = path + ": shape " + formatShape(data->shape) +
              " but the plan's '" + s.name + "' is " + formatShape(s.shape);
      return false;
    }
    loaded.emplace_back(&s, std::move(*data));
  }
  for (auto &[s, data] : loaded)
    if (!exec.setStateFromGlobal(*s, data.view(), error))
      return false;
  exec.setStepsTaken(step);
  return true;
}

} // namespace loom::rt
