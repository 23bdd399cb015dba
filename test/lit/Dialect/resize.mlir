// Proves loom.resize and loom.resize_grad parse, infer and verify their
// shapes (floor(in * scale_num / scale_den) per dimension) and round-trip.
// RUN: loom-opt %s -split-input-file | loom-opt -split-input-file | FileCheck %s

// 4 * 3 / 2 = 6 and 5 * 7 / 5 = 7; the 0.6 downsample of 4 is floor(2.4) = 2.
// CHECK-LABEL: func.func @main
// CHECK: loom.resize %arg0 {coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -7.500000e-01 : f32, mode = "linear", nearest_mode = "round_prefer_floor", scale_den = array<i64: 1, 1, 2, 5>, scale_num = array<i64: 1, 1, 3, 7>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x6x7xf32>
#mesh = #loom.mesh<dp = 2, tp = 3>
func.func @main(%x: tensor<2x3x4x5xf32> {loom.param = "x", loom.layout = #loom.layout<#mesh, [["dp"], ["tp"], [], []]>}) -> tensor<2x3x6x7xf32> attributes {loom.mesh = #mesh} {
  %y = loom.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", scale_num = array<i64: 1, 1, 3, 7>, scale_den = array<i64: 1, 1, 2, 5>, cubic_coeff_a = -0.75 : f32} : (tensor<2x3x4x5xf32>) -> tensor<2x3x6x7xf32>
  return %y : tensor<2x3x6x7xf32>
}

// -----

// CHECK-LABEL: func.func @nearest_and_cubic
// CHECK: loom.resize %arg0 {{{.*}}mode = "nearest", nearest_mode = "floor", scale_den = array<i64: 5, 1>, scale_num = array<i64: 3, 2>} : (tensor<4x3xf16>) -> tensor<2x6xf16>
// CHECK: loom.resize %arg0 {{{.*}}exclude_outside, mode = "cubic"{{.*}} : (tensor<4x3xf16>) -> tensor<2x6xf16>
// CHECK: loom.resize_grad %arg1 {{{.*}}mode = "nearest"{{.*}} : (tensor<2x6xf16>) -> tensor<4x3xf16>
func.func @nearest_and_cubic(%x: tensor<4x3xf16> {loom.input = "x"}, %g: tensor<2x6xf16> {loom.input = "g"}) -> (tensor<2x6xf16>, tensor<2x6xf16>, tensor<4x3xf16>) {
  %0 = loom.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scale_num = array<i64: 3, 2>, scale_den = array<i64: 5, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<4x3xf16>) -> tensor<2x6xf16>
  %1 = loom.resize %x {mode = "cubic", coordinate_transformation_mode = "half_pixel", nearest_mode = "floor", scale_num = array<i64: 3, 2>, scale_den = array<i64: 5, 1>, cubic_coeff_a = -0.5 : f32, exclude_outside} : (tensor<4x3xf16>) -> tensor<2x6xf16>
  %2 = loom.resize_grad %g {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scale_num = array<i64: 3, 2>, scale_den = array<i64: 5, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<2x6xf16>) -> tensor<4x3xf16>
  return %0, %1, %2 : tensor<2x6xf16>, tensor<2x6xf16>, tensor<4x3xf16>
}
