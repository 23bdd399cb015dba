// Importing the small ResNet gives exactly this op sequence with these shapes (stem, identity block, strided block with projection skip, global average pool, flatten, Gemm head), with BatchNorm running statistics as `loom.buffer` arguments (and weights' `loom.init` when weights are kept).
// RUN: loom import %models/cnn.onnx --batch 2 --no-weights | FileCheck %s --implicit-check-not=loom.init
// RUN: loom import %models/cnn.onnx --batch 2 --no-weights | loom-opt | FileCheck %s --implicit-check-not=loom.init
// RUN: loom import %models/cnn.onnx --batch 2 | FileCheck %s --check-prefix=WEIGHTS

// Every BatchNorm has weight and bias as loom.param and running mean and
// variance as loom.buffer, in state_dict order.
// CHECK-LABEL: module attributes {loom.opset = 13 : i64, loom.source = "{{.*}}/models/cnn.onnx"} {
// CHECK-NEXT: func.func @main(
// CHECK-SAME: %[[X:arg0]]: tensor<2x3x32x32xf32> {loom.input = "x"},
// CHECK-SAME: %[[STEM_W:arg1]]: tensor<16x3x3x3xf32> {loom.param = "conv1.weight"},
// CHECK-SAME: %[[BN1_W:arg2]]: tensor<16xf32> {loom.param = "bn1.weight"},
// CHECK-SAME: %[[BN1_B:arg3]]: tensor<16xf32> {loom.param = "bn1.bias"},
// CHECK-SAME: %[[BN1_M:arg4]]: tensor<16xf32> {loom.buffer = "bn1.running_mean"},
// CHECK-SAME: %[[BN1_V:arg5]]: tensor<16xf32> {loom.buffer = "bn1.running_var"},
// CHECK-SAME: %[[L1C1_W:arg6]]: tensor<16x16x3x3xf32> {loom.param = "layer1.conv1.weight"},
// CHECK-SAME: %[[L1B1_W:arg7]]: tensor<16xf32> {loom.param = "layer1.bn1.weight"},
// CHECK-SAME: %[[L1B1_B:arg8]]: tensor<16xf32> {loom.param = "layer1.bn1.bias"},
// CHECK-SAME: %[[L1B1_M:arg9]]: tensor<16xf32> {loom.buffer = "layer1.bn1.running_mean"},
// CHECK-SAME: %[[L1B1_V:arg10]]: tensor<16xf32> {loom.buffer = "layer1.bn1.running_var"},
// CHECK-SAME: %[[L1C2_W:arg11]]: tensor<16x16x3x3xf32> {loom.param = "layer1.conv2.weight"},
// CHECK-SAME: %[[L1B2_W:arg12]]: tensor<16xf32> {loom.param = "layer1.bn2.weight"},
// CHECK-SAME: %[[L1B2_B:arg13]]: tensor<16xf32> {loom.param = "layer1.bn2.bias"},
// CHECK-SAME: %[[L1B2_M:arg14]]: tensor<16xf32> {loom.buffer = "layer1.bn2.running_mean"},
// CHECK-SAME: %[[L1B2_V:arg15]]: tensor<16xf32> {loom.buffer = "layer1.bn2.running_var"},
// CHECK-SAME: %[[L2C1_W:arg16]]: tensor<32x16x3x3xf32> {loom.param = "layer2.conv1.weight"},
// CHECK-SAME: %[[L2B1_W:arg17]]: tensor<32xf32> {loom.param = "layer2.bn1.weight"},
// CHECK-SAME: %[[L2B1_B:arg18]]: tensor<32xf32> {loom.param = "layer2.bn1.bias"},
// CHECK-SAME: %[[L2B1_M:arg19]]: tensor<32xf32> {loom.buffer = "layer2.bn1.running_mean"},
// CHECK-SAME: %[[L2B1_V:arg20]]: tensor<32xf32> {loom.buffer = "layer2.bn1.running_var"},
// CHECK-SAME: %[[L2C2_W:arg21]]: tensor<32x32x3x3xf32> {loom.param = "layer2.conv2.weight"},
// CHECK-SAME: %[[L2B2_W:arg22]]: tensor<32xf32> {loom.param = "layer2.bn2.weight"},
// CHECK-SAME: %[[L2B2_B:arg23]]: tensor<32xf32> {loom.param = "layer2.bn2.bias"},
// CHECK-SAME: %[[L2B2_M:arg24]]: tensor<32xf32> {loom.buffer = "layer2.bn2.running_mean"},
// CHECK-SAME: %[[L2B2_V:arg25]]: tensor<32xf32> {loom.buffer = "layer2.bn2.running_var"},
// CHECK-SAME: %[[PROJ_W:arg26]]: tensor<32x16x1x1xf32> {loom.param = "layer2.proj_conv.weight"},
// CHECK-SAME: %[[PBN_W:arg27]]: tensor<32xf32> {loom.param = "layer2.proj_bn.weight"},
// CHECK-SAME: %[[PBN_B:arg28]]: tensor<32xf32> {loom.param = "layer2.proj_bn.bias"},
// CHECK-SAME: %[[PBN_M:arg29]]: tensor<32xf32> {loom.buffer = "layer2.proj_bn.running_mean"},
// CHECK-SAME: %[[PBN_V:arg30]]: tensor<32xf32> {loom.buffer = "layer2.proj_bn.running_var"},
// CHECK-SAME: %[[FC_W:arg31]]: tensor<10x32xf32> {loom.param = "fc.weight"},
// CHECK-SAME: %[[FC_B:arg32]]: tensor<10xf32> {loom.param = "fc.bias"})
// CHECK-SAME: -> (tensor<2x10xf32> {loom.output = "logits"}) {{{$}}

