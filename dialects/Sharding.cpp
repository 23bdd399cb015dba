//===- Sharding.cpp - Sharding rules of the loom ops ----------------------===//
//
// Every op's factor description (see ShardingRule.h). Factors are numbered
// in the order they are added; a dimension of size 1 that broadcasts has no
// factor, so it is never split.
//
//===----------------------------------------------------------------------===//

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A factor per dimension of `type`, all of `kind`.
SmallVector<int> factorsFor(ShardingRule &rule, RankedTensorType type,
                            FactorKind kind = FactorKind::Parallel) {
  SmallVector<int> f;
  for (int64_t size : type.getShape())
    f.push_back(rule.addFactor(size, kind));
  return f;
}

/// Dimensions indexed by `factors` one to one.
DimFactors dimsOf(ArrayRef<int> factors) {
  DimFactors dims;
  for (int f : factors)
    dims.push_back({f});
  return dims;
}

/// An operand broadcast (numpy style, aligned at the last dimension) to a
/// tensor whose dimensions are `factors`: equal-sized dimensions share the
/// factor, broadcast ones (size 1) have none.
DimFactors broadcastDims(const ShardingRule &rule, RankedTensorType operand,
                         ArrayRef<int> factors) {
  DimFactors dims;
  int64_t offset = static_cast<int64_t>(factors.size()) - operand.getRank();
  for (int64_t i = 0; i < operand.getRank(); ++i) {
    int f = factors[offset + i];
    if (operand.getDimSize(i) == rule.factors[f].size)
      dims.push_back({f});
    else
      dims.push_back({});
  }
  return dims;
}

/// Elementwise ops with numpy broadcasting: one factor per dimension of the
/// (first) result; every result has that shape.
ShardingRule elementwise(Operation *op) {
  ShardingRule rule;
  SmallVector<int> f = factorsFor(rule, typeOf(op->getResult(0)));
  for (Value operand : op->getOperands())
    rule.operands.push_back(broadcastDims(rule, typeOf(operand), f));
  for (Value result : op->getResults())
    rule.results.push_back(broadcastDims(rule, typeOf(result), f));
  return rule;
}

/// Ops along one axis (softmax): elementwise, with that axis blocked.
ShardingRule elementwiseBlockedAxis(Operation *op, int64_t axis) {
  ShardingRule rule = elementwise(op);
  if (axis >= 0 && axis < static_cast<int64_t>(rule.factors.size()))
    rule.factors[axis].kind = FactorKind::Blocked;
  return rule;
}

/// Reductions over `axes` of the first operand: the result keeps the other
/// factors (and size-1 dimensions with `keepDims`).
ShardingRule reduction(Operation *op, Value input, ArrayRef<int64_t> axes,
                       bool keepDims, FactorKind reducedKind, bool mean) {
  ShardingRule rule;
  SmallVector<int> f = factorsFor(rule, typeOf(input));
  DimFactors reduced;
  for (int64_t d = 0; d < static_cast<int64_t>(f.size()); ++d) {
    if (llvm::is_contained(axes, d)) {
      rule.factors[f[d]].kind = reducedKind;
      rule.factors[f[d]].meanScaled = mean;
      if (keepDims)
        reduced.push_back({});
    } else {
      reduced.push_back({f[d]});
    }
  }
  rule.operands.push_back(dimsOf(f));
  rule.results.push_back(reduced);
  return rule;
}

/// Window ops on NCHW (pooling and its gradients): N and C split, the
/// spatial dimensions never.
DimFactors nchw(int n, int c) { return {{n}, {c}, {}, {}}; }

} // namespace

ShardingRule ShardingRule::elementwise(Operation *op, bool linear) {
  ShardingRule rule = ::elementwise(op);
  rule.linear = linear;
  return rule;
}

