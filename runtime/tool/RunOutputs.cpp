//===- RunOutputs.cpp - What `loom run` writes, and checks first ----------===//

#include "runtime/tool/RunOutputs.h"

#include "runtime/io/CheckpointStore.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace loom::rt {

namespace fs = std::filesystem;

namespace {

/// Whether two paths name the same existing file.
bool samePath(const std::string &a, const std::string &b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && fs::equivalent(a, b, ec) && !ec;
}

/// The nearest existing directory at or above `path`'s parent.
fs::path existingAncestor(const fs::path &path) {
  fs::path p = fs::absolute(path).parent_path();
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path())
    p = p.parent_path();
  return p;
}

std::string writableDirectory(const std::string &flag, const fs::path &dir,
                              const std::string &path) {
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return flag + " " + path + ": cannot write in " + dir.string() + ": " +
           std::strerror(errno);
  return "";
}

std::string checkFile(const std::string &flag, const std::string &path,
                      const std::vector<std::string> &inputs) {
  if (path.empty())
    return "";
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return flag + " " + path + ": is a directory; name a file";
  for (const std::string &in : inputs)
    if (samePath(path, in))
      return flag + " " + path +
             ": is an input of this run; writing it "
             "would destroy it";
  fs::path parent = fs::absolute(path).parent_path();
  if (!fs::is_directory(parent, ec))
    return flag + " " + path + ": the directory " + parent.string() +
           " does not exist";
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    return flag + " " + path + ": cannot write: " + std::strerror(errno);
  return writableDirectory(flag, parent, path);
}

std::string checkDirectory(const std::string &flag, const std::string &path) {
  if (path.empty())
    return "";
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    return flag + " " + path + ": is not a directory";
  if (flag == "--save" &&
      fs::is_regular_file(fs::path(path) / "manifest.json", ec))
    return flag + " " + path +
           ": holds a checkpoint of the first format "
           "(manifest.json at its top); save to another directory (--resume "
           "reads this one)";
  fs::path dir =
      fs::is_directory(path, ec) ? fs::path(path) : existingAncestor(path);
  return writableDirectory(flag, dir, path);
}

} // namespace

std::string checkRunOutputs(const RunOptions &o) {
  std::vector<std::string> inputs = {o.planPath, o.tokensFile};
  // --inputs/--data: NAME=FILE items, several to a flag when joined by ','.
  for (const std::string &flag : o.inputs) {
    std::stringstream items(flag);
    std::string item;
    while (std::getline(items, item, ','))
      if (size_t at = item.find('='); at != std::string::npos)
        inputs.push_back(item.substr(at + 1));
  }
  for (auto [flag, path] : {std::pair{"--trace", &o.traceFile},
                            std::pair{"--metrics", &o.metricsFile},
                            std::pair{"--comm-report", &o.commReportFile}})
    if (std::string bad = checkFile(flag, *path, inputs); !bad.empty())
      return bad;
  if (std::string bad = checkDirectory("--save", o.saveDir); !bad.empty())
    return bad;
  return checkDirectory("--outputs", o.outputsDir);
}

std::string checkTrainingData(const std::vector<IOInfo> &planInputs,
                              const std::vector<std::string> &given) {
  if (given.empty())
    return "";
  std::string missing;
  for (const IOInfo &in : planInputs)
    if (std::find(given.begin(), given.end(), in.name) == given.end())
      missing += (missing.empty() ? "'" : ", '") + in.name + "'";
  if (missing.empty())
    return "";
  return "--data gives no data for the plan's input" +
         std::string(missing.find(',') == std::string::npos ? " " : "s ") +
         missing +
         "; give every input (--data NAME=FILE.npy,...), or none to train on "
         "seeded random data";
}

std::string writeCommReport(const Executor &exec, const std::string &path) {
  if (path.empty())
    return "";
  std::ofstream os(path);
  if (!os)
    return "cannot write '" + path + "': " + std::strerror(errno);
  for (const Executor::CollectiveStat &s : exec.collectiveStats()) {
    double calls = static_cast<double>(std::max<int64_t>(s.calls, 1));
    os << "{\"instruction\": " << s.instruction << ", \"op\": \"" << s.op
       << "\", \"location\": \"" << s.location << "\", \"shape\": \""
       << formatShape(s.shape) << "\", \"calls\": " << s.calls
       << ", \"bytes_per_call\": "
       << format("%.1f", static_cast<double>(s.bytesReceived) / calls)
       << ", \"predicted_bytes\": " << s.predictedBytes
       << ", \"ms_per_call\": " << format("%.4f", 1e3 * s.seconds / calls)
       << "}\n";
  }
  os.close();
  if (!os)
    return "cannot write '" + path + "': " + std::strerror(errno);
  return "";
}

/// min / max / mean of a float output, for the summary line.
std::string summarize(const TensorView &v) {
  if (!isFloat(v.dtype) || v.numElements() == 0)
    return "";
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (int64_t i = 0; i < v.numElements(); ++i) {
    double x = v.dtype == DType::F32   ? v.as<float>()[i]
               : v.dtype == DType::F16 ? halfToFloat(v.as<uint16_t>()[i])
                                       : bf16ToFloat(v.as<uint16_t>()[i]);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  return " min " + format("%e", lo) + " max " + format("%e", hi) + " mean " +
         format("%e", sum / v.numElements());
}

/// Bytes for people: "512 bytes", "27.5 KiB", "1.2 MiB", "3.0 GiB".
std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  for (; value >= 1024 && unit < 3; ++unit)
    value /= 1024;
  return format("%.1f ", value) + units[unit];
}

/// The schedule's name, as the compiler's --schedule spells it.
const char *scheduleName(plan::Schedule::Kind kind) {
  switch (kind) {
  case plan::Schedule::SINGLE:
    return "single";
  case plan::Schedule::GPIPE:
    return "gpipe";
  case plan::Schedule::ONE_F_ONE_B:
    return "1f1b";
  case plan::Schedule::INTERLEAVED:
    return "interleaved";
  default:
    return "an unspecified schedule";
  }
}

} // namespace loom::rt
