//===- IndexingTest.cpp - gather/scatter_elements, cumsum, reduce_prod ----===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>

namespace loom::rt::test {
namespace {

class IndexingTest : public KernelTest {};

/// The row-major offset of `idx` in `shape`.
int64_t ravel(const std::vector<int64_t> &idx, const Shape &shape) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    offset = offset * shape[d] + idx[d];
  return offset;
}

/// For every index element, the offset in `data` it addresses along `axis`.
std::vector<int64_t> targets(const Shape &data, const Shape &idxShape,
                             const std::vector<double> &idx, int64_t axis) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < numElements(idxShape); ++i) {
    std::vector<int64_t> at = unravel(i, idxShape);
    int64_t k = static_cast<int64_t>(idx[i]);
    at[axis] = k < 0 ? k + data[axis] : k;
    out.push_back(ravel(at, data));
  }
  return out;
}

// Proves gather_elements along every axis, with negative indices, i32 and
// i64 indices, and index dimensions smaller than the data's.
TEST_P(IndexingTest, GatherElements) {
  Shape data{3, 4, 5};
  for (DType indexType : {DType::I32, DType::I64})
    for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::Bool})
      for (int64_t axis = 0; axis < 3; ++axis) {
        SCOPED_TRACE("axis " + std::to_string(axis));
        Shape idxShape{2, 3, 4};
        idxShape[axis] = 6;
        HostBuffer in = randomTensor(dtype, data, rng, -50, 50);
        HostBuffer idx =
            randomTensor(indexType, idxShape, rng, -data[axis], data[axis] - 1);
        std::vector<double> iv = values(in), expected;
        for (int64_t t : targets(data, idxShape, values(idx), axis))
          expected.push_back(iv[t]);
        Attrs attrs;
        attrs.set("axis", axis);
        expectEqual(runOk("gather_elements", attrs, {in, idx}, dtype, idxShape),
                    expected);
      }
}

// Proves scatter_elements replaces (in index order: the last repeated
// index wins) or, with accumulate, adds every update.
TEST_P(IndexingTest, ScatterElements) {
  Shape data{4, 5};
  for (bool accumulate : {false, true})
    for (DType dtype : {DType::F32, DType::F16, DType::I32})
      for (int64_t axis = 0; axis < 2; ++axis) {
        SCOPED_TRACE("axis " + std::to_string(axis) +
                     (accumulate ? " add" : " none"));
        Shape idxShape{3, 3};
        HostBuffer in = randomTensor(dtype, data, rng, -8, 8);
        HostBuffer idx = randomTensor(DType::I64, idxShape, rng, -data[axis],
                                      data[axis] - 1);
        HostBuffer upd = randomTensor(dtype, idxShape, rng, -8, 8);
        std::vector<double> expected = values(in), uv = values(upd);
        std::vector<int64_t> to = targets(data, idxShape, values(idx), axis);
        for (size_t i = 0; i < to.size(); ++i)
          expected[to[i]] = accumulate ? expected[to[i]] + uv[i] : uv[i];
        Attrs attrs;
        attrs.set("axis", axis);
        attrs.set("accumulate", accumulate);
        HostBuffer out =
            runOk("scatter_elements", attrs, {in, idx, upd}, dtype, data);
        if (dtype == DType::F16)
          expectClose(out, expected, 2e-3, 8);
        else if (dtype == DType::F32 && accumulate) // sums rounded to f32
          expectClose(out, expected, 1e-6, 8);
        else
          expectEqual(out, expected);
      }
}

// Proves an index out of range is an error naming it and the dimension.
TEST_P(IndexingTest, ElementIndexOutOfRangeIsAnError) {
  HostBuffer in = randomTensor(DType::F32, {4, 5}, rng);
  HostBuffer idx = makeTensor(DType::I64, {1, 2}, {0, -6});
  Attrs attrs;
  attrs.set("axis", int64_t(1));
  OpResult r = run("gather_elements", attrs, {in, idx}, DType::F32, {1, 2});
  EXPECT_NE(r.error.find("index -6 is out of range for dimension 1 of size 5"),
            std::string::npos)
      << r.error;
}

// Proves cumsum along each axis, inclusive and exclusive, forward and
// reversed, on floats and integers.
TEST_P(IndexingTest, CumSum) {
  Shape shape{3, 4, 5};
  for (DType dtype : {DType::F32, DType::I64})
    for (int64_t axis = 0; axis < 3; ++axis)
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          HostBuffer in = randomTensor(dtype, shape, rng, -9, 9);
          std::vector<double> iv = values(in), expected(iv.size());
          for (int64_t i = 0; i < numElements(shape); ++i) {
            std::vector<int64_t> at = unravel(i, shape);
            double sum = 0;
            for (int64_t j = 0; j < shape[axis]; ++j) {
              bool counted = reverse
                                 ? (exclusive ? j > at[axis] : j >= at[axis])
                                 : (exclusive ? j < at[axis] : j <= at[axis]);
              std::vector<int64_t> src = at;
              src[axis] = j;
              if (counted)
                sum += iv[ravel(src, shape)];
            }
            expected[i] = sum;
          }
          Attrs attrs;
          attrs.set("axis", axis);
          attrs.set("exclusive", exclusive);
          attrs.set("reverse", reverse);
          expectClose(runOk("cumsum", attrs, {in}, dtype, shape), expected,
                      1e-5);
        }
}

// Proves reduce_prod and its gradient, the product of the other elements,
// with no, one and two zeros in a reduction (PyTorch's prod backward).
TEST_P(IndexingTest, ReduceProdAndGradient) {
  HostBuffer x = makeTensor(DType::F32, {3, 4},
                            {1.5, -2, 0.5, 3, 0, 2, -1, 4, 0, 1.25, 0, 2});
  Attrs attrs;
  attrs.set("axes", std::vector<int64_t>{1});
  expectClose(runOk("reduce_prod", attrs, {x}, DType::F32, {3}), {-4.5, 0, 0},
              1e-6);
  HostBuffer g = makeTensor(DType::F32, {3}, {2, 3, 5});
  expectClose(
      runOk("reduce_prod_grad", attrs, {x, g}, DType::F32, {3, 4}),
      {2 * -3.0, 2 * 2.25, 2 * -9.0, 2 * -1.5, 3 * -8.0, 0, 0, 0, 0, 0, 0, 0},
      1e-6);
  HostBuffer i = makeTensor(DType::I32, {2, 3}, {2, -3, 4, 1, 5, -1});
  attrs.set("axes", std::vector<int64_t>{0, 1});
  expectEqual(runOk("reduce_prod", attrs, {i}, DType::I32, {}), {120});
}

LOOM_KERNEL_TEST_PATHS(IndexingTest);

} // namespace
} // namespace loom::rt::test
