//===- ValidationTest.cpp - Corrupt partitioned plans are clear errors ----===//
//
// Each test breaks one rule of partitioned plans (rank count, mesh, layouts,
// collective shapes, replicated outputs) and checks the executor's message
// word for word: what is wrong, which value or instruction, what to change.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilder.h"
#include "StagedBackend.h"

#include "gtest/gtest.h"

using namespace loom;
using namespace loom::test;

namespace {

using Axes = std::vector<std::pair<std::string, int64_t>>;

/// x [8, 4] split on rows over dp, gathered into y: a valid plan on
/// [dp=2, tp=2] that the tests below break.
PlanBuilder gatherPlan() {
  PlanBuilder b({{"dp", 2}, {"tp", 2}});
  int32_t x = b.input("x", {8, 4}, {{"dp"}, {}});
  b.output("y", b.allGather(x, 0, 0, {8, 4}));
  b.program().mutable_instructions(0)->set_location("gather_y");
  return b;
}

TEST(PartitionedPlanValidation, TheBasePlanLoads) {
  EXPECT_EQ(loadError(gatherPlan().plan(), 4, 2), "");
}

TEST(PartitionedPlanValidation, WrongRankCount) {
  plan::Plan plan = gatherPlan().plan();
  EXPECT_EQ(loadError(plan), "this plan is partitioned over 4 devices [dp=2, "
                             "tp=2]; run it with --ranks 4 or under mpirun "
                             "-np 4");
  EXPECT_EQ(loadError(plan, 2),
            "this plan is partitioned over 4 devices [dp=2, tp=2]; run it "
            "with --ranks 4 or under mpirun -np 4 (the communicator has 2 "
            "ranks)");
}

TEST(PartitionedPlanValidation, SingleDevicePlanOnSeveralRanks) {
  PlanBuilder b;
  b.output("y", b.input("x", {2, 2}));
  EXPECT_EQ(loadError(b.plan()), "");
  EXPECT_EQ(loadError(b.plan(), 2),
            "this plan runs on one device, but the communicator has 2 ranks; "
            "run it with --ranks 1, or compile it for a mesh of 2 devices");
}

TEST(PartitionedPlanValidation, RankDisagreesWithItsCommunicator) {
  plan::Plan plan = gatherPlan().plan();
  std::unique_ptr<rt::Backend> backend = createTestBackend();
  auto comms = rt::createThreadsCommunicators(4);
  std::string error;
  EXPECT_FALSE(
      rt::Executor::create(plan, *backend, error, {1, comms[2].get()}));
  EXPECT_EQ(error, "rank 1 was given a communicator of rank 2");
}

TEST(PartitionedPlanValidation, InvalidMesh) {
  plan::Plan plan = gatherPlan().plan();
  plan.mutable_mesh()->mutable_axes(1)->set_name("dp");
  EXPECT_EQ(loadError(plan, 4),
            "invalid plan: the mesh is invalid: mesh axis name 'dp' is used "
            "twice");
  plan = gatherPlan().plan();
  plan.mutable_mesh()->mutable_axes(1)->set_size(0);
  EXPECT_EQ(loadError(plan, 4),
            "invalid plan: mesh axis 'tp' has size 0; axis sizes must be at "
            "least 1 and the mesh at most 1048576 devices");
  plan.mutable_mesh()->mutable_axes(1)->set_size(int64_t(1) << 40);
  EXPECT_EQ(loadError(plan, 4),
            "invalid plan: mesh axis 'tp' has size 1099511627776; axis sizes "
            "must be at least 1 and the mesh at most 1048576 devices");
}

TEST(PartitionedPlanValidation, LayoutDoesNotDivideTheShape) {
  PlanBuilder b({{"dp", 2}});
  b.output("y", b.allGather(b.input("x", {3, 4}, {{"dp"}, {}}), 0, 0, {6, 4}));
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: value #0 ('x'): layout [[dp], []] on mesh [dp=2]: "
            "dimension 0 of size 3 is not divisible by 2 (the product of mesh "
            "axes [dp]); uneven splits are not supported");
}

