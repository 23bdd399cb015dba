// The collectives of per-device programs, and label_count, round-trip.
// RUN: loom-opt %s | loom-opt | FileCheck %s

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<4x6xf32>, %l: tensor<4xi64>) -> tensor<f32>
    attributes {loom.mesh = #loom.mesh<dp = 2, tp = 3>, loom.spmd} {
  // CHECK: loom.all_reduce %{{.*}} {axes = array<i64: 0, 1>} : tensor<4x6xf32> -> tensor<4x6xf32>
  %a = loom.all_reduce %x {axes = array<i64: 0, 1>} : tensor<4x6xf32> -> tensor<4x6xf32>
  // CHECK: loom.reduce_scatter %{{.*}} {axis = 1 : i64, dim = 1 : i64} : tensor<4x6xf32> -> tensor<4x2xf32>
  %b = loom.reduce_scatter %a {axis = 1 : i64, dim = 1 : i64} : tensor<4x6xf32> -> tensor<4x2xf32>
  // CHECK: loom.all_gather %{{.*}} {axis = 1 : i64, dim = 1 : i64} : tensor<4x2xf32> -> tensor<4x6xf32>
  %c = loom.all_gather %b {axis = 1 : i64, dim = 1 : i64} : tensor<4x2xf32> -> tensor<4x6xf32>
  // CHECK: loom.local_split %{{.*}} {axis = 0 : i64, dim = 0 : i64} : tensor<4x6xf32> -> tensor<2x6xf32>
  %d = loom.local_split %c {axis = 0 : i64, dim = 0 : i64} : tensor<4x6xf32> -> tensor<2x6xf32>
  // CHECK: loom.all_to_all %{{.*}} {axis = 0 : i64, dim = 0 : i64, to_dim = 1 : i64} : tensor<2x6xf32> -> tensor<4x3xf32>
  %e = loom.all_to_all %d {axis = 0 : i64, dim = 0 : i64, to_dim = 1 : i64} : tensor<2x6xf32> -> tensor<4x3xf32>
  // CHECK: loom.make_partial %{{.*}} {axis = 1 : i64} : tensor<4x3xf32> -> tensor<4x3xf32>
  %f = loom.make_partial %e {axis = 1 : i64} : tensor<4x3xf32> -> tensor<4x3xf32>
  // CHECK: loom.label_count %{{.*}} {ignore_index = -100 : i64} : (tensor<4xi64>) -> tensor<f32>
  %n = loom.label_count %l {ignore_index = -100 : i64} : (tensor<4xi64>) -> tensor<f32>
  return %n : tensor<f32>
}
