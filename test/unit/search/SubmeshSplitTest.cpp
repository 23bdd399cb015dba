//===- SubmeshSplitTest.cpp - Stages on submeshes against enumeration -----===//
//
// splitOnSubmeshes chooses each stage's layers and submesh shape together.
// Random small chains with two or three shapes are split by it and by
// enumerating every split and every assignment of shapes whose devices add
// up to the cluster's: the objectives must be equal, and the numbers
// returned must be those of the returned split. Hand cases: one shape is
// the uniform split, a heavy layer earns a larger submesh, the devices
// must add up.
//
//===----------------------------------------------------------------------===//

#include "compiler/search/StageSplit.h"
#include "test/unit/search/SplitReference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>

using namespace loom::search;

namespace {

using Evaluated = reference::Reference;

/// One split's numbers, stage s on shape assigned[s], recomputed
/// (SplitReference.h).
Evaluated evaluate(const std::vector<SubmeshShape> &shapes,
                   const std::vector<size_t> &starts,
                   const std::vector<size_t> &assigned,
                   const SubmeshSplitOptions &options) {
  return reference::evaluateSplit(
      [&](size_t s) -> const std::vector<LayerCost> & {
        return shapes[assigned[s]].layers;
      },
      starts, options.microBatches, options.schedule, options.sendSeconds);
}

/// Calls `visit(starts, shapes)` for every split of the layers into stages
/// with shapes whose devices add up to options.devices (with those of
/// options.stageShapes, when given).
void forEachSplit(
    const std::vector<SubmeshShape> &shapes, const SubmeshSplitOptions &options,
    const std::function<void(const std::vector<size_t> &,
                             const std::vector<size_t> &)> &visit) {
  const size_t L = shapes[0].layers.size();
  std::vector<size_t> starts, assigned;
  std::function<void(size_t, int64_t)> extend = [&](size_t first,
                                                    int64_t devicesLeft) {
    if (first == L) {
      if (devicesLeft == 0 &&
          (options.stageShapes.empty() || assigned == options.stageShapes))
        visit(starts, assigned);
      return;
    }
    for (size_t end = first + 1; end <= L; ++end)
      for (size_t k = 0; k < shapes.size(); ++k) {
        if (shapes[k].devices > devicesLeft)
          continue;
        starts.push_back(first);
        assigned.push_back(k);
        extend(end, devicesLeft - shapes[k].devices);
        starts.pop_back();
        assigned.pop_back();
      }
  };
  extend(0, options.devices);
}

/// Every split's largest memory, ascending: for limits between them.
std::vector<double> sortedMemories(const std::vector<SubmeshShape> &shapes,
                                   const SubmeshSplitOptions &options) {
  std::vector<double> memories;
  forEachSplit(shapes, options,
               [&](const std::vector<size_t> &starts,
                   const std::vector<size_t> &assigned) {
                 memories.push_back(
                     evaluate(shapes, starts, assigned, options).largestMemory);
               });
  std::sort(memories.begin(), memories.end());
  return memories;
}

/// The least objective over the splits within the memory limit; +inf when
/// none is.
double leastObjective(const std::vector<SubmeshShape> &shapes,
                      const SubmeshSplitOptions &options) {
  double best = std::numeric_limits<double>::infinity();
  forEachSplit(shapes, options,
               [&](const std::vector<size_t> &starts,
                   const std::vector<size_t> &assigned) {
                 Evaluated e = evaluate(shapes, starts, assigned, options);
                 if (options.memoryLimit <= 0 ||
                     e.largestMemory <= options.memoryLimit * (1 + 1e-12))
                   best = std::min(best, e.objective);
               });
  return best;
}

/// `n` layers per shape; a shape with more devices runs each layer faster
/// by a random factor (at most linearly) and holds less of it.
std::vector<SubmeshShape> randomShapes(std::mt19937 &rng, size_t n,
                                       const std::vector<int64_t> &devices,
                                       bool integral) {
  std::uniform_real_distribution<double> unit(0, 1);
  auto value = [&](double scale) {
    return integral ? std::floor(unit(rng) * 4) * scale : unit(rng) * scale;
  };
  std::vector<LayerCost> base(n);
  for (size_t l = 0; l < n; ++l) {
    LayerCost &c = base[l];
    c.name = "layer" + std::to_string(l);
    c.microBatchSeconds = value(4) + (integral ? 1 : 0.1);
    c.stepSeconds = value(1);
    c.stateBytes = value(40);
    c.savedBytes = value(40);
    c.transientBytes = value(20);
    c.forwardBytes = unit(rng) < 0.2 ? 0 : value(32);
    c.backwardBytes = unit(rng) < 0.2 ? 0 : value(32);
  }
  std::vector<SubmeshShape> shapes;
  for (int64_t d : devices) {
    SubmeshShape shape;
    shape.name = "d" + std::to_string(d);
    shape.devices = d;
    for (const LayerCost &b : base) {
      LayerCost c = b;
      double speedup = 1 + (static_cast<double>(d) - 1) * unit(rng);
      c.microBatchSeconds /= speedup;
      c.stepSeconds /= speedup;
      c.stateBytes /= static_cast<double>(d);
      c.savedBytes /= static_cast<double>(d);
      c.transientBytes /= static_cast<double>(d);
      c.forwardBytes /= static_cast<double>(d);
      c.backwardBytes /= static_cast<double>(d);
      shape.layers.push_back(c);
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

LayerCost layer(const std::string &name, double micro) {
  LayerCost c;
  c.name = name;
  c.microBatchSeconds = micro;
  return c;
}

} // namespace

// The acceptance check: on random chains of up to 7 layers, shapes of
// {1, 2}, {1, 2, 4} and {2, 3} devices on clusters of 4 to 6, GPipe and
// 1F1B, 1 to 8 micro-batches, with no memory limit and with limits that
// exclude some or all splits, the split's objective equals the least over
// every memory-feasible split and assignment, and its numbers are its own.
TEST(SubmeshSplit, EqualsExhaustiveOnRandomChains) {
  std::mt19937 rng(7);
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> clusters = {
      {{1, 2}, 4}, {{1, 2, 4}, 4}, {{2, 3}, 5}, {{1, 2}, 6}, {{2, 4}, 6}};
  int checked = 0, infeasible = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const auto &[devices, total] = clusters[trial % clusters.size()];
    size_t n = 2 + static_cast<size_t>(trial % 6);
    std::vector<SubmeshShape> shapes =
        randomShapes(rng, n, devices, trial % 3 == 0);
    SubmeshSplitOptions options;
    options.devices = total;
    options.microBatches = 1 + trial % 8;
    options.schedule = trial % 2 ? "1f1b" : "gpipe";
    if (trial % 4 == 1)
      options.sendSeconds = [](double bytes) { return 0.05 + bytes / 64; };
    std::vector<double> memories = sortedMemories(shapes, options);
    int limitCase = trial % 3;
    if (limitCase == 1 && !memories.empty())
      options.memoryLimit = memories[memories.size() / 3];
    if (limitCase == 2 && !memories.empty())
      options.memoryLimit = memories.front() * 0.999;
    double best = leastObjective(shapes, options);
    std::string where = "trial " + std::to_string(trial);
    std::optional<SubmeshSplit> got = splitOnSubmeshes(shapes, options);
    if (std::isinf(best)) {
      EXPECT_FALSE(got) << where;
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(got) << where;
    ASSERT_EQ(got->starts.size(), got->shapes.size()) << where;
    ASSERT_FALSE(got->starts.empty()) << where;
    EXPECT_EQ(got->starts[0], 0u) << where;
    int64_t used = 0;
    for (size_t s = 0; s < got->starts.size(); ++s) {
      if (s) {
        EXPECT_LT(got->starts[s - 1], got->starts[s]) << where;
      }
      ASSERT_LT(got->shapes[s], shapes.size()) << where;
      used += shapes[got->shapes[s]].devices;
    }
    EXPECT_EQ(used, total) << where;
    Evaluated e = evaluate(shapes, got->starts, got->shapes, options);
    EXPECT_NEAR(e.objective, best, 1e-9 * (1 + best)) << where;
    if (options.memoryLimit > 0) {
      EXPECT_LE(e.largestMemory, options.memoryLimit * (1 + 1e-12)) << where;
    }
    ASSERT_EQ(got->microBatchSeconds.size(), got->starts.size()) << where;
    for (size_t s = 0; s < got->starts.size(); ++s) {
      EXPECT_NEAR(got->microBatchSeconds[s], e.micro[s],
                  1e-9 * (1 + e.micro[s]))
          << where;
      EXPECT_NEAR(got->stepSeconds[s], e.step[s], 1e-9 * (1 + e.step[s]))
          << where;
      EXPECT_NEAR(got->memoryBytes[s], e.memory[s], 1e-9 * (1 + e.memory[s]))
          << where;
    }
    EXPECT_NEAR(got->seconds, e.seconds, 1e-9 * (1 + e.seconds)) << where;
    ++checked;
  }
  // Both outcomes occur.
  EXPECT_GT(checked, 150);
  EXPECT_GT(infeasible, 20);
}

// With the stages' shapes given (--stage-meshes), only the layers are
// chosen: against enumerating the splits with that assignment, on random
// chains and random orders of shapes adding up to the cluster, under
// limits as above.
TEST(SubmeshSplit, GivenShapesEqualExhaustive) {
  std::mt19937 rng(13);
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> clusters = {
      {{1, 2}, 4}, {{1, 2, 4}, 7}, {{2, 3}, 5}, {{1, 2}, 5}};
  int checked = 0, infeasible = 0;
  for (int trial = 0; trial < 160; ++trial) {
    const auto &[devices, total] = clusters[trial % clusters.size()];
    size_t n = 3 + static_cast<size_t>(trial % 5);
    std::vector<SubmeshShape> shapes =
        randomShapes(rng, n, devices, trial % 3 == 0);
    SubmeshSplitOptions options;
    options.devices = total;
    options.microBatches = 1 + trial % 6;
    options.schedule = trial % 2 ? "1f1b" : "gpipe";
    if (trial % 4 == 1)
      options.sendSeconds = [](double bytes) { return 0.05 + bytes / 64; };
    // A random order of shapes that adds up, with at most n stages.
    std::vector<size_t> order;
    for (int64_t left = total; left > 0;) {
      std::vector<size_t> fit;
      for (size_t k = 0; k < shapes.size(); ++k)
        if (shapes[k].devices <= left)
          fit.push_back(k);
      if (fit.empty())
        break;
      order.push_back(fit[rng() % fit.size()]);
      left -= shapes[order.back()].devices;
    }
    // Orders that do not add up (a remainder below the smallest shape), or
    // with more stages than layers, are refused.
    int64_t used = 0;
    for (size_t k : order)
      used += shapes[k].devices;
    options.stageShapes = order;
    if (used != total || order.size() > n) {
      EXPECT_FALSE(splitOnSubmeshes(shapes, options)) << trial;
      continue;
    }
    // The enumeration keeps to options.stageShapes.
    std::vector<double> memories = sortedMemories(shapes, options);
    if (trial % 3 == 1)
      options.memoryLimit = memories[memories.size() / 2];
    if (trial % 3 == 2)
      options.memoryLimit = memories.front() * 0.999;
    double best = leastObjective(shapes, options);
    std::string where = "trial " + std::to_string(trial);
    std::optional<SubmeshSplit> got = splitOnSubmeshes(shapes, options);
    if (std::isinf(best)) {
      EXPECT_FALSE(got) << where;
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(got) << where;
    EXPECT_EQ(got->shapes, order) << where;
    Evaluated e = evaluate(shapes, got->starts, got->shapes, options);
    EXPECT_NEAR(e.objective, best, 1e-9 * (1 + best)) << where;
    EXPECT_NEAR(got->seconds, e.seconds, 1e-9 * (1 + e.seconds)) << where;
    ++checked;
  }
  EXPECT_GT(checked, 60);
  EXPECT_GT(infeasible, 10);
}

// With one shape of N / P devices the split is the uniform one: P stages,
// the objective splitStages finds.
TEST(SubmeshSplit, OneShapeIsTheUniformSplit) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<SubmeshShape> shapes = randomShapes(rng, 9, {2}, false);
    SubmeshSplitOptions options;
    options.devices = 2 * (1 + trial % 4);
    options.microBatches = 1 + trial % 6;
    options.schedule = trial % 2 ? "1f1b" : "gpipe";
    std::optional<SubmeshSplit> got = splitOnSubmeshes(shapes, options);
    StageSplitOptions uniform;
    uniform.stages = options.devices / 2;
    uniform.microBatches = options.microBatches;
    uniform.schedule = options.schedule;
    std::optional<StageSplit> want = splitStages(shapes[0].layers, uniform);
    ASSERT_TRUE(got && want) << trial;
    EXPECT_EQ(got->starts, want->starts) << trial;
    EXPECT_EQ(got->shapes, std::vector<size_t>(want->starts.size(), 0))
        << trial;
    EXPECT_NEAR(got->seconds, want->seconds, 1e-9 * (1 + want->seconds))
        << trial;
  }
}

// Eight blocks that gain little from a second device (1 s on one, 0.8 s on
// two) and a head that halves (4 s, 2 s), on 6 devices with shapes of 1
// and 2: four 1-device stages of two blocks and the head alone on 2 devices
// make every stage 2 s, which neither uniform pipeline can.
TEST(SubmeshSplit, HeavyLayerEarnsALargerSubmesh) {
  SubmeshShape one{"dp=1", 1, {}, nullptr}, two{"dp=2", 2, {}, nullptr};
  for (int l = 0; l < 8; ++l) {
    one.layers.push_back(layer("block" + std::to_string(l), 1));
    two.layers.push_back(layer("block" + std::to_string(l), 0.8));
  }
  one.layers.push_back(layer("head", 4));
  two.layers.push_back(layer("head", 2));
  SubmeshSplitOptions options;
  options.devices = 6;
  options.microBatches = 16;
  std::optional<SubmeshSplit> got = splitOnSubmeshes({one, two}, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(got->shapes, (std::vector<size_t>{0, 0, 0, 0, 1}));
  // sum 10 + 15 * the slowest, 2.
  EXPECT_DOUBLE_EQ(got->seconds, 40);
  // The uniform pipelines: 6 stages of 1 device (the head alone takes 4),
  // 3 of 2 devices (8 * 0.8 + 2 over three stages: the slowest takes 3.2
  // or 3.6).
  StageSplitOptions six, three;
  six.stages = 6;
  six.microBatches = three.microBatches = 16;
  three.stages = 3;
  EXPECT_DOUBLE_EQ(splitStages(one.layers, six)->seconds, 12 + 15 * 4);
  EXPECT_NEAR(splitStages(two.layers, three)->seconds, 8.4 + 15 * 3.2, 1e-9);
}

// A stage's sends cost what its own shape says (its ranks' distance to the
// next stage's is its own size): layer a's forward sends 1 byte, at 10 s a
// message from a stage of 1 device and 0.5 s from one of 2 (the options'
// function, as shape two has none). On 3 devices, a on the pair and b on
// the single device: stage 0 takes 1 + 0.5, stage 1 takes 1, one
// micro-batch.
TEST(SubmeshSplit, EachShapeSendsAtItsOwnCost) {
  SubmeshShape one{"dp=1", 1, {layer("a", 1), layer("b", 1)}, nullptr};
  SubmeshShape two{"dp=2", 2, {layer("a", 1), layer("b", 1)}, nullptr};
  one.layers[0].forwardBytes = two.layers[0].forwardBytes = 1;
  one.sendSeconds = [](double) { return 10.0; };
  SubmeshSplitOptions options;
  options.devices = 3;
  options.sendSeconds = [](double) { return 0.5; };
  std::optional<SubmeshSplit> got = splitOnSubmeshes({one, two}, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->starts, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(got->shapes, (std::vector<size_t>{1, 0}));
  EXPECT_DOUBLE_EQ(got->seconds, 2.5);
  // With the slow sends the pair's, a goes on the single device.
  one.sendSeconds = nullptr;
  two.sendSeconds = [](double) { return 10.0; };
  got = splitOnSubmeshes({one, two}, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->shapes, (std::vector<size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(got->seconds, 2.5);
}

// The devices must add up: no split of 5 devices into shapes of 2, and
// shapes that disagree on the layers have none either.
TEST(SubmeshSplit, InvalidProblemsHaveNoSplit) {
  SubmeshShape two{"dp=2", 2, {layer("a", 1), layer("b", 1)}, nullptr};
  SubmeshSplitOptions options;
  options.devices = 5;
  EXPECT_FALSE(splitOnSubmeshes({two}, options));
  options.devices = 4;
  EXPECT_TRUE(splitOnSubmeshes({two}, options));
  SubmeshShape other{"dp=1", 1, {layer("a", 1), layer("c", 1)}, nullptr};
  EXPECT_FALSE(splitOnSubmeshes({two, other}, options));
  // 8 devices of 2 need 4 stages, more than the 2 layers.
  options.devices = 8;
  EXPECT_FALSE(splitOnSubmeshes({two}, options));
}

// GPT-3's scale: 98 layers, stages of 32, 64 or 128 of 1024 devices, 96
// micro-batches, under a memory limit. The mix is never worse than the best
// uniform pipeline of any one shape (each is one of the splits it weighs),
// and its numbers are its own. Prints the time the split took.
TEST(SubmeshSplit, GptScaleIsNoWorseThanUniform) {
  std::mt19937 rng(5);
  std::vector<SubmeshShape> shapes =
      randomShapes(rng, 98, {32, 64, 128}, /*integral=*/false);
  SubmeshSplitOptions options;
  options.devices = 1024;
  options.microBatches = 96;
  options.sendSeconds = [](double bytes) { return 0.01 + bytes / 1e4; };
  double total = 0;
  for (const LayerCost &c : shapes[0].layers)
    total += c.stateBytes + 32 * c.savedBytes;
  options.memoryLimit = 2 * total / 32;
  auto start = std::chrono::steady_clock::now();
  std::optional<SubmeshSplit> got = splitOnSubmeshes(shapes, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_TRUE(got);
  Evaluated mine = evaluate(shapes, got->starts, got->shapes, options);
  EXPECT_NEAR(got->seconds, mine.seconds, 1e-9 * mine.seconds);
  EXPECT_LE(mine.largestMemory, options.memoryLimit * (1 + 1e-12));
  int uniformFits = 0;
  for (const SubmeshShape &shape : shapes) {
    StageSplitOptions uniform;
    uniform.stages = options.devices / shape.devices;
    uniform.microBatches = options.microBatches;
    uniform.memoryLimit = options.memoryLimit;
    uniform.sendSeconds = options.sendSeconds;
    std::optional<StageSplit> split = splitStages(shape.layers, uniform);
    ASSERT_TRUE(split);
    if (!split->fits)
      continue;
    ++uniformFits;
    double objective =
        split->seconds -
        *std::max_element(split->stepSeconds.begin(), split->stepSeconds.end());
    EXPECT_LE(mine.objective, objective * (1 + 1e-9)) << shape.name;
  }
  EXPECT_GT(uniformFits, 0);
  std::printf("[ timing   ] 98 layers, 3 shapes, 1024 devices, M=96: %.3f s, "
              "%zu stages\n",
              seconds, got->starts.size());
}
