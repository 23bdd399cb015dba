// The first GPT block (blocks.0) imports as pre-LN attention + exact-GELU MLP: this exact straight-line op sequence with these shapes, the causal mask as a constant ~tril select, and the block's parameters bound to the right arguments.
// RUN: loom import %models/gpt.onnx --batch 2 --no-weights | FileCheck %s
// RUN: loom import %models/gpt.onnx --batch 2 --no-weights | loom-opt -cse | FileCheck %s --check-prefix=CONST

// The parameters of blocks.0 are arguments 3 to 18, in state_dict order.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[IDS:arg0]]: tensor<2x64xi64> {loom.input = "input_ids"},
// CHECK-SAME: %[[TOK:arg1]]: tensor<256x64xf32> {loom.param = "tok_emb.weight"},
// CHECK-SAME: %[[POS:arg2]]: tensor<64x64xf32> {loom.param = "pos_emb.weight"},
// CHECK-SAME: %[[LN1W:arg3]]: tensor<64xf32> {loom.param = "blocks.0.ln1.weight"},
// CHECK-SAME: %[[LN1B:arg4]]: tensor<64xf32> {loom.param = "blocks.0.ln1.bias"},
// CHECK-SAME: %[[QW:arg5]]: tensor<64x64xf32> {loom.param = "blocks.0.attn.q.weight"},
// CHECK-SAME: %[[QB:arg6]]: tensor<64xf32> {loom.param = "blocks.0.attn.q.bias"},
// CHECK-SAME: %[[KW:arg7]]: tensor<64x64xf32> {loom.param = "blocks.0.attn.k.weight"},
// CHECK-SAME: %[[KB:arg8]]: tensor<64xf32> {loom.param = "blocks.0.attn.k.bias"},
// CHECK-SAME: %[[VW:arg9]]: tensor<64x64xf32> {loom.param = "blocks.0.attn.v.weight"},
// CHECK-SAME: %[[VB:arg10]]: tensor<64xf32> {loom.param = "blocks.0.attn.v.bias"},
// CHECK-SAME: %[[OW:arg11]]: tensor<64x64xf32> {loom.param = "blocks.0.attn.proj.weight"},
// CHECK-SAME: %[[OB:arg12]]: tensor<64xf32> {loom.param = "blocks.0.attn.proj.bias"},
// CHECK-SAME: %[[LN2W:arg13]]: tensor<64xf32> {loom.param = "blocks.0.ln2.weight"},
// CHECK-SAME: %[[LN2B:arg14]]: tensor<64xf32> {loom.param = "blocks.0.ln2.bias"},
// CHECK-SAME: %[[FCW:arg15]]: tensor<256x64xf32> {loom.param = "blocks.0.mlp.fc.weight"},
// CHECK-SAME: %[[FCB:arg16]]: tensor<256xf32> {loom.param = "blocks.0.mlp.fc.bias"},
// CHECK-SAME: %[[PW:arg17]]: tensor<64x256xf32> {loom.param = "blocks.0.mlp.proj.weight"},
// CHECK-SAME: %[[PB:arg18]]: tensor<64xf32> {loom.param = "blocks.0.mlp.proj.bias"},
// CHECK-SAME: %[[NEXTW:arg19]]: tensor<64xf32> {loom.param = "blocks.1.ln1.weight"},
// CHECK-SAME: %[[NEXTB:arg20]]: tensor<64xf32> {loom.param = "blocks.1.ln1.bias"},
// CHECK-SAME: -> (tensor<2x64x256xf32> {loom.output = "logits"})

// Embedding: token gather plus the whole position table.
// CHECK:      %[[EMB:[0-9]+]] = loom.gather %[[TOK]], %[[IDS]] {axis = 0 : i64} : (tensor<256x64xf32>, tensor<2x64xi64>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[X0:[0-9]+]] = loom.add %[[EMB]], %[[POS]] : (tensor<2x64x64xf32>, tensor<64x64xf32>) -> tensor<2x64x64xf32>

