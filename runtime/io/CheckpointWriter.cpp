//===- CheckpointWriter.cpp - Writing a checkpoint, rank by rank -----------===//
//
// CheckpointWriter (CheckpointStore.h): every rank writes its blocks and a
// list of them into the step's temporary directory; rank 0 merges the
// lists, checks that every tensor is tiled exactly, writes the manifest
// last, renames the directory into place and moves `latest`.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/CheckpointStore.h"
#include "runtime/io/CheckpointFormat.h"
#include "runtime/io/Npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

namespace loom::rt {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace checkpoint_io;

void CheckpointWriter::fail(std::string message) {
  if (failure.empty())
    failure = std::move(message);
}

void CheckpointWriter::prepare(const std::string &rootDir, int64_t stepNumber) {
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
  tmp = (fs::path(root) / (".tmp-" + stepName)).string();
  fs::create_directory(tmp, ec);
  if (ec)
    fail(tmp + ": cannot create: " + ec.message());
}

void CheckpointWriter::join(const std::string &rootDir, int64_t stepNumber,
                            int64_t rankNumber) {
  root = rootDir;
  step = stepNumber;
  rank = rankNumber;
  stepName = checkpointStepName(step);
  tmp = (fs::path(root) / (".tmp-" + stepName)).string();
  written.clear();
  std::error_code ec;
  if (!failed() && !fs::is_directory(tmp, ec))
    fail(tmp + ": missing: the checkpoint directory is not on storage every "
               "rank shares");
}

void CheckpointWriter::addShard(const std::string &name,
                                const std::string &kind, const Shape &shape,
                                const std::vector<int64_t> &offsets,
                                const TensorView &block) {
  if (failed())
    return;
  std::string error;
  std::optional<std::string> bytes = serializeNpy(block, error);
  if (!bytes)
    return fail(root + ": tensor '" + name + "': " + error);
  CheckpointShard s;
  s.file = checkpointFileName(
      name, block.shape == shape ? std::vector<int64_t>{} : offsets);
  s.offsets = offsets;
  s.shape = block.shape;
  s.bytes = bytes->size();
  s.crc32 = crc32Of(bytes->data(), bytes->size());
  if (std::string m = writeDurably((fs::path(tmp) / s.file).string(), *bytes);
      !m.empty())
    return fail(m);
  auto it =
      std::find_if(written.begin(), written.end(),
                   [&](const CheckpointEntry &e) { return e.name == name; });
  if (it == written.end()) {
    CheckpointEntry e;
    e.name = name;
    e.kind = kind;
    e.dtype = dtypeName(block.dtype);
    e.shape = shape;
    written.push_back(std::move(e));
    it = written.end() - 1;
  }
  it->shards.push_back(std::move(s));
}

void CheckpointWriter::finish() {
  if (failed())
    return;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const CheckpointEntry &e : written)
    list.push_back(entryJson(e));
  if (std::string m = writeDurably(
          (fs::path(tmp) / rankListName(rank)).string(), list.dump());
      !m.empty())
    fail(m);
}

namespace {

/// Merges rank lists into the manifest's tensors, in the order the ranks
/// first list them, each tensor's shards by their offsets. "" or what is
/// wrong (naming the rank's list).
std::string mergeRankLists(const std::string &tmp, int64_t ranks, int format,
                           std::vector<CheckpointEntry> &tensors) {
  std::map<std::string, size_t> index;
  std::set<std::string> files;
  for (int64_t r = 0; r < ranks; ++r) {
    std::string file = (fs::path(tmp) / rankListName(r)).string(), error;
    std::optional<json> list = readJsonFile(file, error);
    if (!list)
      return error + " (rank " + std::to_string(r) + " did not finish)";
    if (!list->is_array())
      return file + ": not a JSON array";
    for (const json &j : *list) {
      CheckpointEntry e;
      if (std::string m = readEntry(j, format, e); !m.empty())
        return file + ": " + m;
      for (const CheckpointShard &s : e.shards)
        if (!files.insert(s.file).second)
          return file + ": tensor '" + e.name + "': the file " + s.file +
                 " is written twice";
      auto [it, fresh] = index.emplace(e.name, tensors.size());
      if (fresh) {
        tensors.push_back(std::move(e));
        continue;
      }
      CheckpointEntry &seen = tensors[it->second];
      if (seen.kind != e.kind || seen.dtype != e.dtype || seen.shape != e.shape)
        return file + ": tensor '" + e.name + "' is " + e.dtype +
               formatShape(e.shape) + ", another rank's " + seen.dtype +
               formatShape(seen.shape);
      for (CheckpointShard &s : e.shards)
        seen.shards.push_back(std::move(s));
    }
  }
  for (CheckpointEntry &e : tensors) {
    std::sort(e.shards.begin(), e.shards.end(),
              [](const CheckpointShard &a, const CheckpointShard &b) {
                return a.offsets < b.offsets;
              });
    if (std::string m = checkTiling(e); !m.empty())
      return tmp + ": " + m;
  }
  return "";
}

} // namespace

std::string CheckpointWriter::commitRanks(int64_t keepLast, int64_t ranks) {
  if (failed()) {
    abandon();
    return "";
  }
  std::vector<CheckpointEntry> tensors;
  // A rank list has the fields of a format 3 tensor without its tiling.
  std::string merged = mergeRankLists(tmp, ranks, 3, tensors);
  if (!merged.empty()) {
    fail(merged);
    abandon();
    return "";
  }
  std::error_code ec;
  for (int64_t r = 0; r < ranks; ++r)
    fs::remove(fs::path(tmp) / rankListName(r), ec);
  // One tensor per line, its name first.
  std::string manifest =
      "{\"format\": 3, \"step\": " + std::to_string(step) + ", \"tensors\": [";
  for (size_t i = 0; i < tensors.size(); ++i)
    manifest += (i ? ",\n  " : "\n  ") + entryJson(tensors[i]).dump();
  manifest += "\n]}\n";
  std::string stepDir = (fs::path(root) / stepName).string();
  std::string latest = (fs::path(root) / "latest").string();
  std::string link =
      (fs::path(root) / (".tmp-latest-" + std::to_string(::getpid()))).string();
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

void CheckpointWriter::begin(const std::string &rootDir, int64_t stepNumber) {
  prepare(rootDir, stepNumber);
  join(rootDir, stepNumber, 0);
}

void CheckpointWriter::add(const std::string &name, const std::string &kind,
                           const TensorView &t) {
  addShard(name, kind, t.shape, std::vector<int64_t>(t.shape.size(), 0), t);
}

std::string CheckpointWriter::commit(int64_t keepLast) {
  finish();
  return commitRanks(keepLast, 1);
}

} // namespace loom::rt
