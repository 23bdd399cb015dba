//===- StageSplitTest.cpp - The stage split equals the exhaustive optimum -===//
//
// Random small layer chains split by splitStages and by enumerating every
// split: the objectives (or, when nothing fits, the largest memories) must
// be equal, and the numbers returned must be those of the returned split.
// Hand cases pin the schedule's memory, the formulas and the edge cases.
//
//===----------------------------------------------------------------------===//

#include "compiler/search/StageSplit.h"
#include "test/unit/search/SplitReference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

using namespace loom::search;

namespace {

using reference::Reference;

/// One split's numbers, recomputed (SplitReference.h).
Reference evaluate(const std::vector<LayerCost> &layers,
                   const std::vector<size_t> &starts,
                   const StageSplitOptions &options) {
  return reference::evaluateSplit(
      [&](size_t) -> const std::vector<LayerCost> & { return layers; }, starts,
      options.microBatches, options.schedule, options.sendSeconds);
}

/// Every split of `numLayers` layers into `stages` non-empty stages.
std::vector<std::vector<size_t>> allSplits(size_t numLayers, size_t stages) {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> starts{0};
  std::function<void()> extend = [&] {
    if (starts.size() == stages) {
      out.push_back(starts);
      return;
    }
    size_t left = stages - starts.size();
    for (size_t next = starts.back() + 1; next + left <= numLayers; ++next) {
      starts.push_back(next);
      extend();
      starts.pop_back();
    }
  };
  extend();
  return out;
}

/// Layers with random costs; with `integral`, small whole numbers, so that
/// many stages tie and many caps coincide.
std::vector<LayerCost> randomLayers(std::mt19937 &rng, size_t n,
                                    bool integral) {
  std::uniform_real_distribution<double> unit(0, 1);
  auto value = [&](double scale) {
    return integral ? std::floor(unit(rng) * 4) * scale : unit(rng) * scale;
  };
  std::vector<LayerCost> layers(n);
  for (size_t l = 0; l < n; ++l) {
    LayerCost &c = layers[l];
    c.name = "layer" + std::to_string(l);
    c.microBatchSeconds = value(1) + (integral ? 1 : 0.1);
    c.stepSeconds = value(0.5);
    c.stateBytes = value(10);
    c.savedBytes = value(10);
    // Now and then a cut carries nothing one way.
    c.forwardBytes = unit(rng) < 0.2 ? 0 : value(8);
    c.backwardBytes = unit(rng) < 0.2 ? 0 : value(8);
  }
  return layers;
}

void expectMatchesReference(const StageSplit &got,
                            const std::vector<LayerCost> &layers,
                            const StageSplitOptions &options,
                            const std::string &where) {
  ASSERT_EQ(got.starts.size(), static_cast<size_t>(options.stages)) << where;
  ASSERT_EQ(got.starts[0], 0u) << where;
  for (size_t s = 1; s < got.starts.size(); ++s)
    ASSERT_LT(got.starts[s - 1], got.starts[s]) << where;
  ASSERT_LT(got.starts.back(), layers.size()) << where;
  Reference r = evaluate(layers, got.starts, options);
  ASSERT_EQ(got.microBatchSeconds.size(), got.starts.size()) << where;
  ASSERT_EQ(got.stepSeconds.size(), got.starts.size()) << where;
  ASSERT_EQ(got.memoryBytes.size(), got.starts.size()) << where;
  for (size_t s = 0; s < got.starts.size(); ++s) {
    EXPECT_NEAR(got.microBatchSeconds[s], r.micro[s], 1e-9 * (1 + r.micro[s]))
        << where << " stage " << s;
    EXPECT_NEAR(got.stepSeconds[s], r.step[s], 1e-9 * (1 + r.step[s]))
        << where << " stage " << s;
    EXPECT_NEAR(got.memoryBytes[s], r.memory[s], 1e-9 * (1 + r.memory[s]))
        << where << " stage " << s;
  }
  EXPECT_NEAR(got.seconds, r.seconds, 1e-9 * (1 + r.seconds)) << where;
}

std::string describe(const std::vector<size_t> &starts) {
  std::string s = "{";
  for (size_t i = 0; i < starts.size(); ++i)
    s += (i ? "," : "") + std::to_string(starts[i]);
  return s + "}";
}

LayerCost layer(double micro, double saved = 0, double state = 0) {
  LayerCost c;
  c.microBatchSeconds = micro;
  c.savedBytes = saved;
  c.stateBytes = state;
  return c;
}

} // namespace

