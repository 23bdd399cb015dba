//===- CheckpointStore.cpp - Checkpoint directories on disk ---------------===//

#include "runtime/io/CheckpointStore.h"
#include "runtime/io/CheckpointFormat.h"

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
#include <map>
#include <set>
#include <unistd.h>

namespace loom::rt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace checkpoint_io {

/// More than a manifest Loom writes (a million tensors take about 200 MB).
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

/// Reads a JSON file of at most kMaxManifestBytes; nullopt and `error`
/// (naming the file) when it cannot be read or parsed.
std::optional<json> readJsonFile(const std::string &file, std::string &error) {
  std::string text;
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
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    error = file + ": not valid JSON";
    return std::nullopt;
  }
  return j;
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

/// The name of rank `rank`'s list of shards in a temporary directory.
std::string rankListName(int64_t rank) {
  char name[40];
  std::snprintf(name, sizeof name, "shards-%06lld.json",
                static_cast<long long>(rank));
  return name;
}

nlohmann::ordered_json shardJson(const CheckpointShard &s) {
  return nlohmann::ordered_json{{"file", s.file},
                                {"offsets", s.offsets},
                                {"shape", s.shape},
                                {"bytes", s.bytes},
                                {"crc32", s.crc32}};
}

nlohmann::ordered_json entryJson(const CheckpointEntry &e) {
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  for (const CheckpointShard &s : e.shards)
    shards.push_back(shardJson(s));
  return nlohmann::ordered_json{{"name", e.name},
                                {"kind", e.kind},
                                {"dtype", e.dtype},
                                {"shape", e.shape},
                                {"shards", shards}};
}

/// The most elements a checkpoint's tensor may have (2^48: 1 PiB of f32).
constexpr int64_t kMaxCheckpointElements = int64_t(1) << 48;

/// Reads the array of non-negative integers at `key` of `j` into `out`;
/// "" or what is wrong. A shape (`isShape`) has at most
/// kMaxCheckpointElements elements, so that sums and products of its
/// dimensions and offsets never overflow.
std::string readDims(const json &j, const char *key, std::vector<int64_t> &out,
                     const std::string &what, bool isShape) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    return what + " has no \"" + key + "\" array";
  if (it->size() > 64)
    return what + ": \"" + key + "\" has more than 64 dimensions";
  int64_t elements = 1;
  for (const json &d : *it) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 ||
        d.get<int64_t>() > kMaxCheckpointElements)
      return what + ": \"" + key +
             "\" holds something not an integer in [0, 2^48]";
    out.push_back(d.get<int64_t>());
    if (isShape && out.back() > 0 &&
        (elements > kMaxCheckpointElements / out.back() ||
         (elements *= out.back()) > kMaxCheckpointElements))
      return what + ": \"" + key + "\" has more than 2^48 elements";
  }
  return "";
}

/// Reads a file's name, size and CRC-32 (the latter with `checksums`);
/// "" or what is wrong.
std::string readFileFields(const json &j, bool checksums, CheckpointShard &s,
                           const std::string &what) {
  auto file = j.find("file");
  if (file == j.end() || !file->is_string())
    return what + " has no string \"file\"";
  s.file = file->get<std::string>();
  if (!isPlainFileName(s.file))
    return what +
           ": \"file\" must name a file in the checkpoint's directory, got '" +
           s.file + "'";
  if (!checksums)
    return "";
  auto bytes = j.find("bytes"), crc = j.find("crc32");
  if (bytes == j.end() || !bytes->is_number_unsigned())
    return what + " has no \"bytes\"";
  if (crc == j.end() || !crc->is_number_unsigned() ||
      crc->get<uint64_t>() > UINT32_MAX)
    return what + " has no \"crc32\"";
  s.bytes = bytes->get<uint64_t>();
  s.crc32 = static_cast<uint32_t>(crc->get<uint64_t>());
  return "";
}

