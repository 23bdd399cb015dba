//===- HardwareProfileTest.cpp - Profiles: JSON, validation, built-ins ----===//

#include "compiler/cost/HardwareProfile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace loom::cost;

namespace {

/// A small valid profile in the file format, with every field.
const char *kFullProfile = R"({
  "name": "test-node",
  "devices_per_node": 4,
  "nodes": 2,
  "peak_flops": {"f32": 1e12, "bf16": 4e12, "f16": 4e12},
  "memory_bandwidth": 5e11,
  "memory_capacity": 16000000000,
  "intra_node": {"bandwidth": 1e11, "latency": 2e-6},
  "inter_node": {"bandwidth": 1e10, "latency": 8e-6},
  "efficiency": {"matmul": 0.8, "other": 0.25},
  "notes": ["made up for a test"]
})";

/// kFullProfile with `from` replaced by `to` (which must occur).
std::string edited(const std::string &from, const std::string &to) {
  std::string text = kFullProfile;
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

/// The error parseProfile gives for `text` (named "p.json"), or "" if it
/// parses.
std::string parseError(const std::string &text) {
  std::string error;
  std::optional<HardwareProfile> p = parseProfile(text, "p.json", error);
  if (p)
    return "";
  EXPECT_FALSE(error.empty());
  return error;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

// Every field of the file lands in the struct, and the defaults fill in.
TEST(HardwareProfile, ParsesEveryField) {
  std::string error;
  std::optional<HardwareProfile> p = parseProfile(kFullProfile, "p", error);
  ASSERT_TRUE(p) << error;
  EXPECT_EQ(p->name, "test-node");
  EXPECT_EQ(p->devicesPerNode, 4);
  EXPECT_EQ(p->nodes, 2);
  EXPECT_EQ(p->numDevices(), 8);
  EXPECT_DOUBLE_EQ(p->peak("f32"), 1e12);
  EXPECT_DOUBLE_EQ(p->peak("bf16"), 4e12);
  EXPECT_DOUBLE_EQ(p->peak("f16"), 4e12);
  EXPECT_DOUBLE_EQ(p->memoryBandwidth, 5e11);
  EXPECT_EQ(p->memoryCapacity, 16000000000);
  EXPECT_EQ(p->intraNode, (LinkProfile{1e11, 2e-6}));
  EXPECT_EQ(p->interNode, (LinkProfile{1e10, 8e-6}));
  EXPECT_EQ(p->notes, std::vector<std::string>{"made up for a test"});
  // Given classes, classes left out (1.0), and names that are no class
  // (the "other" figure).
  EXPECT_DOUBLE_EQ(p->efficiencyOf("matmul"), 0.8);
  EXPECT_DOUBLE_EQ(p->efficiencyOf("other"), 0.25);
  EXPECT_DOUBLE_EQ(p->efficiencyOf("conv"), 1.0);
  EXPECT_DOUBLE_EQ(p->efficiencyOf("gather"), 0.25);
  // Element types without a peak of their own use f32's.
  EXPECT_DOUBLE_EQ(p->peak("i64"), 1e12);
}

// Ranks map to nodes by rank / devicesPerNode.
TEST(HardwareProfile, NodeOfRank) {
  HardwareProfile p = *builtinProfile("8xH100-80GB");
  EXPECT_EQ(p.nodeOf(0), 0);
  EXPECT_EQ(p.nodeOf(7), 0);
  EXPECT_EQ(p.nodeOf(8), 1);
  EXPECT_EQ(p.nodeOf(17), 2);
}

// "efficiency" and "notes" may be left out.
TEST(HardwareProfile, OptionalFields) {
  std::string text = edited(R"(,
  "efficiency": {"matmul": 0.8, "other": 0.25},
  "notes": ["made up for a test"])",
                            "");
  std::string error;
  std::optional<HardwareProfile> p = parseProfile(text, "p", error);
  ASSERT_TRUE(p) << error;
  EXPECT_TRUE(p->efficiency.empty());
  EXPECT_TRUE(p->notes.empty());
  EXPECT_DOUBLE_EQ(p->efficiencyOf("matmul"), 1.0);
  EXPECT_DOUBLE_EQ(p->efficiencyOf("whatever"), 1.0);
}

// The fixed cost of a kernel call: optional, read, written back, and never
// negative.
TEST(HardwareProfile, OpOverhead) {
  std::string error;
  std::optional<HardwareProfile> p = parseProfile(
      edited("\"notes\":", "\"op_overhead\": 3.5e-06,\n  \"notes\":"), "p",
      error);
  ASSERT_TRUE(p) << error;
  EXPECT_DOUBLE_EQ(p->opOverhead, 3.5e-6);
  std::optional<HardwareProfile> back = parseProfile(p->toJson(), "p", error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, *p);
  EXPECT_NE(p->toJson().find("\"op_overhead\": 3.5e-06"), std::string::npos);
  EXPECT_DOUBLE_EQ(parseProfile(kFullProfile, "p", error)->opOverhead, 0.0);
  EXPECT_EQ(parseError(edited("\"notes\":", "\"op_overhead\": -1,\n  \"notes\":")),
            "p.json: \"op_overhead\" must be a number of seconds >= 0, got -1");
}

// A calibrated CPU profile's bandwidth by size and per-op efficiencies:
// parsed, written back, and checked.
TEST(HardwareProfile, BandwidthBySizeAndOpEfficiency) {
  std::string error;
  std::optional<HardwareProfile> p = parseProfile(
      edited("\"notes\":",
             "\"memory_bandwidth_by_size\": [[196608, 3.5e10], [786432, "
             "1.5e11], [201326592, 3.5e10]],\n  \"op_efficiency\": {\"erf\": "
             "0.025, \"softmax_cross_entropy\": 0.01},\n  \"notes\":"),
      "p", error);
  ASSERT_TRUE(p) << error;
  ASSERT_EQ(p->bandwidthBySize.size(), 3u);
  EXPECT_DOUBLE_EQ(p->bandwidthBySize[1].first, 786432);
  EXPECT_DOUBLE_EQ(p->bandwidthBySize[1].second, 1.5e11);
  EXPECT_DOUBLE_EQ(p->opEfficiency.at("erf"), 0.025);
  EXPECT_DOUBLE_EQ(p->efficiencyOf("transcendental", "erf"), 0.025);
  EXPECT_DOUBLE_EQ(p->efficiencyOf("other", "transpose"), 0.25);
  std::optional<HardwareProfile> back = parseProfile(p->toJson(), "p", error);
  ASSERT_TRUE(back) << error << "\n" << p->toJson();
  EXPECT_EQ(*back, *p);
  EXPECT_NE(p->toJson().find("\"memory_bandwidth_by_size\": [[196608, "
                             "3.5e+10], [786432, 1.5e+11]"),
            std::string::npos)
      << p->toJson();

  auto withCurve = [](const std::string &curve) {
    return edited("\"notes\":",
                  "\"memory_bandwidth_by_size\": " + curve + ",\n  \"notes\":");
  };
  EXPECT_EQ(parseError(withCurve("[[1000, 1e9], [1000, 2e9]]")),
            "p.json: \"memory_bandwidth_by_size[1]\" must be at more bytes "
            "than the entry before it");
  EXPECT_EQ(parseError(withCurve("[[1000, 0]]")),
            "p.json: \"memory_bandwidth_by_size[0]\" must be two positive "
            "numbers (bytes, bytes/s), got [1000, 0]");
  EXPECT_EQ(parseError(withCurve("[[1000]]")),
            "p.json: \"memory_bandwidth_by_size[0]\" must be [bytes, bytes/s]");
  EXPECT_EQ(parseError(withCurve("5e9")),
            "p.json: \"memory_bandwidth_by_size\" must be an array of "
            "[bytes, bytes/s]");
  auto withOps = [](const std::string &ops) {
    return edited("\"notes\":",
                  "\"op_efficiency\": " + ops + ",\n  \"notes\":");
  };
  EXPECT_EQ(parseError(withOps("{\"erf\": 2}")),
            "p.json: \"op_efficiency.erf\" must be a fraction of peak in "
            "(0, 1], got 2");
  EXPECT_EQ(parseError(withOps("{\"Erf!\": 0.5}")),
            "p.json: \"op_efficiency\" keys must be op names (lower case, "
            "digits, '_'), got \"Erf!\"");
}

// toJson writes what parseProfile reads back to an equal profile, for
// awkward numbers and strings that need escaping too.
TEST(HardwareProfile, RoundTrip) {
  std::string error;
  HardwareProfile p = *parseProfile(kFullProfile, "p", error);
  p.peakFlops["f32"] = 1.0 / 3.0 * 1e12;
  p.intraNode.latency = 0.1 + 0.2;
  p.memoryCapacity = 9007199254740993; // 2^53 + 1: not a double
  p.name = "quote \" backslash \\ tab \t newline \n";
  p.notes.push_back("second");
  std::optional<HardwareProfile> back = parseProfile(p.toJson(), "p", error);
  ASSERT_TRUE(back) << error << "\n" << p.toJson();
  EXPECT_EQ(*back, p);
  EXPECT_EQ(back->toJson(), p.toJson());
  for (const std::string &name : builtinProfileNames()) {
    HardwareProfile b = *builtinProfile(name);
    back = parseProfile(b.toJson(), name, error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(*back, b) << name;
  }
}

// The layout of toJson: fixed key order, short numbers.
TEST(HardwareProfile, ToJsonText) {
  HardwareProfile p;
  p.name = "x";
  p.devicesPerNode = 2;
  p.nodes = 1;
  p.peakFlops = {{"bf16", 2e12}, {"f16", 2e12}, {"f32", 1e12}};
  p.memoryBandwidth = 1.5e11;
  p.memoryCapacity = 1024;
  p.intraNode = {1e10, 5e-6};
  p.interNode = {1e9, 1e-5};
  EXPECT_EQ(p.toJson(), R"({
  "name": "x",
  "devices_per_node": 2,
  "nodes": 1,
  "peak_flops": {"f32": 1e+12, "bf16": 2e+12, "f16": 2e+12},
  "memory_bandwidth": 1.5e+11,
  "memory_capacity": 1024,
  "intra_node": {"bandwidth": 1e+10, "latency": 5e-06},
  "inter_node": {"bandwidth": 1e+09, "latency": 1e-05}
}
)");
}

// The built-ins carry the published figures (REFERENCES.md).
TEST(HardwareProfile, BuiltinFigures) {
  std::optional<HardwareProfile> h = builtinProfile("8xH100-80GB");
  ASSERT_TRUE(h);
  EXPECT_EQ(validateProfile(*h), "");
  EXPECT_EQ(h->numDevices(), 8);
  EXPECT_DOUBLE_EQ(h->peak("bf16"), 989e12);
  EXPECT_DOUBLE_EQ(h->peak("f16"), 989e12);
  EXPECT_DOUBLE_EQ(h->peak("f32"), 67e12);
  EXPECT_DOUBLE_EQ(h->memoryBandwidth, 3.35e12);
  EXPECT_EQ(h->memoryCapacity, 80000000000);
  EXPECT_DOUBLE_EQ(h->intraNode.bandwidth, 370e9);
  EXPECT_DOUBLE_EQ(h->interNode.bandwidth, 48e9);

  std::optional<HardwareProfile> a = builtinProfile("8xA100-80GB");
  ASSERT_TRUE(a);
  EXPECT_EQ(validateProfile(*a), "");
  EXPECT_DOUBLE_EQ(a->peak("bf16"), 312e12);
  EXPECT_DOUBLE_EQ(a->peak("f32"), 19.5e12);
  EXPECT_DOUBLE_EQ(a->memoryBandwidth, 2.0e12);
  EXPECT_EQ(a->memoryCapacity, 80000000000);
  EXPECT_DOUBLE_EQ(a->intraNode.bandwidth, 230e9);
  EXPECT_DOUBLE_EQ(a->interNode.bandwidth, 24e9);
  // Inter-node links are slower than intra-node ones.
  EXPECT_LT(a->interNode.bandwidth, a->intraNode.bandwidth);
  EXPECT_GT(a->interNode.latency, a->intraNode.latency);

  EXPECT_FALSE(builtinProfile("8xV100"));
  EXPECT_EQ(builtinProfileNames(),
            (std::vector<std::string>{"8xA100-80GB", "8xH100-80GB"}));
}

// profiles/NAME.json is exactly the built-in: it loads to an equal profile
// and its text is toJson's, so the two cannot drift apart.
TEST(HardwareProfile, ShippedFilesEqualBuiltins) {
  for (const std::string &name : builtinProfileNames()) {
    std::string path =
        std::string(LOOM_SOURCE_DIR) + "/profiles/" + name + ".json";
    std::string error;
    std::optional<HardwareProfile> file = loadProfile(path, error);
    ASSERT_TRUE(file) << error;
    EXPECT_EQ(*file, *builtinProfile(name)) << path;
    EXPECT_EQ(readFile(path), builtinProfile(name)->toJson()) << path;
  }
}

// saveProfile and loadProfile round-trip through a file; unwritable and
// missing files are errors naming the path.
TEST(HardwareProfile, SaveAndLoad) {
  std::string path = ::testing::TempDir() + "loom-cost-profile.json";
  std::string error;
  HardwareProfile p = *builtinProfile("8xA100-80GB");
  ASSERT_TRUE(saveProfile(p, path, error)) << error;
  std::optional<HardwareProfile> back = loadProfile(path, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, p);
  std::remove(path.c_str());

  EXPECT_FALSE(loadProfile(path, error));
  EXPECT_EQ(error,
            path + ": cannot read the profile: cannot open: No such file or "
                   "directory");
  std::string bad = ::testing::TempDir() + "no-such-dir/p.json";
  EXPECT_FALSE(saveProfile(p, bad, error));
  EXPECT_EQ(error,
            "cannot open output file '" + bad + "': No such file or directory");
}

// Malformed JSON and the wrong top-level type.
TEST(HardwareProfileErrors, NotAProfile) {
  EXPECT_EQ(parseError("{"), "p.json: not valid JSON: [1:1, byte=1]: "
                             "Expected object key");
  EXPECT_EQ(parseError("[1, 2]"),
            "p.json: a hardware profile must be a JSON object");
}

// Keys the format does not have are refused, at the top and inside.
TEST(HardwareProfileErrors, UnknownKeys) {
  EXPECT_EQ(parseError(edited("\"nodes\"", "\"node\"")),
            "p.json: unknown key \"node\" (expected \"name\", "
            "\"devices_per_node\", \"nodes\", \"peak_flops\", "
            "\"memory_bandwidth\", \"memory_bandwidth_by_size\", "
            "\"memory_capacity\", \"intra_node\", \"inter_node\", "
            "\"efficiency\", \"op_efficiency\", \"op_overhead\", \"notes\")");
  EXPECT_EQ(parseError(edited("\"latency\": 2e-6", "\"lat\": 2e-6")),
            "p.json: unknown key \"intra_node.lat\" (expected "
            "\"bandwidth\", \"latency\")");
  EXPECT_EQ(parseError(edited("\"f16\"", "\"fp16\"")),
            "p.json: unknown key \"peak_flops.fp16\" (expected \"f32\", "
            "\"bf16\", \"f16\")");
  EXPECT_EQ(parseError(edited("\"matmul\"", "\"gemm\"")),
            "p.json: unknown key \"efficiency.gemm\" (expected \"matmul\", "
            "\"conv\", \"elementwise\", \"transcendental\", \"reduction\", "
            "\"other\")");
}

// Every required field is required, nested ones included.
TEST(HardwareProfileErrors, MissingFields) {
  EXPECT_EQ(parseError(edited("\"memory_bandwidth\": 5e11,", "")),
            "p.json: missing field \"memory_bandwidth\"");
  EXPECT_EQ(parseError(edited("\"name\": \"test-node\",", "")),
            "p.json: missing field \"name\"");
  EXPECT_EQ(parseError(edited(", \"latency\": 8e-6", "")),
            "p.json: missing field \"inter_node.latency\"");
  EXPECT_EQ(parseError(edited(", \"bf16\": 4e12", "")),
            "p.json: missing field \"peak_flops.bf16\"");
}

// Zero, negative and fractional values where they make no sense.
TEST(HardwareProfileErrors, NonPositiveNumbers) {
  EXPECT_EQ(parseError(edited("\"bandwidth\": 1e11", "\"bandwidth\": 0")),
            "p.json: \"intra_node.bandwidth\" must be a positive number, "
            "got 0");
  EXPECT_EQ(parseError(edited("\"latency\": 8e-6", "\"latency\": -1")),
            "p.json: \"inter_node.latency\" must be a positive number, got "
            "-1");
  EXPECT_EQ(parseError(edited("\"f32\": 1e12", "\"f32\": -5")),
            "p.json: \"peak_flops.f32\" must be a positive number, got -5");
  EXPECT_EQ(parseError(edited("\"memory_bandwidth\": 5e11",
                              "\"memory_bandwidth\": 0")),
            "p.json: \"memory_bandwidth\" must be a positive number, got 0");
  EXPECT_EQ(parseError(edited("\"nodes\": 2", "\"nodes\": 0")),
            "p.json: \"nodes\" must be a positive integer, got 0");
  EXPECT_EQ(
      parseError(edited("\"devices_per_node\": 4", "\"devices_per_node\": -4")),
      "p.json: \"devices_per_node\" must be a positive integer, got -4");
  EXPECT_EQ(parseError(edited("\"memory_capacity\": 16000000000",
                              "\"memory_capacity\": 0")),
            "p.json: \"memory_capacity\" must be a positive integer "
            "(bytes), got 0");
  EXPECT_EQ(parseError(edited("\"matmul\": 0.8", "\"matmul\": 1.5")),
            "p.json: \"efficiency.matmul\" must be a fraction of peak in "
            "(0, 1], got 1.5");
  EXPECT_EQ(parseError(edited("\"matmul\": 0.8", "\"matmul\": 0")),
            "p.json: \"efficiency.matmul\" must be a fraction of peak in "
            "(0, 1], got 0");
}

// Values of the wrong JSON type.
TEST(HardwareProfileErrors, WrongTypes) {
  EXPECT_EQ(parseError(edited("\"nodes\": 2", "\"nodes\": 2.5")),
            "p.json: \"nodes\" must be an integer");
  EXPECT_EQ(parseError(edited("\"nodes\": 2", "\"nodes\": \"2\"")),
            "p.json: \"nodes\" must be an integer");
  EXPECT_EQ(parseError(edited("\"memory_bandwidth\": 5e11",
                              "\"memory_bandwidth\": \"fast\"")),
            "p.json: \"memory_bandwidth\" must be a number");
  EXPECT_EQ(parseError(edited("\"f32\": 1e12", "\"f32\": null")),
            "p.json: \"peak_flops.f32\" must be a number");
  EXPECT_EQ(parseError(edited("\"intra_node\": {\"bandwidth\": 1e11, "
                              "\"latency\": 2e-6}",
                              "\"intra_node\": 1e11")),
            "p.json: \"intra_node\" must be an object");
  EXPECT_EQ(parseError(edited("\"name\": \"test-node\"", "\"name\": 3")),
            "p.json: \"name\" must be a string");
  EXPECT_EQ(parseError(edited("\"name\": \"test-node\"", "\"name\": \"\"")),
            "p.json: \"name\" must be a non-empty string");
  EXPECT_EQ(parseError(edited("[\"made up for a test\"]", "\"text\"")),
            "p.json: \"notes\" must be an array of strings");
  EXPECT_EQ(parseError(edited("[\"made up for a test\"]", "[1]")),
            "p.json: \"notes\" must be an array of strings");
}

// validateProfile checks profiles built in code the same way.
TEST(HardwareProfileErrors, ValidateInCode) {
  HardwareProfile p = *builtinProfile("8xH100-80GB");
  EXPECT_EQ(validateProfile(p), "");
  p.peakFlops.erase("f16");
  EXPECT_EQ(validateProfile(p), "missing field \"peak_flops.f16\"");
  p = *builtinProfile("8xH100-80GB");
  p.interNode.bandwidth = -1;
  EXPECT_EQ(validateProfile(p),
            "\"inter_node.bandwidth\" must be a positive number, got -1");
}
