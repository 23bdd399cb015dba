// Importing the MLP with --batch 4 --no-weights gives exactly this IR (module attributes, annotated signature, Gemm/Relu/Tanh as loom ops), and that IR re-parses and verifies in loom-opt unchanged.
// RUN: loom import %models/mlp.onnx --batch 4 --no-weights | FileCheck %s
// RUN: loom import %models/mlp.onnx --batch 4 --no-weights | loom-opt | FileCheck %s
// RUN: loom import %models/mlp.onnx --batch 4 --no-weights | loom-opt -verify-roundtrip > /dev/null

// The arguments are named by the printer (%arg0 ...); pinning the names keeps
// any extra or missing argument from going unnoticed between the CHECK-SAMEs.
// With --no-weights there is no loom.init and no resource blob.

// CHECK-LABEL: module attributes {loom.opset = 13 : i64, loom.source = "{{.*}}/models/mlp.onnx"} {
// CHECK-NEXT:  func.func @main(
// CHECK-SAME:    %[[X:arg0]]: tensor<4x32xf32> {loom.input = "x"},
// CHECK-SAME:    %[[W1:arg1]]: tensor<64x32xf32> {loom.param = "fc1.weight"},
// CHECK-SAME:    %[[B1:arg2]]: tensor<64xf32> {loom.param = "fc1.bias"},
// CHECK-SAME:    %[[W2:arg3]]: tensor<64x64xf32> {loom.param = "fc2.weight"},
// CHECK-SAME:    %[[B2:arg4]]: tensor<64xf32> {loom.param = "fc2.bias"},
// CHECK-SAME:    %[[W3:arg5]]: tensor<10x64xf32> {loom.param = "fc3.weight"},
// CHECK-SAME:    %[[B3:arg6]]: tensor<10xf32> {loom.param = "fc3.bias"})
// CHECK-SAME:    -> (tensor<4x10xf32> {loom.output = "logits"}) {{{$}}

// fc1: Gemm(transB=1) is a matmul against the [out, in] weight plus the bias.
// CHECK-NEXT:    %[[MM1:.+]] = loom.matmul %[[X]], %[[W1]] {transpose_rhs} : (tensor<4x32xf32>, tensor<64x32xf32>) -> tensor<4x64xf32>
// CHECK-NEXT:    %[[FC1:.+]] = loom.add %[[MM1]], %[[B1]] : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT:    %[[RELU:.+]] = loom.relu %[[FC1]] : (tensor<4x64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT:    %[[MM2:.+]] = loom.matmul %[[RELU]], %[[W2]] {transpose_rhs} : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT:    %[[FC2:.+]] = loom.add %[[MM2]], %[[B2]] : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT:    %[[TANH:.+]] = loom.tanh %[[FC2]] : (tensor<4x64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT:    %[[MM3:.+]] = loom.matmul %[[TANH]], %[[W3]] {transpose_rhs} : (tensor<4x64xf32>, tensor<10x64xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %[[FC3:.+]] = loom.add %[[MM3]], %[[B3]] : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    return %[[FC3]] : tensor<4x10xf32>
// CHECK-NEXT:  }
// CHECK-NEXT: }
// CHECK-NOT: {{.}}
