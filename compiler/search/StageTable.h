//===- StageTable.h - What the stage splits share ---------------*- C++ -*-===//
//
// Private to the two stage splits (StageSplit.cpp, on one submesh shape,
// and SubmeshSplit.cpp, over submeshes of several shapes): the slack of
// their time and memory comparisons, the table of every candidate stage's
// costs, and Alpa's enumeration of the slowest stage's time that both
// run their split programs under.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_SEARCH_STAGETABLE_H
#define LOOM_COMPILER_SEARCH_STAGETABLE_H

#include "compiler/search/StageSplit.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace loom::search::detail {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Relative slack of time and memory comparisons: a cap equal to a stage's
/// time, or a limit equal to its memory, admits it even when the two were
/// summed in different orders.
constexpr double kRelEps = 1e-12;

/// a < b by more than the slack.
inline bool lessThan(double a, double b) {
  if (std::isinf(a) || std::isinf(b))
    return a < b;
  return a < b - kRelEps * std::max(std::abs(a), std::abs(b));
}

/// a <= b up to the slack.
inline bool atMost(double a, double b) { return !lessThan(b, a); }

/// The costs of every candidate stage [j, i), tabulated once: t(j, i), the
/// state and the saved bytes, and how many micro-batches each stage index
/// keeps in flight.
class StageTable {
public:
  /// Under "interleaved", the stages are the P * V chunks and the
  /// objective's micro-batches M * V (see the header).
  StageTable(const std::vector<LayerCost> &layers,
             const StageSplitOptions &options)
      : numLayers(layers.size()),
        numStages(options.stages * chunksPerDevice(options)),
        microBatches(options.microBatches * chunksPerDevice(options)),
        time((numLayers + 1) * (numLayers + 1), 0),
        state((numLayers + 1) * (numLayers + 1), 0),
        saved((numLayers + 1) * (numLayers + 1), 0),
        transient((numLayers + 1) * (numLayers + 1), 0),
        prefixSeconds(numLayers + 1, 0) {
    for (size_t l = 0; l < numLayers; ++l)
      prefixSeconds[l + 1] = prefixSeconds[l] + layers[l].microBatchSeconds;
    auto send = [&](double bytes) {
      return bytes > 0 && options.sendSeconds ? options.sendSeconds(bytes) : 0;
    };
    // forwardSend[i]: the forward of a stage ending at i, across cut i.
    // backwardSend[j]: the backward of a stage starting at j, across cut j.
    std::vector<double> forwardSend(numLayers + 1, 0),
        backwardSend(numLayers + 1, 0);
    for (size_t cut = 1; cut < numLayers; ++cut) {
      forwardSend[cut] = send(layers[cut - 1].forwardBytes);
      backwardSend[cut] = send(layers[cut - 1].backwardBytes);
    }
    for (size_t j = 0; j < numLayers; ++j) {
      double micro = 0, stateSum = 0, savedSum = 0, largest = 0;
      for (size_t i = j + 1; i <= numLayers; ++i) {
        micro += layers[i - 1].microBatchSeconds;
        stateSum += layers[i - 1].stateBytes;
        savedSum += layers[i - 1].savedBytes;
        largest = std::max(largest, layers[i - 1].transientBytes);
        time[index(j, i)] = micro + forwardSend[i] + backwardSend[j];
        state[index(j, i)] = stateSum;
        saved[index(j, i)] = savedSum;
        transient[index(j, i)] = largest;
      }
    }
    const int64_t V = chunksPerDevice(options), P = options.stages;
    for (int64_t c = 0; c < numStages; ++c)
      inFlightCounts.push_back(static_cast<double>(chunkInFlight(
          options.schedule, P, options.microBatches, c % P, c / P, V)));
  }

  static int64_t chunksPerDevice(const StageSplitOptions &options) {
    return chunksPerStage(options.schedule, options.virtualStages);
  }

