//===- RedistributionTest.cpp - Hand-derived plans and step semantics -----===//

#include "common/layout/Redistribution.h"
#include "test/unit/layout/Simulator.h"

#include <gtest/gtest.h>

#include <ostream>

using namespace loom::layout;

namespace {

Mesh makeMesh(std::vector<MeshAxis> axes) {
  std::string error;
  std::optional<Mesh> mesh = Mesh::create(std::move(axes), error);
  EXPECT_TRUE(mesh) << error;
  return *mesh;
}

/// The planner's plan from `source` to `target` on `mesh` for an f32 tensor
/// of `shape`, checked by simulation.
RedistributionPlan planAndRun(const Mesh &mesh, const TensorLayout &source,
                              const TensorLayout &target,
                              const std::vector<int64_t> &shape) {
  std::string error;
  std::optional<RedistributionPlan> p =
      plan(mesh, source, target, shape, /*elementBytes=*/4, error);
  EXPECT_TRUE(p) << error;
  if (!p)
    return {};
  sim::Tensor global = sim::makeGlobal(shape, 7);
  std::optional<sim::Tensor> out =
      sim::simulatePlan(mesh, *p, global, 11, error);
  EXPECT_TRUE(out) << error;
  if (out) {
    EXPECT_EQ(out->data, global.data) << p->toString(mesh, shape);
  }
  return *p;
}

class PlannerOn2x4 : public ::testing::Test {
protected:
  Mesh mesh = makeMesh({{"dp", 2}, {"tp", 4}});
  // 8 x 16 f32: 512 bytes in all.
  std::vector<int64_t> shape{8, 16};
};

} // namespace

namespace loom::layout {
/// Lets gtest print steps readably in failure messages.
void PrintTo(const Step &step, std::ostream *os) {
  *os << "step(kind " << static_cast<int>(step.kind) << ", axes";
  for (int a : step.axes)
    *os << " " << a;
  *os << ", dim " << step.dim << ", toDim " << step.toDim << ")";
}
} // namespace loom::layout

// Proves moving dp from dim 0 to dim 1 is one all-to-all costing
// (2-1)/2 of the 4x16 f32 local buffer (256 bytes) = 128 bytes.
TEST_F(PlannerOn2x4, MoveAxisIsOneAllToAll) {
  RedistributionPlan p = planAndRun(mesh, TensorLayout::of({{0}, {}}),
                                    TensorLayout::of({{}, {0}}), shape);
  EXPECT_EQ(p.steps, std::vector<Step>{Step::allToAll(0, 0, 1)});
  EXPECT_DOUBLE_EQ(p.cost.bytes, 128.0);
}

// Proves a partial axis that the target splits, with no idle mesh axis, is
// one reduce-scatter: 3/4 of the 4x16 f32 local buffer = 192 bytes.
TEST_F(PlannerOn2x4, PartialToSplitIsReduceScatter) {
  RedistributionPlan p = planAndRun(mesh, TensorLayout::of({{0}, {}}, {1}),
                                    TensorLayout::of({{0}, {1}}), shape);
  EXPECT_EQ(p.steps, std::vector<Step>{Step::reduceScatter(1, 1)});
  EXPECT_DOUBLE_EQ(p.cost.bytes, 192.0);
}

// Proves a partial axis the target replicates, with no idle mesh axis, is
// one all-reduce (2*3/4 of 256 bytes = 384), preferred over the equally
// many bytes of reduce-scatter + all-gather because it is one collective.
TEST_F(PlannerOn2x4, PartialToReplicatedIsAllReduce) {
  RedistributionPlan p = planAndRun(mesh, TensorLayout::of({{0}, {}}, {1}),
                                    TensorLayout::of({{0}, {}}), shape);
  EXPECT_EQ(p.steps, std::vector<Step>{Step::allReduce({1})});
  EXPECT_DOUBLE_EQ(p.cost.bytes, 384.0);
}

