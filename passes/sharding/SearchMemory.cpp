//===- SearchMemory.cpp - A searched plan's memory per device ------------===//
//
// What a plan the strategy search considers holds per device: what it holds
// for the step (parameters with their gradients and optimizer state, saved
// results, the copies the backward reads), and its peaks: while the forward
// runs an op (what the ops before it saved, and its own unsaved tensors),
// while the backward runs an op (its gradients, less what the backward of
// the ops after it freed), and, with recompute, in the backward of the
// layer recomputing the most.
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/SearchProblem.h"

#include <algorithm>
#include <set>
#include <tuple>

using namespace mlir;

namespace loom::sharding::detail {

MemoryCount countMemory(const CostProblem &p, const std::vector<int> &choice,
                        const LayerIndex &layers, const NodeCoster &coster) {
  const std::vector<const CandidateSet *> &candidates = p.candidates;
  MemoryCount memory;
  std::vector<double> perLayer(layers.names.size(), 0);
  // A parameter several nodes read is held once per layout.
  std::set<std::pair<unsigned, layout::TensorLayout>> parameters;
  for (size_t n = 0; n < candidates.size(); ++n) {
    const Candidate &c = candidates[n]->list[choice[n]];
    const NodeTerms &t = c.terms;
    memory.held += t.memoryBytes;
    for (auto [operand, held] : t.parameterBytes) {
      if (p.parameterReaders[n][operand] < 2)
        continue;
      BlockArgument param = coster.parameterOf(p.nodes[n]->getOperand(operand));
      if (!parameters.insert({param.getArgNumber(), c.layouts.operands[operand]})
               .second)
        memory.held -= held;
    }
    if (n >= layers.headStart)
      memory.headHeld += t.resultBytes;
    perLayer[layers.nodeLayer[n]] += t.recomputedBytes;
  }
  const std::vector<EdgeRef> &edges = p.edges;
  // What the backward of each node frees: its saved results and the
  // copies kept for it.
  std::vector<double> released(candidates.size(), 0);
  for (size_t n = 0; n < candidates.size(); ++n) {
    const NodeTerms &t = candidates[n]->list[choice[n]].terms;
    released[n] = t.resultBytes - t.lossGradientBytes;
  }
  // One copy per value and layout: the partitioner shares it.
  std::set<std::tuple<int, unsigned, layout::TensorLayout>> copies;
  for (const EdgeRef &e : edges) {
    double bytes = e.costs->bytes[choice[e.from]][choice[e.to]];
    if (!bytes || !copies
                       .insert({e.from, e.result,
                                candidates[e.to]
                                    ->list[choice[e.to]]
                                    .layouts.operands[e.operand]})
                       .second)
      continue;
    if (e.costs->kept == KeptCopy::Recomputed) {
      perLayer[layers.nodeLayer[e.from]] += bytes;
    } else {
      memory.held += bytes;
      released[e.to] += bytes;
      if (static_cast<size_t>(e.to) >= layers.headStart)
        memory.headHeld += bytes;
    }
  }
  // The forward runs the nodes in order, on the parameters (what is held
  // that no node's backward frees, less the losses' gradients).
  double saved = memory.held;
  for (size_t n = 0; n < candidates.size(); ++n)
    saved -= released[n] + candidates[n]->list[choice[n]].terms.lossGradientBytes;
  for (size_t n = 0; n < candidates.size(); ++n) {
    saved += released[n];
    memory.forwardPeak =
        std::max(memory.forwardPeak,
                 saved + candidates[n]->list[choice[n]].terms.forwardBytes);
  }
  // The backward runs the nodes in reverse.
  double freed = 0;
  for (size_t n = candidates.size(); n-- > 0;) {
    double live = candidates[n]->list[choice[n]].terms.gradientBytes - freed;
    if (live > memory.transient) {
      memory.transient = live;
      memory.transientNode = static_cast<int>(n);
    }
    freed += released[n];
  }
  for (size_t l = 0; l < perLayer.size(); ++l)
    if (perLayer[l] > memory.recomputed) {
      memory.recomputed = perLayer[l];
      memory.layer = static_cast<int>(l);
    }
  return memory;
}

} // namespace loom::sharding::detail
