//===- CheckpointStore.cpp - Checkpoint directories on disk ---------------===//

#include "runtime/io/CheckpointStore.h"

#include "runtime/io/FileUtil.h"
#include "runtime/io/Npy.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace loom::rt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// A manifest larger than this is not one Loom wrote (a million tensors
/// take about 200 MB).
constexpr uint64_t kMaxManifestBytes = uint64_t(1) << 28;

std::string systemMessage(int err) { return std::strerror(err); }

uint32_t crc32Of(const void *data, size_t size) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  return static_cast<uint32_t>(
      crc32_z(crc, static_cast<const Bytef *>(data), size));
}

/// Flushes the file or directory at `path` to disk; "" or why not.
std::string syncPath(const std::string &path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY);
  if (fd < 0)
    return path + ": cannot open to flush: " + systemMessage(errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot flush a directory; the rename is then as
  // durable as they make it.
  if (rc != 0 && !(directory && (err == EINVAL || err == EROFS)))
    return path + ": cannot flush to disk: " + systemMessage(err);
  return "";
}

/// Writes `bytes` to `path` and flushes them to disk; "" or why not.
std::string writeDurably(const std::string &path, const std::string &bytes) {
  std::string error;
  OutputFile out(path, error);
  if (!out.ok() || !out.write(bytes.data(), bytes.size(), error) ||
      !out.close(error))
    return path + ": " + error;
  return syncPath(path, false);
}

bool isStepName(const std::string &name, int64_t &step) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0)
    return false;
  step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (INT64_MAX - 9) / 10)
      return false;
    step = step * 10 + (name[i] - '0');
  }
  return true;
}

/// A file name a manifest may give: one path component, no "." or "..".
bool isPlainFileName(const std::string &name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

nlohmann::ordered_json entryJson(const CheckpointEntry &e) {
  return nlohmann::ordered_json{{"name", e.name},   {"kind", e.kind},
                                {"file", e.file},   {"dtype", e.dtype},
                                {"shape", e.shape}, {"bytes", e.bytes},
                                {"crc32", e.crc32}};
}

/// Reads one manifest entry; "" or what is wrong with it.
std::string readEntry(const json &j, int format, CheckpointEntry &e) {
  if (!j.is_object())
    return "a tensor entry is not an object";
  auto str = [&](const char *key, std::string &out) -> std::string {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string())
      return std::string("a tensor entry has no string \"") + key + "\"";
    out = it->get<std::string>();
    return "";
  };
  for (auto [key, out] :
       {std::pair{"name", &e.name}, std::pair{"kind", &e.kind},
        std::pair{"file", &e.file}, std::pair{"dtype", &e.dtype}})
    if (std::string m = str(key, *out); !m.empty())
      return m;
  if (!isPlainFileName(e.file))
    return "tensor '" + e.name +
           "': \"file\" must name a file in the "
           "checkpoint's directory, got '" +
           e.file + "'";
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array())
    return "tensor '" + e.name + "' has no \"shape\" array";
  for (const json &d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return "tensor '" + e.name + "': a dimension is not an integer >= 0";
    e.shape.push_back(d.get<int64_t>());
  }
  if (format < 2)
    return "";
  auto bytes = j.find("bytes"), crc = j.find("crc32");
  if (bytes == j.end() || !bytes->is_number_unsigned())
    return "tensor '" + e.name + "' has no \"bytes\"";
  if (crc == j.end() || !crc->is_number_unsigned() ||
      crc->get<uint64_t>() > UINT32_MAX)
    return "tensor '" + e.name + "' has no \"crc32\"";
  e.bytes = bytes->get<uint64_t>();
  e.crc32 = static_cast<uint32_t>(crc->get<uint64_t>());
  return "";
}

/// The step directory `path` names: itself when it holds manifest.json,
/// else its `latest`.
std::optional<std::string> stepDirectory(const std::string &path,
                                         std::string &error) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(path) / "manifest.json", ec))
    return path;
  fs::path latest = fs::path(path) / "latest";
  if (fs::is_symlink(fs::symlink_status(latest, ec))) {
    fs::path target = fs::read_symlink(latest, ec);
    if (!ec && isPlainFileName(target.string()) &&
        fs::is_regular_file(fs::path(path) / target / "manifest.json", ec))
      return (fs::path(path) / target).string();
    error = latest.string() + ": names '" + target.string() +
            "', which is not a complete checkpoint";
    return std::nullopt;
  }
  error = fs::is_directory(path, ec)
              ? path + ": not a checkpoint (no manifest.json, no latest)"
              : path + ": no such checkpoint directory";
  return std::nullopt;
}

} // namespace