/// Whether the boxes [a, a + as) and [b, b + bs) share an element.
bool overlaps(const std::vector<int64_t> &a, const Shape &as,
              const std::vector<int64_t> &b, const Shape &bs) {
  for (size_t d = 0; d < a.size(); ++d)
    if (a[d] >= b[d] + bs[d] || b[d] >= a[d] + as[d] || as[d] == 0 ||
        bs[d] == 0)
      return false;
  return true;
}

/// "" if `e`'s shards tile its tensor exactly: each block inside it, no two
/// overlapping, their sizes adding up to the tensor's. Else what is wrong.
std::string checkTiling(const CheckpointEntry &e) {
  std::string what = "tensor '" + e.name + "'";
  if (e.shards.empty())
    return what + " has no shards";
  int64_t total = numElements(e.shape), covered = 0;
  for (const CheckpointShard &s : e.shards) {
    if (s.offsets.size() != e.shape.size() || s.shape.size() != e.shape.size())
      return what + ": the shard " + s.file + " has " +
             std::to_string(s.shape.size()) + " dimensions, the tensor " +
             std::to_string(e.shape.size());
    for (size_t d = 0; d < e.shape.size(); ++d)
      if (s.offsets[d] > e.shape[d] || s.shape[d] > e.shape[d] - s.offsets[d])
        return what + ": the shard " + s.file + " lies outside the tensor " +
               formatShape(e.shape);
    covered += numElements(s.shape);
  }
  if (covered != total)
    return what + ": its shards hold " + std::to_string(covered) +
           " elements, the tensor " + std::to_string(total);
  for (size_t i = 0; i < e.shards.size(); ++i)
    for (size_t k = i + 1; k < e.shards.size(); ++k)
      if (overlaps(e.shards[i].offsets, e.shards[i].shape, e.shards[k].offsets,
                   e.shards[k].shape))
        return what + ": the shards " + e.shards[i].file + " and " +
               e.shards[k].file + " overlap";
  return "";
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
        std::pair{"dtype", &e.dtype}})
    if (std::string m = str(key, *out); !m.empty())
      return m;
  std::string what = "tensor '" + e.name + "'";
  if (!storedDType(e.dtype))
    return what + ": unknown element type '" + e.dtype + "'";
  if (std::string m = readDims(j, "shape", e.shape, what, true); !m.empty())
    return m;
  if (format < 3) {
    // One file per tensor, its fields beside the tensor's.
    CheckpointShard s;
    if (std::string m = readFileFields(j, format >= 2, s, what); !m.empty())
      return m;
    s.offsets.assign(e.shape.size(), 0);
    s.shape = e.shape;
    e.shards.push_back(std::move(s));
    return "";
  }
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array())
    return what + " has no \"shards\" array";
  for (const json &sj : *shards) {
    if (!sj.is_object())
      return what + ": a shard is not an object";
    CheckpointShard s;
    if (std::string m = readFileFields(sj, true, s, what); !m.empty())
      return m;
    std::string where = what + ", shard " + s.file;
    if (std::string m = readDims(sj, "offsets", s.offsets, where, false);
        !m.empty())
      return m;
    if (std::string m = readDims(sj, "shape", s.shape, where, true); !m.empty())
      return m;
    e.shards.push_back(std::move(s));
  }
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

/// Copies the elements of the box [box, box + boxShape) (global
/// coordinates) from `src`, a block of shape `srcShape` at `srcAt`, into
/// `dst`, a block of shape `dstShape` at `dstAt`; elements of `size` bytes.
void copyBox(const unsigned char *src, const Shape &srcShape,
             const std::vector<int64_t> &srcAt, unsigned char *dst,
             const Shape &dstShape, const std::vector<int64_t> &dstAt,
             const std::vector<int64_t> &box, const Shape &boxShape,
             size_t size) {
  size_t rank = boxShape.size();
  if (rank == 0) {
    std::memcpy(dst, src, size);
    return;
  }
  if (numElements(boxShape) == 0)
    return;
  std::vector<int64_t> index(rank, 0);
  size_t run = static_cast<size_t>(boxShape[rank - 1]) * size;
  for (;;) {
    int64_t s = 0, d = 0;
    for (size_t k = 0; k < rank; ++k) {
      int64_t g = box[k] + index[k];
      s = s * srcShape[k] + (g - srcAt[k]);
      d = d * dstShape[k] + (g - dstAt[k]);
    }
    std::memcpy(dst + d * size, src + s * size, run);
    size_t k = rank - 1; // the next row: every dimension but the last counts
    while (k-- > 0) {
      if (++index[k] < boxShape[k])
        break;
      index[k] = 0;
    }
    if (k == static_cast<size_t>(-1))
      return;
  }
}

