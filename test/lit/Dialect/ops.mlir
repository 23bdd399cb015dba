// Every loom op, attribute and annotation parses, verifies, prints in its custom form and re-parses to the same text.
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s -mlir-print-op-generic | loom-opt | FileCheck %s

// The mesh is printed once, under its alias, at the top of the module.
// CHECK-DAG: #[[MESH:mesh[0-9]*]] = #loom.mesh<dp = 2, tp = 4>
// CHECK-DAG: #[[MESH_Q:mesh[0-9]*]] = #loom.mesh<"data parallel" = 3, pp = 1>
// CHECK-DAG: #[[MESH_MAX:mesh[0-9]*]] = #loom.mesh<a = 65536, b = 32768>

// CHECK-LABEL: func.func @constant
func.func @constant() -> (tensor<2x3xf32>, tensor<4xi64>, tensor<i1>, tensor<2xbf16>) {
  // CHECK: loom.constant dense<1.500000e+00> : tensor<2x3xf32>
  %0 = loom.constant dense<1.5> : tensor<2x3xf32>
  // CHECK: loom.constant dense<[1, -2, 3, 4]> : tensor<4xi64>
  %1 = loom.constant dense<[1, -2, 3, 4]> : tensor<4xi64>
  // CHECK: loom.constant dense<true> : tensor<i1>
  %2 = loom.constant dense<true> : tensor<i1>
  // CHECK: loom.constant {tag = "kept"} dense<[1.000000e+00, 2.000000e+00]> : tensor<2xbf16>
  %3 = loom.constant {tag = "kept"} dense<[1.0, 2.0]> : tensor<2xbf16>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<4xi64>, tensor<i1>, tensor<2xbf16>
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<2x3xf32>, %[[B:[a-z0-9]+]]: tensor<3xf32>, %[[C:[a-z0-9]+]]: tensor<4x1x3xf32>, %[[I:[a-z0-9]+]]: tensor<5xi32>, %[[J:[a-z0-9]+]]: tensor<1xi32>)
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<4x1x3xf32>,
                  %i: tensor<5xi32>, %j: tensor<1xi32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<4x2x3xf32>, tensor<5xi32>, tensor<2x3xf32>) {
  // CHECK: %[[ADD:.*]] = loom.add %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = loom.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: %[[SUB:.*]] = loom.sub %[[B]], %[[A]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = loom.sub %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: %[[MUL:.*]] = loom.mul %[[A]], %[[C]] : (tensor<2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
  %2 = loom.mul %a, %c : (tensor<2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
  // CHECK: %[[DIV:.*]] = loom.div %[[I]], %[[J]] : (tensor<5xi32>, tensor<1xi32>) -> tensor<5xi32>
  %3 = loom.div %i, %j : (tensor<5xi32>, tensor<1xi32>) -> tensor<5xi32>
  // CHECK: %[[POW:.*]] = loom.pow %[[ADD]], %[[SUB]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = loom.pow %0, %1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.mod %[[I]], %[[J]] : (tensor<5xi32>, tensor<1xi32>) -> tensor<5xi32>
  %mod = loom.mod %i, %j : (tensor<5xi32>, tensor<1xi32>) -> tensor<5xi32>
  // CHECK: loom.fmod %[[ADD]], %[[SUB]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %fmod = loom.fmod %0, %1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[POW]]
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<4x2x3xf32>, tensor<5xi32>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[H:[a-z0-9]+]]: tensor<4xf16>, %[[N:[a-z0-9]+]]: tensor<3xi64>)
func.func @unary(%x: tensor<2x3xf32>, %h: tensor<4xf16>, %n: tensor<3xi64>) {
  // CHECK: loom.neg %[[N]] : (tensor<3xi64>) -> tensor<3xi64>
  %0 = loom.neg %n : (tensor<3xi64>) -> tensor<3xi64>
  // CHECK: loom.neg %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = loom.neg %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.exp %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = loom.exp %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.log %[[H]] : (tensor<4xf16>) -> tensor<4xf16>
  %3 = loom.log %h : (tensor<4xf16>) -> tensor<4xf16>
  // CHECK: loom.sqrt %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = loom.sqrt %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.erf %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = loom.erf %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.tanh %[[H]] : (tensor<4xf16>) -> tensor<4xf16>
  %6 = loom.tanh %h : (tensor<4xf16>) -> tensor<4xf16>
  // CHECK: loom.relu %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = loom.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.sigmoid %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %8 = loom.sigmoid %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.gelu %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %9 = loom.gelu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.gelu %[[X]] {tanh_approximation} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %10 = loom.gelu %x {tanh_approximation} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.abs %[[N]] : (tensor<3xi64>) -> tensor<3xi64>
  %11 = loom.abs %n : (tensor<3xi64>) -> tensor<3xi64>
  // CHECK: loom.hard_swish %[[H]] : (tensor<4xf16>) -> tensor<4xf16>
  %12 = loom.hard_swish %h : (tensor<4xf16>) -> tensor<4xf16>
  // CHECK: loom.selu %[[X]] {alpha = 1.500000e+00 : f32, gamma = 2.000000e+00 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %13 = loom.selu %x {alpha = 1.5 : f32, gamma = 2.0 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.clip %[[X]] {max = 0x7F800000 : f32, min = 0.000000e+00 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %14 = loom.clip %x {min = 0.0 : f32, max = 0x7F800000 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @cast_select
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[COND:[a-z0-9]+]]: tensor<3xi1>, %[[Y:[a-z0-9]+]]: tensor<1x3xf32>)
func.func @cast_select(%x: tensor<2x3xf32>, %cond: tensor<3xi1>, %y: tensor<1x3xf32>) {
  // CHECK: loom.cast %[[X]] : tensor<2x3xf32> -> tensor<2x3xbf16>
  %0 = loom.cast %x : tensor<2x3xf32> -> tensor<2x3xbf16>
  // CHECK: loom.cast %[[X]] : tensor<2x3xf32> -> tensor<2x3xi32>
  %1 = loom.cast %x : tensor<2x3xf32> -> tensor<2x3xi32>
  // CHECK: loom.cast %[[COND]] : tensor<3xi1> -> tensor<3xf32>
  %2 = loom.cast %cond : tensor<3xi1> -> tensor<3xf32>
  // CHECK: loom.select %[[COND]], %[[X]], %[[Y]] : (tensor<3xi1>, tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %3 = loom.select %cond, %x, %y : (tensor<3xi1>, tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @masks_max_min_trilu
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[Y:[a-z0-9]+]]: tensor<3xf32>, %[[P:[a-z0-9]+]]: tensor<2x3xi1>, %[[Q:[a-z0-9]+]]: tensor<1x3xi1>)
func.func @masks_max_min_trilu(%x: tensor<2x3xf32>, %y: tensor<3xf32>, %p: tensor<2x3xi1>, %q: tensor<1x3xi1>) {
  // CHECK: loom.equal %[[X]], %[[Y]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %0 = loom.equal %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: loom.equal %[[P]], %[[Q]] : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  %1 = loom.equal %p, %q : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  // CHECK: loom.less %[[X]], %[[Y]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %2 = loom.less %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: loom.less_equal %[[Y]], %[[X]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %3 = loom.less_equal %y, %x : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: loom.greater %[[X]], %[[X]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %4 = loom.greater %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: loom.greater_equal %[[Y]], %[[Y]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %5 = loom.greater_equal %y, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  // CHECK: loom.and %[[P]], %[[Q]] : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  %6 = loom.and %p, %q : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  // CHECK: loom.or %[[P]], %[[Q]] : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  %7 = loom.or %p, %q : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  // CHECK: loom.xor %[[P]], %[[Q]] : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  %8 = loom.xor %p, %q : (tensor<2x3xi1>, tensor<1x3xi1>) -> tensor<2x3xi1>
  // CHECK: loom.not %[[P]] : (tensor<2x3xi1>) -> tensor<2x3xi1>
  %9 = loom.not %p : (tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: loom.max %[[X]], %[[Y]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %10 = loom.max %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.min %[[X]], %[[Y]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %11 = loom.min %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: loom.trilu %[[X]] {k = -1 : i64, upper = false} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %12 = loom.trilu %x {upper = false, k = -1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<4x8xf32>, %[[B:[a-z0-9]+]]: tensor<8x16xf32>, %[[AT:[a-z0-9]+]]: tensor<8x4xf32>, %[[BT:[a-z0-9]+]]: tensor<16x8xf32>, %[[BA:[a-z0-9]+]]: tensor<2x1x4x8xbf16>, %[[BB:[a-z0-9]+]]: tensor<3x8x16xbf16>)
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %at: tensor<8x4xf32>,
                  %bt: tensor<16x8xf32>, %ba: tensor<2x1x4x8xbf16>,
                  %bb: tensor<3x8x16xbf16>) {
  // CHECK: loom.matmul %[[A]], %[[B]] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %0 = loom.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK: loom.matmul %[[AT]], %[[B]] {transpose_lhs} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = loom.matmul %at, %b {transpose_lhs} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK: loom.matmul %[[A]], %[[BT]] {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %2 = loom.matmul %a, %bt {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // CHECK: loom.matmul %[[AT]], %[[BT]] {transpose_lhs, transpose_rhs} : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %3 = loom.matmul %at, %bt {transpose_lhs, transpose_rhs} : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // CHECK: loom.matmul %[[BA]], %[[BB]] : (tensor<2x1x4x8xbf16>, tensor<3x8x16xbf16>) -> tensor<2x3x4x16xbf16>
  %4 = loom.matmul %ba, %bb : (tensor<2x1x4x8xbf16>, tensor<3x8x16xbf16>) -> tensor<2x3x4x16xbf16>
  return
}

// CHECK-LABEL: func.func @normalization
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[S:[a-z0-9]+]]: tensor<3x4xf32>, %[[BIAS:[a-z0-9]+]]: tensor<3x4xf32>, %[[S1:[a-z0-9]+]]: tensor<4xf32>, %[[C:[a-z0-9]+]]: tensor<3xf32>)
func.func @normalization(%x: tensor<2x3x4xf32>, %s: tensor<3x4xf32>, %bias: tensor<3x4xf32>,
                         %s1: tensor<4xf32>, %c: tensor<3xf32>) {
  // CHECK: loom.softmax %[[X]] {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %0 = loom.softmax %x {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: loom.log_softmax %[[X]] {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = loom.log_softmax %x {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: loom.layer_norm %[[X]], %[[S]], %[[BIAS]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %2 = loom.layer_norm %x, %s, %bias {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: loom.layer_norm %[[X]], %[[S1]] {axis = 2 : i64, epsilon = 0.000000e+00 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %3 = loom.layer_norm %x, %s1 {axis = 2 : i64, epsilon = 0.0 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK: loom.batch_norm %[[X]], %[[C]], %[[C]], %[[C]], %[[C]] {epsilon = 1.000000e-03 : f32} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  %4 = loom.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-03 : f32} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  return
}

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[I:[a-z0-9]+]]: tensor<5x6xi32>)
func.func @reductions(%x: tensor<2x3x4xf32>, %i: tensor<5x6xi32>) {
  // CHECK: loom.reduce_sum %[[X]] {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  %0 = loom.reduce_sum %x {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  // CHECK: loom.reduce_sum %[[X]] {axes = array<i64: 0, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  %1 = loom.reduce_sum %x {axes = array<i64: 0, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  // CHECK: loom.reduce_sum %[[X]] {axes = array<i64>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = loom.reduce_sum %x {axes = array<i64>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: loom.reduce_mean %[[X]] {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %3 = loom.reduce_mean %x {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  // CHECK: loom.reduce_mean %[[X]] {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  %4 = loom.reduce_mean %x {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  // CHECK: loom.reduce_max %[[I]] {axes = array<i64: 1>} : (tensor<5x6xi32>) -> tensor<5xi32>
  %5 = loom.reduce_max %i {axes = array<i64: 1>} : (tensor<5x6xi32>) -> tensor<5xi32>
  // CHECK: loom.reduce_max %[[I]] {axes = array<i64>, keep_dims} : (tensor<5x6xi32>) -> tensor<5x6xi32>
  %6 = loom.reduce_max %i {axes = array<i64>, keep_dims} : (tensor<5x6xi32>) -> tensor<5x6xi32>
  return
}

// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[V:[a-z0-9]+]]: tensor<3x1xi1>, %[[TABLE:[a-z0-9]+]]: tensor<10x8xf16>, %[[IDX:[a-z0-9]+]]: tensor<2x5xi64>, %[[IDX32:[a-z0-9]+]]: tensor<3xi32>, %[[Y:[a-z0-9]+]]: tensor<2x5x4xf32>)
func.func @data_movement(%x: tensor<2x3x4xf32>, %v: tensor<3x1xi1>, %table: tensor<10x8xf16>,
                         %idx: tensor<2x5xi64>, %idx32: tensor<3xi32>, %y: tensor<2x5x4xf32>) {
  // CHECK: loom.transpose %[[X]] {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %0 = loom.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: loom.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = loom.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK: loom.reshape %[[V]] : tensor<3x1xi1> -> tensor<3xi1>
  %2 = loom.reshape %v : tensor<3x1xi1> -> tensor<3xi1>
  // CHECK: loom.broadcast %[[V]] : tensor<3x1xi1> -> tensor<2x3x5xi1>
  %3 = loom.broadcast %v : tensor<3x1xi1> -> tensor<2x3x5xi1>
  // CHECK: loom.gather %[[TABLE]], %[[IDX]] {axis = 0 : i64} : (tensor<10x8xf16>, tensor<2x5xi64>) -> tensor<2x5x8xf16>
  %4 = loom.gather %table, %idx {axis = 0 : i64} : (tensor<10x8xf16>, tensor<2x5xi64>) -> tensor<2x5x8xf16>
  // CHECK: loom.gather %[[X]], %[[IDX32]] {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<3xi32>) -> tensor<2x3x3xf32>
  %5 = loom.gather %x, %idx32 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<3xi32>) -> tensor<2x3x3xf32>
  // CHECK: loom.concat %[[X]], %[[Y]], %[[X]] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>) -> tensor<2x11x4xf32>
  %6 = loom.concat %x, %y, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>) -> tensor<2x11x4xf32>
  // CHECK: loom.concat %[[X]] {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %7 = loom.concat %x {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: loom.slice %[[X]] {sizes = array<i64: 1, 2, 2>, starts = array<i64: 1, 0, 1>, strides = array<i64: 1, 2, 2>} : (tensor<2x3x4xf32>) -> tensor<1x2x2xf32>
  %8 = loom.slice %x {starts = array<i64: 1, 0, 1>, sizes = array<i64: 1, 2, 2>, strides = array<i64: 1, 2, 2>} : (tensor<2x3x4xf32>) -> tensor<1x2x2xf32>
  // Negative strides walk backwards: dimension 2 reads 3, 2, 1, 0.
  // CHECK: loom.slice %[[X]] {sizes = array<i64: 2, 0, 4>, starts = array<i64: 1, 0, 3>, strides = array<i64: -1, 1, -1>} : (tensor<2x3x4xf32>) -> tensor<2x0x4xf32>
  %9 = loom.slice %x {starts = array<i64: 1, 0, 3>, sizes = array<i64: 2, 0, 4>, strides = array<i64: -1, 1, -1>} : (tensor<2x3x4xf32>) -> tensor<2x0x4xf32>
  // Each dimension grows by its low and high pads: 2 + 0 + 1, 3 + 2 + 2, 4 + 3 + 0.
  // CHECK: loom.pad %[[X]] {high = array<i64: 1, 2, 0>, low = array<i64: 0, 2, 3>, mode = "reflect", value = 0.000000e+00 : f32} : (tensor<2x3x4xf32>) -> tensor<3x7x7xf32>
  %10 = loom.pad %x {low = array<i64: 0, 2, 3>, high = array<i64: 1, 2, 0>, mode = "reflect", value = 0.0 : f32} : (tensor<2x3x4xf32>) -> tensor<3x7x7xf32>
  // CHECK: loom.pad %[[V]] {high = array<i64: 0, 4>, low = array<i64: 1, 0>, mode = "constant", value = 1.000000e+00 : f32} : (tensor<3x1xi1>) -> tensor<4x5xi1>
  %11 = loom.pad %v {low = array<i64: 1, 0>, high = array<i64: 0, 4>, mode = "constant", value = 1.0 : f32} : (tensor<3x1xi1>) -> tensor<4x5xi1>
  return
}

