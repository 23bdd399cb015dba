//===- ScheduleTest.cpp - Pipeline schedules run, and take what they say -===//
//
// Each device's order from scheduleOrder (GPipe, 1F1B, interleaved 1F1B)
// is executed by a small event simulation of the pipeline: a forward of
// chunk c needs chunk c - 1's forward of the same micro-batch, a backward
// needs chunk c + 1's backward (the last chunk: its own forward), and a
// device runs its units in its order, one at a time; sends are buffered.
// The orders must run every unit once and never deadlock, and with equal
// chunks the simulated step must be what pipelineSeconds predicts and the
// held micro-batches what inFlight says.
//
//===----------------------------------------------------------------------===//

#include "compiler/search/StageSplit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

using namespace loom::search;

namespace {

struct Simulation {
  bool completed = false;
  /// The last unit's end.
  double makespan = 0;
  /// Per device, the most forward units whose backward had not run.
  std::vector<int64_t> peakHeld;
  std::string problem;
};

/// Runs the orders of `P` devices, `V` chunks each, over `M` micro-batches;
/// a forward takes `f` and a backward `b`.
Simulation simulate(const std::string &schedule, int64_t P, int64_t M,
                    int64_t V, double f, double b) {
  Simulation sim;
  const int64_t C = P * V;
  std::vector<std::vector<ScheduleUnit>> orders;
  for (int64_t d = 0; d < P; ++d)
    orders.push_back(scheduleOrder(schedule, P, M, d, V));
  // Every unit once.
  for (int64_t d = 0; d < P; ++d) {
    std::map<std::tuple<int64_t, int64_t, bool>, int> count;
    for (const ScheduleUnit &u : orders[d]) {
      if (u.microBatch < 0 || u.microBatch >= M || u.chunk < 0 ||
          u.chunk >= V) {
        sim.problem = "a unit out of range";
        return sim;
      }
      ++count[{u.microBatch, u.chunk, u.backward}];
    }
    if (static_cast<int64_t>(count.size()) != 2 * M * V ||
        std::any_of(count.begin(), count.end(),
                    [](auto &e) { return e.second != 1; })) {
      sim.problem = "device " + std::to_string(d) +
                    " does not run every unit exactly once";
      return sim;
    }
  }
  // When each (global chunk, micro-batch, backward) unit ended.
  std::map<std::tuple<int64_t, int64_t, bool>, double> done;
  std::vector<size_t> next(P, 0);
  std::vector<double> clock(P, 0);
  std::vector<int64_t> held(P, 0);
  sim.peakHeld.assign(P, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t d = 0; d < P; ++d)
      while (next[d] < orders[d].size()) {
        const ScheduleUnit &u = orders[d][next[d]];
        int64_t c = u.chunk * P + d;
        std::tuple<int64_t, int64_t, bool> need;
        bool needs = true;
        if (!u.backward) {
          needs = c > 0;
          need = {c - 1, u.microBatch, false};
        } else {
          need = c + 1 < C ? std::make_tuple(c + 1, u.microBatch, true)
                           : std::make_tuple(c, u.microBatch, false);
        }
        double ready = 0;
        if (needs) {
          auto it = done.find(need);
          if (it == done.end())
            break;
          ready = it->second;
        }
        if (u.backward && !done.count({c, u.microBatch, false})) {
          sim.problem = "a backward before its own forward";
          return sim;
        }
        clock[d] = std::max(clock[d], ready) + (u.backward ? b : f);
        done[{c, u.microBatch, u.backward}] = clock[d];
        held[d] += u.backward ? -1 : 1;
        sim.peakHeld[d] = std::max(sim.peakHeld[d], held[d]);
        ++next[d];
        progress = true;
      }
  }
  for (int64_t d = 0; d < P; ++d)
    if (next[d] < orders[d].size()) {
      sim.problem = "deadlock: device " + std::to_string(d) + " waits";
      return sim;
    }
  sim.completed = true;
  sim.makespan = *std::max_element(clock.begin(), clock.end());
  return sim;
}

struct Shape {
  std::string schedule;
  int64_t P, M, V;
  std::string name() const {
    return schedule + " P=" + std::to_string(P) + " M=" + std::to_string(M) +
           " V=" + std::to_string(V);
  }
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int64_t P = 1; P <= 6; ++P) {
    for (int64_t M = 1; M <= 9; ++M) {
      out.push_back({"gpipe", P, M, 1});
      out.push_back({"1f1b", P, M, 1});
    }
    for (int64_t V = 1; V <= 4; ++V)
      for (int64_t M = P; M <= 4 * P; M += P)
        out.push_back({"interleaved", P, M, V});
  }
  return out;
}

} // namespace

