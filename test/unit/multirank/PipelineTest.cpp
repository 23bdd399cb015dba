//===- PipelineTest.cpp - Pipelined plans: stages, messages, micro-batches ===//
//
// Runs hand-built two-stage plans on a mesh whose first axis enumerates the
// stages ([pp=2] and [pp=2, dp=2]), one thread per rank, and checks them
// against computations done here by hand: activations sent and received
// between stages, micro-batched inputs (each value its rows of the step's
// input, fed whole or drawn at random as one device would), state gathered
// from another stage and checkpoints, the validator's errors for pipelined
// plans, and the peak-memory and bubble reports. As in MultiRankTest.cpp,
// the data are small multiples of powers of two, so results are exact.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilder.h"
#include "StagedBackend.h"

#include "runtime/Checkpoint.h"
#include "runtime/io/Trace.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace loom;
using namespace loom::test;

namespace {

using Axes = std::vector<std::pair<std::string, int64_t>>;

std::vector<int64_t> ints(const rt::TensorView &v) {
  const int64_t *p = v.as<int64_t>();
  return std::vector<int64_t>(p, p + v.numElements());
}

/// Rows [r0, r0 + n) of a row-major matrix with `width` columns, times
/// `scale`.
std::vector<float> rows(const std::vector<float> &m, int64_t width, int64_t r0,
                        int64_t n, float scale = 1) {
  std::vector<float> out(m.begin() + r0 * width, m.begin() + (r0 + n) * width);
  for (float &x : out)
    x *= scale;
  return out;
}

//===----------------------------------------------------------------------===//
// Two stages: h = x w0 on stage 0, sent; y = h w1 and the loss on stage 1,
// the loss sent back.
//===----------------------------------------------------------------------===//

const std::vector<float> kW0 = iota(6, 0.5f, -1), kW1 = iota(4, 0.25f, -0.5f);

/// On [pp=2] (dp = false) or [pp=2, dp=2], x and h split on rows over dp.
plan::Plan twoStageMlp(bool dp) {
  PlanBuilder b(dp ? Axes{{"pp", 2}, {"dp", 2}} : Axes{{"pp", 2}});
  b.pipeline();
  DimAxes split = dp ? DimAxes{{"dp"}, {}} : DimAxes{};
  int32_t x = b.input("x", {4, 3}, split);
  int32_t w0 = b.parameter("w0", {3, 2}, kW0);
  int32_t h = b.temp({4, 2}, split);
  b.instruction("matmul", {x, w0}, {h}, "fc0");
  b.send(h, 1, 7).set_location("fc0");
  b.output("loss", b.recv({}, 1, 8));

  b.useStage(1);
  int32_t received = b.recv({4, 2}, 0, 7, split);
  int32_t w1 = b.parameter("w1", {2, 2}, kW1);
  int32_t y = b.temp({4, 2}, split);
  b.instruction("matmul", {received, w1}, {y}, "fc1");
  if (dp)
    y = b.allGather(y, /*axis=*/1, /*dim=*/0, {4, 2});
  int32_t t = b.input("t", {4, 2});
  int32_t loss = b.temp({});
  b.instruction("mse_loss", {y, t}, {loss}, "loss");
  b.send(loss, 0, 8);
  b.output("y", y);
  b.output("loss", loss);
  return b.plan();
}

// Proves the stages run their own programs and exchange activations: stage
// 1's y is x w0 w1 computed by hand, and every rank of both stages returns
// the loss the last stage computed; on [pp=2, dp=2] each rank's peer is the
// rank with its dp coordinate in the other stage.
TEST(Pipeline, TwoStagesMatchHandComputation) {
  std::vector<float> x = iota(12, 0.25f, -1), t = iota(8, 0.5f, -1);
  std::vector<double> y = matmul(matmul(toDouble(x), toDouble(kW0), 4, 3, 2),
                                 toDouble(kW1), 4, 2, 2);
  std::vector<float> expectedY(y.begin(), y.end());
  double squares = 0;
  for (size_t i = 0; i < y.size(); ++i)
    squares += (y[i] - t[i]) * (y[i] - t[i]);
  float expectedLoss = static_cast<float>(squares / 8);
  for (bool dp : {false, true}) {
    int64_t n = dp ? 4 : 2;
    std::string error = runRanks(twoStageMlp(dp), n, [&](RankRun &run) {
      rt::Executor &exec = *run.exec;
      int32_t stage = static_cast<int32_t>(run.rank / (n / 2));
      EXPECT_EQ(exec.stage(), stage);
      EXPECT_EQ(exec.numStages(), 2);
      // The plan's inputs, on every stage.
      ASSERT_EQ(exec.inputs().size(), 2u);
      EXPECT_EQ(exec.inputs()[0].name, "x");
      EXPECT_EQ(exec.inputs()[1].name, "t");
      EXPECT_EQ(exec.inputs()[1].shape, (rt::Shape{4, 2}));
      std::string e;
      ASSERT_TRUE(exec.setInput("x", viewOf(x, {4, 3}), e)) << e;
      ASSERT_TRUE(exec.setInput("t", viewOf(t, {4, 2}), e)) << e;
      ASSERT_TRUE(exec.run(e)) << "rank " << run.rank << ": " << e;
      EXPECT_EQ(values(exec.output("loss")), std::vector<float>{expectedLoss})
          << "rank " << run.rank;
      if (stage == 1)
        EXPECT_EQ(values(exec.output("y")), expectedY) << "rank " << run.rank;
      else
        EXPECT_EQ(exec.output("y").data, nullptr);
    });
    EXPECT_EQ(error, "") << (dp ? "[pp=2, dp=2]" : "[pp=2]");
  }
}

// Proves a message reaches the rank that holds its rows whatever order a
// stage lists its ranks in: with stage 1 listing [3, 2], rank 3 comes first
// but holds rows 2 and 3, which rank 1 sends it.
TEST(Pipeline, StageRanksInAnyOrder) {
  std::vector<float> x = iota(12, 0.25f, -1), t = iota(8, 0.5f, -1);
  std::vector<double> y = matmul(matmul(toDouble(x), toDouble(kW0), 4, 3, 2),
                                 toDouble(kW1), 4, 2, 2);
  plan::Plan reordered = twoStageMlp(true);
  reordered.mutable_stages(1)->set_ranks(0, 3);
  reordered.mutable_stages(1)->set_ranks(1, 2);
  std::string error = runRanks(reordered, 4, [&](RankRun &run) {
    std::string e;
    ASSERT_TRUE(run.exec->setInput("x", viewOf(x, {4, 3}), e)) << e;
    ASSERT_TRUE(run.exec->setInput("t", viewOf(t, {4, 2}), e)) << e;
    ASSERT_TRUE(run.exec->run(e)) << "rank " << run.rank << ": " << e;
    if (run.exec->stage() == 1) {
      EXPECT_EQ(values(run.exec->output("y")),
                std::vector<float>(y.begin(), y.end()))
          << "rank " << run.rank;
    }
  });
  EXPECT_EQ(error, "");
}

//===----------------------------------------------------------------------===//
// Micro-batches
//===----------------------------------------------------------------------===//

const std::vector<float> kTable = iota(10, 0.5f, 0);

/// Two micro-batches of 2 rows: stage 0 doubles x's and sends them, and
/// outputs its ids; stage 1 outputs what it received, its t's, and the rows
/// of a [5, 2] table its ids gather (so ids index 5 rows on both stages).
plan::Plan microBatched() {
  PlanBuilder b({{"pp", 2}});
  b.pipeline(plan::Schedule::GPIPE, 2);
  for (int32_t k = 0; k < 2; ++k) {
    int32_t x = b.microBatchInput("x", k, {2, 3});
    int32_t doubled = b.temp({2, 3});
    b.instruction("add", {x, x}, {doubled});
    b.send(doubled, 1, k);
    b.output("ids" + std::to_string(k),
             b.microBatchInput("ids", k, {2}, {}, rt::DType::I64));
  }
  b.useStage(1);
  int32_t table = b.parameter("table", {5, 2}, kTable);
  for (int32_t k = 0; k < 2; ++k) {
    std::string suffix = std::to_string(k);
    b.output("y" + suffix, b.recv({2, 3}, 0, k));
    b.output("t" + suffix, b.microBatchInput("t", k, {2, 3}));
    int32_t ids = b.microBatchInput("ids", k, {2}, {}, rt::DType::I64);
    int32_t gathered = b.temp({2, 2});
    PlanBuilder::setInt(b.instruction("gather", {table, ids}, {gathered}),
                        "axis", 0);
    b.output("g" + suffix, gathered);
  }
  return b.plan();
}

/// What `microBatched` computes, as outputs per stage, for the step's
/// inputs x [4, 3], ids [4] and t [4, 3].
void expectMicroBatches(rt::Executor &exec, const std::vector<float> &x,
                        const std::vector<int64_t> &ids,
                        const std::vector<float> &t) {
  for (int64_t k = 0; k < 2; ++k) {
    std::string suffix = std::to_string(k);
    std::vector<int64_t> mine(ids.begin() + 2 * k, ids.begin() + 2 * k + 2);
    if (exec.stage() == 0) {
      EXPECT_EQ(ints(exec.output("ids" + suffix)), mine) << suffix;
      continue;
    }
    EXPECT_EQ(values(exec.output("y" + suffix)), rows(x, 3, 2 * k, 2, 2))
        << suffix;
    EXPECT_EQ(values(exec.output("t" + suffix)), rows(t, 3, 2 * k, 2))
        << suffix;
    std::vector<float> gathered;
    for (int64_t i : mine)
      for (int64_t c = 0; c < 2; ++c)
        gathered.push_back(kTable[i * 2 + c]);
    EXPECT_EQ(values(exec.output("g" + suffix)), gathered) << suffix;
  }
}

// Proves setInput takes the step's whole input and gives each micro-batch
// value its rows, on the stages that have the name (the others check it and
// ignore it), and inputs() reports every stage's inputs with the step's
// shape.
TEST(Pipeline, MicroBatchedInputsGetTheirRows) {
  std::vector<float> x = iota(12, 0.25f, -1), t = iota(12, 0.5f, 3);
  std::vector<int64_t> ids = {4, 0, 2, 3};
  std::string error = runRanks(microBatched(), 2, [&](RankRun &run) {
    rt::Executor &exec = *run.exec;
    const std::vector<rt::IOInfo> &inputs = exec.inputs();
    ASSERT_EQ(inputs.size(), 3u);
    EXPECT_EQ(inputs[0].name, "x");
    EXPECT_EQ(inputs[0].shape, (rt::Shape{4, 3}));
    EXPECT_EQ(inputs[1].name, "ids");
    EXPECT_EQ(inputs[1].shape, (rt::Shape{4}));
    EXPECT_EQ(inputs[1].dtype, rt::DType::I64);
    EXPECT_EQ(inputs[2].name, "t");
    std::string e;
    ASSERT_TRUE(exec.setInput("x", viewOf(x, {4, 3}), e)) << e;
    ASSERT_TRUE(exec.setInput("t", viewOf(t, {4, 3}), e)) << e;
    ASSERT_TRUE(exec.setInput("ids", {rt::DType::I64, {4}, ids.data()}, e))
        << e;
    EXPECT_FALSE(exec.setInput("x", viewOf(x, {2, 3}), e));
    EXPECT_EQ(e, "input 'x' must have shape [4, 3], got [2, 3]");
    EXPECT_FALSE(exec.setInput("nope", viewOf(x, {4, 3}), e));
    EXPECT_EQ(e, "the plan has no input named 'nope'");
    ASSERT_TRUE(exec.run(e)) << e;
    expectMicroBatches(exec, x, ids, t);
  });
  EXPECT_EQ(error, "");
}

// Proves setRandomInputs draws on every rank what one device draws for the
// whole batch: a single-device plan with inputs x [4, 3], ids [4] (indexing
// a 5-row table) and t [4, 3] gives the data each stage's micro-batches
// hold, including stage 0's ids, which no gather of stage 0 bounds.
TEST(Pipeline, RandomMicroBatchesMatchOneDevice) {
  PlanBuilder one;
  int32_t x = one.input("x", {4, 3});
  int32_t ids =
      one.value(plan::Value::INPUT, "ids", {4}, {}, {}, rt::DType::I64);
  int32_t t = one.input("t", {4, 3});
  int32_t table = one.parameter("table", {5, 2}, kTable);
  int32_t gathered = one.temp({4, 2});
  PlanBuilder::setInt(one.instruction("gather", {table, ids}, {gathered}),
                      "axis", 0);
  one.output("x", x);
  one.output("ids", ids);
  one.output("t", t);
  std::unique_ptr<rt::Backend> backend = createTestBackend();
  std::string error;
  std::unique_ptr<rt::Executor> single =
      rt::Executor::create(one.plan(), *backend, error);
  ASSERT_TRUE(single) << error;
  single->setRandomInputs(11);
  ASSERT_TRUE(single->run(error)) << error;
  std::vector<float> xs = values(single->output("x")),
                     ts = values(single->output("t"));
  std::vector<int64_t> is = ints(single->output("ids"));
  for (int64_t i : is)
    EXPECT_TRUE(i >= 0 && i < 5) << i;

  error = runRanks(microBatched(), 2, [&](RankRun &run) {
    run.exec->setRandomInputs(11);
    std::string e;
    ASSERT_TRUE(run.exec->run(e)) << e;
    expectMicroBatches(*run.exec, xs, is, ts);
  });
  EXPECT_EQ(error, "");
}

//===----------------------------------------------------------------------===//
// State across stages and checkpoints
//===----------------------------------------------------------------------===//

const std::vector<float> kV = iota(3, 0.5f, 1), kW = iota(8, 0.25f, -2);

/// v [3] on stage 0; w [4, 2] and its optimizer state on stage 1, split on
/// rows over dp (pipelined = false: the same tensors on one device).
plan::Plan stateOnTwoStages(bool pipelined) {
  PlanBuilder b(pipelined ? Axes{{"pp", 2}, {"dp", 2}} : Axes{});
  DimAxes split = pipelined ? DimAxes{{"dp"}, {}} : DimAxes{};
  if (pipelined)
    b.pipeline();
  b.parameter("v", {3}, kV);
  if (pipelined)
    b.useStage(1);
  b.parameter("w", {4, 2}, kW, split);
  b.value(plan::Value::OPTIMIZER_STATE, "w::m", {4, 2}, split);
  return b.plan();
}

// Proves state() lists every stage's tensors, stateTensor holds this rank's
// shard of its own stage's only, and gatherState gives every rank of both
// stages the global value of either stage's tensor.
TEST(Pipeline, GatherStateAcrossStages) {
  std::string error = runRanks(stateOnTwoStages(true), 4, [&](RankRun &run) {
    rt::Executor &exec = *run.exec;
    const std::vector<rt::StateInfo> &state = exec.state();
    ASSERT_EQ(state.size(), 3u);
    EXPECT_EQ(state[0].name, "v");
    EXPECT_EQ(state[0].stage, 0);
    EXPECT_EQ(state[1].name, "w");
    EXPECT_EQ(state[1].stage, 1);
    EXPECT_EQ(state[1].shape, (rt::Shape{4, 2}));
    int64_t dpc = run.rank % 2;
    if (exec.stage() == 0) {
      EXPECT_EQ(values(exec.stateTensor(state[0])), kV);
      EXPECT_EQ(exec.stateTensor(state[1]).data, nullptr);
    } else {
      EXPECT_EQ(exec.stateTensor(state[0]).data, nullptr);
      EXPECT_EQ(values(exec.stateTensor(state[1])), rows(kW, 2, dpc * 2, 2));
    }
    std::vector<std::vector<float>> expected = {kV, kW,
                                                std::vector<float>(8, 0)};
    for (size_t i = 0; i < state.size(); ++i) {
      rt::HostBuffer global;
      std::string e;
      ASSERT_TRUE(exec.gatherState(state[i], global, e)) << e;
      EXPECT_EQ(global.shape, state[i].shape);
      EXPECT_EQ(values(global.view()), expected[i])
          << "rank " << run.rank << " " << state[i].name;
    }
  });
  EXPECT_EQ(error, "");
}

// Proves a pipelined run's checkpoint (each stage's ranks writing their
// own tensors) holds the single-device one's tensors, and that every rank
// resumes from the latter (its stage's tensors; another
// stage's are no-ops).
TEST(Pipeline, CheckpointsSpanTheStages) {
  namespace fs = std::filesystem;
  // Per process: ctest may run the staged variant at the same time.
  fs::path root = fs::path(::testing::TempDir()) /
                  ("loom-pipeline-ckpt-" + std::to_string(getpid()));
  fs::remove_all(root);
  std::unique_ptr<rt::Backend> backend = createTestBackend();
  std::string error;
  std::unique_ptr<rt::Executor> single =
      rt::Executor::create(stateOnTwoStages(false), *backend, error);
  ASSERT_TRUE(single) << error;
  ASSERT_TRUE(rt::saveCheckpoint(*single, (root / "one").string(), error))
      << error;

  error = runRanks(stateOnTwoStages(true), 4, [&](RankRun &run) {
    std::string e;
    EXPECT_TRUE(rt::saveCheckpoint(*run.exec, (root / "pp").string(), e)) << e;
  });
  ASSERT_EQ(error, "");
  auto one = checkpointTensors((root / "one").string(), error);
  ASSERT_EQ(error, "");
  auto pp = checkpointTensors((root / "pp").string(), error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(pp, one);
  EXPECT_EQ(one.size(), 3u); // v, w and w::m

  error = runRanks(stateOnTwoStages(true), 4, [&](RankRun &run) {
    rt::Executor &exec = *run.exec;
    std::vector<float> zeros(8, 0.0f);
    std::string e;
    // Another stage's tensor: nothing to set, and no error.
    ASSERT_TRUE(
        exec.setStateFromGlobal(exec.state()[1], viewOf(zeros, {4, 2}), e))
        << e;
    ASSERT_TRUE(rt::loadCheckpoint(exec, (root / "one").string(), e)) << e;
    rt::HostBuffer w;
    ASSERT_TRUE(exec.gatherState(exec.state()[1], w, e)) << e;
    EXPECT_EQ(values(w.view()), kW);
  });
  EXPECT_EQ(error, "");
  fs::remove_all(root);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// A valid [pp=2] plan the tests below break: stage 0 sends x (tag 3) to
/// stage 1, which outputs it. Returned building stage 0.
PlanBuilder relay() {
  PlanBuilder b({{"pp", 2}});
  b.pipeline();
  b.send(b.input("x", {2, 2}), 1, 3);
  b.useStage(1);
  b.output("y", b.recv({2, 2}, 0, 3));
  b.useStage(0);
  return b;
}

TEST(PipelineValidation, TheBasePlanLoadsOnBothStages) {
  EXPECT_EQ(loadError(relay().plan(), 2, 0), "");
  EXPECT_EQ(loadError(relay().plan(), 2, 1), "");
}

TEST(PipelineValidation, NeedsACommunicator) {
  EXPECT_EQ(loadError(relay().plan(), 0),
            "this plan is partitioned over 2 devices [pp=2]; run it with "
            "--ranks 2 or under mpirun -np 2");
}

TEST(PipelineValidation, RankInTwoStages) {
  PlanBuilder b = relay();
  b.plan().mutable_stages(1)->add_ranks(0);
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: rank 0 is in stages 0 and 1; "
            "every rank runs exactly one stage");
}

TEST(PipelineValidation, StagesOutOfOrderOrUneven) {
  PlanBuilder b = relay();
  b.plan().mutable_stages(1)->set_index(2);
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: stage #1 has index 2; stages must be listed in "
            "order, with indices 0, 1, 2, ...");
  b = relay();
  b.plan().mutable_stages(1)->clear_ranks();
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: rank 1 of the mesh [pp=2] is "
            "in no stage; every rank runs exactly one "
            "stage");
}

