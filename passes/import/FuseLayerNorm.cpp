//===- FuseLayerNorm.cpp - Fuse decomposed layer norms --------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "loom-fuse-layer-norm"

namespace loom {
#define GEN_PASS_DEF_FUSELAYERNORM
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The scalar value of a constant splat operand, if it is one.
static std::optional<double> getScalarConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// The first dimension of a trailing, keep_dims mean of `x`, if `op` is one.
static std::optional<int64_t> getTrailingMeanAxis(ReduceMeanOp op, Value x) {
  if (!op || op.getInput() != x || !op.getKeepDims())
    return std::nullopt;
  ArrayRef<int64_t> axes = op.getAxes();
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  if (axes.empty() || axes.back() != rank - 1)
    return std::nullopt;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1)
      return std::nullopt;
  return axes.front();
}

/// Matches `div(sub(x, mean(x)), sqrt(add(mean(pow(sub, 2)), eps)))`, then an
/// optional `mul` by a scale and `add` of a bias of the normalised shape.
struct FuseLayerNormPattern : public OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DivOp div,
                                PatternRewriter &rewriter) const override {
    auto centered = div.getLhs().getDefiningOp<SubOp>();
    if (!centered)
      return failure();
    Value x = centered.getLhs();
    auto xType = cast<RankedTensorType>(x.getType());
    if (div.getType() != xType)
      return failure();
    auto axis =
        getTrailingMeanAxis(centered.getRhs().getDefiningOp<ReduceMeanOp>(), x);
    if (!axis)
      return failure();

    auto sqrt = div.getRhs().getDefiningOp<SqrtOp>();
    auto addEps = sqrt ? sqrt.getInput().getDefiningOp<AddOp>() : AddOp();
    if (!addEps)
      return failure();
    std::optional<double> epsilon = getScalarConstant(addEps.getRhs());
    auto variance = addEps.getLhs().getDefiningOp<ReduceMeanOp>();
    // A negative or NaN epsilon is not a layer norm: leave it alone.
    if (!epsilon || !(*epsilon >= 0) || !variance)
      return failure();
    auto square = variance.getInput().getDefiningOp<PowOp>();
    if (!square || square.getLhs() != centered.getResult() ||
        getScalarConstant(square.getRhs()) != 2.0 ||
        getTrailingMeanAxis(variance, square.getResult()) != axis)
      return failure();

    // Optional affine part: only when the normalised value has no other use.
    auto normalizedShape = xType.getShape().drop_front(*axis);
    auto isParam = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      return t.getShape() == normalizedShape &&
             t.getElementType() == xType.getElementType();
    };
    Operation *last = div;
    Value scale, bias;
    if (div->hasOneUse())
      if (auto mul = dyn_cast<MulOp>(*div->user_begin()))
        if (mul.getLhs() == div.getResult() && isParam(mul.getRhs()) &&
            mul.getType() == xType) {
          scale = mul.getRhs();
          last = mul;
          if (mul->hasOneUse())
            if (auto add = dyn_cast<AddOp>(*mul->user_begin()))
              if (add.getLhs() == mul.getResult() && isParam(add.getRhs()) &&
                  add.getType() == xType) {
                bias = add.getRhs();
                last = add;
              }
        }

    rewriter.setInsertionPoint(last);
    if (!scale) {
      auto type =
          RankedTensorType::get(normalizedShape, xType.getElementType());
      scale = ConstantOp::create(
          rewriter, div.getLoc(),
          DenseElementsAttr::get(
              type, rewriter.getFloatAttr(xType.getElementType(), 1.0)));
    }
    auto fused = LayerNormOp::create(
        rewriter, last->getLoc(), x, scale, bias,
        rewriter.getI64IntegerAttr(*axis),
        rewriter.getF32FloatAttr(static_cast<float>(*epsilon)));
    LLVM_DEBUG(llvm::dbgs()
               << "fused layer norm at " << last->getLoc() << "\n");
    rewriter.replaceOp(last, fused.getResult());
    return success();
  }
};

struct FuseLayerNormPass
    : public loom::impl::FuseLayerNormBase<FuseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLayerNormPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
