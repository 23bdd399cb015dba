//===- HardwareProfile.cpp - Profiles: JSON, validation, built-ins --------===//
//
// The JSON format (docs/cost-model.md):
//
//   {
//     "name": "8xH100-80GB",
//     "devices_per_node": 8,
//     "nodes": 1,
//     "peak_flops": {"f32": 6.7e+13, "bf16": 9.89e+14, "f16": 9.89e+14},
//     "memory_bandwidth": 3.35e+12,
//     "memory_bandwidth_by_size": [[262144, 9e10], ...], optional
//     "memory_capacity": 80000000000,
//     "intra_node": {"bandwidth": 3.7e+11, "latency": 5e-06},
//     "inter_node": {"bandwidth": 4.8e+10, "latency": 1e-05},
//     "efficiency": {"matmul": 1, ...},      optional
//     "op_efficiency": {"erf": 0.04, ...},    optional
//     "op_overhead": 4e-06,                   optional (seconds per kernel)
//     "notes": ["...", ...]                   optional
//   }
//
//===----------------------------------------------------------------------===//

#include "compiler/cost/HardwareProfile.h"
#include "common/text/InputLimits.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace loom::cost {

const std::vector<std::string> kProfileDtypes = {"f32", "bf16", "f16"};
const std::vector<std::string> kKernelClasses = {
    "matmul", "conv", "elementwise", "transcendental", "reduction", "other"};

double HardwareProfile::peak(const std::string &dtype) const {
  auto it = peakFlops.find(dtype);
  if (it != peakFlops.end())
    return it->second;
  it = peakFlops.find("f32");
  return it == peakFlops.end() ? 0 : it->second;
}

double HardwareProfile::bandwidthFor(double bytes) const {
  const auto &curve = bandwidthBySize;
  if (curve.empty())
    return memoryBandwidth;
  if (bytes <= curve.front().first)
    return curve.front().second;
  if (bytes >= curve.back().first)
    return curve.back().second;
  size_t i = 1;
  while (curve[i].first < bytes)
    ++i;
  auto [x0, y0] = curve[i - 1];
  auto [x1, y1] = curve[i];
  double f = std::log(bytes / x0) / std::log(x1 / x0);
  return y0 + f * (y1 - y0);
}

double HardwareProfile::efficiencyOf(const std::string &kernelClass) const {
  auto it = efficiency.find(kernelClass);
  if (it != efficiency.end())
    return it->second;
  // Transcendental functions are elementwise ops: a profile that does not
  // tell them apart gives them its elementwise figure.
  if (kernelClass == "transcendental")
    return efficiencyOf("elementwise");
  bool known = std::find(kKernelClasses.begin(), kKernelClasses.end(),
                         kernelClass) != kKernelClasses.end();
  if (!known) {
    it = efficiency.find("other");
    if (it != efficiency.end())
      return it->second;
  }
  return 1.0;
}

double HardwareProfile::efficiencyOf(const std::string &kernelClass,
                                     const std::string &op) const {
  auto it = opEfficiency.find(op);
  return it != opEfficiency.end() ? it->second : efficiencyOf(kernelClass);
}

bool HardwareProfile::operator==(const HardwareProfile &o) const {
  return name == o.name && devicesPerNode == o.devicesPerNode &&
         nodes == o.nodes && peakFlops == o.peakFlops &&
         memoryBandwidth == o.memoryBandwidth &&
         bandwidthBySize == o.bandwidthBySize &&
         memoryCapacity == o.memoryCapacity && intraNode == o.intraNode &&
         interNode == o.interNode && efficiency == o.efficiency &&
         opEfficiency == o.opEfficiency && opOverhead == o.opOverhead &&
         notes == o.notes;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// The shortest decimal form that reads back as the same double.
std::string formatNumber(double value) {
  char buf[64];
  std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, r.ptr);
}

/// `s` as a JSON string (llvm::json's escaping; invalid UTF-8 replaced).
std::string quote(const std::string &s) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(llvm::json::fixUTF8(s));
  return out;
}

/// `{"k1": v1, "k2": v2}` on one line, keys in `order` first, then the
/// others in map order.
std::string numberMap(const std::map<std::string, double> &values,
                      const std::vector<std::string> &order) {
  std::string out = "{";
  std::set<std::string> done;
  auto add = [&](const std::string &key, double v) {
    out += (done.empty() ? "" : ", ") + quote(key) + ": " + formatNumber(v);
    done.insert(key);
  };
  for (const std::string &key : order)
    if (auto it = values.find(key); it != values.end())
      add(key, it->second);
  for (const auto &[key, v] : values)
    if (!done.count(key))
      add(key, v);
  return out + "}";
}

