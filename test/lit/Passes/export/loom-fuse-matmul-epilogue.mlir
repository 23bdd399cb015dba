// -loom-fuse-matmul-epilogue folds last-two-dimension transposes into matmul flags and a bias add (and a relu after it) into loom.fused_matmul, and leaves near misses untouched.
// RUN: loom-opt %s -loom-fuse-matmul-epilogue -split-input-file | FileCheck %s

// A linear layer as the partitioner emits it: the weight's transpose becomes
// transpose_rhs and is erased, the bias (on either side of the add) joins
// the GEMM, and the relu too; the annotation of the sum is kept.
// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8x16xf32>, %[[W:[a-z0-9]+]]: tensor<32x16xf32>, %[[B:[a-z0-9]+]]: tensor<32xf32>)
// CHECK-NEXT: %[[Y:.*]] = loom.fused_matmul %[[X]], %[[W]], %[[B]] {loom.stage = 1 : i64, relu, transpose_rhs} : (tensor<4x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<4x8x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @linear_relu(%x: tensor<4x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<4x8x32xf32> {
  %t = loom.transpose %w {permutation = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
  %p = loom.matmul %x, %t : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  %s = loom.add %b, %p {loom.stage = 1 : i64} : (tensor<32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %y = loom.relu %s : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  return %y : tensor<4x8x32xf32>
}

// -----

// Training keeps the pre-activation for relu_grad: the relu stays separate.
// A transpose on a flag already set flips it off (rhs); a transpose with
// another user is kept for it (lhs).
// CHECK-LABEL: func.func @relu_kept
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<16x4xbf16>, %[[W:[a-z0-9]+]]: tensor<16x8xbf16>, %[[B:[a-z0-9]+]]: tensor<8xbf16>, %[[G:[a-z0-9]+]]: tensor<4x8xbf16>)
// CHECK-NEXT: %[[T:.*]] = loom.transpose %[[X]]
// CHECK-NEXT: %[[S:.*]] = loom.fused_matmul %[[X]], %[[W]], %[[B]] {transpose_lhs} : (tensor<16x4xbf16>, tensor<16x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[R:.*]] = loom.relu %[[S]]
// CHECK-NEXT: %[[D:.*]] = loom.relu_grad %[[S]], %[[G]]
// CHECK-NEXT: return %[[R]], %[[D]], %[[T]]
func.func @relu_kept(%x: tensor<16x4xbf16>, %w: tensor<16x8xbf16>, %b: tensor<8xbf16>, %g: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x16xbf16>) {
  %xt = loom.transpose %x {permutation = array<i64: 1, 0>} : (tensor<16x4xbf16>) -> tensor<4x16xbf16>
  %wt = loom.transpose %w {permutation = array<i64: 1, 0>} : (tensor<16x8xbf16>) -> tensor<8x16xbf16>
  %p = loom.matmul %xt, %wt {transpose_rhs} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
  %s = loom.add %p, %b : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %r = loom.relu %s : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %d = loom.relu_grad %s, %g : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %r, %d, %xt : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x16xbf16>
}

// -----

// Near misses. A transpose that moves a batch dimension is not a flag; an
// add of a full tensor or of a [1, N] matrix is not a bias; a product with
// a second user (here, returned) must be materialised, so nothing fuses.
// CHECK-LABEL: func.func @near_misses
// CHECK: loom.transpose
// CHECK: loom.matmul
// CHECK: loom.add
// CHECK: loom.matmul
// CHECK: loom.add
// CHECK: loom.matmul
// CHECK: loom.add
// CHECK-NOT: fused_matmul
func.func @near_misses(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %full: tensor<2x3x5xf32>, %row: tensor<1x5xf32>, %b: tensor<5xf32>) -> (tensor<3x2x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
  %xt = loom.transpose %x {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %p0 = loom.matmul %xt, %w : (tensor<3x2x4xf32>, tensor<4x5xf32>) -> tensor<3x2x5xf32>
  %p1 = loom.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %s1 = loom.add %p1, %full : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %p2 = loom.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %s2 = loom.add %p2, %row : (tensor<2x3x5xf32>, tensor<1x5xf32>) -> tensor<2x3x5xf32>
  %p3 = loom.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %s3 = loom.add %p3, %b : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %p0, %s1, %s2, %s3, %p3 : tensor<3x2x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

// A shared weight's gradient: a batch of products summed over the batch
// becomes one matmul over the flattened rows (the reshapes of temporaries
// copy nothing), reshaped to the sum's type, with its marks.
// CHECK-LABEL: func.func @weight_gradient
// CHECK: %[[X:.*]] = loom.relu
// CHECK-NEXT: %[[Y:.*]] = loom.relu
// CHECK-NEXT: %[[XF:.*]] = loom.reshape %[[X]] {loom.stage = 1 : i64} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[YF:.*]] = loom.reshape %[[Y]] {loom.stage = 1 : i64} : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK-NEXT: %[[P:.*]] = loom.matmul %[[XF]], %[[YF]] {loom.stage = 1 : i64, transpose_lhs} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %[[S:.*]] = loom.reshape %[[P]] {loom.stage = 1 : i64} : tensor<4x5xf32> -> tensor<1x4x5xf32>
// CHECK-NEXT: return %[[S]]
func.func @weight_gradient(%a: tensor<2x3x4xf32>, %g: tensor<2x3x5xf32>) -> tensor<1x4x5xf32> {
  %x = loom.relu %a : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = loom.relu %g : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %p = loom.matmul %x, %y {loom.stage = 1 : i64, transpose_lhs} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %s = loom.reduce_sum %p {axes = array<i64: 0>, keep_dims, loom.stage = 1 : i64} : (tensor<2x4x5xf32>) -> tensor<1x4x5xf32>
  return %s : tensor<1x4x5xf32>
}

// -----

// Not flattened: operands that are the function's inputs would be copied,
// more than the batch of products holds; a sum over more than the batch;
// a product without transpose_lhs.
// CHECK-LABEL: func.func @weight_gradient_misses
// CHECK-COUNT-3: loom.matmul {{.*}} -> tensor<2x4x5xf32>
func.func @weight_gradient_misses(%a: tensor<2x3x4xf32>, %g: tensor<2x3x5xf32>, %b: tensor<2x4x3xf32>) -> (tensor<1x4x5xf32>, tensor<1x1x5xf32>, tensor<1x4x5xf32>) {
  %p = loom.matmul %a, %g {transpose_lhs} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %s = loom.reduce_sum %p {axes = array<i64: 0>, keep_dims} : (tensor<2x4x5xf32>) -> tensor<1x4x5xf32>
  %x = loom.relu %a : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = loom.relu %g : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %q = loom.matmul %x, %y {transpose_lhs} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %t = loom.reduce_sum %q {axes = array<i64: 0, 1>, keep_dims} : (tensor<2x4x5xf32>) -> tensor<1x1x5xf32>
  %z = loom.relu %b : (tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %r = loom.matmul %z, %y : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %u = loom.reduce_sum %r {axes = array<i64: 0>, keep_dims} : (tensor<2x4x5xf32>) -> tensor<1x4x5xf32>
  return %s, %t, %u : tensor<1x4x5xf32>, tensor<1x1x5xf32>, tensor<1x4x5xf32>
}
