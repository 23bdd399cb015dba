// -loom-fuse-layer-norm replaces exactly the decomposed layer norm it documents (with scale and bias, scale only, or neither) by one loom.layer_norm, and leaves near misses untouched.
// RUN: loom-opt %s -loom-fuse-layer-norm -split-input-file | FileCheck %s

// The full pattern, with `* scale + bias`: everything folds into one op.
// CHECK-LABEL: func.func @scale_and_bias
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[SCALE:[a-z0-9]+]]: tensor<8xf32>, %[[BIAS:[a-z0-9]+]]: tensor<8xf32>)
// CHECK-NEXT: %[[LN:.*]] = loom.layer_norm %[[X]], %[[SCALE]], %[[BIAS]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[LN]] : tensor<4x8xf32>
func.func @scale_and_bias(%x: tensor<4x8xf32>, %scale: tensor<8xf32>, %bias: tensor<8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %s = loom.mul %n, %scale : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = loom.add %s, %bias : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// `* scale` without `+ bias`: a layer norm without bias, here in f16. The
// epsilon (2^-10, exact in f16) and the exponent are splat constants of shapes
// other than rank 0.
// CHECK-LABEL: func.func @scale_only
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x6xf16>, %[[SCALE:[a-z0-9]+]]: tensor<6xf16>)
// CHECK-NEXT: %[[LN:.*]] = loom.layer_norm %[[X]], %[[SCALE]] {axis = 1 : i64, epsilon = 9.765625E-4 : f32} : (tensor<2x6xf16>, tensor<6xf16>) -> tensor<2x6xf16>
// CHECK-NEXT: return %[[LN]] : tensor<2x6xf16>
func.func @scale_only(%x: tensor<2x6xf16>, %scale: tensor<6xf16>) -> tensor<2x6xf16> {
  %two = loom.constant dense<2.0> : tensor<1xf16>
  %eps = loom.constant dense<9.765625e-04> : tensor<1x1xf16>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<2x6xf16>) -> tensor<2x1xf16>
  %d = loom.sub %x, %mean : (tensor<2x6xf16>, tensor<2x1xf16>) -> tensor<2x6xf16>
  %sq = loom.pow %d, %two : (tensor<2x6xf16>, tensor<1xf16>) -> tensor<2x6xf16>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<2x6xf16>) -> tensor<2x1xf16>
  %ve = loom.add %var, %eps : (tensor<2x1xf16>, tensor<1x1xf16>) -> tensor<2x1xf16>
  %std = loom.sqrt %ve : (tensor<2x1xf16>) -> tensor<2x1xf16>
  %n = loom.div %d, %std : (tensor<2x6xf16>, tensor<2x1xf16>) -> tensor<2x6xf16>
  %s = loom.mul %n, %scale : (tensor<2x6xf16>, tensor<6xf16>) -> tensor<2x6xf16>
  return %s : tensor<2x6xf16>
}

// -----

