// Proves loom-mixed-precision computes in bf16/f16 over f32 arguments (one
// cast per argument, constants converted, f32 results cast back), and that
// with loom-build-training-graph after it the loss, each parameter's
// gradient and its update stay f32, with a static loss scale applied to the
// backward's seed and undone before the update.
// RUN: loom-opt %s -split-input-file -loom-mixed-precision="precision=bf16" \
// RUN:   | FileCheck %s --check-prefix=BF16
// RUN: loom-opt %s -split-input-file -loom-mixed-precision="precision=f16" \
// RUN:   -loom-build-training-graph="optimizer=sgd loss-scale=1024" \
// RUN:   | FileCheck %s --check-prefix=SCALED
// RUN: not loom-opt %s -split-input-file -loom-mixed-precision="precision=f8" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD
// RUN: not loom-opt %s -split-input-file \
// RUN:   -loom-build-training-graph="optimizer=sgd loss-scale=1e6" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OVERFLOW

// BF16-LABEL: func.func @main
// BF16-SAME: %[[X:.*]]: tensor<4x8xf32> {loom.input = "x"}
// BF16-SAME: %[[W:.*]]: tensor<3x8xf32> {loom.param = "w"}
// BF16-SAME: -> tensor<4x3xf32>
// BF16: %[[XL:.*]] = loom.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// BF16: %[[WL:.*]] = loom.cast %[[W]] : tensor<3x8xf32> -> tensor<3x8xbf16>
// BF16: %[[Y:.*]] = loom.matmul %[[XL]], %[[WL]] {transpose_rhs} : (tensor<4x8xbf16>, tensor<3x8xbf16>) -> tensor<4x3xbf16>
// BF16: %[[HALF:.*]] = loom.constant dense<5.000000e-01> : tensor<bf16>
// BF16: %[[Z:.*]] = loom.mul %[[Y]], %[[HALF]] : (tensor<4x3xbf16>, tensor<bf16>) -> tensor<4x3xbf16>
// BF16: %[[ZF:.*]] = loom.cast %[[Z]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// BF16: return %[[ZF]] : tensor<4x3xf32>

// SCALED-LABEL: func.func @main
// SCALED: %[[WL:.*]] = loom.cast %{{.*}} : tensor<3x8xf32> -> tensor<3x8xf16>
// SCALED: %[[LOGITS:.*]] = loom.cast %{{.*}} : tensor<4x3xf16> -> tensor<4x3xf32>
// SCALED: loom.softmax_cross_entropy %[[LOGITS]], {{.*}} -> tensor<f32>
// The seed is S = 1024 (times the mean's 1/count), in f32 ...
// SCALED: %[[S:.*]] = loom.constant dense<1.024000e+03> : tensor<f32>
// SCALED: loom.softmax_cross_entropy_grad %[[LOGITS]]
// ... the backward in f16, the parameter's gradient cast back to f32 ...
// SCALED: %[[DWL:.*]] = loom.matmul {{.*}} -> tensor<3x8xf16>
// SCALED: %[[DW:.*]] = loom.cast %[[DWL]] {{.*}}: tensor<3x8xf16> -> tensor<3x8xf32>
// ... and divided by S before the update.
// SCALED: %[[INV:.*]] = loom.constant dense<9.765625E-4> : tensor<f32>
// SCALED: %[[G:.*]] = loom.mul %[[DW]], %[[INV]] : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
// SCALED: loom.sgd_update %{{.*}}, %[[G]], {{.*}} -> tensor<3x8xf32>

// BAD: unknown precision 'f8'; use bf16 or f16

// OVERFLOW: error: the loss scale 1.000000e+06 overflows the loss's type 'f16'

func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<3x8xf32> {loom.param = "w"}) -> tensor<4x3xf32> {
  %y = loom.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
  %half = loom.constant dense<0.5> : tensor<f32>
  %z = loom.mul %y, %half : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  return %z : tensor<4x3xf32>
}

// -----

func.func @main(%x: tensor<4x8xf16> {loom.input = "x"},
                %w: tensor<3x8xf16> {loom.param = "w"}) -> tensor<4x3xf16> {
  %y = loom.matmul %x, %w {transpose_rhs} : (tensor<4x8xf16>, tensor<3x8xf16>) -> tensor<4x3xf16>
  return %y : tensor<4x3xf16>
}
