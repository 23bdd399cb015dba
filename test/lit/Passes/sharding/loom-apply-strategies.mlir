// loom-apply-strategies alone: a strategy file's entries set the shardings
// of the ops of the ONNX nodes they name (propagation keeps them); errors
// name the file, the entry and what to change.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"strategies": [{"node": "/fc1/MatMul", "strategy": [[1, 1], [1, "tp"]]}]}' > %t/fc1.json
// RUN: loom-opt %s --loom-apply-strategies="file=%t/fc1.json" -mlir-print-debuginfo | FileCheck %s
// RUN: echo '{"strategies": [{"node": "/fc9/MatMul", "strategy": [[1, 1], [1, "tp"]]}]}' > %t/none.json
// RUN: not loom-opt %s --loom-apply-strategies="file=%t/none.json" 2>&1 | FileCheck %s --check-prefix=NODE
// RUN: not loom-opt %s --loom-apply-strategies="file=%t/missing.json" 2>&1 | FileCheck %s --check-prefix=FILE

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x32xf32> {loom.param = "w1"},
                %w2: tensor<32x10xf32> {loom.param = "w2"})
    -> (tensor<8x10xf32> {loom.output = "logits"})
    attributes {loom.mesh = #loom.mesh<tp = 4>} {
  %h = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32> loc("/fc1/MatMul")
  %y = loom.matmul %h, %w2 : (tensor<8x32xf32>, tensor<32x10xf32>) -> tensor<8x10xf32> loc("/fc2/MatMul")
  return %y : tensor<8x10xf32>
}

// CHECK: loom.matmul %arg0, %arg1 {loom.sharding = {{\[\[\], \["tp"\], \[\]\]}}}
// CHECK-NEXT: loom.matmul %0, %arg2 :
// NODE: error: {{.*}}none.json{{.*}}/fc9/MatMul
// FILE: error: {{.*}}missing.json: cannot read the strategy file: cannot open: No such file or directory