TEST(PartitionedPlanValidation, UnknownAxisName) {
  PlanBuilder b({{"dp", 2}});
  b.output("y", b.input("x", {4, 4}, {{}, {"tp"}}));
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: value #0 ('x'): the layout names mesh axis 'tp', "
            "which the mesh [dp=2] does not have");
  PlanBuilder single;
  single.output("y", single.input("x", {4, 4}, {{"dp"}, {}}));
  EXPECT_EQ(loadError(single.plan()),
            "invalid plan: value #0 ('x'): the layout names mesh axis 'dp', "
            "but the plan has no mesh");
}

TEST(PartitionedPlanValidation, AxisUsedTwice) {
  PlanBuilder b({{"dp", 2}, {"tp", 2}});
  b.value(plan::Value::PARAMETER, "w", {4, 4}, {{"dp"}, {"dp"}});
  b.program().mutable_values(0)->set_data(std::string(4 * 4 * 4, '\0'));
  EXPECT_EQ(loadError(b.plan(), 4),
            "invalid plan: value #0 ('w'): layout [[dp], [dp]] on mesh [dp=2, "
            "tp=2]: mesh axis 'dp' is used twice in the layout");
}

TEST(PartitionedPlanValidation, LayoutRankMismatch) {
  PlanBuilder b({{"dp", 2}});
  b.input("x", {4, 4}, {{"dp"}, {}, {}});
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: value #0 ('x'): the layout has 3 dimensions but "
            "the tensor has rank 2");
}

TEST(PartitionedPlanValidation, LocalShapeDisagreesWithLayout) {
  PlanBuilder b({{"dp", 2}});
  b.input("x", {8, 4}, {{"dp"}, {}});
  // Claim the whole tensor locally (bytes adjusted, so only the layout rule
  // can catch it).
  plan::Value *x = b.program().mutable_values(0);
  x->mutable_type()->set_shape(0, 8);
  x->set_bytes(8 * 4 * 4);
  b.program().set_arena_bytes(8 * 4 * 4);
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: value #0 ('x') has local shape [8, 4], but its "
            "global shape [8, 4] laid out as [[dp], []] on mesh [dp=2] gives "
            "[4, 4]");
}

TEST(PartitionedPlanValidation, ParameterDataMustBeGlobal) {
  PlanBuilder b({{"dp", 2}});
  b.parameter("w", {4, 2}, std::vector<float>(4), {{"dp"}, {}});
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: value #0 ('w') has 16 bytes of data but needs 32 "
            "(its global type)");
}

TEST(PartitionedPlanValidation, ConstantsMustBeReplicated) {
  PlanBuilder b({{"dp", 2}});
  b.value(plan::Value::CONSTANT, "", {4}, {{"dp"}});
  b.program().mutable_values(0)->set_data(std::string(16, '\0'));
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: value #0 is laid out as [[dp]], but constants and "
            "hyperparameters must be replicated");
}

TEST(PartitionedPlanValidation, SplitOutput) {
  PlanBuilder b({{"dp", 2}});
  int32_t x = b.input("x", {8, 4}, {{"dp"}, {}});
  b.output("y", x);
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: output 'y' (value #0) is laid out as [[dp], []]; "
            "model outputs must be replicated on every rank");
  PlanBuilder p({{"dp", 2}});
  int32_t in = p.input("x", {4});
  int32_t s = p.temp({4}, {}, {"dp"});
  p.instruction("neg", {in}, {s});
  p.output("y", s);
  EXPECT_EQ(loadError(p.plan(), 2),
            "invalid plan: output 'y' (value #1) is laid out as [[]] "
            "partial=[dp]; model outputs must be replicated on every rank");
}

