//===- StageSplit.cpp - Cap enumeration and chain dynamic programs --------===//

#include "compiler/search/StageSplit.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace loom::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Relative slack of time and memory comparisons: a cap equal to a stage's
/// time, or a limit equal to its memory, admits it even when the two were
/// summed in different orders.
constexpr double kRelEps = 1e-12;

/// a < b by more than the slack.
bool lessThan(double a, double b) {
  if (std::isinf(a) || std::isinf(b))
    return a < b;
  return a < b - kRelEps * std::max(std::abs(a), std::abs(b));
}

/// a <= b up to the slack.
bool atMost(double a, double b) { return !lessThan(b, a); }

/// The costs of every candidate stage [j, i), tabulated once: t(j, i), the
/// state and the saved bytes, and how many micro-batches each stage index
/// keeps in flight.
class StageTable {
public:
  StageTable(const std::vector<LayerCost> &layers,
             const StageSplitOptions &options)
      : numLayers(layers.size()), numStages(options.stages),
        microBatches(options.microBatches),
        time((numLayers + 1) * (numLayers + 1), 0),
        state((numLayers + 1) * (numLayers + 1), 0),
        saved((numLayers + 1) * (numLayers + 1), 0) {
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
      double micro = 0, stateSum = 0, savedSum = 0;
      for (size_t i = j + 1; i <= numLayers; ++i) {
        micro += layers[i - 1].microBatchSeconds;
        stateSum += layers[i - 1].stateBytes;
        savedSum += layers[i - 1].savedBytes;
        time[index(j, i)] = micro + forwardSend[i] + backwardSend[j];
        state[index(j, i)] = stateSum;
        saved[index(j, i)] = savedSum;
      }
    }
    for (int64_t s = 0; s < numStages; ++s)
      inFlightCounts.push_back(static_cast<double>(
          inFlight(options.schedule, numStages, microBatches, s)));
  }

  double seconds(size_t j, size_t i) const { return time[index(j, i)]; }
  double bytes(size_t j, size_t i, int64_t stage) const {
    return state[index(j, i)] + inFlightCounts[stage] * saved[index(j, i)];
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

  /// The distinct values of t over all ranges, ascending; values within the
  /// slack of a smaller one are merged into it.
  std::vector<double> distinctTimes() const {
    std::vector<double> all;
    for (size_t j = 0; j < numLayers; ++j)
      for (size_t i = j + 1; i <= numLayers; ++i)
        all.push_back(seconds(j, i));
    std::sort(all.begin(), all.end());
    std::vector<double> caps;
    for (double t : all)
      if (caps.empty() || !atMost(t, caps.back()))
        caps.push_back(t);
    return caps;
  }

  const size_t numLayers;
  const int64_t numStages;
  const int64_t microBatches;

private:
  size_t index(size_t j, size_t i) const { return j * (numLayers + 1) + i; }

  std::vector<double> time, state, saved;
  std::vector<double> inFlightCounts;
};

/// A chain's best split and its value.
struct ChainResult {
  double value;
  std::vector<size_t> starts;
};

/// Over the splits of `table`'s layers into its stages, the one that
/// minimizes the fold of `combine` over the stages' `cost(stage, j, i)`
/// (+inf: the stage may not be [j, i)). At equal values the earliest start
/// of the last stage wins, so results are reproducible. nullopt when every
/// split has an inadmissible stage.
template <typename Cost, typename Combine>
std::optional<ChainResult> solveChain(const StageTable &table, Cost cost,
                                      Combine combine) {
  const size_t L = table.numLayers;
  const size_t P = static_cast<size_t>(table.numStages);
  // best[s][i]: the first s stages cover layers [0, i).
  std::vector<double> best((P + 1) * (L + 1), kInf);
  std::vector<size_t> from((P + 1) * (L + 1), 0);
  auto at = [&](size_t s, size_t i) { return s * (L + 1) + i; };
  best[at(0, 0)] = 0;
  for (size_t s = 1; s <= P; ++s) {
    // Stage s - 1 ends at i, leaving at least one layer per later stage.
    for (size_t i = s; i + (P - s) <= L; ++i) {
      double &cell = best[at(s, i)];
      for (size_t j = s - 1; j < i; ++j) {
        double before = best[at(s - 1, j)];
        if (std::isinf(before))
          continue;
        double c = cost(static_cast<int64_t>(s - 1), j, i);
        if (std::isinf(c))
          continue;
        double value = combine(before, c);
        if (lessThan(value, cell)) {
          cell = value;
          from[at(s, i)] = j;
        }
      }
    }
  }
  if (std::isinf(best[at(P, L)]))
    return std::nullopt;
  ChainResult result{best[at(P, L)], std::vector<size_t>(P)};
  size_t i = L;
  for (size_t s = P; s > 0; --s) {
    i = from[at(s, i)];
    result.starts[s - 1] = i;
  }
  return result;
}

double plus(double a, double b) { return a + b; }
double larger(double a, double b) { return std::max(a, b); }

