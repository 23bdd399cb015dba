// loom-verify-phase checks the annotations a phase boundary promises (see
// the pass's description) and changes nothing: a module that keeps the
// contract prints as it was read; each broken contract is a diagnostic
// on the function or op at fault.
//
// RUN: rm -rf %t && split-file %s %t
// RUN: loom-opt %t/imported.mlir -loom-verify-phase=phase=imported | FileCheck %s --check-prefix=IMPORTED
// RUN: loom-opt %t/imported-buffers.mlir -loom-verify-phase=phase=imported | FileCheck %s --check-prefix=BUFFERS
// RUN: loom-opt %t/imported-bad.mlir -split-input-file -loom-verify-phase=phase=imported -verify-diagnostics
// RUN: loom-opt %t/step.mlir -loom-verify-phase=phase=training-step | FileCheck %s --check-prefix=STEP
// RUN: loom-opt %t/step-bad.mlir -split-input-file -loom-verify-phase=phase=training-step -verify-diagnostics
// RUN: loom-opt %t/sharded.mlir -loom-verify-phase=phase=sharded | FileCheck %s --check-prefix=SHARDED
// RUN: loom-opt %t/sharded-bad.mlir -split-input-file -loom-verify-phase=phase=sharded -verify-diagnostics
// RUN: loom-opt %t/partitioned.mlir -loom-verify-phase=phase=partitioned | FileCheck %s --check-prefix=PARTITIONED
// RUN: loom-opt %t/partitioned-bad.mlir -split-input-file -loom-verify-phase=phase=partitioned -verify-diagnostics
// RUN: loom-opt %t/pipelined.mlir -loom-verify-phase=phase=pipelined | FileCheck %s --check-prefix=PIPELINED
// RUN: loom-opt %t/pipelined-bad.mlir -split-input-file -loom-verify-phase=phase=pipelined -verify-diagnostics
//
// The phase is an enum option: another spelling is refused.
// RUN: not loom-opt %t/imported.mlir -loom-verify-phase=phase=lowered 2>&1 | FileCheck %s --check-prefix=SPELLING
// SPELLING: Cannot find option named 'lowered'

