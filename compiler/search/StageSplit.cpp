//===- StageSplit.cpp - Cap enumeration and chain dynamic programs --------===//

#include "compiler/search/StageSplit.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

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

  std::optional<ChainResult> best = fastestUnderCaps(
      [&](double cap, Combine combine) {
        return solveChain(table, cappedTime(cap), combine);
      },
      [&](const ChainResult &r) { return table.objective(r.starts); },
      table.allTimes(), static_cast<double>(table.microBatches));
  if (!best)
    return std::nullopt;
  return std::move(best->starts);
}

} // namespace

double pipelineSeconds(const std::vector<double> &micro,
                       const std::vector<double> &step, int64_t microBatches,
                       int64_t virtualStages) {
  const size_t V = static_cast<size_t>(std::max<int64_t>(virtualStages, 1));
  const size_t P = std::max<size_t>(micro.size() / V, 1);
  // Per device: its chunks' times and its once-per-step work.
  std::vector<double> device(P, 0), deviceStep(P, 0);
  double sum = 0;
  for (size_t c = 0; c < micro.size(); ++c) {
    sum += micro[c];
    device[c % P] += micro[c];
  }
  for (size_t i = 0; i < step.size(); ++i)
    deviceStep[i % P] += step[i];
  double slowest = micro.empty() ? 0 : device[0];
  double slowestStep = step.empty() ? 0 : deviceStep[0];
  for (size_t d = 1; d < P; ++d) {
    slowest = std::max(slowest, device[d]);
    slowestStep = std::max(slowestStep, deviceStep[d]);
  }
  const double v = static_cast<double>(V);
  return sum / v + (static_cast<double>(microBatches) - 1 / v) * slowest +
         slowestStep;
}

int64_t chunksPerStage(const std::string &schedule, int64_t virtualStages) {
  return schedule == "interleaved" ? std::max<int64_t>(virtualStages, 1) : 1;
}

std::vector<ScheduleUnit> scheduleOrder(const std::string &schedule,
                                        int64_t stages, int64_t microBatches,
                                        int64_t stage, int64_t virtualStages) {
  const int64_t P = stages, M = microBatches;
  std::vector<ScheduleUnit> order;
  if (schedule == "gpipe") {
    for (int64_t k = 0; k < M; ++k)
      order.push_back({k, 0, false});
    for (int64_t k = 0; k < M; ++k)
      order.push_back({k, 0, true});
    return order;
  }
  const int64_t V = chunksPerStage(schedule, virtualStages);
  if (V > 1 && M % P != 0)
    return order;
  // Unit i of the forwards (or backwards): micro-batches go in groups of P
  // through the device's chunks in turn, forwards from chunk 0, backwards
  // from chunk V - 1. With V = 1 this is micro-batch i.
  auto unit = [&](int64_t i, bool backward) {
    int64_t chunk = (i / P) % V;
    return ScheduleUnit{V == 1 ? i : (i / (P * V)) * P + i % P,
                        backward ? V - 1 - chunk : chunk, backward};
  };
  // Warm up with the forwards the later devices need before the first
  // backward comes back (one round through every later chunk), then one
  // forward and one backward in turn.
  const int64_t total = M * V;
  const int64_t warmup = std::min(
      total, V == 1 ? P - 1 - stage : 2 * (P - 1 - stage) + (V - 1) * P);
  for (int64_t i = 0; i < warmup; ++i)
    order.push_back(unit(i, false));
  for (int64_t i = 0; i + warmup < total; ++i) {
    order.push_back(unit(warmup + i, false));
    order.push_back(unit(i, true));
  }
  for (int64_t i = total - warmup; i < total; ++i)
    order.push_back(unit(i, true));
  return order;
}

namespace {

/// The most forward units device `stage` holds at once, in all and per
/// chunk: a forward's results are held until its backward.
std::pair<int64_t, std::vector<int64_t>>
peakHeld(const std::string &schedule, int64_t stages, int64_t microBatches,
         int64_t stage, int64_t virtualStages) {
  int64_t V = chunksPerStage(schedule, virtualStages);
  std::vector<int64_t> held(V, 0), peak(V, 0);
  int64_t total = 0, peakTotal = 0;
  for (const ScheduleUnit &u :
       scheduleOrder(schedule, stages, microBatches, stage, V)) {
    int64_t delta = u.backward ? -1 : 1;
    held[u.chunk] += delta;
    total += delta;
    peak[u.chunk] = std::max(peak[u.chunk], held[u.chunk]);
    peakTotal = std::max(peakTotal, total);
  }
  return {peakTotal, peak};
}

} // namespace

