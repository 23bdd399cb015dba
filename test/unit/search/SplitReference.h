//===- SplitReference.h - A stage split's numbers, recomputed ---*- C++ -*-===//
//
// The stage-split tests' oracle: one split's per-stage times, memories and
// step, recomputed from the definitions in compiler/search/StageSplit.h
// (independently of the library's tables), for GPipe, 1F1B and
// interleaved 1F1B.
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

/// A split of `layers` into P * V chunks (chunk c on device c mod P) under
/// the interleaved schedule: per chunk t and u, per device its memory (its
/// chunks' state and largest transient, and the saved results of its
/// order's held forward units at their most), and the step
/// sum_c t_c / V + (M - 1/V) max_d T_d + max_d u_d.
inline Reference
evaluateInterleaved(const std::vector<LayerCost> &layers,
                    const std::vector<size_t> &starts, int64_t stages,
                    int64_t virtualStages, int64_t microBatches,
                    const std::function<double(double)> &sendSeconds) {
  const size_t C = starts.size(), P = static_cast<size_t>(stages),
               L = layers.size();
  const double V = static_cast<double>(virtualStages),
               M = static_cast<double>(microBatches);
  auto send = [&](double bytes) {
    return bytes > 0 && sendSeconds ? sendSeconds(bytes) : 0.0;
  };
  Reference r;
  std::vector<double> state(C), saved(C), transient(C);
  for (size_t c = 0; c < C; ++c) {
    size_t j = starts[c], i = c + 1 < C ? starts[c + 1] : L;
    double t = 0, u = 0;
    for (size_t l = j; l < i; ++l) {
      t += layers[l].microBatchSeconds;
      u += layers[l].stepSeconds;
      state[c] += layers[l].stateBytes;
      saved[c] += layers[l].savedBytes;
      transient[c] = std::max(transient[c], layers[l].transientBytes);
    }
    if (i < L)
      t += send(layers[i - 1].forwardBytes);
    if (j > 0)
      t += send(layers[j - 1].backwardBytes);
    r.micro.push_back(t);
    r.step.push_back(u);
  }
  double sum = 0, slowest = 0, slowestStep = 0;
  for (size_t d = 0; d < P; ++d) {
    double t = 0, u = 0, bytes = 0, held = 0, peak = 0, largest = 0;
    for (size_t c = d; c < C; c += P) {
      t += r.micro[c];
      u += r.step[c];
      bytes += state[c];
      largest = std::max(largest, transient[c]);
    }
    for (const ScheduleUnit &unit :
         scheduleOrder("interleaved", stages, microBatches,
                       static_cast<int64_t>(d), virtualStages)) {
      held += (unit.backward ? -1 : 1) *
              saved[static_cast<size_t>(unit.chunk) * P + d];
      peak = std::max(peak, held);
    }
    r.memory.push_back(bytes + peak + largest);
    r.largestMemory = std::max(r.largestMemory, r.memory.back());
    sum += t;
    slowest = std::max(slowest, t);
    slowestStep = std::max(slowestStep, u);
  }
  r.objective = sum / V + (M - 1 / V) * slowest;
  r.seconds = r.objective + slowestStep;
  return r;
}

} // namespace loom::search::reference

#endif // LOOM_TEST_UNIT_SEARCH_SPLITREFERENCE_H
