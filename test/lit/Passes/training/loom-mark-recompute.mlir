// loom-mark-recompute alone: `layers` marks every forward op of each layer
// (the ONNX node names' first path component) but the layer's last; globs
// mark the ops of the nodes they match. The backward is not changed here
// (loom-recompute does that, after sharding).
//
// RUN: loom-opt %s --loom-build-training-graph="optimizer=sgd" -mlir-print-debuginfo \
// RUN:   | loom-opt --loom-mark-recompute=spec=layers | FileCheck %s
// RUN: loom-opt %s --loom-build-training-graph="optimizer=sgd" -mlir-print-debuginfo \
// RUN:   | loom-opt --loom-mark-recompute="spec=/blocks.0/act/*" | FileCheck %s --check-prefix=GLOB
// RUN: not loom-opt %s --loom-mark-recompute=spec=layers 2>&1 | FileCheck %s --check-prefix=FORWARD

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x32xf32> {loom.param = "w1"},
                %w2: tensor<32x10xf32> {loom.param = "w2"})
    -> (tensor<8x10xf32> {loom.output = "logits"}) {
  %h = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32> loc("/blocks.0/fc/MatMul")
  %r = loom.relu %h : (tensor<8x32xf32>) -> tensor<8x32xf32> loc("/blocks.0/act/Relu")
  %y = loom.matmul %r, %w2 : (tensor<8x32xf32>, tensor<32x10xf32>) -> tensor<8x10xf32> loc("/blocks.1/fc/MatMul")
  return %y : tensor<8x10xf32>
}

// CHECK: loom.matmul %arg0, %arg1 {loom.grad_id = {{[0-9]+}} : i64, loom.recompute}
// CHECK-NEXT: loom.relu %{{[0-9]+}} {loom.grad_id = {{[0-9]+}} : i64} :
// CHECK-NEXT: loom.matmul %{{[0-9]+}}, %arg2 {loom.grad_id = {{[0-9]+}} : i64} :
// CHECK-NOT: loom.recomputed
// GLOB: loom.matmul %arg0, %arg1 {loom.grad_id = {{[0-9]+}} : i64} :
// GLOB-NEXT: loom.relu %{{[0-9]+}} {loom.grad_id = {{[0-9]+}} : i64, loom.recompute}
// FORWARD: error: {{.*}}training step
