//===- ConvertResize.cpp - ONNX Resize and Upsample -----------------------===//
//
// Resize (10, 11, 13) and the older Upsample (7, 9) as one loom.resize.
// Each dimension's scale is kept exactly, as a ratio: a float32 scale is
// its exact binary fraction, and an output size gives size / input size,
// so the kernels compute the ONNX reference's coordinates. The scales and
// sizes must be known when importing (initializers, Constant nodes or
// folded shape arithmetic). Refused: tf_crop_and_resize, antialias, axes
// and keep_aspect_ratio_policy other than stretch.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

#include <cmath>
#include <numeric>

using namespace mlir;

namespace loom::onnx_import {
namespace {

/// The node's modes, as loom.resize's attributes name them.
struct ResizeModes {
  std::string mode, coord, rounding;
  float cubicA = -0.75f;
  bool excludeOutside = false;
};

/// A positive finite float32 `s` as the exact ratio num / den; false if it
/// is not positive or the ratio does not fit 64 bits.
bool exactRatio(float s, int64_t &num, int64_t &den) {
  if (!(s > 0) || !std::isfinite(s))
    return false;
  int e;
  float m = std::frexp(s, &e); // s = m * 2^e, m in [0.5, 1)
  int64_t mantissa = static_cast<int64_t>(std::ldexp(m, 24));
  int shift = e - 24;
  if (shift > 38 || shift < -62)
    return false;
  num = shift >= 0 ? mantissa << shift : mantissa;
  den = shift >= 0 ? 1 : int64_t(1) << -shift;
  int64_t g = std::gcd(num, den);
  num /= g;
  den /= g;
  return true;
}

/// loom.resize of input 0 by num[d] / den[d] per dimension.
FailureOr<Value> createResize(NodeContext &nc, const ResizeModes &m,
                              ArrayRef<int64_t> num, ArrayRef<int64_t> den) {
  auto &b = nc.builder;
  return nc.create<ResizeOp>(
      nc.value(0), b.getStringAttr(m.mode), b.getStringAttr(m.coord),
      b.getStringAttr(m.rounding), b.getDenseI64ArrayAttr(num),
      b.getDenseI64ArrayAttr(den), b.getF32FloatAttr(m.cubicA),
      m.excludeOutside ? b.getUnitAttr() : UnitAttr());
}

/// The resize of input 0 by `scales` (one float per dimension).
FailureOr<Value> resizeByScales(NodeContext &nc, ArrayRef<double> scales,
                                const ResizeModes &m) {
  int64_t rank = nc.rank(0);
  if (static_cast<int64_t>(scales.size()) != rank)
    return nc.invalid("scales has " + Twine(scales.size()) +
                      " entries but the input has rank " + Twine(rank));
  SmallVector<int64_t> num(rank), den(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (!exactRatio(static_cast<float>(scales[d]), num[d], den[d]))
      return nc.invalid("scale " + std::to_string(scales[d]) +
                        " of dimension " + std::to_string(d) +
                        " must be a positive finite number");
  return createResize(nc, m, num, den);
}

/// The resize of input 0 to `sizes`.
FailureOr<Value> resizeToSizes(NodeContext &nc, ArrayRef<int64_t> sizes,
                               const ResizeModes &m) {
  ArrayRef<int64_t> in = nc.shape(0);
  if (sizes.size() != in.size())
    return nc.invalid("sizes has " + Twine(sizes.size()) +
                      " entries but the input has rank " + Twine(in.size()));
  SmallVector<int64_t> num(in.size()), den(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (sizes[d] <= 0 || in[d] <= 0)
      return nc.unsupported("dimension " + Twine(d) + " of size " +
                            Twine(in[d]) + " resized to " + Twine(sizes[d]) +
                            ": Loom resizes non-empty dimensions to "
                            "non-empty ones");
    int64_t g = std::gcd(sizes[d], in[d]);
    num[d] = sizes[d] / g;
    den[d] = in[d] / g;
  }
  return createResize(nc, m, num, den);
}

/// The float elements of constant input `i`, or a refusal naming it.
FailureOr<std::vector<double>> constantFloats(NodeContext &nc, int i,
                                              StringRef what) {
  const HostTensor *c = nc.constant(i);
  if (!c)
    return nc.unsupported("the " + what + " (input '" + nc.node.input(i) +
                          "') is computed at run time; Loom needs it to be "
                          "a constant");
  std::vector<double> v(c->numElements());
  for (int64_t k = 0; k < c->numElements(); ++k)
    v[k] = c->asDouble(k);
  return v;
}

/// Refuses the attributes of later versions that change the result.
LogicalResult refuseUnsupported(NodeContext &nc) {
  auto antialias = nc.attrInt("antialias", 0);
  if (failed(antialias))
    return failure();
  if (*antialias != 0)
    return nc.unsupported("attribute 'antialias' is " + Twine(*antialias) +
                          "; Loom supports 0");
  if (nc.attr("axes"))
    return nc.unsupported("attribute 'axes' is not supported; Loom takes "
                          "scales or sizes for every dimension");
  auto policy = nc.attrString("keep_aspect_ratio_policy", "stretch");
  if (failed(policy))
    return failure();
  if (*policy != "stretch")
    return nc.unsupported("attribute 'keep_aspect_ratio_policy' is '" +
                          Twine(*policy) + "'; Loom supports 'stretch'");
  return success();
}

/// Resize's attributes for its version: Resize-10 has asymmetric
/// coordinates and rounds down, and no cubic.
FailureOr<ResizeModes> resizeModes(NodeContext &nc) {
  ResizeModes m;
  auto mode = nc.attrString("mode", "nearest");
  if (failed(mode) || failed(refuseUnsupported(nc)))
    return failure();
  m.mode = *mode;
  bool cubic = m.mode == "cubic" && nc.version >= 11;
  if (m.mode != "nearest" && m.mode != "linear" && !cubic)
    return nc.unsupported("attribute 'mode' is '" + Twine(m.mode) +
                          "'; Loom supports 'nearest', 'linear' and, from "
                          "Resize-11, 'cubic'");
  if (nc.version < 11) {
    m.coord = "asymmetric";
    m.rounding = "floor";
    return m;
  }
  auto coord = nc.attrString("coordinate_transformation_mode", "half_pixel");
  auto rounding = nc.attrString("nearest_mode", "round_prefer_floor");
  auto a = nc.attrFloat("cubic_coeff_a", -0.75f);
  auto exclude = nc.attrInt("exclude_outside", 0);
  if (failed(coord) || failed(rounding) || failed(a) || failed(exclude))
    return failure();
  if (*coord == "tf_crop_and_resize")
    return nc.unsupported("coordinate_transformation_mode "
                          "'tf_crop_and_resize' (with roi) is not supported; "
                          "Loom supports half_pixel, pytorch_half_pixel, "
                          "align_corners, asymmetric and tf_half_pixel_for_nn");
  m.coord = *coord;
  m.rounding = *rounding;
  m.cubicA = *a;
  m.excludeOutside = *exclude != 0;
  return m;
}

LogicalResult convertResize(NodeContext &nc) {
  auto m = resizeModes(nc);
  if (failed(m))
    return failure();
  if (nc.version < 11) { // Resize-10: X, scales
    auto scales = constantFloats(nc, 1, "scales");
    if (failed(scales))
      return failure();
    return nc.setResult(resizeByScales(nc, *scales, *m));
  }
  // Resize-11: X, roi, scales, sizes (scales empty when sizes are given);
  // 13: roi and scales may be left out.
  if (nc.hasInput(2)) {
    auto scales = constantFloats(nc, 2, "scales");
    if (failed(scales))
      return failure();
    if (!scales->empty())
      return nc.setResult(resizeByScales(nc, *scales, *m));
  }
  if (!nc.hasInput(3))
    return nc.invalid("Resize needs scales (input 2) or sizes (input 3)");
  auto sizes = nc.constantInts(3, "sizes");
  if (failed(sizes))
    return failure();
  return nc.setResult(resizeToSizes(nc, *sizes, *m));
}

/// Upsample (7: `scales` attribute; 9: scales input): asymmetric
/// coordinates, nearest rounds down.
LogicalResult convertUpsample(NodeContext &nc) {
  auto mode = nc.attrString("mode", "nearest");
  if (failed(mode))
    return failure();
  ResizeModes m;
  m.mode = *mode == "bilinear" ? "linear" : *mode;
  m.coord = "asymmetric";
  m.rounding = "floor";
  if (m.mode != "nearest" && m.mode != "linear")
    return nc.unsupported("attribute 'mode' is '" + Twine(*mode) +
                          "'; Loom supports 'nearest', 'linear' and "
                          "'bilinear'");
  std::vector<double> scales;
  if (nc.version < 9) {
    const onnx::AttributeProto *a = nc.attr("scales");
    if (!a)
      return nc.invalid("Upsample-7 needs the attribute 'scales'");
    scales.assign(a->floats().begin(), a->floats().end());
  } else {
    auto s = constantFloats(nc, 1, "scales");
    if (failed(s))
      return failure();
    scales = std::move(*s);
  }
  return nc.setResult(resizeByScales(nc, scales, m));
}

} // namespace

void addResizeConverters(llvm::StringMap<Converter> &t) {
  t["Resize"] = {10, convertResize};    // 11: roi and sizes inputs, modes
  t["Upsample"] = {7, convertUpsample}; // 9: scales became an input
}

} // namespace loom::onnx_import