// The acceptance check: on random chains of up to 9 layers, every stage
// count, micro-batch count and schedule, with no memory limit, a limit that
// excludes some splits and one that excludes all, the split's objective
// equals the least over all memory-feasible splits (or its largest memory
// the least over all splits when none fits, and its objective the least
// among those), and its reported numbers are its own.
TEST(StageSplit, EqualsExhaustiveOnRandomChains) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> unit(0, 1);
  int solved = 0, infeasible = 0, limited = 0;
  for (int trial = 0; trial < 160; ++trial) {
    size_t L = 1 + trial % 9;
    bool integral = trial % 3 == 0;
    std::vector<LayerCost> layers = randomLayers(rng, L, integral);
    std::function<double(double)> send;
    if (trial % 4 != 3) {
      double latency = integral ? 1 : unit(rng), perByte = unit(rng) * 0.5;
      send = [latency, perByte](double bytes) {
        return latency + perByte * bytes;
      };
    }
    for (size_t P = 1; P <= std::min<size_t>(4, L); ++P) {
      std::vector<std::vector<size_t>> splits = allSplits(L, P);
      for (int64_t M : {1, 2, 4, 8})
        for (const char *schedule : {"gpipe", "1f1b"}) {
          StageSplitOptions options;
          options.stages = static_cast<int64_t>(P);
          options.microBatches = M;
          options.schedule = schedule;
          options.sendSeconds = send;
          std::vector<Reference> refs;
          std::vector<double> largest;
          for (const std::vector<size_t> &starts : splits) {
            refs.push_back(evaluate(layers, starts, options));
            largest.push_back(refs.back().largestMemory);
          }
          std::vector<double> sorted = largest;
          std::sort(sorted.begin(), sorted.end());
          // Unlimited, a limit between the splits' largest memories, and
          // one below all of them.
          double between = sorted[sorted.size() / 2];
          for (double limit : {0.0, between, 0.9 * sorted.front()}) {
            if (limit == 0.9 * sorted.front() && sorted.front() <= 0)
              continue;
            options.memoryLimit = limit;
            std::string where =
                "trial " + std::to_string(trial) + " L=" + std::to_string(L) +
                " P=" + std::to_string(P) + " M=" + std::to_string(M) + " " +
                schedule + " limit=" + std::to_string(limit);
            std::optional<StageSplit> got = splitStages(layers, options);
            ASSERT_TRUE(got) << where;
            expectMatchesReference(*got, layers, options, where);
            Reference mine = evaluate(layers, got->starts, options);

            double bestFeasible = INFINITY;
            for (const Reference &r : refs)
              if (limit <= 0 || r.largestMemory <= limit)
                bestFeasible = std::min(bestFeasible, r.objective);
            ++solved;
            limited += limit > 0 && bestFeasible < INFINITY &&
                       sorted.front() <= limit && sorted.back() > limit;
            if (bestFeasible < INFINITY) {
              EXPECT_TRUE(got->fits) << where;
              EXPECT_NEAR(mine.objective, bestFeasible, 1e-9 * bestFeasible)
                  << where << " got " << describe(got->starts);
              for (double m : got->memoryBytes) {
                if (limit > 0) {
                  EXPECT_LE(m, limit * (1 + 1e-9)) << where;
                }
              }
              continue;
            }
            ++infeasible;
            EXPECT_FALSE(got->fits) << where;
            double leanest = sorted.front();
            EXPECT_NEAR(mine.largestMemory, leanest, 1e-9 * leanest)
                << where << " got " << describe(got->starts);
            double bestLeanest = INFINITY;
            for (const Reference &r : refs)
              if (r.largestMemory <= leanest * (1 + 1e-9))
                bestLeanest = std::min(bestLeanest, r.objective);
            EXPECT_NEAR(mine.objective, bestLeanest, 1e-9 * bestLeanest)
                << where << " got " << describe(got->starts);
          }
        }
    }
  }
  EXPECT_GT(limited, 100);
  EXPECT_GT(infeasible, 100);
  std::printf("[ checked  ] %d splits against enumeration: %d under a "
              "binding limit, %d with nothing fitting\n",
              solved, limited, infeasible);
}