// CHECK-LABEL: func.func @conv_pool
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x4x8x8xf32>, %[[W:[a-z0-9]+]]: tensor<6x4x3x3xf32>, %[[B:[a-z0-9]+]]: tensor<6xf32>, %[[WG:[a-z0-9]+]]: tensor<6x2x3x3xf32>)
func.func @conv_pool(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<6xf32>,
                     %wg: tensor<6x2x3x3xf32>) {
  // CHECK: loom.conv2d %[[X]], %[[W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x6x6xf32>
  %0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x6x6xf32>
  // Height: (8 + 1 + 1 - 2 * 2 - 1) / 2 + 1 = 3; width: (8 + 0 + 1 - 1 * 2 - 1) / 1 + 1 = 7.
  // CHECK: loom.conv2d %[[X]], %[[W]], %[[B]] {dilations = array<i64: 2, 1>, groups = 1 : i64, padding = array<i64: 1, 0, 1, 1>, strides = array<i64: 2, 1>} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<2x6x3x7xf32>
  %1 = loom.conv2d %x, %w, %b {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 1, 1>, dilations = array<i64: 2, 1>, groups = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<2x6x3x7xf32>
  // CHECK: loom.conv2d %[[X]], %[[WG]], %[[B]] {dilations = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x8x8xf32>
  %2 = loom.conv2d %x, %wg, %b {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x8x8xf32>
  // CHECK: loom.max_pool2d %[[X]] {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %3 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // Rounding up: (8 - 3) / 2 = 2.5 gives 4 windows with ceil_mode, 3 without.
  // CHECK: loom.max_pool2d %[[X]] {ceil_mode, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %4 = loom.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: loom.max_pool2d %[[X]] {dilations = array<i64: 2, 3>, kernel = array<i64: 2, 2>, padding = array<i64: 1, 0, 1, 2>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x7xf32>
  %5 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, padding = array<i64: 1, 0, 1, 2>, dilations = array<i64: 2, 3>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x7xf32>
  // CHECK: loom.avg_pool2d %[[X]] {count_include_pad, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %6 = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: loom.avg_pool2d %[[X]] {ceil_mode, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 3, 3>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x3x3xf32>
  %7 = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 3, 3>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode} : (tensor<2x4x8x8xf32>) -> tensor<2x4x3x3xf32>
  return
}

// CHECK-LABEL: func.func @conv_transpose
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x4x5x5xf32>, %[[W:[a-z0-9]+]]: tensor<4x3x3x3xf32>, %[[B:[a-z0-9]+]]: tensor<6xf32>)
func.func @conv_transpose(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<6xf32>) {
  // (5 - 1) * 1 + 1 * (3 - 1) + 1 = 7.
  // CHECK: loom.conv_transpose2d %[[X]], %[[W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  %0 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  // Two groups of 3 output channels. Height: (5 - 1) * 2 - 1 - 0 + 1 * 2 + 1 + 1 = 11;
  // width: (5 - 1) * 1 - 0 - 2 + 2 * 2 + 1 + 0 = 7.
  // CHECK: loom.conv_transpose2d %[[X]], %[[W]], %[[B]] {dilations = array<i64: 1, 2>, groups = 2 : i64, output_padding = array<i64: 1, 0>, padding = array<i64: 1, 0, 0, 2>, strides = array<i64: 2, 1>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>, tensor<6xf32>) -> tensor<2x6x11x7xf32>
  %1 = loom.conv_transpose2d %x, %w, %b {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 2>, dilations = array<i64: 1, 2>, groups = 2 : i64, output_padding = array<i64: 1, 0>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>, tensor<6xf32>) -> tensor<2x6x11x7xf32>
  return
}

