// Collectives check their axes against the function's mesh and their
// shapes against the group size; sharding annotations are checked too.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{must be inside a function with a `loom.mesh`}}
  %a = loom.all_reduce %x {axes = array<i64: 0>} : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @bad_axis(%x: tensor<4xf32>) -> tensor<8xf32>
    attributes {loom.mesh = #loom.mesh<dp = 2>} {
  // expected-error @+1 {{mesh axis 1 is out of range}}
  %a = loom.all_gather %x {axis = 1 : i64, dim = 0 : i64} : tensor<4xf32> -> tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

func.func @bad_gather(%x: tensor<4x3xf32>) -> tensor<4x3xf32>
    attributes {loom.mesh = #loom.mesh<dp = 2>} {
  // expected-error @+1 {{result dimension 0 is 4, expected 8}}
  %a = loom.all_gather %x {axis = 0 : i64, dim = 0 : i64} : tensor<4x3xf32> -> tensor<4x3xf32>
  return %a : tensor<4x3xf32>
}

// -----

func.func @uneven_scatter(%x: tensor<3xf32>) -> tensor<1xf32>
    attributes {loom.mesh = #loom.mesh<dp = 2>} {
  // expected-error @+1 {{dimension 0 of size 3 does not divide by 2}}
  %a = loom.reduce_scatter %x {axis = 0 : i64, dim = 0 : i64} : tensor<3xf32> -> tensor<1xf32>
  return %a : tensor<1xf32>
}

// -----

func.func @same_dims(%x: tensor<4x4xf32>) -> tensor<4x4xf32>
    attributes {loom.mesh = #loom.mesh<dp = 2>} {
  // expected-error @+1 {{dim and to_dim must differ}}
  %a = loom.all_to_all %x {axis = 0 : i64, dim = 0 : i64, to_dim = 0 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}

// -----

func.func @reduce_order(%x: tensor<4xf32>) -> tensor<4xf32>
    attributes {loom.mesh = #loom.mesh<dp = 2, tp = 2>} {
  // expected-error @+1 {{axes must be strictly increasing}}
  %a = loom.all_reduce %x {axes = array<i64: 1, 0>} : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @label_count_rank(%l: tensor<2x2xi64>) -> tensor<f32> {
  // expected-error @+1 {{labels must be [N]}}
  %n = loom.label_count %l {ignore_index = -100 : i64} : (tensor<2x2xi64>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

func.func @sharding_count(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'loom.sharding' has 2 entries; the op's sharding rule has 3 factors}}
  %a = loom.matmul %x, %y {loom.sharding = [[], []]} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}

// -----

// A schedule spelt as a string (the annotation before it was typed).
// expected-error @+1 {{'loom.pipeline' needs 'schedule', a #loom.schedule (gpipe, 1f1b or interleaved)}}
func.func @pipeline_schedule() attributes {loom.pipeline = {stage = 0 : i64, stages = 2 : i64, micro_batches = 2 : i64, schedule = "1f1b"}} {
  return
}

// -----

// expected-error @+1 {{expected a pipeline schedule (gpipe, 1f1b or interleaved), got 'zigzag'}}
func.func @pipeline_schedule_spelling() attributes {loom.pipeline = {stage = 0 : i64, stages = 2 : i64, micro_batches = 2 : i64, schedule = #loom.schedule<zigzag>}} {
  return
}

// -----

// expected-error @+1 {{'loom.pipeline' needs 'micro_batches', a non-negative integer}}
func.func @pipeline_micro_batches() attributes {loom.pipeline = {stage = 0 : i64, stages = 2 : i64, micro_batch = 2 : i64, schedule = #loom.schedule<gpipe>}} {
  return
}

// -----

// expected-error @+1 {{'loom.pipeline': unknown or ill-typed entry 'virtual_stage'}}
func.func @pipeline_unknown_key() attributes {loom.pipeline = {stage = 0 : i64, stages = 2 : i64, micro_batches = 2 : i64, schedule = #loom.schedule<interleaved>, virtual_stage = 2 : i64}} {
  return
}

// -----

// expected-error @+1 {{'loom.pipeline': unknown or ill-typed entry 'virtual_stages'}}
func.func @pipeline_virtual_stages() attributes {loom.pipeline = {stage = 0 : i64, stages = 2 : i64, micro_batches = 2 : i64, schedule = #loom.schedule<interleaved>, virtual_stages = 0 : i64}} {
  return
}

// -----

func.func @pipeline_interleaved() attributes {loom.pipeline = {axis = "pp", stage = 1 : i64, stages = 2 : i64, micro_batches = 4 : i64, schedule = #loom.schedule<interleaved>, virtual_stages = 2 : i64}} {
  return
}

// -----

// expected-error @+1 {{'loom.pipeline': unknown or ill-typed entry 'own_mesh'}}
func.func @pipeline_own_mesh() attributes {loom.pipeline = {stage = 0 : i64, stages = 2 : i64, micro_batches = 1 : i64, schedule = #loom.schedule<"1f1b">, own_mesh = 1 : i64}} {
  return
}

// -----

func.func @layouts_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.layouts' must be an array of #loom.layout, one per result of the op}}
  %a = loom.relu %x {loom.layouts = []} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @layouts_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.layouts': a layout's rank differs from its result's}}
  %a = loom.relu %x {loom.layouts = [#loom.layout<#loom.mesh<tp = 2>, [[], []]>]} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @layouts_ok(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = loom.relu %x {loom.layouts = [#loom.layout<#loom.mesh<tp = 2>, [[tp]], partial = []>]} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