TEST(PipelineValidation, StagesMustFollowTheFirstMeshAxis) {
  // [dp=2, pp=2]: the stage axis is not first, so stage 0's ranks 0 and 1
  // differ on the wrong axis.
  PlanBuilder b({{"dp", 2}, {"pp", 2}});
  b.pipeline();
  b.plan().mutable_stages(0)->set_ranks(1, 2);
  b.plan().mutable_stages(1)->set_ranks(0, 1);
  EXPECT_EQ(loadError(b.plan(), 4),
            "invalid plan: stage 0 lists rank 2, whose coordinate on the "
            "stage axis 'dp' of [dp=2, pp=2] is 1; stage 0 runs on the ranks "
            "whose coordinate on it is 0");
}

TEST(PipelineValidation, BadPeerStage) {
  PlanBuilder b = relay();
  b.program().mutable_instructions(0)->mutable_attributes(0)->set_int_value(2);
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: instruction #0 (send): peer_stage 2 is not a stage "
            "of the plan, which has 2 stages");
  b.program().mutable_instructions(0)->mutable_attributes(0)->set_int_value(0);
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: instruction #0 (send): peer_stage 0 is this "
            "instruction's own stage; send and recv connect two stages");
}

TEST(PipelineValidation, MissingOrReservedTag) {
  PlanBuilder b = relay();
  b.program().mutable_instructions(0)->mutable_attributes()->RemoveLast();
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: instruction #0 (send): needs "
            "the integer attribute 'tag'");
  b = relay();
  b.program().mutable_instructions(0)->mutable_attributes(1)->set_int_value(
      int64_t(1) << 62);
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: instruction #0 (send): tag 4611686018427387904 is "
            "outside [0, 2^62); the runtime keeps the tags from 2^62 for its "
            "own messages");
}