std::string checkpointFileName(const std::string &name) {
  std::string file;
  for (char c : name)
    file.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                           c == '-' || c == '_'
                       ? c
                       : '_');
  return file + ".npy";
}

std::string checkpointStepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

const CheckpointEntry *CheckpointManifest::find(const std::string &name) const {
  for (const CheckpointEntry &e : tensors)
    if (e.name == name)
      return &e;
  return nullptr;
}

std::optional<CheckpointManifest> openCheckpoint(const std::string &path,
                                                 std::string &error) {
  std::optional<std::string> dir = stepDirectory(path, error);
  if (!dir)
    return std::nullopt;
  std::string file = (fs::path(*dir) / "manifest.json").string();
  std::string text;
  {
    InputFile in(file, error);
    if (!in.ok()) {
      error = file + ": " + error;
      return std::nullopt;
    }
    if (in.size() > kMaxManifestBytes) {
      error = file + ": " + std::to_string(in.size()) +
              " bytes, more than a manifest can be";
      return std::nullopt;
    }
    if (!in.read(text, in.size(), error)) {
      error = file + ": " + error;
      return std::nullopt;
    }
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string &what) {
    error = file + ": " + what;
    return std::nullopt;
  };
  if (j.is_discarded())
    return bad("not valid JSON");
  if (!j.is_object())
    return bad("not a JSON object");
  CheckpointManifest m;
  m.dir = *dir;
  auto format = j.find("format");
  if (format == j.end() || !format->is_number_integer() ||
      (format->get<int64_t>() != 1 && format->get<int64_t>() != 2))
    return bad("\"format\" must be 1 or 2");
  m.format = static_cast<int>(format->get<int64_t>());
  auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() < 0)
    return bad("no valid \"step\"");
  m.step = step->get<int64_t>();
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_array())
    return bad("no \"tensors\" array");
  for (const json &t : *tensors) {
    CheckpointEntry e;
    if (std::string m2 = readEntry(t, m.format, e); !m2.empty())
      return bad(m2);
    if (m.find(e.name))
      return bad("tensor '" + e.name + "' is listed twice");
    m.tensors.push_back(std::move(e));
  }
  return m;
}

std::optional<HostBuffer> readCheckpointTensor(const CheckpointManifest &ckpt,
                                               const CheckpointEntry &entry,
                                               std::string &error) {
  std::string path = (fs::path(ckpt.dir) / entry.file).string();
  std::string bytes;
  if (!readWholeFile(path, bytes, error)) {
    error = path + ": " + error;
    return std::nullopt;
  }
  if (ckpt.format >= 2) {
    if (bytes.size() != entry.bytes) {
      error = path + ": " + std::to_string(bytes.size()) +
              " bytes but the manifest says " + std::to_string(entry.bytes) +
              ": the checkpoint is damaged or mixed from two saves";
      return std::nullopt;
    }
    if (uint32_t crc = crc32Of(bytes.data(), bytes.size());
        crc != entry.crc32) {
      error = path + ": CRC-32 " + std::to_string(crc) +
              " but the manifest says " + std::to_string(entry.crc32) +
              ": the checkpoint is damaged or mixed from two saves";
      return std::nullopt;
    }
  }
  std::optional<HostBuffer> data = parseNpy(bytes, error, path);
  if (!data)
    return std::nullopt;
  // BF16 tensors are saved as f32 .npy files.
  bool dtypeOk = entry.dtype == dtypeName(data->dtype) ||
                 (entry.dtype == "bf16" && data->dtype == DType::F32);
  if (!dtypeOk || data->shape != entry.shape) {
    error = path + ": holds " + dtypeName(data->dtype) +
            formatShape(data->shape) + " but the manifest says " + entry.dtype +
            formatShape(entry.shape);
    return std::nullopt;
  }
  return data;
}

//===----------------------------------------------------------------------===//
// CheckpointWriter
//===----------------------------------------------------------------------===//

void CheckpointWriter::fail(std::string message) {
  if (failure.empty())
    failure = std::move(message);
}

void CheckpointWriter::begin(const std::string &rootDir, int64_t stepNumber) {
  root = rootDir;
  step = stepNumber;
  stepName = checkpointStepName(step);
  written.clear();
  failure.clear();
  std::error_code ec;
  if (fs::is_regular_file(fs::path(root) / "manifest.json", ec))
    return fail(root + ": holds a checkpoint of the first format (its "
                       "manifest.json at the top); save to another directory "
                       "(--resume reads this one)");
  fs::create_directories(root, ec);
  if (ec)
    return fail(root +
                ": cannot create the checkpoint directory: " + ec.message());
  // What saves killed before their rename left.
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec))
    if (it->path().filename().string().rfind(".tmp-", 0) == 0)
      fs::remove_all(it->path(), ec);
  tmp =
      (fs::path(root) / (".tmp-" + stepName + "-" + std::to_string(::getpid())))
          .string();
  fs::create_directory(tmp, ec);
  if (ec)
    fail(tmp + ": cannot create: " + ec.message());
}