// Equal layers and no sends: every split has the same sum, so the slowest
// stage decides and the layers are dealt out evenly.
TEST(StageSplit, EqualLayersSplitEvenly) {
  std::vector<LayerCost> layers(8, layer(1.0));
  for (LayerCost &c : layers)
    c.stepSeconds = 0.25;
  StageSplitOptions options;
  options.stages = 4;
  options.microBatches = 4;
  std::optional<StageSplit> got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 2, 4, 6}));
  EXPECT_EQ(got->microBatchSeconds, (std::vector<double>(4, 2.0)));
  EXPECT_EQ(got->stepSeconds, (std::vector<double>(4, 0.5)));
  EXPECT_DOUBLE_EQ(got->seconds, 8 + 3 * 2 + 0.5);
  EXPECT_TRUE(got->fits);
}

// A layer slower than the rest together gets a stage of its own: anything
// joined to it would make the slowest stage slower still.
TEST(StageSplit, HeavyLayerStandsAlone) {
  std::vector<LayerCost> layers = {layer(1), layer(1), layer(10), layer(1),
                                   layer(1)};
  StageSplitOptions options;
  options.stages = 3;
  options.microBatches = 8;
  std::optional<StageSplit> got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(got->microBatchSeconds, (std::vector<double>{2, 10, 2}));
  EXPECT_DOUBLE_EQ(got->seconds, 14 + 7 * 10);
}

// A cut's sends count on both sides: the forward's on the stage before it,
// the backward's on the stage after. Cutting where the forward sends much
// loses to cutting where little crosses, even off balance; a cut carrying
// no bytes costs nothing even with a per-message latency.
TEST(StageSplit, SendsSteerTheCut) {
  std::vector<LayerCost> layers(4, layer(1));
  layers[0].backwardBytes = 0.5; // cut 1: t1 = 3 + 1.5
  layers[1].forwardBytes = 2;    // cut 2: t0 = 2 + 3
  layers[2].forwardBytes = 0;    // cut 3: free both ways
  std::vector<double> asked;
  StageSplitOptions options;
  options.stages = 2;
  options.microBatches = 2;
  options.sendSeconds = [&asked](double bytes) {
    asked.push_back(bytes);
    return 1 + bytes;
  };
  std::optional<StageSplit> got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(got->microBatchSeconds, (std::vector<double>{3, 1}));
  for (double bytes : asked)
    EXPECT_GT(bytes, 0);
  // And when cut 3 is as expensive as cut 2, cut 1 wins: 1 + 4.5 + 4.5.
  layers[2].forwardBytes = 2;
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(got->microBatchSeconds[1], 4.5);
}

// Under 1F1B stage 0 holds P micro-batches (here 2 of M = 4) and the last
// stage one, so a split that puts the big saved results first can break
// the limit while one that moves them back does not; under GPipe every
// stage holds all M and nothing fits, so the leanest split is returned.
TEST(StageSplit, OneFOneBHoldsFewerMicroBatchesOnLaterStages) {
  std::vector<LayerCost> layers = {layer(1, 4), layer(1, 4), layer(1, 1),
                                   layer(1, 1)};
  StageSplitOptions options;
  options.stages = 2;
  options.microBatches = 4;
  options.schedule = "1f1b";

  // Unlimited: the balanced split, stage 0 holding 2 * 8 bytes.
  std::optional<StageSplit> got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(got->memoryBytes, (std::vector<double>{16, 2}));

  // Within 10 bytes only {0, 1} fits: 2 * 4 and 1 * 6.
  options.memoryLimit = 10;
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->fits);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(got->memoryBytes, (std::vector<double>{8, 6}));
  EXPECT_DOUBLE_EQ(got->seconds, 4 + 3 * 3);

  // GPipe: 4 * saved everywhere; {0, 1} is the leanest at 24 bytes.
  options.schedule = "gpipe";
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->fits);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(got->memoryBytes, (std::vector<double>{16, 24}));

  // With room for 24 it fits again.
  options.memoryLimit = 24;
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->fits);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 1}));
}

