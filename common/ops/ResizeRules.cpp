//===- ResizeRules.cpp - Rules of resize and resize_grad ------------------===//
//
// The shape rules of `loom.resize` (nearest or N-linear resampling) and its
// gradient `loom.resize_grad`: the modes are known names, every dimension
// has a positive scale, and each output dimension is floor(in * scale).
//
//===----------------------------------------------------------------------===//

#include "common/ops/ResizeIndex.h"
#include "common/ops/RulesImpl.h"

namespace loom::ops::rules {

namespace {

/// The shape `in` resized by the op's attributes into `out`, or what is
/// wrong.
std::string resizeShape(const Attrs &a, const Shape &in, Shape &out) {
  resize::Mode mode;
  resize::Coord coord;
  resize::Rounding rounding;
  std::string m = a.getString("mode"),
              c = a.getString("coordinate_transformation_mode"),
              r = a.getString("nearest_mode");
  if (!resize::parseMode(m, mode))
    return "mode '" + m + "' is not one of " + resize::kModeNames;
  if (!resize::parseCoord(c, coord))
    return "coordinate_transformation_mode '" + c + "' is not one of " +
           resize::kCoordNames;
  if (!resize::parseRounding(r, rounding))
    return "nearest_mode '" + r + "' is not one of " + resize::kRoundingNames;
  std::vector<int64_t> num = a.getInts("scale_num"),
                       den = a.getInts("scale_den");
  size_t rank = in.size();
  if (num.size() != rank || den.size() != rank)
    return "scale_num and scale_den need " + std::to_string(rank) +
           " entries each";
  out.clear();
  for (size_t d = 0; d < rank; ++d) {
    std::string scale = std::to_string(num[d]) + "/" + std::to_string(den[d]);
    if (num[d] <= 0 || den[d] <= 0)
      return "scale " + scale + " of dimension " + std::to_string(d) +
             " must be positive";
    int64_t size;
    if (!resize::outputSize(in[d], num[d], den[d], size))
      return "scale " + scale + " of dimension " + std::to_string(d) +
             " overflows 64-bit sizes";
    if (size == 0 && in[d] > 0)
      return "scale " + scale + " of dimension " + std::to_string(d) +
             " of size " + std::to_string(in[d]) + " leaves no element";
    out.push_back(size);
  }
  return "";
}

/// resize(input): the resized shape, the input's element type.
std::string resizeOp(const Attrs &a, const std::vector<TypeRef> &ops,
                     std::vector<TensorType> &out) {
  if (auto e = expectFloat("input", ops[0]); !e.empty())
    return e;
  Shape shape;
  if (auto e = resizeShape(a, *ops[0].shape, shape); !e.empty())
    return e;
  return one(out, ops[0].dtype, shape);
}

/// resize_grad(grad) -> the resized tensor's gradient: grad has the
/// resize's result shape.
std::string resizeGrad(const Attrs &a, const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  if (auto e = expectFloat("result", res[0]); !e.empty())
    return e;
  Shape resized;
  if (auto e = resizeShape(a, *res[0].shape, resized); !e.empty())
    return e;
  return expectGrad(ops[0], res[0].dtype, resized, "resize of the result");
}

} // namespace

void addResizeRules(RuleTable &table) {
  table.insert({
      {"resize", inferred(resizeOp, 1, 1)},
      {"resize_grad", checked(resizeGrad, 1, 1)},
  });
}

} // namespace loom::ops::rules