namespace {

/// The interleaved step of a split of the layers into P * V chunks, and
/// each device's memory, exactly as the header defines them (the step
/// without the once-per-step updates, which the split does not change).
class InterleavedModel {
public:
  InterleavedModel(const StageTable &table, const StageSplitOptions &options)
      : table(table), P(static_cast<size_t>(options.stages)),
        V(static_cast<size_t>(StageTable::chunksPerDevice(options))),
        M(static_cast<double>(options.microBatches)),
        limit(options.memoryLimit > 0 ? options.memoryLimit : kInf) {
    // Along device d's order, how many micro-batches of each of its chunks
    // it holds after each forward (where the held bytes can peak); only
    // the vectors no other one covers in every chunk can be the peak,
    // whatever each chunk saves.
    for (size_t d = 0; d < P; ++d) {
      std::vector<std::vector<int64_t>> seen;
      std::vector<int64_t> held(V, 0);
      for (const ScheduleUnit &u :
           scheduleOrder(options.schedule, options.stages, options.microBatches,
                         static_cast<int64_t>(d), static_cast<int64_t>(V))) {
        held[static_cast<size_t>(u.chunk)] += u.backward ? -1 : 1;
        if (!u.backward)
          seen.push_back(held);
      }
      std::sort(seen.begin(), seen.end());
      seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
      auto covers = [&](const std::vector<int64_t> &a,
                        const std::vector<int64_t> &b) {
        for (size_t v = 0; v < V; ++v)
          if (a[v] < b[v])
            return false;
        return true;
      };
      std::vector<std::vector<int64_t>> frontier;
      for (size_t a = 0; a < seen.size(); ++a) {
        bool covered = false;
        for (size_t b = 0; b < seen.size() && !covered; ++b)
          covered = b != a && covers(seen[b], seen[a]);
        if (!covered)
          frontier.push_back(seen[a]);
      }
      peaks.push_back(std::move(frontier));
    }
  }

  struct Value {
    double seconds = kInf;
    double largestMemory = kInf;
    bool fits = false;
  };

  /// Device d's bytes at its peak: its chunks' state, the most saved
  /// results its order holds at once, its chunks' largest transient.
  double deviceBytes(const std::vector<size_t> &starts, size_t d) const {
    double state = 0, transient = 0, held = 0;
    for (size_t v = 0; v < V; ++v) {
      size_t c = v * P + d;
      size_t j = starts[c], i = table.end(starts, c);
      state += table.stateBytes(j, i);
      transient = std::max(transient, table.transientBytes(j, i));
    }
    for (const std::vector<int64_t> &counts : peaks[d]) {
      double bytes = 0;
      for (size_t v = 0; v < V; ++v) {
        size_t c = v * P + d;
        bytes += static_cast<double>(counts[v]) *
                 table.savedBytes(starts[c], table.end(starts, c));
      }
      held = std::max(held, bytes);
    }
    return state + held + transient;
  }

  Value evaluate(const std::vector<size_t> &starts) const {
    Value value;
    double sum = 0, slowest = 0;
    for (size_t d = 0; d < P; ++d) {
      double device = 0;
      for (size_t v = 0; v < V; ++v) {
        size_t c = v * P + d;
        device += table.seconds(starts[c], table.end(starts, c));
      }
      sum += device;
      slowest = std::max(slowest, device);
    }
    const double v = static_cast<double>(V);
    value.seconds = sum / v + (M - 1 / v) * slowest;
    value.largestMemory = 0;
    for (size_t d = 0; d < P; ++d)
      value.largestMemory =
          std::max(value.largestMemory, deviceBytes(starts, d));
    value.fits = atMost(value.largestMemory, limit);
    return value;
  }

