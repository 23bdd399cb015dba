//===- ConvPoolCases.cpp - Conformance cases: convolution and pooling -----===//
//
// conv2d (and conv_transpose2d, its input gradient with a bias and
// output_padding), max_pool2d and avg_pool2d with their gradients over the
// window geometries a model brings: strides, dilations, symmetric and
// asymmetric padding, groups (depthwise too), 1x1 and rectangular kernels, and
// for pooling the ceil-mode output the ONNX importer gives for ceil_mode=1 (one
// window more than the floor formula, reaching past the end padding).
// Each geometry runs the forward op and both gradients, and is named so
// that a failure says which geometry broke.
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

#include <algorithm>
#include <limits>

namespace loom::rt::conformance {
namespace {

/// The output size along one axis: the dialect's floor formula, plus one
/// in ceil mode when a last window would start inside the input or its
/// leading padding (common/ops/NNRules.cpp, windowOut).
int64_t outputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                   int64_t padEnd, int64_t dilation, bool ceilMode) {
  int64_t span = in + padBegin + padEnd - dilation * (kernel - 1) - 1;
  int64_t steps = span / stride;
  if (ceilMode && span % stride != 0 && (steps + 1) * stride < in + padBegin)
    ++steps;
  return steps + 1;
}

//===----------------------------------------------------------------------===//
// conv2d, conv2d_grad_input, conv2d_grad_weight
//===----------------------------------------------------------------------===//

struct ConvGeometry {
  const char *name;
  Shape input; ///< [N, C, H, W]
  int64_t outChannels, kernelH, kernelW;
  std::vector<int64_t> strides, padding, dilations; ///< padding: t, l, b, r
  int64_t groups;
  bool representative; ///< also in f16 and bf16
};

/// A convolution: name, input [N, C, H, W], output channels, kernel (h, w),
/// strides, padding (top, left, bottom, right), dilations, groups, and
/// whether it also runs in f16 and bf16.
ConvGeometry conv(const char *name, Shape input, int64_t outChannels,
                  std::vector<int64_t> kernel, std::vector<int64_t> strides,
                  std::vector<int64_t> padding, std::vector<int64_t> dilations,
                  int64_t groups, bool representative) {
  return {
      name,      std::move(input),   outChannels,        kernel[0],
      kernel[1], std::move(strides), std::move(padding), std::move(dilations),
      groups,    representative};
}

const std::vector<ConvGeometry> &convGeometries() {
  static const std::vector<ConvGeometry> all = {
      conv("k3_pad1", {2, 3, 8, 8}, 4, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1,
           true),
      conv("k3_nopad", {2, 3, 7, 9}, 5, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1,
           false),
      conv("stride2_pad1", {2, 3, 9, 9}, 4, {3, 3}, {2, 2}, {1, 1, 1, 1},
           {1, 1}, 1, false),
      // The last input row and column are read by no window.
      conv("stride2_unread_tail", {2, 3, 8, 8}, 4, {3, 3}, {2, 2}, {0, 0, 0, 0},
           {1, 1}, 1, false),
      conv("dilation2_pad2", {2, 3, 9, 9}, 3, {3, 3}, {1, 1}, {2, 2, 2, 2},
           {2, 2}, 1, false),
      conv("dilation2_stride2", {1, 2, 10, 10}, 2, {3, 3}, {2, 2}, {1, 1, 1, 1},
           {2, 2}, 1, false),
      conv("asym_pad_t1l0b2r1", {2, 3, 7, 6}, 3, {3, 3}, {1, 1}, {1, 0, 2, 1},
           {1, 1}, 1, false),
      conv("asym_pad_stride2_k3x2", {2, 2, 8, 7}, 4, {3, 2}, {2, 2},
           {0, 1, 1, 0}, {1, 1}, 1, true),
      conv("k1", {2, 5, 6, 6}, 7, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1,
           false),
      conv("k1_stride2", {2, 4, 7, 7}, 3, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1},
           1, false),
      conv("groups2", {2, 4, 7, 7}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2,
           false),
      conv("depthwise", {2, 4, 6, 6}, 4, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1},
           4, false),
      conv("depthwise_x2_stride2", {2, 3, 6, 6}, 6, {3, 3}, {2, 2},
           {1, 1, 1, 1}, {1, 1}, 3, true),
      conv("groups2_k3x2_s2x1_d2x1_asym", {2, 4, 9, 8}, 4, {3, 2}, {2, 1},
           {1, 0, 2, 1}, {2, 1}, 2, false),
      conv("k1x5_pad_w", {1, 3, 5, 11}, 2, {1, 5}, {1, 1}, {0, 2, 0, 2}, {1, 1},
           1, false),
      conv("channels16", {2, 16, 6, 6}, 8, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1},
           1, false),
  };
  return all;
}

