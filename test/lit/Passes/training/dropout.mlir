// Proves loom-build-training-graph passes the training step to dropout, so
// that its mask changes every step, and differentiates it as the same
// dropout (ratio, seed, step) of the result's gradient: the backward draws
// the forward's mask again instead of storing it.
// RUN: loom-opt %s -loom-build-training-graph="optimizer=sgd loss=mse" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32> {loom.input = "x"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<f32> {loom.hyper = #loom.hyper<step>}
// CHECK: %[[H:.*]] = loom.matmul
// CHECK: %[[D:.*]] = loom.dropout %[[H]], %[[STEP]] {loom.grad_id = [[ID:[0-9]+]] : i64, ratio = 2.500000e-01 : f32, seed = 11 : i64}
// CHECK: loom.mse_loss %[[D]]
// The gradient's operands stand for the result's gradient and the step; its
// result for the input's gradient.
// CHECK: %[[DX:.*]] = loom.dropout %{{.*}}, %[[STEP]] {loom.grad_of = array<i64: [[ID]], 1, 2, 0>, ratio = 2.500000e-01 : f32, seed = 11 : i64}
// CHECK: loom.matmul %{{.*}}, %[[DX]] {{.*}}transpose_lhs
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<8x8xf32> {loom.param = "w"})
    -> (tensor<4x8xf32> {loom.output = "y"}) {
  %h = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = loom.dropout %h {ratio = 0.25 : f32, seed = 11 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// With micro-batches, micro-batch k's dropouts (forward and gradient) draw
// indices shifted by k times the micro-batch tensor's 32 elements: its rows
// of the full batch's mask.
// RUN: loom-opt %s -loom-build-training-graph="optimizer=sgd loss=mse micro-batches=2" | FileCheck %s --check-prefix=MICRO
// MICRO: loom.dropout %{{.*}}, %{{.*}} {loom.grad_id = {{[0-9]+}} : i64, ratio = 2.500000e-01 : f32, seed = 11 : i64}
// MICRO: loom.dropout %{{.*}}, %{{.*}} {loom.grad_of = {{.*}}, ratio = 2.500000e-01 : f32, seed = 11 : i64}
// MICRO: loom.dropout %{{.*}}, %{{.*}} {index_offset = 32 : i64, loom.grad_id = {{[0-9]+}} : i64, ratio = 2.500000e-01 : f32, seed = 11 : i64}
// MICRO: loom.dropout %{{.*}}, %{{.*}} {index_offset = 32 : i64, loom.grad_of = {{.*}}, ratio = 2.500000e-01 : f32, seed = 11 : i64}