ShardingRule ShardingRule::replicatedOnly(Operation *op) {
  ShardingRule rule;
  auto blocked = [&](Value v) {
    DimFactors dims;
    for (int64_t size : typeOf(v).getShape())
      dims.push_back({rule.addFactor(size, FactorKind::Blocked)});
    return dims;
  };
  for (Value v : op->getOperands())
    rule.operands.push_back(blocked(v));
  for (Value v : op->getResults())
    rule.results.push_back(blocked(v));
  return rule;
}

Operation *loom::buildLocalOpByCloning(Operation *op, OpBuilder &builder,
                                       ValueRange operands,
                                       TypeRange resultTypes) {
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(operands);
  state.addTypes(resultTypes);
  state.addAttributes(op->getAttrs());
  Operation *local = builder.create(state);
  if (auto slice = dyn_cast<SliceOp>(local))
    slice.setSizes(cast<RankedTensorType>(resultTypes.front()).getShape());
  return local;
}

//===----------------------------------------------------------------------===//
// Elementwise and optimizer ops
//===----------------------------------------------------------------------===//

#define LOOM_ELEMENTWISE_RULE(OP)                                              \
  ShardingRule OP::getShardingRule() { return elementwise(*this); }
// The binary and unary elementwise ops (Loom_BinaryOp, Loom_UnaryOp) take
// ShardingRule::elementwise from their ODS class.
LOOM_ELEMENTWISE_RULE(SelectOp)
LOOM_ELEMENTWISE_RULE(BroadcastOp)
LOOM_ELEMENTWISE_RULE(ReluGradOp)
LOOM_ELEMENTWISE_RULE(GeluGradOp)
LOOM_ELEMENTWISE_RULE(SgdUpdateOp)
LOOM_ELEMENTWISE_RULE(MomentumUpdateOp)
LOOM_ELEMENTWISE_RULE(AdamUpdateOp)
#undef LOOM_ELEMENTWISE_RULE

// A cast that widens a float is exact, so it commutes with a sum over
// ranks: a bf16 partial weight gradient is cast to f32 and accumulated
// over micro-batches before its one reduction. A narrowing or integer cast
// rounds each rank's part, so its input must be summed first.
ShardingRule CastOp::getShardingRule() {
  auto from = dyn_cast<FloatType>(typeOf(getInput()).getElementType());
  auto to = dyn_cast<FloatType>(typeOf(getResult()).getElementType());
  bool widening = from && to &&
                  llvm::APFloat::isRepresentableBy(from.getFloatSemantics(),
                                                   to.getFloatSemantics());
  return ShardingRule::elementwise(*this, widening);
}

// The triangle's mask depends on the global row and column: the batch
// dimensions split, the matrix dimensions never.
ShardingRule TriluOp::getShardingRule() {
  ShardingRule rule = elementwise(*this);
  for (size_t d = rule.factors.size() - 2; d < rule.factors.size(); ++d)
    rule.factors[d].kind = FactorKind::Blocked;
  return rule;
}

#define LOOM_REPLICATED_RULE(OP)                                               \
  ShardingRule OP::getShardingRule() {                                         \
    return ShardingRule::replicatedOnly(*this);                                \
  }
// A constant is materialised whole; a split use takes its chunk locally.
LOOM_REPLICATED_RULE(ConstantOp)
// Collectives exist only in per-device programs.
LOOM_REPLICATED_RULE(AllReduceOp)
LOOM_REPLICATED_RULE(ReduceScatterOp)
LOOM_REPLICATED_RULE(AllGatherOp)
LOOM_REPLICATED_RULE(AllToAllOp)
LOOM_REPLICATED_RULE(LocalSplitOp)
LOOM_REPLICATED_RULE(MakePartialOp)
#undef LOOM_REPLICATED_RULE

//===----------------------------------------------------------------------===//
// Linear algebra, normalisation, reductions
//===----------------------------------------------------------------------===//