// Neither scale nor bias: the pass makes a ones scale of the normalised shape.
// CHECK-LABEL: func.func @no_affine
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[ONES:.*]] = loom.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK-NEXT: %[[LN:.*]] = loom.layer_norm %[[X]], %[[ONES]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[LN]] : tensor<4x8xf32>
func.func @no_affine(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Rank 3 with the means over the last dimension: axis 2, scale and bias [D].
// CHECK-LABEL: func.func @rank3_last_dim
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x5x8xf32>, %[[SCALE:[a-z0-9]+]]: tensor<8xf32>, %[[BIAS:[a-z0-9]+]]: tensor<8xf32>)
// CHECK-NEXT: %[[LN:.*]] = loom.layer_norm %[[X]], %[[SCALE]], %[[BIAS]] {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: return %[[LN]] : tensor<2x5x8xf32>
func.func @rank3_last_dim(%x: tensor<2x5x8xf32>, %scale: tensor<8xf32>, %bias: tensor<8xf32>) -> tensor<2x5x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-12> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %d = loom.sub %x, %mean : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %sq = loom.pow %d, %two : (tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %ve = loom.add %var, %eps : (tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x1xf32>
  %std = loom.sqrt %ve : (tensor<2x5x1xf32>) -> tensor<2x5x1xf32>
  %n = loom.div %d, %std : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %s = loom.mul %n, %scale : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %y = loom.add %s, %bias : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// Rank 3 with the means over the last two dimensions: axis 1, scale [S, D],
// and no bias; the ones scale has the normalised shape [5, 8].
// CHECK-LABEL: func.func @rank3_last_two_dims
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x5x8xf32>)
// CHECK-NEXT: %[[ONES:.*]] = loom.constant dense<1.000000e+00> : tensor<5x8xf32>
// CHECK-NEXT: %[[LN:.*]] = loom.layer_norm %[[X]], %[[ONES]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x5x8xf32>, tensor<5x8xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: return %[[LN]] : tensor<2x5x8xf32>
func.func @rank3_last_two_dims(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<2x1x1xf32>
  %d = loom.sub %x, %mean : (tensor<2x5x8xf32>, tensor<2x1x1xf32>) -> tensor<2x5x8xf32>
  %sq = loom.pow %d, %two : (tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<2x1x1xf32>
  %ve = loom.add %var, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %std = loom.sqrt %ve : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = loom.div %d, %std : (tensor<2x5x8xf32>, tensor<2x1x1xf32>) -> tensor<2x5x8xf32>
  return %n : tensor<2x5x8xf32>
}

// -----

// The normalised value has a second use, so the `* scale` stays outside: the
// fused op gets a ones scale and the mul now reads its result.
// CHECK-LABEL: func.func @normalized_has_other_use
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[SCALE:[a-z0-9]+]]: tensor<8xf32>)
// CHECK-NEXT: %[[ONES:.*]] = loom.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK-NEXT: %[[LN:.*]] = loom.layer_norm %[[X]], %[[ONES]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = loom.mul %[[LN]], %[[SCALE]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[S]], %[[LN]] : tensor<4x8xf32>, tensor<4x8xf32>
func.func @normalized_has_other_use(%x: tensor<4x8xf32>, %scale: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %s = loom.mul %n, %scale : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %s, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A `+ bias` of the full input shape is not a layer-norm bias: the scale is
// fused and the add stays.
// CHECK-LABEL: func.func @bias_wrong_shape
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[SCALE:[a-z0-9]+]]: tensor<8xf32>, %[[BIAS:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[LN:.*]] = loom.layer_norm %[[X]], %[[SCALE]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = loom.add %[[LN]], %[[BIAS]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]] : tensor<4x8xf32>
func.func @bias_wrong_shape(%x: tensor<4x8xf32>, %scale: tensor<8xf32>, %bias: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %s = loom.mul %n, %scale : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = loom.add %s, %bias : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Negative: the means reduce the leading dimension, not a trailing one.
// CHECK-LABEL: func.func @not_trailing
// CHECK-NEXT: loom.constant dense<2.000000e+00>
// CHECK-NEXT: loom.constant dense<9.99999974E-6>
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 0>, keep_dims}
// CHECK-NEXT: loom.sub
// CHECK-NEXT: loom.pow
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 0>, keep_dims}
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div
// CHECK-NEXT: return
func.func @not_trailing(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 0>, keep_dims} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 0>, keep_dims} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %ve = loom.add %var, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %std = loom.sqrt %ve : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Negative: rank 3 with the means over dimensions 0 and 2, which are not
// contiguous trailing dimensions.
// CHECK-LABEL: func.func @not_contiguous
// CHECK-NEXT: loom.constant dense<2.000000e+00>
// CHECK-NEXT: loom.constant dense<9.99999974E-6>
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 0, 2>, keep_dims}
// CHECK-NEXT: loom.sub
// CHECK-NEXT: loom.pow
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 0, 2>, keep_dims}
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div
// CHECK-NEXT: return
func.func @not_contiguous(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 0, 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<1x5x1xf32>
  %d = loom.sub %x, %mean : (tensor<2x5x8xf32>, tensor<1x5x1xf32>) -> tensor<2x5x8xf32>
  %sq = loom.pow %d, %two : (tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 0, 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<1x5x1xf32>
  %ve = loom.add %var, %eps : (tensor<1x5x1xf32>, tensor<f32>) -> tensor<1x5x1xf32>
  %std = loom.sqrt %ve : (tensor<1x5x1xf32>) -> tensor<1x5x1xf32>
  %n = loom.div %d, %std : (tensor<2x5x8xf32>, tensor<1x5x1xf32>) -> tensor<2x5x8xf32>
  return %n : tensor<2x5x8xf32>
}

// -----

// Negative: the variance is a mean over other dimensions than the centring mean.
// CHECK-LABEL: func.func @variance_other_axes
// CHECK-NEXT: loom.constant dense<2.000000e+00>
// CHECK-NEXT: loom.constant dense<9.99999974E-6>
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 2>, keep_dims}
// CHECK-NEXT: loom.sub
// CHECK-NEXT: loom.pow
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 1, 2>, keep_dims}
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div
// CHECK-NEXT: return
func.func @variance_other_axes(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %d = loom.sub %x, %mean : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %sq = loom.pow %d, %two : (tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x5x8xf32>) -> tensor<2x1x1xf32>
  %ve = loom.add %var, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %std = loom.sqrt %ve : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = loom.div %d, %std : (tensor<2x5x8xf32>, tensor<2x1x1xf32>) -> tensor<2x5x8xf32>
  return %n : tensor<2x5x8xf32>
}

