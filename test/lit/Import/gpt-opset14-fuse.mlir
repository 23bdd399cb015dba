// The opset-14 GPT's decomposed LayerNorms (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) import as 10 reduce_means, and `loom import --fuse` turns them into exactly 5 loom.layer_norm ops, giving the same graph as the opset-17 import.

// Without --fuse: two reduce_means per LayerNorm (mean and variance), no layer_norm.
// RUN: loom import %models/gpt_opset14.onnx --batch 2 --no-weights | FileCheck %s --check-prefix=RAW --implicit-check-not=loom.layer_norm
// RUN: loom import %models/gpt_opset14.onnx --batch 2 --no-weights | grep -c "loom.pow" | FileCheck %s --check-prefix=FIVE
// RUN: loom import %models/gpt_opset14.onnx --batch 2 --no-weights | grep -c "loom.sqrt" | FileCheck %s --check-prefix=FIVE
// RAW-COUNT-10: loom.reduce_mean %{{[0-9]+}} {axes = array<i64: 2>, keep_dims} : (tensor<2x64x64xf32>) -> tensor<2x64x1xf32>
// RAW-NOT:      loom.reduce_mean
// FIVE:         {{^5$}}

// With --fuse: ln1 and ln2 of both blocks and ln_f, with their own parameters,
// and nothing left of the decomposition.
// RUN: loom import %models/gpt_opset14.onnx --batch 2 --no-weights --fuse \
// RUN:   | FileCheck %s --check-prefix=FUSED --implicit-check-not=loom.reduce_mean \
// RUN:       --implicit-check-not=loom.pow --implicit-check-not=loom.sqrt --implicit-check-not=loom.sub
// FUSED-LABEL: func.func @main(
// FUSED-SAME:  %[[B0LN1W:arg3]]: tensor<64xf32> {loom.param = "blocks.0.ln1.weight"}, %[[B0LN1B:arg4]]: tensor<64xf32> {loom.param = "blocks.0.ln1.bias"}
// FUSED-SAME:  %[[B0LN2W:arg13]]: tensor<64xf32> {loom.param = "blocks.0.ln2.weight"}, %[[B0LN2B:arg14]]: tensor<64xf32> {loom.param = "blocks.0.ln2.bias"}
// FUSED-SAME:  %[[B1LN1W:arg19]]: tensor<64xf32> {loom.param = "blocks.1.ln1.weight"}, %[[B1LN1B:arg20]]: tensor<64xf32> {loom.param = "blocks.1.ln1.bias"}
// FUSED-SAME:  %[[B1LN2W:arg29]]: tensor<64xf32> {loom.param = "blocks.1.ln2.weight"}, %[[B1LN2B:arg30]]: tensor<64xf32> {loom.param = "blocks.1.ln2.bias"}
// FUSED-SAME:  %[[LNFW:arg35]]: tensor<64xf32> {loom.param = "ln_f.weight"}, %[[LNFB:arg36]]: tensor<64xf32> {loom.param = "ln_f.bias"}
// FUSED:       loom.layer_norm %{{[0-9]+}}, %[[B0LN1W]], %[[B0LN1B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x64x64xf32>
// FUSED:       loom.layer_norm %{{[0-9]+}}, %[[B0LN2W]], %[[B0LN2B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x64x64xf32>
// FUSED:       loom.layer_norm %{{[0-9]+}}, %[[B1LN1W]], %[[B1LN1B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x64x64xf32>
// FUSED:       loom.layer_norm %{{[0-9]+}}, %[[B1LN2W]], %[[B1LN2B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x64x64xf32>
// FUSED:       loom.layer_norm %{{[0-9]+}}, %[[LNFW]], %[[LNFB]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x64x64xf32>
// FUSED-NOT:   loom.layer_norm

// The fused module verifies, and once CSE has merged duplicate constants it is
// op for op the import of the opset-17 model, whose LayerNormalization nodes
// map to loom.layer_norm directly (only the module attributes differ).
// RUN: loom import %models/gpt_opset14.onnx --batch 2 --no-weights --fuse | loom-opt -cse | grep -v "^module attributes" > %t.fused
// RUN: loom import %models/gpt.onnx --batch 2 --no-weights | loom-opt -cse | grep -v "^module attributes" > %t.opset17
// RUN: diff %t.fused %t.opset17
