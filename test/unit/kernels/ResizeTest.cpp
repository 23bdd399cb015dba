//===- ResizeTest.cpp - resize and resize_grad on the CPU -----------------===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <algorithm>
#include <cmath>

namespace loom::rt::test {
namespace {

class ResizeTest : public KernelTest {};

Attrs resizeAttrs(const std::string &mode, const std::string &coord,
                  const std::string &rounding, std::vector<int64_t> num,
                  std::vector<int64_t> den, bool exclude = false) {
  Attrs a;
  a.set("mode", mode);
  a.set("coordinate_transformation_mode", coord);
  a.set("nearest_mode", rounding);
  a.set("scale_num", std::move(num));
  a.set("scale_den", std::move(den));
  a.set("cubic_coeff_a", -0.75);
  if (exclude)
    a.set("exclude_outside", true);
  return a;
}

// Proves the coordinates of ONNX's reference on hand-computed rows: linear
// half_pixel doubling (edges clamp), align_corners, nearest asymmetric floor
// and round_prefer_ceil, and a downsample by 0.6 whose half_pixel
// coordinates use the scale, not the output size.
TEST_P(ResizeTest, HandComputedRows) {
  HostBuffer x = makeTensor(DType::F32, {1, 4}, {1, 2, 3, 4});
  expectClose(
      runOk("resize",
            resizeAttrs("linear", "half_pixel", "floor", {1, 2}, {1, 1}), {x},
            DType::F32, {1, 8}),
      {1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4}, 1e-6);
  expectClose(
      runOk("resize",
            resizeAttrs("linear", "align_corners", "floor", {1, 7}, {1, 4}),
            {x}, DType::F32, {1, 7}),
      {1, 1.5, 2, 2.5, 3, 3.5, 4}, 1e-6);
  expectEqual(
      runOk("resize",
            resizeAttrs("nearest", "asymmetric", "floor", {1, 3}, {1, 2}), {x},
            DType::F32, {1, 6}),
      {1, 1, 2, 3, 3, 4});
  expectEqual(runOk("resize",
                    resizeAttrs("nearest", "asymmetric", "round_prefer_ceil",
                                {1, 2}, {1, 1}),
                    {x}, DType::F32, {1, 8}),
              {1, 2, 2, 3, 3, 4, 4, 4});
  // 0.6 = 5033165 / 2^23 as float32; x = (i + 0.5) / 0.6 - 0.5: 1/3, 2.
  expectClose(runOk("resize",
                    resizeAttrs("linear", "half_pixel", "floor", {1, 5033165},
                                {1, 8388608}),
                    {x}, DType::F32, {1, 2}),
              {1 + 1.0 / 3.0, 3}, 1e-6);
}

// Proves resize_grad is the adjoint of resize: <resize(x), g> equals
// <x, resize_grad(g)> for every mode, several coordinate modes, up- and
// downsampling, non-integer sizes and three resized dimensions; f32.
TEST_P(ResizeTest, GradIsTheAdjoint) {
  struct Case {
    std::string mode, coord, rounding;
    Shape in;
    std::vector<int64_t> num, den;
    Shape out;
    bool exclude;
  };
  std::vector<Case> cases = {
      {"nearest",
       "asymmetric",
       "floor",
       {2, 3, 4},
       {1, 2, 2},
       {1, 1, 1},
       {2, 6, 8},
       false},
      {"nearest",
       "half_pixel",
       "round_prefer_ceil",
       {1, 7, 5},
       {1, 3, 9},
       {1, 7, 5},
       {1, 3, 9},
       false},
      {"linear",
       "half_pixel",
       "floor",
       {2, 5, 6},
       {1, 2, 7},
       {1, 1, 6},
       {2, 10, 7},
       false},
      {"linear",
       "align_corners",
       "floor",
       {3, 4, 3},
       {1, 7, 5},
       {1, 4, 3},
       {3, 7, 5},
       false},
      {"linear",
       "pytorch_half_pixel",
       "floor",
       {2, 9, 8},
       {1, 1, 1},
       {1, 3, 8},
       {2, 3, 1},
       false},
      {"linear",
       "asymmetric",
       "floor",
       {2, 3, 4, 5},
       {1, 2, 3, 3},
       {1, 1, 2, 5},
       {2, 6, 6, 3},
       false},
      {"cubic",
       "half_pixel",
       "floor",
       {2, 4, 5},
       {1, 5, 2},
       {1, 2, 1},
       {2, 10, 10},
       false},
      {"cubic",
       "align_corners",
       "floor",
       {1, 9, 8},
       {1, 2, 3},
       {1, 3, 4},
       {1, 6, 6},
       true},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.mode + " " + c.coord + " " + formatShape(c.in) + " -> " +
                 formatShape(c.out));
    Attrs attrs =
        resizeAttrs(c.mode, c.coord, c.rounding, c.num, c.den, c.exclude);
    HostBuffer x = randomTensor(DType::F32, c.in, rng);
    HostBuffer g = randomTensor(DType::F32, c.out, rng);
    std::vector<double> y =
        values(runOk("resize", attrs, {x}, DType::F32, c.out));
    std::vector<double> dx =
        values(runOk("resize_grad", attrs, {g}, DType::F32, c.in));
    std::vector<double> xv = values(x), gv = values(g);
    double lhs = 0, rhs = 0, scale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      lhs += y[i] * gv[i];
      scale += std::abs(y[i] * gv[i]);
    }
    for (size_t i = 0; i < xv.size(); ++i)
      rhs += xv[i] * dx[i];
    // A bound scaled by an infinite sum would take any rhs.
    ASSERT_TRUE(std::isfinite(scale)) << "sum |y * g| = " << scale;
    EXPECT_NEAR(lhs, rhs, 1e-5 * std::max(scale, 1.0));
  }
}

LOOM_KERNEL_TEST_PATHS(ResizeTest);

} // namespace
} // namespace loom::rt::test
