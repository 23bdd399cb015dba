// loom-pipeline alone, on a partitioned training step (built by a separate
// loom-opt): two stages by op count, two micro-batches under GPipe; each
// stage function carries loom.pipeline, the first sends what the second
// needs and receives its gradient back.
//
// RUN: loom-opt %s --loom-build-training-graph="optimizer=sgd" --loom-propagate-sharding=mode=data --loom-partition -mlir-print-debuginfo \
// RUN:   | loom-opt --loom-pipeline="stages=2 micro-batches=2 schedule=gpipe" | FileCheck %s
// RUN: loom-opt %s --loom-build-training-graph="optimizer=sgd" --loom-propagate-sharding=mode=data --loom-partition -mlir-print-debuginfo \
// RUN:   | not loom-opt --loom-pipeline="stages=3" 2>&1 | FileCheck %s --check-prefix=FEW

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x32xf32> {loom.param = "w1"},
                %w2: tensor<32x10xf32> {loom.param = "w2"})
    -> (tensor<8x10xf32> {loom.output = "logits"})
    attributes {loom.mesh = #loom.mesh<dp = 1>} {
  %h = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32> loc("/l0/MatMul")
  %y = loom.matmul %h, %w2 : (tensor<8x32xf32>, tensor<32x10xf32>) -> tensor<8x10xf32> loc("/l1/MatMul")
  return %y : tensor<8x10xf32>
}

// CHECK: func.func @main_stage0(
// CHECK-SAME: loom.pipeline = {axis = "pp", micro_batches = 2 : i64, schedule = #loom.schedule<gpipe>, stage = 0 : i64, stages = 2 : i64}
// CHECK: loom.send %{{.*}} {peer_stage = 1 : i64, tag = {{[0-9]+}} : i64} : tensor<8x32xf32>
// CHECK: loom.recv {peer_stage = 1 : i64, tag = {{[0-9]+}} : i64} : tensor<8x32xf32>
// CHECK: func.func @main_stage1(
// CHECK-SAME: stage = 1 : i64, stages = 2 : i64}
// FEW: error: {{.*}}layers