TEST(PipelineValidation, RecvResultMustBeFresh) {
  PlanBuilder b = relay();
  b.useStage(1);
  int32_t in = b.input("z", {2, 2});
  b.program().mutable_instructions(0)->set_results(0, in);
  EXPECT_EQ(loadError(b.plan(), 2, 1),
            "invalid plan: instruction #0 (recv): result 1 is not a fresh "
            "temporary value");
}

TEST(PipelineValidation, SendAndRecvCounts) {
  PlanBuilder b = relay();
  b.useStage(1);
  b.program().mutable_instructions(0)->add_operands(b.input("z", {2, 2}));
  EXPECT_EQ(loadError(b.plan(), 2, 1),
            "invalid plan: instruction #0 (recv): a recv has no operand and "
            "one result, got 1 and 1");
}

TEST(PipelineValidation, RecvWithoutItsSend) {
  PlanBuilder b = relay();
  b.useStage(1);
  b.program().mutable_instructions(0)->mutable_attributes(1)->set_int_value(4);
  EXPECT_EQ(loadError(b.plan(), 2, 1),
            "invalid plan: instruction #0 (recv): stage 0 sends 0 messages "
            "with tag 4 to stage 1, but stage 1 receives 1; a recv without "
            "its send would wait forever");
  EXPECT_EQ(loadError(b.plan(), 2, 0),
            "invalid plan: instruction #0 (send): stage 1 receives 0 messages "
            "with tag 3 from stage 0, but stage 0 sends 1");
}

