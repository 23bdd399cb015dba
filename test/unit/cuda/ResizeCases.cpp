//===- ResizeCases.cpp - Conformance cases of Resize.cu -------------------===//
//
// resize and resize_grad against the CPU backend: nearest in every rounding
// mode, linear (bilinear, and trilinear over three dimensions) and cubic,
// upsampling, downsampling and non-integer sizes, under each coordinate
// transformation mode.
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

namespace loom::rt::conformance {
namespace {

struct ResizeGeometry {
  const char *name;
  const char *mode;
  const char *coord;
  const char *rounding;
  bool excludeOutside;
  Shape in;
  std::vector<int64_t> num, den;
  Shape out;
};

const std::vector<ResizeGeometry> kResizeGeometries = {
    {"nearest_up2_floor",
     "nearest",
     "asymmetric",
     "floor",
     false,
     {2, 3, 4, 5},
     {1, 1, 2, 2},
     {1, 1, 1, 1},
     {2, 3, 8, 10}},
    {"nearest_size_round_floor",
     "nearest",
     "half_pixel",
     "round_prefer_floor",
     false,
     {1, 2, 5, 4},
     {1, 1, 8, 7},
     {1, 1, 5, 4},
     {1, 2, 8, 7}},
    {"nearest_down_ceil",
     "nearest",
     "tf_half_pixel_for_nn",
     "ceil",
     false,
     {2, 2, 9, 7},
     {1, 1, 1, 3},
     {1, 1, 2, 5},
     {2, 2, 4, 4}},
    {"nearest_corners_prefer_ceil",
     "nearest",
     "align_corners",
     "round_prefer_ceil",
     false,
     {3, 4, 6},
     {1, 5, 3},
     {1, 3, 2},
     {3, 6, 9}},
    {"bilinear_up2_half_pixel",
     "linear",
     "half_pixel",
     "round_prefer_floor",
     false,
     {2, 3, 5, 6},
     {1, 1, 2, 2},
     {1, 1, 1, 1},
     {2, 3, 10, 12}},
    {"bilinear_size_corners",
     "linear",
     "align_corners",
     "round_prefer_floor",
     false,
     {1, 2, 4, 3},
     {1, 1, 7, 5},
     {1, 1, 4, 3},
     {1, 2, 7, 5}},
    {"bilinear_down_pytorch",
     "linear",
     "pytorch_half_pixel",
     "round_prefer_floor",
     false,
     {2, 2, 8, 9},
     {1, 1, 3, 1},
     {1, 1, 8, 9},
     {2, 2, 3, 1}},
    {"trilinear_asymmetric",
     "linear",
     "asymmetric",
     "round_prefer_floor",
     false,
     {1, 2, 3, 4, 5},
     {1, 1, 2, 3, 3},
     {1, 1, 1, 2, 5},
     {1, 2, 6, 6, 3}},
    {"cubic_up_half_pixel",
     "cubic",
     "half_pixel",
     "round_prefer_floor",
     false,
     {1, 2, 4, 5},
     {1, 1, 5, 2},
     {1, 1, 2, 1},
     {1, 2, 10, 10}},
    {"cubic_down_exclude",
     "cubic",
     "half_pixel",
     "round_prefer_floor",
     true,
     {1, 1, 9, 8},
     {1, 1, 2, 3},
     {1, 1, 3, 4},
     {1, 1, 6, 6}},
};

void setResizeAttrs(Case &c, const ResizeGeometry &g) {
  c.attrs.set("mode", std::string(g.mode));
  c.attrs.set("coordinate_transformation_mode", std::string(g.coord));
  c.attrs.set("nearest_mode", std::string(g.rounding));
  c.attrs.set("scale_num", g.num);
  c.attrs.set("scale_den", g.den);
  c.attrs.set("cubic_coeff_a", -0.75);
  if (g.excludeOutside)
    c.attrs.set("exclude_outside", true);
}

/// The most grads one input element sums: per dimension, about the
/// outputs per input plus the taps' spread.
int64_t gradReduction(const ResizeGeometry &g) {
  int64_t n = 1;
  for (size_t d = 0; d < g.in.size(); ++d)
    n *= (g.out[d] + g.in[d] - 1) / g.in[d] + 4;
  return n;
}

} // namespace

void addResizeCases(std::vector<CaseSpec> &cases) {
  for (const ResizeGeometry &g : kResizeGeometries)
    for (DType dtype : kFloatTypes) {
      bool nearest = std::string(g.mode) == "nearest";
      addCase(cases, "resize", g.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        setResizeAttrs(c, g);
        c.inputs = {uniform(dtype, g.in, rng)};
        c.outputs = {{dtype, g.out}};
        c.reduction = 16;
        if (nearest)
          c.tolerance = exact();
        return c;
      });
      addCase(cases, "resize_grad", g.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        setResizeAttrs(c, g);
        c.inputs = {uniform(dtype, g.out, rng)};
        c.outputs = {{dtype, g.in}};
        c.reduction = gradReduction(g);
        return c;
      });
    }
}

} // namespace loom::rt::conformance