//--- imported.mlir
// IMPORTED: func.func @main(%arg0: tensor<2x4xf32> {loom.input = "x"}, %arg1: tensor<4xf32> {loom.param = "w"}) -> (tensor<2x4xf32> {loom.output = "y"})
// IMPORTED-NEXT: loom.add
func.func @main(%x: tensor<2x4xf32> {loom.input = "x"}, %w: tensor<4xf32> {loom.param = "w"}) -> (tensor<2x4xf32> {loom.output = "y"}) {
  %0 = loom.add %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

//--- imported-buffers.mlir
// An imported graph may give a buffer a new value (training-mode batch
// normalization's running statistics).
// BUFFERS: func.func @main({{.*}}loom.buffer = "running_mean"{{.*}}tensor<4xf32> {loom.updates = 1 : i64})
func.func @main(%x: tensor<4xf32> {loom.input = "x"}, %m: tensor<4xf32> {loom.buffer = "running_mean"}) -> (tensor<4xf32> {loom.output = "y"}, tensor<4xf32> {loom.updates = 1 : i64}) {
  %0 = loom.add %x, %m : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %x, %0 : tensor<4xf32>, tensor<4xf32>
}

//--- imported-bad.mlir
// expected-error @+1 {{phase 'imported': argument #1 has 0 of the roles loom.input, loom.param, loom.buffer; it needs exactly one}}
func.func @main(%x: tensor<4xf32> {loom.input = "x"}, %w: tensor<4xf32>) -> (tensor<4xf32> {loom.output = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{phase 'imported': argument #0 has 2 of the roles}}
func.func @main(%x: tensor<4xf32> {loom.input = "x", loom.param = "x"}) -> (tensor<4xf32> {loom.output = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{phase 'imported': result #0 needs loom.output}}
func.func @main(%x: tensor<4xf32> {loom.input = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Only the training step updates parameters.
// expected-error @+1 {{phase 'imported': result #1 needs loom.output or loom.updates of a loom.buffer argument}}
func.func @main(%x: tensor<4xf32> {loom.input = "x"}, %w: tensor<4xf32> {loom.param = "w"}) -> (tensor<4xf32> {loom.output = "y"}, tensor<4xf32> {loom.updates = 1 : i64}) {
  %0 = loom.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %x, %0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{phase 'imported': the module has no function @main}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

//--- step.mlir
// STEP: func.func @main
// STEP-SAME: loom.hyper = #loom.hyper<lr>
// STEP-SAME: loom.hyper = #loom.hyper<step>
// STEP-SAME: loom.updates = 1 : i64
func.func @main(%x: tensor<4xf32> {loom.input = "x"}, %w: tensor<4xf32> {loom.param = "w"}, %m: tensor<4xf32> {loom.state = "w::m"}, %lr: tensor<f32> {loom.hyper = #loom.hyper<lr>}, %step: tensor<f32> {loom.hyper = #loom.hyper<step>}) -> (tensor<4xf32> {loom.output = "loss"}, tensor<4xf32> {loom.updates = 1 : i64}) {
  return %x, %w : tensor<4xf32>, tensor<4xf32>
}

//--- step-bad.mlir
// expected-error @+1 {{phase 'training-step': @main needs one argument #loom.hyper<step>, not 0}}
func.func @main(%x: tensor<4xf32> {loom.input = "x"}, %lr: tensor<f32> {loom.hyper = #loom.hyper<lr>}) -> (tensor<4xf32> {loom.output = "loss"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{phase 'training-step': @main needs one argument #loom.hyper<lr>, not 2}}
func.func @main(%lr: tensor<f32> {loom.hyper = #loom.hyper<lr>}, %lr2: tensor<f32> {loom.hyper = #loom.hyper<lr>}, %step: tensor<f32> {loom.hyper = #loom.hyper<step>}) -> (tensor<f32> {loom.output = "loss"}) {
  return %lr : tensor<f32>
}

// -----

// A per-step scalar spelt as a string: the dialect refuses it first.
// expected-error @+1 {{'loom.hyper' must be a #loom.hyper (lr or step) on a scalar argument}}
func.func @main(%lr: tensor<f32> {loom.hyper = "lr"}) -> (tensor<f32> {loom.output = "loss"}) {
  return %lr : tensor<f32>
}

//--- sharded.mlir
// SHARDED: loom.add %arg0, %arg1 {loom.sharding = {{\[}}["dp"], []]}
func.func @main(%x: tensor<2x4xf32> {loom.input = "x"}, %w: tensor<4xf32> {loom.param = "w"}) -> (tensor<2x4xf32> {loom.output = "y"}) attributes {loom.mesh = #loom.mesh<dp = 2>} {
  %0 = loom.add %x, %w {loom.sharding = [["dp"], []]} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

//--- sharded-bad.mlir
func.func @main(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> attributes {loom.mesh = #loom.mesh<dp = 2>} {
  // expected-error @+1 {{phase 'sharded': the op has no loom.sharding}}
  %0 = loom.add %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// expected-error @+1 {{phase 'sharded': @main has no loom.mesh}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

//--- partitioned.mlir
// PARTITIONED: func.func @main
// PARTITIONED-SAME: loom.spmd
func.func @main(%x: tensor<1x4xf32> {loom.input = "x"}) -> (tensor<1x4xf32> {loom.output = "y"}) attributes {loom.mesh = #loom.mesh<dp = 2>, loom.spmd} {
  return %x : tensor<1x4xf32>
}

//--- partitioned-bad.mlir
// expected-error @+1 {{phase 'partitioned': @main is not loom.spmd}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> attributes {loom.mesh = #loom.mesh<dp = 2>} {
  return %x : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<1x4xf32>, %w: tensor<4xf32>) -> tensor<1x4xf32> attributes {loom.mesh = #loom.mesh<dp = 2>, loom.spmd} {
  // expected-error @+1 {{phase 'partitioned': the op still has loom.sharding}}
  %0 = loom.add %x, %w {loom.sharding = [["dp"], []]} : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

//--- pipelined.mlir
// PIPELINED: func.func @main_stage0() attributes {loom.pipeline = {axis = "pp", micro_batches = 2 : i64, schedule = #loom.schedule<"1f1b">, stage = 0 : i64, stages = 2 : i64}}
// PIPELINED: func.func @main_stage1() attributes {loom.pipeline = {axis = "pp", micro_batches = 2 : i64, schedule = #loom.schedule<"1f1b">, stage = 1 : i64, stages = 2 : i64}}
func.func @main_stage0() attributes {loom.pipeline = {axis = "pp", micro_batches = 2 : i64, schedule = #loom.schedule<"1f1b">, stage = 0 : i64, stages = 2 : i64}} {
  return
}
func.func @main_stage1() attributes {loom.pipeline = {axis = "pp", micro_batches = 2 : i64, schedule = #loom.schedule<"1f1b">, stage = 1 : i64, stages = 2 : i64}} {
  return
}

//--- pipelined-bad.mlir
// expected-error @+1 {{phase 'pipelined': 'loom.pipeline' says 2 stages but the module has 1 stage function}}
func.func @main_stage0() attributes {loom.pipeline = {micro_batches = 2 : i64, schedule = #loom.schedule<gpipe>, stage = 0 : i64, stages = 2 : i64}} {
  return
}

// -----

func.func @main_stage0() attributes {loom.pipeline = {micro_batches = 2 : i64, schedule = #loom.schedule<gpipe>, stage = 0 : i64, stages = 2 : i64}} {
  return
}
// expected-error @+1 {{phase 'pipelined': loom.pipeline 'schedule' differs from @main_stage0's}}
func.func @main_stage1() attributes {loom.pipeline = {micro_batches = 2 : i64, schedule = #loom.schedule<"1f1b">, stage = 1 : i64, stages = 2 : i64}} {
  return
}

// -----

func.func @main_stage0() attributes {loom.pipeline = {micro_batches = 2 : i64, schedule = #loom.schedule<gpipe>, stage = 0 : i64, stages = 2 : i64}} {
  return
}
// expected-error @+1 {{phase 'pipelined': stage 0 is out of range or taken}}
func.func @main_stage1() attributes {loom.pipeline = {micro_batches = 2 : i64, schedule = #loom.schedule<gpipe>, stage = 0 : i64, stages = 2 : i64}} {
  return
}

// -----

// expected-error @+1 {{phase 'pipelined': @main is left beside the stage functions}}
func.func @main() {
  return
}
func.func @main_stage0() attributes {loom.pipeline = {micro_batches = 1 : i64, schedule = #loom.schedule<gpipe>, stage = 0 : i64, stages = 1 : i64}} {
  return
}

// -----

// expected-error @+1 {{phase 'pipelined': no function has loom.pipeline}}
module {
  func.func @main() {
    return
  }
}

// -----

// A schedule spelt as a string: the dialect refuses it first.
// expected-error @+1 {{'loom.pipeline' needs 'schedule', a #loom.schedule (gpipe, 1f1b or interleaved)}}
func.func @main_stage0() attributes {loom.pipeline = {micro_batches = 1 : i64, schedule = "gpipe", stage = 0 : i64, stages = 1 : i64}} {
  return
}