TEST(PartitionedPlanValidation, BadCollectiveShape) {
  PlanBuilder b = gatherPlan();
  // y claims [4, 4]: all_gather over dp gives [8, 4].
  plan::Value *y = b.program().mutable_values(1);
  for (plan::TensorType *t : {y->mutable_type(), y->mutable_global_type()})
    t->set_shape(0, 4);
  y->set_bytes(4 * 4 * 4);
  EXPECT_EQ(loadError(b.plan(), 4),
            "invalid plan: instruction #0 (all_gather at gather_y): result is "
            "f32[4, 4] but all_gather over mesh axis 'dp' (size 2) gives "
            "f32[8, 4]");
}

TEST(PartitionedPlanValidation, BadCollectiveAttributes) {
  auto errorWith = [](const std::function<void(plan::Instruction &)> &edit) {
    PlanBuilder b = gatherPlan();
    edit(*b.program().mutable_instructions(0));
    return loadError(b.plan(), 4);
  };
  std::string at = "invalid plan: instruction #0 (all_gather at gather_y): ";
  EXPECT_EQ(errorWith([](plan::Instruction &i) {
              i.mutable_attributes(0)->set_int_value(2);
            }),
            at + "mesh axis 2 is out of range (the mesh has 2 axes)");
  EXPECT_EQ(errorWith([](plan::Instruction &i) {
              i.mutable_attributes(1)->set_int_value(2);
            }),
            at + "dim 2 is out of range for an operand of rank 2");
  EXPECT_EQ(errorWith([](plan::Instruction &i) {
              i.mutable_attributes()->RemoveLast();
            }),
            at + "needs the integer attribute 'dim'");
  EXPECT_EQ(errorWith([](plan::Instruction &i) {
              i.mutable_attributes(0)->set_string_value("dp");
            }),
            at + "attribute 'axis' must be an integer");

  // reduce_scatter of a dimension the group size does not divide.
  PlanBuilder b({{"dp", 2}});
  int32_t x = b.input("x", {3, 4});
  // The result's own layout is consistent (replicated [1, 4]): only the
  // collective's rule can catch it.
  b.reduceScatter(x, 0, 0, {1, 4});
  EXPECT_EQ(loadError(b.plan(), 2),
            "invalid plan: instruction #0 (reduce_scatter): dimension 0 of "
            "size 3 is not divisible by the size of mesh axis 'dp' (size 2)");

  // all_reduce over an axis listed twice, and of booleans.
  PlanBuilder r({{"dp", 2}});
  r.allReduce(r.input("x", {4}), {0, 0}, {4});
  EXPECT_EQ(loadError(r.plan(), 2),
            "invalid plan: instruction #0 (all_reduce): mesh axis 'dp' (size "
            "2) is listed twice");
  PlanBuilder bools({{"dp", 2}});
  int32_t flag =
      bools.value(plan::Value::INPUT, "f", {4}, {}, {}, rt::DType::Bool);
  int32_t out =
      bools.value(plan::Value::TEMPORARY, "", {4}, {}, {}, rt::DType::Bool);
  PlanBuilder::setInts(bools.instruction("all_reduce", {flag}, {out}), "axes",
                       {0});
  EXPECT_EQ(loadError(bools.plan(), 2),
            "invalid plan: instruction #0 (all_reduce): cannot sum elements "
            "of type bool");
}