// No split exists with fewer layers than stages, or with no stages.
TEST(StageSplit, TooFewLayersHasNoSplit) {
  std::vector<LayerCost> layers(3, layer(1));
  StageSplitOptions options;
  options.stages = 4;
  EXPECT_FALSE(splitStages(layers, options));
  options.stages = 0;
  EXPECT_FALSE(splitStages(layers, options));
  EXPECT_FALSE(splitStages({}, options));
  options.stages = 3;
  std::optional<StageSplit> got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 1, 2}));
  options.stages = 1;
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0}));
  EXPECT_EQ(got->microBatchSeconds, (std::vector<double>{3}));
}

// The formulas of the header, by hand.
TEST(StageSplit, PipelineSecondsAndInFlight) {
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 2, 3}, {0.5, 0.25, 1}, 4),
                   6 + 3 * 3 + 1);
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 2, 3}, {0.5, 0.25, 1}, 1), 6 + 1);
  EXPECT_DOUBLE_EQ(pipelineSeconds({}, {}, 8), 0);
  EXPECT_DOUBLE_EQ(pipelineSeconds({2}, {}, 3), 2 + 2 * 2);

  for (int64_t s = 0; s < 4; ++s)
    EXPECT_EQ(inFlight("gpipe", 4, 8, s), 8);
  EXPECT_EQ(inFlight("1f1b", 4, 8, 0), 4);
  EXPECT_EQ(inFlight("1f1b", 4, 8, 1), 3);
  EXPECT_EQ(inFlight("1f1b", 4, 8, 3), 1);
  EXPECT_EQ(inFlight("1f1b", 4, 2, 0), 2);
  EXPECT_EQ(inFlight("1f1b", 4, 2, 2), 2);
  EXPECT_EQ(inFlight("1f1b", 4, 2, 3), 1);
}

// A deep model (100 layers, 8 to 32 stages, many distinct stage times)
// splits quickly, and no worse than the even split or random feasible ones.
TEST(StageSplit, HundredLayersSplitQuickly) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<LayerCost> layers = randomLayers(rng, 100, /*integral=*/false);
  double totalState = 0, totalSaved = 0;
  for (const LayerCost &c : layers) {
    totalState += c.stateBytes;
    totalSaved += c.savedBytes;
  }
  for (int64_t P : {8, 16, 32})
    for (int64_t M : {2, 8, 64})
      for (const char *schedule : {"gpipe", "1f1b"}) {
        StageSplitOptions options;
        options.stages = P;
        options.microBatches = M;
        options.schedule = schedule;
        options.sendSeconds = [](double bytes) { return 0.05 + 0.01 * bytes; };
        // About twice an even stage's memory.
        double held = options.schedule == "gpipe"
                          ? static_cast<double>(M)
                          : static_cast<double>(std::min(M, P));
        options.memoryLimit = 2 * (totalState + held * totalSaved) / P;
        auto start = std::chrono::steady_clock::now();
        std::optional<StageSplit> got = splitStages(layers, options);
        double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
        std::string where = "P=" + std::to_string(P) +
                            " M=" + std::to_string(M) + " " + schedule;
        ASSERT_TRUE(got) << where;
        EXPECT_TRUE(got->fits) << where;
        expectMatchesReference(*got, layers, options, where);
        double mine = evaluate(layers, got->starts, options).objective;

        std::vector<std::vector<size_t>> others;
        std::vector<size_t> even;
        for (int64_t s = 0; s < P; ++s)
          even.push_back(static_cast<size_t>(s * 100 / P));
        others.push_back(even);
        for (int k = 0; k < 200; ++k) {
          // Random starts: P - 1 distinct cuts out of 1..99.
          std::vector<size_t> cuts(99);
          for (size_t c = 0; c < cuts.size(); ++c)
            cuts[c] = c + 1;
          std::shuffle(cuts.begin(), cuts.end(), rng);
          std::vector<size_t> starts{0};
          starts.insert(starts.end(), cuts.begin(), cuts.begin() + (P - 1));
          std::sort(starts.begin(), starts.end());
          others.push_back(starts);
        }
        for (const std::vector<size_t> &starts : others) {
          Reference r = evaluate(layers, starts, options);
          if (r.largestMemory <= options.memoryLimit) {
            EXPECT_LE(mine, r.objective * (1 + 1e-9))
                << where << " beaten by " << describe(starts);
          }
        }
        std::printf("[ timing   ] L=100 %s: %.4f s\n", where.c_str(), seconds);
      }
}

