// Every verifier and type-inference diagnostic of the loom dialect reachable from textual IR fires, word for word, on invalid IR.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

// Not reachable from textual IR, so not tested here: the custom attribute
// parsers always build well-formed parameter lists, which rules out
// "mesh has N axis names but M sizes", "layout needs a mesh", "layout dimension
// entries must be lists of axis names" and "strategy entries must be integer
// lists". Nor is "loom result attributes belong on functions": MLIR asks the
// dialect to verify result attributes only for function ops. Nor are the
// element type messages of the comparison and logic rules ("operands must be
// numbers, not bool", "operands must be bool, not f32"): the ODS operand
// constraints reject those types first; plan validation reaches them.

//===----------------------------------------------------------------------===//
// ODS-generated constraints
//===----------------------------------------------------------------------===//

func.func @dynamic_shape_operand(%a: tensor<?x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'loom.add' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?x3xf32>'}}
  %0 = loom.add %a, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  return
}

// -----

func.func @integer_matmul(%a: tensor<2x3xi32>, %b: tensor<3x4xi32>) {
  // expected-error @+1 {{'loom.matmul' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<2x3xi32>'}}
  %0 = loom.matmul %a, %b : (tensor<2x3xi32>, tensor<3x4xi32>) -> tensor<2x4xi32>
  return
}

// -----

func.func @bool_add(%a: tensor<3xi1>) {
  // expected-error @+1 {{'loom.add' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xi1>'}}
  %0 = loom.add %a, %a : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  return
}

// -----