/// loom.matmul's rule over `lhs`, `rhs` and `result`; `n` is set to the
/// factor of the result's last dimension.
static ShardingRule matmulRule(RankedTensorType lhs, RankedTensorType rhs,
                               RankedTensorType result, bool transposeLhs,
                               bool transposeRhs, int &n) {
  ShardingRule rule;
  int64_t batchRank = result.getRank() - 2;
  SmallVector<int> batch;
  for (int64_t d = 0; d < batchRank; ++d)
    batch.push_back(rule.addFactor(result.getDimSize(d)));
  int m = rule.addFactor(result.getDimSize(batchRank));
  n = rule.addFactor(result.getDimSize(batchRank + 1));
  int64_t kSize = lhs.getDimSize(lhs.getRank() - (transposeLhs ? 2 : 1));
  int k = rule.addFactor(kSize, FactorKind::Reduction);
  auto side = [&](RankedTensorType t, int outer, int inner, bool transposed) {
    DimFactors dims;
    int64_t tBatch = t.getRank() - 2, offset = batchRank - tBatch;
    for (int64_t d = 0; d < tBatch; ++d) {
      int f = batch[offset + d];
      if (t.getDimSize(d) == rule.factors[f].size)
        dims.push_back({f});
      else
        dims.push_back({});
    }
    dims.push_back({transposed ? inner : outer});
    dims.push_back({transposed ? outer : inner});
    return dims;
  };
  rule.operands.push_back(side(lhs, m, k, transposeLhs));
  rule.operands.push_back(side(rhs, k, n, transposeRhs));
  SmallVector<int> out(batch);
  out.push_back(m);
  out.push_back(n);
  rule.results.push_back(dimsOf(out));
  return rule;
}

ShardingRule MatmulOp::getShardingRule() {
  int n;
  return matmulRule(typeOf(getLhs()), typeOf(getRhs()), typeOf(getResult()),
                    getTransposeLhs(), getTransposeRhs(), n);
}

ShardingRule FusedMatmulOp::getShardingRule() {
  int n;
  ShardingRule rule =
      matmulRule(typeOf(getLhs()), typeOf(getRhs()), typeOf(getResult()),
                 getTransposeLhs(), getTransposeRhs(), n);
  // The sum over k must be complete before the bias (and relu) apply.
  for (auto &factor : rule.factors)
    if (factor.kind == FactorKind::Reduction)
      factor.kind = FactorKind::Blocked;
  rule.operands.push_back(dimsOf(ArrayRef<int>{n}));
  return rule;
}

ShardingRule SoftmaxOp::getShardingRule() {
  return elementwiseBlockedAxis(*this, getAxis());
}
ShardingRule LogSoftmaxOp::getShardingRule() {
  return elementwiseBlockedAxis(*this, getAxis());
}

ShardingRule LayerNormOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int> f = factorsFor(rule, typeOf(getInput()));
  int64_t axis = getAxis();
  for (int64_t d = axis; d < static_cast<int64_t>(f.size()); ++d)
    rule.factors[f[d]].kind = FactorKind::Blocked;
  DimFactors normalized = dimsOf(ArrayRef<int>(f).drop_front(axis));
  rule.operands.push_back(dimsOf(f));
  for (size_t i = 1; i < getNumOperands(); ++i)
    rule.operands.push_back(normalized);
  rule.results.push_back(dimsOf(f));
  return rule;
}

ShardingRule LayerNormGradOp::getShardingRule() {
  // (input, scale, grad) -> (input_grad, scale_grad, bias_grad): the rows
  // are summed away in the scale and bias gradients.
  ShardingRule rule;
  SmallVector<int> f = factorsFor(rule, typeOf(getInput()));
  int64_t axis = getAxis();
  for (int64_t d = 0; d < static_cast<int64_t>(f.size()); ++d)
    rule.factors[f[d]].kind =
        d < axis ? FactorKind::Reduction : FactorKind::Blocked;
  DimFactors normalized = dimsOf(ArrayRef<int>(f).drop_front(axis));
  rule.operands = {dimsOf(f), normalized, dimsOf(f)};
  rule.results = {dimsOf(f), normalized, normalized};
  return rule;
}