/// Reads the file of `shard`, verified against the manifest, as a tensor of
/// the manifest's dtype (an f32 file for bf16) and the shard's shape.
std::optional<HostBuffer> readShard(const CheckpointManifest &ckpt,
                                    const CheckpointEntry &entry,
                                    const CheckpointShard &shard,
                                    std::string &error) {
  std::string path = (fs::path(ckpt.dir) / shard.file).string();
  std::string bytes;
  if (!readWholeFile(path, bytes, error)) {
    error = path + ": " + error;
    return std::nullopt;
  }
  // Its size was checked by the caller (readCheckpointBlock).
  if (uint32_t crc = crc32Of(bytes.data(), bytes.size());
      ckpt.format >= 2 && (bytes.size() != shard.bytes || crc != shard.crc32)) {
    error = path + ": CRC-32 " + std::to_string(crc) +
            " but the manifest says " + std::to_string(shard.crc32) +
            ": the checkpoint is damaged or mixed from two saves";
    return std::nullopt;
  }
  std::optional<HostBuffer> data = parseNpy(bytes, error, path);
  if (!data)
    return std::nullopt;
  if (data->dtype != storedDType(entry.dtype) || data->shape != shard.shape) {
    error = path + ": holds " + dtypeName(data->dtype) +
            formatShape(data->shape) + " but the manifest says " + entry.dtype +
            formatShape(shard.shape);
    return std::nullopt;
  }
  return data;
}

} // namespace checkpoint_io

using namespace checkpoint_io;

std::optional<DType> storedDType(const std::string &name) {
  if (name == "bf16")
    return DType::F32;
  for (DType t : {DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool})
    if (name == dtypeName(t))
      return t;
  return std::nullopt;
}

std::string checkpointFileName(const std::string &name,
                               const std::vector<int64_t> &offsets) {
  std::string file;
  for (char c : name)
    file.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                           c == '-' || c == '_'
                       ? c
                       : '_');
  for (size_t d = 0; d < offsets.size(); ++d)
    file += (d ? "-" : "@") + std::to_string(offsets[d]);
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

std::optional<CheckpointEntry>
CheckpointManifest::entryOf(const std::string &name, DType dtype,
                            const Shape &shape) const {
  if (const CheckpointEntry *e = find(name))
    return *e;
  if (format != 1)
    return std::nullopt;
  CheckpointEntry legacy;
  legacy.name = name;
  legacy.dtype = dtypeName(dtype);
  legacy.shape = shape;
  legacy.shards.push_back({checkpointFileName(name),
                           std::vector<int64_t>(shape.size(), 0), shape, 0, 0});
  return legacy;
}

std::optional<CheckpointManifest> openCheckpoint(const std::string &path,
                                                 std::string &error) {
  std::optional<std::string> dir = stepDirectory(path, error);
  if (!dir)
    return std::nullopt;
  std::string file = (fs::path(*dir) / "manifest.json").string();
  std::optional<json> parsed = readJsonFile(file, error);
  if (!parsed)
    return std::nullopt;
  const json &j = *parsed;
  auto bad = [&](const std::string &what) {
    error = file + ": " + what;
    return std::nullopt;
  };
  if (!j.is_object())
    return bad("not a JSON object");
  CheckpointManifest m;
  m.dir = *dir;
  auto format = j.find("format");
  if (format == j.end() || !format->is_number_integer() ||
      format->get<int64_t>() < 1 || format->get<int64_t>() > 3)
    return bad("\"format\" must be 1, 2 or 3");
  m.format = static_cast<int>(format->get<int64_t>());
  auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() < 0)
    return bad("no valid \"step\"");
  m.step = step->get<int64_t>();
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_array())
    return bad("no \"tensors\" array");
  std::set<std::string> names, files;
  for (const json &t : *tensors) {
    CheckpointEntry e;
    if (std::string m2 = readEntry(t, m.format, e); !m2.empty())
      return bad(m2);
    if (std::string m2 = checkTiling(e); !m2.empty())
      return bad(m2);
    if (!names.insert(e.name).second)
      return bad("tensor '" + e.name + "' is listed twice");
    for (const CheckpointShard &s : e.shards)
      if (!files.insert(s.file).second)
        return bad("the file " + s.file + " is listed twice");
    m.tensors.push_back(std::move(e));
  }
  return m;
}

