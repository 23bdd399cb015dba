// Proves loom-propagate-sharding gives each op of a gradient the layouts of
// the forward op it differentiates (linked by loom-build-training-graph's
// loom.grad_id / loom.grad_of), and splits a weight gradient the forward
// computed redundantly over an axis its parameter is stored split over.
// RUN: loom-opt %s -split-input-file -loom-build-training-graph="loss=mse optimizer=sgd" \
// RUN:   -loom-propagate-sharding | FileCheck %s

// A column-parallel matmul (batch over dp, columns over tp): its input
// gradient contracts the columns over tp (a partial sum), its weight
// gradient keeps the columns split and contracts the batch over dp.
// CHECK-LABEL: func.func @main
// CHECK: loom.matmul %{{.*}}, %arg2 {loom.grad_id = [[Y:[0-9]+]] : i64, loom.sharding = {{\[}}["dp"], ["tp"], []]}
// CHECK: loom.matmul %{{.*}}, %arg2 {loom.grad_of = array<i64: [[Y]], 1, 2, 0>, loom.sharding = {{\[}}["dp"], [], ["tp"]], transpose_rhs}
// CHECK: loom.matmul %{{.*}}, %{{.*}} {loom.grad_of = array<i64: [[Y]], 0, 1, 2>, loom.sharding = {{\[}}[], ["tp"], ["dp"]], transpose_lhs}
#mesh = #loom.mesh<dp = 2, tp = 2>
func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x16xf32> {loom.param = "w1"},
                %w2: tensor<16x32xf32> {loom.param = "w2"}) -> tensor<8x32xf32> attributes {loom.mesh = #mesh} {
  %h = loom.matmul %x, %w1 {loom.sharding = [["dp"], [], []]} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %y = loom.matmul %h, %w2 {loom.sharding = [["dp"], ["tp"], []]} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// w1 is stored split over tp, but its matmul gathers it and computes
// redundantly over tp: its gradient is split over tp as w1 is stored (the
// columns), so that its update needs only the sum over dp.
// CHECK-LABEL: func.func @main
// CHECK: loom.matmul %arg0, %{{.*}} {loom.grad_of = array<i64: {{[0-9]+}}, 0, 1, 2>, loom.sharding = {{\[}}[], ["tp"], ["dp"]], transpose_lhs}
// CHECK: loom.sgd_update %arg1, {{.*}}loom.sharding = {{\[}}[], ["tp"]]
#mesh = #loom.mesh<dp = 2, tp = 2>
func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x16xf32> {loom.param = "w1", loom.layout = #loom.layout<#mesh, [[], ["tp"]]>},
                %w2: tensor<16x32xf32> {loom.param = "w2"}) -> tensor<8x32xf32> attributes {loom.mesh = #mesh} {
  %h = loom.matmul %x, %w1 {loom.sharding = [["dp"], [], []]} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %y = loom.matmul %h, %w2 {loom.sharding = [["dp"], [], []]} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
