//===- SplitReference.h - A stage split's numbers, recomputed ---*- C++ -*-===//
//
// The stage-split tests' oracle: one split's per-stage times, memories and
// step, recomputed from the definitions in compiler/search/StageSplit.h
// (independently of the library's tables), for GPipe and 1F1B.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_SEARCH_SPLITREFERENCE_H
#define LOOM_TEST_UNIT_SEARCH_SPLITREFERENCE_H

#include "compiler/search/StageSplit.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace loom::search::reference {

struct Reference {
  std::vector<double> micro, step, memory;
  double objective = 0, largestMemory = 0, seconds = 0;
};

/// Stage s runs layers [starts[s], starts[s + 1]) (the last to the end) of
/// layersOf(s); all hold the same number of layers.
inline Reference evaluateSplit(
    const std::function<const std::vector<LayerCost> &(size_t)> &layersOf,
    const std::vector<size_t> &starts, int64_t microBatches,
    const std::string &schedule,
    const std::function<double(double)> &sendSeconds) {
  const size_t P = starts.size();
  const double M = static_cast<double>(microBatches);
  auto send = [&](double bytes) {
    return bytes > 0 && sendSeconds ? sendSeconds(bytes) : 0.0;
  };
  Reference r;
  double slowest = 0, slowestStep = 0, sum = 0;
  for (size_t s = 0; s < P; ++s) {
    const std::vector<LayerCost> &layers = layersOf(s);
    const size_t L = layers.size();
    size_t j = starts[s], i = s + 1 < P ? starts[s + 1] : L;
    double t = 0, u = 0, state = 0, saved = 0, transient = 0;
    for (size_t l = j; l < i; ++l) {
      t += layers[l].microBatchSeconds;
      u += layers[l].stepSeconds;
      state += layers[l].stateBytes;
      saved += layers[l].savedBytes;
      transient = std::max(transient, layers[l].transientBytes);
    }
    if (i < L)
      t += send(layers[i - 1].forwardBytes);
    if (j > 0)
      t += send(layers[j - 1].backwardBytes);
    double held =
        schedule == "gpipe" ? M : std::min(M, static_cast<double>(P - s));
    r.micro.push_back(t);
    r.step.push_back(u);
    r.memory.push_back(state + held * saved + transient);
    sum += t;
    slowest = std::max(slowest, t);
    slowestStep = std::max(slowestStep, u);
    r.largestMemory = std::max(r.largestMemory, r.memory.back());
  }
  r.objective = sum + (M - 1) * slowest;
  r.seconds = r.objective + slowestStep;
  return r;
}

} // namespace loom::search::reference

#endif // LOOM_TEST_UNIT_SEARCH_SPLITREFERENCE_H