void CheckpointWriter::add(const std::string &name, const std::string &kind,
                           const TensorView &t) {
  if (failed())
    return;
  std::string error;
  std::optional<std::string> bytes = serializeNpy(t, error);
  if (!bytes)
    return fail(root + ": tensor '" + name + "': " + error);
  CheckpointEntry e;
  e.name = name;
  e.kind = kind;
  e.file = checkpointFileName(name);
  e.dtype = dtypeName(t.dtype);
  e.shape = t.shape;
  e.bytes = bytes->size();
  e.crc32 = crc32Of(bytes->data(), bytes->size());
  for (const CheckpointEntry &w : written)
    if (w.file == e.file)
      return fail(root + ": tensors '" + w.name + "' and '" + name +
                  "' would share the file " + e.file);
  if (std::string m = writeDurably((fs::path(tmp) / e.file).string(), *bytes);
      !m.empty())
    return fail(m);
  written.push_back(std::move(e));
}

std::string CheckpointWriter::commit(int64_t keepLast) {
  if (failed()) {
    abandon();
    return "";
  }
  // One tensor per line, its name first.
  std::string manifest =
      "{\"format\": 2, \"step\": " + std::to_string(step) + ", \"tensors\": [";
  for (size_t i = 0; i < written.size(); ++i)
    manifest += (i ? ",\n  " : "\n  ") + entryJson(written[i]).dump();
  manifest += "\n]}\n";
  std::string stepDir = (fs::path(root) / stepName).string();
  std::string latest = (fs::path(root) / "latest").string();
  std::string link =
      (fs::path(root) / (".tmp-latest-" + std::to_string(::getpid()))).string();
  std::error_code ec;
  if (std::string m =
          writeDurably((fs::path(tmp) / "manifest.json").string(), manifest);
      !m.empty())
    fail(m);
  else if (std::string m2 = syncPath(tmp, true); !m2.empty())
    fail(m2);
  else if (fs::exists(stepDir, ec)) {
    // A checkpoint of this step is there (a run resumed from before it):
    // exchange the two, so that the name is never missing, then remove
    // the old one under the temporary name.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, stepDir.c_str(),
                    RENAME_EXCHANGE) == 0)
      ;
    else if (errno != EINVAL && errno != ENOSYS)
      fail(stepDir + ": cannot replace: " + systemMessage(errno));
    else {
      // No exchange on this file system: move the old one aside first (a
      // kill in between leaves `latest` naming a missing directory, which
      // --resume reports).
      std::string old = tmp + ".old";
      if (::rename(stepDir.c_str(), old.c_str()) != 0 ||
          ::rename(tmp.c_str(), stepDir.c_str()) != 0)
        fail(stepDir + ": cannot replace: " + systemMessage(errno));
      fs::remove_all(old, ec);
    }
  } else if (::rename(tmp.c_str(), stepDir.c_str()) != 0)
    fail(stepDir + ": cannot rename into place: " + systemMessage(errno));
  if (!failed()) {
    fs::remove(link, ec);
    fs::create_directory_symlink(stepName, link, ec);
    if (ec)
      fail(link + ": cannot link: " + ec.message());
    else if (::rename(link.c_str(), latest.c_str()) != 0)
      fail(latest + ": cannot replace: " + systemMessage(errno));
    else if (std::string m = syncPath(root, true); !m.empty())
      fail(m);
  }
  abandon();
  if (failed())
    return "";
  if (keepLast > 0) {
    std::vector<std::pair<int64_t, fs::path>> steps;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end;
         it.increment(ec)) {
      int64_t n = 0;
      if (isStepName(it->path().filename().string(), n) && n != step)
        steps.emplace_back(n, it->path());
    }
    std::sort(steps.begin(), steps.end(), std::greater<>());
    // The new one counts among the kept.
    for (size_t i = static_cast<size_t>(keepLast) - 1; i < steps.size(); ++i)
      fs::remove_all(steps[i].second, ec);
  }
  return stepDir;
}

void CheckpointWriter::abandon() {
  std::error_code ec;
  if (!tmp.empty())
    fs::remove_all(tmp, ec);
  tmp.clear();
}

} // namespace loom::rt