// Interleaved: the layers go into P * V chunks (chunk c on device c mod P);
// the step is pipelineSeconds with V, a device's memory what its order
// holds of its chunks.
TEST(StageSplit, InterleavedSplitsIntoChunks) {
  std::vector<LayerCost> layers(8, layer(1.0, 1.0));
  StageSplitOptions options;
  options.stages = 2;
  options.microBatches = 4;
  options.schedule = "interleaved";
  options.virtualStages = 2;
  std::optional<StageSplit> got = splitStages(layers, options);
  ASSERT_TRUE(got);
  // Each device's chunks take 4 layers' time, as for chunks of 2 layers
  // each: 4/2 + (4 - 1/2) 4.
  EXPECT_DOUBLE_EQ(got->seconds, 8.0 / 2 + 3.5 * 4);
  // Of those splits the leanest: device 0's order holds at most (3, 2) or
  // (4, 1) micro-batches of its chunks 0 and 2, so a chunks of a and c
  // layers (a + c = 4) hold max(3a + 2c, 4a + c) bytes, least (9) at a = 1;
  // 2 + 2 would hold 10. Device 1 holds (2, 1) at most: 5 for 1 + 3.
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 1, 2, 5}));
  EXPECT_EQ(got->microBatchSeconds, (std::vector<double>{1, 1, 3, 3}));
  EXPECT_EQ(got->memoryBytes, (std::vector<double>{9, 5}));
  EXPECT_TRUE(got->fits);

  // Within 8 bytes device 0 can hold no 4 layers (9 at least), so its
  // chunks take 3 and device 1's 5: 8/2 + 3.5 * 5.
  options.memoryLimit = 8;
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->fits);
  EXPECT_DOUBLE_EQ(got->seconds, 8.0 / 2 + 3.5 * 5);
  EXPECT_LE(got->memoryBytes[0], 8);
  EXPECT_LE(got->memoryBytes[1], 8);

  // M must be a multiple of P, and every chunk needs a layer.
  options.memoryLimit = 0;
  options.microBatches = 3;
  EXPECT_FALSE(splitStages(layers, options));
  options.microBatches = 4;
  options.virtualStages = 5;
  EXPECT_FALSE(splitStages(layers, options));
  // Under another schedule virtualStages is ignored.
  options.schedule = "1f1b";
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts.size(), 2u);
}

