//===- CostModel.h - Compute, communication and memory costs ----*- C++ -*-===//
//
// The terms the strategy search adds up (DESIGN.md section 6), all against
// a HardwareProfile and all per device:
//
// Compute (roofline). An op doing `flops` floating-point operations and
// moving `bytes` to and from memory in element type `dtype`, run by a
// kernel of class `kernelClass` with efficiency e = profile.efficiencyOf(
// kernelClass, op) (the op's own figure where the profile has one), takes
//
//     t = overhead + max(flops / (peak[dtype] * e),
//                        bytes / (bandwidth(bytes) * e))
//
// where overhead is the profile's op_overhead (the fixed cost of a call)
// and bandwidth(bytes) its memory bandwidth, at the size of the kernel's
// traffic where the profile measured it by size (a CPU's caches).
//
// Communication (alpha-beta with nccl-tests bus factors). A collective of
// `kind` over a group of n ranks on `bytes` takes
//
//     t = latency(kind, group)
//       + busFactor(kind, n) * bytes / link.bandwidth
//
// where `link` is the slowest link the group spans: the inter-node link
// when the ranks, mapped to nodes by rank / devicesPerNode, fall on more
// than one node, else the intra-node link. Only the bandwidth is the
// slowest link's throughout. A ring visits a node's ranks one after
// another, so of its steps(kind, n) only interSteps cross nodes (NCCL's
// tuning model of its rings): with N the nodes the group spans,
//
//     latency = (steps - interSteps) * intraNode.latency
//             + interSteps * interNode.latency
//     interSteps = 0 (N = 1), 2(N-1) (AllReduce), N-1 (ReduceScatter,
//                  AllGather, Broadcast), steps (AllToAll, SendRecv)
//
// (all-to-all and send/recv are not rings: their every step may cross).
// `bytes` and the factors follow nccl-tests (the "size" of its tables):
//
//     kind           bytes is                      busFactor    steps
//     AllReduce      the buffer (every member's)   2(n-1)/n     2(n-1)
//     ReduceScatter  its input (n x the output)    (n-1)/n      n-1
//     AllGather      its output (n x the input)    (n-1)/n      n-1
//     AllToAll       each member's send buffer     (n-1)/n      n-1
//     Broadcast      the buffer                    1            n-1
//     SendRecv       the message (group: {src,dst}) 1           1
//
// A group of one rank (or none) costs 0: nothing moves.
//
// Memory. Per-device bytes of parameters, gradients, optimizer state and
// live activations; optimizerStateBytes gives the state of Loom's
// optimizers. The search divides these terms by the sharding it chooses
// (ZeRO levels, tensor parallelism) before adding them up.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_COST_COSTMODEL_H
#define LOOM_COMPILER_COST_COSTMODEL_H

#include "compiler/cost/HardwareProfile.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::cost {

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

/// The work of one op on one device.
struct OpWork {
  /// Floating-point operations (a multiply-add counts 2).
  double flops = 0;
  /// Bytes read and written in memory (operands plus results).
  double bytes = 0;
  /// Element type of the arithmetic: "f32", "bf16", "f16"; other types use
  /// the f32 peak.
  std::string dtype = "f32";
  /// One of kKernelClasses; other names get the "other" efficiency.
  std::string kernelClass = "other";
  /// The op (its name without the dialect, e.g. "erf"), whose own
  /// efficiency a profile may give (op_efficiency); empty if unknown.
  std::string op;
};

/// Roofline time of `work` in seconds (formula above).
double computeSeconds(const HardwareProfile &profile, const OpWork &work);

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

enum class CollectiveKind {
  AllReduce,
  ReduceScatter,
  AllGather,
  AllToAll,
  Broadcast,
  SendRecv
};

/// "all_reduce", "reduce_scatter", "all_gather", "all_to_all",
/// "broadcast", "send_recv".
const char *collectiveName(CollectiveKind kind);

/// The nccl-tests bus factor of `kind` over n ranks (0 when n <= 1).
double busFactor(CollectiveKind kind, int64_t n);

