//===- SearchProblem.h - The strategy search's cost problem -----*- C++ -*-===//
//
// The parts of loom-auto-sharding's cost problem (AutoSharding.cpp) that the
// memory count (SearchMemory.cpp) reads too: each op's candidates with their
// terms, the edges between them with the redistributed copies they keep,
// and a plan's memory per device.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SHARDING_SEARCHPROBLEM_H
#define LOOM_PASSES_SHARDING_SEARCHPROBLEM_H

#include "compiler/analysis/StepCost.h"

#include <string>
#include <vector>

namespace loom::sharding::detail {

using Matrix = std::vector<std::vector<double>>;

/// Whether the backward pass needs the redistributed copy an edge makes.
enum class KeptCopy {
  None,
  /// A saved value the consumer needs in another layout (a weight gathered
  /// for its matmul): the copy is held until the consumer's backward.
  Saved,
  /// A recomputed result: the copy is made again in the backward of its
  /// layer and live through it, like the result itself.
  Recomputed,
};

/// An edge's costs per pair of candidates: seconds of redistribution, and
/// bytes per device of the redistributed copy the consumer's backward reads
/// (`kept`).
struct EdgeCosts {
  Matrix seconds, bytes;
  /// The part of `seconds` that is the redistributed copy (made once per
  /// value and layout, for every consumer of that layout), whole: `seconds`
  /// charges each of the value's consumers its share of it.
  Matrix copySeconds;
  bool hasBytes = false;
  KeptCopy kept = KeptCopy::None;
};

struct Candidate {
  FactorAxes axes;
  OpLayouts layouts;
  NodeTerms terms;
};

/// Memory per device of one plan. It peaks where the backward begins (all
/// it holds for the step, the loss input's gradient included) or, with
/// recompute, in the backward of the layer recomputing the most: by then
/// the ops after the last recomputed one (the head: final norm, logits,
/// loss) have run their backward and freed what they held.
struct MemoryCount {
  double held = 0;
  /// The part of `held` the head holds.
  double headHeld = 0;
  /// The results the largest layer recomputes (with their copies).
  double recomputed = 0;
  /// That layer (an index into the layer names), or -1.
  int layer = -1;
  /// The most the backward holds beyond `held` while one op's backward
  /// runs: its gradients (NodeTerms::gradientBytes) less the saved results
  /// and copies the backward of the ops after it has freed.
  double transient = 0;
  /// The node whose backward that is, or -1.
  int transientNode = -1;
  /// The most held while one op's forward runs: the parameters, what the
  /// ops up to it saved and its own unsaved tensors (NodeTerms::forwardBytes).
  double forwardPeak = 0;
  double total() const {
    return std::max({held + transient, held - headHeld + recomputed,
                     forwardPeak});
  }
};

/// An edge of the cost graph: producer node -> consumer node.
struct EdgeRef {
  int from, to;
  const EdgeCosts *costs;
  unsigned operand; // of the consumer
  unsigned result;  // of the producer
  /// The share of the copy's bytes the memory penalty counts: 1/k for a
  /// value k consumers keep copies of (one copy per layout is made).
  double keptWeight = 1.0;
  /// The share of the redistributed copy's seconds charged to this edge:
  /// 1/k for a value k consumers read.
  double share = 1.0;
};

/// The candidates of every op with one signature.
struct CandidateSet {
  std::vector<Candidate> list;
  bool fixed = false;
};

/// The cost graph's parts: its nodes (forward ops), their candidates, the
/// edges between them and each candidate's cost of returning its results
/// replicated.
struct CostProblem {
  std::vector<mlir::Operation *> nodes;
  std::vector<const CandidateSet *> candidates;
  std::vector<EdgeRef> edges;
  std::vector<std::vector<double>> sinkCost;
  /// The share the penalty counts of a layer's recomputed results.
  double recomputedWeight = 1.0;
  /// The share the penalty counts of a node's backward gradients (1 over
  /// the number of nodes): a plan holds the largest beyond what it holds
  /// for the step, and the penalty charges their mean.
  double gradientWeight = 1.0;
  /// Per node and operand, how many nodes read that operand's parameter
  /// (0: not a parameter). The plan holds a parameter once per layout,
  /// however many ops read it: the penalty charges each reader its share.
  std::vector<std::vector<int>> parameterReaders;
  /// The memory candidate `a` of node `n` holds for the step, its share
  /// of parameters other nodes read too.
  double heldBytes(size_t n, size_t a) const {
    const NodeTerms &t = candidates[n]->list[a].terms;
    double bytes = t.memoryBytes;
    for (auto [operand, held] : t.parameterBytes)
      if (int k = parameterReaders[n][operand]; k > 1)
        bytes -= held * (1.0 - 1.0 / k);
    return bytes;
  }
  /// The memory the penalty charges candidate `a` of node `n`.
  double penaltyBytes(size_t n, size_t a) const {
    const NodeTerms &t = candidates[n]->list[a].terms;
    return heldBytes(n, a) + recomputedWeight * t.recomputedBytes +
           gradientWeight * (t.gradientBytes + t.forwardBytes);
  }
};

/// Which layer each node is in (recomputed results add up per layer) and
/// where the head begins.
struct LayerIndex {
  /// Per node, its layer (layerOf its ONNX node) as an index into `names`.
  std::vector<int> nodeLayer;
  /// The first node after the last recomputed one (the head), or the
  /// number of nodes.
  size_t headStart = 0;
  std::vector<std::string> names;
};

/// The memory per device of the plan `choice`.
MemoryCount countMemory(const CostProblem &p, const std::vector<int> &choice,
                        const LayerIndex &layers, const NodeCoster &coster);

} // namespace loom::sharding::detail

#endif // LOOM_PASSES_SHARDING_SEARCHPROBLEM_H