ShardingRule BatchNormOp::getShardingRule() {
  // The inference form is elementwise per channel.
  ShardingRule rule;
  SmallVector<int> f = factorsFor(rule, typeOf(getInput()));
  rule.operands.push_back(dimsOf(f));
  for (size_t i = 1; i < getNumOperands(); ++i)
    rule.operands.push_back({{f[1]}});
  rule.results.push_back(dimsOf(f));
  return rule;
}

ShardingRule ReduceSumOp::getShardingRule() {
  return reduction(*this, getInput(), getAxes(), getKeepDims(),
                   FactorKind::Reduction, /*mean=*/false);
}
ShardingRule ReduceMeanOp::getShardingRule() {
  return reduction(*this, getInput(), getAxes(), getKeepDims(),
                   FactorKind::Reduction, /*mean=*/true);
}
ShardingRule ReduceMaxOp::getShardingRule() {
  return reduction(*this, getInput(), getAxes(), getKeepDims(),
                   FactorKind::Blocked, /*mean=*/false);
}

ShardingRule ReduceProdOp::getShardingRule() {
  // No collective multiplies partial products: the reduced dimensions whole.
  return reduction(*this, getInput(), getAxes(), getKeepDims(),
                   FactorKind::Blocked, /*mean=*/false);
}

ShardingRule ReduceProdGradOp::getShardingRule() {
  // (input, grad) -> input_grad: the reduced dimensions whole.
  ShardingRule rule = reduction(*this, getInput(), getAxes(), getKeepDims(),
                                FactorKind::Blocked, /*mean=*/false);
  DimFactors full = rule.operands.front(), reduced = rule.results.front();
  rule.operands = {full, reduced};
  rule.results = {full};
  return rule;
}

ShardingRule CumSumOp::getShardingRule() {
  return elementwiseBlockedAxis(*this, getAxis());
}

ShardingRule TopKOp::getShardingRule() {
  // The selection needs the whole axis; the other dimensions split.
  ShardingRule rule;
  int64_t axis = getAxis();
  SmallVector<int> f = factorsFor(rule, typeOf(getInput()));
  rule.factors[f[axis]].kind = FactorKind::Blocked;
  SmallVector<int> out(f);
  out[axis] = rule.addFactor(getK(), FactorKind::Blocked);
  rule.operands = {dimsOf(f)};
  rule.results = {dimsOf(out), dimsOf(out)};
  return rule;
}

ShardingRule ArgMaxOp::getShardingRule() {
  // The indices are positions along the whole axis: it is not split.
  int64_t axes[] = {static_cast<int64_t>(getAxis())};
  return reduction(*this, getInput(), axes, getKeepDims(), FactorKind::Blocked,
                   /*mean=*/false);
}
ShardingRule ArgMinOp::getShardingRule() {
  int64_t axes[] = {static_cast<int64_t>(getAxis())};
  return reduction(*this, getInput(), axes, getKeepDims(), FactorKind::Blocked,
                   /*mean=*/false);
}

ShardingRule ReduceMaxGradOp::getShardingRule() {
  // (input, result, grad) -> input_grad: the reduced dimensions whole.
  ShardingRule rule = reduction(*this, getInput(), getAxes(), getKeepDims(),
                                FactorKind::Blocked, /*mean=*/false);
  DimFactors full = rule.operands.front(), reduced = rule.results.front();
  rule.operands = {full, reduced, reduced};
  rule.results = {full};
  return rule;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int> f = factorsFor(rule, typeOf(getInput()));
  rule.operands.push_back(dimsOf(f));
  DimFactors out;
  for (int64_t p : getPermutation())
    out.push_back({f[p]});
  rule.results.push_back(out);
  // Moving elements commutes with a sum over ranks: a partial input gives
  // a partial result.
  rule.linear = true;
  return rule;
}

