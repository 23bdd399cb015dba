// Pure data parallelism (--mode data): every input is split over the batch
// on all devices, parameters are replicated, and the only collectives are
// the all-reduces of the gradients (which arise as partial sums of
// batch-split matmuls and reductions) and of the loss's two partial sums
// (the summed cross-entropy and the count of labels).
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=adamw" \
// RUN:   --loom-propagate-sharding="mode=data" --loom-partition | FileCheck %s

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w1: tensor<16x32xf32> {loom.param = "w1"},
                %b1: tensor<32xf32> {loom.param = "b1"},
                %w2: tensor<32x10xf32> {loom.param = "w2"})
    -> (tensor<8x10xf32> {loom.output = "logits"})
    attributes {loom.mesh = #loom.mesh<dp = 4>} {
  %h = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a = loom.add %h, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = loom.relu %a : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = loom.matmul %r, %w2 : (tensor<8x32xf32>, tensor<32x10xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}

// CHECK: func.func @main(%{{.*}}: tensor<2x16xf32> {loom.input = "x", loom.layout = #loom.layout<#mesh, {{\[\[dp\], \[\]\]}}>}
// CHECK-SAME: tensor<16x32xf32> {loom.layout = #loom.layout<#mesh, {{\[\[\], \[\]\]}}>, loom.param = "w1"}
// CHECK-SAME: tensor<2xi64> {loom.input = "labels", loom.layout = #loom.layout<#mesh, {{\[\[dp\]\]}}>}
// CHECK-NOT: loom.all_gather
// CHECK-NOT: loom.reduce_scatter
// CHECK-NOT: loom.all_to_all
// CHECK-NOT: loom.local_split
// CHECK-COUNT-5: loom.all_reduce %{{.*}} {axes = array<i64: 0>, predicted_bytes = {{[0-9]+}} : i64} : tensor<{{f32|32xf32|16x32xf32|32x10xf32|1x32xf32}}>
// CHECK-NOT: loom.all_
// CHECK: return