// Interleaved, on random chains of 4 to 11 layers (P and V of 2 and 3, M
// of P, 2P and 4P; unlimited, a limit some splits meet, one none meets):
// within the exhaustive budget the split is the best of all (the least step
// of those that fit, or when none does the least largest memory, then the
// least step), with its own numbers. Forced to descend (no budget), the
// split is never slower than where it starts, the chunks' 1F1B split
// (checked unlimited, where that start is splitStages' 1F1B split of P V
// stages over M V micro-batches), nor better than the best; how far from
// the best it ends is printed.
TEST(StageSplit, InterleavedEqualsExhaustiveAndDescentImproves) {
  std::mt19937 rng(77);
  std::uniform_real_distribution<double> unit(0, 1);
  int exact = 0, descents = 0, descentsAtBest = 0, descentsFitting = 0,
      fittingCases = 0;
  double worstGap = 0;
  for (int trial = 0; trial < 60; ++trial) {
    for (int64_t P : {2, 3})
      for (int64_t V : {2, 3}) {
        size_t L = static_cast<size_t>(P * V) + trial % 6;
        std::vector<LayerCost> layers = randomLayers(rng, L, trial % 3 == 0);
        for (LayerCost &c : layers)
          c.transientBytes = unit(rng) * 10;
        std::function<double(double)> send;
        if (trial % 4 != 3) {
          double latency = unit(rng), perByte = unit(rng) * 0.5;
          send = [latency, perByte](double bytes) {
            return latency + perByte * bytes;
          };
        }
        std::vector<std::vector<size_t>> splits =
            allSplits(L, static_cast<size_t>(P * V));
        for (int64_t M : {P, 2 * P, 4 * P}) {
          std::vector<Reference> refs;
          std::vector<double> largest;
          for (const std::vector<size_t> &starts : splits) {
            refs.push_back(
                reference::evaluateInterleaved(layers, starts, P, V, M, send));
            largest.push_back(refs.back().largestMemory);
          }
          std::sort(largest.begin(), largest.end());
          for (double limit :
               {0.0, largest[largest.size() / 3], 0.9 * largest.front()}) {
            StageSplitOptions options;
            options.stages = P;
            options.virtualStages = V;
            options.microBatches = M;
            options.schedule = "interleaved";
            options.sendSeconds = send;
            options.memoryLimit = limit;
            std::string where =
                "trial " + std::to_string(trial) + " L=" + std::to_string(L) +
                " P=" + std::to_string(P) + " V=" + std::to_string(V) +
                " M=" + std::to_string(M) + " limit=" + std::to_string(limit);
            // The best of all splits, by the reference.
            auto fits = [&](const Reference &r) {
              return limit <= 0 || r.largestMemory <= limit * (1 + 1e-12);
            };
            const Reference *best = nullptr;
            for (const Reference &r : refs) {
              bool better =
                  !best || (fits(r) && !fits(*best)) ||
                  (fits(r) == fits(*best) &&
                   (fits(r)
                        ? r.objective < best->objective * (1 - 1e-12)
                        : r.largestMemory < best->largestMemory * (1 - 1e-12)));
              if (better)
                best = &r;
            }
            auto check = [&](const StageSplit &got, const std::string &how) {
              Reference mine = reference::evaluateInterleaved(
                  layers, got.starts, P, V, M, send);
              EXPECT_EQ(got.fits, fits(mine)) << where << how;
              EXPECT_NEAR(got.seconds, mine.seconds, 1e-9 * mine.seconds)
                  << where << how;
              EXPECT_EQ(got.microBatchSeconds.size(), got.starts.size());
              for (size_t c = 0; c < got.starts.size(); ++c)
                EXPECT_NEAR(got.microBatchSeconds[c], mine.micro[c],
                            1e-9 * (1 + mine.micro[c]))
                    << where << how;
              EXPECT_EQ(got.memoryBytes.size(), static_cast<size_t>(P));
              for (size_t d = 0; d < got.memoryBytes.size(); ++d)
                EXPECT_NEAR(got.memoryBytes[d], mine.memory[d],
                            1e-9 * (1 + mine.memory[d]))
                    << where << how;
              return mine;
            };

            std::optional<StageSplit> got = splitStages(layers, options);
            ASSERT_TRUE(got) << where;
            Reference mine = check(*got, " (exhaustive)");
            ++exact;
            EXPECT_EQ(fits(mine), fits(*best)) << where;
            if (fits(*best)) {
              EXPECT_NEAR(mine.objective, best->objective,
                          1e-9 * best->objective)
                  << where << " got " << describe(got->starts);
            } else {
              EXPECT_NEAR(mine.largestMemory, best->largestMemory,
                          1e-9 * best->largestMemory)
                  << where << " got " << describe(got->starts);
            }

            options.exhaustiveSplits = 0;
            std::optional<StageSplit> descended = splitStages(layers, options);
            ASSERT_TRUE(descended) << where;
            Reference down = check(*descended, " (descent)");
            ++descents;
            if (fits(*best)) {
              ++fittingCases;
              if (fits(down)) {
                ++descentsFitting;
                EXPECT_GE(down.objective, best->objective * (1 - 1e-9))
                    << where;
                double gap = down.objective / best->objective - 1;
                worstGap = std::max(worstGap, gap);
                descentsAtBest += gap <= 1e-9;
              }
            }
            if (limit <= 0) {
              StageSplitOptions chunked;
              chunked.stages = P * V;
              chunked.microBatches = M * V;
              chunked.schedule = "1f1b";
              chunked.sendSeconds = send;
              std::optional<StageSplit> start = splitStages(layers, chunked);
              ASSERT_TRUE(start) << where;
              Reference from = reference::evaluateInterleaved(
                  layers, start->starts, P, V, M, send);
              EXPECT_LE(down.objective, from.objective * (1 + 1e-9))
                  << where << " descended to " << describe(descended->starts)
                  << " from " << describe(start->starts);
            }
          }
        }
      }
  }
  // A heuristic's record on this seed, kept from regressing: measured
  // 1440 of 1440 fitting and 1220 at the best (worst 22.8% slower), all
  // misses under a limit few splits meet.
  EXPECT_EQ(descentsFitting, fittingCases);
  EXPECT_GE(descentsAtBest, fittingCases * 8 / 10);
  std::printf("[ checked  ] %d interleaved splits against enumeration; "
              "descent: %d of %d fit where a split does, %d of those reach "
              "the best, worst gap %.1f%%\n",
              exact, descentsFitting, fittingCases, descentsAtBest,
              100 * worstGap);
}

