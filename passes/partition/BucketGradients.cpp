//===- BucketGradients.cpp - Gradient all-reduces packed into buckets -----===//
//
// The partitioner reduces each parameter's gradient with an all-reduce of
// its own, where its update needs it. Each collective pays a latency, and
// a model has hundreds of parameters, most of them small (biases, norms):
// DDP and Megatron-LM pack gradients into flat buckets and reduce each
// bucket once. This pass does the same on the per-device program, as a
// rewrite into existing ops (see Passes.td for why not a new op).
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"

#include <map>
#include <optional>

#define DEBUG_TYPE "loom-bucket-gradients"

namespace loom {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// An all-reduce that can join a bucket, with the positions that bound
/// where its bucket's reduction may go.
struct Member {
  AllReduceOp op;
  /// Position of the op that makes the gradient (the reduction can go
  /// right after it).
  unsigned ready = 0;
  /// Position of the first user of the reduced value (the reduction must
  /// come before it).
  unsigned firstUse = 0;
  int64_t bytes = 0;
  /// The reshapes, casts and local splits between the reduction and the
  /// updates, in program order: they move with the reduction.
  SmallVector<Operation *, 2> chain;
};

/// Whether `reduce` reduces a gradient: every path from its result ends
/// at an optimizer update, through ops that only change the gradient's
/// layout, type or slice (reshape, transpose, cast, ZeRO-1's local split), all
/// in `block`. Other all-reduces (the loss, tensor-parallel activations) are on
/// the step's critical path, and waiting for a bucket would delay their users.
/// Collects those ops in `chain` and the updates in `updates`.
bool reducesGradient(AllReduceOp reduce, Block &block,
                     SmallVectorImpl<Operation *> &chain,
                     SmallVectorImpl<Operation *> &updates) {
  SmallVector<Value> worklist{reduce.getResult()};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (v.use_empty())
      return false;
    for (Operation *user : v.getUsers()) {
      if (user->getBlock() != &block)
        return false;
      if (sharding::isOptimizerUpdate(user)) {
        updates.push_back(user);
        continue;
      }
      if (!isa<ReshapeOp, TransposeOp, CastOp, LocalSplitOp>(user))
        return false;
      chain.push_back(user);
      worklist.push_back(user->getResult(0));
    }
  }
  return true;
}

/// The bytes per device of `v`'s local tensor.
int64_t bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getNumElements() * sharding::elementBytes(type);
}

/// Rewrites the reductions of `members` (at least two, same element type
/// and axes) into one reduction of a flat buffer, placed after `after`
/// (the last gradient to be made), or first in `block` if null.
void emitBucket(ArrayRef<Member> members, Operation *after, Block &block) {
  Member front = members.front();
  AllReduceOp first = front.op;
  OpBuilder b(first.getContext());
  if (after)
    b.setInsertionPointAfter(after);
  else
    b.setInsertionPointToStart(&block);
  Location loc = first.getLoc();
  Type element = cast<RankedTensorType>(first.getType()).getElementType();
  auto flat = [&](int64_t n) { return RankedTensorType::get({n}, element); };
  SmallVector<Value> parts;
  int64_t total = 0, predicted = 0;
  bool allPredicted = true;
  for (Member m : members) { // AllReduceOp's accessors are not const
    Value in = m.op.getInput();
    auto type = cast<RankedTensorType>(in.getType());
    if (type.getRank() != 1)
      in = ReshapeOp::create(b, m.op.getLoc(), flat(type.getNumElements()), in);
    parts.push_back(in);
    total += type.getNumElements();
    std::optional<uint64_t> p = m.op.getPredictedBytes();
    allPredicted &= p.has_value();
    predicted += static_cast<int64_t>(p.value_or(0));
  }
  Value buffer = ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(0));
  IntegerAttr predictedAttr =
      allPredicted ? b.getI64IntegerAttr(predicted) : IntegerAttr();
  Value reduced = AllReduceOp::create(b, loc, flat(total), buffer,
                                      first.getAxesAttr(), predictedAttr);
  // Each new or moved op goes after `last`: the builder's insertion point
  // is an iterator, which erasing or moving the op it names would break.
  Operation *last = reduced.getDefiningOp();
  int64_t offset = 0;
  for (Member m : members) {
    auto type = cast<RankedTensorType>(m.op.getType());
    int64_t n = type.getNumElements();
    b.setInsertionPointAfter(last);
    Value part = SliceOp::create(
        b, m.op.getLoc(), reduced, b.getDenseI64ArrayAttr({offset}),
        b.getDenseI64ArrayAttr({n}), b.getDenseI64ArrayAttr({1}));
    last = part.getDefiningOp();
    offset += n;
    // A reshape of the gradient (a bias's `1xN` to `N`) reads the slice.
    for (OpOperand &use : llvm::make_early_inc_range(m.op->getUses()))
      if (isa<ReshapeOp>(use.getOwner()))
        use.set(part);
    if (!m.op->use_empty()) {
      b.setInsertionPointAfter(last);
      last = type.getRank() == 1
                 ? last
                 : ReshapeOp::create(b, m.op.getLoc(), type, part);
      m.op.getResult().replaceAllUsesWith(last->getResult(0));
    }
    // The ops on the way to the updates follow the reduction (the updates
    // come after it, the ops may have been before).
    for (Operation *op : m.chain) {
      op->moveAfter(last);
      last = op;
    }
  }
  for (Member m : members)
    m.op.erase();
  // Reshapes that now reshape to the slice's own type.
  for (Member m : members)
    for (Operation *op : m.chain)
      if (auto reshape = dyn_cast<ReshapeOp>(op);
          reshape && reshape.getInput().getType() == reshape.getType()) {
        reshape.getResult().replaceAllUsesWith(reshape.getInput());
        reshape.erase();
      }
}