// Proves the planner uses an idle (replica) axis hierarchically under the
// bytes-per-device model: resolving partial tp of a tensor replicated over
// dp costs 768 bytes as one all-reduce, but 640 as local_split(dp) (0),
// all_reduce(tp) on half (2*3/4*256 = 384), all_gather(dp) (1/2*512 = 256).
// The same trick makes partial -> [[], [tp]] 256 bytes instead of 384.
TEST_F(PlannerOn2x4, IdleAxisMakesHierarchicalPlans) {
  RedistributionPlan p = planAndRun(mesh, TensorLayout::of({{}, {}}, {1}),
                                    TensorLayout::of({{}, {}}), shape);
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].kind, StepKind::LocalSplit);
  EXPECT_EQ(p.steps[0].axes, std::vector<int>{0});
  EXPECT_EQ(p.steps[1], Step::allReduce({1}));
  EXPECT_EQ(p.steps[2], Step::allGather(0, p.steps[0].dim));
  EXPECT_DOUBLE_EQ(p.cost.bytes, 640.0);
  p = planAndRun(mesh, TensorLayout::of({{}, {}}, {1}),
                 TensorLayout::of({{}, {1}}), shape);
  EXPECT_DOUBLE_EQ(p.cost.bytes, 256.0);
  std::string error;
  std::optional<RedistributionPlan> naive =
      naivePlan(mesh, TensorLayout::of({{}, {}}, {1}),
                TensorLayout::of({{}, {1}}), shape, 4, error);
  ASSERT_TRUE(naive) << error;
  EXPECT_DOUBLE_EQ(naive->cost.bytes, 768.0);
}

// Proves two partial axes are resolved by one all-reduce over both (group
// of 8: 2*7/8*512 = 896 bytes), cheaper than two separate all-reduces.
TEST_F(PlannerOn2x4, TwoPartialAxesOneAllReduce) {
  RedistributionPlan p = planAndRun(mesh, TensorLayout::of({{}, {}}, {0, 1}),
                                    TensorLayout::of({{}, {}}), shape);
  EXPECT_EQ(p.steps, std::vector<Step>{Step::allReduce({0, 1})});
  EXPECT_DOUBLE_EQ(p.cost.bytes, 896.0);
}

// Proves dropping a split is one all-gather costing 3/4 of its 512-byte
// output = 384 bytes.
TEST_F(PlannerOn2x4, DropSplitIsAllGather) {
  RedistributionPlan p = planAndRun(mesh, TensorLayout::of({{1}, {}}),
                                    TensorLayout::of({{}, {}}), shape);
  EXPECT_EQ(p.steps, std::vector<Step>{Step::allGather(1, 0)});
  EXPECT_DOUBLE_EQ(p.cost.bytes, 384.0);
}

// Proves adding splits and partial axes needs no communication.
TEST_F(PlannerOn2x4, ReplicatedToAnythingIsFree) {
  RedistributionPlan p = planAndRun(mesh, TensorLayout::of({{}, {}}),
                                    TensorLayout::of({{1, 0}, {}}), shape);
  EXPECT_EQ(p.steps, (std::vector<Step>{Step::localSplit(1, 0),
                                        Step::localSplit(0, 0)}));
  EXPECT_DOUBLE_EQ(p.cost.bytes, 0.0);
  p = planAndRun(mesh, TensorLayout::of({{}, {}}),
                 TensorLayout::of({{}, {1}}, {0}), shape);
  EXPECT_EQ(p.cost.bytes, 0.0);
  EXPECT_EQ(p.cost.collectives, 0);
  EXPECT_EQ(p.steps.size(), 2u);
}

// Proves the identity pair has the empty plan.
TEST_F(PlannerOn2x4, IdentityIsEmpty) {
  TensorLayout l = TensorLayout::of({{0}, {1}});
  EXPECT_TRUE(planAndRun(mesh, l, l, shape).steps.empty());
}

// Proves invalid inputs are reported rather than planned.
TEST_F(PlannerOn2x4, InvalidInputs) {
  std::string error;
  EXPECT_FALSE(plan(mesh, TensorLayout::of({{1}, {}}),
                    TensorLayout::of({{}, {}}), {6, 16}, 4, error));
  EXPECT_EQ(error, "invalid source layout: dimension 0 of size 6 is not "
                   "divisible by 4 (the product of mesh axes [tp]); uneven "
                   "splits are not supported");
  EXPECT_FALSE(plan(mesh, TensorLayout::of({{}, {}}), TensorLayout::of({{}}),
                    shape, 4, error));
  EXPECT_EQ(error, "invalid target layout: layout has 1 dimensions but the "
                   "tensor has rank 2");
}