// -----

// Negative: the square uses exponent 3.
// CHECK-LABEL: func.func @cube
// CHECK-NEXT: %[[THREE:.*]] = loom.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NEXT: loom.constant dense<9.99999974E-6>
// CHECK-NEXT: loom.reduce_mean
// CHECK-NEXT: loom.sub
// CHECK-NEXT: loom.pow %{{.*}}, %[[THREE]]
// CHECK-NEXT: loom.reduce_mean
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div
// CHECK-NEXT: return
func.func @cube(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %three = loom.constant dense<3.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Negative: the variance comes from a second sub on another tensor %y, not from
// the centred %x.
// CHECK-LABEL: func.func @different_x_in_subs
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: loom.constant dense<2.000000e+00>
// CHECK-NEXT: loom.constant dense<9.99999974E-6>
// CHECK-NEXT: %[[MX:.*]] = loom.reduce_mean %[[X]]
// CHECK-NEXT: %[[DX:.*]] = loom.sub %[[X]], %[[MX]]
// CHECK-NEXT: %[[MY:.*]] = loom.reduce_mean %[[Y]]
// CHECK-NEXT: %[[DY:.*]] = loom.sub %[[Y]], %[[MY]]
// CHECK-NEXT: loom.pow %[[DY]]
// CHECK-NEXT: loom.reduce_mean
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div %[[DX]]
// CHECK-NEXT: return
func.func @different_x_in_subs(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %meany = loom.reduce_mean %y {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %dy = loom.sub %y, %meany : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %dy, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Negative: %x minus the mean of another tensor %y.
// CHECK-LABEL: func.func @mean_of_other_tensor
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: loom.constant dense<2.000000e+00>
// CHECK-NEXT: loom.constant dense<9.99999974E-6>
// CHECK-NEXT: %[[MEAN:.*]] = loom.reduce_mean %[[Y]]
// CHECK-NEXT: loom.sub %[[X]], %[[MEAN]]
// CHECK-NEXT: loom.pow
// CHECK-NEXT: loom.reduce_mean
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div
// CHECK-NEXT: return
func.func @mean_of_other_tensor(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %y {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Negative: the centring mean drops keep_dims, so [8] broadcasts against the
// wrong dimension of the 8x8 input.
// CHECK-LABEL: func.func @no_keep_dims
// CHECK-NEXT: loom.constant dense<2.000000e+00>
// CHECK-NEXT: loom.constant dense<9.99999974E-6>
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 1>} : (tensor<8x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: loom.sub
// CHECK-NEXT: loom.pow
// CHECK-NEXT: loom.reduce_mean %{{.*}} {axes = array<i64: 1>, keep_dims}
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div
// CHECK-NEXT: return
func.func @no_keep_dims(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-05> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>} : (tensor<8x8xf32>) -> tensor<8xf32>
  %d = loom.sub %x, %mean : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %sq = loom.pow %d, %two : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<8x8xf32>) -> tensor<8x1xf32>
  %ve = loom.add %var, %eps : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %std = loom.sqrt %ve : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %n = loom.div %d, %std : (tensor<8x8xf32>, tensor<8x1xf32>) -> tensor<8x8xf32>
  return %n : tensor<8x8xf32>
}

// -----

// Negative: the epsilon is not a constant.
// CHECK-LABEL: func.func @epsilon_not_constant
// CHECK-NEXT: loom.constant dense<2.000000e+00>
// CHECK-NEXT: loom.reduce_mean
// CHECK-NEXT: loom.sub
// CHECK-NEXT: loom.pow
// CHECK-NEXT: loom.reduce_mean
// CHECK-NEXT: loom.add
// CHECK-NEXT: loom.sqrt
// CHECK-NEXT: loom.div
// CHECK-NEXT: return
func.func @epsilon_not_constant(%x: tensor<4x8xf32>, %eps: tensor<f32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = loom.sub %x, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = loom.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %std = loom.sqrt %ve : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = loom.div %d, %std : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