// Stem: conv 3x3 pad 1 (no bias), bn, relu, max pool 3x3 stride 2 pad 1: 32x32 -> 16x16.
// CHECK-NEXT: %[[C0:[0-9]+]] = loom.conv2d %[[X]], %[[STEM_W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x32x32xf32>
// CHECK-NEXT: %[[N0:[0-9]+]] = loom.batch_norm %[[C0]], %[[BN1_W]], %[[BN1_B]], %[[BN1_M]], %[[BN1_V]] {epsilon = 9.99999974E-6 : f32} : (tensor<2x16x32x32xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x32x32xf32>
// CHECK-NEXT: %[[R0:[0-9]+]] = loom.relu %[[N0]] : (tensor<2x16x32x32xf32>) -> tensor<2x16x32x32xf32>
// CHECK-NEXT: %[[POOL:[0-9]+]] = loom.max_pool2d %[[R0]] {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x16x32x32xf32>) -> tensor<2x16x16x16xf32>

// layer1: conv-bn-relu-conv-bn, identity skip from the pool, relu.
// CHECK-NEXT: %[[C1:[0-9]+]] = loom.conv2d %[[POOL]], %[[L1C1_W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x16x16x16xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x16x16xf32>
// CHECK-NEXT: %[[N1:[0-9]+]] = loom.batch_norm %[[C1]], %[[L1B1_W]], %[[L1B1_B]], %[[L1B1_M]], %[[L1B1_V]] {epsilon = 9.99999974E-6 : f32} : (tensor<2x16x16x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x16x16xf32>
// CHECK-NEXT: %[[R1:[0-9]+]] = loom.relu %[[N1]] : (tensor<2x16x16x16xf32>) -> tensor<2x16x16x16xf32>
// CHECK-NEXT: %[[C2:[0-9]+]] = loom.conv2d %[[R1]], %[[L1C2_W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x16x16x16xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x16x16xf32>
// CHECK-NEXT: %[[N2:[0-9]+]] = loom.batch_norm %[[C2]], %[[L1B2_W]], %[[L1B2_B]], %[[L1B2_M]], %[[L1B2_V]] {epsilon = 9.99999974E-6 : f32} : (tensor<2x16x16x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x16x16xf32>
// CHECK-NEXT: %[[S1:[0-9]+]] = loom.add %[[N2]], %[[POOL]] : (tensor<2x16x16x16xf32>, tensor<2x16x16x16xf32>) -> tensor<2x16x16x16xf32>
// CHECK-NEXT: %[[L1:[0-9]+]] = loom.relu %[[S1]] : (tensor<2x16x16x16xf32>) -> tensor<2x16x16x16xf32>

