// loom-bucket-gradients packs the gradient all-reduces of a per-device
// program into flat buckets: one all-reduce per bucket, of the same element
// type over the same axes, filled in the order the backward pass makes the
// gradients (big's, w2's, b2's, then w1's, though the partitioner placed
// their reductions in the updates' order), placed right after the bucket's
// last gradient, with the transposes and reshapes on the way to the updates
// moved after it. A bucket holds at most `bucket-bytes` (a larger gradient
// is alone in its own and keeps its all-reduce); the loss's all-reduce and
// an activation's (a matmul uses it) are not gradients and stay.
//
// RUN: loom-opt %s --loom-bucket-gradients="bucket-bytes=1024" | FileCheck %s
// RUN: loom-opt %s --loom-bucket-gradients="bucket-bytes=0" | FileCheck %s --check-prefix=OFF
// RUN: loom-opt %s --loom-bucket-gradients | FileCheck %s --check-prefix=DEFAULT

func.func @main(%x: tensor<2x4xf32>, %act: tensor<2x4xf32>, %z: tensor<2x32xf32>,
                %w1: tensor<4x8xf32>, %w2: tensor<4x8xf32>, %b2: tensor<4xf32>,
                %n1: tensor<8xf32>, %n2: tensor<8xf32>, %big: tensor<8x32xf32>,
                %lr: tensor<f32>)
    -> (tensor<f32>, tensor<2x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
        tensor<4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>)
    attributes {loom.mesh = #loom.mesh<dp = 2, tp = 2>, loom.spmd} {
  %loss = loom.reduce_sum %x {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  %lossr = loom.all_reduce %loss {axes = array<i64: 0>, predicted_bytes = 4 : i64} : tensor<f32> -> tensor<f32>
  %ar = loom.all_reduce %act {axes = array<i64: 1>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %y = loom.matmul %ar, %w1 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %gbig = loom.matmul %y, %z {transpose_lhs} : (tensor<2x8xf32>, tensor<2x32xf32>) -> tensor<8x32xf32>
  %gw2 = loom.matmul %y, %x {transpose_lhs} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
  %gb2 = loom.reduce_sum %x {axes = array<i64: 0>, keep_dims} : (tensor<2x4xf32>) -> tensor<1x4xf32>
  %gn1 = loom.reduce_sum %y {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<8xf32>
  %gn2 = loom.reduce_sum %y {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<8xf32>
  %gw1 = loom.matmul %x, %y {transpose_lhs} : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %rw1 = loom.all_reduce %gw1 {axes = array<i64: 0>, predicted_bytes = 128 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %uw1 = loom.sgd_update %w1, %rw1, %lr {weight_decay = 0.0 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %rw2 = loom.all_reduce %gw2 {axes = array<i64: 0>, predicted_bytes = 128 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  %tw2 = loom.transpose %rw2 {permutation = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %uw2 = loom.sgd_update %w2, %tw2, %lr {weight_decay = 0.0 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %rb2 = loom.all_reduce %gb2 {axes = array<i64: 0>, predicted_bytes = 16 : i64} : tensor<1x4xf32> -> tensor<1x4xf32>
  %fb2 = loom.reshape %rb2 : tensor<1x4xf32> -> tensor<4xf32>
  %ub2 = loom.sgd_update %b2, %fb2, %lr {weight_decay = 0.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %rn1 = loom.all_reduce %gn1 {axes = array<i64: 0, 1>} : tensor<8xf32> -> tensor<8xf32>
  %un1 = loom.sgd_update %n1, %rn1, %lr {weight_decay = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %rn2 = loom.all_reduce %gn2 {axes = array<i64: 0, 1>} : tensor<8xf32> -> tensor<8xf32>
  %un2 = loom.sgd_update %n2, %rn2, %lr {weight_decay = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %rbig = loom.all_reduce %gbig {axes = array<i64: 0>, predicted_bytes = 1024 : i64} : tensor<8x32xf32> -> tensor<8x32xf32>
  %ubig = loom.sgd_update %big, %rbig, %lr {weight_decay = 0.0 : f32} : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
  return %lossr, %ar, %uw1, %uw2, %ub2, %un1, %un2, %ubig : tensor<f32>, tensor<2x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>
}

// The loss's and the activation's all-reduces stay where they were.
// CHECK: %[[LOSS:.*]] = loom.all_reduce %{{.*}} {axes = array<i64: 0>, predicted_bytes = 4 : i64} : tensor<f32>
// CHECK: %[[ACT:.*]] = loom.all_reduce %arg1 {axes = array<i64: 1>} : tensor<2x4xf32>
// CHECK: %[[Y:.*]] = loom.matmul %[[ACT]]
// CHECK: %[[GBIG:.*]] = loom.matmul %[[Y]], %arg2
// CHECK: %[[GW2:.*]] = loom.matmul %[[Y]], %arg0
// CHECK: %[[GB2:.*]] = loom.reduce_sum %arg0
// The norms' gradients, over both axes: a bucket of their own, right after
// the second is made.
// CHECK: %[[GN1:.*]] = loom.reduce_sum %[[Y]]
// CHECK: %[[GN2:.*]] = loom.reduce_sum %[[Y]]
// CHECK-NEXT: %[[N:.*]] = loom.concat %[[GN1]], %[[GN2]] {axis = 0 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>
// CHECK-NEXT: %[[NR:.*]] = loom.all_reduce %[[N]] {axes = array<i64: 0, 1>} : tensor<16xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[SN1:.*]] = loom.slice %[[NR]] {sizes = array<i64: 8>, starts = array<i64: 0>, strides = array<i64: 1>}
// CHECK-NEXT: %[[SN2:.*]] = loom.slice %[[NR]] {sizes = array<i64: 8>, starts = array<i64: 8>, strides = array<i64: 1>}
// big's 1024 bytes fill a bucket: alone, it keeps its all-reduce (below).
// w2, b2 and w1 in the order they are made, 272 bytes in all.
// CHECK: %[[GW1:.*]] = loom.matmul %arg0, %[[Y]]
// CHECK-NEXT: %[[F1:.*]] = loom.reshape %[[GW2]] : tensor<8x4xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[F2:.*]] = loom.reshape %[[GB2]] : tensor<1x4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[F3:.*]] = loom.reshape %[[GW1]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[B:.*]] = loom.concat %[[F1]], %[[F2]], %[[F3]] {axis = 0 : i64} : (tensor<32xf32>, tensor<4xf32>, tensor<32xf32>) -> tensor<68xf32>
// CHECK-NEXT: %[[BR:.*]] = loom.all_reduce %[[B]] {axes = array<i64: 0>, predicted_bytes = 272 : i64} : tensor<68xf32> -> tensor<68xf32>
// CHECK-NEXT: %[[S1:.*]] = loom.slice %[[BR]] {sizes = array<i64: 32>, starts = array<i64: 0>, strides = array<i64: 1>}
// CHECK-NEXT: %[[R1:.*]] = loom.reshape %[[S1]] : tensor<32xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[T1:.*]] = loom.transpose %[[R1]] {permutation = array<i64: 1, 0>}
// b2's reshape from 1x4 to 4 is the slice itself.
// CHECK-NEXT: %[[S2:.*]] = loom.slice %[[BR]] {sizes = array<i64: 4>, starts = array<i64: 32>, strides = array<i64: 1>}
// CHECK-NEXT: %[[S3:.*]] = loom.slice %[[BR]] {sizes = array<i64: 32>, starts = array<i64: 36>, strides = array<i64: 1>}
// CHECK-NEXT: %[[R3:.*]] = loom.reshape %[[S3]] : tensor<32xf32> -> tensor<4x8xf32>
// CHECK-NEXT: loom.sgd_update %arg3, %[[R3]]
// CHECK-NEXT: loom.sgd_update %arg4, %[[T1]]
// CHECK-NEXT: loom.sgd_update %arg5, %[[S2]]
// CHECK-NEXT: loom.sgd_update %arg6, %[[SN1]]
// CHECK-NEXT: loom.sgd_update %arg7, %[[SN2]]
// CHECK-NEXT: %[[BIG:.*]] = loom.all_reduce %[[GBIG]] {axes = array<i64: 0>, predicted_bytes = 1024 : i64} : tensor<8x32xf32>
// CHECK-NEXT: loom.sgd_update %arg8, %[[BIG]]
// CHECK-NOT: loom.all_reduce

// bucket-bytes=0: one all-reduce per gradient, as the partitioner made them.
// OFF-COUNT-8: loom.all_reduce
// OFF-NOT: loom.concat

// The default, 25 MiB: every gradient over dp in one bucket, big first; its
// predicted bytes are the members' sum.
// DEFAULT-COUNT-2: loom.all_reduce %{{.*}} {axes = array<i64: {{0|1}}>{{.*}}} : tensor<{{f32|2x4xf32}}>
// DEFAULT: loom.all_reduce %{{.*}} {axes = array<i64: 0, 1>} : tensor<16xf32>
// DEFAULT: loom.concat %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<256xf32>, tensor<32xf32>, tensor<4xf32>, tensor<32xf32>) -> tensor<324xf32>
// DEFAULT-NEXT: loom.all_reduce %{{.*}} {axes = array<i64: 0>, predicted_bytes = 1296 : i64} : tensor<324xf32>
// DEFAULT-NOT: loom.all_reduce
