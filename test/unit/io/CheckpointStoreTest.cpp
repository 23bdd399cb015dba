//===- CheckpointStoreTest.cpp - Checkpoint directories on disk -----------===//

#include "runtime/io/CheckpointStore.h"

#include "IoTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace loom::rt;
using loom::rt::testing::TempDir;
using loom::rt::testing::writeBytes;

namespace fs = std::filesystem;

namespace {

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Saves a checkpoint of `step` holding "w" (2x3, values + offset) and
/// "w::m" (same shape) into `root`; returns the step directory or "".
std::string saveStep(const std::string &root, int64_t step, float offset,
                     std::string &error, int64_t keepLast = 0) {
  std::vector<float> w(6), m(6);
  for (int i = 0; i < 6; ++i) {
    w[i] = offset + static_cast<float>(i);
    m[i] = -offset - static_cast<float>(i);
  }
  CheckpointWriter out;
  out.begin(root, step);
  out.add("w", "parameter", {DType::F32, {2, 3}, w.data()});
  out.add("w::m", "optimizer_state", {DType::F32, {2, 3}, m.data()});
  std::string dir = out.commit(keepLast);
  error = out.error();
  return dir;
}

float firstOf(const std::string &path, const std::string &name) {
  std::string error;
  std::optional<CheckpointManifest> ckpt = openCheckpoint(path, error);
  EXPECT_TRUE(ckpt) << error;
  if (!ckpt)
    return -1;
  const CheckpointEntry *e = ckpt->find(name);
  EXPECT_TRUE(e);
  if (!e)
    return -1;
  std::optional<HostBuffer> data = readCheckpointTensor(*ckpt, *e, error);
  EXPECT_TRUE(data) << error;
  float v = -1;
  if (data)
    std::memcpy(&v, data->bytes.data(), sizeof v);
  return v;
}

std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry &e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

// Proves a save makes ROOT/step-N with a checksummed manifest and points
// ROOT/latest at it, and that both paths open to the same checkpoint.
TEST(CheckpointStore, SaveLinksLatestAndRoundTrips) {
  TempDir tmp;
  std::string root = tmp.path("ck"), error;
  std::string dir = saveStep(root, 12, 1.0f, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(dir, root + "/step-00000012");
  EXPECT_EQ(entries(root),
            (std::vector<std::string>{"latest", "step-00000012"}));
  EXPECT_EQ(fs::read_symlink(root + "/latest").string(), "step-00000012");
  std::optional<CheckpointManifest> ckpt = openCheckpoint(root, error);
  ASSERT_TRUE(ckpt) << error;
  EXPECT_EQ(ckpt->format, 3);
  EXPECT_EQ(ckpt->step, 12);
  ASSERT_EQ(ckpt->tensors.size(), 2u);
  ASSERT_EQ(ckpt->tensors[1].shards.size(), 1u);
  EXPECT_EQ(ckpt->tensors[1].shards[0].file, "w__m.npy");
  EXPECT_EQ(ckpt->tensors[1].kind, "optimizer_state");
  EXPECT_EQ(ckpt->tensors[0].shards[0].bytes, fs::file_size(dir + "/w.npy"));
  EXPECT_EQ(entries(dir),
            (std::vector<std::string>{"manifest.json", "w.npy", "w__m.npy"}));
  EXPECT_EQ(firstOf(root, "w"), 1.0f);
  EXPECT_EQ(firstOf(dir, "w::m"), -1.0f);
}

// Proves a file swapped for another of the same shape, a truncated file,
// and a file from another save are refused naming the file.
TEST(CheckpointStore, DamagedOrMixedFilesAreRefused) {
  TempDir tmp;
  std::string root = tmp.path("ck"), other = tmp.path("other"), error;
  std::string dir = saveStep(root, 3, 1.0f, error);
  ASSERT_EQ(error, "");
  std::string otherDir = saveStep(other, 3, 2.0f, error);
  ASSERT_EQ(error, "");
  auto refusal = [&](const std::string &name) {
    std::string e;
    std::optional<CheckpointManifest> ckpt = openCheckpoint(root, e);
    EXPECT_TRUE(ckpt) << e;
    if (ckpt && !readCheckpointTensor(*ckpt, *ckpt->find(name), e))
      return e;
    return std::string("read");
  };
  std::string w = readAll(dir + "/w.npy"), m = readAll(dir + "/w__m.npy");
  writeBytes(dir + "/w.npy", m); // swapped: same size, other bytes
  EXPECT_EQ(refusal("w").find(dir + "/w.npy: CRC-32 "), 0u) << refusal("w");
  writeBytes(dir + "/w.npy", w.substr(0, w.size() - 4));
  EXPECT_EQ(refusal("w").find(dir + "/w.npy: " + std::to_string(w.size() - 4) +
                              " bytes but the manifest says"),
            0u)
      << refusal("w");
  writeBytes(dir + "/w.npy", readAll(otherDir + "/w.npy"));
  EXPECT_NE(refusal("w").find("mixed from two saves"), std::string::npos);
  writeBytes(dir + "/w.npy", w);
  EXPECT_EQ(refusal("w"), "read");
}

// Proves bad manifests are errors naming the file: not JSON, a file
// outside the directory, a tensor listed twice, no step, too deep.
TEST(CheckpointStore, BadManifestsAreErrors) {
  TempDir tmp;
  std::string root = tmp.path("ck"), error;
  std::string dir = saveStep(root, 1, 0.0f, error);
  ASSERT_EQ(error, "");
  std::string manifest = dir + "/manifest.json";
  std::string good = readAll(manifest);
  auto openError = [&](const std::string &text) {
    writeBytes(manifest, text);
    std::string e;
    EXPECT_FALSE(openCheckpoint(root, e));
    return e;
  };
  EXPECT_EQ(openError(good.substr(0, good.size() / 2)),
            manifest + ": not valid JSON");
  std::string escape = good;
  escape.replace(escape.find("\"w.npy\""), 7, "\"../w.npy\"");
  EXPECT_EQ(openError(escape),
            manifest + ": tensor 'w': \"file\" must name a file in the "
                       "checkpoint's directory, got '../w.npy'");
  std::string twice = good;
  twice.replace(twice.find("\"w::m\""), 6, "\"w\"");
  EXPECT_EQ(openError(twice), manifest + ": tensor 'w' is listed twice");
  EXPECT_EQ(openError("{\"format\": 2, \"tensors\": []}"),
            manifest + ": no valid \"step\"");
  EXPECT_EQ(openError("{\"format\": 4, \"step\": 1, \"tensors\": []}"),
            manifest + ": \"format\" must be 1, 2 or 3");
  EXPECT_EQ(openError(std::string(100000, '[') + std::string(100000, ']')),
            manifest + ": not a JSON object");
  writeBytes(manifest, good);
  EXPECT_TRUE(openCheckpoint(root, error)) << error;
}

// Proves saving a step again replaces it whole, --keep-last prunes the
// oldest, a killed save's temporary directory is removed by the next, and
// `latest` always names the newest save.
TEST(CheckpointStore, ResaveKeepLastAndLeftovers) {
  TempDir tmp;
  std::string root = tmp.path("ck"), error;
  for (int64_t step : {2, 4, 6})
    ASSERT_NE(saveStep(root, step, static_cast<float>(step), error), "")
        << error;
  // A save killed before its rename.
  fs::create_directory(root + "/.tmp-step-00000008-1");
  writeBytes(root + "/.tmp-step-00000008-1/w.npy", "partial");
  // Step 4 again (a run resumed from step 2), keeping the newest two.
  ASSERT_NE(saveStep(root, 4, 40.0f, error, 2), "") << error;
  EXPECT_EQ(entries(root), (std::vector<std::string>{"latest", "step-00000004",
                                                     "step-00000006"}));
  EXPECT_EQ(fs::read_symlink(root + "/latest").string(), "step-00000004");
  EXPECT_EQ(firstOf(root, "w"), 40.0f);
  EXPECT_EQ(firstOf(root + "/step-00000006", "w"), 6.0f);
}

// Proves a save refuses a root that holds a first-format checkpoint (it
// would be shadowed) and a root it cannot create, and that a first-format
// checkpoint still opens.
TEST(CheckpointStore, FirstFormatAndUnwritableRoots) {
  TempDir tmp;
  std::string legacy = tmp.path("legacy"), error;
  fs::create_directory(legacy);
  writeBytes(legacy + "/manifest.json",
             "{\"format\": 1, \"step\": 7, \"tensors\": [{\"name\": \"w\", "
             "\"kind\": \"parameter\", \"file\": \"w.npy\", \"dtype\": "
             "\"f32\", \"shape\": [2, 3]}]}");
  std::optional<CheckpointManifest> ckpt = openCheckpoint(legacy, error);
  ASSERT_TRUE(ckpt) << error;
  EXPECT_EQ(ckpt->format, 1);
  EXPECT_EQ(ckpt->step, 7);
  EXPECT_EQ(saveStep(legacy, 8, 0.0f, error), "");
  EXPECT_NE(error.find("holds a checkpoint of the first format"),
            std::string::npos)
      << error;
  writeBytes(tmp.path("file"), "x");
  EXPECT_EQ(saveStep(tmp.path("file") + "/ck", 1, 0.0f, error), "");
  EXPECT_EQ(error.find(tmp.path("file") + "/ck: cannot create"), 0u) << error;
  EXPECT_FALSE(openCheckpoint(tmp.path("missing"), error));
  EXPECT_EQ(error, tmp.path("missing") + ": no such checkpoint directory");
}

namespace {

/// The 4x6 tensor t[i][j] = 10 i + j.
std::vector<float> grid() {
  std::vector<float> t(24);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      t[i * 6 + j] = static_cast<float>(10 * i + j);
  return t;
}

/// The block of grid() at (r0, c0) of shape rows x cols.
std::vector<float> gridBlock(int r0, int c0, int rows, int cols) {
  std::vector<float> all = grid(), b;
  for (int i = r0; i < r0 + rows; ++i)
    for (int j = c0; j < c0 + cols; ++j)
      b.push_back(all[i * 6 + j]);
  return b;
}

/// Saves grid() as "g" from two ranks, each writing two of the four 2x3
/// blocks (rank 1 first, as threads may), into `root`; the step directory
/// or "" with `error`.
std::string saveShardedGrid(const std::string &root, std::string &error,
                            bool skipLastBlock = false) {
  CheckpointWriter committer, other;
  committer.prepare(root, 5);
  committer.join(root, 5, 0);
  other.join(root, 5, 1);
  std::vector<std::vector<float>> blocks;
  for (int b = 0; b < 4; ++b)
    blocks.push_back(gridBlock(2 * (b / 2), 3 * (b % 2), 2, 3));
  for (int b : {3, 2, 1, 0}) {
    if (skipLastBlock && b == 3)
      continue;
    CheckpointWriter &w = b >= 2 ? other : committer;
    w.addShard("g", "parameter", {4, 6}, {2 * (b / 2), 3 * (b % 2)},
               {DType::F32, {2, 3}, blocks[b].data()});
  }
  other.finish();
  committer.finish();
  std::string dir = committer.commitRanks(0, 2);
  error = committer.error() + other.error();
  return dir;
}

std::vector<float> readBlock(const std::string &root,
                             const std::vector<int64_t> &offsets,
                             const Shape &shape, std::string &error) {
  std::optional<CheckpointManifest> ckpt = openCheckpoint(root, error);
  if (!ckpt)
    return {};
  std::optional<HostBuffer> data =
      readCheckpointBlock(*ckpt, *ckpt->find("g"), offsets, shape, error);
  if (!data)
    return {};
  std::vector<float> v(numElements(shape));
  if (!v.empty())
    std::memcpy(v.data(), data->bytes.data(), data->bytes.size());
  return v;
}

} // namespace

// Proves ranks that each write their own blocks make one checkpoint whose
// manifest tiles the tensor, and that any block (across shard boundaries,
// the whole tensor, an empty one) reads back exactly.
TEST(CheckpointStore, ShardedSavesReadAnyBlock) {
  TempDir tmp;
  std::string root = tmp.path("ck"), error;
  std::string dir = saveShardedGrid(root, error);
  ASSERT_EQ(error, "");
  ASSERT_EQ(dir, root + "/step-00000005");
  EXPECT_EQ(entries(dir),
            (std::vector<std::string>{"g@0-0.npy", "g@0-3.npy", "g@2-0.npy",
                                      "g@2-3.npy", "manifest.json"}));
  std::optional<CheckpointManifest> ckpt = openCheckpoint(root, error);
  ASSERT_TRUE(ckpt) << error;
  ASSERT_EQ(ckpt->tensors.size(), 1u);
  ASSERT_EQ(ckpt->tensors[0].shards.size(), 4u);
  EXPECT_EQ(ckpt->tensors[0].shards[1].offsets, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(readBlock(root, {0, 0}, {4, 6}, error), grid()) << error;
  EXPECT_EQ(readBlock(root, {1, 2}, {3, 3}, error), gridBlock(1, 2, 3, 3))
      << error;
  EXPECT_EQ(readBlock(root, {3, 0}, {1, 6}, error), gridBlock(3, 0, 1, 6))
      << error;
  EXPECT_EQ(readBlock(root, {4, 6}, {0, 0}, error), std::vector<float>{})
      << error;
  EXPECT_EQ(error, "");
  EXPECT_TRUE(readBlock(root, {3, 0}, {2, 6}, error).empty());
  EXPECT_NE(error.find("has no block of shape [2, 6]"), std::string::npos)
      << error;
  // A block's file swapped for another's is found by the rank reading it.
  std::string a = readAll(dir + "/g@0-0.npy"), b = readAll(dir + "/g@2-3.npy");
  writeBytes(dir + "/g@0-0.npy", b);
  EXPECT_EQ(readBlock(root, {2, 0}, {2, 6}, error), gridBlock(2, 0, 2, 6));
  EXPECT_TRUE(readBlock(root, {0, 0}, {1, 1}, error).empty());
  EXPECT_EQ(error.find(dir + "/g@0-0.npy: CRC-32 "), 0u) << error;
  writeBytes(dir + "/g@0-0.npy", a);
}

// Proves a commit refuses a tensor whose blocks leave a gap (a rank that
// wrote less than it owns), and a rank that never finished, keeping the
// previous checkpoint; and that a manifest's overlapping or outlying
// shards are refused on reading.
TEST(CheckpointStore, ShardedSavesAndManifestsMustTile) {
  TempDir tmp;
  std::string root = tmp.path("ck"), error;
  ASSERT_NE(saveShardedGrid(root, error), "") << error;
  EXPECT_EQ(saveShardedGrid(tmp.path("gap"), error, true), "");
  EXPECT_NE(
      error.find("tensor 'g': its shards hold 18 elements, the tensor 24"),
      std::string::npos)
      << error;
  CheckpointWriter alone;
  alone.prepare(root, 9);
  alone.join(root, 9, 0);
  alone.finish();
  EXPECT_EQ(alone.commitRanks(0, 2), "");
  EXPECT_NE(alone.error().find("(rank 1 did not finish)"), std::string::npos)
      << alone.error();
  EXPECT_EQ(entries(root),
            (std::vector<std::string>{"latest", "step-00000005"}));
  std::string manifest = root + "/step-00000005/manifest.json";
  std::string good = readAll(manifest);
  auto openError = [&](const std::string &text) {
    writeBytes(manifest, text);
    std::string e;
    EXPECT_FALSE(openCheckpoint(root, e));
    return e;
  };
  std::string overlap = good;
  overlap.replace(overlap.find("\"offsets\":[2,3]"), 15, "\"offsets\":[1,3]");
  EXPECT_EQ(openError(overlap),
            manifest + ": tensor 'g': the shards g@0-3.npy and g@2-3.npy "
                       "overlap");
  std::string outside = good;
  outside.replace(outside.find("\"offsets\":[2,3]"), 15, "\"offsets\":[3,3]");
  EXPECT_EQ(openError(outside),
            manifest + ": tensor 'g': the shard g@2-3.npy lies outside the "
                       "tensor [4, 6]");
}