// CHECK-LABEL: func.func @losses
// CHECK-SAME: (%[[LOGITS:[a-z0-9]+]]: tensor<4x10xf32>, %[[LABELS:[a-z0-9]+]]: tensor<4xi64>, %[[L32:[a-z0-9]+]]: tensor<4xi32>, %[[P:[a-z0-9]+]]: tensor<4x3xbf16>, %[[T:[a-z0-9]+]]: tensor<4x3xbf16>)
func.func @losses(%logits: tensor<4x10xf32>, %labels: tensor<4xi64>, %l32: tensor<4xi32>,
                  %p: tensor<4x3xbf16>, %t: tensor<4x3xbf16>) {
  // CHECK: loom.softmax_cross_entropy %[[LOGITS]], %[[LABELS]] {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %0 = loom.softmax_cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  // CHECK: loom.softmax_cross_entropy %[[LOGITS]], %[[L32]] {ignore_index = 0 : i64, sum} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  %1 = loom.softmax_cross_entropy %logits, %l32 {ignore_index = 0 : i64, sum} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  // A class block of a vocabulary-parallel loss: the rows' log-sum-exp.
  // CHECK: loom.softmax_cross_entropy %[[LOGITS]], %[[LABELS]], %[[LSE:[a-z0-9]+]] {ignore_index = -100 : i64, sum} : (tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<f32>
  %lse = loom.reduce_max %logits {axes = array<i64: 1>} : (tensor<4x10xf32>) -> tensor<4xf32>
  %4 = loom.softmax_cross_entropy %logits, %labels, %lse {ignore_index = -100 : i64, sum} : (tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<f32>
  // CHECK: loom.mse_loss %[[P]], %[[T]] : (tensor<4x3xbf16>, tensor<4x3xbf16>) -> tensor<bf16>
  %2 = loom.mse_loss %p, %t : (tensor<4x3xbf16>, tensor<4x3xbf16>) -> tensor<bf16>
  // CHECK: loom.mse_loss %[[P]], %[[T]] {sum} : (tensor<4x3xbf16>, tensor<4x3xbf16>) -> tensor<bf16>
  %3 = loom.mse_loss %p, %t {sum} : (tensor<4x3xbf16>, tensor<4x3xbf16>) -> tensor<bf16>
  return
}

// CHECK-LABEL: func.func @annotations
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32> {loom.input = "tokens", loom.layout = #loom.layout<#[[MESH]], {{\[\[}}dp], []]>},
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x16xf32> {loom.init = dense<5.000000e-01> : tensor<8x16xf32>, loom.layout = #loom.layout<#[[MESH]], {{\[\[}}], [dp, tp]]>, loom.param = "fc.weight"},
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<16xf32> {loom.layout = #loom.layout<#[[MESH]], {{\[\[}}tp]], partial = [dp]>},
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<16xf32> {loom.buffer = "bn.running_mean", loom.layout = #loom.layout<#[[MESH]], {{\[\[}}]], partial = [tp, dp]>})
// CHECK-SAME: attributes {loom.mesh = #[[MESH]]}
func.func @annotations(
    %x: tensor<4x8xf32> {loom.input = "tokens",
                         loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [[dp], []]>},
    %w: tensor<8x16xf32> {loom.param = "fc.weight",
                          loom.init = dense<0.5> : tensor<8x16xf32>,
                          loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [[], [dp, tp]], partial = []>},
    %g: tensor<16xf32> {loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [[tp]], partial = [dp]>},
    %m: tensor<16xf32> {loom.buffer = "bn.running_mean",
                        loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [[]], partial = [tp, dp]>})
    -> tensor<4x16xf32> attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  // CHECK: %[[MM:.*]] = loom.matmul %[[X]], %[[W]] {loom.recompute, loom.stage = 0 : i64, loom.strategy = #loom.strategy<{{\[\[}}2, 1], [1, 4]]>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %0 = loom.matmul %x, %w {loom.strategy = #loom.strategy<[[2, 1], [1, 4]]>, loom.stage = 0 : i64, loom.recompute} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK: %[[ADD:.*]] = loom.add %[[MM]], %[[G]] {loom.stage = 3 : i32, loom.strategy = #loom.strategy<{{\[\[}}2, 4], [4]] -> {{\[\[}}2, 4]]>} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = loom.add %0, %g {loom.strategy = #loom.strategy<[[2, 4], [4]] -> [[2, 4]]>, loom.stage = 3 : i32} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  // Output entries may differ from the input entries.
  // CHECK: loom.add %[[ADD]], %[[M]] {loom.strategy = #loom.strategy<{{\[\[}}1, 8], [8]] -> {{\[\[}}1, 1]]>} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = loom.add %1, %m {loom.strategy = #loom.strategy<[[1, 8], [8]] -> [[1, 1]]>} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}

// Axis names that are not bare identifiers print quoted; a size may be 1 and
// need not be a power of two; a rank-0 operand takes an empty strategy entry.
// CHECK-LABEL: func.func @quoted_axes
// CHECK-SAME: (%{{.*}}: tensor<6xf32> {loom.layout = #loom.layout<#[[MESH_Q]], {{\[\[}}"data parallel", pp]]>},
// CHECK-SAME: %{{.*}}: tensor<f32> {loom.layout = #loom.layout<#[[MESH_Q]], [], partial = ["data parallel"]>})
// CHECK-SAME: attributes {loom.mesh = #[[MESH_Q]]}
func.func @quoted_axes(
    %x: tensor<6xf32> {loom.layout = #loom.layout<#loom.mesh<"data parallel" = 3, pp = 1>, [["data parallel", "pp"]]>},
    %s: tensor<f32> {loom.layout = #loom.layout<#loom.mesh<"data parallel" = 3, pp = 1>, [], partial = ["data parallel"]>})
    attributes {loom.mesh = #loom.mesh<"data parallel" = 3, pp = 1>} {
  // CHECK: loom.mul %{{.*}}, %{{.*}} {loom.strategy = #loom.strategy<{{\[\[}}3], []]>}
  %0 = loom.mul %x, %s {loom.strategy = #loom.strategy<[[3], []]>} : (tensor<6xf32>, tensor<f32>) -> tensor<6xf32>
  return
}

// Five columns, kernel 2, stride 2, one pad each side: windows start at -1, 1
// and 3; with ceil_mode a fourth would start at 5, in the trailing padding, so
// it is dropped and the result stays 3x3. Unpadded, ceil_mode keeps the
// partial window at 4 (3 rather than 2).
// CHECK-LABEL: func.func @pool_ceil_mode_drop
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x1x5x5xf32>)
func.func @pool_ceil_mode_drop(%x: tensor<1x1x5x5xf32>) {
  // CHECK: loom.max_pool2d %[[X]] {ceil_mode, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  %0 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  // CHECK: loom.max_pool2d %[[X]] {ceil_mode, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  %1 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  // CHECK: loom.max_pool2d %[[X]] {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x2x2xf32>
  %2 = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x2x2xf32>
  return
}

// Function results take loom.output and loom.layout (on the function's mesh,
// partial included).
// CHECK-LABEL: func.func @result_annotations
// CHECK-SAME: (%{{.*}}: tensor<4x16xf32> {loom.input = "x"})
// CHECK-SAME: -> (tensor<4x16xf32> {loom.layout = #loom.layout<#[[MESH]], {{\[\[}}dp], [tp]]>, loom.output = "y"},
// CHECK-SAME: tensor<f32> {loom.layout = #loom.layout<#[[MESH]], [], partial = [dp]>, loom.output = "loss"})
// CHECK-SAME: attributes {loom.mesh = #[[MESH]]}
func.func @result_annotations(%x: tensor<4x16xf32> {loom.input = "x"})
    -> (tensor<4x16xf32> {loom.output = "y", loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [[dp], [tp]]>},
        tensor<f32> {loom.output = "loss", loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [], partial = [dp]>})
    attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  %0 = loom.reduce_sum %x {axes = array<i64: 0, 1>} : (tensor<4x16xf32>) -> tensor<f32>
  return %x, %0 : tensor<4x16xf32>, tensor<f32>
}

// A declaration (no body) carries the same argument and result annotations.
// CHECK-LABEL: func.func private @declaration
// CHECK-SAME: (tensor<4x8xf32> {loom.input = "x", loom.layout = #loom.layout<#[[MESH]], {{\[\[}}dp], []]>},
// CHECK-SAME: tensor<8xf32> {loom.init = dense<1.000000e+00> : tensor<8xf32>, loom.param = "w"},
// CHECK-SAME: tensor<8xf32> {loom.buffer = "m"})
// CHECK-SAME: -> (tensor<4x8xf32> {loom.layout = #loom.layout<#[[MESH]], {{\[\[}}dp], [tp]]>, loom.output = "y"})
// CHECK-SAME: attributes {loom.mesh = #[[MESH]]}
func.func private @declaration(
    tensor<4x8xf32> {loom.input = "x", loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [[dp], []]>},
    tensor<8xf32> {loom.param = "w", loom.init = dense<1.0> : tensor<8xf32>},
    tensor<8xf32> {loom.buffer = "m"})
    -> (tensor<4x8xf32> {loom.output = "y", loom.layout = #loom.layout<#loom.mesh<dp = 2, tp = 4>, [[dp], [tp]]>})
    attributes {loom.mesh = #loom.mesh<dp = 2, tp = 4>}

// A module takes loom.source, loom.opset and loom.mesh; a strategy inside a
// function without a mesh of its own is checked against the module's (2 * 4
// and 1 * 8 both use the 8 devices). A stage may exceed 32 bits.
// CHECK-LABEL: module @imported
// CHECK-SAME: attributes {loom.mesh = #[[MESH]], loom.opset = 17 : i64, loom.source = "model.onnx"}
// CHECK: loom.relu %{{.*}} {loom.stage = 4294967296 : i64, loom.strategy = #loom.strategy<{{\[\[}}2, 4]] -> {{\[\[}}1, 8]]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
module @imported attributes {loom.source = "model.onnx", loom.opset = 17 : i64, loom.mesh = #loom.mesh<dp = 2, tp = 4>} {
  func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = loom.relu %x {loom.strategy = #loom.strategy<[[2, 4]] -> [[1, 8]]>, loom.stage = 4294967296 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// 2^16 * 2^15 = 2^31 devices is the largest mesh, and a strategy may use them all.
// CHECK-LABEL: func.func @largest_mesh
// CHECK-SAME: attributes {loom.mesh = #[[MESH_MAX]]}
// CHECK: loom.relu %{{.*}} {loom.strategy = #loom.strategy<{{\[\[}}65536, 32768]]>}
func.func @largest_mesh(%x: tensor<65536x32768xf32>) attributes {loom.mesh = #loom.mesh<a = 65536, b = 32768>} {
  %0 = loom.relu %x {loom.strategy = #loom.strategy<[[65536, 32768]]>} : (tensor<65536x32768xf32>) -> tensor<65536x32768xf32>
  return
}

// Dropout with the training step, and without it (the identity).
// CHECK-LABEL: func.func @dropout
// CHECK: loom.dropout %{{.*}}, %{{.*}} {ratio = 1.000000e-01 : f32, seed = -3 : i64} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK: loom.dropout %{{.*}} {ratio = 5.000000e-01 : f32, seed = 7 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @dropout(%x: tensor<4x8xf32>, %step: tensor<f32>) {
  %0 = loom.dropout %x, %step {ratio = 0.1 : f32, seed = -3 : i64} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = loom.dropout %x {ratio = 0.5 : f32, seed = 7 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// The element-indexing, scan and top-k ops, and reduce_prod.
// CHECK-LABEL: func.func @indexing
// CHECK: loom.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
// CHECK: loom.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {accumulate, axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
// CHECK: loom.cumsum %{{.*}} {axis = 0 : i64, exclusive, reverse} : (tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK: loom.top_k %{{.*}} {axis = 1 : i64, k = 2 : i64, smallest} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
// CHECK: loom.reduce_prod %{{.*}} {axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<4xf32>
func.func @indexing(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) {
  %0 = loom.gather_elements %x, %i {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  %1 = loom.scatter_elements %x, %i, %u {accumulate, axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %2 = loom.cumsum %x {axis = 0 : i64, exclusive, reverse} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %3:2 = loom.top_k %x {axis = 1 : i64, k = 2 : i64, smallest} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  %4 = loom.reduce_prod %x {axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<4xf32>
  return
}