  /// A split that fits beats one that does not; of two that fit the
  /// faster wins, then the leaner; of two that do not the leaner, then the
  /// faster.
  static bool better(const Value &a, const Value &b) {
    if (a.fits != b.fits)
      return a.fits;
    auto [first, firstOther, second, secondOther] =
        a.fits
            ? std::tie(a.seconds, b.seconds, a.largestMemory, b.largestMemory)
            : std::tie(a.largestMemory, b.largestMemory, a.seconds, b.seconds);
    if (!atMost(first, firstOther))
      return false;
    return lessThan(first, firstOther) || lessThan(second, secondOther);
  }

private:
  const StageTable &table;
  const size_t P, V;
  const double M, limit;
  /// Per device, the held-count vectors that can be its peak.
  std::vector<std::vector<std::vector<int64_t>>> peaks;
};

/// C(n, k) in doubles (saturating far above any budget).
double binomial(size_t n, size_t k) {
  double r = 1;
  for (size_t i = 1; i <= k && r < 1e18; ++i)
    r = r * static_cast<double>(n - k + i) / static_cast<double>(i);
  return r;
}

/// Every split of the layers into the model's chunks, the best by
/// InterleavedModel::better (the first found at equal value).
std::vector<size_t> bestOfAll(const InterleavedModel &model, size_t layers,
                              size_t chunks) {
  std::vector<size_t> starts(chunks, 0), best;
  InterleavedModel::Value bestValue;
  // Chunk c starts in (starts[c - 1], layers - (chunks - c)].
  std::function<void(size_t)> place = [&](size_t c) {
    if (c == chunks) {
      InterleavedModel::Value value = model.evaluate(starts);
      if (best.empty() || InterleavedModel::better(value, bestValue)) {
        best = starts;
        bestValue = value;
      }
      return;
    }
    for (size_t j = starts[c - 1] + 1; j + (chunks - c) <= layers; ++j) {
      starts[c] = j;
      place(c + 1);
    }
  };
  if (chunks == 1)
    return starts;
  place(1);
  return best;
}

/// Whether `starts` starts at 0 and every chunk keeps a layer.
bool validCuts(const std::vector<size_t> &starts, size_t layers) {
  for (size_t c = 1; c < starts.size(); ++c)
    if (starts[c] <= starts[c - 1])
      return false;
  return starts.back() < layers;
}

/// From `starts`, moves of a run of consecutive cuts by one layer (a layer
/// leaves the chunk before the run for the chunk after it, or back), the
/// best move each round, while one improves the split.
std::vector<size_t> descend(const InterleavedModel &model,
                            std::vector<size_t> starts, size_t layers) {
  const size_t C = starts.size();
  InterleavedModel::Value current = model.evaluate(starts);
  for (;;) {
    std::vector<size_t> bestMove;
    InterleavedModel::Value bestValue = current;
    // Keeps `moved` if it is a split and the best so far (the first found
    // at equal value).
    auto consider = [&](std::vector<size_t> moved) {
      if (!validCuts(moved, layers))
        return;
      InterleavedModel::Value value = model.evaluate(moved);
      if (InterleavedModel::better(value, bestValue)) {
        bestValue = value;
        bestMove = std::move(moved);
      }
    };
    auto shift = [](size_t cut, int step) {
      return step > 0 ? cut + 1 : cut - 1;
    };
    // A run of cuts by a layer: chunk first - 1 and chunk last change size.
    for (size_t first = 1; first < C; ++first)
      for (size_t last = first; last < C; ++last)
        for (int step : {-1, 1}) {
          std::vector<size_t> moved = starts;
          for (size_t c = first; c <= last; ++c)
            moved[c] = shift(moved[c], step);
          consider(std::move(moved));
        }
    // Two cuts by a layer each, either way.
    for (size_t a = 1; a < C; ++a)
      for (size_t b = a + 1; b < C; ++b)
        for (int stepA : {-1, 1})
          for (int stepB : {-1, 1}) {
            std::vector<size_t> moved = starts;
            moved[a] = shift(moved[a], stepA);
            moved[b] = shift(moved[b], stepB);
            consider(std::move(moved));
          }
    // One cut anywhere between its neighbours.
    for (size_t c = 1; c < C; ++c) {
      size_t next = c + 1 < C ? starts[c + 1] : layers;
      for (size_t j = starts[c - 1] + 1; j < next; ++j)
        if (j != starts[c]) {
          std::vector<size_t> moved = starts;
          moved[c] = j;
          consider(std::move(moved));
        }
    }
    if (bestMove.empty())
      return starts;
    starts = std::move(bestMove);
    current = bestValue;
  }
}

} // namespace