/// Latency steps of `kind` over n ranks (0 when n <= 1).
int64_t latencySteps(CollectiveKind kind, int64_t n);

/// Whether `groupRanks` fall on more than one node of `profile`.
bool spansNodes(const HardwareProfile &profile,
                const std::vector<int64_t> &groupRanks);

/// The link a collective over `groupRanks` runs on: inter-node when the
/// group spans nodes, else intra-node.
const LinkProfile &groupLink(const HardwareProfile &profile,
                             const std::vector<int64_t> &groupRanks);

/// The nodes of `profile` that `groupRanks` fall on (0 for no ranks).
int64_t nodesSpanned(const HardwareProfile &profile,
                     const std::vector<int64_t> &groupRanks);

/// The latency steps of `kind` over `groupRanks` that cross nodes
/// (interSteps above).
int64_t interNodeSteps(const HardwareProfile &profile, CollectiveKind kind,
                       const std::vector<int64_t> &groupRanks);

/// Time in seconds of one collective of `kind` on `bytes` (as defined in
/// the table above) over the ranks `groupRanks`, n = groupRanks.size().
double collectiveSeconds(const HardwareProfile &profile, CollectiveKind kind,
                         double bytes, const std::vector<int64_t> &groupRanks);

/// One timed collective, for fitting a link: `bytes` as in the table above,
/// over a group of `groupSize` ranks.
struct CollectiveTiming {
  CollectiveKind kind;
  double bytes;
  int64_t groupSize;
  double seconds;
};

/// A link fitted to timings, and how well it fits them.
struct LinkFit {
  LinkProfile link;
  /// The largest |predicted - measured| / measured over the timings.
  double maxRelativeError = 0;
  /// Whether the best fit had a non-positive latency or inverse bandwidth,
  /// which was then held at kMinFitLatency (or a bandwidth of
  /// kMaxFitBandwidth) and the other term refitted.
  bool clamped = false;
};

constexpr double kMinFitLatency = 1e-9;
constexpr double kMaxFitBandwidth = 1e15;

/// The link whose collectiveSeconds best fits `timings`: least squares on
/// the relative error (weights 1 / seconds^2, so that small and large
/// messages count alike) of seconds = steps * latency + busFactor * bytes /
/// bandwidth, linear in (latency, 1 / bandwidth). Timings of groups of one
/// rank or of no time are ignored; with none left the link is all zeros.
LinkFit fitLink(const std::vector<CollectiveTiming> &timings);

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Bytes one device holds during training, by kind.
struct MemoryEstimate {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizerState = 0;
  /// Activations live at the peak (saved for the backward pass).
  int64_t activations = 0;

  int64_t total() const {
    return parameters + gradients + optimizerState + activations;
  }
};

/// Whether `memory` fits in one device of `profile`.
bool fitsInMemory(const HardwareProfile &profile, const MemoryEstimate &memory);

/// The optimizers optimizerStateBytes knows: "sgd", "momentum", "adam",
/// "adamw" (those of `loom compile --optimizer`).
bool isKnownOptimizer(const std::string &optimizer);

/// Optimizer state for parameters of `paramBytes` bytes, held as Loom's
/// training graph holds it, in the parameters' element type: sgd 0,
/// momentum 1x (velocity), adam and adamw 2x (first and second moments).
/// For f32 parameters that is 0, 4 and 8 bytes per parameter. -1 for an
/// optimizer isKnownOptimizer rejects.
int64_t optimizerStateBytes(const std::string &optimizer, int64_t paramBytes);

/// Optimizer state under mixed precision (bf16/f16 parameters and
/// gradients, with an f32 master copy and f32 moments, as in ZeRO's
/// accounting of 16 bytes per parameter for Adam): 4 bytes per parameter
/// for the master copy plus 4 per state tensor, i.e. sgd 4, momentum 8,
/// adam and adamw 12 bytes per parameter. -1 for an unknown optimizer.
int64_t mixedPrecisionOptimizerStateBytes(const std::string &optimizer,
                                          int64_t numParameters);

} // namespace loom::cost

#endif // LOOM_COMPILER_COST_COSTMODEL_H