/// The split minimizing sum_s t_s + (M - 1) max_s t_s with every stage's
/// memory at most `memoryLimit` (+inf: unlimited); nullopt if none fits.
std::optional<std::vector<size_t>> fastestSplit(const StageTable &table,
                                                double memoryLimit) {
  std::vector<char> fits;
  if (!std::isinf(memoryLimit)) {
    const size_t L = table.numLayers;
    fits.assign(static_cast<size_t>(table.numStages) * (L + 1) * (L + 1), 0);
    for (int64_t s = 0; s < table.numStages; ++s)
      for (size_t j = 0; j < L; ++j)
        for (size_t i = j + 1; i <= L; ++i)
          fits[(s * (L + 1) + j) * (L + 1) + i] =
              atMost(table.bytes(j, i, s), memoryLimit);
  }
  auto fitsAt = [&](int64_t s, size_t j, size_t i) {
    const size_t L = table.numLayers;
    return fits.empty() || fits[(s * (L + 1) + j) * (L + 1) + i];
  };
  auto cappedTime = [&](double cap) {
    return [&, cap](int64_t s, size_t j, size_t i) {
      double t = table.seconds(j, i);
      return fitsAt(s, j, i) && atMost(t, cap) ? t : kInf;
    };
  };

  // The least possible slowest stage: no smaller cap admits a split.
  std::optional<ChainResult> slowest =
      solveChain(table, cappedTime(kInf), larger);
  if (!slowest)
    return std::nullopt;
  // The least sum with no cap bounds every cap's sum from below, and its
  // split is the answer unless a capped one beats it.
  std::optional<ChainResult> uncapped =
      solveChain(table, cappedTime(kInf), plus);
  assert(uncapped && "a split fits, so the least sum exists");
  const double lowerBound = uncapped->value;
  const double m1 = static_cast<double>(table.microBatches - 1);
  std::vector<size_t> bestStarts = uncapped->starts;
  double bestObjective = table.objective(bestStarts);
  bool bestIsUncapped = true;
  if (table.microBatches <= 1)
    return bestStarts;

  for (double cap : table.distinctTimes()) {
    if (!atMost(slowest->value, cap))
      continue;
    if (!lessThan(lowerBound + m1 * cap, bestObjective))
      break;
    std::optional<ChainResult> capped =
        solveChain(table, cappedTime(cap), plus);
    if (!capped)
      continue;
    double objective = table.objective(capped->starts);
    // At equal objective the smaller cap, found first, stays; the uncapped
    // split counts as found last.
    if (lessThan(objective, bestObjective) ||
        (bestIsUncapped && atMost(objective, bestObjective))) {
      bestObjective = objective;
      bestStarts = std::move(capped->starts);
      bestIsUncapped = false;
    }
  }
  return bestStarts;
}

} // namespace

double pipelineSeconds(const std::vector<double> &micro,
                       const std::vector<double> &step, int64_t microBatches) {
  double sum = 0, slowest = 0, slowestStep = 0;
  for (size_t s = 0; s < micro.size(); ++s) {
    sum += micro[s];
    slowest = s == 0 ? micro[s] : std::max(slowest, micro[s]);
  }
  for (size_t s = 0; s < step.size(); ++s)
    slowestStep = s == 0 ? step[s] : std::max(slowestStep, step[s]);
  return sum + static_cast<double>(microBatches - 1) * slowest + slowestStep;
}

int64_t inFlight(const std::string &schedule, int64_t stages,
                 int64_t microBatches, int64_t stage) {
  if (schedule == "gpipe")
    return microBatches;
  return std::min(microBatches, stages - stage);
}

std::optional<StageSplit> splitStages(const std::vector<LayerCost> &layers,
                                      const StageSplitOptions &options) {
  if (options.stages < 1 || options.microBatches < 1 ||
      layers.size() < static_cast<size_t>(options.stages))
    return std::nullopt;
  StageTable table(layers, options);

  StageSplit split;
  std::optional<std::vector<size_t>> starts =
      fastestSplit(table, options.memoryLimit > 0 ? options.memoryLimit : kInf);
  if (!starts) {
    // Nothing fits: the least largest memory, then the fastest split that
    // reaches it.
    std::optional<ChainResult> leanest = solveChain(
        table,
        [&](int64_t s, size_t j, size_t i) { return table.bytes(j, i, s); },
        larger);
    assert(leanest && "with no limit every split is admissible");
    starts = fastestSplit(table, leanest->value);
    assert(starts && "the leanest split fits its own memory");
    split.fits = false;
  }

  split.starts = std::move(*starts);
  for (size_t s = 0; s < split.starts.size(); ++s) {
    size_t j = split.starts[s], i = table.end(split.starts, s);
    double step = 0;
    for (size_t l = j; l < i; ++l)
      step += layers[l].stepSeconds;
    split.microBatchSeconds.push_back(table.seconds(j, i));
    split.stepSeconds.push_back(step);
    split.memoryBytes.push_back(table.bytes(j, i, static_cast<int64_t>(s)));
  }
  split.seconds = pipelineSeconds(split.microBatchSeconds, split.stepSeconds,
                                  options.microBatches);
  return split;
}

} // namespace loom::search
