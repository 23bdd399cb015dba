//===- Cost.cpp - The work of each loom op, for the cost model ------------===//
//
// FLOPs count multiply-adds as two operations. Bytes are every operand read
// once and every result written once (what a roofline needs).
//
//===----------------------------------------------------------------------===//

#include "dialects/LoomDialect.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace loom {

namespace {

double elements(RankedTensorType t) {
  return static_cast<double>(t.getNumElements());
}

double bytesOf(RankedTensorType t) {
  unsigned bits = t.getElementType().getIntOrFloatBitWidth();
  return elements(t) * std::max(1u, bits / 8);
}

} // namespace

OpWork estimateWork(Operation *op, ArrayRef<RankedTensorType> operands,
                    ArrayRef<RankedTensorType> results) {
  OpWork work;
  for (RankedTensorType t : operands)
    work.bytes += bytesOf(t);
  for (RankedTensorType t : results)
    work.bytes += bytesOf(t);
  double out = results.empty() ? 0 : elements(results.front());
  double in = operands.empty() ? 0 : elements(operands.front());
  work.flops = out;
  // A slice reads only the elements it keeps, not its whole operand (each
  // gradient's slice of a loom-bucket-gradients bucket reads 1/n of it).
  if (isa<SliceOp>(op) && !operands.empty() && !results.empty())
    work.bytes = 2 * bytesOf(results.front());
  llvm::TypeSwitch<Operation *>(op)
      .Case<MatmulOp, FusedMatmulOp>([&](Operation *) {
        // 2 M N K per output batch: K from the lhs (plus the epilogue's
        // element ops, negligible).
        RankedTensorType lhs = operands[0];
        bool transposed = op->hasAttr("transpose_lhs");
        int64_t k = lhs.getDimSize(lhs.getRank() - (transposed ? 2 : 1));
        work.flops = 2.0 * out * static_cast<double>(k);
        work.kernelClass = "matmul";
      })
      .Case<Conv2DOp, Conv2DGradInputOp, Conv2DGradWeightOp, ConvTranspose2DOp>(
          [&](Operation *) {
            // 2 x (multiply-adds of the convolution): output elements times
            // the window (C/g x KH x KW), counted on the forward's shapes
            // (conv_transpose2d: the convolution whose input gradient it is).
            RankedTensorType weight =
                isa<Conv2DGradWeightOp>(op) ? results[0] : operands[1];
            RankedTensorType conv = isa<Conv2DOp>(op)             ? results[0]
                                    : isa<Conv2DGradWeightOp>(op) ? operands[1]
                                                                  : operands[0];
            double window = static_cast<double>(weight.getDimSize(1) *
                                                weight.getDimSize(2) *
                                                weight.getDimSize(3));
            work.flops = 2.0 * elements(conv) * window;
            work.kernelClass = "conv";
          })
      .Case<SoftmaxOp, LogSoftmaxOp, SoftmaxCrossEntropyOp,
            SoftmaxCrossEntropyGradOp>([&](Operation *) {
        work.flops = 5.0 * in; // max, subtract, exp, sum, divide
        work.kernelClass = "reduction";
      })
      .Case<LayerNormOp, LayerNormGradOp, BatchNormOp>([&](Operation *) {
        work.flops = 8.0 * in;
        work.kernelClass = "reduction";
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, LabelCountOp, MseLossOp>(
          [&](Operation *) {
            work.flops = in;
            work.kernelClass = "reduction";
          })
      .Case<MaxPool2DOp, AvgPool2DOp, MaxPool2DGradOp, AvgPool2DGradOp>(
          [&](Operation *) {
            work.flops = std::max(in, out);
            work.kernelClass = "reduction";
          })
      .Case<ResizeOp, ResizeGradOp>([&](Operation *) {
        // Memory-bound: per element of the larger side, a few index
        // computations and, in linear mode, a weighted tap per neighbour.
        work.flops = 4.0 * std::max(in, out);
        work.kernelClass = "other";
      })
      .Case<ExpOp, LogOp, PowOp, ErfOp, TanhOp, SigmoidOp, GeluOp, GeluGradOp,
            CosOp, SinOp, SoftplusOp, MishOp, EluOp, SeluOp>(
          [&](Operation *) { work.kernelClass = "transcendental"; })
      .Case<UnaryGradOp>([&](UnaryGradOp grad) {
        // The derivative of a smooth function evaluates one; that of a
        // piecewise-linear one (abs, clip, hard_swish, ...) compares.
        static const llvm::StringSet<> smooth = {"cos",  "sin", "softplus",
                                                 "mish", "elu", "selu"};
        if (smooth.contains(grad.getFn()))
          work.kernelClass = "transcendental";
      })
      .Case<AdamUpdateOp>([&](AdamUpdateOp) { work.flops = 12.0 * in; })
      .Case<MomentumUpdateOp>([&](MomentumUpdateOp) { work.flops = 4.0 * in; })
      .Case<SgdUpdateOp>([&](SgdUpdateOp) { work.flops = 2.0 * in; })
      .Case<ReshapeOp>([&](ReshapeOp reshape) {
        work.flops = 0;
        if (reshapeIsFree(reshape.getInput()))
          work.bytes = 0;
        work.kernelClass = "other";
      })
      .Case<TransposeOp, BroadcastOp, GatherOp, GatherGradOp, ConcatOp, SliceOp,
            SliceGradOp, PadOp, ConstantOp, CastOp>([&](Operation *) {
        work.flops = 0;
        work.kernelClass = "other";
      })
      .Case<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp, LocalSplitOp,
            MakePartialOp>([&](Operation *) {
        work.flops = 0; // communication: the cost model prices it apart
        work.kernelClass = "other";
      })
      .Default([](Operation *) {});
  work.kernel = op->getName().stripDialect().str();
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    if (!perm.empty() && perm.back() != static_cast<int64_t>(perm.size()) - 1)
      work.kernel = "transpose_innermost";
  }
  return work;
}

} // namespace loom
