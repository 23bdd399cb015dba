// loom-auto-sharding alone: the forward ops of a training step on a
// dp=2,tp=2 mesh get the layouts the cost model finds fastest (here the
// Megatron split: fc1 by columns and fc2 by rows over all four devices);
// the backward and optimizer ops are left to loom-propagate-sharding. The
// training step is built first, by a separate loom-opt.
//
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=adam" -mlir-print-debuginfo \
// RUN:   | loom-opt --loom-auto-sharding="profile=8xH100-80GB" | FileCheck %s
//
// The memory limit binds: the error names the most compact plan's largest
// tensors per device.
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=adam" -mlir-print-debuginfo \
// RUN:   | not loom-opt --loom-auto-sharding="profile=8xH100-80GB memory-limit=100000000" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LIMIT

func.func @main(%x: tensor<4096x4096xf32> {loom.input = "x"},
                %w1: tensor<4096x16384xf32> {loom.param = "w1"},
                %b1: tensor<16384xf32> {loom.param = "b1"},
                %w2: tensor<16384x1024xf32> {loom.param = "w2"})
    -> (tensor<4096x1024xf32> {loom.output = "logits"})
    attributes {loom.mesh = #loom.mesh<dp = 2, tp = 2>} {
  %h = loom.matmul %x, %w1 : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) -> tensor<4096x16384xf32> loc("/fc1/MatMul")
  %a = loom.add %h, %b1 : (tensor<4096x16384xf32>, tensor<16384xf32>) -> tensor<4096x16384xf32> loc("/fc1/Add")
  %r = loom.relu %a : (tensor<4096x16384xf32>) -> tensor<4096x16384xf32> loc("/act/Relu")
  %y = loom.matmul %r, %w2 : (tensor<4096x16384xf32>, tensor<16384x1024xf32>) -> tensor<4096x1024xf32> loc("/fc2/MatMul")
  return %y : tensor<4096x1024xf32>
}

// The memory per device, by hand: w1, b1 and w2 split four ways with their
// gradients and Adam state, 4 x (64 MiB + 16 KiB + 16 MiB); the relu's
// result and the add's copy its backward reads, 64 MiB each; the loss's
// copy of the logits and its gradient of them, 8 MiB each (split over dp);
// the loss, 4 B. That is what the step holds; the peak adds the relu
// result's gradient (64 MiB) while fc2's backward runs, less the logits'
// copy and the loss (8 MiB + 4 B) the loss's backward has freed:
// 545325056 bytes.
// CHECK: attributes {loom.mesh = #mesh, loom.search = {cost = {{[0-9.eE+-]+}} : f64, exact = true, memory = 545325056 : i64}}
// CHECK: loom.matmul %arg0, %arg1 {loom.grad_id = 5 : i64, loom.sharding = {{\[\[\], \["dp", "tp"\], \[\]\]}}}
// CHECK-NEXT: loom.add %0, %arg2 {loom.grad_id = 4 : i64, loom.sharding = {{\[\[\], \["dp", "tp"\]\]}}}
// CHECK-NEXT: loom.relu %1 {loom.grad_id = 3 : i64, loom.sharding = {{\[\[\], \["dp", "tp"\]\]}}}
// CHECK-NEXT: loom.matmul %2, %arg3 {loom.grad_id = 2 : i64, loom.sharding = {{\[\[\], \[\], \["dp", "tp"\]\]}}}
// The backward's ops are not the search's:
// CHECK: loom.matmul %{{[0-9]+}}, %arg3 {loom.grad_of = array<i64: {{[0-9, ]+}}>, transpose_rhs} :
// CHECK: return

// The most compact plan splits everything four ways: 456.1 MiB held (the
// parameters with their state, the two 64 MiB copies, the loss's 4 MiB),
// and 60 MiB more while fc2's backward runs (the relu result's 64 MiB
// gradient, less the loss's 4 MiB copy of the logits already freed).
// LIMIT: error: no sharding on [dp=2, tp=2] fits in 95.4 MiB (100000000 bytes) per device: the most compact plan found needs 516.1 MiB
// LIMIT: parameter 'w1' (with its gradient and optimizer state): 256.0 MiB as [-,dp*tp]
// LIMIT: gradients live while the backward of 'loom.matmul' (ONNX node '/fc2/MatMul') runs (beyond what the backward has freed): 60.0 MiB
