//===- SubmeshStagesTest.cpp - Stages on submeshes of their own ----------===//
//
// Pipelined plans whose stages run on submeshes of different sizes and
// shapes (plan.proto's Stage.mesh): which blocks of a message each rank
// sends and receives when the two ends are laid out on different meshes,
// a three-stage plan on 4, 2 and 2 ranks run one thread per rank against a
// hand computation (activations resharded between stages, collectives on a
// stage's own mesh, the loss fanned out to stages of other sizes, state
// gathered across stages), and the validator's errors for such plans.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilder.h"
#include "StagedBackend.h"

#include "runtime/Pipeline.h"
#include "runtime/PlanLayout.h"

#include "gtest/gtest.h"

using namespace loom;
using namespace loom::test;

namespace {

using Axes = std::vector<std::pair<std::string, int64_t>>;

//===----------------------------------------------------------------------===//
// Which blocks move
//===----------------------------------------------------------------------===//

/// A StageMap of the plan `b` builds, checked.
rt::StageMap mapOf(PlanBuilder &b) {
  std::optional<layout::Mesh> mesh;
  std::string error;
  EXPECT_TRUE(rt::meshFromProto(b.plan().mesh(), mesh, error)) << error;
  rt::StageMap map;
  EXPECT_EQ(rt::mapStages(b.plan(), mesh ? &*mesh : nullptr, map), "");
  return map;
}

/// A layout over `mesh` from axis names per dimension.
layout::TensorLayout layoutOf(const layout::Mesh &mesh, DimAxes dims,
                              const rt::Shape &shape,
                              std::vector<std::string> partial = {}) {
  plan::Layout proto;
  for (const std::vector<std::string> &axes : dims) {
    plan::Layout::DimAxes *d = proto.add_dims();
    for (const std::string &a : axes)
      d->add_axes(a);
  }
  for (const std::string &a : partial)
    proto.add_partial(a);
  std::string error;
  std::optional<layout::TensorLayout> layout =
      rt::layoutFromProto(proto, &mesh, shape, error);
  EXPECT_TRUE(layout) << error;
  return layout ? *layout : layout::TensorLayout();
}

std::string describe(const std::vector<rt::MessageBlock> &blocks) {
  std::string out;
  for (const rt::MessageBlock &b : blocks)
    out += std::to_string(b.from) + "->" + std::to_string(b.to) + " at " +
           rt::formatShape(b.offsets) + " " + rt::formatShape(b.shape) + "; ";
  return out;
}

// Proves the blocks of a [8, 4] tensor moving between stages on [dp=4]
// (rows split), [tp=2] (columns split) and [dp=2] (rows split): every
// receiver gets each block of its shard from exactly one holder, the one at
// its own position when that one holds it (so the replicated [tp=2] stage
// spreads its sends over both ranks), else the holders in turn.
TEST(SubmeshMessages, BlocksBetweenDifferentMeshes) {
  PlanBuilder b;
  b.pipelineOnSubmeshes({{{"dp", 4}}, {{"tp", 2}}, {{"dp", 2}}, {{"one", 1}}});
  rt::StageMap map = mapOf(b);
  ASSERT_EQ(map.numStages(), 4);
  EXPECT_EQ(map.ranks[1], (std::vector<int64_t>{4, 5}));
  rt::Shape shape{8, 4};
  layout::TensorLayout rows4 = layoutOf(map.meshes[0], {{"dp"}, {}}, shape);
  layout::TensorLayout cols2 = layoutOf(map.meshes[1], {{}, {"tp"}}, shape);
  layout::TensorLayout whole2 = layoutOf(map.meshes[1], {}, shape);
  layout::TensorLayout rows2 = layoutOf(map.meshes[2], {{"dp"}, {}}, shape);
  layout::TensorLayout whole1 = layoutOf(map.meshes[3], {}, shape);

  std::vector<rt::MessageBlock> blocks;
  // Rows to columns: each of the 2 receivers gets a [2, 2] block from each
  // of the 4 senders.
  ASSERT_EQ(
      rt::messageBlocks(map, nullptr, {0, &rows4}, {1, &cols2}, shape, blocks),
      "");
  EXPECT_EQ(describe(blocks),
            "0->4 at [0, 0] [2, 2]; 1->4 at [2, 0] [2, 2]; 2->4 at [4, 0] "
            "[2, 2]; 3->4 at [6, 0] [2, 2]; 0->5 at [0, 2] [2, 2]; 1->5 at "
            "[2, 2] [2, 2]; 2->5 at [4, 2] [2, 2]; 3->5 at [6, 2] [2, 2]; ");
  // Replicated to rows: each receiver from the sender at its own position.
  ASSERT_EQ(
      rt::messageBlocks(map, nullptr, {1, &whole2}, {2, &rows2}, shape, blocks),
      "");
  EXPECT_EQ(describe(blocks), "4->6 at [0, 0] [4, 4]; 5->7 at [4, 0] [4, 4]; ");
  // Replicated on 2 ranks to rows on 4: positions 2 and 3 have no sender of
  // their own, so the two holders take turns.
  ASSERT_EQ(
      rt::messageBlocks(map, nullptr, {1, &whole2}, {0, &rows4}, shape, blocks),
      "");
  EXPECT_EQ(describe(blocks), "4->0 at [0, 0] [2, 4]; 5->1 at [2, 0] [2, 4]; "
                              "4->2 at [4, 0] [2, 4]; 5->3 at [6, 0] [2, 4]; ");
  // Columns to one rank: both halves.
  ASSERT_EQ(
      rt::messageBlocks(map, nullptr, {1, &cols2}, {3, &whole1}, shape, blocks),
      "");
  EXPECT_EQ(describe(blocks), "4->8 at [0, 0] [8, 2]; 5->8 at [0, 2] [8, 2]; ");
  // One rank to rows on 4: the one holder sends every block.
  ASSERT_EQ(
      rt::messageBlocks(map, nullptr, {3, &whole1}, {0, &rows4}, shape, blocks),
      "");
  EXPECT_EQ(describe(blocks), "8->0 at [0, 0] [2, 4]; 8->1 at [2, 0] [2, 4]; "
                              "8->2 at [4, 0] [2, 4]; 8->3 at [6, 0] [2, 4]; ");
}

// Proves stages on one submesh with one layout exchange whole shards
// position by position (what a plan without stage meshes does), partial
// sums included, and that a partial sum cannot cross to another mesh.
TEST(SubmeshMessages, SameMeshIsShardByShardAndPartialsStayThere) {
  PlanBuilder b;
  b.pipelineOnSubmeshes({{{"dp", 2}}, {{"dp", 2}}, {{"tp", 2}}});
  rt::StageMap map = mapOf(b);
  rt::Shape shape{4, 2};
  layout::TensorLayout rows0 = layoutOf(map.meshes[0], {{"dp"}, {}}, shape);
  layout::TensorLayout rows1 = layoutOf(map.meshes[1], {{"dp"}, {}}, shape);
  layout::TensorLayout sum0 = layoutOf(map.meshes[0], {}, shape, {"dp"});
  layout::TensorLayout sum1 = layoutOf(map.meshes[1], {}, shape, {"dp"});
  layout::TensorLayout sum2 = layoutOf(map.meshes[2], {}, shape, {"tp"});
  std::vector<rt::MessageBlock> blocks;
  ASSERT_EQ(
      rt::messageBlocks(map, nullptr, {0, &rows0}, {1, &rows1}, shape, blocks),
      "");
  EXPECT_EQ(describe(blocks), "0->2 at [0, 0] [2, 2]; 1->3 at [2, 0] [2, 2]; ");
  ASSERT_EQ(
      rt::messageBlocks(map, nullptr, {0, &sum0}, {1, &sum1}, shape, blocks),
      "");
  EXPECT_EQ(describe(blocks), "0->2 at [0, 0] [4, 2]; 1->3 at [0, 0] [4, 2]; ");
  EXPECT_EQ(
      rt::messageBlocks(map, nullptr, {0, &sum0}, {2, &sum2}, shape, blocks),
      "a partial sum (laid out as [[], []] partial=[dp] on stage 0) "
      "crosses only to a stage on the same mesh with the same layout; "
      "reduce it before it is sent");
  EXPECT_NE(
      rt::messageBlocks(map, nullptr, {0, &sum0}, {1, &rows1}, shape, blocks),
      "");
}

//===----------------------------------------------------------------------===//
// A three-stage plan on 4, 2 and 2 ranks
//===----------------------------------------------------------------------===//

const std::vector<float> kW0 = iota(12, 0.5f, -2), kW1 = iota(8, 0.25f, -0.75f);

/// Stage 0 on [dp=4]: h = x w0, rows split, sent. Stage 1 on [tp=2]: h
/// received with its columns split, y = h w1 with w1's rows split (a
/// partial sum over tp), all-reduced; the loss against t; y sent on, the
/// loss sent to both other stages. Stage 2 on [dp=2]: y received with its
/// rows split, z = y + y, gathered.
plan::Plan threeStages() {
  PlanBuilder b;
  b.pipelineOnSubmeshes({{{"dp", 4}}, {{"tp", 2}}, {{"dp", 2}}});
  int32_t x = b.input("x", {8, 3}, {{"dp"}, {}});
  int32_t w0 = b.parameter("w0", {3, 4}, kW0);
  int32_t h = b.temp({8, 4}, {{"dp"}, {}});
  b.instruction("matmul", {x, w0}, {h}, "fc0");
  b.send(h, 1, 0).set_location("fc0");
  b.output("loss", b.recv({}, 1, 2));

  b.useStage(1);
  int32_t received = b.recv({8, 4}, 0, 0, {{}, {"tp"}});
  int32_t w1 = b.parameter("w1", {4, 2}, kW1, {{"tp"}, {}});
  int32_t partial = b.temp({8, 2}, {}, {"tp"});
  b.instruction("matmul", {received, w1}, {partial}, "fc1");
  int32_t y = b.allReduce(partial, {0}, {8, 2});
  int32_t t = b.input("t", {8, 2});
  int32_t loss = b.temp({});
  b.instruction("mse_loss", {y, t}, {loss}, "loss");
  b.send(y, 2, 1);
  b.send(loss, 0, 2);
  b.send(loss, 2, 3);
  b.output("y", y);
  b.output("loss", loss);

  b.useStage(2);
  int32_t yRows = b.recv({8, 2}, 1, 1, {{"dp"}, {}});
  int32_t doubled = b.temp({8, 2}, {{"dp"}, {}});
  b.instruction("add", {yRows, yRows}, {doubled}, "double");
  b.output("z", b.allGather(doubled, /*axis=*/0, /*dim=*/0, {8, 2}));
  b.output("loss", b.recv({}, 1, 3));
  return b.plan();
}

// Proves a plan whose stages run on 4, 2 and 2 ranks with different
// meshes computes what one device would: stage 1's y is x w0 w1 by hand
// (its all-reduce runs over its own mesh's axis 0), stage 2's z is twice
// that, every rank of every stage returns the last loss, and gatherState
// gives every rank the global w1 held split on stage 1.
TEST(SubmeshStages, ThreeStagesMatchHandComputation) {
  std::vector<float> x = iota(24, 0.25f, -2), t = iota(16, 0.5f, -3);
  std::vector<double> y = matmul(matmul(toDouble(x), toDouble(kW0), 8, 3, 4),
                                 toDouble(kW1), 8, 4, 2);
  std::vector<float> expectedY(y.begin(), y.end()), expectedZ;
  double squares = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    squares += (y[i] - t[i]) * (y[i] - t[i]);
    expectedZ.push_back(static_cast<float>(2 * y[i]));
  }
  float expectedLoss = static_cast<float>(squares / 16);
  std::string error = runRanks(threeStages(), 8, [&](RankRun &run) {
    rt::Executor &exec = *run.exec;
    int32_t stage = run.rank < 4 ? 0 : run.rank < 6 ? 1 : 2;
    EXPECT_EQ(exec.stage(), stage);
    EXPECT_EQ(exec.numStages(), 3);
    std::string e;
    ASSERT_TRUE(exec.setInput("x", viewOf(x, {8, 3}), e)) << e;
    ASSERT_TRUE(exec.setInput("t", viewOf(t, {8, 2}), e)) << e;
    for (int step = 0; step < 2; ++step)
      ASSERT_TRUE(exec.run(e)) << "rank " << run.rank << ": " << e;
    EXPECT_EQ(values(exec.output("loss")), std::vector<float>{expectedLoss})
        << "rank " << run.rank;
    if (stage == 1) {
      EXPECT_EQ(values(exec.output("y")), expectedY) << "rank " << run.rank;
    } else if (stage == 2) {
      EXPECT_EQ(values(exec.output("z")), expectedZ) << "rank " << run.rank;
    }
    const std::vector<rt::StateInfo> &state = exec.state();
    ASSERT_EQ(state.size(), 2u);
    EXPECT_EQ(state[1].name, "w1");
    rt::HostBuffer global;
    ASSERT_TRUE(exec.gatherState(state[1], global, e)) << e;
    EXPECT_EQ(values(global.view()), kW1) << "rank " << run.rank;
  });
  EXPECT_EQ(error, "");
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

TEST(SubmeshValidation, TheThreeStagePlanLoadsOnEveryRank) {
  for (int64_t r = 0; r < 8; ++r)
    EXPECT_EQ(loadError(threeStages(), 8, r), "") << "rank " << r;
}

TEST(SubmeshValidation, MeshesOnEveryStageOrNone) {
  plan::Plan p = threeStages();
  p.mutable_stages(2)->clear_mesh();
  EXPECT_EQ(loadError(p, 8),
            "invalid plan: 2 of the plan's 3 stages have a mesh of their "
            "own; stage meshes are given for every stage or for none");
}

TEST(SubmeshValidation, OneRankPerDeviceOfTheStageMesh) {
  plan::Plan p = threeStages();
  p.mutable_stages(1)->mutable_mesh()->mutable_axes(0)->set_size(3);
  p.mutable_stages(1)->add_ranks(6);
  p.mutable_stages(2)->clear_ranks();
  p.mutable_stages(2)->add_ranks(7);
  EXPECT_EQ(loadError(p, 8),
            "invalid plan: stage 2 lists 1 ranks, but its mesh [dp=2] has 2 "
            "devices; a stage lists one rank per device of its mesh");
}

TEST(SubmeshValidation, LayoutsNameTheStageMesh) {
  plan::Plan p = threeStages();
  // Stage 1's received h split over 'dp', an axis of stage 0's mesh only.
  p.mutable_stages(1)
      ->mutable_program()
      ->mutable_values(0)
      ->mutable_layout()
      ->mutable_dims(1)
      ->set_axes(0, "dp");
  EXPECT_NE(loadError(p, 8, 4).find("value #0: "), std::string::npos)
      << loadError(p, 8, 4);
  EXPECT_NE(loadError(p, 8, 4).find("'dp'"), std::string::npos)
      << loadError(p, 8, 4);
}

TEST(SubmeshValidation, PartialSumsDoNotCrossMeshes) {
  PlanBuilder b;
  b.pipelineOnSubmeshes({{{"tp", 2}}, {{"dp", 2}}});
  b.send(b.value(plan::Value::INPUT, "x", {2, 2}, {}, {"tp"}), 1, 0);
  b.useStage(1);
  b.output("y", b.allGather(b.recv({2, 2}, 0, 0, {{"dp"}, {}}), 0, 0, {2, 2}));
  EXPECT_EQ(loadError(b.plan(), 4, 2),
            "invalid plan: instruction #0 (recv): a partial sum (laid out as "
            "[[], []] partial=[tp] on stage 0) crosses only to a stage on the "
            "same mesh with the same layout; reduce it before it is sent");
}

} // namespace