TEST(PipelineValidation, BothEndsOfAMessageHaveOneType) {
  PlanBuilder b({{"pp", 2}});
  b.pipeline();
  b.send(b.input("x", {2, 2}), 1, 3);
  b.useStage(1);
  b.output("y", b.recv({4}, 0, 3));
  EXPECT_EQ(loadError(b.plan(), 2, 1),
            "invalid plan: instruction #0 (recv): receives f32[4], but stage "
            "0's instruction #0 sends f32[2, 2]; both ends of a message are "
            "one global tensor");
}

TEST(PipelineValidation, NothingRunsOverTheStageAxis) {
  PlanBuilder b({{"pp", 2}, {"dp", 2}});
  b.pipeline();
  b.input("x", {4, 2}, {{"pp"}, {}});
  EXPECT_EQ(loadError(b.plan(), 4),
            "invalid plan: value #0 ('x') is laid out as [[pp], []], over the "
            "stage axis 'pp'; a pipelined plan's layouts name only the other "
            "axes");
  b = PlanBuilder({{"pp", 2}, {"dp", 2}});
  b.pipeline();
  b.allReduce(b.input("x", {4, 2}), {0}, {4, 2});
  EXPECT_EQ(loadError(b.plan(), 4),
            "invalid plan: instruction #0 (all_reduce): runs over the stage "
            "axis 'pp'; a pipelined plan's collectives stay within a stage");
}

