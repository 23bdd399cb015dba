// loom-shard-optimizer alone, on a training step sharded for data
// parallelism over dp=4 (built and propagated by a separate loom-opt):
// each level splits the Adam updates over dp on their first dimension.
// Level 1 splits the optimizer state, level 2 the gradients too (the
// function is marked with the level; loom-partition places their
// reduce-scatter), level 3 the parameters as well.
//
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=adam" --loom-propagate-sharding=mode=data \
// RUN:   | loom-opt --loom-shard-optimizer=level=1 | FileCheck %s --check-prefixes=CHECK,STATE
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=adam" --loom-propagate-sharding=mode=data \
// RUN:   | loom-opt --loom-shard-optimizer=level=2 | FileCheck %s --check-prefixes=CHECK,GRAD
// RUN: loom-opt %s --loom-build-training-graph="loss=cross_entropy optimizer=adam" --loom-propagate-sharding=mode=data \
// RUN:   | loom-opt --loom-shard-optimizer=level=3 | FileCheck %s --check-prefixes=CHECK,PARAM

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

// Levels 1 and 2 keep the parameter whole; level 3 splits it.
// STATE: %arg1: tensor<16x32xf32> {loom.layout = #loom.layout<#mesh, {{\[\[\], \[\]\]}}>, loom.param = "w1", loom.zero = 1 : i64}
// GRAD: %arg1: tensor<16x32xf32> {loom.layout = #loom.layout<#mesh, {{\[\[\], \[\]\]}}>, loom.param = "w1", loom.zero = 2 : i64}
// PARAM: %arg1: tensor<16x32xf32> {loom.layout = #loom.layout<#mesh, {{\[\[dp\], \[\]\]}}>, loom.param = "w1", loom.zero = 3 : i64}
// Adam's moments are split at every level.
// CHECK-SAME: %arg7: tensor<16x32xf32> {loom.layout = #loom.layout<#mesh, {{\[\[dp\], \[\]\]}}>, loom.state = "w1::m"}
// STATE-SAME: attributes {loom.mesh = #mesh, loom.zero = 1 : i64}
// GRAD-SAME: attributes {loom.mesh = #mesh, loom.zero = 2 : i64}
// PARAM-SAME: attributes {loom.mesh = #mesh, loom.zero = 3 : i64}
// CHECK: loom.adam_update %arg1, {{.*}}loom.sharding = {{\[\["dp"\], \[\]\]}}
// CHECK-NEXT: loom.adam_update %arg2, {{.*}}loom.sharding = {{\[\["dp"\]\]}}
// CHECK-NEXT: loom.adam_update %arg3, {{.*}}loom.sharding = {{\[\["dp"\], \[\]\]}}