  double seconds(size_t j, size_t i) const { return time[index(j, i)]; }
  /// The layers' own seconds, without the sends: at most seconds(j, i),
  /// and growing with i.
  double layerSeconds(size_t j, size_t i) const {
    return prefixSeconds[i] - prefixSeconds[j];
  }
  double stateBytes(size_t j, size_t i) const { return state[index(j, i)]; }
  double savedBytes(size_t j, size_t i) const { return saved[index(j, i)]; }
  double transientBytes(size_t j, size_t i) const {
    return transient[index(j, i)];
  }
  double bytes(size_t j, size_t i, int64_t stage) const {
    return state[index(j, i)] + inFlightCounts[stage] * saved[index(j, i)] +
           transient[index(j, i)];
  }

  /// Sum of t_s plus (M - 1) max_s t_s of the split `starts`.
  double objective(const std::vector<size_t> &starts) const {
    double sum = 0, slowest = 0;
    for (size_t s = 0; s < starts.size(); ++s) {
      double t = seconds(starts[s], end(starts, s));
      sum += t;
      slowest = s == 0 ? t : std::max(slowest, t);
    }
    return sum + static_cast<double>(microBatches - 1) * slowest;
  }

  size_t end(const std::vector<size_t> &starts, size_t stage) const {
    return stage + 1 < starts.size() ? starts[stage + 1] : numLayers;
  }

  /// t of every range, in no order.
  std::vector<double> allTimes() const {
    std::vector<double> all;
    for (size_t j = 0; j < numLayers; ++j)
      for (size_t i = j + 1; i <= numLayers; ++i)
        all.push_back(seconds(j, i));
    return all;
  }

  const size_t numLayers;
  const int64_t numStages;
  const int64_t microBatches;

private:
  size_t index(size_t j, size_t i) const { return j * (numLayers + 1) + i; }

  std::vector<double> time, state, saved, transient;
  std::vector<double> prefixSeconds;
  std::vector<double> inFlightCounts;
};

inline double plus(double a, double b) { return a + b; }
inline double larger(double a, double b) { return std::max(a, b); }

using Combine = double (*)(double, double);

/// Alpa's enumeration of the slowest stage's time, for any split program:
/// `solve(cap, combine)` gives the split minimizing the fold of `combine`
/// over its stages' times with each at most `cap` (nullopt: none does),
/// with its value; `objective` a split's sum_s t_s + (M - 1) max_s t_s;
/// `times` every time a stage can take. The least slowest stage bounds the
/// caps from below; the least sum with no cap bounds every cap's sum from
/// below, and its split is the answer unless a capped one beats it; the
/// caps go up from there while they can still win. nullopt when no split
/// is admissible.
template <typename Solve, typename Objective>
auto fastestUnderCaps(Solve solve, Objective objective,
                      std::vector<double> times, double microBatches)
    -> decltype(solve(kInf, plus)) {
  auto slowest = solve(kInf, larger);
  if (!slowest)
    return std::nullopt;
  auto best = solve(kInf, plus);
  assert(best && "a split fits, so the least sum exists");
  if (microBatches <= 1)
    return best;
  const double lowerBound = best->value;
  double bestObjective = objective(*best);
  bool bestIsUncapped = true;
  // Ascending, each time within the slack of a smaller one merged into it.
  std::sort(times.begin(), times.end());
  std::vector<double> caps;
  for (double t : times)
    if (caps.empty() || !atMost(t, caps.back()))
      caps.push_back(t);
  for (double cap : caps) {
    if (!atMost(slowest->value, cap))
      continue;
    if (!lessThan(lowerBound + (microBatches - 1) * cap, bestObjective))
      break;
    auto capped = solve(cap, plus);
    if (!capped)
      continue;
    double value = objective(*capped);
    // At equal objective the smaller cap, found first, stays; the uncapped
    // split counts as found last.
    if (lessThan(value, bestObjective) ||
        (bestIsUncapped && atMost(value, bestObjective))) {
      bestObjective = value;
      best = std::move(capped);
      bestIsUncapped = false;
    }
  }
  return best;
}

} // namespace loom::search::detail

#endif // LOOM_COMPILER_SEARCH_STAGETABLE_H
