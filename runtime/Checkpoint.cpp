//===- Checkpoint.cpp - Save and restore training state -------------------===//

#include "runtime/Checkpoint.h"

#include "runtime/io/Npy.h"
#include "runtime/io/Trace.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace loom::rt {

namespace fs = std::filesystem;

static const char *kindName(int kind) {
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
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error = dir + ": cannot create the checkpoint directory: " + ec.message();
    return false;
  }
  std::string manifest =
      "{\"format\": 1, \"step\": " + std::to_string(exec.stepsTaken()) +
      ", \"tensors\": [";
  bool first = true;
  for (const StateInfo &s : exec.state()) {
    TensorView v = exec.stateTensor(s);
    std::string file = checkpointFileName(s.name);
    if (!writeNpy((fs::path(dir) / file).string(), v, error))
      return false;
    manifest += first ? "\n  " : ",\n  ";
    first = false;
    manifest += "{\"name\": ";
    appendJsonString(manifest, s.name);
    manifest +=
        std::string(", \"kind\": \"") + kindName(s.kind) + "\", \"file\": ";
    appendJsonString(manifest, file);
    manifest += std::string(", \"dtype\": \"") + dtypeName(v.dtype) +
                "\", \"shape\": [";
    for (size_t d = 0; d < v.shape.size(); ++d)
      manifest += (d ? ", " : "") + std::to_string(v.shape[d]);
    manifest += "]}";
  }
  manifest += "\n]}\n";
  std::ofstream out(fs::path(dir) / "manifest.json");
  out << manifest;
  if (!out) {
    error = dir + ": cannot write manifest.json";
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
  std::vector<std::pair<TensorView, HostBuffer>> loaded;
  for (const StateInfo &s : exec.state()) {
    TensorView v = exec.stateTensor(s);
    std::string path = (fs::path(dir) / checkpointFileName(s.name)).string();
    std::optional<HostBuffer> data = readNpy(path, error);
    if (!data)
      return false;
    // BF16 tensors are saved as f32 .npy files.
    if (data->dtype != v.dtype &&
        !(v.dtype == DType::BF16 && data->dtype == DType::F32)) {
      error = path + ": element type " + dtypeName(data->dtype) +
              " but the plan's '" + s.name + "' is " + dtypeName(v.dtype);
      return false;
    }
    if (data->shape != v.shape) {
      error = path + ": shape " + formatShape(data->shape) +
              " but the plan's '" + s.name + "' is " + formatShape(v.shape);
      return false;
    }
    loaded.emplace_back(v, std::move(*data));
  }
  for (auto &[view, data] : loaded) {
    if (view.dtype == data.dtype) {
      std::memcpy(view.data, data.bytes.data(), view.bytes());
    } else {
      const float *src = reinterpret_cast<const float *>(data.bytes.data());
      for (int64_t i = 0; i < view.numElements(); ++i)
        view.as<uint16_t>()[i] = floatToBf16(src[i]);
    }
  }
  exec.setStepsTaken(step);
  return true;
}

} // namespace loom::rt