TEST(PipelineValidation, MicroBatchOutOfRange) {
  PlanBuilder b = relay();
  b.useStage(1);
  b.microBatchInput("t", 1, {2});
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: stage 1's value #1 ('t') holds micro-batch 1, but "
            "the schedule has 1 micro-batch");
}

TEST(PipelineValidation, EveryMicroBatchHasAValue) {
  PlanBuilder b = relay();
  b.plan().mutable_schedule()->set_micro_batches(2);
  b.useStage(1);
  b.microBatchInput("t", 1, {2});
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: input 't' has values for 1 of the schedule's 2 "
            "micro-batches; every micro-batch needs one");
}

//===----------------------------------------------------------------------===//
// Peak memory and the bubble
//===----------------------------------------------------------------------===//

// Proves the memory report: the peak covers at least the plan's state and
// arena from creation on, and the step times add up over runs.
TEST(Pipeline, PeakMemoryAndStepTimes) {
  std::vector<float> x = iota(12, 0.25f, -1), t = iota(8, 0.5f, -1);
  std::string error = runRanks(twoStageMlp(true), 4, [&](RankRun &run) {
    rt::Executor &exec = *run.exec;
    EXPECT_GT(exec.plannedBytes(), 0);
    EXPECT_EQ(exec.plannedBytes(), exec.stateBytes() + exec.arenaBytes());
    EXPECT_GE(exec.peakBytes(), exec.plannedBytes());
    std::string e;
    ASSERT_TRUE(exec.setInput("x", viewOf(x, {4, 3}), e)) << e;
    ASSERT_TRUE(exec.setInput("t", viewOf(t, {4, 2}), e)) << e;
    double total = 0;
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(exec.run(e)) << e;
      const rt::StepTiming &last = exec.lastStepTiming();
      EXPECT_GT(last.seconds, 0);
      EXPECT_GE(last.recvWaitSeconds, 0);
      EXPECT_LE(last.recvWaitSeconds, last.seconds);
      total += last.seconds;
    }
    EXPECT_EQ(exec.totalStepTiming().steps, 2);
    EXPECT_DOUBLE_EQ(exec.totalStepTiming().seconds, total);
    EXPECT_GE(exec.peakBytes(), exec.plannedBytes());
  });
  EXPECT_EQ(error, "");
}