// ln1
// CHECK-NEXT: %[[LN1:[0-9]+]] = loom.layer_norm %[[X0]], %[[LN1W]], %[[LN1B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x64x64xf32>
// q = Transpose(W) -> MatMul -> Add(bias), split into 4 heads of 16: [2, 4, 64, 16].
// CHECK-NEXT: %[[QWT:[0-9]+]] = loom.transpose %[[QW]] {permutation = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT: %[[QMM:[0-9]+]] = loom.matmul %[[LN1]], %[[QWT]] : (tensor<2x64x64xf32>, tensor<64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[Q:[0-9]+]] = loom.add %[[QB]], %[[QMM]] : (tensor<64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[QH:[0-9]+]] = loom.reshape %[[Q]] : tensor<2x64x64xf32> -> tensor<2x64x4x16xf32>
// CHECK-NEXT: %[[QT:[0-9]+]] = loom.transpose %[[QH]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x64x4x16xf32>) -> tensor<2x4x64x16xf32>
// k: its head transpose comes later, fused with k^T.
// CHECK-NEXT: %[[KWT:[0-9]+]] = loom.transpose %[[KW]] {permutation = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT: %[[KMM:[0-9]+]] = loom.matmul %[[LN1]], %[[KWT]] : (tensor<2x64x64xf32>, tensor<64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[K:[0-9]+]] = loom.add %[[KB]], %[[KMM]] : (tensor<64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[KH:[0-9]+]] = loom.reshape %[[K]] : tensor<2x64x64xf32> -> tensor<2x64x4x16xf32>
// v
// CHECK-NEXT: %[[VWT:[0-9]+]] = loom.transpose %[[VW]] {permutation = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT: %[[VMM:[0-9]+]] = loom.matmul %[[LN1]], %[[VWT]] : (tensor<2x64x64xf32>, tensor<64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[V:[0-9]+]] = loom.add %[[VB]], %[[VMM]] : (tensor<64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[VH:[0-9]+]] = loom.reshape %[[V]] : tensor<2x64x64xf32> -> tensor<2x64x4x16xf32>
// CHECK-NEXT: %[[VT:[0-9]+]] = loom.transpose %[[VH]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x64x4x16xf32>) -> tensor<2x4x64x16xf32>
// scores = q @ k^T * 0.25, masked, softmax over the keys.
// CHECK-NEXT: %[[KT:[0-9]+]] = loom.transpose %[[KH]] {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x64x4x16xf32>) -> tensor<2x4x16x64xf32>
// CHECK-NEXT: %[[S:[0-9]+]] = loom.matmul %[[QT]], %[[KT]] : (tensor<2x4x64x16xf32>, tensor<2x4x16x64xf32>) -> tensor<2x4x64x64xf32>
// CHECK-NEXT: %[[SS:[0-9]+]] = loom.mul %[[S]], %{{[0-9]+}} : (tensor<2x4x64x64xf32>, tensor<f32>) -> tensor<2x4x64x64xf32>
// CHECK-NEXT: %[[SM:[0-9]+]] = loom.select %{{[0-9]+}}, %{{[0-9]+}}, %[[SS]] : (tensor<1x1x64x64xi1>, tensor<f32>, tensor<2x4x64x64xf32>) -> tensor<2x4x64x64xf32>
// CHECK-NEXT: %[[P:[0-9]+]] = loom.softmax %[[SM]] {axis = 3 : i64} : (tensor<2x4x64x64xf32>) -> tensor<2x4x64x64xf32>
// context, heads merged back to [2, 64, 64], output projection, residual.
// CHECK-NEXT: %[[CTX:[0-9]+]] = loom.matmul %[[P]], %[[VT]] : (tensor<2x4x64x64xf32>, tensor<2x4x64x16xf32>) -> tensor<2x4x64x16xf32>
// CHECK-NEXT: %[[CT:[0-9]+]] = loom.transpose %[[CTX]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x64x16xf32>) -> tensor<2x64x4x16xf32>
// CHECK-NEXT: %[[MERGED:[0-9]+]] = loom.reshape %[[CT]] : tensor<2x64x4x16xf32> -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[OWT:[0-9]+]] = loom.transpose %[[OW]] {permutation = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT: %[[OMM:[0-9]+]] = loom.matmul %[[MERGED]], %[[OWT]] : (tensor<2x64x64xf32>, tensor<64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[ATTN:[0-9]+]] = loom.add %[[OB]], %[[OMM]] : (tensor<64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[X1:[0-9]+]] = loom.add %[[X0]], %[[ATTN]] : (tensor<2x64x64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>