double inFlight(const std::string &schedule, int64_t stages,
                int64_t microBatches, int64_t stage, int64_t virtualStages) {
  int64_t V = chunksPerStage(schedule, virtualStages);
  return static_cast<double>(
             peakHeld(schedule, stages, microBatches, stage, V).first) /
         static_cast<double>(V);
}

int64_t chunkInFlight(const std::string &schedule, int64_t stages,
                      int64_t microBatches, int64_t stage, int64_t chunk,
                      int64_t virtualStages) {
  std::vector<int64_t> peak =
      peakHeld(schedule, stages, microBatches, stage, virtualStages).second;
  return chunk >= 0 && static_cast<size_t>(chunk) < peak.size() ? peak[chunk]
                                                                : 0;
}

std::optional<StageSplit> splitStages(const std::vector<LayerCost> &layers,
                                      const StageSplitOptions &options) {
  const int64_t V = StageTable::chunksPerDevice(options);
  if (options.stages < 1 || options.microBatches < 1 ||
      layers.size() < static_cast<size_t>(options.stages * V) ||
      (V > 1 && options.microBatches % options.stages != 0))
    return std::nullopt;
  StageTable table(layers, options);

  StageSplit split;
  // The least largest memory of the chunks as 1F1B stages, computed once
  // if asked.
  std::optional<ChainResult> leanest;
  auto leanestSplit = [&]() -> const ChainResult & {
    if (!leanest)
      leanest = solveChain(
          table,
          [&](int64_t s, size_t j, size_t i) { return table.bytes(j, i, s); },
          larger);
    assert(leanest && "with no limit every split is admissible");
    return *leanest;
  };
  // The fastest split of the chunks as 1F1B stages, each within 1/V of the
  // limit (a device holds V chunks); when none fits, the fastest of those
  // that reach the least largest memory.
  auto chunkSplit = [&](bool &fits) {
    std::optional<std::vector<size_t>> starts =
        fastestSplit(table, options.memoryLimit > 0
                                ? options.memoryLimit / static_cast<double>(V)
                                : kInf);
    fits = starts.has_value();
    if (!starts)
      starts = fastestSplit(table, leanestSplit().value);
    assert(starts && "the leanest split fits its own memory");
    return std::move(*starts);
  };

  std::vector<size_t> starts;
  std::optional<InterleavedModel> interleaved;
  if (V == 1) {
    starts = chunkSplit(split.fits);
  } else {
    // The interleaved step and each device's memory exactly: every split
    // when there are few, else descents from the chunks' 1F1B split, the
    // fastest with no limit and the leanest; the best of their ends.
    interleaved.emplace(table, options);
    const size_t L = layers.size(), C = static_cast<size_t>(options.stages * V);
    if (binomial(L - 1, C - 1) <= options.exhaustiveSplits) {
      starts = bestOfAll(*interleaved, L, C);
    } else {
      bool chunksFit = false;
      std::vector<std::vector<size_t>> seeds{chunkSplit(chunksFit)};
      if (std::optional<std::vector<size_t>> fastest =
              fastestSplit(table, kInf))
        seeds.push_back(*fastest);
      seeds.push_back(leanestSplit().starts);
      std::optional<InterleavedModel::Value> bestValue;
      for (std::vector<size_t> &seed : seeds) {
        std::vector<size_t> end = descend(*interleaved, std::move(seed), L);
        InterleavedModel::Value value = interleaved->evaluate(end);
        if (!bestValue || InterleavedModel::better(value, *bestValue)) {
          starts = std::move(end);
          bestValue = value;
        }
      }
    }
    split.fits = interleaved->evaluate(starts).fits;
  }

  split.starts = std::move(starts);
  for (size_t s = 0; s < split.starts.size(); ++s) {
    size_t j = split.starts[s], i = table.end(split.starts, s);
    double step = 0;
    for (size_t l = j; l < i; ++l)
      step += layers[l].stepSeconds;
    split.microBatchSeconds.push_back(table.seconds(j, i));
    split.stepSeconds.push_back(step);
    if (V == 1)
      split.memoryBytes.push_back(table.bytes(j, i, static_cast<int64_t>(s)));
  }
  if (interleaved)
    for (int64_t d = 0; d < options.stages; ++d)
      split.memoryBytes.push_back(
          interleaved->deviceBytes(split.starts, static_cast<size_t>(d)));
  split.seconds = pipelineSeconds(split.microBatchSeconds, split.stepSeconds,
                                  options.microBatches, V);
  return split;
}

