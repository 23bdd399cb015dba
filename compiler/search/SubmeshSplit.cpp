//===- SubmeshSplit.cpp - Stages on submeshes of several shapes -----------===//
//
// splitOnSubmeshes (StageSplit.h): the stages' layers and each stage's
// submesh shape chosen together, by a dynamic program over the layers
// left, the stages left and the devices left, under Alpa's enumeration of
// the slowest stage's time (StageTable.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/search/StageSplit.h"
#include "compiler/search/StageTable.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace loom::search {

using namespace detail;

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