// layer2: stride-2 main path 16 -> 32 channels, 16x16 -> 8x8 ...
// CHECK-NEXT: %[[C3:[0-9]+]] = loom.conv2d %[[L1]], %[[L2C1_W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x16x16x16xf32>, tensor<32x16x3x3xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT: %[[N3:[0-9]+]] = loom.batch_norm %[[C3]], %[[L2B1_W]], %[[L2B1_B]], %[[L2B1_M]], %[[L2B1_V]] {epsilon = 9.99999974E-6 : f32} : (tensor<2x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT: %[[R3:[0-9]+]] = loom.relu %[[N3]] : (tensor<2x32x8x8xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT: %[[C4:[0-9]+]] = loom.conv2d %[[R3]], %[[L2C2_W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x32x8x8xf32>, tensor<32x32x3x3xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT: %[[N4:[0-9]+]] = loom.batch_norm %[[C4]], %[[L2B2_W]], %[[L2B2_B]], %[[L2B2_M]], %[[L2B2_V]] {epsilon = 9.99999974E-6 : f32} : (tensor<2x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x32x8x8xf32>
// ... and the skip through a 1x1 stride-2 projection conv and its bn.
// CHECK-NEXT: %[[C5:[0-9]+]] = loom.conv2d %[[L1]], %[[PROJ_W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x16x16x16xf32>, tensor<32x16x1x1xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT: %[[N5:[0-9]+]] = loom.batch_norm %[[C5]], %[[PBN_W]], %[[PBN_B]], %[[PBN_M]], %[[PBN_V]] {epsilon = 9.99999974E-6 : f32} : (tensor<2x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT: %[[S2:[0-9]+]] = loom.add %[[N4]], %[[N5]] : (tensor<2x32x8x8xf32>, tensor<2x32x8x8xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT: %[[L2:[0-9]+]] = loom.relu %[[S2]] : (tensor<2x32x8x8xf32>) -> tensor<2x32x8x8xf32>

// Head: GlobalAveragePool is a keep-dims mean over H and W, Flatten a
// reshape, Gemm(transB=1) a matmul against [out, in] plus the bias.
// CHECK-NEXT: %[[GAP:[0-9]+]] = loom.reduce_mean %[[L2]] {axes = array<i64: 2, 3>, keep_dims} : (tensor<2x32x8x8xf32>) -> tensor<2x32x1x1xf32>
// CHECK-NEXT: %[[FLAT:[0-9]+]] = loom.reshape %[[GAP]] : tensor<2x32x1x1xf32> -> tensor<2x32xf32>
// CHECK-NEXT: %[[MM:[0-9]+]] = loom.matmul %[[FLAT]], %[[FC_W]] {transpose_rhs} : (tensor<2x32xf32>, tensor<10x32xf32>) -> tensor<2x10xf32>
// CHECK-NEXT: %[[OUT:[0-9]+]] = loom.add %[[MM]], %[[FC_B]] : (tensor<2x10xf32>, tensor<10xf32>) -> tensor<2x10xf32>
// CHECK-NEXT: return %[[OUT]] : tensor<2x10xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NOT: {{.}}

// With weights, buffers carry their initial values like parameters do.
// WEIGHTS-LABEL: func.func @main(
// WEIGHTS-SAME: %arg4: tensor<16xf32> {loom.buffer = "bn1.running_mean", loom.init = dense_resource<param_bn1_running_mean> : tensor<16xf32>},
// WEIGHTS-SAME: %arg5: tensor<16xf32> {loom.buffer = "bn1.running_var", loom.init = dense_resource<param_bn1_running_var> : tensor<16xf32>},
// WEIGHTS-SAME: %arg30: tensor<32xf32> {loom.buffer = "layer2.proj_bn.running_var", loom.init = dense_resource<param_layer2_proj_bn_running_var> : tensor<32xf32>},
// WEIGHTS:      dialect_resources
// WEIGHTS:      param_bn1_running_mean: "0x
// WEIGHTS:      param_layer2_proj_bn_running_var: "0x