// Proves applyStep rejects steps whose preconditions fail, word for word.
TEST_F(PlannerOn2x4, StepPreconditions) {
  std::string error;
  TensorLayout l = TensorLayout::of({{0, 1}, {}});
  EXPECT_FALSE(applyStep(mesh, l, Step::allGather(0, 0), shape, error));
  EXPECT_EQ(error, "all_gather(dp, dim 0): mesh axis 'dp' is not the "
                   "innermost split of dimension 0");
  EXPECT_FALSE(applyStep(mesh, l, Step::allReduce({1}), shape, error));
  EXPECT_EQ(error, "all_reduce(tp): mesh axis 'tp' is not partial");
  EXPECT_FALSE(applyStep(mesh, l, Step::localSplit(1, 1), shape, error));
  EXPECT_EQ(error, "local_split(tp, dim 1): mesh axis 'tp' is already used "
                   "by the layout");
  EXPECT_FALSE(applyStep(mesh, TensorLayout::of({{}, {}}),
                         Step::localSplit(1, 0), {6, 16}, error));
  EXPECT_EQ(error, "local_split(tp, dim 0): the result is invalid: dimension "
                   "0 of size 6 is not divisible by 4 (the product of mesh "
                   "axes [tp]); uneven splits are not supported");
  std::optional<TensorLayout> next =
      applyStep(mesh, l, Step::allToAll(1, 0, 1), shape, error);
  ASSERT_TRUE(next) << error;
  EXPECT_EQ(next->toString(mesh), "[[dp], [tp]]");
}

// Proves the simulator's all-to-all by hand on a 1-axis mesh of 2: rows
// [[0,1],[2,3]] split by rows become columns [0,2] and [1,3].
TEST(SimulatorTest, AllToAllByHand) {
  Mesh mesh = makeMesh({{"x", 2}});
  sim::Tensor global{{2, 2}, {0, 1, 2, 3}};
  TensorLayout layout = TensorLayout::of({{0}, {}});
  sim::RankBuffers buffers = sim::materialize(mesh, layout, global, 1);
  EXPECT_EQ(buffers, (sim::RankBuffers{{0, 1}, {2, 3}}));
  std::string error;
  ASSERT_TRUE(sim::executeStep(mesh, layout, Step::allToAll(0, 0, 1),
                               global.shape, buffers, error))
      << error;
  EXPECT_EQ(buffers, (sim::RankBuffers{{0, 2}, {1, 3}}));
}

// Proves partial materialisation holds summands (not copies) that add up
// to the value, and that make_partial zeroes every rank but coordinate 0.
TEST(SimulatorTest, PartialSummands) {
  Mesh mesh = makeMesh({{"x", 2}});
  sim::Tensor global{{2}, {1000, 2000}};
  TensorLayout partial = TensorLayout::of({{}}, {0});
  sim::RankBuffers buffers = sim::materialize(mesh, partial, global, 3);
  EXPECT_NE(buffers[0], global.data);
  EXPECT_EQ(buffers[0][0] + buffers[1][0], 1000);
  EXPECT_EQ(buffers[0][1] + buffers[1][1], 2000);
  TensorLayout replicated = TensorLayout::of({{}});
  buffers = sim::materialize(mesh, replicated, global, 3);
  std::string error;
  ASSERT_TRUE(sim::executeStep(mesh, replicated, Step::makePartial(0),
                               global.shape, buffers, error));
  EXPECT_EQ(buffers, (sim::RankBuffers{{1000, 2000}, {0, 0}}));
}

// Proves reconstruction rejects replicas that disagree.
TEST(SimulatorTest, ReplicasMustAgree) {
  Mesh mesh = makeMesh({{"x", 2}});
  std::string error;
  EXPECT_FALSE(sim::reconstruct(mesh, TensorLayout::of({{}}), {2},
                                {{1, 2}, {1, 3}}, error));
  EXPECT_EQ(error, "rank 1 differs from its replica rank 0");
}
