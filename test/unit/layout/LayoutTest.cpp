//===- LayoutTest.cpp - Unit tests of Mesh and TensorLayout ---------------===//

#include "common/layout/TensorLayout.h"

#include <gtest/gtest.h>

using namespace loom::layout;

namespace {

Mesh makeMesh(std::vector<MeshAxis> axes) {
  std::string error;
  std::optional<Mesh> mesh = Mesh::create(std::move(axes), error);
  EXPECT_TRUE(mesh) << error;
  return *mesh;
}

using Groups = std::vector<std::vector<int64_t>>;

} // namespace

// Proves ranks are row-major over the axes (last axis fastest) and that
// rank() inverts coordinates() on every rank of a [2,4] mesh.
TEST(MeshTest, RowMajorRanks) {
  Mesh mesh = makeMesh({{"dp", 2}, {"tp", 4}});
  EXPECT_EQ(mesh.numDevices(), 8);
  EXPECT_EQ(mesh.coordinates(5), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(mesh.coordinates(3), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(mesh.rank({1, 2}), 6);
  for (int64_t r = 0; r < mesh.numDevices(); ++r)
    EXPECT_EQ(mesh.rank(mesh.coordinates(r)), r);
  EXPECT_EQ(mesh.toString(), "[dp=2, tp=4]");
}

// Proves axis lookup by name finds each axis and reports a missing one.
TEST(MeshTest, AxisLookup) {
  Mesh mesh = makeMesh({{"dp", 2}, {"sp", 2}, {"tp", 2}});
  EXPECT_EQ(mesh.axisIndex("dp"), 0);
  EXPECT_EQ(mesh.axisIndex("tp"), 2);
  EXPECT_EQ(mesh.axisIndex("pp"), std::nullopt);
  EXPECT_EQ(mesh.coordinates(6), (std::vector<int64_t>{1, 1, 0}));
}

// Proves each invalid mesh is rejected with its exact message.
TEST(MeshTest, ValidationErrors) {
  std::string error;
  EXPECT_FALSE(Mesh::create({}, error));
  EXPECT_EQ(error, "a mesh needs at least one axis");
  EXPECT_FALSE(Mesh::create({{"dp", 2}, {"", 2}}, error));
  EXPECT_EQ(error, "mesh axis 1 has an empty name");
  EXPECT_FALSE(Mesh::create({{"dp", 2}, {"tp", 0}}, error));
  EXPECT_EQ(error, "mesh axis 'tp' has size 0; sizes must be at least 1");
  EXPECT_FALSE(Mesh::create({{"dp", 2}, {"dp", 4}}, error));
  EXPECT_EQ(error, "mesh axis name 'dp' is used twice");
}

// Proves comm groups for every axis set of a [2,3] mesh, including the
// member order row-major over the axes in the order they are listed.
TEST(MeshTest, CommGroups2x3) {
  Mesh mesh = makeMesh({{"dp", 2}, {"tp", 3}});
  EXPECT_EQ(commGroups(mesh, {}), (Groups{{0}, {1}, {2}, {3}, {4}, {5}}));
  EXPECT_EQ(commGroups(mesh, {0}), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(commGroups(mesh, {1}), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(commGroups(mesh, {0, 1}), (Groups{{0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(commGroups(mesh, {1, 0}), (Groups{{0, 3, 1, 4, 2, 5}}));
}

// Proves comm groups for every non-empty axis set of a [2,2,2] mesh.
TEST(MeshTest, CommGroups2x2x2) {
  Mesh mesh = makeMesh({{"a", 2}, {"b", 2}, {"c", 2}});
  EXPECT_EQ(commGroups(mesh, {0}), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(commGroups(mesh, {1}), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(commGroups(mesh, {2}), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(commGroups(mesh, {0, 1}), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(commGroups(mesh, {0, 2}), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(commGroups(mesh, {1, 2}), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(commGroups(mesh, {0, 1, 2}), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

// Proves local shapes and slice offsets of a 2-D split on a [2,4] mesh.
TEST(TensorLayoutTest, LocalShapeAndOffsets2x4) {
  Mesh mesh = makeMesh({{"dp", 2}, {"tp", 4}});
  TensorLayout layout = TensorLayout::of({{0}, {1}});
  std::vector<int64_t> shape{8, 16};
  EXPECT_EQ(layout.localShape(mesh, shape), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(layout.sliceOffsets(mesh, shape, 0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(layout.sliceOffsets(mesh, shape, 5), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(layout.sliceOffsets(mesh, shape, 7), (std::vector<int64_t>{4, 12}));
  EXPECT_EQ(layout.sliceOffsets(mesh, shape, 2), (std::vector<int64_t>{0, 8}));
  EXPECT_FALSE(layout.isReplicated());
  EXPECT_TRUE(TensorLayout::replicated(2).isReplicated());
  EXPECT_FALSE(TensorLayout::of({{}, {}}, {1}).isReplicated());
}

// Proves that with two axes on one dimension the first listed is outermost:
// [[dp, tp], []] and [[tp, dp], []] place rank 5 and 6 differently.
TEST(TensorLayoutTest, MultiAxisDimension) {
  Mesh mesh = makeMesh({{"dp", 2}, {"tp", 4}});
  std::vector<int64_t> shape{16, 3};
  TensorLayout dpTp = TensorLayout::of({{0, 1}, {}});
  TensorLayout tpDp = TensorLayout::of({{1, 0}, {}});
  EXPECT_EQ(dpTp.localShape(mesh, shape), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tpDp.localShape(mesh, shape), (std::vector<int64_t>{2, 3}));
  // Rank 5 = (dp 1, tp 1): shard 1*4+1 = 5 vs 1*2+1 = 3.
  EXPECT_EQ(dpTp.sliceOffsets(mesh, shape, 5), (std::vector<int64_t>{10, 0}));
  EXPECT_EQ(tpDp.sliceOffsets(mesh, shape, 5), (std::vector<int64_t>{6, 0}));
  // Rank 6 = (dp 1, tp 2): shard 6 vs 2*2+1 = 5.
  EXPECT_EQ(dpTp.sliceOffsets(mesh, shape, 6), (std::vector<int64_t>{12, 0}));
  EXPECT_EQ(tpDp.sliceOffsets(mesh, shape, 6), (std::vector<int64_t>{10, 0}));
  EXPECT_EQ(dpTp.toString(mesh), "[[dp, tp], []]");
}

// Proves local shapes and offsets on a [2,2,2] mesh with a rank-3 tensor,
// one dimension split over two axes and one axis partial.
TEST(TensorLayoutTest, LocalShapeAndOffsets2x2x2) {
  Mesh mesh = makeMesh({{"a", 2}, {"b", 2}, {"c", 2}});
  std::vector<int64_t> shape{8, 8, 8};
  TensorLayout layout = TensorLayout::of({{2}, {0, 1}, {}});
  EXPECT_EQ(layout.localShape(mesh, shape), (std::vector<int64_t>{4, 2, 8}));
  // Rank 6 = (1,1,0); rank 3 = (0,1,1).
  EXPECT_EQ(layout.sliceOffsets(mesh, shape, 6),
            (std::vector<int64_t>{0, 6, 0}));
  EXPECT_EQ(layout.sliceOffsets(mesh, shape, 3),
            (std::vector<int64_t>{4, 2, 0}));
  TensorLayout partial = TensorLayout::of({{}, {2}, {}}, {0});
  EXPECT_EQ(partial.localShape(mesh, shape), (std::vector<int64_t>{8, 4, 8}));
  EXPECT_EQ(partial.sliceOffsets(mesh, shape, 7),
            (std::vector<int64_t>{0, 4, 0}));
  EXPECT_EQ(partial.toString(mesh), "[[], [c], []] partial=[a]");
}

// Proves the printer's format, with and without partial axes.
TEST(TensorLayoutTest, Printer) {
  Mesh mesh = makeMesh({{"dp", 2}, {"tp", 4}});
  EXPECT_EQ(TensorLayout::of({{0}, {}, {1}}).toString(mesh),
            "[[dp], [], [tp]]");
  EXPECT_EQ(TensorLayout::of({{0}, {}, {}}, {1}).toString(mesh),
            "[[dp], [], []] partial=[tp]");
  EXPECT_EQ(TensorLayout::replicated(0).toString(mesh), "[]");
}

// Proves each invalid layout is rejected with its exact message, uneven
// splits naming the dimension, and that a valid one verifies.
TEST(TensorLayoutTest, ValidationErrors) {
  Mesh mesh = makeMesh({{"dp", 2}, {"tp", 4}});
  std::string error;
  EXPECT_TRUE(TensorLayout::of({{0}, {1}}).verify(mesh, {8, 8}, error))
      << error;
  EXPECT_FALSE(TensorLayout::of({{0}}).verify(mesh, {8, 8}, error));
  EXPECT_EQ(error, "layout has 1 dimensions but the tensor has rank 2");
  EXPECT_FALSE(TensorLayout::of({{0}, {2}}).verify(mesh, {8, 8}, error));
  EXPECT_EQ(error, "dimension 1 uses mesh axis 2, but the mesh has 2 axes");
  EXPECT_FALSE(TensorLayout::of({{}, {}}, {-1}).verify(mesh, {8, 8}, error));
  EXPECT_EQ(error,
            "the partial set uses mesh axis -1, but the mesh has 2 axes");
  EXPECT_FALSE(TensorLayout::of({{0}, {0}}).verify(mesh, {8, 8}, error));
  EXPECT_EQ(error, "mesh axis 'dp' is used twice in the layout");
  EXPECT_FALSE(TensorLayout::of({{1}, {}}, {1}).verify(mesh, {8, 8}, error));
  EXPECT_EQ(error, "mesh axis 'tp' is used twice in the layout");
  EXPECT_FALSE(TensorLayout::of({{}, {}}, {0, 0}).verify(mesh, {8, 8}, error));
  EXPECT_EQ(error, "mesh axis 'dp' is used twice in the layout");
  EXPECT_FALSE(TensorLayout::of({{}, {1}}).verify(mesh, {8, 6}, error));
  EXPECT_EQ(error, "dimension 1 of size 6 is not divisible by 4 (the product "
                   "of mesh axes [tp]); uneven splits are not supported");
  EXPECT_FALSE(TensorLayout::of({{0, 1}, {}}).verify(mesh, {12, 8}, error));
  EXPECT_EQ(error, "dimension 0 of size 12 is not divisible by 8 (the product "
                   "of mesh axes [dp, tp]); uneven splits are not supported");
}

// Proves dimOf / isUnused / isPartial classify every axis of a layout.
TEST(TensorLayoutTest, AxisQueries) {
  Mesh mesh = makeMesh({{"a", 2}, {"b", 2}, {"c", 2}});
  TensorLayout layout = TensorLayout::of({{}, {2, 0}}, {1});
  EXPECT_EQ(layout.dimOf(0), 1);
  EXPECT_EQ(layout.dimOf(2), 1);
  EXPECT_EQ(layout.dimOf(1), std::nullopt);
  EXPECT_TRUE(layout.isPartial(1));
  EXPECT_FALSE(layout.isUnused(1));
  EXPECT_TRUE(TensorLayout::of({{}, {}}).isUnused(0));
  EXPECT_EQ(layout.splitCount(mesh, 1), 4);
}
