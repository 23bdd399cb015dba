// Proves loom-partition keeps dropout elementwise on its operand's split
// and records its result's layout (loom.layouts) even without
// record-layouts: the plan then carries the global shape and layout from
// which each rank finds where its block lies, and draws that block of the
// single-device mask.
// RUN: loom-opt %s --loom-build-training-graph="loss=mse optimizer=sgd" \
// RUN:   --loom-propagate-sharding --loom-partition | FileCheck %s

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x32xf32> {loom.param = "w1"},
                %w2: tensor<32x16xf32> {loom.param = "w2"})
    -> (tensor<8x16xf32> {loom.output = "y"})
    attributes {loom.mesh = #loom.mesh<tp = 2>} {
  %h = loom.matmul %x, %w1 {loom.sharding = [[], ["tp"], []]} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %d = loom.dropout %h {ratio = 0.5 : f32, seed = 5 : i64} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = loom.matmul %d, %w2 {loom.sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Forward: the column-split activation is dropped out where it lies.
// CHECK: %[[H:.*]] = loom.matmul {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: loom.dropout %[[H]], %{{.*}} {loom.layouts = [#loom.layout<#mesh, {{\[\[\], \[tp\]\]}}>], ratio = 5.000000e-01 : f32, seed = 5 : i64} : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
// Backward: the gradient's dropout, on the same split, records it too.
// CHECK: loom.dropout %{{.*}}, %{{.*}} {loom.layouts = [#loom.layout<#mesh, {{\[\[\], \[tp\]\]}}>], ratio = 5.000000e-01 : f32, seed = 5 : i64} : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