ShardingRule ReshapeOp::getShardingRule() {
  // Group dimensions whose products match. A group of one input dimension
  // and several output dimensions (or the reverse) is one dimension made
  // of factors; a group with several on both sides never splits.
  ShardingRule rule;
  ArrayRef<int64_t> in = typeOf(getInput()).getShape();
  ArrayRef<int64_t> out = typeOf(getResult()).getShape();
  DimFactors inDims(in.size()), outDims(out.size());
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    if (i < in.size() && in[i] == 1) {
      ++i;
      continue;
    }
    if (j < out.size() && out[j] == 1) {
      ++j;
      continue;
    }
    if (i >= in.size() || j >= out.size())
      break; // unreachable for equal element counts
    SmallVector<size_t> gi{i}, gj{j};
    int64_t pi = in[i++], pj = out[j++];
    while (pi != pj) {
      if (pi < pj && i < in.size()) {
        pi *= in[i];
        gi.push_back(i++);
      } else if (j < out.size()) {
        pj *= out[j];
        gj.push_back(j++);
      } else {
        break;
      }
    }
    if (gi.size() == 1) {
      for (size_t d : gj) {
        int f = rule.addFactor(out[d]);
        outDims[d].push_back(f);
        inDims[gi[0]].push_back(f);
      }
    } else if (gj.size() == 1) {
      for (size_t d : gi) {
        int f = rule.addFactor(in[d]);
        inDims[d].push_back(f);
        outDims[gj[0]].push_back(f);
      }
    }
  }
  rule.operands.push_back(inDims);
  rule.results.push_back(outDims);
  rule.linear = true;
  return rule;
}

ShardingRule GatherOp::getShardingRule() {
  ShardingRule rule;
  RankedTensorType input = typeOf(getInput());
  int64_t axis = getAxis();
  SmallVector<int> f = factorsFor(rule, input);
  rule.factors[f[axis]].kind = FactorKind::Blocked;
  SmallVector<int> idx = factorsFor(rule, typeOf(getIndices()));
  SmallVector<int> out(f.begin(), f.begin() + axis);
  out.append(idx.begin(), idx.end());
  out.append(f.begin() + axis + 1, f.end());
  rule.operands = {dimsOf(f), dimsOf(idx)};
  rule.results = {dimsOf(out)};
  return rule;
}

/// gather_elements and scatter_elements: the dimensions of `indices` (and
/// `updates`) are those of `data` where their sizes agree outside `axis`;
/// `axis` and the dimensions where they differ are whole (`dataFactors`
/// are the data's, one per dimension).
static DimFactors elementIndexDims(ShardingRule &rule, RankedTensorType data,
                                   RankedTensorType indices, int64_t axis,
                                   SmallVector<int> &dataFactors) {
  DimFactors dims;
  for (int64_t d = 0; d < indices.getRank(); ++d) {
    if (d != axis && indices.getDimSize(d) == data.getDimSize(d)) {
      dims.push_back({dataFactors[d]});
      continue;
    }
    rule.factors[dataFactors[d]].kind = FactorKind::Blocked;
    dims.push_back(
        {rule.addFactor(indices.getDimSize(d), FactorKind::Blocked)});
  }
  return dims;
}

ShardingRule GatherElementsOp::getShardingRule() {
  ShardingRule rule;
  RankedTensorType input = typeOf(getInput());
  SmallVector<int> f = factorsFor(rule, input);
  DimFactors idx =
      elementIndexDims(rule, input, typeOf(getIndices()), getAxis(), f);
  rule.operands = {dimsOf(f), idx};
  rule.results = {idx};
  return rule;
}

ShardingRule ScatterElementsOp::getShardingRule() {
  ShardingRule rule;
  RankedTensorType data = typeOf(getData());
  SmallVector<int> f = factorsFor(rule, data);
  DimFactors idx =
      elementIndexDims(rule, data, typeOf(getIndices()), getAxis(), f);
  rule.operands = {dimsOf(f), idx, idx};
  rule.results = {dimsOf(f)};
  return rule;
}

