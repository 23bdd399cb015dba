// loom-assign-mesh alone: @main goes on the mesh, without the pipeline
// axis (each stage runs on the rest), with its ZeRO level; errors name
// the flag and what to change.
//
// RUN: loom-opt %s --loom-build-training-graph="optimizer=sgd" \
// RUN:   | loom-opt --loom-assign-mesh="mesh=pp=2,dp=2,tp=2 zero=1" | FileCheck %s
// RUN: loom-opt %s --loom-assign-mesh="mesh=tp=4" | FileCheck %s --check-prefix=FLAT
// RUN: not loom-opt %s --loom-assign-mesh="mesh=pp=2,dp=2" 2>&1 | FileCheck %s --check-prefix=TRAIN
// RUN: not loom-opt %s --loom-assign-mesh="mesh=dp=2,pp=2" 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: not loom-opt %s --loom-assign-mesh="mesh=dp=2,dp=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not loom-opt %s --loom-assign-mesh="mesh=dp" 2>&1 | FileCheck %s --check-prefix=SYNTAX

func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                %w: tensor<16x10xf32> {loom.param = "w"})
    -> (tensor<8x10xf32> {loom.output = "logits"}) {
  %y = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x10xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}

// CHECK: #mesh = #loom.mesh<dp = 2, tp = 2>
// CHECK: func.func @main({{.*}} attributes {loom.mesh = #mesh, loom.zero = 1 : i64}
// FLAT: #mesh = #loom.mesh<tp = 4>
// FLAT: attributes {loom.mesh = #mesh} {
// TRAIN: error: --mesh pp=N pipelines a training step: it needs --train
// FIRST: error: --mesh: the pipeline axis pp must come first, got 'dp=2,pp=2'
// TWICE: error: --mesh names axis 'dp' twice
// SYNTAX: error: --mesh expects named axes like dp=2,tp=4, got 'dp'
