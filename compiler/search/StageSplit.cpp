//===- StageSplit.cpp - Stages over layers on one submesh shape -----------===//

#include "compiler/search/StageSplit.h"
#include "compiler/search/StageTable.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

namespace loom::search {

using namespace detail;

namespace {

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

} // namespace loom::search