/// Stage 0 waits for a go-ahead from stage 1, then multiplies a [512, 512]
/// input by a matrix `chain` times (some 2 ms each) and sends the result;
/// stage 1 sends the go-ahead, receives the result and sends back a loss.
/// Stage 1 thus calls its recv as stage 0 starts computing, and waits there
/// for all of it unless the machine deschedules it in between.
plan::Plan slowFirstStage(int chain) {
  PlanBuilder b({{"pp", 2}});
  b.pipeline();
  b.recv({}, 1, 2);
  int32_t h = b.input("x", {512, 512});
  int32_t w = b.seededParameter("w", {512, 512}, {}, -0.03125, 0.03125, 1);
  for (int i = 0; i < chain; ++i) {
    int32_t next = b.temp({512, 512});
    b.instruction("matmul", {h, w}, {next});
    h = next;
  }
  b.send(h, 1, 0);
  b.output("loss", b.recv({}, 1, 1));
  b.useStage(1);
  int32_t go = b.value(plan::Value::CONSTANT, "", {});
  b.program().mutable_values(go)->set_data(std::string(4, '\0'));
  b.send(go, 0, 2);
  int32_t received = b.recv({512, 512}, 0, 0);
  int32_t loss = b.temp({});
  b.instruction("mse_loss", {received, received}, {loss});
  b.send(loss, 0, 1);
  b.output("loss", loss);
  return b.plan();
}

