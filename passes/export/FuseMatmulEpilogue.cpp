//===- FuseMatmulEpilogue.cpp - Transposes and bias epilogues into GEMMs --===//
//
// A per-device program computes a linear layer as `transpose` of the weight,
// `matmul`, and `add` of the bias: three kernels, two of which stream a whole
// tensor through memory for no arithmetic. GEMM libraries take transposed
// operands as strides and a bias (and relu) as an epilogue applied while the
// product is still in registers, so this pass hands them both.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "loom-fuse-matmul-epilogue"

namespace loom {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUE
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The input of `v`'s defining transpose if that transpose swaps exactly the
/// last two dimensions, else null.
Value swappedInput(Value v) {
  auto transpose = v.getDefiningOp<TransposeOp>();
  if (!transpose)
    return {};
  ArrayRef<int64_t> perm = transpose.getPermutation();
  int64_t rank = static_cast<int64_t>(perm.size());
  if (rank < 2)
    return {};
  for (int64_t d = 0; d < rank - 2; ++d)
    if (perm[d] != d)
      return {};
  if (perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return {};
  return transpose.getInput();
}

/// Folds transposes of the last two dimensions into the matmul's flags.
/// Collects in `touched` the transposes that lost a user.
void foldTransposes(MatmulOp matmul, llvm::SetVector<Operation *> &touched) {
  if (Value in = swappedInput(matmul.getLhs())) {
    touched.insert(matmul.getLhs().getDefiningOp());
    matmul.getLhsMutable().assign(in);
    matmul.setTransposeLhs(!matmul.getTransposeLhs());
  }
  if (Value in = swappedInput(matmul.getRhs())) {
    touched.insert(matmul.getRhs().getDefiningOp());
    matmul.getRhsMutable().assign(in);
    matmul.setTransposeRhs(!matmul.getTransposeRhs());
  }
}

/// The bias `add` adds to `matmul`'s result (its only user), if it is one:
/// a vector of the result's last dimension and element type, so that the
/// sum has the product's type.
AddOp biasAddOf(MatmulOp matmul, Value &bias) {
  if (!matmul->hasOneUse())
    return {};
  auto add = dyn_cast<AddOp>(*matmul->user_begin());
  if (!add || add.getType() != matmul.getType())
    return {};
  Value other =
      add.getLhs() == matmul.getResult() ? add.getRhs() : add.getLhs();
  if (other == matmul.getResult())
    return {};
  auto type = cast<RankedTensorType>(other.getType());
  auto result = cast<RankedTensorType>(matmul.getType());
  if (type.getRank() != 1 || type.getDimSize(0) != result.getShape().back() ||
      type.getElementType() != result.getElementType())
    return {};
  bias = other;
  return add;
}

struct FuseMatmulEpiloguePass
    : public loom::impl::FuseMatmulEpilogueBase<FuseMatmulEpiloguePass> {
  void runOnOperation() override {
    SmallVector<MatmulOp> matmuls;
    getOperation().walk([&](MatmulOp op) { matmuls.push_back(op); });
    llvm::SetVector<Operation *> transposes;
    for (MatmulOp matmul : matmuls) {
      foldTransposes(matmul, transposes);
      Value bias;
      AddOp add = biasAddOf(matmul, bias);
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

bool loom::isFoldedTranspose(Operation *op) {
  auto transpose = dyn_cast<TransposeOp>(op);
  return transpose && swappedInput(transpose.getResult()) &&
         !transpose->use_empty() &&
         llvm::all_of(transpose->getUsers(),
                      [](Operation *user) { return isa<MatmulOp>(user); });
}
