//===- FuseMatmulEpilogue.cpp - Transposes and bias epilogues into GEMMs --===//
//
// A per-device program computes a linear layer as `transpose` of the weight,
// `matmul`, and `add` of the bias: three kernels, two of which stream a whole
// tensor through memory for no arithmetic. GEMM libraries take transposed
// operands as strides and a bias (and relu) as an epilogue applied while the
// product is still in registers, so this pass hands them both. And a
// shared weight's gradient, a batch of products summed over the batch, is
// one GEMM over the flattened rows.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <algorithm>

#define DEBUG_TYPE "loom-fuse-matmul-epilogue"

namespace loom {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUE
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// Folds transposes of the last two dimensions into the matmul's flags.
/// Collects in `touched` the transposes that lost a user.
void foldTransposes(MatmulOp matmul, llvm::SetVector<Operation *> &touched) {
  if (Value in = swappedTransposeInput(matmul.getLhs())) {
    touched.insert(matmul.getLhs().getDefiningOp());
    matmul.getLhsMutable().assign(in);
    matmul.setTransposeLhs(!matmul.getTransposeLhs());
  }
  if (Value in = swappedTransposeInput(matmul.getRhs())) {
    touched.insert(matmul.getRhs().getDefiningOp());
    matmul.getRhsMutable().assign(in);
    matmul.setTransposeRhs(!matmul.getTransposeRhs());
  }
}

/// Rewrites `sum over its batch dimensions of matmul(x, y, transpose_lhs)`
/// (x: [batch.., m, p], y: [batch.., m, q]; the gradient of a weight every
/// batch shares) as one matmul of x and y flattened to [batch * m, p] and
/// [batch * m, q]: the same multiplications, in one GEMM, without the batch
/// of [p, q] products and the reduction over them. Taken when the flattened
/// operands' copies hold less than those products (a reshape of a
/// temporary copies nothing). True if rewritten.
bool flattenBatchedProduct(MatmulOp matmul) {
  if (!matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
      !matmul->hasOneUse())
    return false;
  auto sum = dyn_cast<ReduceSumOp>(*matmul->user_begin());
  auto type = cast<RankedTensorType>(matmul.getType());
  int64_t rank = type.getRank();
  if (!sum || rank < 3 || !type.hasStaticShape())
    return false;
  ArrayRef<int64_t> axes = sum.getAxes();
  if (static_cast<int64_t>(axes.size()) != rank - 2)
    return false;
  for (int64_t d = 0; d < rank - 2; ++d)
    if (axes[d] != d)
      return false;
  auto xType = cast<RankedTensorType>(matmul.getLhs().getType());
  auto yType = cast<RankedTensorType>(matmul.getRhs().getType());
  if (xType.getRank() != rank || yType.getRank() != rank ||
      !xType.hasStaticShape() || !yType.hasStaticShape())
    return false;
  ArrayRef<int64_t> shape = type.getShape();
  for (int64_t d = 0; d < rank - 2; ++d)
    if (xType.getDimSize(d) != shape[d] || yType.getDimSize(d) != shape[d])
      return false;
  int64_t p = shape[rank - 2], q = shape[rank - 1];
  int64_t rows = xType.getNumElements() / std::max<int64_t>(p, 1);
  int64_t batch = type.getNumElements() / std::max<int64_t>(p * q, 1);
  int64_t copies = (reshapeIsFree(matmul.getLhs()) ? 0 : rows * p) +
                   (reshapeIsFree(matmul.getRhs()) ? 0 : rows * q);
  if (p * q == 0 || copies >= batch * p * q)
    return false;
  OpBuilder b(matmul);
  Location loc = matmul.getLoc();
  SmallVector<Operation *> made;
  auto flat = [&](Value v, int64_t cols) {
    auto t = cast<RankedTensorType>(v.getType());
    auto r = ReshapeOp::create(
        b, loc, RankedTensorType::get({rows, cols}, t.getElementType()), v);
    made.push_back(r);
    return r.getResult();
  };
  Value x = flat(matmul.getLhs(), p), y = flat(matmul.getRhs(), q);
  auto one = MatmulOp::create(b, loc, x, y, b.getUnitAttr(), UnitAttr());
  made.push_back(one);
  Value product = one.getResult();
  if (product.getType() != sum.getType()) {
    auto r = ReshapeOp::create(b, loc, sum.getType(), product);
    made.push_back(r);
    product = r.getResult();
  }
  // The stage, micro-batch and recompute marks are the product's and the
  // sum's; the sum's result layouts go to the op that now makes its value;
  // the gradient's forward op is the product's, with no link to a forward
  // value (the operands are the flattened ones). Other annotations describe
  // an op's operands and results, which the new ops do not share.
  using D = LoomDialect;
  auto origin = matmul->getAttrOfType<DenseI64ArrayAttr>(D::kGradOfAttrName);
  for (Operation *op : made) {
    for (Operation *from : {matmul.getOperation(), sum.getOperation()})
      for (StringRef name :
           {D::kStageAttrName, D::kMicroBatchAttrName, D::kRecomputedAttrName})
        if (Attribute a = from->getAttr(name))
          op->setAttr(name, a);
    if (origin && !origin.empty()) {
      SmallVector<int64_t> links(1 + op->getNumOperands() + op->getNumResults(),
                                 -1);
      links[0] = origin[0];
      op->setAttr(D::kGradOfAttrName, b.getDenseI64ArrayAttr(links));
    }
  }
  if (Attribute a = sum->getAttr(D::kResultLayoutsAttrName))
    made.back()->setAttr(D::kResultLayoutsAttrName, a);
  LLVM_DEBUG(llvm::dbgs() << "flattened " << loc << "\n");
  sum.getResult().replaceAllUsesWith(product);
  sum.erase();
  matmul.erase();
  return true;
}

struct FuseMatmulEpiloguePass
    : public loom::impl::FuseMatmulEpilogueBase<FuseMatmulEpiloguePass> {
  void runOnOperation() override {
    SmallVector<MatmulOp> matmuls;
    getOperation().walk([&](MatmulOp op) { matmuls.push_back(op); });
    llvm::SetVector<Operation *> transposes;
    for (MatmulOp matmul : matmuls) {
      foldTransposes(matmul, transposes);
      if (flattenBatchedProduct(matmul))
        continue;
      Value bias;
      auto add = cast_or_null<AddOp>(matmulBiasAdd(matmul, bias));
      if (!add)
        continue;
      // At the product's place when the bias is ready there (the
      // operands then die no later than before), else at the sum's.
      Operation *biasOp = bias.getDefiningOp();
      OpBuilder builder(!biasOp || biasOp->isBeforeInBlock(matmul)
                            ? matmul.getOperation()
                            : add.getOperation());
      Operation *last = add;
      bool relu = false;
      if (add->hasOneUse())
        if (auto act = dyn_cast<ReluOp>(*add->user_begin())) {
          relu = true;
          last = act;
        }
      auto fused = FusedMatmulOp::create(
          builder, matmul.getLoc(), matmul.getLhs(), matmul.getRhs(), bias,
          matmul.getTransposeLhs(), matmul.getTransposeRhs(), relu);
      // Annotations (stage, recompute marks) are the sum's.
      for (NamedAttribute attr : add->getDiscardableAttrs())
        fused->setAttr(attr.getName(), attr.getValue());
      LLVM_DEBUG(llvm::dbgs() << "fused " << matmul.getLoc() << "\n");
      last->getResult(0).replaceAllUsesWith(fused.getResult());
      if (last != add.getOperation())
        last->erase();
      add.erase();
      matmul.erase();
    }
    for (Operation *transpose : transposes)
      if (transpose->use_empty())
        transpose->erase();
  }
};

} // namespace
