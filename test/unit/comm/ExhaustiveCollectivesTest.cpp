//===- ExhaustiveCollectivesTest.cpp - Every layout pair, run for real ----===//
//
// The layout library's exhaustive test, executed by the runtime: for small
// meshes and tensors of rank 1 to 3, every ordered pair of valid layouts
// (partial sums included) is planned, and the plan runs on one thread per
// rank through CollectiveRunner and the threads communicator. The global
// tensor reconstructed from the ranks' final buffers under the target
// layout must equal the original exactly.
//
//===----------------------------------------------------------------------===//

#include "test/unit/comm/CommTestSupport.h"
#include "test/unit/layout/Simulator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ostream>

using namespace loom;
using namespace loom::layout;

namespace {

struct Config {
  std::vector<MeshAxis> axes;
  std::vector<int64_t> shape;
  rt::DType dtype;
};

std::string configName(const Config &c) {
  std::string s;
  for (const MeshAxis &a : c.axes)
    s += (s.empty() ? "" : "x") + std::to_string(a.size);
  s += "_rank" + std::to_string(c.shape.size()) + "_" + rt::dtypeName(c.dtype);
  return s;
}

void PrintTo(const Config &c, std::ostream *os) { *os << configName(c); }

class ExhaustiveCollectives : public ::testing::TestWithParam<Config> {};

/// One planned pair and every rank's buffer.
struct Job {
  size_t target;
  std::vector<commtest::Instruction> instructions;
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<std::string> errors;
};

} // namespace

// Proves that the runtime's collectives implement the planner's steps
// exactly: every plan between every two layouts of these meshes and ranks,
// executed on real per-rank buffers with real exchanges, reproduces the
// global tensor bit for bit.
TEST_P(ExhaustiveCollectives, EveryPairRoundTrips) {
  const Config &config = GetParam();
  std::string error;
  std::optional<Mesh> mesh = Mesh::create(config.axes, error);
  ASSERT_TRUE(mesh) << error;
  const std::vector<int64_t> &shape = config.shape;
  const int64_t n = mesh->numDevices();
  auto start = std::chrono::steady_clock::now();

  std::vector<TensorLayout> layouts = sim::enumerateLayouts(*mesh, shape);
  ASSERT_FALSE(layouts.empty());
  const sim::Tensor global = sim::makeGlobal(shape, 42);

  Planner planner(*mesh, shape,
                  static_cast<int64_t>(rt::dtypeSize(config.dtype)));
  std::vector<std::unique_ptr<rt::Communicator>> comms =
      rt::createThreadsCommunicators(n);
  std::vector<rt::CollectiveRunner> runners;
  for (int64_t r = 0; r < n; ++r)
    runners.emplace_back(*mesh, *comms[r]);
  commtest::RankPool pool(n);

  size_t pairs = 0, steps = 0, failures = 0;
  auto report = [&](const TensorLayout &s, const TensorLayout &t,
                    const std::string &what) {
    if (++failures <= 5)
      ADD_FAILURE() << s.toString(*mesh) << " -> " << t.toString(*mesh) << ": "
                    << what;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < layouts.size(); ++i) {
    // Plan and materialise this source's pairs on the main thread, run
    // them all on the rank threads, then check them here.
    const TensorLayout &source = layouts[i];
    jobs.clear();
    for (size_t j = 0; j < layouts.size(); ++j) {
      const TensorLayout &target = layouts[j];
      std::optional<RedistributionPlan> p = planner.plan(source, target, error);
      std::optional<std::vector<commtest::Instruction>> instructions;
      if (p)
        instructions = commtest::lowerPlan(*mesh, *p, shape, error);
      if (!instructions) {
        report(source, target, "no plan: " + error);
        continue;
      }
      Job job{j, std::move(*instructions), {}, std::vector<std::string>(n)};
      for (const std::vector<int64_t> &values :
           sim::materialize(*mesh, source, global, i * 7919 + j))
        job.buffers.push_back(commtest::encode(values, config.dtype));
      steps += job.instructions.size();
      jobs.push_back(std::move(job));
    }
    pool.run([&](int64_t rank) {
      for (Job &job : jobs)
        job.errors[rank] = commtest::runInstructions(
            runners[rank], job.instructions, config.dtype, job.buffers[rank]);
    });
    for (Job &job : jobs) {
      ++pairs;
      const TensorLayout &target = layouts[job.target];
      std::string failed;
      for (int64_t r = 0; r < n && failed.empty(); ++r)
        if (!job.errors[r].empty())
          failed = "rank " + std::to_string(r) + ": " + job.errors[r];
      if (!failed.empty()) {
        report(source, target, failed);
        continue;
      }
      sim::RankBuffers buffers;
      for (const std::vector<unsigned char> &bytes : job.buffers)
        buffers.push_back(commtest::decode(bytes, config.dtype));
      std::optional<sim::Tensor> out =
          sim::reconstruct(*mesh, target, shape, buffers, error);
      if (!out)
        report(source, target, "cannot reconstruct: " + error);
      else if (out->data != global.data)
        report(source, target, "wrong result");
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(pairs, layouts.size() * layouts.size());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("[ executed ] mesh %s shape rank %zu %s: %zu layouts, %zu "
              "pairs, %zu instructions on %lld threads; %.2f s\n",
              mesh->toString().c_str(), shape.size(),
              rt::dtypeName(config.dtype), layouts.size(), pairs, steps,
              static_cast<long long>(n), seconds);
}

namespace {

std::vector<Config> configs() {
  const std::vector<std::pair<std::vector<MeshAxis>, std::vector<int64_t>>>
      shapes = {{{{"a", 2}, {"b", 2}}, {8}},
                {{{"a", 2}, {"b", 2}}, {8, 4}},
                {{{"a", 2}, {"b", 2}}, {4, 8, 4}},
                {{{"a", 2}, {"b", 3}}, {12}},
                {{{"a", 2}, {"b", 3}}, {12, 6}},
                {{{"a", 2}, {"b", 3}}, {6, 12, 6}},
                {{{"a", 2}, {"b", 2}, {"c", 2}}, {8}},
                {{{"a", 2}, {"b", 2}, {"c", 2}}, {8, 8}},
                {{{"a", 2}, {"b", 2}, {"c", 2}}, {8, 8, 8}}};
  std::vector<Config> result;
  for (rt::DType dtype : {rt::DType::I64, rt::DType::F32}) {
    for (const auto &[axes, shape] : shapes)
      result.push_back(Config{axes, shape, dtype});
  }
  return result;
}

} // namespace

INSTANTIATE_TEST_SUITE_P(SmallMeshes, ExhaustiveCollectives,
                         ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config> &info) {
                           return configName(info.param);
                         });