ShardingRule GatherGradOp::getShardingRule() {
  // (indices, grad) -> the gathered tensor's gradient: a scatter-add, so
  // the index dimensions are summed away.
  ShardingRule rule;
  RankedTensorType result = typeOf(getResult());
  int64_t axis = getAxis();
  SmallVector<int> f = factorsFor(rule, result);
  rule.factors[f[axis]].kind = FactorKind::Blocked;
  SmallVector<int> idx =
      factorsFor(rule, typeOf(getIndices()), FactorKind::Reduction);
  SmallVector<int> grad(f.begin(), f.begin() + axis);
  grad.append(idx.begin(), idx.end());
  grad.append(f.begin() + axis + 1, f.end());
  rule.operands = {dimsOf(idx), dimsOf(grad)};
  rule.results = {dimsOf(f)};
  return rule;
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int> f = factorsFor(rule, typeOf(getResult()));
  int64_t axis = getAxis();
  rule.factors[f[axis]].kind = FactorKind::Blocked;
  DimFactors operand = dimsOf(f);
  operand[axis].clear();
  for (size_t i = 0; i < getNumOperands(); ++i)
    rule.operands.push_back(operand);
  rule.results.push_back(dimsOf(f));
  return rule;
}

/// Dimensions a slice (or its gradient) keeps whole: start 0, stride 1 and
/// the full extent. Only those may be split.
static ShardingRule sliceRule(RankedTensorType whole, RankedTensorType part,
                              ArrayRef<int64_t> starts,
                              ArrayRef<int64_t> strides, bool partIsOperand) {
  ShardingRule rule;
  DimFactors wholeDims, partDims;
  for (int64_t d = 0; d < whole.getRank(); ++d) {
    if (starts[d] == 0 && strides[d] == 1 &&
        part.getDimSize(d) == whole.getDimSize(d)) {
      int f = rule.addFactor(whole.getDimSize(d));
      wholeDims.push_back({f});
      partDims.push_back({f});
    } else {
      wholeDims.push_back({});
      partDims.push_back({});
    }
  }
  rule.operands.push_back(partIsOperand ? partDims : wholeDims);
  rule.results.push_back(partIsOperand ? wholeDims : partDims);
  return rule;
}

ShardingRule SliceOp::getShardingRule() {
  return sliceRule(typeOf(getInput()), typeOf(getResult()), getStarts(),
                   getStrides(), /*partIsOperand=*/false);
}
ShardingRule SliceGradOp::getShardingRule() {
  return sliceRule(typeOf(getResult()), typeOf(getGrad()), getStarts(),
                   getStrides(), /*partIsOperand=*/true);
}

/// A pad (or its gradient): a dimension padded at neither end keeps its
/// factor; a padded one is whole, since its border reads the other end of
/// the dimension (reflect, edge) or sits on one device only.
/// Operand and result have the same factors either way. A pad with zeros
/// is linear: it pads a partial sum's terms as well as their sum (optimizer
/// sharding pads a weight gradient before its reduce-scatter so).
static ShardingRule padRule(RankedTensorType unpadded, ArrayRef<int64_t> low,
                            ArrayRef<int64_t> high, bool zeros) {
  ShardingRule rule;
  rule.linear = zeros;
  DimFactors dims;
  for (int64_t d = 0; d < unpadded.getRank(); ++d) {
    if (low[d] == 0 && high[d] == 0)
      dims.push_back({rule.addFactor(unpadded.getDimSize(d))});
    else
      dims.push_back({});
  }
  rule.operands.push_back(dims);
  rule.results.push_back(dims);
  return rule;
}

ShardingRule PadOp::getShardingRule() {
  return padRule(typeOf(getInput()), getLow(), getHigh(),
                 getMode() == "constant" && getValue().isZero());
}
ShardingRule PadGradOp::getShardingRule() {
  return padRule(typeOf(getResult()), getLow(), getHigh(), /*zeros=*/false);
}

