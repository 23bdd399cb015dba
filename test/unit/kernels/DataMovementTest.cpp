//===- DataMovementTest.cpp - transpose, reshape, broadcast, gather, ... --===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <algorithm>
#include <numeric>

namespace loom::rt::test {
namespace {

class DataMovementTest : public KernelTest {};

const std::vector<DType> kAllTypes = {DType::F32, DType::F16, DType::BF16,
                                      DType::I32, DType::I64, DType::Bool};

// Proves transpose moves every element to its permuted position for all
// element types and every permutation of ranks 1 to 4, plus a large one.
TEST_P(DataMovementTest, Transpose) {
  std::vector<Shape> shapes = {{5}, {3, 4}, {2, 3, 4}, {2, 1, 3, 5}};
  for (DType dtype : kAllTypes)
    for (const Shape &shape : shapes) {
      std::vector<int64_t> perm(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(shape) +
                     " perm " + formatShape(perm));
        HostBuffer in = randomTensor(dtype, shape, rng, -100, 100);
        Shape os;
        for (int64_t p : perm)
          os.push_back(shape[p]);
        std::vector<double> iv = values(in), expected(iv.size());
        for (int64_t i = 0; i < numElements(os); ++i) {
          std::vector<int64_t> idx = unravel(i, os), src(shape.size());
          for (size_t d = 0; d < perm.size(); ++d)
            src[perm[d]] = idx[d];
          int64_t offset = 0;
          for (size_t d = 0; d < shape.size(); ++d)
            offset = offset * shape[d] + src[d];
          expected[i] = iv[offset];
        }
        Attrs attrs;
        attrs.set("permutation", perm);
        expectEqual(runOk("transpose", attrs, {in}, dtype, os), expected);
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  HostBuffer big = randomTensor(DType::F32, {64, 33, 17}, rng);
  Attrs attrs;
  attrs.set("permutation", std::vector<int64_t>{2, 0, 1});
  HostBuffer out = runOk("transpose", attrs, {big}, DType::F32, {17, 64, 33});
  std::vector<double> bv = values(big), ov = values(out);
  for (int64_t c = 0; c < 17; ++c)
    for (int64_t a = 0; a < 64; ++a)
      for (int64_t b = 0; b < 33; ++b)
        ASSERT_EQ(ov[(c * 64 + a) * 33 + b], bv[(a * 33 + b) * 17 + c]);
}

// Proves reshape keeps the row-major element order.
TEST_P(DataMovementTest, Reshape) {
  for (DType dtype : kAllTypes) {
    HostBuffer in = randomTensor(dtype, {2, 3, 4}, rng, -9, 9);
    expectEqual(runOk("reshape", {}, {in}, dtype, {4, 6}), values(in));
  }
}

// Proves broadcast replicates along size-1 and new leading dimensions.
TEST_P(DataMovementTest, Broadcast) {
  std::vector<std::pair<Shape, Shape>> cases = {{{3, 1, 4}, {2, 3, 5, 4}},
                                                {{}, {2, 2}},
                                                {{4}, {3, 4}},
                                                {{2, 3}, {2, 3}},
                                                {{1}, {70000}}};
  for (DType dtype : kAllTypes)
    for (const auto &[in, out] : cases) {
      SCOPED_TRACE(formatShape(in) + " -> " + formatShape(out));
      HostBuffer t = randomTensor(dtype, in, rng, -9, 9);
      std::vector<double> tv = values(t), expected;
      for (int64_t i = 0; i < numElements(out); ++i)
        expected.push_back(tv[broadcastOffset(unravel(i, out), in)]);
      expectEqual(runOk("broadcast", {}, {t}, dtype, out), expected);
    }
}

// Proves gather along every axis with i32 and i64 indices of rank 0 to 2,
// negative indices counting from the end.
TEST_P(DataMovementTest, Gather) {
  Shape shape{4, 5, 6};
  for (DType indexType : {DType::I32, DType::I64})
    for (DType dtype : {DType::F32, DType::I64, DType::Bool, DType::BF16})
      for (int64_t axis = 0; axis < 3; ++axis)
        for (Shape idxShape : {Shape{}, Shape{3}, Shape{2, 3}}) {
          SCOPED_TRACE("axis " + std::to_string(axis) + " indices " +
                       formatShape(idxShape));
          int64_t size = shape[axis];
          HostBuffer in = randomTensor(dtype, shape, rng, -50, 50);
          HostBuffer idx =
              randomTensor(indexType, idxShape, rng, -size, size - 1);
          Shape os(shape.begin(), shape.begin() + axis);
          os.insert(os.end(), idxShape.begin(), idxShape.end());
          os.insert(os.end(), shape.begin() + axis + 1, shape.end());
          std::vector<double> iv = values(in), xv = values(idx), expected;
          for (int64_t i = 0; i < numElements(os); ++i) {
            std::vector<int64_t> o = unravel(i, os);
            std::vector<int64_t> src(o.begin(), o.begin() + axis);
            int64_t flat = 0;
            for (size_t d = 0; d < idxShape.size(); ++d)
              flat = flat * idxShape[d] + o[axis + d];
            int64_t j = static_cast<int64_t>(xv[flat]);
            src.push_back(j < 0 ? j + size : j);
            src.insert(src.end(), o.begin() + axis + idxShape.size(), o.end());
            int64_t offset = 0;
            for (size_t d = 0; d < shape.size(); ++d)
              offset = offset * shape[d] + src[d];
            expected.push_back(iv[offset]);
          }
          Attrs attrs;
          attrs.set("axis", axis);
          expectEqual(runOk("gather", attrs, {in, idx}, dtype, os), expected);
        }
}

// Proves an out-of-range gather index (past the end, or below -size) is an
// error that names the index and the dimension size.
TEST_P(DataMovementTest, GatherIndexOutOfRangeIsAnError) {
  HostBuffer in = randomTensor(DType::F32, {4, 5}, rng);
  Attrs attrs;
  attrs.set("axis", int64_t(1));
  for (int64_t bad : {5, 7, -6}) {
    HostBuffer idx = makeTensor(DType::I64, {3}, {0, double(bad), 1});
    OpResult r = run("gather", attrs, {in, idx}, DType::F32, {4, 3});
    EXPECT_NE(r.error.find("index " + std::to_string(bad)), std::string::npos)
        << r.error;
    EXPECT_NE(r.error.find("size 5"), std::string::npos) << r.error;
  }
}

// Proves concat along each axis, with unequal and zero-sized inputs.
TEST_P(DataMovementTest, Concat) {
  for (DType dtype : {DType::F32, DType::I32, DType::Bool, DType::F16})
    for (int64_t axis = 0; axis < 3; ++axis) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      std::vector<HostBuffer> inputs;
      std::vector<Shape> shapes;
      for (int64_t extent : {2, 0, 3, 1}) {
        Shape s{2, 3, 4};
        s[axis] = extent;
        shapes.push_back(s);
        inputs.push_back(randomTensor(dtype, s, rng, -9, 9));
      }
      Shape os{2, 3, 4};
      os[axis] = 6;
      std::vector<double> expected;
      for (int64_t i = 0; i < numElements(os); ++i) {
        std::vector<int64_t> o = unravel(i, os);
        int64_t pos = o[axis];
        size_t k = 0;
        while (pos >= shapes[k][axis])
          pos -= shapes[k++][axis];
        o[axis] = pos;
        int64_t offset = 0;
        for (size_t d = 0; d < 3; ++d)
          offset = offset * shapes[k][d] + o[d];
        expected.push_back(values(inputs[k])[offset]);
      }
      Attrs attrs;
      attrs.set("axis", axis);
      expectEqual(runOk("concat", attrs, inputs, dtype, os), expected);
    }
}

// Proves slice with positive, negative (walking backwards) and unit strides,
// and an empty slice.
TEST_P(DataMovementTest, Slice) {
  Shape shape{6, 7, 8};
  struct Case {
    std::vector<int64_t> starts, sizes, strides;
  };
  std::vector<Case> cases = {{{0, 0, 0}, {6, 7, 8}, {1, 1, 1}},
                             {{1, 2, 3}, {2, 3, 4}, {2, 1, 1}},
                             {{5, 6, 7}, {6, 7, 8}, {-1, -1, -1}},
                             {{5, 0, 7}, {3, 3, 3}, {-2, 3, -3}},
                             {{2, 1, 0}, {0, 2, 2}, {1, 1, 1}}};
  for (DType dtype : {DType::F32, DType::I64, DType::Bool, DType::BF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(formatShape(c.starts) + formatShape(c.strides));
      HostBuffer in = randomTensor(dtype, shape, rng, -50, 50);
      std::vector<double> iv = values(in), expected;
      Shape os = c.sizes;
      for (int64_t i = 0; i < numElements(os); ++i) {
        std::vector<int64_t> o = unravel(i, os);
        int64_t offset = 0;
        for (size_t d = 0; d < 3; ++d)
          offset = offset * shape[d] + c.starts[d] + o[d] * c.strides[d];
        expected.push_back(iv[offset]);
      }
      Attrs attrs;
      attrs.set("starts", c.starts);
      attrs.set("sizes", c.sizes);
      attrs.set("strides", c.strides);
      expectEqual(runOk("slice", attrs, {in}, dtype, os), expected);
    }
}

struct PadCase {
  Shape shape;
  std::vector<int64_t> low, high;
  std::string mode;
};

Attrs padAttrs(const PadCase &c, double value) {
  Attrs attrs;
  attrs.set("low", c.low);
  attrs.set("high", c.high);
  attrs.set("mode", c.mode);
  attrs.set("value", value);
  return attrs;
}

/// The reference pad of `in`: each result element reads through the
/// per-dimension index lists of padIndices, or is `fill`.
std::vector<double> padReference(const PadCase &c, const HostBuffer &in,
                                 double fill, Shape &padded) {
  std::vector<std::vector<int64_t>> lists;
  padded.clear();
  for (size_t d = 0; d < c.shape.size(); ++d) {
    lists.push_back(padIndices(c.mode, c.shape[d], c.low[d], c.high[d]));
    padded.push_back(lists.back().size());
  }
  std::vector<double> iv = values(in), out;
  for (int64_t i = 0; i < numElements(padded); ++i) {
    std::vector<int64_t> idx = unravel(i, padded);
    int64_t offset = 0;
    bool border = false;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t j = lists[d][idx[d]];
      border |= j < 0;
      offset = offset * c.shape[d] + j;
    }
    out.push_back(border ? fill : iv[offset]);
  }
  return out;
}

// Proves pad against numpy.pad's documented layouts on a vector (reflect
// mirrors without repeating the end, edge repeats it).
TEST_P(DataMovementTest, PadMatchesNumpyLayouts) {
  HostBuffer in = makeTensor(DType::F32, {4}, {1, 2, 3, 4});
  // numpy.pad([1, 2, 3, 4], (2, 3), mode) for each mode.
  expectEqual(runOk("pad", padAttrs({{4}, {2}, {3}, "reflect"}, 0), {in},
                    DType::F32, {9}),
              {3, 2, 1, 2, 3, 4, 3, 2, 1});
  expectEqual(
      runOk("pad", padAttrs({{4}, {2}, {3}, "edge"}, 0), {in}, DType::F32, {9}),
      {1, 1, 1, 2, 3, 4, 4, 4, 4});
  expectEqual(runOk("pad", padAttrs({{4}, {2}, {3}, "constant"}, 7), {in},
                    DType::F32, {9}),
              {7, 7, 1, 2, 3, 4, 7, 7, 7});
}

// Proves pad in every mode, for every element type, ranks 0 to 4, pads on
// one or both sides, a large parallel case and an empty input; the constant
// is converted to the element type (ints truncate, bool is non-zero).
TEST_P(DataMovementTest, Pad) {
  std::vector<PadCase> cases;
  for (std::string mode : {"constant", "reflect", "edge"}) {
    cases.push_back({{}, {}, {}, mode});
    cases.push_back({{5}, {2}, {4}, mode});
    cases.push_back({{3, 4}, {0, 3}, {2, 0}, mode});
    cases.push_back({{2, 3, 4}, {1, 2, 0}, {1, 1, 3}, mode});
    cases.push_back({{2, 1, 3, 5}, {0, 0, 2, 1}, {0, 0, 2, 4}, mode});
    cases.push_back({{3, 64, 129}, {0, 5, 7}, {0, 9, 2}, mode});
  }
  cases.push_back({{2, 0}, {1, 0}, {1, 3}, "constant"});
  const double value = -1.5;
  for (DType dtype : kAllTypes)
    for (const PadCase &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + c.mode + " " +
                   formatShape(c.shape) + " low " + formatShape(c.low) +
                   " high " + formatShape(c.high));
      HostBuffer in = randomTensor(dtype, c.shape, rng, -50, 50);
      double fill = dtype == DType::Bool ? 1.0 : isFloat(dtype) ? value : -1.0;
      Shape padded;
      std::vector<double> expected = padReference(c, in, fill, padded);
      expectEqual(runOk("pad", padAttrs(c, value), {in}, dtype, padded),
                  expected);
    }
}

// Proves pad refuses a reflect pad as wide as the dimension and a result of
// the wrong shape, instead of reading out of bounds.
TEST_P(DataMovementTest, PadOutOfBoundsIsAnError) {
  HostBuffer in = randomTensor(DType::F32, {3}, rng);
  EXPECT_NE(
      run("pad", padAttrs({{3}, {3}, {0}, "reflect"}, 0), {in}, DType::F32, {6})
          .error,
      "");
  EXPECT_NE(
      run("pad", padAttrs({{3}, {1}, {1}, "edge"}, 0), {in}, DType::F32, {6})
          .error,
      "");
  EXPECT_NE(
      run("pad", padAttrs({{3}, {1}, {1}, "wrap"}, 0), {in}, DType::F32, {5})
          .error,
      "");
}

LOOM_KERNEL_TEST_PATHS(DataMovementTest);

} // namespace
} // namespace loom::rt::test
