// Proves a cross-entropy whose logits are split over the classes
// (Megatron's vocabulary-parallel loss: the LM head's output columns split
// over tp) stays split through the loss and its gradient: no all_gather of
// the logits, only each class block's row log-sum-exps gathered ([8, 2]);
// the local loss and gradient take the rows' log-sum-exp over all classes,
// and the plan carries the logits' layout, from which each rank finds its
// class block (KernelArgs::block).
// RUN: loom-opt %s --loom-build-training-graph="optimizer=sgd" \
// RUN:   --loom-propagate-sharding --loom-partition | FileCheck %s

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w: tensor<16x32xf32> {loom.param = "w"})
    -> (tensor<8x32xf32> {loom.output = "logits"})
    attributes {loom.mesh = #loom.mesh<tp = 2>} {
  %y = loom.matmul %x, %w {loom.sharding = [[], ["tp"], []]} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// CHECK-LABEL: func.func @main
// CHECK-NOT: loom.all_gather {{.*}} -> tensor<8x32xf32>
// The logits' block, its layout recorded for the loss's kernel.
// CHECK: %[[Y:.*]] = loom.matmul {{.*}}loom.layouts = [#loom.layout<#mesh, {{\[\[\], \[tp\]\]}}>]{{.*}} -> tensor<8x16xf32>
// The block's own row log-sum-exps (one log-softmax over the block; column 0
// of x - log_softmax(x)), gathered over tp, and their log-sum-exp.
// CHECK: %[[LS:.*]] = loom.log_softmax %[[Y]] {axis = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK: %[[X0:.*]] = loom.slice %[[Y]] {{.*}} -> tensor<8x1xf32>
// CHECK: %[[L0:.*]] = loom.slice %[[LS]] {{.*}} -> tensor<8x1xf32>
// CHECK: %[[BLSE:.*]] = loom.sub %[[X0]], %[[L0]]
// CHECK: %[[ALL:.*]] = loom.all_gather %[[BLSE]] {axis = 0 : i64, dim = 1 : i64, predicted_bytes = 32 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK: %[[M:.*]] = loom.reduce_max %[[ALL]] {axes = array<i64: 1>, keep_dims}
// CHECK: %[[ROWMAX:.*]] = loom.reduce_max %[[ALL]] {axes = array<i64: 1>} : (tensor<8x2xf32>) -> tensor<8xf32>
// CHECK: %[[D:.*]] = loom.sub %[[ALL]], %[[M]]
// CHECK: %[[E:.*]] = loom.exp %[[D]] : (tensor<8x2xf32>) -> tensor<8x2xf32>
// CHECK: %[[S:.*]] = loom.reduce_sum %[[E]] {axes = array<i64: 1>} : (tensor<8x2xf32>) -> tensor<8xf32>
// CHECK: %[[LOG:.*]] = loom.log %[[S]]
// CHECK: %[[LSE:.*]] = loom.add %[[ROWMAX]], %[[LOG]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// The block's share of the summed loss: a partial sum over tp.
// CHECK: %[[LOSS:.*]] = loom.softmax_cross_entropy %[[Y]], %{{.*}}, %[[LSE]] {{.*}} : (tensor<8x16xf32>, tensor<8xi64>, tensor<8xf32>) -> tensor<f32>
// CHECK: loom.all_reduce %[[LOSS]] {axes = array<i64: 0>
// The gradient of the block, from the same log-sum-exp.
// CHECK: loom.softmax_cross_entropy_grad %[[Y]], %{{.*}}, %{{.*}}, %[[LSE]] {{{.*}}loom.layouts = [#loom.layout<#mesh, {{\[\[\], \[tp\]\]}}>]{{.*}} : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>, tensor<8xf32>) -> tensor<8x16xf32>
// CHECK-NOT: loom.all_gather {{.*}} -> tensor<8x32xf32>
// CHECK: return