Shape weightShape(const ConvGeometry &g) {
  return {g.outChannels, g.input[1] / g.groups, g.kernelH, g.kernelW};
}

Shape convOutputShape(const ConvGeometry &g) {
  return {g.input[0], g.outChannels,
          outputSize(g.input[2], g.kernelH, g.strides[0], g.padding[0],
                     g.padding[2], g.dilations[0], false),
          outputSize(g.input[3], g.kernelW, g.strides[1], g.padding[1],
                     g.padding[3], g.dilations[1], false)};
}

Attrs convAttrs(const ConvGeometry &g) {
  Attrs attrs;
  attrs.set("strides", g.strides);
  attrs.set("padding", g.padding);
  attrs.set("dilations", g.dilations);
  attrs.set("groups", g.groups);
  return attrs;
}

/// conv_transpose2d's output_padding that gives back the conv's input: the
/// rows and columns past the last window.
std::vector<int64_t> transposeOutputPadding(const ConvGeometry &g) {
  std::vector<int64_t> extra;
  for (int i = 0; i < 2; ++i) {
    int64_t kernel = i == 0 ? g.kernelH : g.kernelW;
    extra.push_back((g.input[2 + i] + g.padding[i] + g.padding[i + 2] -
                     g.dilations[i] * (kernel - 1) - 1) %
                    g.strides[i]);
  }
  return extra;
}

void addConvCases(std::vector<CaseSpec> &cases) {
  for (const ConvGeometry &g : convGeometries()) {
    Shape w = weightShape(g), y = convOutputShape(g);
    int64_t window = g.kernelH * g.kernelW;
    std::vector<DType> types =
        g.representative ? kFloatTypes : std::vector<DType>{DType::F32};
    for (DType dtype : types) {
      for (bool bias : {false, true})
        addCase(
            cases, "conv2d", std::string(g.name) + (bias ? "_bias" : ""), dtype,
            [=](std::mt19937 &rng) {
              Case c;
              c.attrs = convAttrs(g);
              c.inputs = {uniform(dtype, g.input, rng), uniform(dtype, w, rng)};
              if (bias)
                c.inputs.push_back(uniform(dtype, {g.outChannels}, rng));
              c.outputs = {{dtype, y}};
              c.reduction = w[1] * window;
              return c;
            });
      addCase(cases, "conv2d_grad_input", g.name, dtype,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs = convAttrs(g);
                c.inputs = {uniform(dtype, y, rng), uniform(dtype, w, rng)};
                c.outputs = {{dtype, g.input}};
                c.reduction = (g.outChannels / g.groups) * window;
                return c;
              });
      addCase(
          cases, "conv2d_grad_weight", g.name, dtype, [=](std::mt19937 &rng) {
            Case c;
            c.attrs = convAttrs(g);
            c.inputs = {uniform(dtype, g.input, rng), uniform(dtype, y, rng)};
            c.outputs = {{dtype, w}};
            c.reduction = y[0] * y[2] * y[3];
            return c;
          });
      // The transposed convolution of the conv's output gives its input:
      // output_padding holds the rows and columns no window reads.
      addCase(cases, "conv_transpose2d", std::string(g.name) + "_bias", dtype,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs = convAttrs(g);
                c.attrs.set("output_padding", transposeOutputPadding(g));
                c.inputs = {uniform(dtype, y, rng), uniform(dtype, w, rng),
                            uniform(dtype, {g.input[1]}, rng)};
                c.outputs = {{dtype, g.input}};
                c.reduction = (g.outChannels / g.groups) * window;
                return c;
              });
    }
  }
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d and their gradients
//===----------------------------------------------------------------------===//