// Every order runs to the end, each unit once, forwards before their
// backwards.
TEST(Schedule, EveryOrderRunsWithoutDeadlock) {
  int checked = 0;
  for (const Shape &s : shapes()) {
    Simulation sim = simulate(s.schedule, s.P, s.M, s.V, 1, 2);
    EXPECT_TRUE(sim.completed) << s.name() << ": " << sim.problem;
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

// With equal chunks (forward f, backward b) the simulated step is
// pipelineSeconds of the chunks' times: (M + P - 1)(f + b) for GPipe and
// 1F1B, (M V + P - 1)(f + b) for interleaved chunks of 1/V of a stage. For
// interleaved, where backward and forward differ the fill and drain run
// through different chunks; the formula is checked for f == b there.
TEST(Schedule, EqualChunksTakeThePredictedStep) {
  for (const Shape &s : shapes()) {
    for (auto [f, b] : {std::pair<double, double>{1, 1}, {1, 2}}) {
      if (s.schedule == "interleaved" && s.V > 1 && f != b)
        continue;
      Simulation sim = simulate(s.schedule, s.P, s.M, s.V, f, b);
      ASSERT_TRUE(sim.completed) << s.name();
      std::vector<double> micro(s.P * s.V, f + b);
      double predicted = pipelineSeconds(micro, {}, s.M, s.V);
      EXPECT_DOUBLE_EQ(sim.makespan, predicted)
          << s.name() << " f=" << f << " b=" << b;
      EXPECT_DOUBLE_EQ(predicted, (s.M * s.V + s.P - 1) * (f + b)) << s.name();
    }
  }
}

// inFlight is the most forward units a device holds, over V.
TEST(Schedule, InFlightIsWhatTheOrderHolds) {
  for (const Shape &s : shapes()) {
    Simulation sim = simulate(s.schedule, s.P, s.M, s.V, 1, 2);
    ASSERT_TRUE(sim.completed) << s.name();
    for (int64_t d = 0; d < s.P; ++d) {
      EXPECT_DOUBLE_EQ(inFlight(s.schedule, s.P, s.M, d, s.V),
                       static_cast<double>(sim.peakHeld[d]) /
                           static_cast<double>(s.V))
          << s.name() << " device " << d;
      int64_t perChunk = 0;
      for (int64_t v = 0; v < s.V; ++v)
        perChunk += chunkInFlight(s.schedule, s.P, s.M, d, v, s.V);
      EXPECT_GE(perChunk, sim.peakHeld[d]) << s.name();
    }
  }
  // By hand: P = 2, V = 2, M = 4. Device 0 warms up with 2 + 2 forwards and
  // holds a fifth before its first backward; device 1 holds 2 + 1. Device
  // 0's chunk 0 runs all four micro-batches' forwards before its first
  // backward, its chunk 1 at most two.
  EXPECT_DOUBLE_EQ(inFlight("interleaved", 2, 4, 0, 2), 2.5);
  EXPECT_DOUBLE_EQ(inFlight("interleaved", 2, 4, 1, 2), 1.5);
  EXPECT_EQ(chunkInFlight("interleaved", 2, 4, 0, 0, 2), 4);
  EXPECT_EQ(chunkInFlight("interleaved", 2, 4, 0, 1, 2), 2);
}

// The interleaved order of one device, by hand (Megatron-LM's): P = 2,
// V = 2, M = 4 on device 1: (V - 1) P = 2 forwards of warm-up, through
// chunk 0 for micro-batches 0 and 1, then forwards alternate with
// backwards, which start from chunk 1.
TEST(Schedule, InterleavedOrderByHand) {
  std::vector<ScheduleUnit> got = scheduleOrder("interleaved", 2, 4, 1, 2);
  std::vector<ScheduleUnit> want = {
      {0, 0, false}, {1, 0, false}, {0, 1, false}, {0, 1, true},
      {1, 1, false}, {1, 1, true},  {2, 0, false}, {0, 0, true},
      {3, 0, false}, {1, 0, true},  {2, 1, false}, {2, 1, true},
      {3, 1, false}, {3, 1, true},  {2, 0, true},  {3, 0, true}};
  EXPECT_EQ(got, want);
  // M not a multiple of P: no order.
  EXPECT_TRUE(scheduleOrder("interleaved", 2, 3, 0, 2).empty());
}
