// Proves loom-build-training-graph adds the loss, a reverse-mode backward
// built from each op's gradient rule, and one in-place update per parameter
// (with optimizer state arguments), and rejects what it cannot train.
// RUN: loom-opt %s -split-input-file -verify-diagnostics \
// RUN:   -loom-build-training-graph="optimizer=sgd" | FileCheck %s --check-prefix=SGD
// RUN: loom-opt %s -split-input-file -verify-diagnostics \
// RUN:   -loom-build-training-graph="optimizer=adamw weight-decay=0.01" | FileCheck %s --check-prefix=ADAMW
// RUN: loom-opt %s -split-input-file -verify-diagnostics \
// RUN:   -loom-build-training-graph="optimizer=momentum loss=mse" | FileCheck %s --check-prefix=MSE

// SGD-LABEL: func.func @main
// SGD-SAME: %[[X:.*]]: tensor<4x8xf32> {loom.input = "x"}
// SGD-SAME: %[[W:.*]]: tensor<3x8xf32> {loom.param = "w"}
// SGD-SAME: %[[B:.*]]: tensor<3xf32> {loom.param = "b"}
// SGD-SAME: %[[LABELS:.*]]: tensor<4xi64> {loom.input = "labels"}
// SGD-SAME: %[[LR:.*]]: tensor<f32> {loom.hyper = #loom.hyper<lr>}
// SGD-SAME: %[[STEP:.*]]: tensor<f32> {loom.hyper = #loom.hyper<step>}
// SGD-SAME: -> (tensor<f32> {loom.output = "loss"}, tensor<3x8xf32> {loom.updates = 1 : i64}, tensor<3xf32> {loom.updates = 2 : i64})
// Each differentiated op gets a loom.grad_id, and each op of its gradient a
// loom.grad_of: the id, then per operand and result the forward value it
// stands for (2i: operand i or its gradient, 2j+1: result j or its
// gradient, -1: neither).
// SGD: %[[Y:.*]] = loom.matmul %[[X]], %[[W]] {loom.grad_id = [[MATMUL:[0-9]+]] : i64, transpose_rhs}
// SGD: %[[LOGITS:.*]] = loom.add %[[Y]], %[[B]] {loom.grad_id = [[ADD:[0-9]+]] : i64}
// The mean loss is the summed loss over the count of labels, so that both
// split over the batch as partial sums.
// SGD: %[[SUM:.*]] = loom.softmax_cross_entropy %[[LOGITS]], %[[LABELS]] {ignore_index = -100 : i64, loom.grad_id = {{[0-9]+}} : i64, sum}
// SGD: %[[COUNTED:.*]] = loom.label_count %[[LABELS]] {ignore_index = -100 : i64} : (tensor<4xi64>) -> tensor<f32>
// SGD: %[[TINY:.*]] = loom.constant dense<1.17549435E-38> : tensor<f32>
// SGD: %[[COUNT:.*]] = loom.add %[[COUNTED]], %[[TINY]]
// SGD: %[[LOSS:.*]] = loom.div %[[SUM]], %[[COUNT]] {loom.grad_id = {{[0-9]+}} : i64}
// SGD: %[[ONE:.*]] = loom.constant dense<1.000000e+00> : tensor<f32>
// SGD: %[[SEED:.*]] = loom.div %[[ONE]], %[[COUNT]] {loom.grad_of = array<i64: {{[0-9]+}}, 1, 2, 0>}
// SGD: %[[DY:.*]] = loom.softmax_cross_entropy_grad %[[LOGITS]], %[[LABELS]], %[[SEED]] {ignore_index = -100 : i64, loom.grad_of = array<i64: {{[0-9]+}}, 0, 2, 1, 0>, sum}
// The bias gradient sums the broadcast batch dimension away.
// SGD: %[[DBSUM:.*]] = loom.reduce_sum %[[DY]] {axes = array<i64: 0>, keep_dims, loom.grad_of = array<i64: [[ADD]], 1, -1>}
// SGD: %[[DB:.*]] = loom.reshape %[[DBSUM]] {loom.grad_of = array<i64: [[ADD]], -1, 2>} : tensor<1x3xf32> -> tensor<3xf32>
// y = x w^T, so dw = dy^T x.
// SGD: %[[DW:.*]] = loom.matmul %[[DY]], %[[X]] {loom.grad_of = array<i64: [[MATMUL]], 1, 0, 2>, transpose_lhs}
// SGD-NOT: loom.matmul %[[DY]], %[[W]]
// SGD: %[[W2:.*]] = loom.sgd_update %[[W]], %[[DW]], %[[LR]] {weight_decay = 0.000000e+00 : f32}
// SGD: %[[B2:.*]] = loom.sgd_update %[[B]], %[[DB]], %[[LR]]
// SGD: return %[[LOSS]], %[[W2]], %[[B2]]

// ADAMW-LABEL: func.func @main
// ADAMW-SAME: {loom.state = "w::m"}
// ADAMW-SAME: {loom.state = "w::v"}
// ADAMW-SAME: {loom.state = "b::m"}
// ADAMW-SAME: {loom.state = "b::v"}
// ADAMW-SAME: tensor<3x8xf32> {loom.updates = 1 : i64}, tensor<3x8xf32> {loom.updates = 6 : i64}, tensor<3x8xf32> {loom.updates = 7 : i64}
// ADAMW: loom.adam_update {{.*}} {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, decoupled_weight_decay, epsilon = 9.99999993E-9 : f32, weight_decay = 0.00999999977 : f32}

// MSE-LABEL: func.func @main
// MSE-SAME: %{{.*}}: tensor<4x3xf32> {loom.input = "labels"}
// MSE: loom.mse_loss
// MSE: loom.momentum_update {{.*}} {momentum = 0.899999976 : f32, weight_decay = 0.000000e+00 : f32}
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<3x8xf32> {loom.param = "w"},
                %b: tensor<3xf32> {loom.param = "b"}) -> tensor<4x3xf32> {
  %y = loom.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
  %z = loom.add %y, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return %z : tensor<4x3xf32>
}

// -----

// A non-differentiable op on the path to a parameter is an error.
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<4x8xf32> {loom.param = "w"}) -> tensor<4x8xf32> {
  %y = loom.mul %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %i = loom.cast %y : tensor<4x8xf32> -> tensor<4x8xi32>
  // expected-error @+1 {{'loom.cast' op only casts between float types are differentiable}}
  %f = loom.cast %i : tensor<4x8xi32> -> tensor<4x8xf32>
  return %f : tensor<4x8xf32>
}

// -----

// TopK is inference-only: a parameter reaching the loss through it is an
// error that says so.
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<4x8xf32> {loom.param = "w"}) -> tensor<4x2xf32> {
  %y = loom.mul %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{'loom.top_k' op is inference-only (ONNX TopK): Loom gives its values no gradient}}
  %v:2 = loom.top_k %y {axis = 1 : i64, k = 2 : i64} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  return %v#0 : tensor<4x2xf32>
}

// -----

// A comparison's mask is a constant of the loss: the parameter's gradient
// flows through the select and the float use of the mask, not through the
// comparison (which has no gradient rule).
// SGD: %[[M:.*]] = loom.greater %[[MX:.*]], %[[MW:.*]] :
// SGD-NOT: loom.equal
// SGD: loom.sgd_update %[[MW]]
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<4x8xf32> {loom.param = "w"}) -> tensor<4x8xf32> {
  %m = loom.greater %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %s = loom.select %m, %x, %w : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %f = loom.cast %m : tensor<4x8xi1> -> tensor<4x8xf32>
  %y = loom.mul %s, %f : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