namespace {

/// What splitOnSubmeshes' programs share: per shape, its range table and
/// its devices in units of the shapes' greatest common divisor.
struct SubmeshProblem {
  std::vector<StageTable> tables;
  std::vector<size_t> units;
  size_t numLayers = 0, totalUnits = 0, maxStages = 0;
  /// Empty, or each stage's shape (SubmeshSplitOptions::stageShapes).
  std::vector<size_t> stageShapes;
  double microBatches = 1;
  bool gpipe = false;
  /// Bytes per device; +inf: unlimited.
  double memoryLimit = kInf;

  /// Micro-batches held by a stage with `fromEnd` stages from it to the
  /// last (itself included).
  double held(size_t fromEnd) const {
    return gpipe ? microBatches
                 : std::min(microBatches, static_cast<double>(fromEnd));
  }
  double bytes(size_t k, size_t j, size_t i, size_t fromEnd) const {
    const StageTable &t = tables[k];
    return t.stateBytes(j, i) + held(fromEnd) * t.savedBytes(j, i) +
           t.transientBytes(j, i);
  }
};

struct SubmeshChoice {
  double value;
  std::vector<size_t> starts, shapes;
};

/// Over the splits into stages of the shapes using every unit, with each
/// stage's time at most `cap` and its memory within the limit, the one
/// minimizing the fold of `combine` over the stages' times. best[r][i][d]:
/// layers [i, L) in exactly r stages on exactly d units. At equal values
/// the fewest stages, then the earliest end and the first shape win.
template <typename Combine>
std::optional<SubmeshChoice> solveSubmeshes(const SubmeshProblem &p, double cap,
                                            Combine combine) {
  const size_t L = p.numLayers, D = p.totalUnits, R = p.maxStages;
  auto at = [&](size_t r, size_t i, size_t d) {
    return (r * (L + 1) + i) * (D + 1) + d;
  };
  std::vector<double> best((R + 1) * (L + 1) * (D + 1), kInf);
  std::vector<size_t> fromEnd(best.size(), 0), fromShape(best.size(), 0);
  best[at(0, L, 0)] = 0;
  for (size_t r = 1; r <= R; ++r)
    for (size_t i = 0; i + r <= L; ++i)
      for (size_t d = 1; d <= D; ++d) {
        double &cell = best[at(r, i, d)];
        for (size_t k = 0; k < p.tables.size(); ++k) {
          // With the shapes given, the stage r from the end has its own.
          if (!p.stageShapes.empty() && k != p.stageShapes[R - r])
            continue;
          const size_t u = p.units[k];
          if (u > d)
            continue;
          const StageTable &table = p.tables[k];
          for (size_t j = i + 1; j + (r - 1) <= L; ++j) {
            // Longer stages only take longer and hold more. (The prefix
            // difference is rounded against the whole chain: a wider
            // margin.)
            if (table.layerSeconds(i, j) > cap * (1 + 1e-9) ||
                !atMost(p.bytes(k, i, j, r), p.memoryLimit))
              break;
            double before = best[at(r - 1, j, d - u)];
            if (std::isinf(before))
              continue;
            double t = table.seconds(i, j);
            if (!atMost(t, cap))
              continue;
            double value = combine(before, t);
            if (lessThan(value, cell)) {
              cell = value;
              fromEnd[at(r, i, d)] = j;
              fromShape[at(r, i, d)] = k;
            }
          }
        }
      }
  size_t stages = 0;
  for (size_t r = p.stageShapes.empty() ? 1 : R; r <= R; ++r)
    if (!std::isinf(best[at(r, 0, D)]) &&
        (!stages || lessThan(best[at(r, 0, D)], best[at(stages, 0, D)])))
      stages = r;
  if (!stages)
    return std::nullopt;
  SubmeshChoice choice{best[at(stages, 0, D)], {}, {}};
  for (size_t r = stages, i = 0, d = D; r > 0; --r) {
    size_t j = fromEnd[at(r, i, d)], k = fromShape[at(r, i, d)];
    choice.starts.push_back(i);
    choice.shapes.push_back(k);
    d -= p.units[k];
    i = j;
  }
  return choice;
}

} // namespace