struct BucketGradientsPass
    : public loom::impl::BucketGradientsBase<BucketGradientsPass> {
  using BucketGradientsBase::BucketGradientsBase;

  void runOnOperation() override {
    if (bucketBytes <= 0 || getOperation().isExternal())
      return;
    Block &block = getOperation().getBody().front();
    llvm::DenseMap<Operation *, unsigned> position;
    std::vector<Operation *> ops;
    for (Operation &op : block) {
      position[&op] = static_cast<unsigned>(ops.size());
      ops.push_back(&op);
    }
    std::vector<Member> members;
    for (Operation *op : ops) {
      auto reduce = dyn_cast<AllReduceOp>(op);
      SmallVector<Operation *, 2> chain, updates;
      if (!reduce || !reducesGradient(reduce, block, chain, updates))
        continue;
      Member m{reduce,
               0,
               static_cast<unsigned>(ops.size()),
               bytesOf(reduce.getInput()),
               {}};
      // A gradient made in a nested region or an argument: ready at the
      // top (position 0 is never after an op of the block).
      if (Operation *def = reduce.getInput().getDefiningOp())
        if (def->getBlock() == &block)
          m.ready = position[def] + 1;
      for (Operation *update : updates)
        m.firstUse = std::min(m.firstUse, position[update]);
      llvm::sort(chain, [&](Operation *a, Operation *b) {
        return position[a] < position[b];
      });
      m.chain.assign(chain.begin(), chain.end());
      members.push_back(m);
    }
    // The backward pass's order: by when each gradient is made.
    llvm::stable_sort(members, [](const Member &a, const Member &b) {
      return a.ready < b.ready;
    });
    struct Open {
      std::vector<Member> members;
      unsigned ready = 0, firstUse = 0;
      int64_t bytes = 0;
    };
    // One open bucket per element type and axes: only those reduce as one.
    std::map<std::pair<std::string, std::vector<int64_t>>, Open> open;
    std::vector<std::pair<std::vector<Member>, unsigned>> closed;
    auto close = [&](Open &bucket) {
      if (bucket.members.size() > 1)
        closed.push_back({bucket.members, bucket.ready});
      bucket = Open();
    };
    for (Member m : members) {
      std::string element;
      llvm::raw_string_ostream os(element);
      os << cast<RankedTensorType>(m.op.getType()).getElementType();
      ArrayRef<int64_t> axes = m.op.getAxes();
      Open &bucket =
          open[{element, std::vector<int64_t>(axes.begin(), axes.end())}];
      // Full, or the bucket's reduction could not come both after every
      // gradient and before every use.
      if (!bucket.members.empty() &&
          (bucket.bytes + m.bytes > bucketBytes ||
           std::max(bucket.ready, m.ready) >
               std::min(bucket.firstUse, m.firstUse)))
        close(bucket);
      if (bucket.members.empty())
        bucket.firstUse = m.firstUse;
      bucket.members.push_back(m);
      bucket.ready = std::max(bucket.ready, m.ready);
      bucket.firstUse = std::min(bucket.firstUse, m.firstUse);
      bucket.bytes += m.bytes;
    }
    for (auto &[key, bucket] : open)
      close(bucket);
    for (auto &[bucket, ready] : closed) {
      LLVM_DEBUG(llvm::dbgs()
                 << "bucket of " << bucket.size()
                 << " reductions after position " << ready << "\n");
      emitBucket(bucket, ready ? ops[ready - 1] : nullptr, block);
    }
  }
};

} // namespace