// ln2, then the MLP: fc 64 -> 256, GELU as x * (erf(x / sqrt 2) + 1) * 0.5, proj 256 -> 64, residual.
// CHECK-NEXT: %[[LN2:[0-9]+]] = loom.layer_norm %[[X1]], %[[LN2W]], %[[LN2B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[FCWT:[0-9]+]] = loom.transpose %[[FCW]] {permutation = array<i64: 1, 0>} : (tensor<256x64xf32>) -> tensor<64x256xf32>
// CHECK-NEXT: %[[FCMM:[0-9]+]] = loom.matmul %[[LN2]], %[[FCWT]] : (tensor<2x64x64xf32>, tensor<64x256xf32>) -> tensor<2x64x256xf32>
// CHECK-NEXT: %[[H:[0-9]+]] = loom.add %[[FCB]], %[[FCMM]] : (tensor<256xf32>, tensor<2x64x256xf32>) -> tensor<2x64x256xf32>
// CHECK-NEXT: %[[HD:[0-9]+]] = loom.div %[[H]], %{{[0-9]+}} : (tensor<2x64x256xf32>, tensor<f32>) -> tensor<2x64x256xf32>
// CHECK-NEXT: %[[ERF:[0-9]+]] = loom.erf %[[HD]] : (tensor<2x64x256xf32>) -> tensor<2x64x256xf32>
// CHECK-NEXT: %[[ERF1:[0-9]+]] = loom.add %[[ERF]], %{{[0-9]+}} : (tensor<2x64x256xf32>, tensor<f32>) -> tensor<2x64x256xf32>
// CHECK-NEXT: %[[HE:[0-9]+]] = loom.mul %[[H]], %[[ERF1]] : (tensor<2x64x256xf32>, tensor<2x64x256xf32>) -> tensor<2x64x256xf32>
// CHECK-NEXT: %[[GELU:[0-9]+]] = loom.mul %[[HE]], %{{[0-9]+}} : (tensor<2x64x256xf32>, tensor<f32>) -> tensor<2x64x256xf32>
// CHECK-NEXT: %[[PWT:[0-9]+]] = loom.transpose %[[PW]] {permutation = array<i64: 1, 0>} : (tensor<64x256xf32>) -> tensor<256x64xf32>
// CHECK-NEXT: %[[PMM:[0-9]+]] = loom.matmul %[[GELU]], %[[PWT]] : (tensor<2x64x256xf32>, tensor<256x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[MLP:[0-9]+]] = loom.add %[[PB]], %[[PMM]] : (tensor<64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
// CHECK-NEXT: %[[X2:[0-9]+]] = loom.add %[[X1]], %[[MLP]] : (tensor<2x64x64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
// blocks.1 starts on the block's output.
// CHECK-NEXT: loom.layer_norm %[[X2]], %[[NEXTW]], %[[NEXTB]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}