std::optional<HostBuffer>
readCheckpointBlock(const CheckpointManifest &ckpt,
                    const CheckpointEntry &entry,
                    const std::vector<int64_t> &offsets, const Shape &shape,
                    std::string &error) {
  bool inside = offsets.size() == entry.shape.size() &&
                shape.size() == entry.shape.size();
  for (size_t d = 0; inside && d < shape.size(); ++d)
    inside = offsets[d] >= 0 && shape[d] >= 0 && offsets[d] <= entry.shape[d] &&
             shape[d] <= entry.shape[d] - offsets[d];
  if (!inside) {
    error = ckpt.dir + ": tensor '" + entry.name + "' " +
            formatShape(entry.shape) + " has no block of shape " +
            formatShape(shape) + " there";
    return std::nullopt;
  }
  HostBuffer out;
  out.dtype = *storedDType(entry.dtype); // checked by openCheckpoint
  out.shape = shape;
  // Its files must hold at least the block, checked before allocating it.
  uint64_t onDisk = 0, wanted = static_cast<uint64_t>(numElements(shape)) *
                                dtypeSize(out.dtype);
  for (const CheckpointShard &s : entry.shards) {
    if (!overlaps(s.offsets, s.shape, offsets, shape))
      continue;
    std::error_code ec;
    std::string path = ckpt.dir + "/" + s.file;
    uint64_t size = fs::file_size(path, ec);
    if (ec || (ckpt.format >= 2 && size != s.bytes)) {
      error = ec ? path + ": " + ec.message()
                 : path + ": " + std::to_string(size) +
                       " bytes but the manifest says " +
                       std::to_string(s.bytes) +
                       ": the checkpoint is damaged or mixed from two saves";
      return std::nullopt;
    }
    onDisk += size;
  }
  if (onDisk < wanted) {
    error = ckpt.dir + ": tensor '" + entry.name + "': its files hold " +
            std::to_string(onDisk) + " bytes, less than the " +
            std::to_string(wanted) + " its block " + formatShape(shape) +
            " needs: the checkpoint is damaged";
    return std::nullopt;
  }
  out.bytes.assign(wanted, 0);
  for (const CheckpointShard &s : entry.shards) {
    if (!overlaps(s.offsets, s.shape, offsets, shape))
      continue;
    std::optional<HostBuffer> data = readShard(ckpt, entry, s, error);
    if (!data)
      return std::nullopt;
    std::vector<int64_t> box(shape.size());
    Shape boxShape(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      box[d] = std::max(offsets[d], s.offsets[d]);
      boxShape[d] =
          std::min(offsets[d] + shape[d], s.offsets[d] + s.shape[d]) - box[d];
    }
    copyBox(data->bytes.data(), s.shape, s.offsets, out.bytes.data(), shape,
            offsets, box, boxShape, dtypeSize(out.dtype));
  }
  return out;
}

std::optional<HostBuffer> readCheckpointTensor(const CheckpointManifest &ckpt,
                                               const CheckpointEntry &entry,
                                               std::string &error) {
  return readCheckpointBlock(ckpt, entry,
                             std::vector<int64_t>(entry.shape.size(), 0),
                             entry.shape, error);
}

} // namespace loom::rt
