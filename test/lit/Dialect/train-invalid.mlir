// Asserts every verifier and type-inference message of the gradient and
// optimizer ops, word for word.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

func.func @relu_grad_types(%x: tensor<2x8xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+2 {{grad is f32[2, 4], expected f32[2, 8]}}
  // expected-error @+1 {{'loom.relu_grad' op failed to infer returned types}}
  %0 = loom.relu_grad %x, %g : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @unary_grad_unknown_fn(%x: tensor<2xf32>) {
  // expected-error @+2 {{fn 'relu' is not one of cos, sin, abs, reciprocal, softplus, mish, hard_swish, leaky_relu, elu, selu, hard_sigmoid, clip}}
  // expected-error @+1 {{'loom.unary_grad' op failed to infer returned types}}
  %0 = loom.unary_grad %x, %x {fn = "relu", alpha = 0.0 : f32, beta = 0.0 : f32} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @layer_norm_grad_axis(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'loom.layer_norm_grad' op failed to infer returned types}}
  %0:3 = loom.layer_norm_grad %x, %s, %x {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_grad(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %g: tensor<8xf32>) {
  // expected-error @+2 {{grad is f32[8], expected f32[2, 8]}}
  // expected-error @+1 {{'loom.layer_norm_grad' op failed to infer returned types}}
  %0:3 = loom.layer_norm_grad %x, %s, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<2x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{scale is f32[4], expected f32[8]}}
  // expected-error @+1 {{'loom.layer_norm_grad' op failed to infer returned types}}
  %0:3 = loom.layer_norm_grad %x, %s, %x {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<4xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @cross_entropy_grad_shapes(%l: tensor<2x5xf32>, %y: tensor<3xi64>, %g: tensor<f32>) {
  // expected-error @+2 {{logits must be [N, C] and labels [N]}}
  // expected-error @+1 {{'loom.softmax_cross_entropy_grad' op failed to infer returned types}}
  %0 = loom.softmax_cross_entropy_grad %l, %y, %g {ignore_index = -100 : i64} : (tensor<2x5xf32>, tensor<3xi64>, tensor<f32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @cross_entropy_grad_scalar(%l: tensor<2x5xf32>, %y: tensor<2xi64>, %g: tensor<1xf32>) {
  // expected-error @+2 {{grad is f32[1], expected f32[]}}
  // expected-error @+1 {{'loom.softmax_cross_entropy_grad' op failed to infer returned types}}
  %0 = loom.softmax_cross_entropy_grad %l, %y, %g {ignore_index = -100 : i64} : (tensor<2x5xf32>, tensor<2xi64>, tensor<1xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gather_grad_axis(%i: tensor<3xi64>, %g: tensor<3x8xf32>) {
  // expected-error @+1 {{'loom.gather_grad' op axis 2 is out of range for rank 2}}
  %0 = loom.gather_grad %i, %g {axis = 2 : i64} : (tensor<3xi64>, tensor<3x8xf32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @gather_grad_shape(%i: tensor<3xi64>, %g: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.gather_grad' op grad is f32[4, 8] but gather of the result gives f32[3, 8]}}
  %0 = loom.gather_grad %i, %g {axis = 0 : i64} : (tensor<3xi64>, tensor<4x8xf32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @slice_grad_rank(%g: tensor<4xf32>) {
  // expected-error @+1 {{'loom.slice_grad' op starts, sizes and strides need 2 entries each}}
  %0 = loom.slice_grad %g {starts = array<i64: 0>, strides = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_grad_bounds(%g: tensor<1x4xf32>) {
  // expected-error @+1 {{'loom.slice_grad' op slice of dimension 1 writes [6, 9], outside the dimension of size 8}}
  %0 = loom.slice_grad %g {starts = array<i64: 0, 6>, strides = array<i64: 1, 1>} : (tensor<1x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @conv_grad_input(%g: tensor<1x4x4x4xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_grad_input' op weight has 3 input channels per group, expected 2}}
  %0 = loom.conv2d_grad_input %g, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<1x2x6x6xf32>
  return
}

// -----

func.func @conv_grad_input_shape(%g: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_grad_input' op grad is f32[1, 4, 5, 5] but conv2d of the result gives f32[1, 4, 4, 4]}}
  %0 = loom.conv2d_grad_input %g, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  return
}

// -----

func.func @conv_grad_weight(%x: tensor<1x2x6x6xf32>, %g: tensor<1x4x4x4xf32>) {
  // expected-error @+1 {{'loom.conv2d_grad_weight' op weight has 3 input channels per group, expected 2}}
  %0 = loom.conv2d_grad_weight %x, %g {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x6x6xf32>, tensor<1x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  return
}

// -----

func.func @max_pool_grad_type(%x: tensor<1x2x6x6xf32>, %g: tensor<1x2x3x3xf32>) {
  // expected-error @+1 {{'loom.max_pool2d_grad' op result is f32[1, 2, 6, 7] but the op gives f32[1, 2, 6, 6]}}
  %0 = loom.max_pool2d_grad %x, %g {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x6x6xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x6x7xf32>
  return
}

// -----

func.func @avg_pool_grad_shape(%g: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'loom.avg_pool2d_grad' op grad is f32[1, 2, 2, 2] but avg_pool2d of the result gives f32[1, 2, 3, 3]}}
  %0 = loom.avg_pool2d_grad %g {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x2x2xf32>) -> tensor<1x2x6x6xf32>
  return
}

// -----

func.func @avg_pool_grad_window(%g: tensor<1x2x3x3xf32>) {
  // expected-error @+1 {{window does not fit spatial dimension 0 of size 1}}
  %0 = loom.avg_pool2d_grad %g {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x1x6xf32>
  return
}

// -----

func.func @sgd_lr(%p: tensor<8xf32>, %lr: tensor<1xf32>) {
  // expected-error @+2 {{lr is f32[1], expected f32[]}}
  // expected-error @+1 {{'loom.sgd_update' op failed to infer returned types}}
  %0 = loom.sgd_update %p, %p, %lr {weight_decay = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @momentum_types(%p: tensor<8xf32>, %v: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+2 {{operand #2 is f32[4], expected f32[8]}}
  // expected-error @+1 {{'loom.momentum_update' op failed to infer returned types}}
  %0:2 = loom.momentum_update %p, %p, %v, %lr {momentum = 0.9 : f32, weight_decay = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adam_step(%p: tensor<8xf32>, %lr: tensor<f32>, %step: tensor<2xf32>) {
  // expected-error @+2 {{step is f32[2], expected f32[]}}
  // expected-error @+1 {{'loom.adam_update' op failed to infer returned types}}
  %0:3 = loom.adam_update %p, %p, %p, %p, %lr, %step {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<2xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// expected-error @+1 {{'loom.hyper' must be a #loom.hyper (lr or step) on a scalar argument}}
func.func @hyper(%lr: tensor<2xf32> {loom.hyper = #loom.hyper<lr>}) {
  return
}

// -----

// A per-step scalar spelt as a string (before it was typed).
// expected-error @+1 {{'loom.hyper' must be a #loom.hyper (lr or step) on a scalar argument}}
func.func @hyper_string(%lr: tensor<f32> {loom.hyper = "lr"}) {
  return
}

// -----

// expected-error @+1 {{expected a per-step scalar (lr or step), got 'rate'}}
func.func @hyper_spelling(%lr: tensor<f32> {loom.hyper = #loom.hyper<rate>}) {
  return
}

// -----

// expected-error @+1 {{'loom.updates' of result #0 must be the index of an argument of the same type}}
func.func @updates(%p: tensor<8xf32>) -> (tensor<4xf32> {loom.updates = 0 : i64}) {
  %0 = loom.slice %p {starts = array<i64: 0>, sizes = array<i64: 4>, strides = array<i64: 1>} : (tensor<8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @pad_grad_shape(%g: tensor<4x6xf32>) {
  // expected-error @+1 {{'loom.pad_grad' op grad is f32[4, 6] but pad of the result gives f32[4, 7]}}
  %0 = loom.pad_grad %g {low = array<i64: 0, 2>, high = array<i64: 0, 1>, mode = "reflect"} : (tensor<4x6xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @pad_grad_reflect_too_wide(%g: tensor<4x7xf32>) {
  // expected-error @+1 {{'loom.pad_grad' op reflect pad of dimension 1 (low 3, high 1) must be smaller than its size 3}}
  %0 = loom.pad_grad %g {low = array<i64: 0, 3>, high = array<i64: 0, 1>, mode = "reflect"} : (tensor<4x7xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @reduce_prod_grad_shape(%x: tensor<4x5xf32>, %g: tensor<5xf32>) {
  // expected-error @+2 {{grad is f32[5] but the product of the input gives f32[4]}}
  // expected-error @+1 {{'loom.reduce_prod_grad' op failed to infer returned types}}
  %0 = loom.reduce_prod_grad %x, %g {axes = array<i64: 1>} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return
}
