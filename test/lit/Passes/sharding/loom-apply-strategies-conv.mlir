// loom-apply-strategies on the convolutions: conv_transpose2d splits its batch
// and its output channels (weight dimension 1, with the bias) freely, and its
// input channels (weight dimension 0) as a partial sum; with a bias the input
// channels stay whole, as conv2d's do (the sum must be complete before the
// bias is added, else every rank adds it).
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"strategies": [{"node": "up", "strategy": [["tp", 1, 1, 1], [1, 1, 1, 1], [1]]}, {"node": "up_nobias", "strategy": [[1, "tp", 1, 1], ["tp", 1, 1, 1]]}, {"node": "down_nobias", "strategy": [[1, "tp", 1, 1], [1, "tp", 1, 1]]}]}' > %t/ok.json
// RUN: loom-opt %s --loom-apply-strategies="file=%t/ok.json" | FileCheck %s
// RUN: echo '{"strategies": [{"node": "up", "strategy": [[1, 1, 1, 1], [1, "tp", 1, 1], ["tp"]]}]}' > %t/out.json
// RUN: loom-opt %s --loom-apply-strategies="file=%t/out.json" | FileCheck %s --check-prefix=OUT
// RUN: echo '{"strategies": [{"node": "up", "strategy": [[1, "tp", 1, 1], ["tp", 1, 1, 1], [1]]}]}' > %t/bias.json
// RUN: not loom-opt %s --loom-apply-strategies="file=%t/bias.json" 2>&1 | FileCheck %s --check-prefix=BIAS
// RUN: echo '{"strategies": [{"node": "down", "strategy": [[1, "tp", 1, 1], [1, "tp", 1, 1], [1]]}]}' > %t/cbias.json
// RUN: not loom-opt %s --loom-apply-strategies="file=%t/cbias.json" 2>&1 | FileCheck %s --check-prefix=CBIAS

func.func @main(%x: tensor<2x4x5x5xf32> {loom.input = "x"},
                %w: tensor<4x6x3x3xf32> {loom.param = "w"},
                %b: tensor<6xf32> {loom.param = "b"},
                %wc: tensor<6x4x3x3xf32> {loom.param = "wc"},
                %bc: tensor<6xf32> {loom.param = "bc"})
    -> (tensor<2x6x7x7xf32>, tensor<2x6x7x7xf32>, tensor<2x6x3x3xf32>, tensor<2x6x3x3xf32>)
    attributes {loom.mesh = #loom.mesh<tp = 2>} {
  %0 = loom.conv_transpose2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>} : (tensor<2x4x5x5xf32>, tensor<4x6x3x3xf32>, tensor<6xf32>) -> tensor<2x6x7x7xf32> loc("up")
  %1 = loom.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>} : (tensor<2x4x5x5xf32>, tensor<4x6x3x3xf32>) -> tensor<2x6x7x7xf32> loc("up_nobias")
  %2 = loom.conv2d %x, %wc, %bc {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x5x5xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<2x6x3x3xf32> loc("down")
  %3 = loom.conv2d %x, %wc {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x3x3xf32> loc("down_nobias")
  return %0, %1, %2, %3 : tensor<2x6x7x7xf32>, tensor<2x6x7x7xf32>, tensor<2x6x3x3xf32>, tensor<2x6x3x3xf32>
}

// CHECK: loom.conv_transpose2d %arg0, %arg1, %arg2 {{.*}}loom.sharding = {{\[\["tp"\], \[\], \[\]\]}}
// CHECK: loom.conv_transpose2d %arg0, %arg1 {{.*}}loom.sharding = {{\[\[\], \[\], \["tp"\]\]}}
// CHECK: loom.conv2d %arg0, %arg3 {{.*}}loom.sharding = {{\[\[\], \["tp"\], \[\]\]}}
// OUT: loom.conv_transpose2d %arg0, %arg1, %arg2 {{.*}}loom.sharding = {{\[\[\], \["tp"\], \[\]\]}}
// BIAS: error: {{.*}}bias.json: strategy entry 1 (node 'up', op 'loom.conv_transpose2d', strategy {{\[\[1, tp, 1, 1\], \[tp, 1, 1, 1\], \[1\]\]}}): operand 0 dimension 1 cannot be split: the op needs it whole
// CBIAS: error: {{.*}}cbias.json: strategy entry 1 (node 'down', op 'loom.conv2d', strategy {{\[\[1, tp, 1, 1\], \[1, tp, 1, 1\], \[1\]\]}}): operand 0 dimension 1 cannot be split: the op needs it whole