/// A resize (or its gradient): a dimension of scale 1 that keeps its size
/// keeps its factor (nearest and linear then read the same coordinate,
/// except tf_half_pixel_for_nn, whose half-pixel shift rounds across
/// elements); a resized one is whole, since its taps cross shard borders.
static ShardingRule resizeRule(RankedTensorType in, RankedTensorType out,
                               ArrayRef<int64_t> num, ArrayRef<int64_t> den,
                               StringRef coord) {
  ShardingRule rule;
  DimFactors dims;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (num[d] == den[d] && in.getDimSize(d) == out.getDimSize(d) &&
        coord != "tf_half_pixel_for_nn")
      dims.push_back({rule.addFactor(in.getDimSize(d))});
    else
      dims.push_back({});
  }
  rule.operands.push_back(dims);
  rule.results.push_back(dims);
  return rule;
}

ShardingRule ResizeOp::getShardingRule() {
  return resizeRule(typeOf(getInput()), typeOf(getResult()), getScaleNum(),
                    getScaleDen(), getCoordinateTransformationMode());
}
ShardingRule ResizeGradOp::getShardingRule() {
  return resizeRule(typeOf(getResult()), typeOf(getGrad()), getScaleNum(),
                    getScaleDen(), getCoordinateTransformationMode());
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

namespace {
/// The factors of a convolution: N, C (input channels), O (output
/// channels). Grouped convolutions keep the channels whole.
struct ConvFactors {
  int n, c, o;
};
ConvFactors convFactors(ShardingRule &rule, int64_t n, int64_t c, int64_t o,
                        int64_t groups, FactorKind nKind, FactorKind cKind,
                        FactorKind oKind) {
  bool grouped = groups != 1;
  return {rule.addFactor(n, nKind),
          rule.addFactor(c, grouped ? FactorKind::Blocked : cKind),
          rule.addFactor(o, grouped ? FactorKind::Blocked : oKind)};
}
} // namespace

ShardingRule Conv2DOp::getShardingRule() {
  ShardingRule rule;
  RankedTensorType in = typeOf(getInput()), w = typeOf(getWeight());
  // With a bias the sum over C must be complete before the bias applies.
  ConvFactors f =
      convFactors(rule, in.getDimSize(0), in.getDimSize(1), w.getDimSize(0),
                  getGroups(), FactorKind::Parallel,
                  getBias() ? FactorKind::Blocked : FactorKind::Reduction,
                  FactorKind::Parallel);
  rule.operands = {nchw(f.n, f.c), {{f.o}, {f.c}, {}, {}}};
  if (getBias())
    rule.operands.push_back({{f.o}});
  rule.results = {nchw(f.n, f.o)};
  return rule;
}

ShardingRule Conv2DGradInputOp::getShardingRule() {
  // (grad [N, O, ...], weight [O, C, ...]) -> [N, C, ...]
  ShardingRule rule;
  RankedTensorType g = typeOf(getGrad()), out = typeOf(getResult());
  ConvFactors f = convFactors(
      rule, g.getDimSize(0), out.getDimSize(1), g.getDimSize(1), getGroups(),
      FactorKind::Parallel, FactorKind::Parallel, FactorKind::Reduction);
  rule.operands = {nchw(f.n, f.o), {{f.o}, {f.c}, {}, {}}};
  rule.results = {nchw(f.n, f.c)};
  return rule;
}

ShardingRule ConvTranspose2DOp::getShardingRule() {
  // (input [N, C, ...], weight [C, O/g, ...], bias [O]) -> [N, O, ...]:
  // conv2d_grad_input's factors, C contracted (whole with a bias, whose
  // add must follow the complete sum).
  ShardingRule rule;
  RankedTensorType in = typeOf(getInput()), out = typeOf(getResult());
  ConvFactors f =
      convFactors(rule, in.getDimSize(0), out.getDimSize(1), in.getDimSize(1),
                  getGroups(), FactorKind::Parallel, FactorKind::Parallel,
                  getBias() ? FactorKind::Blocked : FactorKind::Reduction);
  // Here f.c is the output channels and f.o the input channels.
  rule.operands = {nchw(f.n, f.o), {{f.o}, {f.c}, {}, {}}};
  if (getBias())
    rule.operands.push_back({{f.c}});
  rule.results = {nchw(f.n, f.c)};
  return rule;
}

ShardingRule Conv2DGradWeightOp::getShardingRule() {
  // (input [N, C, ...], grad [N, O, ...]) -> [O, C, ...]
  ShardingRule rule;
  RankedTensorType in = typeOf(getInput()), g = typeOf(getGrad());
  ConvFactors f = convFactors(
      rule, in.getDimSize(0), in.getDimSize(1), g.getDimSize(1), getGroups(),
      FactorKind::Reduction, FactorKind::Parallel, FactorKind::Parallel);
  rule.operands = {nchw(f.n, f.c), nchw(f.n, f.o)};
  rule.results = {{{f.o}, {f.c}, {}, {}}};
  return rule;
}

namespace {
ShardingRule pooling(Operation *op) {
  ShardingRule rule;
  RankedTensorType t = typeOf(op->getResult(0));
  int n = rule.addFactor(t.getDimSize(0)), c = rule.addFactor(t.getDimSize(1));
  for (size_t i = 0; i < op->getNumOperands(); ++i)
    rule.operands.push_back(nchw(n, c));
  rule.results.push_back(nchw(n, c));
  return rule;
}
} // namespace

ShardingRule MaxPool2DOp::getShardingRule() { return pooling(*this); }
ShardingRule AvgPool2DOp::getShardingRule() { return pooling(*this); }
ShardingRule MaxPool2DGradOp::getShardingRule() { return pooling(*this); }
ShardingRule AvgPool2DGradOp::getShardingRule() { return pooling(*this); }

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

ShardingRule SoftmaxCrossEntropyOp::getShardingRule() {
  // A summed loss splits over rows as a partial sum. A mean divides by the
  // number of counted rows, which no shard knows, so its rows stay whole
  // (the training graph builds means as sum / label_count instead).
  ShardingRule rule;
  RankedTensorType logits = typeOf(getLogits());
  int n = rule.addFactor(logits.getDimSize(0), getSum() ? FactorKind::Reduction
                                                        : FactorKind::Blocked);
  // The classes split too (vocabulary-parallel cross-entropy): each block's
  // share of the loss needs the rows' log-sum-exp over all classes, which
  // loom-partition combines from the blocks' log-sum-exps; the
  // shares then sum to the loss, a partial sum over the class axes.
  int c = rule.addFactor(logits.getDimSize(1), FactorKind::Reduction);
  rule.factors[c].combined = true;
  rule.operands = {{{n}, {c}}, {{n}}};
  rule.results = {{}};
  return rule;
}

ShardingRule SoftmaxCrossEntropyGradOp::getShardingRule() {
  ShardingRule rule;
  RankedTensorType logits = typeOf(getLogits());
  int n = rule.addFactor(logits.getDimSize(0),
                         getSum() ? FactorKind::Parallel : FactorKind::Blocked);
  // Each class block's gradient from the rows' global log-sum-exp, which
  // loom-partition combines as for the loss.
  int c = rule.addFactor(logits.getDimSize(1));
  rule.factors[c].combined = true;
  rule.operands = {{{n}, {c}}, {{n}}, {}};
  rule.results = {{{n}, {c}}};
  return rule;
}

ShardingRule LabelCountOp::getShardingRule() {
  ShardingRule rule;
  int n =
      rule.addFactor(typeOf(getLabels()).getDimSize(0), FactorKind::Reduction);
  rule.operands = {{{n}}};
  rule.results = {{}};
  return rule;
}

ShardingRule MseLossOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int> f =
      factorsFor(rule, typeOf(getPrediction()), FactorKind::Reduction);
  for (int x : f)
    rule.factors[x].meanScaled = !getSum();
  rule.operands = {dimsOf(f), dimsOf(f)};
  rule.results = {{}};
  return rule;
}
