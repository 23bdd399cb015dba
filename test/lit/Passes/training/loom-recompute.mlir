// loom-recompute alone, on a single-device training step (built by a
// separate loom-opt): with spec=layers, every forward op of each layer (the
// ONNX node names' first path component) but the layer's last is marked,
// and the backward recomputes the marked ops from the values it keeps: the
// relu_grad reads the recomputed add, not the forward's.
//
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=sgd" -mlir-print-debuginfo \
// RUN:   | loom-opt --loom-recompute=spec=layers | FileCheck %s
//
// Without a spec it recomputes what is already marked (here, nothing).
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=sgd" -mlir-print-debuginfo \
// RUN:   | loom-opt --loom-recompute | FileCheck %s --check-prefix=NONE
//
// A pattern that matches no forward op is an error that says so.
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=sgd" -mlir-print-debuginfo \
// RUN:   | not loom-opt --loom-recompute="spec=/nothing/*" 2>&1 | FileCheck %s --check-prefix=ERROR

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x32xf32> {loom.param = "w1"},
                %b1: tensor<32xf32> {loom.param = "b1"},
                %w2: tensor<32x10xf32> {loom.param = "w2"})
    -> (tensor<8x10xf32> {loom.output = "logits"}) {
  %h = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32> loc("/blocks.0/fc/MatMul")
  %a = loom.add %h, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32> loc("/blocks.0/fc/Add")
  %r = loom.relu %a : (tensor<8x32xf32>) -> tensor<8x32xf32> loc("/blocks.0/act/Relu")
  %y = loom.matmul %r, %w2 : (tensor<8x32xf32>, tensor<32x10xf32>) -> tensor<8x10xf32> loc("/blocks.1/fc/MatMul")
  return %y : tensor<8x10xf32>
}

// CHECK: %[[H:.*]] = loom.matmul %arg0, %arg1 {loom.grad_id = 5 : i64, loom.recompute}
// CHECK-NEXT: %[[A:.*]] = loom.add %[[H]], %arg2 {loom.grad_id = 4 : i64, loom.recompute}
// The layer's last op is its checkpoint, kept for the backward:
// CHECK-NEXT: %[[R:.*]] = loom.relu %[[A]] {loom.grad_id = 3 : i64} :
// CHECK: loom.softmax_cross_entropy_grad
// CHECK: %[[DR:.*]] = loom.matmul %{{.*}}, %arg3 {loom.grad_of
// CHECK: loom.matmul %[[R]], %{{.*}} {loom.grad_of
// CHECK-NEXT: %[[H2:.*]] = loom.matmul %arg0, %arg1 {loom.grad_id = 5 : i64, loom.recomputed}
// CHECK-NEXT: %[[A2:.*]] = loom.add %[[H2]], %arg2 {loom.grad_id = 4 : i64, loom.recomputed}
// CHECK-NEXT: loom.relu_grad %[[A2]], %[[DR]]

// NONE-NOT: loom.recompute

// ERROR: error: --recompute: the pattern '/nothing/*' matches no forward op (patterns match ONNX node names, e.g. '/blocks.*/mlp/*')