// pipelineSeconds with V: the fill through one chunk per device, then the
// slowest device's chunks for the rest.
TEST(StageSplit, InterleavedPipelineSeconds) {
  // Chunks 0..3: devices 0, 1, 0, 1 take 1 + 3 = 4 and 2 + 2 = 4.
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 2, 3, 2}, {0.5, 1}, 4, 2),
                   8.0 / 2 + (4 - 0.5) * 4 + 1);
  // Per-chunk step times add up per device.
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 1, 1, 1}, {1, 0, 1, 0.5}, 2, 2),
                   4.0 / 2 + 1.5 * 2 + 2);
  // V = 1 is the formula of GPipe and 1F1B.
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 2, 3}, {0.5, 0.25, 1}, 4, 1),
                   pipelineSeconds({1, 2, 3}, {0.5, 0.25, 1}, 4));
}

// A stage adds its layers' largest transient once (its units run one at a
// time), on top of its state and in-flight saved results: a big transient
// moves the cut under a limit.
TEST(StageSplit, TransientsCountOncePerStage) {
  std::vector<LayerCost> layers(4, layer(1, 1));
  layers[1].transientBytes = 6;
  layers[2].transientBytes = 2;
  StageSplitOptions options;
  options.stages = 2;
  options.microBatches = 2;
  options.schedule = "gpipe";
  std::optional<StageSplit> got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 2}));
  // Stage 0: 2 micro-batches * 2 bytes + max(0, 6); stage 1: 4 + 2.
  EXPECT_EQ(got->memoryBytes, (std::vector<double>{10, 6}));
  // Within 9 bytes: {0, 1} leaves stage 1 with 6 + 6 = 12, {0, 3} stage 0
  // with 6 + 6 = 12, and {0, 2} stage 0 with 10. Nothing fits, and the
  // leanest, {0, 2}, is returned.
  options.memoryLimit = 9;
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->fits);
  EXPECT_EQ(got->memoryBytes, (std::vector<double>{10, 6}));
  // Within 10 bytes the balanced split fits.
  options.memoryLimit = 10;
  got = splitStages(layers, options);
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->fits);
}