func.func @float_gather_indices(%a: tensor<4x2xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{'loom.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = loom.gather %a, %i {axis = 0 : i64} : (tensor<4x2xf32>, tensor<3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @unranked_cast(%a: tensor<*xf32>) {
  // The custom form only takes ranked tensors; the generic form reaches the
  // verifier.
  // expected-error @+1 {{'loom.cast' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer or 1-bit signless integer values, but got 'tensor<*xf32>'}}
  %0 = "loom.cast"(%a) : (tensor<*xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @i8_constant() {
  // expected-error @+1 {{'loom.constant' op result #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer or 1-bit signless integer values, but got 'tensor<2xi8>'}}
  %0 = loom.constant dense<1> : tensor<2xi8>
  return
}

// -----

func.func @missing_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.softmax' op requires attribute 'axis'}}
  %0 = loom.softmax %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @i32_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.softmax' op attribute 'axis' failed to satisfy constraint: 64-bit signless integer attribute}}
  %0 = loom.softmax %a {axis = 1 : i32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f64_epsilon(%a: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op attribute 'epsilon' failed to satisfy constraint: 32-bit float attribute}}
  %0 = loom.layer_norm %a, %s {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @axes_not_array(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op attribute 'axes' failed to satisfy constraint: i64 dense array attribute}}
  %0 = loom.reduce_sum %a {axes = [0]} : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Result type does not match the inferred one
//===----------------------------------------------------------------------===//

func.func @wrong_result_type(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'loom.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{'loom.add' op failed to infer returned types}}
  %0 = loom.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @wrong_unary_result_type(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'loom.exp' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf16>'}}
  // expected-error @+1 {{'loom.exp' op failed to infer returned types}}
  %0 = loom.exp %a : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @wrong_reduce_result_type(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'loom.reduce_sum' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<2x1xf32>'}}
  // expected-error @+1 {{'loom.reduce_sum' op failed to infer returned types}}
  %0 = loom.reduce_sum %a {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @wrong_constant_type() {
  // expected-error @+2 {{'loom.constant' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<2xf16>'}}
  // expected-error @+1 {{'loom.constant' op failed to infer returned types}}
  %0 = "loom.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @different_element_types(%a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+2 {{operands have different element types (f32 and f16)}}
  // expected-error @+1 {{'loom.sub' op failed to infer returned types}}
  %0 = loom.sub %a, %b : (tensor<2xf32>, tensor<2xf16>) -> tensor<2xf32>
  return
}

// -----

func.func @no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{operand shapes [2, 3] and [4] do not broadcast}}
  // expected-error @+1 {{'loom.mul' op failed to infer returned types}}
  %0 = loom.mul %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.cast' op result shape [3, 2] differs from input shape [2, 3]}}
  %0 = loom.cast %a : tensor<2x3xf32> -> tensor<3x2xi32>
  return
}

// -----

func.func @select_value_types(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<2xbf16>) {
  // expected-error @+2 {{operands have different element types (f32 and bf16)}}
  // expected-error @+1 {{'loom.select' op failed to infer returned types}}
  %0 = loom.select %c, %a, %b : (tensor<2xi1>, tensor<2xf32>, tensor<2xbf16>) -> tensor<2xf32>
  return
}

// -----

func.func @select_values_no_broadcast(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{operand shapes [2] and [3] do not broadcast}}
  // expected-error @+1 {{'loom.select' op failed to infer returned types}}
  %0 = loom.select %c, %a, %b : (tensor<2xi1>, tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @select_condition(%c: tensor<4xi1>, %a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{condition shape [4] does not broadcast with [2, 3]}}
  // expected-error @+1 {{'loom.select' op failed to infer returned types}}
  %0 = loom.select %c, %a, %b : (tensor<4xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Comparisons, logic, max, min, trilu
//===----------------------------------------------------------------------===//

func.func @compare_element_types(%a: tensor<2xf32>, %b: tensor<2xi32>) {
  // expected-error @+2 {{operands have different element types (f32 and i32)}}
  // expected-error @+1 {{'loom.equal' op failed to infer returned types}}
  %0 = loom.equal %a, %b : (tensor<2xf32>, tensor<2xi32>) -> tensor<2xi1>
  return
}

// -----

func.func @compare_no_broadcast(%a: tensor<2x3xi64>, %b: tensor<2xi64>) {
  // expected-error @+2 {{operand shapes [2, 3] and [2] do not broadcast}}
  // expected-error @+1 {{'loom.greater_equal' op failed to infer returned types}}
  %0 = loom.greater_equal %a, %b : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x3xi1>
  return
}

// -----

func.func @compare_result_type(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'loom.less' op result #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<2xf32>'}}
  %0 = loom.less %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @ordering_on_bool(%a: tensor<2xi1>, %b: tensor<2xi1>) {
  // expected-error @+1 {{'loom.less' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xi1>'}}
  %0 = loom.less %a, %b : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
  return
}

// -----

func.func @logic_on_numbers(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'loom.and' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<2xf32>'}}
  %0 = loom.and %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  return
}

// -----

func.func @max_on_bool(%a: tensor<2xi1>, %b: tensor<2xi1>) {
  // expected-error @+1 {{'loom.max' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xi1>'}}
  %0 = loom.max %a, %b : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
  return
}

// -----

func.func @trilu_rank(%a: tensor<5xf32>) {
  // expected-error @+2 {{input must have rank at least 2, not 1}}
  // expected-error @+1 {{'loom.trilu' op failed to infer returned types}}
  %0 = loom.trilu %a {upper = true, k = 0 : i64} : (tensor<5xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @trilu_needs_k(%a: tensor<2x5xf32>) {
  // expected-error @+1 {{'loom.trilu' op requires attribute 'k'}}
  %0 = loom.trilu %a {upper = true} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{operands must have rank at least 2, got 1 and 2}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  // expected-error @+2 {{operands have different element types (f32 and f16)}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_contracting(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs has 3, rhs has 4}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @matmul_contracting_transposed(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  // With transpose_lhs the lhs is [3, 2]: it contracts 2 against 3.
  // expected-error @+2 {{contracting dimensions differ: lhs has 2, rhs has 3}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b {transpose_lhs} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error @+2 {{batch dimensions [2] and [3] do not broadcast}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : (tensor<2x4x3xf32>, tensor<3x3x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Softmax, layer norm, batch norm
//===----------------------------------------------------------------------===//

func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'loom.softmax' op failed to infer returned types}}
  %0 = loom.softmax %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_negative_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'loom.log_softmax' op failed to infer returned types}}
  %0 = loom.log_softmax %a {axis = -1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_axis(%a: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'loom.layer_norm' op failed to infer returned types}}
  %0 = loom.layer_norm %a, %s {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%a: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be finite and not negative}}
  // expected-error @+1 {{'loom.layer_norm' op failed to infer returned types}}
  %0 = loom.layer_norm %a, %s {axis = 1 : i64, epsilon = -1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale_shape(%a: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{'scale' must have shape [3, 4], got [4]}}
  // expected-error @+1 {{'loom.layer_norm' op failed to infer returned types}}
  %0 = loom.layer_norm %a, %s {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @layer_norm_scale_type(%a: tensor<2x3xf32>, %s: tensor<3xbf16>) {
  // expected-error @+2 {{'scale' must have element type f32, got bf16}}
  // expected-error @+1 {{'loom.layer_norm' op failed to infer returned types}}
  %0 = loom.layer_norm %a, %s {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xbf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%a: tensor<2x3xf32>, %s: tensor<3xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+2 {{'bias' must have shape [3], got [2, 3]}}
  // expected-error @+1 {{'loom.layer_norm' op failed to infer returned types}}
  %0 = loom.layer_norm %a, %s, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_bias_type(%a: tensor<2x3xf16>, %s: tensor<3xf16>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'bias' must have element type f16, got f32}}
  // expected-error @+1 {{'loom.layer_norm' op failed to infer returned types}}
  %0 = loom.layer_norm %a, %s, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf16>, tensor<3xf16>, tensor<3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @batch_norm_rank(%a: tensor<3xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{input must have rank at least 2, got 1}}
  // expected-error @+1 {{'loom.batch_norm' op failed to infer returned types}}
  %0 = loom.batch_norm %a, %c, %c, %c, %c {epsilon = 1.0e-05 : f32} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @batch_norm_epsilon(%a: tensor<2x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be finite and not negative}}
  // expected-error @+1 {{'loom.batch_norm' op failed to infer returned types}}
  %0 = loom.batch_norm %a, %c, %c, %c, %c {epsilon = -1.0 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_nan_epsilon(%a: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // NaN is not a usable epsilon either (the check is written as !(eps >= 0)).
  // expected-error @+2 {{epsilon must be finite and not negative}}
  // expected-error @+1 {{'loom.layer_norm' op failed to infer returned types}}
  %0 = loom.layer_norm %a, %s {axis = 1 : i64, epsilon = 0x7FC00000 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_nan_epsilon(%a: tensor<2x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be finite and not negative}}
  // expected-error @+1 {{'loom.batch_norm' op failed to infer returned types}}
  %0 = loom.batch_norm %a, %c, %c, %c, %c {epsilon = 0x7FC00000 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_scale(%a: tensor<2x3x5xf32>, %s: tensor<5xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{'scale' must have shape [3], got [5]}}
  // expected-error @+1 {{'loom.batch_norm' op failed to infer returned types}}
  %0 = loom.batch_norm %a, %s, %c, %c, %c {epsilon = 1.0e-05 : f32} : (tensor<2x3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @batch_norm_bias(%a: tensor<2x3xf32>, %c: tensor<3xf32>, %b: tensor<3xf16>) {
  // expected-error @+2 {{'bias' must have element type f32, got f16}}
  // expected-error @+1 {{'loom.batch_norm' op failed to infer returned types}}
  %0 = loom.batch_norm %a, %c, %b, %c, %c {epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf16>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_mean(%a: tensor<2x3xf32>, %c: tensor<3xf32>, %m: tensor<1x3xf32>) {
  // expected-error @+2 {{'mean' must have shape [3], got [1, 3]}}
  // expected-error @+1 {{'loom.batch_norm' op failed to infer returned types}}
  %0 = loom.batch_norm %a, %c, %c, %m, %c {epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_variance(%a: tensor<2x3xf32>, %c: tensor<3xf32>, %v: tensor<2xf32>) {
  // expected-error @+2 {{'variance' must have shape [3], got [2]}}
  // expected-error @+1 {{'loom.batch_norm' op failed to infer returned types}}
  %0 = loom.batch_norm %a, %c, %c, %c, %v {epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @reduce_axis_range(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{reduction axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'loom.reduce_sum' op failed to infer returned types}}
  %0 = loom.reduce_sum %a {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_negative_axis(%a: tensor<2x3xi32>) {
  // expected-error @+2 {{reduction axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'loom.reduce_max' op failed to infer returned types}}
  %0 = loom.reduce_max %a {axes = array<i64: -1>} : (tensor<2x3xi32>) -> tensor<2xi32>
  return
}

// -----

func.func @reduce_axes_order(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{reduction axes must be strictly increasing}}
  // expected-error @+1 {{'loom.reduce_mean' op failed to infer returned types}}
  %0 = loom.reduce_mean %a {axes = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @reduce_axes_repeated(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{reduction axes must be strictly increasing}}
  // expected-error @+1 {{'loom.reduce_mean' op failed to infer returned types}}
  %0 = loom.reduce_mean %a {axes = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

func.func @transpose_length(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation has 1 entries but the input has rank 2}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %a {permutation = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @transpose_repeated(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation [0, 0] is not a permutation of [0, 2)}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %a {permutation = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_out_of_range(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation [2, 0] is not a permutation of [0, 2)}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %a {permutation = array<i64: 2, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @reshape_element_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.reshape' op result element type f16 differs from input element type f32}}
  %0 = loom.reshape %a : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.reshape' op cannot reshape [2, 3] (6 elements) to [7] (7 elements)}}
  %0 = loom.reshape %a : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

func.func @broadcast_element_type(%a: tensor<3xi32>) {
  // expected-error @+1 {{'loom.broadcast' op result element type i64 differs from input element type i32}}
  %0 = loom.broadcast %a : tensor<3xi32> -> tensor<2x3xi64>
  return
}

// -----

func.func @broadcast_shape(%a: tensor<3xf32>) {
  // expected-error @+1 {{'loom.broadcast' op input shape [3] does not broadcast to [2, 4]}}
  %0 = loom.broadcast %a : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @broadcast_lower_rank(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.broadcast' op input shape [2, 3] does not broadcast to [3]}}
  %0 = loom.broadcast %a : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @gather_axis(%a: tensor<4x2xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'loom.gather' op failed to infer returned types}}
  %0 = loom.gather %a, %i {axis = 2 : i64} : (tensor<4x2xf32>, tensor<3xi64>) -> tensor<4x2xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+2 {{has 0 operands, expected at least 1}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a, %a {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+2 {{input #1 has type f16[2, 3], which differs from input #0's f32[2, 3] in rank or element type}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %c: tensor<2x3x1xf32>) {
  // expected-error @+2 {{input #2 has type f32[2, 3, 1], which differs from input #0's f32[2, 3] in rank or element type}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a, %b, %c {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<6x3xf32>
  return
}

// -----

func.func @concat_sizes(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{input #1 has size 4 in dimension 1 but input #0 has 3}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @slice_entries(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{starts, sizes and strides need 2 entries each}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 0, 0>, sizes = array<i64: 2>, strides = array<i64: 1, 1>} : (tensor<4x4xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @slice_zero_stride(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{stride of dimension 1 must not be 0}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 0, 0>, sizes = array<i64: 2, 2>, strides = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_negative_size(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{size of dimension 0 must not be negative}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 0, 0>, sizes = array<i64: -1, 2>, strides = array<i64: 1, 1>} : (tensor<4x4xf32>) -> tensor<1x2xf32>
  return
}

// -----

func.func @slice_past_end(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{slice of dimension 1 reads [1, 5], outside the dimension of size 4}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 0, 1>, sizes = array<i64: 2, 3>, strides = array<i64: 1, 2>} : (tensor<4x4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_negative_stride_past_start(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{slice of dimension 0 reads [2, -1], outside the dimension of size 4}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 2, 0>, sizes = array<i64: 4, 4>, strides = array<i64: -1, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @slice_start_out_of_range(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{slice of dimension 0 reads [4, 4], outside the dimension of size 4}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 4, 0>, sizes = array<i64: 1, 4>, strides = array<i64: 1, 1>} : (tensor<4x4xf32>) -> tensor<1x4xf32>
  return
}

// -----

func.func @slice_size_overflow(%a: tensor<4xf32>) {
  // (size - 1) * stride = 2^62 * 4 overflows int64 and must not wrap into
  // range.
  // expected-error @+2 {{slice of dimension 0 (size 4611686018427387905, stride 4) overflows 64-bit indices}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 0>, sizes = array<i64: 4611686018427387905>, strides = array<i64: 4>} : (tensor<4xf32>) -> tensor<4611686018427387905xf32>
  return
}

// -----

func.func @slice_negative_stride_overflow(%a: tensor<4xf32>) {
  // (3 - 1) * INT64_MIN overflows too.
  // expected-error @+2 {{slice of dimension 0 (size 3, stride -9223372036854775808) overflows 64-bit indices}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 3>, sizes = array<i64: 3>, strides = array<i64: -9223372036854775808>} : (tensor<4xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @slice_start_plus_offset_overflow(%a: tensor<4xf32>) {
  // The product fits; 3 + (2 - 1) * INT64_MAX does not.
  // expected-error @+2 {{slice of dimension 0 (size 2, stride 9223372036854775807) overflows 64-bit indices}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %a {starts = array<i64: 3>, sizes = array<i64: 2>, strides = array<i64: 9223372036854775807>} : (tensor<4xf32>) -> tensor<2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

func.func @conv_rank(%x: tensor<4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{input and weight must have rank 4, got 3 and 4}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<6x6x6xf32>
  return
}

// -----

func.func @conv_element_type(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf16>) {
  // expected-error @+2 {{weight element type f16 differs from the input's f32}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf16>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_groups_divide(%x: tensor<1x4x8x8xf32>, %w: tensor<6x1x3x3xf32>) {
  // expected-error @+2 {{groups (4) must be at least 1 and divide the input channels (4) and output channels (6)}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<1x4x8x8xf32>, tensor<6x1x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_groups_zero(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{groups (0) must be at least 1 and divide the input channels (4) and output channels (6)}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 0 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_weight_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{weight has 4 input channels per group, expected 2}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_bias_shape(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{'bias' must have shape [6], got [4]}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<4xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_bias_type(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<6xbf16>) {
  // expected-error @+2 {{'bias' must have element type f32, got bf16}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xbf16>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_padding_entries(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{'padding' must have 4 entries, got 2}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_stride_entries(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{'strides' must have 2 entries, got 1}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_zero_dilation(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{'dilations' entries must be at least 1, got 0}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 0>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_negative_padding(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{'padding' entries must be at least 0, got -1}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, -1, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x5xf32>
  return
}

// -----

func.func @conv_kernel_too_big(%x: tensor<1x4x8x2xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{kernel does not fit spatial dimension 1 of size 2}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x2xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x1xf32>
  return
}

// -----

func.func @conv_dilation_overflow(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // The dilated kernel spans 2^62 * (3 - 1) + 1, which overflows int64.
  // expected-error @+2 {{kernel does not fit spatial dimension 0 of size 8}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 4611686018427387904, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_dilation_max(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x2x3xf32>) {
  // INT64_MAX * (2 - 1) fits, but the span (that plus one) does not.
  // expected-error @+2 {{kernel does not fit spatial dimension 0 of size 8}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 9223372036854775807, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<6x4x2x3xf32>) -> tensor<1x6x7x6xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

func.func @pool_rank(%x: tensor<4x8x8xf32>) {
  // expected-error @+2 {{input must be NCHW (rank 4), got rank 3}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x8x8xf32>) -> tensor<4x4x4xf32>
  return
}

// -----

func.func @pool_kernel_entries(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'kernel' must have 2 entries, got 1}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_kernel_zero(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'kernel' entries must be at least 1, got 0}}
  // expected-error @+1 {{'loom.avg_pool2d' op failed to infer returned types}}
  %0 = loom.avg_pool2d %x {kernel = array<i64: 2, 0>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_strides_entries(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'strides' must have 2 entries, got 3}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_strides_zero(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'strides' entries must be at least 1, got 0}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 0, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_padding_entries(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'padding' must have 4 entries, got 2}}
  // expected-error @+1 {{'loom.avg_pool2d' op failed to infer returned types}}
  %0 = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_padding_negative(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'padding' entries must be at least 0, got -1}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, -1, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_dilations_entries(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'dilations' must have 2 entries, got 0}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_dilations_zero(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'dilations' entries must be at least 1, got 0}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 0>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_padding_begin_too_big(%x: tensor<1x1x8x8xf32>) {
  // A 2-wide kernel allows a pad of at most 1.
  // expected-error @+2 {{padding must be smaller than the window}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 2, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x5xf32>
  return
}

// -----

func.func @pool_padding_end_too_big(%x: tensor<1x1x8x8xf32>) {
  // The dilated 2-wide kernel spans 3, so a pad of 3 is too big.
  // expected-error @+2 {{padding must be smaller than the window}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 3, 0>, dilations = array<i64: 2, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x9x7xf32>
  return
}

// -----

func.func @pool_window_too_big(%x: tensor<1x1x2x8xf32>) {
  // expected-error @+2 {{window does not fit spatial dimension 0 of size 2}}
  // expected-error @+1 {{'loom.avg_pool2d' op failed to infer returned types}}
  %0 = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x2x8xf32>) -> tensor<1x1x1x6xf32>
  return
}

// -----

func.func @pool_dilation_overflow(%x: tensor<1x1x8x8xf32>) {
  // The dilated window 2^62 * (3 - 1) overflows int64.
  // expected-error @+2 {{window does not fit spatial dimension 1 of size 8}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 4611686018427387904>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x6x6xf32>
  return
}

// -----

func.func @pool_dilation_huge(%x: tensor<1x1x8x8xf32>) {
  // 2^60 * (3 - 1) fits but the window is far wider than the input.
  // expected-error @+2 {{window does not fit spatial dimension 1 of size 8}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1152921504606846976>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x6x6xf32>
  return
}

// -----

func.func @avg_pool_dilation(%x: tensor<1x1x8x8xf32>) {
  // The result type is the one inferred for dilation 2: only the rule's
  // own check of avg_pool2d's dilations fires.
  // expected-error @+2 {{dilations must be 1}}
  // expected-error @+1 {{'loom.avg_pool2d' op failed to infer returned types}}
  %0 = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x6x7xf32>
  return
}

// -----

func.func @pool_ceil_mode_result(%x: tensor<1x1x8x8xf32>) {
  // Without ceil_mode (8 - 3) / 2 rounds down to 3 windows.
  // expected-error @+2 {{'loom.max_pool2d' op inferred type(s) 'tensor<1x1x3x3xf32>' are incompatible with return type(s) of operation 'tensor<1x1x4x4xf32>'}}
  // expected-error @+1 {{'loom.max_pool2d' op failed to infer returned types}}
  %0 = loom.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

func.func @cross_entropy_batch(%l: tensor<4x10xf32>, %t: tensor<3xi64>) {
  // expected-error @+2 {{logits must be [N, C] and labels [N], got [4, 10] and [3]}}
  // expected-error @+1 {{'loom.softmax_cross_entropy' op failed to infer returned types}}
  %0 = loom.softmax_cross_entropy %l, %t {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<3xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_lse(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %lse: tensor<10xf32>) {
  // expected-error @+2 {{lse must be [N] of the logits' type, got f32[10]}}
  // expected-error @+1 {{'loom.softmax_cross_entropy' op failed to infer returned types}}
  %0 = loom.softmax_cross_entropy %l, %t, %lse {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_rank(%l: tensor<4x10x2xf32>, %t: tensor<4xi32>) {
  // expected-error @+2 {{logits must be [N, C] and labels [N], got [4, 10, 2] and [4]}}
  // expected-error @+1 {{'loom.softmax_cross_entropy' op failed to infer returned types}}
  %0 = loom.softmax_cross_entropy %l, %t {ignore_index = -100 : i64} : (tensor<4x10x2xf32>, tensor<4xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+2 {{'loom.softmax_cross_entropy' op inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'loom.softmax_cross_entropy' op failed to infer returned types}}
  %0 = loom.softmax_cross_entropy %l, %t {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @mse_types(%p: tensor<4x3xf32>, %t: tensor<4x3xf16>) {
  // expected-error @+2 {{prediction f32[4, 3] and target f16[4, 3] must have the same type}}
  // expected-error @+1 {{'loom.mse_loss' op failed to infer returned types}}
  %0 = loom.mse_loss %p, %t : (tensor<4x3xf32>, tensor<4x3xf16>) -> tensor<f32>
  return
}

// -----

func.func @mse_shapes(%p: tensor<4x3xf32>, %t: tensor<3xf32>) {
  // expected-error @+2 {{prediction f32[4, 3] and target f32[3] must have the same type}}
  // expected-error @+1 {{'loom.mse_loss' op failed to infer returned types}}
  %0 = loom.mse_loss %p, %t : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attributes (errors at the attribute's location)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{mesh must have at least one axis}}
func.func @empty_mesh() attributes {loom.mesh = #loom.mesh<>} {
  return
}

// -----

// expected-error @+1 {{mesh axis name must not be empty}}
func.func @empty_axis_name() attributes {loom.mesh = #loom.mesh<"" = 2>} {
  return
}

// -----

// expected-error @+1 {{mesh axis 'dp' appears twice}}
func.func @repeated_axis() attributes {loom.mesh = #loom.mesh<dp = 2, tp = 2, dp = 4>} {
  return
}

// -----

// expected-error @+1 {{mesh axis 'tp' has size 0; sizes must be at least 1}}
func.func @zero_axis_size() attributes {loom.mesh = #loom.mesh<dp = 2, tp = 0>} {
  return
}

// -----

// expected-error @+1 {{mesh axis 'dp' has size -2; sizes must be at least 1}}
func.func @negative_axis_size() attributes {loom.mesh = #loom.mesh<dp = -2>} {
  return
}

// -----

// 2^16 * 2^15 * 2 = 2^32 devices; 2^31 is the most a mesh may have.
// expected-error @+1 {{mesh has more than 2147483648 devices}}
func.func @too_many_devices() attributes {loom.mesh = #loom.mesh<a = 65536, b = 32768, c = 2>} {
  return
}

// -----

// 2^62 * 4 overflows int64 on the way.
// expected-error @+1 {{mesh has more than 2147483648 devices}}
func.func @device_count_overflow() attributes {loom.mesh = #loom.mesh<a = 4611686018427387904, b = 4>} {
  return
}

// -----

// expected-error @+1 {{layout names axis 'pp' which is not an axis of the mesh}}
func.func @layout_unknown_axis(%a: tensor<4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2>, [[pp]]>}) {
  return
}

// -----

// expected-error @+1 {{layout names axis 'tp' which is not an axis of the mesh}}
func.func @layout_unknown_partial_axis(%a: tensor<4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2>, [[dp]], partial = [tp]>}) {
  return
}

// -----

// expected-error @+1 {{layout uses mesh axis 'dp' more than once}}
func.func @layout_axis_twice(%a: tensor<4x4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 2>, [[dp], [tp, dp]]>}) {
  return
}

// -----

// expected-error @+1 {{layout uses mesh axis 'tp' more than once}}
func.func @layout_split_and_partial(%a: tensor<4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 2>, [[tp]], partial = [tp]>}) {
  return
}

// -----

func.func @empty_strategy(%a: tensor<4xf32>) {
  // expected-error @+1 {{strategy must give split counts for at least one input}}
  %0 = loom.neg %a {loom.strategy = #loom.strategy<[]>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @zero_split_count(%a: tensor<4xf32>) {
  // expected-error @+1 {{split count must be at least 1, got 0}}
  %0 = loom.neg %a {loom.strategy = #loom.strategy<[[0]]>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @negative_output_split_count(%a: tensor<4xf32>) {
  // expected-error @+1 {{split count must be at least 1, got -2}}
  %0 = loom.neg %a {loom.strategy = #loom.strategy<[[2]] -> [[-2]]>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Annotations on ops
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'loom.mesh' must be a #loom.mesh}}
func.func @mesh_not_mesh() attributes {loom.mesh = [2, 4]} {
  return
}

// -----

func.func @strategy_not_strategy(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.strategy' must be a #loom.strategy}}
  %0 = loom.neg %a {loom.strategy = [[2]]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @strategy_entry_count(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'loom.add' op strategy gives 1 operand entries but the op has 2 tensor operands}}
  %0 = loom.add %a, %b {loom.strategy = #loom.strategy<[[2, 1]]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @strategy_entry_rank(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'loom.add' op strategy operand entry #1 has 2 counts but operand #1 has rank 1}}
  %0 = loom.add %a, %b {loom.strategy = #loom.strategy<[[2, 1], [1, 1]]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @strategy_not_dividing(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{'loom.relu' op strategy splits dimension 1 of operand #0 (size 6) 4 ways, which does not divide it}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[1, 4]]>} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @strategy_too_many_devices(%a: tensor<4x8xf32>) attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  // expected-error @+1 {{'loom.relu' op strategy operand entry #0 splits over 16 devices but the mesh has 8}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[4, 4]]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @strategy_not_dividing_mesh(%a: tensor<6x8xf32>) attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  // expected-error @+1 {{'loom.relu' op strategy operand entry #0 splits over 6 devices, which does not divide the mesh's 8}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[3, 2]]>} : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @negative_stage(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.stage' must be a non-negative integer}}
  %0 = loom.relu %a {loom.stage = -1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @float_stage(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.stage' must be a non-negative integer}}
  %0 = loom.relu %a {loom.stage = 1.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @recompute_not_unit(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.recompute' must be a unit attribute}}
  %0 = loom.relu %a {loom.recompute = true} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unknown_annotation(%a: tensor<4xf32>) {
  // expected-error @+1 {{unknown loom annotation 'loom.shard'}}
  %0 = loom.relu %a {loom.shard = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @stage_bool(%a: tensor<4xf32>) {
  // An i1 is not a stage number.
  // expected-error @+1 {{'loom.stage' must be a non-negative integer}}
  %0 = loom.relu %a {loom.stage = true} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @stage_bool_false(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.stage' must be a non-negative integer}}
  %0 = loom.relu %a {loom.stage = false} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mesh_on_op(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.mesh' belongs on a function or module}}
  %0 = loom.relu %a {loom.mesh = #loom.mesh<dp = 2>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{'loom.source' belongs on a module}}
func.func @source_on_function() attributes {loom.source = "model.onnx"} {
  return
}

// -----

// expected-error @+1 {{'loom.opset' belongs on a module}}
func.func @opset_on_function() attributes {loom.opset = 17 : i64} {
  return
}

// -----

func.func @source_on_op(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.source' belongs on a module}}
  %0 = loom.relu %a {loom.source = "model.onnx"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{'loom.source' must be a string}}
module attributes {loom.source = 3 : i64} {
}

// -----

// expected-error @+1 {{'loom.opset' must be an integer}}
module attributes {loom.opset = "17"} {
}

// -----

// expected-error @+1 {{'loom.opset' must be an integer}}
module attributes {loom.opset = 1.7e+01 : f32} {
}

// -----

// expected-error @+1 {{'loom.strategy' belongs on an op, not a function or module}}
func.func @strategy_on_function() attributes {loom.strategy = #loom.strategy<[[1]]>} {
  return
}

// -----

// expected-error @+1 {{'loom.stage' belongs on an op, not a function or module}}
func.func @stage_on_function() attributes {loom.stage = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'loom.recompute' belongs on an op, not a function or module}}
func.func @recompute_on_function() attributes {loom.recompute} {
  return
}

// -----

// expected-error @+1 {{'loom.stage' belongs on an op, not a function or module}}
module attributes {loom.stage = 0 : i64} {
}

// -----

func.func @strategy_result_entry_count(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.relu' op strategy gives 2 result entries but the op has 1 tensor results}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[2, 1]] -> [[2, 1], [2, 1]]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @strategy_result_entry_rank(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.relu' op strategy result entry #0 has 1 counts but result #0 has rank 2}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[2, 1]] -> [[2]]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @strategy_result_not_dividing(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{'loom.relu' op strategy splits dimension 1 of result #0 (size 6) 4 ways, which does not divide it}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[2, 1]] -> [[1, 4]]>} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @strategy_result_too_many_devices(%a: tensor<4x8xf32>) attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  // expected-error @+1 {{'loom.relu' op strategy result entry #0 splits over 16 devices but the mesh has 8}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[2, 1]] -> [[4, 4]]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @strategy_result_not_dividing_mesh(%a: tensor<6x8xf32>) attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  // expected-error @+1 {{'loom.relu' op strategy result entry #0 splits over 3 devices, which does not divide the mesh's 8}}
  %0 = loom.relu %a {loom.strategy = #loom.strategy<[[2, 1]] -> [[3, 1]]>} : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

// A module's mesh bounds the strategies of the functions in it.
module attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  func.func @strategy_over_module_mesh(%a: tensor<4x8xf32>) {
    // expected-error @+1 {{'loom.relu' op strategy operand entry #0 splits over 16 devices but the mesh has 8}}
    %0 = loom.relu %a {loom.strategy = #loom.strategy<[[4, 4]]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

//===----------------------------------------------------------------------===//
// Annotations on function arguments (errors at the function)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'loom.layout' must be a #loom.layout}}
func.func @layout_not_layout(%a: tensor<4xf32> {loom.layout = #loom.mesh<dp = 2>}) {
  return
}

// -----

// expected-error @+1 {{'loom.layout' is only valid on a ranked tensor argument}}
func.func @layout_on_scalar(%a: f32 {loom.layout = #loom.layout<#loom.mesh<dp = 2>, []>}) {
  return
}

// -----

// expected-error @+1 {{argument #1: layout has rank 1 but the tensor has rank 2}}
func.func @layout_rank(%a: tensor<4xf32>, %b: tensor<4x4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2>, [[dp]]>}) {
  return
}

// -----

// expected-error @+1 {{argument #0: layout splits dimension 1 (size 6) 4 ways, which does not divide it}}
func.func @layout_not_dividing(%a: tensor<4x6xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 2>, [[], [dp, tp]]>}) {
  return
}

// -----

// expected-error @+1 {{'loom.input' must be a string}}
func.func @input_not_string(%a: tensor<4xf32> {loom.input = 0 : i64}) {
  return
}

// -----

// expected-error @+1 {{'loom.param' must be a string}}
func.func @param_not_string(%a: tensor<4xf32> {loom.param}) {
  return
}

// -----

// expected-error @+1 {{'loom.buffer' must be a string}}
func.func @buffer_not_string(%a: tensor<4xf32> {loom.buffer = ["bn", "mean"]}) {
  return
}

// -----

// expected-error @+1 {{'loom.init' of argument #0 must be elements of the argument's type}}
func.func @init_wrong_type(%a: tensor<4xf32> {loom.init = dense<0.0> : tensor<2xf32>}) {
  return
}

// -----

// expected-error @+1 {{'loom.init' of argument #1 must be elements of the argument's type}}
func.func @init_not_elements(%a: tensor<4xf32>, %b: tensor<4xf32> {loom.init = 0.0 : f32}) {
  return
}

// -----

// expected-error @+1 {{argument #0: the layout's mesh differs from the function's loom.mesh}}
func.func @argument_layout_other_mesh(%a: tensor<4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2>, [[dp]]>}) attributes {loom.mesh = #loom.mesh<tp = 2>} {
  return
}

// -----

// Same axis names, different sizes: still a different mesh.
// expected-error @+1 {{argument #1: the layout's mesh differs from the function's loom.mesh}}
func.func @argument_layout_resized_mesh(%a: tensor<4xf32>, %b: tensor<4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2>, [[dp]]>}) attributes {loom.mesh = #loom.mesh<dp = 4>} {
  return
}

// -----

// Declarations have no entry block; their argument attributes are checked
// against the signature.
// expected-error @+1 {{'loom.init' of argument #1 must be elements of the argument's type}}
func.func private @declaration_init(tensor<4xf32>, tensor<8xf32> {loom.init = dense<0.0> : tensor<4xf32>})

// -----

// expected-error @+1 {{argument #0: layout splits dimension 0 (size 6) 4 ways, which does not divide it}}
func.func private @declaration_layout(tensor<6xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 4>, [[dp]]>})

// -----

// expected-error @+1 {{'loom.param' must be a string}}
func.func private @declaration_param(tensor<6xf32> {loom.param = 1 : i64})

// -----

// expected-error @+1 {{unknown loom argument attribute 'loom.output'}}
func.func private @declaration_unknown(tensor<6xf32> {loom.output = "y"})

// -----

// expected-error @+1 {{unknown loom argument attribute 'loom.output'}}
func.func @unknown_argument_attribute(%a: tensor<4xf32> {loom.output = "y"}) {
  return
}

// -----

//===----------------------------------------------------------------------===//
// Annotations on function results (errors at the function)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'loom.output' must be a string}}
func.func @output_not_string(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.output = 3 : i64}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{unknown loom result attribute 'loom.param'}}
func.func @unknown_result_attribute(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.param = "w"}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{unknown loom result attribute 'loom.input'}}
func.func @input_on_result(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.input = "x"}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'loom.layout' must be a #loom.layout}}
func.func @result_layout_not_layout(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.layout = [[1]]}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'loom.layout' is only valid on a ranked tensor result}}
func.func @result_layout_on_scalar(%a: f32) -> (f32 {loom.layout = #loom.layout<#loom.mesh<dp = 2>, []>}) {
  return %a : f32
}

// -----

// expected-error @+1 {{result #1: layout has rank 2 but the tensor has rank 1}}
func.func @result_layout_rank(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2>, [[dp], []]>}) {
  return %a, %a : tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{result #0: layout splits dimension 0 (size 6) 4 ways, which does not divide it}}
func.func @result_layout_not_dividing(%a: tensor<6xf32>) -> (tensor<6xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 4>, [[dp]]>}) {
  return %a : tensor<6xf32>
}

// -----

// expected-error @+1 {{result #0: the layout's mesh differs from the function's loom.mesh}}
func.func @result_layout_other_mesh(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2>, [[dp]]>}) attributes {loom.mesh = #loom.mesh<dp = 4>} {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'loom.output' must be a string}}
func.func private @declaration_output(tensor<4xf32>) -> (tensor<4xf32> {loom.output = ["y"]})

// -----

// loom.fused_matmul's bias is a vector of the result's last dimension.
func.func @bad_bias(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %b: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{the bias must be a vector of 8 f32, got f32[4]}}
  // expected-error @+1 {{'loom.fused_matmul' op failed to infer returned types}}
  %y = loom.fused_matmul %x, %w, %b : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @dropout_ratio(%a: tensor<2x3xf32>, %s: tensor<f32>) {
  // expected-error @+2 {{ratio must be in [0, 1), got 1.000000}}
  // expected-error @+1 {{'loom.dropout' op failed to infer returned types}}
  %0 = loom.dropout %a, %s {ratio = 1.0 : f32, seed = 7 : i64} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dropout_step_not_scalar(%a: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @+2 {{step must be a floating-point scalar, got f32[2]}}
  // expected-error @+1 {{'loom.dropout' op failed to infer returned types}}
  %0 = loom.dropout %a, %s {ratio = 0.5 : f32, seed = 7 : i64} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dropout_index_offset(%a: tensor<2x3xf32>, %s: tensor<f32>) {
  // expected-error @+2 {{index_offset must not be negative, got -6}}
  // expected-error @+1 {{'loom.dropout' op failed to infer returned types}}
  %0 = loom.dropout %a, %s {index_offset = -6 : i64, ratio = 0.5 : f32, seed = 7 : i64} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @pad_entries(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{low and high need 2 entries each}}
  // expected-error @+1 {{'loom.pad' op failed to infer returned types}}
  %0 = loom.pad %a {low = array<i64: 1>, high = array<i64: 1, 1>, mode = "constant", value = 0.0 : f32} : (tensor<4x4xf32>) -> tensor<6x6xf32>
  return
}

// -----

func.func @pad_mode(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{mode 'wrap' is not one of constant, reflect, edge}}
  // expected-error @+1 {{'loom.pad' op failed to infer returned types}}
  %0 = loom.pad %a {low = array<i64: 1, 1>, high = array<i64: 1, 1>, mode = "wrap", value = 0.0 : f32} : (tensor<4x4xf32>) -> tensor<6x6xf32>
  return
}

// -----

func.func @pad_negative(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{pad of dimension 1 (low -1, high 2) must not be negative}}
  // expected-error @+1 {{'loom.pad' op failed to infer returned types}}
  %0 = loom.pad %a {low = array<i64: 0, -1>, high = array<i64: 0, 2>, mode = "constant", value = 0.0 : f32} : (tensor<4x4xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @pad_reflect_too_wide(%a: tensor<4x3xf32>) {
  // expected-error @+2 {{reflect pad of dimension 1 (low 1, high 3) must be smaller than its size 3}}
  // expected-error @+1 {{'loom.pad' op failed to infer returned types}}
  %0 = loom.pad %a {low = array<i64: 0, 1>, high = array<i64: 0, 3>, mode = "reflect", value = 0.0 : f32} : (tensor<4x3xf32>) -> tensor<4x7xf32>
  return
}

// -----

func.func @pad_edge_empty(%a: tensor<4x0xf32>) {
  // expected-error @+2 {{edge pad of dimension 1 (low 1, high 0) needs a non-empty dimension}}
  // expected-error @+1 {{'loom.pad' op failed to infer returned types}}
  %0 = loom.pad %a {low = array<i64: 0, 1>, high = array<i64: 0, 0>, mode = "edge", value = 0.0 : f32} : (tensor<4x0xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @pad_overflow(%a: tensor<4xf32>) {
  // expected-error @+2 {{pad of dimension 0 (low 9223372036854775807, high 0) overflows 64-bit sizes}}
  // expected-error @+1 {{'loom.pad' op failed to infer returned types}}
  %0 = loom.pad %a {low = array<i64: 9223372036854775807>, high = array<i64: 0>, mode = "constant", value = 0.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @gather_elements_rank(%a: tensor<4x2xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{indices i64[3] must have rank 2, as the data f32[4, 2]}}
  // expected-error @+1 {{'loom.gather_elements' op failed to infer returned types}}
  %0 = loom.gather_elements %a, %i {axis = 0 : i64} : (tensor<4x2xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @gather_elements_exceeds(%a: tensor<4x2xf32>, %i: tensor<3x3xi64>) {
  // expected-error @+2 {{indices i64[3, 3] exceed the data f32[4, 2] in dimension 1, which is not the axis}}
  // expected-error @+1 {{'loom.gather_elements' op failed to infer returned types}}
  %0 = loom.gather_elements %a, %i {axis = 0 : i64} : (tensor<4x2xf32>, tensor<3x3xi64>) -> tensor<3x3xf32>
  return
}

// -----

func.func @scatter_elements_updates(%a: tensor<4x2xf32>, %i: tensor<3x2xi64>, %u: tensor<2x2xf32>) {
  // expected-error @+2 {{updates are f32[2, 2] but must have the indices' shape and the data's element type: f32[3, 2]}}
  // expected-error @+1 {{'loom.scatter_elements' op failed to infer returned types}}
  %0 = loom.scatter_elements %a, %i, %u {axis = 0 : i64} : (tensor<4x2xf32>, tensor<3x2xi64>, tensor<2x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @scatter_elements_axis(%a: tensor<4x2xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'loom.scatter_elements' op failed to infer returned types}}
  %0 = loom.scatter_elements %a, %i, %u {axis = -1 : i64} : (tensor<4x2xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @cumsum_axis(%a: tensor<4x2xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'loom.cumsum' op failed to infer returned types}}
  %0 = loom.cumsum %a {axis = 2 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @top_k_too_many(%a: tensor<4x5xf32>) {
  // expected-error @+2 {{k = 6 is outside [0, 5], the size of dimension 1 of f32[4, 5]}}
  // expected-error @+1 {{'loom.top_k' op failed to infer returned types}}
  %0:2 = loom.top_k %a {axis = 1 : i64, k = 6 : i64} : (tensor<4x5xf32>) -> (tensor<4x6xf32>, tensor<4x6xi64>)
  return
}

// -----

func.func @conv_transpose_rank(%x: tensor<4x5x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{input and weight must have rank 4, got 3 and 4}}
  // expected-error @+1 {{'loom.conv_transpose2d' op failed to infer returned types}}
  %0 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>} : (tensor<4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<3x7x7xf32>
  return
}

// -----

func.func @conv_transpose_weight_channels(%x: tensor<1x4x5x5xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+2 {{weight has 3 input channels, expected 4}}
  // expected-error @+1 {{'loom.conv_transpose2d' op failed to infer returned types}}
  %0 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>} : (tensor<1x4x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x2x7x7xf32>
  return
}

// -----

func.func @conv_transpose_groups(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{groups (3) must be at least 1 and divide the input channels (4)}}
  // expected-error @+1 {{'loom.conv_transpose2d' op failed to infer returned types}}
  %0 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 3 : i64, output_padding = array<i64: 0, 0>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x6x7x7xf32>
  return
}

// -----

func.func @conv_transpose_output_padding_count(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{'output_padding' must have 2 entries, got 1}}
  // expected-error @+1 {{'loom.conv_transpose2d' op failed to infer returned types}}
  %0 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x7x7xf32>
  return
}

// -----

func.func @conv_transpose_output_padding_stride(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{output_padding (1) must be smaller than its stride (1)}}
  // expected-error @+1 {{'loom.conv_transpose2d' op failed to infer returned types}}
  %0 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 1, 0>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x8x7xf32>
  return
}

// -----

func.func @conv_transpose_no_output(%x: tensor<1x4x1x1xf32>, %w: tensor<4x2x1x1xf32>) {
  // expected-error @+2 {{padding leaves no output in spatial dimension 0 of size 1}}
  // expected-error @+1 {{'loom.conv_transpose2d' op failed to infer returned types}}
  %0 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>} : (tensor<1x4x1x1xf32>, tensor<4x2x1x1xf32>) -> tensor<1x2x1x1xf32>
  return
}

// -----

func.func @conv_transpose_bias_shape(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{'bias' must have shape [2], got [4]}}
  // expected-error @+1 {{'loom.conv_transpose2d' op failed to infer returned types}}
  %0 = loom.conv_transpose2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x2x7x7xf32>
  return
}

// -----

func.func @resize_mode(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{mode 'area' is not one of nearest, linear, cubic}}
  // expected-error @+1 {{'loom.resize' op failed to infer returned types}}
  %0 = loom.resize %a {mode = "area", coordinate_transformation_mode = "half_pixel", nearest_mode = "floor", scale_num = array<i64: 1, 2>, scale_den = array<i64: 1, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<1x4xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @resize_coordinate_mode(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{coordinate_transformation_mode 'tf_crop_and_resize' is not one of half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn}}
  // expected-error @+1 {{'loom.resize' op failed to infer returned types}}
  %0 = loom.resize %a {mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize", nearest_mode = "floor", scale_num = array<i64: 1, 2>, scale_den = array<i64: 1, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<1x4xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @resize_nearest_mode(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{nearest_mode 'round' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil}}
  // expected-error @+1 {{'loom.resize' op failed to infer returned types}}
  %0 = loom.resize %a {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "round", scale_num = array<i64: 1, 2>, scale_den = array<i64: 1, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<1x4xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @resize_scale_entries(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{scale_num and scale_den need 2 entries each}}
  // expected-error @+1 {{'loom.resize' op failed to infer returned types}}
  %0 = loom.resize %a {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scale_num = array<i64: 2>, scale_den = array<i64: 1, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<1x4xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @resize_scale_not_positive(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{scale 0/1 of dimension 1 must be positive}}
  // expected-error @+1 {{'loom.resize' op failed to infer returned types}}
  %0 = loom.resize %a {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scale_num = array<i64: 1, 0>, scale_den = array<i64: 1, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<1x4xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @resize_empty(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{scale 1/5 of dimension 1 of size 4 leaves no element}}
  // expected-error @+1 {{'loom.resize' op failed to infer returned types}}
  %0 = loom.resize %a {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scale_num = array<i64: 1, 1>, scale_den = array<i64: 1, 5>, cubic_coeff_a = -0.75 : f32} : (tensor<1x4xf32>) -> tensor<1x0xf32>
  return
}

// -----

func.func @resize_overflow(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{scale 9223372036854775807/1 of dimension 1 overflows 64-bit sizes}}
  // expected-error @+1 {{'loom.resize' op failed to infer returned types}}
  %0 = loom.resize %a {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scale_num = array<i64: 1, 9223372036854775807>, scale_den = array<i64: 1, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<1x4xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @resize_grad_shape(%g: tensor<1x7xf32>) {
  // expected-error @+1 {{'loom.resize_grad' op grad is f32[1, 7] but resize of the result gives f32[1, 8]}}
  %0 = loom.resize_grad %g {mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "floor", scale_num = array<i64: 1, 2>, scale_den = array<i64: 1, 1>, cubic_coeff_a = -0.75 : f32} : (tensor<1x7xf32>) -> tensor<1x4xf32>
  return
}