std::optional<SubmeshSplit>
splitOnSubmeshes(const std::vector<SubmeshShape> &shapes,
                 const SubmeshSplitOptions &options) {
  if (shapes.empty() || options.devices < 1 || options.microBatches < 1)
    return std::nullopt;
  const size_t L = shapes[0].layers.size();
  int64_t unit = 0;
  for (const SubmeshShape &shape : shapes) {
    if (shape.devices < 1 || shape.layers.size() != L)
      return std::nullopt;
    for (size_t l = 0; l < L; ++l)
      if (shape.layers[l].name != shapes[0].layers[l].name)
        return std::nullopt;
    unit = std::gcd(unit, shape.devices);
  }
  if (L == 0 || options.devices % unit != 0)
    return std::nullopt;

  SubmeshProblem problem;
  StageSplitOptions tableOptions;
  tableOptions.microBatches = options.microBatches;
  tableOptions.sendSeconds = options.sendSeconds;
  size_t fewestUnits = std::numeric_limits<size_t>::max();
  for (const SubmeshShape &shape : shapes) {
    tableOptions.sendSeconds =
        shape.sendSeconds ? shape.sendSeconds : options.sendSeconds;
    problem.tables.emplace_back(shape.layers, tableOptions);
    problem.units.push_back(static_cast<size_t>(shape.devices / unit));
    fewestUnits = std::min(fewestUnits, problem.units.back());
  }
  problem.numLayers = L;
  problem.totalUnits = static_cast<size_t>(options.devices / unit);
  problem.maxStages = std::min(L, problem.totalUnits / fewestUnits);
  if (!options.stageShapes.empty()) {
    size_t units = 0;
    for (size_t k : options.stageShapes) {
      if (k >= shapes.size())
        return std::nullopt;
      units += problem.units[k];
    }
    if (units != problem.totalUnits || options.stageShapes.size() > L)
      return std::nullopt;
    problem.stageShapes = options.stageShapes;
    problem.maxStages = options.stageShapes.size();
  }
  problem.microBatches = static_cast<double>(options.microBatches);
  problem.gpipe = options.schedule == "gpipe";
  if (options.memoryLimit > 0)
    problem.memoryLimit = options.memoryLimit;

  auto objective = [&](const SubmeshChoice &c) {
    double sum = 0, slowest = 0;
    for (size_t s = 0; s < c.starts.size(); ++s) {
      size_t end = s + 1 < c.starts.size() ? c.starts[s + 1] : L;
      double t = problem.tables[c.shapes[s]].seconds(c.starts[s], end);
      sum += t;
      slowest = std::max(slowest, t);
    }
    return sum + (problem.microBatches - 1) * slowest;
  };
  std::vector<double> times;
  for (const StageTable &table : problem.tables) {
    std::vector<double> all = table.allTimes();
    times.insert(times.end(), all.begin(), all.end());
  }
  std::optional<SubmeshChoice> bestChoice = fastestUnderCaps(
      [&](double cap, Combine combine) {
        return solveSubmeshes(problem, cap, combine);
      },
      objective, std::move(times), problem.microBatches);
  if (!bestChoice)
    return std::nullopt;

  SubmeshSplit split;
  split.starts = std::move(bestChoice->starts);
  split.shapes = std::move(bestChoice->shapes);
  const size_t P = split.starts.size();
  for (size_t s = 0; s < P; ++s) {
    size_t j = split.starts[s], i = split.end(s, L), k = split.shapes[s];
    double step = 0;
    for (size_t l = j; l < i; ++l)
      step += shapes[k].layers[l].stepSeconds;
    split.microBatchSeconds.push_back(problem.tables[k].seconds(j, i));
    split.stepSeconds.push_back(step);
    split.memoryBytes.push_back(problem.bytes(k, j, i, P - s));
  }
  split.seconds = pipelineSeconds(split.microBatchSeconds, split.stepSeconds,
                                  options.microBatches);
  return split;
}

} // namespace loom::search
