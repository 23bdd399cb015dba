//===- ExhaustiveRedistributionTest.cpp - Every layout pair, simulated ----===//
//
// For small meshes and tensors of rank 1 to 3, enumerates every valid
// layout and, for every ordered (source, target) pair, plans the
// redistribution, executes it on simulated per-rank buffers and checks the
// reconstructed global tensor is exactly the original.
//
//===----------------------------------------------------------------------===//

#include "common/layout/Redistribution.h"
#include "test/unit/layout/Simulator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ostream>

using namespace loom::layout;

namespace {

struct Config {
  std::vector<MeshAxis> axes;
  std::vector<int64_t> shape;
  /// Hand-derived: sum over k axes on dimensions of C(m,k) * r(r+1)..(r+k-1)
  /// orderings * 2^(m-k) (unused or partial for the rest).
  size_t expectedLayouts;
};

std::string configName(const Config &c) {
  std::string s;
  for (const MeshAxis &a : c.axes)
    s += (s.empty() ? "" : "x") + std::to_string(a.size);
  s += "_rank" + std::to_string(c.shape.size());
  return s;
}

/// Lets gtest name a config readably in failure messages.
void PrintTo(const Config &c, std::ostream *os) { *os << configName(c); }

class ExhaustiveRedistribution : public ::testing::TestWithParam<Config> {};

} // namespace

// Proves completeness and correctness of the planner on this mesh and rank:
// every ordered pair of valid layouts gets a plan that reaches the target,
// (with the cached planner equal to a fresh search), whose simulated
// execution reproduces the global tensor exactly, whose
// cost is the sum of its steps' costs, and which never moves more bytes
// than the naive gather-everything plan.
TEST_P(ExhaustiveRedistribution, EveryPairRoundTrips) {
  const Config &config = GetParam();
  std::string error;
  std::optional<Mesh> mesh = Mesh::create(config.axes, error);
  ASSERT_TRUE(mesh) << error;
  const std::vector<int64_t> &shape = config.shape;
  const int64_t elementBytes = 4;
  auto start = std::chrono::steady_clock::now();

  std::vector<TensorLayout> layouts = sim::enumerateLayouts(*mesh, shape);
  ASSERT_EQ(layouts.size(), config.expectedLayouts);
  const sim::Tensor global = sim::makeGlobal(shape, 42);

  // One cached search per source; every 17th pair is re-planned from
  // scratch by the free function, which must give the identical plan.
  Planner planner(*mesh, shape, elementBytes);
  size_t pairs = 0, failures = 0, maxSteps = 0;
  double plannedBytes = 0, naiveBytes = 0;
  auto report = [&](const TensorLayout &s, const TensorLayout &t,
                    const std::string &what) {
    if (++failures <= 5)
      ADD_FAILURE() << s.toString(*mesh) << " -> " << t.toString(*mesh) << ": "
                    << what;
  };
  for (size_t i = 0; i < layouts.size(); ++i) {
    for (size_t j = 0; j < layouts.size(); ++j) {
      const TensorLayout &source = layouts[i], &target = layouts[j];
      ++pairs;
      std::optional<RedistributionPlan> p = planner.plan(source, target, error);
      if (p && pairs % 17 == 0) {
        std::optional<RedistributionPlan> fresh =
            plan(*mesh, source, target, shape, elementBytes, error);
        if (!fresh || !(fresh->steps == p->steps))
          report(source, target, "a fresh search planned differently");
      }
      std::optional<RedistributionPlan> naive =
          naivePlan(*mesh, source, target, shape, elementBytes, error);
      if (!p || !naive) {
        report(source, target, "no plan: " + error);
        continue;
      }
      maxSteps = std::max(maxSteps, p->steps.size());
      plannedBytes += p->cost.bytes;
      naiveBytes += naive->cost.bytes;
      if (p->cost.bytes > naive->cost.bytes + 1e-9)
        report(source, target,
               "costlier than naive:\n" + p->toString(*mesh, shape));
      double sum = 0;
      TensorLayout layout = source;
      for (const Step &step : p->steps) {
        sum += stepBytes(*mesh, layout, step, shape, elementBytes);
        layout = *applyStep(*mesh, layout, step, shape, error);
      }
      if (std::abs(sum - p->cost.bytes) > 1e-9)
        report(source, target, "cost is not the sum of its steps");
      uint64_t seed = i * 7919 + j;
      for (const RedistributionPlan *q : {&*p, &*naive}) {
        std::optional<sim::Tensor> out =
            sim::simulatePlan(*mesh, *q, global, seed, error);
        if (!out)
          report(source, target,
                 "simulation failed: " + error + "\n" +
                     q->toString(*mesh, shape));
        else if (out->data != global.data)
          report(source, target, "wrong result:\n" + q->toString(*mesh, shape));
      }
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(pairs, layouts.size() * layouts.size());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("[ layouts  ] mesh %s shape rank %zu: %zu layouts, %zu pairs, "
              "longest plan %zu steps; bytes planned %.0f vs naive %.0f "
              "(%.1f%%); %.2f s\n",
              mesh->toString().c_str(), shape.size(), layouts.size(), pairs,
              maxSteps, plannedBytes, naiveBytes,
              naiveBytes > 0 ? 100.0 * plannedBytes / naiveBytes : 0.0,
              seconds);
}

INSTANTIATE_TEST_SUITE_P(
    SmallMeshes, ExhaustiveRedistribution,
    ::testing::Values(Config{{{"a", 2}, {"b", 2}}, {8}, 10},
                      Config{{{"a", 2}, {"b", 2}}, {8, 4}, 18},
                      Config{{{"a", 2}, {"b", 2}}, {4, 8, 4}, 28},
                      Config{{{"a", 2}, {"b", 3}}, {12}, 10},
                      Config{{{"a", 2}, {"b", 3}}, {12, 6}, 18},
                      Config{{{"a", 2}, {"b", 3}}, {6, 12, 6}, 28},
                      Config{{{"a", 2}, {"b", 2}, {"c", 2}}, {8}, 38},
                      Config{{{"a", 2}, {"b", 2}, {"c", 2}}, {8, 8}, 92},
                      Config{{{"a", 2}, {"b", 2}, {"c", 2}}, {8, 8, 8}, 176}),
    [](const ::testing::TestParamInfo<Config> &info) {
      return configName(info.param);
    });