// The constants block 0 uses, checked after CSE has merged the copies that
// each block's own ONNX Constant nodes give. The mask is ~tril(ones(64, 64)), bit-packed: row r has bits r+1..63
// set (0xFE FF.. for row 0, all zero for row 63), so select puts -inf above
// the diagonal.
// CONST-DAG: %[[HALF:[0-9]+]] = loom.constant dense<5.000000e-01> : tensor<f32>
// CONST-DAG: %[[ONE:[0-9]+]] = loom.constant dense<1.000000e+00> : tensor<f32>
// CONST-DAG: %[[SQRT2:[0-9]+]] = loom.constant dense<1.41421354> : tensor<f32>
// CONST-DAG: %[[MASK:[0-9]+]] = loom.constant dense<"0xFEFFFFFFFFFFFFFFFCFFFFFFFFFFFFFFF8FFFFFFFFFFFFFFF0FFFFFFFFFFFFFFE0FFFFFFFFFFFFFFC0FFFFFFFFFFFFFF80FFFFFFFFFFFFFF00FFFFFFFFFFFFFF00FEFFFFFFFFFFFF00FCFFFFFFFFFFFF00F8FFFFFFFFFFFF00F0FFFFFFFFFFFF00E0FFFFFFFFFFFF00C0FFFFFFFFFFFF0080FFFFFFFFFFFF0000FFFFFFFFFFFF0000FEFFFFFFFFFF0000FCFFFFFFFFFF0000F8FFFFFFFFFF0000F0FFFFFFFFFF0000E0FFFFFFFFFF0000C0FFFFFFFFFF000080FFFFFFFFFF000000FFFFFFFFFF000000FEFFFFFFFF000000FCFFFFFFFF000000F8FFFFFFFF000000F0FFFFFFFF000000E0FFFFFFFF000000C0FFFFFFFF00000080FFFFFFFF00000000FFFFFFFF00000000FEFFFFFF00000000FCFFFFFF00000000F8FFFFFF00000000F0FFFFFF00000000E0FFFFFF00000000C0FFFFFF0000000080FFFFFF0000000000FFFFFF0000000000FEFFFF0000000000FCFFFF0000000000F8FFFF0000000000F0FFFF0000000000E0FFFF0000000000C0FFFF000000000080FFFF000000000000FFFF000000000000FEFF000000000000FCFF000000000000F8FF000000000000F0FF000000000000E0FF000000000000C0FF00000000000080FF00000000000000FF00000000000000FE00000000000000FC00000000000000F800000000000000F000000000000000E000000000000000C000000000000000800000000000000000"> : tensor<1x1x64x64xi1>
// CONST-DAG: %[[NEGINF:[0-9]+]] = loom.constant dense<0xFF800000> : tensor<f32>
// CONST-DAG: %[[SCALE:[0-9]+]] = loom.constant dense<2.500000e-01> : tensor<f32>
// CONST:     loom.gather
// CONST:     %[[S:[0-9]+]] = loom.matmul %{{[0-9]+}}, %{{[0-9]+}} : (tensor<2x4x64x16xf32>, tensor<2x4x16x64xf32>) -> tensor<2x4x64x64xf32>
// CONST-NEXT: %[[SS:[0-9]+]] = loom.mul %[[S]], %[[SCALE]] :
// CONST-NEXT: loom.select %[[MASK]], %[[NEGINF]], %[[SS]] :
// CONST:     %[[H:[0-9]+]] = loom.add %{{.+}} -> tensor<2x64x256xf32>
// CONST-NEXT: %[[HD:[0-9]+]] = loom.div %[[H]], %[[SQRT2]] :
// CONST-NEXT: %[[ERF:[0-9]+]] = loom.erf %[[HD]] :
// CONST-NEXT: %[[ERF1:[0-9]+]] = loom.add %[[ERF]], %[[ONE]] :
// CONST-NEXT: %[[HE:[0-9]+]] = loom.mul %[[H]], %[[ERF1]] :
// CONST-NEXT: loom.mul %[[HE]], %[[HALF]] :
// CONST-NOT: loom.constant