struct PoolGeometry {
  const char *name;
  Shape input;                                   ///< [N, C, H, W]
  std::vector<int64_t> kernel, strides, padding; ///< padding: t, l, b, r
  std::vector<int64_t> dilations; ///< empty: the attribute is left out
  bool ceilMode;
  bool forAvg;         ///< avg_pool2d takes dilations of 1 only
  bool representative; ///< also in f16 and bf16
};

/// A pooling window: name, input [N, C, H, W], kernel, strides, padding (top,
/// left, bottom, right), dilations (empty: the attribute is left out), ceil
/// mode, whether avg_pool2d takes it (dilations of 1), and whether it also
/// runs in f16 and bf16.
PoolGeometry pool(const char *name, Shape input, std::vector<int64_t> kernel,
                  std::vector<int64_t> strides, std::vector<int64_t> padding,
                  std::vector<int64_t> dilations, bool ceilMode, bool forAvg,
                  bool representative) {
  return {name,
          std::move(input),
          std::move(kernel),
          std::move(strides),
          std::move(padding),
          std::move(dilations),
          ceilMode,
          forAvg,
          representative};
}

const std::vector<PoolGeometry> &poolGeometries() {
  static const std::vector<PoolGeometry> all = {
      pool("k2_s2", {2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {}, false, true,
           false),
      pool("k3_s2_pad1", {2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1},
           false, true, true),
      // Overlapping windows: input elements get several windows' gradients.
      pool("k3_s1_pad1", {2, 2, 6, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, false,
           true, false),
      pool("k3_s1_asym_pad_t0l1b2r1", {2, 2, 6, 7}, {3, 3}, {1, 1},
           {0, 1, 2, 1}, {}, false, true, false),
      pool("k3x2_s2x1_asym_pad_t1l0b0r1", {2, 2, 7, 6}, {3, 2}, {2, 1},
           {1, 0, 0, 1}, {}, false, true, false),
      // Ceil mode: 3 windows by the floor formula, 4 with the last one
      // reaching past the input (no padding).
      pool("k3_s2_ceil", {2, 3, 8, 8}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {}, true,
           true, false),
      // Ceil mode with padding: the last window reaches past the end
      // padding (5 outputs where the floor formula gives 4).
      pool("k3_s2_pad1_ceil", {2, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {},
           true, true, true),
      pool("k3_s3_asym_pad_ceil", {1, 2, 10, 8}, {3, 3}, {3, 3}, {1, 0, 0, 1},
           {}, true, true, false),
      pool("k2_d2_pad1", {2, 2, 7, 7}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {2, 2},
           false, false, false),
      pool("k3_d2_s2_pad2", {1, 3, 9, 9}, {3, 3}, {2, 2}, {2, 2, 2, 2}, {2, 2},
           false, false, false),
      pool("k2_d2_s2_ceil", {1, 2, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {2, 2},
           true, false, false),
      pool("global", {2, 3, 5, 5}, {5, 5}, {1, 1}, {0, 0, 0, 0}, {}, false,
           true, false),
  };
  return all;
}

Shape poolOutputShape(const PoolGeometry &g) {
  int64_t dh = g.dilations.empty() ? 1 : g.dilations[0],
          dw = g.dilations.empty() ? 1 : g.dilations[1];
  return {g.input[0], g.input[1],
          outputSize(g.input[2], g.kernel[0], g.strides[0], g.padding[0],
                     g.padding[2], dh, g.ceilMode),
          outputSize(g.input[3], g.kernel[1], g.strides[1], g.padding[1],
                     g.padding[3], dw, g.ceilMode)};
}

Attrs poolAttrs(const PoolGeometry &g, bool countIncludePad) {
  Attrs attrs;
  attrs.set("kernel", g.kernel);
  attrs.set("strides", g.strides);
  attrs.set("padding", g.padding);
  if (!g.dilations.empty())
    attrs.set("dilations", g.dilations);
  if (g.ceilMode)
    attrs.set("ceil_mode", true);
  if (countIncludePad)
    attrs.set("count_include_pad", true);
  return attrs;
}

/// Max pooling input: distinct values, or few levels (ties, which go to
/// the first maximum in row-major window order), or NaNs among them.
enum class MaxInput { Distinct, Ties, Nan };

HostBuffer maxPoolInput(MaxInput kind, DType dtype, const Shape &shape,
                        std::mt19937 &rng) {
  if (kind == MaxInput::Ties)
    return levels(dtype, shape, rng, -1, 0.5, 4);
  HostBuffer x = uniform(dtype, shape, rng, -2, 2);
  if (kind == MaxInput::Nan)
    for (int64_t i = 3, n = numElements(shape); i < n; i += 17)
      setElement(x, i, std::numeric_limits<double>::quiet_NaN());
  return x;
}

void addMaxPoolCases(std::vector<CaseSpec> &cases, const PoolGeometry &g,
                     const std::string &name, MaxInput kind,
                     const std::vector<DType> &types) {
  Shape y = poolOutputShape(g);
  int64_t window = g.kernel[0] * g.kernel[1];
  for (DType dtype : types) {
    addCase(cases, "max_pool2d", name, dtype, [=](std::mt19937 &rng) {
      Case c;
      c.attrs = poolAttrs(g, false);
      c.inputs = {maxPoolInput(kind, dtype, g.input, rng)};
      c.outputs = {{dtype, y}};
      c.tolerance = exact();
      return c;
    });
    addCase(cases, "max_pool2d_grad", name, dtype, [=](std::mt19937 &rng) {
      Case c;
      c.attrs = poolAttrs(g, false);
      c.inputs = {maxPoolInput(kind, dtype, g.input, rng),
                  uniform(dtype, y, rng)};
      c.outputs = {{dtype, g.input}};
      c.reduction = window;
      return c;
    });
  }
}

void addPoolCases(std::vector<CaseSpec> &cases) {
  for (const PoolGeometry &g : poolGeometries()) {
    std::vector<DType> types =
        g.representative ? kFloatTypes : std::vector<DType>{DType::F32};
    addMaxPoolCases(cases, g, g.name, MaxInput::Distinct, types);
    if (!g.forAvg)
      continue;
    Shape y = poolOutputShape(g);
    int64_t window = g.kernel[0] * g.kernel[1];
    for (bool includePad : {false, true})
      for (DType dtype : types) {
        std::string name =
            std::string(g.name) + (includePad ? "_include_pad" : "");
        addCase(cases, "avg_pool2d", name, dtype, [=](std::mt19937 &rng) {
          Case c;
          c.attrs = poolAttrs(g, includePad);
          c.inputs = {uniform(dtype, g.input, rng, -2, 2)};
          c.outputs = {{dtype, y}};
          c.reduction = window;
          return c;
        });
        addCase(cases, "avg_pool2d_grad", name, dtype, [=](std::mt19937 &rng) {
          Case c;
          c.attrs = poolAttrs(g, includePad);
          c.inputs = {uniform(dtype, y, rng)};
          c.outputs = {{dtype, g.input}};
          c.reduction = window;
          return c;
        });
      }
  }
  // Ties and NaNs decide which input a window's gradient goes to.
  const PoolGeometry &overlapping =
      *std::find_if(poolGeometries().begin(), poolGeometries().end(),
                    [](const PoolGeometry &g) {
                      return std::string(g.name) == "k3_s1_pad1";
                    });
  addMaxPoolCases(cases, overlapping, std::string(overlapping.name) + "_ties",
                  MaxInput::Ties, kFloatTypes);
  addMaxPoolCases(cases, overlapping, std::string(overlapping.name) + "_nan",
                  MaxInput::Nan, {DType::F32});
}

} // namespace

void addConvPoolCases(std::vector<CaseSpec> &cases) {
  addConvCases(cases);
  addPoolCases(cases);
}

} // namespace loom::rt::conformance
