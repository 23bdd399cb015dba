//===- HardwareProfile.h - A cluster's devices and links --------*- C++ -*-===//
//
// A hardware profile describes a cluster to the cost model (DESIGN.md
// section 6): how many devices per node and how many nodes, each device's
// peak FLOP/s per element type, its memory bandwidth and capacity, the
// links inside and across nodes (bus bandwidth as nccl-tests define it, and
// a per-step latency), and the fraction of peak each class of kernel
// reaches. Profiles are JSON files (profiles/ ships some; `loom calibrate`
// measures one); the format is documented in docs/cost-model.md.
//
// Plain C++17 in the interface; the JSON parser behind it is LLVM's.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_COST_HARDWAREPROFILE_H
#define LOOM_COMPILER_COST_HARDWAREPROFILE_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::cost {

/// A class of links (NVLink inside a node, InfiniBand across nodes).
struct LinkProfile {
  /// Bus bandwidth per device in bytes/s, as nccl-tests report it: the
  /// algorithm bandwidth times the collective's bus factor (see
  /// CostModel.h), so one figure serves every collective.
  double bandwidth = 0;
  /// Seconds per step of a collective (one hop of a ring).
  double latency = 0;

  bool operator==(const LinkProfile &o) const {
    return bandwidth == o.bandwidth && latency == o.latency;
  }
};

struct HardwareProfile {
  std::string name;
  int64_t devicesPerNode = 1;
  int64_t nodes = 1;
  /// Peak FLOP/s of one device per element type: "f32", "bf16", "f16"
  /// (exactly these three; see kProfileDtypes).
  std::map<std::string, double> peakFlops;
  /// Memory bandwidth of one device, bytes/s.
  double memoryBandwidth = 0;
  /// Where the bandwidth depends on how much a kernel touches (a CPU's
  /// caches): (bytes a kernel reads and writes, bytes/s) at increasing
  /// sizes, measured by `loom calibrate`. Empty: memoryBandwidth at any
  /// size.
  std::vector<std::pair<double, double>> bandwidthBySize;
  /// Memory of one device, bytes.
  int64_t memoryCapacity = 0;
  LinkProfile intraNode;
  LinkProfile interNode;
  /// Fraction of peak (FLOP/s and bandwidth alike) that kernels of a class
  /// reach, in (0, 1]; classes are those of kKernelClasses, and a class
  /// absent here reaches 1.0.
  std::map<std::string, double> efficiency;
  /// Fraction of peak that the kernel of one op reaches, where its kernel
  /// is faster or slower than its class's (a series evaluated in double, a
  /// broadcast the kernel walks element by element): op names as the
  /// dialect spells them without its prefix ("erf", "select"), in (0, 1].
  /// `loom calibrate` measures the ops of a transformer step.
  std::map<std::string, double> opEfficiency;
  /// Seconds every kernel call costs besides its roofline time (dispatch,
  /// launch); 0 if the profile does not say.
  double opOverhead = 0;
  /// Free text: where the figures come from, what was assumed.
  std::vector<std::string> notes;

  int64_t numDevices() const { return devicesPerNode * nodes; }
  /// The node of a global rank: rank / devicesPerNode.
  int64_t nodeOf(int64_t rank) const { return rank / devicesPerNode; }
  /// Peak FLOP/s for `dtype`; element types the profile does not list
  /// (integers, bool) use the f32 peak.
  double peak(const std::string &dtype) const;
  /// The bandwidth of a kernel moving `bytes`: bandwidthBySize interpolated
  /// linearly in log(bytes) and held at its ends; memoryBandwidth without
  /// it.
  double bandwidthFor(double bytes) const;
  /// The efficiency of `kernelClass`: the profile's figure; else, for
  /// "transcendental", that of "elementwise"; else that of "other" when the
  /// class is not one of kKernelClasses; else 1.0.
  double efficiencyOf(const std::string &kernelClass) const;
  /// The efficiency of `op`'s kernel: its opEfficiency, else its class's.
  double efficiencyOf(const std::string &kernelClass,
                      const std::string &op) const;

  /// The profile as pretty-printed JSON text (keys in a fixed order,
  /// numbers in their shortest round-tripping form), ending in a newline;
  /// parseProfile reads it back to an equal profile.
  std::string toJson() const;

  bool operator==(const HardwareProfile &o) const;
  bool operator!=(const HardwareProfile &o) const { return !(*this == o); }
};

/// The element types a profile gives peaks for.
extern const std::vector<std::string> kProfileDtypes;
/// The kernel classes a profile may give efficiencies for: "matmul",
/// "conv", "elementwise" (arithmetic, comparisons, selects: a few
/// operations per element), "transcendental" (elementwise functions a
/// processor evaluates as a series: exp, log, erf, tanh, sigmoid, ...),
/// "reduction", "other" (data movement).
extern const std::vector<std::string> kKernelClasses;

/// Parses and validates a profile from JSON `text`. `source` names the text
/// in error messages (a file path). Strict: unknown keys, missing fields,
/// wrong types and non-positive numbers are errors naming `source` and the
/// field (e.g. `x.json: "intra_node.bandwidth" must be a positive number,
/// got 0`). Returns nullopt and sets `error` on failure.
std::optional<HardwareProfile> parseProfile(const std::string &text,
                                            const std::string &source,
                                            std::string &error);

/// Reads and parses the profile file at `path`.
std::optional<HardwareProfile> loadProfile(const std::string &path,
                                           std::string &error);

/// Writes `profile.toJson()` to `path`; false and `error` on failure.
bool saveProfile(const HardwareProfile &profile, const std::string &path,
                 std::string &error);

/// Checks the invariants parseProfile enforces on a profile built in code;
/// returns "" or the first violation (naming the field as in the JSON).
std::string validateProfile(const HardwareProfile &profile);

/// The profiles Loom knows by name ("8xA100-80GB", "8xH100-80GB"), built
/// from published figures (see REFERENCES in HardwareProfile.cpp); nullopt
/// for other names. profiles/NAME.json holds the same profile.
std::optional<HardwareProfile> builtinProfile(const std::string &name);
/// The names builtinProfile knows, sorted.
std::vector<std::string> builtinProfileNames();

/// A built-in profile by name, else the profile file at `nameOrPath`; on
/// failure nullopt and `error`, which lists the built-in names and says why
/// the file was not read.
std::optional<HardwareProfile> findProfile(const std::string &nameOrPath,
                                           std::string &error);

} // namespace loom::cost

#endif // LOOM_COMPILER_COST_HARDWAREPROFILE_H
