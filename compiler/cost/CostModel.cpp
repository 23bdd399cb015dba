//===- CostModel.cpp - Roofline, alpha-beta and memory terms --------------===//

#include "compiler/cost/CostModel.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace loom::cost {

double computeSeconds(const HardwareProfile &profile, const OpWork &work) {
  double eff = profile.efficiencyOf(work.kernelClass, work.op);
  double compute =
      work.flops > 0 ? work.flops / (profile.peak(work.dtype) * eff) : 0.0;
  double memory = work.bytes > 0
                      ? work.bytes / (profile.bandwidthFor(work.bytes) * eff)
                      : 0.0;
  return profile.opOverhead + std::max(compute, memory);
}

const char *collectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::SendRecv:
    return "send_recv";
  }
  return "unknown";
}

double busFactor(CollectiveKind kind, int64_t n) {
  if (n <= 1)
    return 0;
  double ring = static_cast<double>(n - 1) / static_cast<double>(n);
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * ring;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
    return ring;
  case CollectiveKind::Broadcast:
  case CollectiveKind::SendRecv:
    return 1;
  }
  return 1;
}

int64_t latencySteps(CollectiveKind kind, int64_t n) {
  if (n <= 1)
    return 0;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (n - 1);
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
  case CollectiveKind::Broadcast:
    return n - 1;
  case CollectiveKind::SendRecv:
    return 1;
  }
  return n - 1;
}

bool spansNodes(const HardwareProfile &profile,
                const std::vector<int64_t> &groupRanks) {
  if (groupRanks.empty())
    return false;
  int64_t node = profile.nodeOf(groupRanks.front());
  return std::any_of(groupRanks.begin(), groupRanks.end(),
                     [&](int64_t r) { return profile.nodeOf(r) != node; });
}

const LinkProfile &groupLink(const HardwareProfile &profile,
                             const std::vector<int64_t> &groupRanks) {
  return spansNodes(profile, groupRanks) ? profile.interNode
                                         : profile.intraNode;
}

int64_t nodesSpanned(const HardwareProfile &profile,
                     const std::vector<int64_t> &groupRanks) {
  std::vector<int64_t> nodes;
  nodes.reserve(groupRanks.size());
  for (int64_t rank : groupRanks)
    nodes.push_back(profile.nodeOf(rank));
  std::sort(nodes.begin(), nodes.end());
  return std::unique(nodes.begin(), nodes.end()) - nodes.begin();
}

int64_t interNodeSteps(const HardwareProfile &profile, CollectiveKind kind,
                       const std::vector<int64_t> &groupRanks) {
  // Most groups lie in one node: found without sorting.
  if (!spansNodes(profile, groupRanks))
    return 0;
  int64_t steps = latencySteps(kind, static_cast<int64_t>(groupRanks.size()));
  int64_t nodes = nodesSpanned(profile, groupRanks);
  switch (kind) {
  case CollectiveKind::AllReduce:
    return std::min(steps, 2 * (nodes - 1));
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::Broadcast:
    return std::min(steps, nodes - 1);
  case CollectiveKind::AllToAll:
  case CollectiveKind::SendRecv:
    return steps;
  }
  return steps;
}

double collectiveSeconds(const HardwareProfile &profile, CollectiveKind kind,
                         double bytes, const std::vector<int64_t> &groupRanks) {
  int64_t n = static_cast<int64_t>(groupRanks.size());
  if (n <= 1)
    return 0;
  int64_t steps = latencySteps(kind, n);
  int64_t inter = interNodeSteps(profile, kind, groupRanks);
  // A group that spans nodes crosses between them on at least one step.
  const LinkProfile &link = inter > 0 ? profile.interNode : profile.intraNode;
  return static_cast<double>(steps - inter) * profile.intraNode.latency +
         static_cast<double>(inter) * profile.interNode.latency +
         busFactor(kind, n) * bytes / link.bandwidth;
}

LinkFit fitLink(const std::vector<CollectiveTiming> &timings) {
  // Normal equations of the weighted least squares in x1 = steps,
  // x2 = busFactor * bytes; unknowns latency and 1 / bandwidth.
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  auto regressors = [](const CollectiveTiming &t) {
    return std::pair{static_cast<double>(latencySteps(t.kind, t.groupSize)),
                     busFactor(t.kind, t.groupSize) * t.bytes};
  };
  bool any = false;
  for (const CollectiveTiming &t : timings) {
    if (t.groupSize <= 1 || !(t.seconds > 0))
      continue;
    auto [x1, x2] = regressors(t);
    double w = 1 / (t.seconds * t.seconds);
    a11 += w * x1 * x1;
    a12 += w * x1 * x2;
    a22 += w * x2 * x2;
    b1 += w * x1 * t.seconds;
    b2 += w * x2 * t.seconds;
    any = true;
  }
  LinkFit fit;
  if (!any)
    return fit;
  double det = a11 * a22 - a12 * a12;
  double latency = 0, inverse = 0;
  if (det > 1e-12 * a11 * a22) {
    latency = (b1 * a22 - b2 * a12) / det;
    inverse = (a11 * b2 - a12 * b1) / det;
  }
  if (!(latency > 0)) {
    fit.clamped = true;
    latency = kMinFitLatency;
    inverse = a22 > 0 ? (b2 - latency * a12) / a22 : 0;
  }
  if (!(inverse > 0)) {
    fit.clamped = true;
    inverse = 1 / kMaxFitBandwidth;
    latency = std::max(kMinFitLatency, (b1 - inverse * a12) / a11);
  }
  fit.link = {1 / inverse, latency};
  for (const CollectiveTiming &t : timings) {
    if (t.groupSize <= 1 || !(t.seconds > 0))
      continue;
    auto [x1, x2] = regressors(t);
    double predicted = x1 * latency + x2 * inverse;
    fit.maxRelativeError = std::max(
        fit.maxRelativeError, std::abs(predicted - t.seconds) / t.seconds);
  }
  return fit;
}

bool fitsInMemory(const HardwareProfile &profile,
                  const MemoryEstimate &memory) {
  return memory.total() <= profile.memoryCapacity;
}

namespace {

/// State tensors per parameter, each the size of the parameter; -1 when
/// the optimizer is unknown.
int64_t stateTensors(const std::string &optimizer) {
  if (optimizer == "sgd")
    return 0;
  if (optimizer == "momentum")
    return 1;
  if (optimizer == "adam" || optimizer == "adamw")
    return 2;
  return -1;
}

} // namespace

bool isKnownOptimizer(const std::string &optimizer) {
  return stateTensors(optimizer) >= 0;
}

int64_t optimizerStateBytes(const std::string &optimizer, int64_t paramBytes) {
  int64_t tensors = stateTensors(optimizer);
  return tensors < 0 ? -1 : tensors * paramBytes;
}

int64_t mixedPrecisionOptimizerStateBytes(const std::string &optimizer,
                                          int64_t numParameters) {
  int64_t tensors = stateTensors(optimizer);
  return tensors < 0 ? -1 : (1 + tensors) * 4 * numParameters;
}

} // namespace loom::cost