std::string link(const LinkProfile &l) {
  return "{\"bandwidth\": " + formatNumber(l.bandwidth) +
         ", \"latency\": " + formatNumber(l.latency) + "}";
}

} // namespace

std::string HardwareProfile::toJson() const {
  std::string s = "{\n";
  s += "  \"name\": " + quote(name) + ",\n";
  s += "  \"devices_per_node\": " + std::to_string(devicesPerNode) + ",\n";
  s += "  \"nodes\": " + std::to_string(nodes) + ",\n";
  s += "  \"peak_flops\": " + numberMap(peakFlops, kProfileDtypes) + ",\n";
  s += "  \"memory_bandwidth\": " + formatNumber(memoryBandwidth) + ",\n";
  if (!bandwidthBySize.empty()) {
    s += "  \"memory_bandwidth_by_size\": [";
    for (size_t i = 0; i < bandwidthBySize.size(); ++i)
      s += std::string(i ? ", " : "") + "[" +
           formatNumber(bandwidthBySize[i].first) + ", " +
           formatNumber(bandwidthBySize[i].second) + "]";
    s += "],\n";
  }
  s += "  \"memory_capacity\": " + std::to_string(memoryCapacity) + ",\n";
  s += "  \"intra_node\": " + link(intraNode) + ",\n";
  s += "  \"inter_node\": " + link(interNode);
  if (!efficiency.empty())
    s += ",\n  \"efficiency\": " + numberMap(efficiency, kKernelClasses);
  if (!opEfficiency.empty())
    s += ",\n  \"op_efficiency\": " + numberMap(opEfficiency, {});
  if (opOverhead != 0)
    s += ",\n  \"op_overhead\": " + formatNumber(opOverhead);
  if (!notes.empty()) {
    s += ",\n  \"notes\": [";
    for (size_t i = 0; i < notes.size(); ++i)
      s += std::string(i ? "," : "") + "\n    " + quote(notes[i]);
    s += "\n  ]";
  }
  return s + "\n}\n";
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

namespace {

bool positive(double v) { return std::isfinite(v) && v > 0; }

std::string notPositive(const std::string &field, double v) {
  return "\"" + field + "\" must be a positive number, got " + formatNumber(v);
}

} // namespace

std::string validateProfile(const HardwareProfile &p) {
  if (p.name.empty())
    return "\"name\" must be a non-empty string";
  if (p.devicesPerNode < 1)
    return "\"devices_per_node\" must be a positive integer, got " +
           std::to_string(p.devicesPerNode);
  if (p.nodes < 1)
    return "\"nodes\" must be a positive integer, got " +
           std::to_string(p.nodes);
  for (const auto &[dtype, v] : p.peakFlops)
    if (std::find(kProfileDtypes.begin(), kProfileDtypes.end(), dtype) ==
        kProfileDtypes.end())
      return "unknown key \"peak_flops." + dtype +
             "\" (expected \"f32\", \"bf16\", \"f16\")";
  for (const std::string &dtype : kProfileDtypes) {
    auto it = p.peakFlops.find(dtype);
    if (it == p.peakFlops.end())
      return "missing field \"peak_flops." + dtype + "\"";
    if (!positive(it->second))
      return notPositive("peak_flops." + dtype, it->second);
  }
  if (!positive(p.memoryBandwidth))
    return notPositive("memory_bandwidth", p.memoryBandwidth);
  for (size_t i = 0; i < p.bandwidthBySize.size(); ++i) {
    auto [bytes, rate] = p.bandwidthBySize[i];
    std::string at = "memory_bandwidth_by_size[" + std::to_string(i) + "]";
    if (!positive(bytes) || !positive(rate))
      return "\"" + at +
             "\" must be two positive numbers (bytes, bytes/s), got [" +
             formatNumber(bytes) + ", " + formatNumber(rate) + "]";
    if (i > 0 && !(bytes > p.bandwidthBySize[i - 1].first))
      return "\"" + at + "\" must be at more bytes than the entry before it";
  }
  if (p.memoryCapacity < 1)
    return "\"memory_capacity\" must be a positive integer (bytes), got " +
           std::to_string(p.memoryCapacity);
  for (auto [field, l] : {std::pair{"intra_node", p.intraNode},
                          std::pair{"inter_node", p.interNode}}) {
    if (!positive(l.bandwidth))
      return notPositive(std::string(field) + ".bandwidth", l.bandwidth);
    if (!positive(l.latency))
      return notPositive(std::string(field) + ".latency", l.latency);
  }
  if (!(p.opOverhead >= 0) || !std::isfinite(p.opOverhead))
    return "\"op_overhead\" must be a number of seconds >= 0, got " +
           formatNumber(p.opOverhead);
  for (const auto &[cls, v] : p.efficiency) {
    if (std::find(kKernelClasses.begin(), kKernelClasses.end(), cls) ==
        kKernelClasses.end()) {
      std::string expected;
      for (const std::string &known : kKernelClasses)
        expected += (expected.empty() ? "\"" : ", \"") + known + "\"";
      return "unknown key \"efficiency." + cls + "\" (expected " + expected +
             ")";
    }
    if (!positive(v) || v > 1)
      return "\"efficiency." + cls +
             "\" must be a fraction of peak in (0, 1], got " + formatNumber(v);
  }
  for (const auto &[op, v] : p.opEfficiency) {
    bool name = !op.empty() && std::all_of(op.begin(), op.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!name)
      return "\"op_efficiency\" keys must be op names (lower case, digits, "
             "'_'), got \"" +
             op + "\"";
    if (!positive(v) || v > 1)
      return "\"op_efficiency." + op +
             "\" must be a fraction of peak in (0, 1], got " + formatNumber(v);
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

using llvm::json::Object;
using llvm::json::Value;

/// Reads fields out of JSON objects, keeping the first error (already
/// prefixed with the source and naming the field by its dotted path).
class Reader {
public:
  explicit Reader(std::string source) : source(std::move(source)) {}

  bool ok() const { return error.empty(); }
  const std::string &message() const { return error; }

  void fail(const std::string &what) {
    if (error.empty())
      error = source + ": " + what;
  }

  /// Fails on keys of `object` (at `path`) outside `allowed`.
  void checkKeys(const Object &object, const std::string &path,
                 const std::vector<std::string> &allowed) {
    // Report unknown keys in sorted order, so the error is deterministic.
    std::set<std::string> keys;
    for (const auto &kv : object)
      keys.insert(kv.first.str());
    for (const std::string &key : keys)
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string expected;
        for (const std::string &a : allowed)
          expected += (expected.empty() ? "\"" : ", \"") + a + "\"";
        fail("unknown key \"" + path + key + "\" (expected " + expected + ")");
        return;
      }
  }

  const Value *field(const Object &object, const std::string &path,
                     const std::string &key, bool required = true) {
    const Value *v = object.get(key);
    if (!v && required)
      fail("missing field \"" + path + key + "\"");
    return v;
  }

  double number(const Object &object, const std::string &path,
                const std::string &key) {
    const Value *v = field(object, path, key);
    if (!v)
      return 0;
    std::optional<double> d = v->getAsNumber();
    if (!d) {
      fail("\"" + path + key + "\" must be a number");
      return 0;
    }
    return *d;
  }

  int64_t integer(const Object &object, const std::string &path,
                  const std::string &key) {
    const Value *v = field(object, path, key);
    if (!v)
      return 0;
    std::optional<int64_t> i = v->getAsInteger();
    if (!i) {
      fail("\"" + path + key + "\" must be an integer");
      return 0;
    }
    return *i;
  }

  const Object *object(const Object &parent, const std::string &path,
                       const std::string &key, bool required = true) {
    const Value *v = field(parent, path, key, required);
    if (!v)
      return nullptr;
    const Object *o = v->getAsObject();
    if (!o)
      fail("\"" + path + key + "\" must be an object");
    return o;
  }

  /// An object of numbers, e.g. "peak_flops".
  std::map<std::string, double> numbers(const Object &o,
                                        const std::string &path) {
    std::map<std::string, double> out;
    for (const auto &kv : o) {
      std::optional<double> d = kv.second.getAsNumber();
      if (!d)
        fail("\"" + path + kv.first.str() + "\" must be a number");
      else
        out[kv.first.str()] = *d;
    }
    return out;
  }

  LinkProfile link(const Object &root, const std::string &key) {
    LinkProfile l;
    const Object *o = object(root, "", key);
    if (!o)
      return l;
    std::string path = key + ".";
    checkKeys(*o, path, {"bandwidth", "latency"});
    l.bandwidth = number(*o, path, "bandwidth");
    l.latency = number(*o, path, "latency");
    return l;
  }

private:
  std::string source;
  std::string error;
};

} // namespace

std::optional<HardwareProfile> parseProfile(const std::string &text,
                                            const std::string &source,
                                            std::string &error) {
  if (std::string deep = limits::jsonNestingError(text); !deep.empty()) {
    error = source + ": not a hardware profile: " + deep;
    return std::nullopt;
  }
  llvm::Expected<Value> parsed = llvm::json::parse(text);
  if (!parsed) {
    error = source + ": not valid JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  const Object *root = parsed->getAsObject();
  if (!root) {
    error = source + ": a hardware profile must be a JSON object";
    return std::nullopt;
  }
  Reader r(source);
  r.checkKeys(*root, "",
              {"name", "devices_per_node", "nodes", "peak_flops",
               "memory_bandwidth", "memory_bandwidth_by_size",
               "memory_capacity", "intra_node", "inter_node", "efficiency",
               "op_efficiency", "op_overhead", "notes"});
  HardwareProfile p;
  if (const Value *name = r.field(*root, "", "name")) {
    if (std::optional<llvm::StringRef> s = name->getAsString())
      p.name = s->str();
    else
      r.fail("\"name\" must be a string");
  }
  p.devicesPerNode = r.integer(*root, "", "devices_per_node");
  p.nodes = r.integer(*root, "", "nodes");
  if (const Object *peaks = r.object(*root, "", "peak_flops"))
    p.peakFlops = r.numbers(*peaks, "peak_flops.");
  p.memoryBandwidth = r.number(*root, "", "memory_bandwidth");
  if (const Value *curve =
          r.field(*root, "", "memory_bandwidth_by_size", false)) {
    const llvm::json::Array *points = curve->getAsArray();
    for (size_t i = 0; points && i < points->size(); ++i) {
      const llvm::json::Array *pair = (*points)[i].getAsArray();
      std::optional<double> bytes, rate;
      if (pair && pair->size() == 2) {
        bytes = (*pair)[0].getAsNumber();
        rate = (*pair)[1].getAsNumber();
      }
      if (!bytes || !rate) {
        r.fail("\"memory_bandwidth_by_size[" + std::to_string(i) +
               "]\" must be [bytes, bytes/s]");
        break;
      }
      p.bandwidthBySize.emplace_back(*bytes, *rate);
    }
    if (!points)
      r.fail("\"memory_bandwidth_by_size\" must be an array of [bytes, "
             "bytes/s]");
  }
  p.memoryCapacity = r.integer(*root, "", "memory_capacity");
  p.intraNode = r.link(*root, "intra_node");
  p.interNode = r.link(*root, "inter_node");
  if (const Object *eff = r.object(*root, "", "efficiency", false))
    p.efficiency = r.numbers(*eff, "efficiency.");
  if (const Object *ops = r.object(*root, "", "op_efficiency", false))
    p.opEfficiency = r.numbers(*ops, "op_efficiency.");
  if (root->get("op_overhead"))
    p.opOverhead = r.number(*root, "", "op_overhead");
  if (const Value *notes = r.field(*root, "", "notes", false)) {
    const llvm::json::Array *list = notes->getAsArray();
    if (!list)
      r.fail("\"notes\" must be an array of strings");
    else
      for (const Value &n : *list) {
        std::optional<llvm::StringRef> s = n.getAsString();
        if (!s) {
          r.fail("\"notes\" must be an array of strings");
          break;
        }
        p.notes.push_back(s->str());
      }
  }
  if (!r.ok()) {
    error = r.message();
    return std::nullopt;
  }
  std::string invalid = validateProfile(p);
  if (!invalid.empty()) {
    error = source + ": " + invalid;
    return std::nullopt;
  }
  return p;
}

std::optional<HardwareProfile> loadProfile(const std::string &path,
                                           std::string &error) {
  std::string text, why;
  if (!limits::readBoundedFile(path, limits::kMaxJsonBytes, text, why)) {
    error = path + ": cannot read the profile: " + why;
    return std::nullopt;
  }
  return parseProfile(text, path, error);
}

bool saveProfile(const HardwareProfile &profile, const std::string &path,
                 std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot open output file '" + path + "': " + ec.message();
    return false;
  }
  os << profile.toJson();
  os.close();
  if (os.has_error()) {
    error = "cannot write '" + path + "': " + os.error().message();
    os.clear_error();
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Built-in profiles
//===----------------------------------------------------------------------===//
//
// REFERENCES (the figures and their sources; /work/shared/REFERENCES.md):
// - H100 SXM datasheet: 989 TFLOP/s dense bf16/fp16, 67 TFLOP/s fp32
//   (non-tensor), 80 GB HBM3 at 3.35 TB/s.
// - A100 SXM 80 GB datasheet: 312 TFLOP/s dense bf16/fp16, 19.5 TFLOP/s
//   fp32 (non-tensor), 80 GB HBM2e at 2.0 TB/s.
// - nccl-tests (doc/PERFORMANCE.md and published runs): 8xH100 NVLink ring
//   all-reduce about 370 GB/s bus bandwidth; DGX A100 (NVLink3 / NVSwitch)
//   about 230 GB/s bus bandwidth for large all-reduces; 400 Gb/s
//   InfiniBand NDR about 46-48 GB/s per NIC (one NIC per GPU).
// - Assumptions: HDR InfiniBand (200 Gb/s, one NIC per GPU as in DGX A100)
//   reaches about 24 GB/s; latencies per ring step of 5 us inside a node
//   and 10 us across nodes are round figures of the order nccl-tests shows
//   for small messages, not measurements. Memory capacity is the marketed
//   80 GB (80e9 bytes; the devices report about 79.6 GiB).

namespace {

/// Every kernel class at 1: the built-in figures are peaks.
std::map<std::string, double> peakEfficiencies() {
  std::map<std::string, double> efficiency;
  for (const std::string &kernelClass : kKernelClasses)
    efficiency[kernelClass] = 1.0;
  return efficiency;
}

HardwareProfile h100() {
  HardwareProfile p;
  p.name = "8xH100-80GB";
  p.devicesPerNode = 8;
  p.nodes = 1;
  p.peakFlops = {{"f32", 67e12}, {"bf16", 989e12}, {"f16", 989e12}};
  p.memoryBandwidth = 3.35e12;
  p.memoryCapacity = 80'000'000'000;
  p.intraNode = {370e9, 5e-6};
  p.interNode = {48e9, 1e-5};
  p.efficiency = peakEfficiencies();
  p.notes = {
      "H100 SXM datasheet: 989 TFLOP/s dense bf16/fp16, 67 TFLOP/s fp32, "
      "80 GB HBM3 at 3.35 TB/s",
      "intra_node: nccl-tests 8xH100 NVLink ring all-reduce, about 370 GB/s "
      "bus bandwidth",
      "inter_node: 400 Gb/s InfiniBand NDR, one NIC per GPU, about 48 GB/s "
      "per device (nccl-tests: 46-48 GB/s)",
      "latencies (5 us per ring step inside a node, 10 us across nodes) are "
      "assumptions, not measurements",
      "efficiencies are 1: the figures are peaks (a large bf16 GEMM reaches "
      "about 798 TFLOP/s, 0.81 of peak)",
      "one node; set \"nodes\" to describe a cluster of these nodes"};
  return p;
}

HardwareProfile a100() {
  HardwareProfile p;
  p.name = "8xA100-80GB";
  p.devicesPerNode = 8;
  p.nodes = 1;
  p.peakFlops = {{"f32", 19.5e12}, {"bf16", 312e12}, {"f16", 312e12}};
  p.memoryBandwidth = 2.0e12;
  p.memoryCapacity = 80'000'000'000;
  p.intraNode = {230e9, 5e-6};
  p.interNode = {24e9, 1e-5};
  p.efficiency = peakEfficiencies();
  p.notes = {
      "A100 SXM 80 GB datasheet: 312 TFLOP/s dense bf16/fp16, 19.5 TFLOP/s "
      "fp32, 80 GB HBM2e at 2.0 TB/s",
      "intra_node: nccl-tests on DGX A100 (NVLink3 / NVSwitch) report about "
      "230 GB/s bus bandwidth for large all-reduces",
      "inter_node: 200 Gb/s InfiniBand HDR, one NIC per GPU as in DGX A100, "
      "about 24 GB/s per device (an assumption: 25 GB/s line rate)",
      "latencies (5 us per ring step inside a node, 10 us across nodes) are "
      "assumptions, not measurements",
      "efficiencies are 1: the figures are peaks",
      "one node; set \"nodes\" to describe a cluster of these nodes"};
  return p;
}

} // namespace

std::optional<HardwareProfile> builtinProfile(const std::string &name) {
  if (name == "8xA100-80GB")
    return a100();
  if (name == "8xH100-80GB")
    return h100();
  return std::nullopt;
}

std::vector<std::string> builtinProfileNames() {
  return {"8xA100-80GB", "8xH100-80GB"};
}

std::optional<HardwareProfile> findProfile(const std::string &nameOrPath,
                                           std::string &error) {
  if (std::optional<HardwareProfile> builtin = builtinProfile(nameOrPath))
    return builtin;
  std::string why;
  std::optional<HardwareProfile> profile = loadProfile(nameOrPath, why);
  if (!profile) {
    std::string names;
    for (const std::string &n : builtinProfileNames())
      names += (names.empty() ? "" : ", ") + n;
    error = "hardware profile '" + nameOrPath + "' is neither built in (" +
            names + ") nor a readable file: " + why;
  }
  return profile;
}

} // namespace loom::cost
