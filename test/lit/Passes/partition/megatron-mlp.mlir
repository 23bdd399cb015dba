// A Megatron MLP block (column-split then row-split matmul) on tp=2: one
// all_reduce in the forward (after the row-split matmul) and one in the
// backward (the input gradient of the column-split matmul). Nothing else
// communicates: every weight gradient is already in its weight's layout.
// RUN: loom-opt %s --loom-build-training-graph="loss=mse optimizer=sgd" \
// RUN:   --loom-propagate-sharding --loom-partition | FileCheck %s
// With dp=2 as well, the weights' gradients are additionally all-reduced
// over dp (and the loss's partial mean), never over tp.
// RUN: sed -e 's/<tp = 2>/<dp = 2, tp = 2>/' \
// RUN:   -e 's/\[\[\], \["tp"\], \[\]\]/[["dp"], ["tp"], []]/' \
// RUN:   -e 's/\[\[\], \[\], \["tp"\]\]/[["dp"], [], ["tp"]]/' \
// RUN:   -e 's/{loom.input = "x"}/{loom.input = "x", loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 2>, [[dp], []]>}/' \
// RUN:   %s | loom-opt --loom-build-training-graph="loss=mse optimizer=sgd" \
// RUN:   --loom-propagate-sharding --loom-partition | FileCheck %s --check-prefix=DPTP

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %g: tensor<16xf32> {loom.param = "g"},
                %w1: tensor<16x32xf32> {loom.param = "w1"},
                %w2: tensor<32x16xf32> {loom.param = "w2"})
    -> (tensor<8x16xf32> {loom.output = "y"})
    attributes {loom.mesh = #loom.mesh<tp = 2>} {
  %s = loom.mul %x, %g : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = loom.matmul %s, %w1 {loom.sharding = [[], ["tp"], []]} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %r = loom.relu %h : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = loom.matmul %r, %w2 {loom.sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// The weights are stored split: w1 by columns, w2 by rows.
// CHECK: func.func @main
// CHECK-SAME: tensor<16x16xf32> {loom.layout = #loom.layout<#mesh, {{\[\[\], \[tp\]\]}}>, loom.param = "w1"}
// CHECK-SAME: tensor<16x16xf32> {loom.layout = #loom.layout<#mesh, {{\[\[tp\], \[\]\]}}>, loom.param = "w2"}
// Forward: the row-split matmul's partial sum, then the loss.
// CHECK: loom.matmul
// CHECK: loom.matmul
// CHECK: loom.all_reduce %{{.*}} {axes = array<i64: 0>, predicted_bytes = 512 : i64} : tensor<8x16xf32>
// CHECK: loom.mse_loss
// Backward: the input gradient of the column-split matmul, before g's.
// CHECK: loom.matmul {{.*}}transpose_rhs
// CHECK: loom.all_reduce %{{.*}} {axes = array<i64: 0>, predicted_bytes = 512 : i64} : tensor<8x16xf32>
// CHECK-NOT: loom.all_reduce
// CHECK-NOT: loom.all_gather
// CHECK-NOT: loom.reduce_scatter
// CHECK-NOT: loom.all_to_all
// CHECK: return

// Mixed dp x tp: the same two tp all-reduces; over dp, the gradients of
// the three weights and the loss's partial mean, nothing else.
// DPTP: #loom.mesh<dp = 2, tp = 2>
// DPTP: loom.all_reduce %{{.*}} {axes = array<i64: 1>, predicted_bytes = {{[0-9]+}} : i64} : tensor<4x16xf32>
// DPTP: loom.mse_loss
// DPTP: loom.all_reduce %{{.*}} {axes = array<i64: 1>, predicted_bytes = {{[0-9]+}} : i64} : tensor<4x16xf32>
// DPTP-COUNT-4: loom.all_reduce %{{.*}} {axes = array<i64: 0>, predicted_bytes = {{[0-9]+}} : i64}
// DPTP-NOT: loom.all_
// DPTP-NOT: loom.reduce_scatter
// DPTP-NOT: loom.local_split
// DPTP: return