// Proves the bubble is measured: stage 1 waits in recv while stage 0
// computes (some 40 ms, long next to the scheduler's slices on a busy
// machine), so most of its step is recv wait, at least half of stage 0's
// compute time; and the trace shows the sends, recvs and bubbles.
TEST(Pipeline, BubbleIsTheRecvWait) {
  rt::TraceWriter trace;
  std::vector<rt::StepTiming> timings(2);
  std::string error = runRanks(slowFirstStage(20), 2, [&](RankRun &run) {
    run.exec->setRandomInputs(3);
    std::string e;
    ASSERT_TRUE(run.exec->run(e, &trace)) << e;
    timings[run.rank] = run.exec->lastStepTiming();
  });
  ASSERT_EQ(error, "");
  double compute = timings[0].seconds - timings[0].recvWaitSeconds;
  EXPECT_GT(compute, 0);
  EXPECT_GE(timings[1].recvWaitSeconds, 0.5 * compute)
      << "stage 0 computed for " << compute << " s, stage 1 waited "
      << timings[1].recvWaitSeconds << " s of " << timings[1].seconds;
  EXPECT_GT(timings[1].bubbleFraction(), 0.5);
  std::string e;
  std::optional<std::string> json = trace.toJson(e);
  ASSERT_TRUE(json) << e;
  for (const char *span :
       {"\"name\":\"send\",\"cat\":\"p2p\"",
        "\"name\":\"recv\",\"cat\":\"p2p\"",
        "\"name\":\"bubble\",\"cat\":\"idle\"",
        "\"name\":\"step\",\"cat\":\"step\"", "\"peak_bytes\":"})
    EXPECT_NE(json->find(span), std::string::npos) << span << "\n" << *json;
}

} // namespace
