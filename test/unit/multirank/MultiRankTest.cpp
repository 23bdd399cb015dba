//===- MultiRankTest.cpp - Partitioned plans on N ranks -------------------===//
//
// Runs hand-built partitioned plans on 2 and 4 ranks of the threads
// communicator and compares them with the equivalent single-device plans.
// The data are small multiples of 1/4, so every product and sum is exact in
// f32 and any summation order gives the same bits: results are compared for
// equality, and a test fails on any slicing or gathering mistake.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilder.h"
#include "StagedBackend.h"

#include "runtime/Checkpoint.h"
#include "runtime/io/Trace.h"
#include "test/unit/support/Oracle.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

using namespace loom;
using namespace loom::test;

namespace {

using Axes = std::vector<std::pair<std::string, int64_t>>;

/// A single-device executor of `plan` on a one-thread CPU backend.
struct Single {
  explicit Single(plan::Plan plan) : backend(createTestBackend()) {
    backend->setNumThreads(1);
    exec = rt::Executor::create(std::move(plan), *backend, error);
  }
  std::unique_ptr<rt::Backend> backend;
  std::unique_ptr<rt::Executor> exec;
  std::string error;
};

/// Runs `plan` with input `x` on one device, returns output `out`.
std::vector<float> runOnOneDevice(const plan::Plan &plan, std::vector<float> x,
                                  rt::Shape shape,
                                  const std::string &out = "y") {
  Single single(plan);
  EXPECT_TRUE(single.exec) << single.error;
  if (!single.exec)
    return {};
  std::string error;
  EXPECT_TRUE(single.exec->setInput("x", viewOf(x, shape), error)) << error;
  EXPECT_TRUE(single.exec->run(error)) << error;
  return values(single.exec->output(out));
}

/// Runs `plan` on `n` ranks with the global input `x`; returns every rank's
/// output `out`.
std::vector<std::vector<float>> runOnRanks(const plan::Plan &plan, int64_t n,
                                           std::vector<float> x,
                                           rt::Shape shape,
                                           const std::string &out = "y") {
  std::vector<std::vector<float>> outputs(n);
  std::string error = runRanks(plan, n, [&](RankRun &run) {
    std::string e;
    EXPECT_TRUE(run.exec->setInput("x", viewOf(x, shape), e)) << e;
    EXPECT_TRUE(run.exec->run(e)) << "rank " << run.rank << ": " << e;
    outputs[run.rank] = values(run.exec->output(out));
  });
  EXPECT_EQ(error, "");
  return outputs;
}

//===----------------------------------------------------------------------===//
// Data parallel: x split on the batch, W replicated, y gathered.
//===----------------------------------------------------------------------===//

plan::Plan dataParallelMatmul(int64_t dp) {
  PlanBuilder b(dp ? Axes{{"dp", dp}} : Axes{});
  DimAxes rows = dp ? DimAxes{{"dp"}, {}} : DimAxes{};
  int32_t x = b.input("x", {8, 4}, rows);
  int32_t w = b.parameter("w", {4, 3}, iota(12, 0.25f, -1.5f));
  int32_t y = b.temp({8, 3}, rows);
  b.instruction("matmul", {x, w}, {y}, "fc");
  if (dp)
    y = b.allGather(y, /*axis=*/0, /*dim=*/0, {8, 3});
  b.output("y", y);
  return b.plan();
}

// Proves the data-parallel split: every rank computes its rows and the
// gathered result equals the single-device matmul on every rank.
TEST(MultiRank, DataParallelMatmulMatchesOneDevice) {
  std::vector<float> x = iota(32, 0.25f, -4);
  std::vector<float> expected =
      runOnOneDevice(dataParallelMatmul(0), x, {8, 4});
  ASSERT_EQ(expected.size(), 24u);
  for (int64_t n : {2, 4})
    for (const std::vector<float> &y :
         runOnRanks(dataParallelMatmul(n), n, x, {8, 4}))
      EXPECT_EQ(y, expected) << n << " ranks";
}

//===----------------------------------------------------------------------===//
// Contracting dimension split: partial sums, then all_reduce.
//===----------------------------------------------------------------------===//

plan::Plan contractingSplitMatmul(int64_t tp) {
  PlanBuilder b(tp ? Axes{{"tp", tp}} : Axes{});
  DimAxes cols = tp ? DimAxes{{}, {"tp"}} : DimAxes{};
  DimAxes rows = tp ? DimAxes{{"tp"}, {}} : DimAxes{};
  int32_t x = b.input("x", {4, 8}, cols);
  int32_t w = b.parameter("w", {8, 3}, iota(24, 0.25f, -3), rows);
  int32_t y =
      b.temp({4, 3}, {},
             tp ? std::vector<std::string>{"tp"} : std::vector<std::string>{});
  b.instruction("matmul", {x, w}, {y}, "fc");
  if (tp)
    y = b.allReduce(y, {0}, {4, 3});
  b.output("y", y);
  return b.plan();
}

// Proves parameter slicing on the contracting dimension and the partial
// sum: the all_reduced result equals the single-device matmul.
TEST(MultiRank, ContractingSplitAllReduceMatchesOneDevice) {
  std::vector<float> x = iota(32, -0.25f, 3);
  std::vector<float> expected =
      runOnOneDevice(contractingSplitMatmul(0), x, {4, 8});
  for (int64_t n : {2, 4})
    for (const std::vector<float> &y :
         runOnRanks(contractingSplitMatmul(n), n, x, {4, 8}))
      EXPECT_EQ(y, expected) << n << " ranks";
}

// Proves a 2-D mesh: x split on rows over dp and columns over tp, W on rows
// over tp; all_reduce over tp (axis 1) then all_gather over dp (axis 0).
TEST(MultiRank, TwoDimensionalMeshMatchesOneDevice) {
  auto build = [](bool split) {
    PlanBuilder b(split ? Axes{{"dp", 2}, {"tp", 2}} : Axes{});
    int32_t x =
        b.input("x", {8, 8}, split ? DimAxes{{"dp"}, {"tp"}} : DimAxes{});
    int32_t w = b.parameter("w", {8, 6}, iota(48, 0.25f, -5),
                            split ? DimAxes{{"tp"}, {}} : DimAxes{});
    int32_t y = b.temp({8, 6}, split ? DimAxes{{"dp"}, {}} : DimAxes{},
                       split ? std::vector<std::string>{"tp"}
                             : std::vector<std::string>{});
    b.instruction("matmul", {x, w}, {y});
    if (split) {
      y = b.allReduce(y, {1}, {8, 6}, {{"dp"}, {}});
      y = b.allGather(y, 0, 0, {8, 6});
    }
    b.output("y", y);
    return b.plan();
  };
  std::vector<float> x = iota(64, 0.25f, -8);
  std::vector<float> expected = runOnOneDevice(build(false), x, {8, 8});
  for (const std::vector<float> &y : runOnRanks(build(true), 4, x, {8, 8}))
    EXPECT_EQ(y, expected);
}

//===----------------------------------------------------------------------===//
// reduce_scatter
//===----------------------------------------------------------------------===//

// Proves reduce_scatter: every rank holds the replicated x, so the sum over
// n ranks is n * x; each keeps its column chunk, and gathering the chunks
// back gives n * x everywhere.
TEST(MultiRank, ReduceScatterSumsAndScatters) {
  for (int64_t n : {2, 4}) {
    PlanBuilder b({{"tp", n}});
    int32_t x = b.input("x", {4, 8});
    int32_t s = b.reduceScatter(x, 0, 1, {4, 8}, {{}, {"tp"}});
    b.output("y", b.allGather(s, 0, 1, {4, 8}));
    std::vector<float> input = iota(32, 0.5f, -7);
    std::vector<float> expected = input;
    for (float &v : expected)
      v *= static_cast<float>(n);
    for (const std::vector<float> &y : runOnRanks(b.plan(), n, input, {4, 8}))
      EXPECT_EQ(y, expected) << n << " ranks";
  }
}

//===----------------------------------------------------------------------===//
// Load-time slicing, gatherState, setStateFromGlobal
//===----------------------------------------------------------------------===//

/// The block [r0, r0 + rows) x [c0, c0 + cols) of a row-major matrix with
/// `width` columns: computed here by hand, independently of PlanLayout.
std::vector<float> block(const std::vector<float> &m, int64_t width, int64_t r0,
                         int64_t rows, int64_t c0, int64_t cols) {
  std::vector<float> out;
  for (int64_t r = r0; r < r0 + rows; ++r)
    for (int64_t c = c0; c < c0 + cols; ++c)
      out.push_back(m[r * width + c]);
  return out;
}

// Proves that every rank of a [dp=2, tp=2] mesh holds exactly its block of
// each parameter (split on both dims, two axes on one dim, replicated, and a
// partial sum held by the dp=0 ranks), that gatherState reassembles the
// global tensors on every rank, and that setStateFromGlobal round-trips.
TEST(MultiRank, ParameterSlicingAndGatherStateRoundTrip) {
  std::vector<float> a = iota(8 * 6, 1, 0), c = iota(8 * 2, 0.5f, 1),
                     d = iota(6, 2, -3), p = iota(4 * 2, 1, 10);
  PlanBuilder b({{"dp", 2}, {"tp", 2}});
  b.parameter("a", {8, 6}, a, {{"dp"}, {"tp"}});
  b.parameter("c", {8, 2}, c, {{"tp", "dp"}, {}});
  b.parameter("d", {6}, d);
  b.parameter("p", {4, 2}, p, {{}, {}}, {"dp"});
  std::string error = runRanks(b.plan(), 4, [&](RankRun &run) {
    rt::Executor &exec = *run.exec;
    int64_t dpc = run.rank / 2, tpc = run.rank % 2;
    const std::vector<rt::StateInfo> &state = exec.state();
    ASSERT_EQ(state.size(), 4u);
    EXPECT_EQ(state[0].shape, (rt::Shape{8, 6})) << "global shapes reported";
    EXPECT_EQ(values(exec.stateTensor(state[0])),
              block(a, 6, dpc * 4, 4, tpc * 3, 3));
    // [[tp, dp], []]: tp outermost, so the shard index is tp * 2 + dp.
    EXPECT_EQ(values(exec.stateTensor(state[1])),
              block(c, 2, (tpc * 2 + dpc) * 2, 2, 0, 2));
    EXPECT_EQ(values(exec.stateTensor(state[2])), d);
    EXPECT_EQ(values(exec.stateTensor(state[3])),
              dpc == 0 ? p : std::vector<float>(8, 0.0f));

    std::vector<std::vector<float>> globals = {a, c, d, p};
    for (size_t i = 0; i < state.size(); ++i) {
      rt::HostBuffer g;
      std::string e;
      ASSERT_TRUE(exec.gatherState(state[i], g, e)) << e;
      EXPECT_EQ(g.shape, state[i].shape);
      EXPECT_EQ(values(g.view()), globals[i]) << state[i].name;
    }
    // Resume from other global values, then gather them back.
    std::vector<float> a2 = iota(48, -1, 100);
    std::string e;
    ASSERT_TRUE(exec.setStateFromGlobal(state[0], viewOf(a2, {8, 6}), e)) << e;
    EXPECT_EQ(values(exec.stateTensor(state[0])),
              block(a2, 6, dpc * 4, 4, tpc * 3, 3));
    rt::HostBuffer g;
    ASSERT_TRUE(exec.gatherState(state[0], g, e)) << e;
    EXPECT_EQ(values(g.view()), a2);
    std::vector<float> wrong(48);
    EXPECT_FALSE(exec.setStateFromGlobal(state[0], viewOf(wrong, {6, 8}), e));
    EXPECT_EQ(e, "'a' has shape [8, 6], got [6, 8]");
  });
  EXPECT_EQ(error, "");
}

// Proves seeded initialisation on the global index: each rank's shard of a
// split parameter equals the matching block of the single-device init, and
// gathering gives the single-device tensor bit for bit.
TEST(MultiRank, SeededInitShardsEqualSingleDeviceInit) {
  auto build = [](bool split) {
    PlanBuilder b(split ? Axes{{"dp", 2}, {"tp", 2}} : Axes{});
    b.seededParameter("w", {8, 6}, split ? DimAxes{{"dp"}, {"tp"}} : DimAxes{},
                      -0.5, 0.5, 7);
    b.seededParameter("v", {12}, split ? DimAxes{{"tp", "dp"}} : DimAxes{}, 0,
                      1, 9);
    b.seededParameter("u", {2, 3, 4},
                      split ? DimAxes{{}, {}, {"tp"}} : DimAxes{}, -1, 1, 3);
    return b.plan();
  };
  Single single(build(false));
  ASSERT_TRUE(single.exec) << single.error;
  std::vector<std::vector<float>> full;
  for (const rt::StateInfo &s : single.exec->state())
    full.push_back(values(single.exec->stateTensor(s)));
  std::string error = runRanks(build(true), 4, [&](RankRun &run) {
    rt::Executor &exec = *run.exec;
    int64_t dpc = run.rank / 2, tpc = run.rank % 2;
    const auto &state = exec.state();
    EXPECT_EQ(values(exec.stateTensor(state[0])),
              block(full[0], 6, dpc * 4, 4, tpc * 3, 3));
    EXPECT_EQ(values(exec.stateTensor(state[1])),
              block(full[1], 12, 0, 1, (tpc * 2 + dpc) * 3, 3));
    // [2, 3, 4] split on the last dim over tp: a [6, 4] matrix's columns.
    EXPECT_EQ(values(exec.stateTensor(state[2])),
              block(full[2], 4, 0, 6, tpc * 2, 2));
    for (size_t i = 0; i < state.size(); ++i) {
      rt::HostBuffer g;
      std::string e;
      ASSERT_TRUE(exec.gatherState(state[i], g, e)) << e;
      EXPECT_EQ(values(g.view()), full[i]) << state[i].name;
    }
  });
  EXPECT_EQ(error, "");
}

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

/// x, split over [dp, tp], gathered back whole; or x itself on one device.
plan::Plan gatheredInput(bool split, rt::DType dtype = rt::DType::F32) {
  PlanBuilder b(split ? Axes{{"dp", 2}, {"tp", 2}} : Axes{});
  if (!split) {
    b.output("y", b.value(plan::Value::INPUT, "x", {4, 6}, {}, {}, dtype));
    return b.plan();
  }
  int32_t x =
      b.value(plan::Value::INPUT, "x", {4, 6}, {{"dp"}, {"tp"}}, {}, dtype);
  int32_t rows =
      b.value(plan::Value::TEMPORARY, "", {4, 6}, {{"dp"}, {}}, {}, dtype);
  plan::Instruction &g1 = b.instruction("all_gather", {x}, {rows});
  PlanBuilder::setInt(g1, "axis", 1);
  PlanBuilder::setInt(g1, "dim", 1);
  int32_t y = b.value(plan::Value::TEMPORARY, "", {4, 6}, {}, {}, dtype);
  plan::Instruction &g2 = b.instruction("all_gather", {rows}, {y});
  PlanBuilder::setInt(g2, "axis", 0);
  PlanBuilder::setInt(g2, "dim", 0);
  b.output("y", y);
  return b.plan();
}

// Proves setInput takes the GLOBAL tensor (converting f64-free float types)
// and keeps each rank's block, and inputs() reports the global shape.
TEST(MultiRank, SetInputSlicesTheGlobalTensor) {
  std::vector<float> x = iota(24, 0.75f, -2);
  std::string error = runRanks(gatheredInput(true), 4, [&](RankRun &run) {
    EXPECT_EQ(run.exec->inputs()[0].shape, (rt::Shape{4, 6}));
    std::string e;
    std::vector<float> local(6);
    EXPECT_FALSE(run.exec->setInput("x", viewOf(local, {2, 3}), e));
    EXPECT_EQ(e, "input 'x' must have shape [4, 6], got [2, 3]");
    ASSERT_TRUE(run.exec->setInput("x", viewOf(x, {4, 6}), e)) << e;
    ASSERT_TRUE(run.exec->run(e)) << e;
    EXPECT_EQ(values(run.exec->output("y")), x);
  });
  EXPECT_EQ(error, "");
}

// Proves setRandomInputs draws the global tensor and slices it: every rank
// sees the data of a single-device run with the same seed (here for f32 and
// for i64 inputs).
TEST(MultiRank, RandomInputsMatchSingleDevice) {
  for (rt::DType dtype : {rt::DType::F32, rt::DType::I64}) {
    Single single(gatheredInput(false, dtype));
    ASSERT_TRUE(single.exec) << single.error;
    single.exec->setRandomInputs(42);
    rt::TensorView ref = single.exec->output("y");
    std::vector<unsigned char> expected(static_cast<unsigned char *>(ref.data),
                                        static_cast<unsigned char *>(ref.data) +
                                            ref.bytes());
    std::string error =
        runRanks(gatheredInput(true, dtype), 4, [&](RankRun &run) {
          run.exec->setRandomInputs(42);
          std::string e;
          ASSERT_TRUE(run.exec->run(e)) << e;
          rt::TensorView y = run.exec->output("y");
          std::vector<unsigned char> got(static_cast<unsigned char *>(y.data),
                                         static_cast<unsigned char *>(y.data) +
                                             y.bytes());
          EXPECT_EQ(got, expected) << rt::dtypeName(dtype);
        });
    EXPECT_EQ(error, "");
  }
}

/// A gather of a [100, 3] table by indices `idx` [8]: on one device, or with
/// `idx` split over dp and gathered back first (as a partitioned plan moves
/// labels and token ids before the op that indexes with them).
plan::Plan gatherByIndices(bool split) {
  PlanBuilder b(split ? Axes{{"dp", 2}} : Axes{});
  int32_t table = b.parameter("table", {100, 3}, iota(300));
  int32_t idx =
      b.value(plan::Value::INPUT, "idx", {8},
              split ? DimAxes{{"dp"}} : DimAxes{}, {}, rt::DType::I64);
  if (split) {
    int32_t whole =
        b.value(plan::Value::TEMPORARY, "", {8}, {}, {}, rt::DType::I64);
    plan::Instruction &g = b.instruction("all_gather", {idx}, {whole});
    PlanBuilder::setInt(g, "axis", 0);
    PlanBuilder::setInt(g, "dim", 0);
    idx = whole;
  }
  int32_t y = b.temp({8, 3});
  PlanBuilder::setInt(b.instruction("gather", {table, idx}, {y}), "axis", 0);
  b.output("y", y);
  return b.plan();
}

// Proves random indices are drawn below the axis they index (here 100, not
// the default 16) also where they reach their gather through a collective,
// so that a partitioned run draws what the single device draws.
TEST(MultiRank, RandomIndicesKeepTheirBoundThroughCollectives) {
  Single one(gatherByIndices(false));
  ASSERT_TRUE(one.exec) << one.error;
  one.exec->setRandomInputs(7);
  std::string e;
  ASSERT_TRUE(one.exec->run(e)) << e;
  std::vector<float> expected = values(one.exec->output("y"));
  // Row r of the table holds 3r, 3r + 1, 3r + 2: some index is at least 16.
  EXPECT_GE(*std::max_element(expected.begin(), expected.end()), 48.0f);
  std::string error = runRanks(gatherByIndices(true), 2, [&](RankRun &run) {
    run.exec->setRandomInputs(7);
    std::string e;
    ASSERT_TRUE(run.exec->run(e)) << e;
    EXPECT_EQ(values(run.exec->output("y")), expected);
  });
  EXPECT_EQ(error, "");
}

//===----------------------------------------------------------------------===//
// Training and checkpoints
//===----------------------------------------------------------------------===//

/// One data-parallel SGD step of y = x W on a mean squared error, written
/// out by hand as the partitioner would: the local loss is averaged over dp
/// (all_reduce, then a multiply by 1/dp), and W's gradient is all_reduced.
/// dp = 0: the single-device plan.
plan::Plan dataParallelTraining(int64_t dp) {
  PlanBuilder b(dp ? Axes{{"dp", dp}} : Axes{});
  DimAxes rows = dp ? DimAxes{{"dp"}, {}} : DimAxes{};
  std::vector<std::string> partial;
  if (dp)
    partial = {"dp"};
  int32_t x = b.input("x", {8, 4}, rows);
  int32_t t = b.input("t", {8, 2}, rows);
  int32_t w = b.parameter("w", {4, 2}, iota(8, 0.25f, -1));
  int32_t lr = b.value(plan::Value::HYPERPARAMETER, "lr", {});
  int32_t inv = b.value(plan::Value::CONSTANT, "", {});
  float invValue = dp ? 1.0f / static_cast<float>(dp) : 1.0f;
  b.program().mutable_values(inv)->set_data(
      std::string(reinterpret_cast<const char *>(&invValue), 4));
  int32_t scale = b.value(plan::Value::CONSTANT, "", {});
  float scaleValue = 2.0f / 16.0f; // d mean / d y over 8 x 2 elements
  b.program().mutable_values(scale)->set_data(
      std::string(reinterpret_cast<const char *>(&scaleValue), 4));

  int32_t y = b.temp({8, 2}, rows);
  b.instruction("matmul", {x, w}, {y});
  int32_t loss = b.temp({});
  b.instruction("mse_loss", {y, t}, {loss});
  if (dp) {
    int32_t summed = b.allReduce(loss, {0}, {});
    int32_t mean = b.temp({});
    b.instruction("mul", {summed, inv}, {mean});
    loss = mean;
  }
  int32_t diff = b.temp({8, 2}, rows);
  b.instruction("sub", {y, t}, {diff});
  int32_t gy = b.temp({8, 2}, rows);
  b.instruction("mul", {diff, scale}, {gy});
  int32_t gw = b.temp({4, 2}, {}, partial);
  PlanBuilder::setBool(b.instruction("matmul", {x, gy}, {gw}), "transpose_lhs",
                       true);
  if (dp)
    gw = b.allReduce(gw, {0}, {4, 2});
  int32_t updated = b.temp({4, 2});
  b.program().mutable_values(updated)->set_in_place_of(w);
  b.program().mutable_values(updated)->set_offset(
      b.program().values(w).offset());
  // As the compiler emits it: the schema requires every attribute ODS
  // declares (common/ops/OpSchema.inc).
  plan::Attribute *decay =
      b.instruction("sgd_update", {w, gw, lr}, {updated}).add_attributes();
  decay->set_name("weight_decay");
  decay->set_float_value(0);
  b.output("loss", loss);
  b.training("sgd", 0.125);
  return b.plan();
}

// Proves trainStep on a partitioned plan: every rank returns the same loss
// as the single-device run for three steps, and the gathered weights agree.
TEST(MultiRank, DataParallelTrainingMatchesOneDevice) {
  std::vector<float> x = iota(32, 0.25f, -4), t = iota(16, -0.5f, 2);
  auto feed = [&](rt::Executor &exec) {
    std::string e;
    EXPECT_TRUE(exec.setInput("x", viewOf(x, {8, 4}), e)) << e;
    EXPECT_TRUE(exec.setInput("t", viewOf(t, {8, 2}), e)) << e;
  };
  Single single(dataParallelTraining(0));
  ASSERT_TRUE(single.exec) << single.error;
  feed(*single.exec);
  std::vector<double> losses;
  for (int i = 0; i < 3; ++i) {
    double loss, lr;
    std::string e;
    ASSERT_TRUE(single.exec->trainStep(e, nullptr, loss, lr)) << e;
    ASSERT_TRUE(std::isfinite(loss)) << "single-device step " << i + 1;
    losses.push_back(loss);
  }
  std::vector<float> w =
      values(single.exec->stateTensor(single.exec->state()[0]));
  for (int64_t n : {2, 4}) {
    std::string error = runRanks(dataParallelTraining(n), n, [&](RankRun &run) {
      feed(*run.exec);
      for (int i = 0; i < 3; ++i) {
        double loss, lr;
        std::string e;
        ASSERT_TRUE(run.exec->trainStep(e, nullptr, loss, lr)) << e;
        oracle::Comparison c = oracle::compareValue(
            loss, losses[i], oracle::Tolerance::relative(1e-6, 0));
        EXPECT_TRUE(c.ok()) << "rank " << run.rank << " step " << i + 1
                            << ": loss " << c.message();
      }
      rt::HostBuffer g;
      std::string e;
      ASSERT_TRUE(run.exec->gatherState(run.exec->state()[0], g, e)) << e;
      std::vector<float> got = values(g.view());
      oracle::Comparison c = oracle::compareElements(
          std::vector<double>(got.begin(), got.end()),
          std::vector<double>(w.begin(), w.end()),
          oracle::Tolerance::allclose(1e-5, 1e-5));
      EXPECT_TRUE(c.ok()) << "rank " << run.rank << ": weights "
                          << c.message();
    });
    EXPECT_EQ(error, "") << n << " ranks";
  }
}

// Proves checkpoints are sharded: 4 ranks of a dp x tp plan each write
// their own blocks (no gather: no rank's peak memory grows), which together
// hold exactly the single-device run's tensors; and each run resumes from
// the other's checkpoint.
TEST(MultiRank, CheckpointsAreSharded) {
  namespace fs = std::filesystem;
  fs::path root = fs::path(::testing::TempDir()) /
                  ("loom-multirank-ckpt-" + std::to_string(getpid()));
  fs::remove_all(root);
  auto build = [](bool split) {
    PlanBuilder b(split ? Axes{{"dp", 2}, {"tp", 2}} : Axes{});
    b.parameter("a", {8, 6}, iota(48, 0.5f, -3),
                split ? DimAxes{{"dp"}, {"tp"}} : DimAxes{});
    b.seededParameter("b.weight", {4, 4},
                      split ? DimAxes{{}, {"tp", "dp"}} : DimAxes{}, -1, 1, 5);
    // Replicated over dp: one copy of each tp block is written.
    b.value(plan::Value::OPTIMIZER_STATE, "a::m", {8, 6},
            split ? DimAxes{{}, {"tp"}} : DimAxes{});
    // A partial sum over tp, split over dp: summed before it is written.
    b.parameter("c", {4}, iota(4, 1, 1), split ? DimAxes{{"dp"}} : DimAxes{},
                split ? std::vector<std::string>{"tp"}
                      : std::vector<std::string>{});
    return b.plan();
  };
  Single single(build(false));
  ASSERT_TRUE(single.exec) << single.error;
  single.exec->setStepsTaken(3);
  std::string error;
  ASSERT_TRUE(rt::saveCheckpoint(*single.exec, (root / "one").string(), error))
      << error;
  std::vector<std::vector<float>> expected;
  for (const rt::StateInfo &s : single.exec->state())
    expected.push_back(values(single.exec->stateTensor(s)));

  error = runRanks(build(true), 4, [&](RankRun &run) {
    run.exec->setStepsTaken(3);
    // Each tp rank holds half of c's value: its addends sum to it.
    rt::TensorView c = run.exec->stateTensor(run.exec->state()[3]);
    std::vector<float> halves(2);
    for (int i = 0; i < 2; ++i)
      halves[i] = 0.5f * (1 + i + 2 * static_cast<float>(run.exec->rank() / 2));
    std::memcpy(c.data, halves.data(), sizeof(float) * 2);
    int64_t peak = run.exec->peakBytes();
    std::string e;
    EXPECT_TRUE(rt::saveCheckpoint(*run.exec, (root / "four").string(), e))
        << e;
    EXPECT_EQ(run.exec->peakBytes(), peak) << "rank " << run.exec->rank();
  });
  ASSERT_EQ(error, "");
  int files = 0;
  auto one = checkpointTensors((root / "one").string(), error);
  ASSERT_EQ(error, "");
  auto four = checkpointTensors((root / "four").string(), error, &files);
  ASSERT_EQ(error, "");
  EXPECT_EQ(four, one);
  EXPECT_EQ(one.size(), 4u);
  EXPECT_EQ(files, 4 + 4 + 2 + 2); // a, b.weight: 4 blocks; a::m, c: 2

  for (const char *from : {"one", "four"}) {
    error = runRanks(build(true), 4, [&](RankRun &run) {
      // Scramble the state, then resume.
      std::vector<float> zeros(48, 0.0f);
      std::string e;
      ASSERT_TRUE(run.exec->setStateFromGlobal(run.exec->state()[0],
                                               viewOf(zeros, {8, 6}), e));
      ASSERT_TRUE(rt::loadCheckpoint(*run.exec, (root / from).string(), e))
          << e;
      EXPECT_EQ(run.exec->stepsTaken(), 3);
      for (size_t i = 0; i < expected.size(); ++i) {
        rt::HostBuffer g;
        ASSERT_TRUE(run.exec->gatherState(run.exec->state()[i], g, e)) << e;
        EXPECT_EQ(values(g.view()), expected[i]) << from;
      }
    });
    EXPECT_EQ(error, "");
  }
  Single back(build(false));
  ASSERT_TRUE(rt::loadCheckpoint(*back.exec, (root / "four").string(), error))
      << error;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(values(back.exec->stateTensor(back.exec->state()[i])),
              expected[i]);
  fs::remove_all(root);
}

// Proves the trace has one track per rank, with kernels and collectives.
TEST(MultiRank, TraceHasOneTrackPerRank) {
  rt::TraceWriter trace;
  std::vector<float> x = iota(32, 0.25f, -4);
  std::string error = runRanks(dataParallelMatmul(4), 4, [&](RankRun &run) {
    std::string e;
    ASSERT_TRUE(run.exec->setInput("x", viewOf(x, {8, 4}), e)) << e;
    ASSERT_TRUE(run.exec->run(e, &trace)) << e;
  });
  ASSERT_EQ(error, "");
  EXPECT_EQ(trace.numSpans(), 12u); // matmul, all_gather, step on 4 ranks
  std::string e;
  std::optional<std::string> json = trace.toJson(e);
  ASSERT_TRUE(json) << e;
  EXPECT_NE(json->find("\"name\":\"all_gather\",\"cat\":\"collective\""),
            std::string::npos);
  EXPECT_NE(json->find("\"tid\":3,\"args\":{\"name\":\"rank 3\"}"),
            std::string::npos)
      << *json;

  // Serialised spans merge into another writer (how MPI ranks send theirs).
  rt::TraceWriter merged;
  ASSERT_TRUE(merged.merge(trace.serialize(), e)) << e;
  EXPECT_EQ(merged.numSpans(), 12u);
  EXPECT_FALSE(merged.merge("junk", e));
  EXPECT_EQ(e, "malformed serialized trace");
}

} // namespace