// Proves an all_gather along an inner dimension packs through scratch the
// plan places in its step arena, and that a plan whose scratch is missing,
// outside the arena, over a live value or on an instruction that needs
// none is rejected, naming the instruction.
TEST(PartitionedPlanValidation, CollectiveScratchIsInTheMemoryPlan) {
  PlanBuilder b({{"dp", 2}, {"tp", 2}});
  // x [4, 8] split on columns over tp: each rank holds [4, 4] (64 bytes);
  // gathering columns interleaves the chunks through 128 bytes of scratch.
  int32_t x = b.input("x", {4, 8}, {{}, {"tp"}});
  b.output("y", b.allGather(x, 1, 1, {4, 8}));
  b.program().mutable_instructions(0)->set_location("gather_y");
  const plan::Plan valid = b.plan();
  const plan::Instruction &gather = valid.stages(0).program().instructions(0);
  EXPECT_EQ(gather.scratch_bytes(), 128);
  EXPECT_EQ(loadError(valid, 4), "");

  auto errorWith = [&](const std::function<void(plan::Program &)> &edit) {
    plan::Plan copy = valid;
    edit(*copy.mutable_stages(0)->mutable_program());
    return loadError(copy, 4);
  };
  std::string at = "invalid plan: instruction #0 (all_gather at gather_y): ";
  EXPECT_EQ(errorWith([](plan::Program &p) {
              p.mutable_instructions(0)->set_scratch_bytes(0);
            }),
            at + "needs 128 bytes of scratch in the step arena to pack its "
                 "chunks, but the plan gives it 0; recompile the model");
  EXPECT_EQ(
      errorWith([](plan::Program &p) {
        p.mutable_instructions(0)->set_scratch_offset(p.arena_bytes() - 64);
      }),
      at + "its scratch (128 bytes at offset " +
          std::to_string(gather.scratch_offset() + 64) +
          ") is outside the step arena (" +
          std::to_string(valid.stages(0).program().arena_bytes()) + " bytes)");
  // Over y, which the gather writes while its scratch is live.
  const plan::Value &y = valid.stages(0).program().values(1);
  std::string overlap = errorWith([&](plan::Program &p) {
    p.mutable_instructions(0)->set_scratch_offset(y.offset());
  });
  EXPECT_NE(overlap.find("the memory plan overlaps value #1 (bytes [" +
                         std::to_string(y.offset()) + ", " +
                         std::to_string(y.offset() + 128) +
                         "), instructions 0 to 1) and the scratch of "
                         "instruction #0 (bytes [" +
                         std::to_string(y.offset()) + ", " +
                         std::to_string(y.offset() + 128) +
                         "), instructions 0 to 0) while both are live"),
            std::string::npos)
      << overlap;

  // Gathering rows packs nothing: scratch there is an error.
  plan::Plan rows = gatherPlan().plan();
  rows.mutable_stages(0)
      ->mutable_program()
      ->mutable_instructions(0)
      ->set_scratch_bytes(64);
  EXPECT_EQ(loadError(rows, 4),
            "invalid plan: instruction #0 (all_gather at gather_y): has 64 "
            "bytes of scratch but needs none");
}

TEST(PartitionedPlanValidation, CollectiveWithoutMesh) {
  PlanBuilder b;
  b.output("y", b.allReduce(b.input("x", {4}), {0}, {4}));
  EXPECT_EQ(loadError(b.plan()),
            "invalid plan: instruction #0 (all_reduce): a collective needs a "
            "mesh, and the plan has none");
}

// Proves a one-device mesh runs collectives without a communicator (the
// executor makes a one-rank one), as the identity.
TEST(PartitionedPlanValidation, OneDeviceMeshRunsCollectives) {
  PlanBuilder b({{"dp", 1}});
  b.output("y", b.allReduce(b.input("x", {3}, {{"dp"}}), {0}, {3}));
  std::unique_ptr<rt::Backend> backend = createTestBackend();
  std::string error;
  auto exec = rt::Executor::create(b.plan(), *backend, error);
  ASSERT_TRUE(exec) << error;
  std::vector<float> x = {1, 2, 3};
  ASSERT_TRUE(exec->setInput("x", {rt::DType::F32, {3}, x.data()}, error));
  ASSERT_TRUE(exec->run(error)) << error;
  const float *y = exec->output("y").as<float>();
  EXPECT_EQ(std::vector<float>(y, y + 3), x);
}

} // namespace
