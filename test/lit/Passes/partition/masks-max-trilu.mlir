// Proves the comparisons, logic ops and max split every dimension, and trilu
// its batch dimensions only: under data parallelism each device runs them
// on its batch block (the backward's equal and greater of max's gradient
// too), and a strategy that splits trilu's matrix dimensions is rejected.
// RUN: loom-opt %s -split-input-file -verify-diagnostics \
// RUN:   --loom-build-training-graph="loss=mse optimizer=sgd" \
// RUN:   --loom-propagate-sharding="mode=data" --loom-partition | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:.*]]: tensor<2x4x4xf32> {loom.input = "x", loom.layout = #loom.layout<#mesh, {{\[\[dp\], \[\], \[\]\]}}>}
// CHECK-SAME: %[[W:.*]]: tensor<4x4xf32> {loom.layout = #loom.layout<#mesh, {{\[\[\], \[\]\]}}>, loom.param = "w"}
// CHECK: %[[T:.*]] = loom.trilu %{{.*}} {k = 1 : i64, upper = true} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[G:.*]] = loom.greater %[[T]], %[[X]] : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
// CHECK: loom.not %[[G]] : (tensor<2x4x4xi1>) -> tensor<2x4x4xi1>
// CHECK: loom.max %{{.*}}, %[[W]] : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: loom.equal %{{.*}}, %[[W]] : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xi1>
// CHECK: loom.greater %{{.*}}, %[[W]] : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xi1>
// CHECK: loom.trilu %{{.*}} {k = 1 : i64, upper = true} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NOT: loom.all_gather
func.func @main(%x: tensor<8x4x4xf32> {loom.input = "x"},
                %w: tensor<4x4xf32> {loom.param = "w"})
    -> (tensor<8x4x4xf32> {loom.output = "y"})
    attributes {loom.mesh = #loom.mesh<dp = 4>} {
  %m = loom.mul %x, %w : (tensor<8x4x4xf32>, tensor<4x4xf32>) -> tensor<8x4x4xf32>
  %t = loom.trilu %m {upper = true, k = 1 : i64} : (tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  %g = loom.greater %t, %x : (tensor<8x4x4xf32>, tensor<8x4x4xf32>) -> tensor<8x4x4xi1>
  %n = loom.not %g : (tensor<8x4x4xi1>) -> tensor<8x4x4xi1>
  %s = loom.select %n, %t, %x : (tensor<8x4x4xi1>, tensor<8x4x4xf32>, tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  %y = loom.max %s, %w : (tensor<8x4x4xf32>, tensor<4x4xf32>) -> tensor<8x4x4xf32>
  return %y : tensor<8x4x4xf32>
}

// -----

func.func @main(%x: tensor<8x4x4xf32> {loom.input = "x"},
                %w: tensor<4x4xf32> {loom.param = "w"})
    -> (tensor<8x4x4xf32> {loom.output = "y"})
    attributes {loom.mesh = #loom.mesh<tp = 2>} {
  %m = loom.mul %x, %w : (tensor<8x4x4xf32>, tensor<4x4xf32>) -> tensor<8x4x4xf32>
  // expected-error @+1 {{the strategy of 'loom.trilu': operand 0 dimension 1 cannot be split: the op needs it whole}}
  %t = loom.trilu %m {upper = true, k = 0 : i64, loom.strategy = #loom.strategy<[[1, 2, 1]]>} : (tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  return %t : tensor<8x4x4xf32>
}
