// Proves loom-build-training-graph differentiates loom.resize into one
// loom.resize_grad with the same attributes, and that sharding propagation
// splits the batch and channels of both but never a resized dimension.
// RUN: loom-opt %s -loom-build-training-graph="loss=mse optimizer=sgd" \
// RUN:   | FileCheck %s --check-prefix=GRAD
// RUN: loom-opt %s -loom-build-training-graph="loss=mse optimizer=sgd" \
// RUN:   -loom-propagate-sharding | FileCheck %s --check-prefix=SHARD

// GRAD: %[[Y:.*]] = loom.resize %arg0 {coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -7.500000e-01 : f32, loom.grad_id = [[ID:[0-9]+]] : i64, mode = "linear"
// GRAD: loom.resize_grad %{{.*}} {coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -7.500000e-01 : f32, loom.grad_of = array<i64: [[ID]], 1, 0>, mode = "linear", nearest_mode = "round_prefer_floor", scale_den = array<i64: 1, 1, 2, 5>, scale_num = array<i64: 1, 1, 3, 7>} : (tensor<2x3x6x7xf32>) -> tensor<2x3x4x5xf32>
// The batch (dp) and channels (tp) stay split; the resized height and width
// are whole (the sharding prints without trailing whole dimensions).
// SHARD: loom.resize %arg0 {{.*}}loom.sharding = {{\[}}["dp"], ["tp"]], mode
// SHARD: loom.resize_grad {{.*}}loom.sharding = {{\[}}["dp"], ["tp"]], mode
#mesh = #loom.mesh<dp = 2, tp = 3>
func.func @main(%x: tensor<2x3x4x5xf32> {loom.param = "x", loom.layout = #loom.layout<#mesh, [["dp"], ["tp"], [], []]>}) -> tensor<2x3x6x7xf32> attributes {loom.mesh = #mesh} {
  %y = loom.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", scale_num = array<i64: 1, 1, 3, 7>, scale_den = array<i64: 1, 1, 2, 5>, cubic_coeff_a = -0.75 : f32} : (tensor<2x3x4x5xf32>) -> tensor<2x3x6x7xf32>
  return %y : tensor<2x3x6x7xf32>
}

