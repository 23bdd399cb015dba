// Round-trips every gradient and optimizer op of the loom dialect.
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s -mlir-print-op-generic | loom-opt | FileCheck %s

// CHECK-LABEL: func.func @train_ops
// CHECK-NEXT: %0 = loom.relu_grad %arg0, %arg1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %1 = loom.gelu_grad %arg0, %arg1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %2 = loom.gelu_grad %arg0, %arg1 {tanh_approximation} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %input_grad, %scale_grad, %bias_grad = loom.layer_norm_grad %arg0, %arg2, %arg1 {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %3 = loom.gather_grad %arg3, %arg4 {axis = 0 : i64} : (tensor<3xi64>, tensor<3x8xf32>) -> tensor<10x8xf32>
// CHECK-NEXT: %4 = loom.slice_grad %arg5 {starts = array<i64: 1, 6>, strides = array<i64: 1, -2>} : (tensor<1x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %5 = loom.softmax_cross_entropy_grad %arg6, %arg7, %arg8 {ignore_index = -100 : i64} : (tensor<2x5xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x5xf32>
// CHECK-NEXT: %6 = loom.softmax_cross_entropy_grad %arg6, %arg7, %arg8 {ignore_index = 0 : i64, sum} : (tensor<2x5xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x5xf32>
// CHECK-NEXT: %7 = loom.conv2d_grad_input %arg11, %arg10 {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x6x6xf32>
// CHECK-NEXT: %8 = loom.conv2d_grad_weight %arg9, %arg11 {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x6x6xf32>, tensor<1x4x4x4xf32>) -> tensor<4x2x3x3xf32>
// CHECK-NEXT: %9 = loom.max_pool2d_grad %arg9, %arg12 {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x6x6xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
// CHECK-NEXT: %10 = loom.avg_pool2d_grad %arg12 {ceil_mode, count_include_pad, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
// CHECK-NEXT: %11 = loom.sgd_update %arg13, %arg2, %arg14 {weight_decay = 0.000000e+00 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK-NEXT: %new_param, %new_velocity = loom.momentum_update %arg13, %arg2, %arg2, %arg14 {momentum = 0.899999976 : f32, nesterov, weight_decay = 0.000000e+00 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %12 = loom.reduce_max %arg0 {axes = array<i64: 1>, keep_dims} : (tensor<2x8xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %13 = loom.reduce_max_grad %arg0, %12, %12 {axes = array<i64: 1>, keep_dims} : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %new_param_0, %new_m, %new_v = loom.adam_update %arg13, %arg2, %arg2, %arg2, %arg14, %arg15 {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, decoupled_weight_decay, epsilon = 9.99999993E-9 : f32, weight_decay = 0.00999999977 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %14 = loom.unary_grad %arg0, %arg1 {alpha = 5.000000e-01 : f32, beta = 0.000000e+00 : f32, fn = "elu"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return

func.func @train_ops(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>, %s: tensor<8xf32>,
                     %idx: tensor<3xi64>, %gg: tensor<3x8xf32>, %gs: tensor<1x4xf32>,
                     %logits: tensor<2x5xf32>, %labels: tensor<2xi64>, %one: tensor<f32>,
                     %img: tensor<1x2x6x6xf32>, %w: tensor<4x2x3x3xf32>, %gy: tensor<1x4x4x4xf32>,
                     %gp: tensor<1x2x3x3xf32>, %p: tensor<8xf32>, %lr: tensor<f32>, %step: tensor<f32>) {
  %0 = loom.relu_grad %x, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = loom.gelu_grad %x, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = loom.gelu_grad %x, %g {tanh_approximation} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %3:3 = loom.layer_norm_grad %x, %s, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %4 = loom.gather_grad %idx, %gg {axis = 0 : i64} : (tensor<3xi64>, tensor<3x8xf32>) -> tensor<10x8xf32>
  %5 = loom.slice_grad %gs {starts = array<i64: 1, 6>, strides = array<i64: 1, -2>} : (tensor<1x4xf32>) -> tensor<2x8xf32>
  %6 = loom.softmax_cross_entropy_grad %logits, %labels, %one {ignore_index = -100 : i64} : (tensor<2x5xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x5xf32>
  %7 = loom.softmax_cross_entropy_grad %logits, %labels, %one {ignore_index = 0 : i64, sum} : (tensor<2x5xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x5xf32>
  %8 = loom.conv2d_grad_input %gy, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  %9 = loom.conv2d_grad_weight %img, %gy {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x6x6xf32>, tensor<1x4x4x4xf32>) -> tensor<4x2x3x3xf32>
  %10 = loom.max_pool2d_grad %img, %gp {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x6x6xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  %11 = loom.avg_pool2d_grad %gp {ceil_mode, count_include_pad, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  %12 = loom.sgd_update %p, %s, %lr {weight_decay = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %13:2 = loom.momentum_update %p, %s, %s, %lr {momentum = 0.9 : f32, nesterov, weight_decay = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
  %m = loom.reduce_max %x {axes = array<i64: 1>, keep_dims} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %dm = loom.reduce_max_grad %x, %m, %m {axes = array<i64: 1>, keep_dims} : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %14:3 = loom.adam_update %p, %s, %s, %s, %lr, %step {beta1 = 0.9 : f32, beta2 = 0.999 : f32, decoupled_weight_decay, epsilon = 1.0e-8 : f32, weight_decay = 0.01 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %15 = loom.unary_grad %x, %g {fn = "elu", alpha = 0.5 : f32, beta = 0.0 : f32} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// CHECK-LABEL: func.func @reduce_prod_grad
// CHECK: loom.reduce_prod_grad %arg0, %arg1 {axes = array<i64: 1>, keep_dims} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
func.func @reduce_prod_grad(%x: tensor<2x8xf32>, %g: tensor<2x1xf32>) {
  %0 = loom.reduce_prod_grad %x, %g {axes = array<i64: 1>, keep_dims} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return
}
