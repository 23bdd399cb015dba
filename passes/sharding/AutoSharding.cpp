//===- AutoSharding.cpp - Choose every forward op's sharding by cost ------===//
//
// `--mode auto`: the forward ops of a training step (or every op of an
// inference graph) become the nodes of a cost graph (compiler/search). Each
// node's candidates are the valid assignments of mesh axes to the factors
// of its sharding rule (only the user's, for an op the user fixed); a
// candidate costs its NodeTerms (compiler/analysis/StepCost.h): compute, the
// all-reduce of its parameters' gradients, and lambda times its
// per-device memory. An edge costs the redistribution of the value from
// its producer's layout to what its consumer needs, and of the gradient
// back. The eliminations of `search::solve` find the cheapest assignment;
// lambda rises from 0 until the plan fits the device memory. The backward
// and optimizer ops then follow their forward ops through
// loom-propagate-sharding.
//
// Repeated layers. A transformer's layers are the same ops on the same
// types, so candidates and their costs are computed once per op signature
// (name, attributes, operand and result types, which operands are
// parameters) and edge cost matrices once per pair of signatures: a
// 96-layer model costs what one layer does, and only the solve grows with
// depth (linearly, since the layers form a chain the eliminations reduce).
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/AutoSharding.h"
#include "passes/sharding/SearchProblem.h"

#include "compiler/analysis/ZeroLayout.h"
#include "compiler/search/CostGraph.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>

using namespace mlir;
using namespace loom;
using namespace loom::sharding;
using namespace loom::sharding::detail;

namespace {

/// The solution chosen, its memory and the lambda it was solved with.
struct SolvedPlan {
  search::Solution best;
  MemoryCount memory;
  double lambda = 0;
};

class AutoSharder {
public:
  AutoSharder(func::FuncOp func, layout::Mesh mesh,
              const SearchOptions &options)
      : func(func), mesh(std::move(mesh)), options(options),
        step(analyzeStep(func, options.stateShare, options.savedShare,
                         options.bucketBytes)),
        coster(func, this->mesh, options.profile, step),
        redistributions(options.redistributions) {
    if (!redistributions ||
        redistributions->mesh().toString() != this->mesh.toString())
      redistributions =
          std::make_shared<RedistributionCosts>(this->mesh, options.profile);
  }

  FailureOr<SearchReport> run();

private:
  /// Fills `layers`; returns the weight of
  /// recomputed results (1 over the number of recomputing layers).
  double indexLayers(const std::vector<Operation *> &nodes);
  LogicalResult costNodes(CostProblem &p);
  void costEdges(CostProblem &p);
  /// Fails (with the error, unless fastestOnly) when no plan fits.
  LogicalResult solveWithinMemory(const CostProblem &p, SolvedPlan &plan);
  /// Also sets each op's loom.sharding to its choice.
  SearchReport buildReport(const CostProblem &p, const SolvedPlan &plan);
  FailureOr<const CandidateSet *> candidatesFor(Operation *op);
  void enumerate(Operation *op, const ShardingRule &rule, CandidateSet &set);
  /// `always`: the backward does not read the value in its producer's
  /// layout, so the consumer's copy is what is kept even where the layouts
  /// agree and nothing is redistributed. `sharers`: the consumers whose
  /// gradients of the value add up before it is reduced (one reduction of
  /// the partial sums for all of them, each edge charged its share).
  /// `gradElement`: the element type the gradient is reduced in (a
  /// parameter's master type for a value made from it alone). `readers`:
  /// the forward consumers of the value; the partitioned program makes a
  /// redistributed copy once and every consumer of that layout reads it
  /// (and their gradients add up in it before going back), so each edge is
  /// charged its share, as the kept copies' bytes are (keptWeight).
  const EdgeCosts &edgeCosts(const CandidateSet *producer, unsigned result,
                             const CandidateSet *consumer, unsigned operand,
                             RankedTensorType type, KeptCopy kept, bool always,
                             int sharers, Type gradElement, int readers);
  /// Seconds to redistribute a tensor of `type` from `from` to `to`.
  double redistributionSeconds(RankedTensorType type,
                               const layout::TensorLayout &from,
                               const layout::TensorLayout &to) {
    return redistributions->seconds(type, from, to);
  }
  MemoryCount countMemory(const CostProblem &p,
                          const std::vector<int> &choice) const {
    return loom::sharding::detail::countMemory(p, choice, layers, coster);
  }
  /// The error when even the most compact plan (`choice`, `memory`)
  /// exceeds `limit`: its largest tensors per device.
  LogicalResult infeasible(const std::vector<Operation *> &nodes,
                           const std::vector<const CandidateSet *> &candidates,
                           const std::vector<EdgeRef> &edges,
                           const std::vector<int> &choice,
                           const MemoryCount &memory, int64_t limit);
  void progress(StringRef phase, int64_t done, int64_t total) {
    if (options.progress)
      options.progress(phase, done, total);
  }

  func::FuncOp func;
  layout::Mesh mesh;
  const SearchOptions &options;
  StepShape step;
  NodeCoster coster;
  /// The options' when they have one for this mesh, else the search's own.
  std::shared_ptr<RedistributionCosts> redistributions;
  std::map<std::vector<const void *>, std::unique_ptr<CandidateSet>> sets;
  LayerIndex layers;
  std::map<std::tuple<const CandidateSet *, unsigned, const CandidateSet *,
                      unsigned, KeptCopy, bool, int, const void *, int>,
           EdgeCosts>
      matrices;
};

void AutoSharder::enumerate(Operation *op, const ShardingRule &rule,
                            CandidateSet &set) {
  const int numFactors = static_cast<int>(rule.factors.size());
  const int numAxes = mesh.numAxes();
  auto add = [&](const FactorAxes &axes) {
    std::string error;
    std::optional<OpLayouts> layouts = deriveLayouts(rule, axes, mesh, error);
    if (layouts)
      set.list.push_back({axes, std::move(*layouts), {}});
  };
  // Every way of giving each mesh axis to one factor or to none; the axes
  // of a factor keep the mesh's order (outermost first).
  std::vector<int> pick(numAxes, -1);
  std::function<void(int)> visit = [&](int a) {
    if (a == numAxes) {
      FactorAxes axes(numFactors);
      for (int x = 0; x < numAxes; ++x)
        if (pick[x] >= 0)
          axes[pick[x]].push_back(x);
      add(axes);
      return;
    }
    for (int f = -1; f < numFactors; ++f) {
      if (f >= 0 && (rule.factors[f].kind == FactorKind::Blocked ||
                     rule.factors[f].size <= 1))
        continue;
      pick[a] = f;
      visit(a + 1);
    }
  };
  visit(0);
  for (Candidate &c : set.list)
    c.terms = coster.terms(op, rule, c.axes, c.layouts);
}

FailureOr<const CandidateSet *> AutoSharder::candidatesFor(Operation *op) {
  std::vector<const void *> key;
  key.push_back(op->getName().getAsOpaquePointer());
  // Every differentiated op has an id of its own, which no cost depends on.
  DictionaryAttr attrs = op->getAttrDictionary();
  if (attrs.contains(LoomDialect::kGradIdAttrName)) {
    NamedAttrList named(attrs);
    named.erase(LoomDialect::kGradIdAttrName);
    attrs = named.getDictionary(op->getContext());
  }
  key.push_back(attrs.getAsOpaquePointer());
  uintptr_t parameters = 0;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    key.push_back(v.getType().getAsOpaquePointer());
    if (coster.isParameter(v))
      parameters |= uintptr_t(1) << (i % (8 * sizeof(uintptr_t)));
  }
  for (Type t : op->getResultTypes())
    key.push_back(t.getAsOpaquePointer());
  key.push_back(reinterpret_cast<const void *>(parameters));
  auto it = sets.find(key);
  if (it != sets.end())
    return it->second.get();

  auto set = std::make_unique<CandidateSet>();
  ShardingRule rule = cast<ShardingOpInterface>(op).getShardingRule();
  FailureOr<std::optional<FactorAxes>> fixed = fixedAssignment(op, rule, mesh);
  if (failed(fixed))
    return failure();
  if (*fixed) {
    std::string error;
    std::optional<OpLayouts> layouts =
        deriveLayouts(rule, **fixed, mesh, error);
    if (!layouts)
      return op->emitError()
             << "sharding of " << describeOp(op) << ": " << error;
    set->fixed = true;
    set->list.push_back({**fixed, std::move(*layouts), {}});
    set->list.back().terms =
        coster.terms(op, rule, **fixed, set->list.back().layouts);
  } else {
    enumerate(op, rule, *set);
  }
  if (set->list.empty())
    return op->emitError() << "no valid sharding for " << describeOp(op)
                           << " on " << mesh.toString();
  return sets.emplace(std::move(key), std::move(set)).first->second.get();
}

const EdgeCosts &AutoSharder::edgeCosts(const CandidateSet *producer,
                                        unsigned result,
                                        const CandidateSet *consumer,
                                        unsigned operand, RankedTensorType type,
                                        KeptCopy kept, bool always,
                                        int sharers, Type gradElement,
                                        int readers) {
  auto key = std::make_tuple(producer, result, consumer, operand, kept, always,
                             sharers, gradElement.getAsOpaquePointer(),
                             readers);
  double share = 1.0 / static_cast<double>(std::max(readers, 1));
  if (auto it = matrices.find(key); it != matrices.end())
    return it->second;
  EdgeCosts e;
  e.kept = kept;
  e.seconds.assign(producer->list.size(),
                   std::vector<double>(consumer->list.size(), 0));
  e.bytes = e.seconds;
  e.copySeconds = e.seconds;
  for (size_t a = 0; a < producer->list.size(); ++a)
    for (size_t b = 0; b < consumer->list.size(); ++b) {
      const layout::TensorLayout &have =
          producer->list[a].layouts.results[result];
      const layout::TensorLayout &want =
          consumer->list[b].layouts.operands[operand];
      double copy = redistributionSeconds(type, have, want), own = 0;
      if (step.training && isa<FloatType>(type.getElementType())) {
        // The gradient flows back: from what the consumer's operand was to
        // the producer's result layout, without its partial sums. The
        // consumer's gradient of its operand is a partial sum over the axes
        // that split the consumer's work but not the operand (a
        // column-parallel matmul's input gradient sums over the columns'
        // axes): the partitioned backward all-reduces it, once for the sum
        // of the consumers' gradients, each edge charged its share.
        layout::TensorLayout back = have;
        for (int axis : std::vector<int>(back.partialAxes()))
          back.removePartial(axis);
        layout::TensorLayout grad = want;
        bool partial = false;
        for (int axis : gradientAxes(consumer->list[b].layouts, operand))
          if (!grad.isPartial(axis)) {
            grad.addPartial(axis);
            partial = true;
          }
        if (partial)
          own = redistributionSeconds(type.clone(gradElement), grad, back) /
                static_cast<double>(std::max(sharers, 1));
        else
          copy += redistributionSeconds(type, want, back);
      }
      e.seconds[a][b] = copy * share + own;
      e.copySeconds[a][b] = copy;
      if (kept != KeptCopy::None && (have != want || always)) {
        // A saved copy is held by the micro-batches in flight; a recomputed
        // one exists for one micro-batch's backward at a time.
        e.bytes[a][b] =
            static_cast<double>(localType(type, mesh, want).getNumElements()) *
            static_cast<double>(elementBytes(type)) *
            (kept == KeptCopy::Saved ? step.savedShare : 1.0);
        e.hasBytes = true;
      }
    }
  return matrices.emplace(key, std::move(e)).first->second;
}

LogicalResult
AutoSharder::infeasible(const std::vector<Operation *> &nodes,
                        const std::vector<const CandidateSet *> &candidates,
                        const std::vector<EdgeRef> &edges,
                        const std::vector<int> &choice,
                        const MemoryCount &memory, int64_t limit) {
  std::vector<NodeCoster::MemoryItem> items;
  // A parameter several nodes read is one tensor per layout.
  std::set<std::pair<std::string, std::string>> listed;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (NodeCoster::MemoryItem &item :
         coster.memoryItems(nodes[n], candidates[n]->list[choice[n]].layouts))
      if (listed.insert({item.what, item.layout}).second ||
          !StringRef(item.what).starts_with("parameter "))
        items.push_back(std::move(item));
  if (memory.transientNode >= 0 && memory.transient > 0)
    items.push_back({"gradients live while the backward of " +
                         describeOp(nodes[memory.transientNode]) +
                         " runs (beyond what the backward has freed)",
                     memory.transient, ""});
  if (memory.layer >= 0 && memory.recomputed > 0) {
    const std::string &name = layers.names[memory.layer];
    items.push_back({"results of " +
                         (name.empty() ? std::string("the ops outside layers")
                                       : "layer '" + name + "'") +
                         " recomputed in its backward (with their copies)",
                     memory.recomputed, ""});
  }
  for (const EdgeRef &e : edges)
    if (double bytes = e.costs->bytes[choice[e.from]][choice[e.to]];
        bytes && e.costs->kept == KeptCopy::Saved) {
      Operation *user = nodes[e.to];
      items.push_back(
          {"copy of a result of " + describeOp(nodes[e.from]) +
               " kept for the backward of " + describeOp(user),
           bytes,
           compactLayout(
               candidates[e.to]->list[choice[e.to]].layouts.operands[e.operand],
               mesh)});
    }
  llvm::stable_sort(
      items, [](const auto &a, const auto &b) { return a.bytes > b.bytes; });
  InFlightDiagnostic d = func.emitError();
  d << "no sharding on " << mesh.toString() << " fits in "
    << formatBytes(static_cast<double>(limit)) << " (" << limit
    << " bytes) per device: the most compact plan found needs "
    << formatBytes(memory.total()) << ", "
    << formatBytes(memory.total() - static_cast<double>(limit))
    << " over. Its largest tensors per device:";
  for (size_t k = 0; k < items.size() && k < 6; ++k) {
    d << "\n  " << items[k].what << ": " << formatBytes(items[k].bytes);
    if (!items[k].layout.empty())
      d << " as " << items[k].layout;
  }
  d << "\nUse more devices, a smaller batch, or a larger --memory-limit";
  return failure();
}

double AutoSharder::indexLayers(const std::vector<Operation *> &nodes) {
  std::map<std::string, int> layerIndex;
  // Layers that recompute: the penalty counts each's recomputed results
  // 1/R, the share the largest of R equal layers has of their sum.
  std::set<int> recomputingLayers;
  for (auto [n, op] : llvm::enumerate(nodes)) {
    std::string layer = layerOf(nodeName(op)).str();
    auto [it, added] =
        layerIndex.emplace(layer, static_cast<int>(layers.names.size()));
    if (added)
      layers.names.push_back(layer);
    layers.nodeLayer.push_back(it->second);
    if (step.recomputed.contains(op)) {
      recomputingLayers.insert(it->second);
      layers.headStart = n + 1;
    }
  }
  if (recomputingLayers.empty())
    layers.headStart = nodes.size();
  return 1.0 /
         static_cast<double>(std::max<size_t>(recomputingLayers.size(), 1));
}

LogicalResult AutoSharder::costNodes(CostProblem &p) {
  p.candidates.resize(p.nodes.size());
  for (auto [n, op] : llvm::enumerate(p.nodes)) {
    FailureOr<const CandidateSet *> set = candidatesFor(op);
    if (failed(set))
      return failure();
    p.candidates[n] = *set;
    if (n % 64 == 0)
      progress("costing ops", static_cast<int64_t>(n),
               static_cast<int64_t>(p.nodes.size()));
  }
  return success();
}

void AutoSharder::costEdges(CostProblem &p) {
  Operation *terminator = func.getBody().front().getTerminator();
  llvm::DenseMap<Operation *, int> index;
  for (auto [n, op] : llvm::enumerate(p.nodes))
    index[op] = static_cast<int>(n);
  // Edges: producer result -> consumer operand, both forward ops. Values
  // returned (the loss, outputs) must end replicated.
  p.sinkCost.resize(p.nodes.size());
  llvm::DenseMap<Value, int> parameterUses;
  auto parameterRead = [&](Operation *op, Value v) -> Value {
    if (coster.isParameterCast(op))
      return {};
    return coster.parameterOf(v);
  };
  for (Operation *op : p.nodes)
    for (Value v : op->getOperands())
      if (Value param = parameterRead(op, v))
        ++parameterUses[param];
  p.parameterReaders.resize(p.nodes.size());
  for (auto [n, op] : llvm::enumerate(p.nodes))
    for (Value v : op->getOperands()) {
      Value param = parameterRead(op, v);
      p.parameterReaders[n].push_back(param ? parameterUses.lookup(param) : 0);
    }
  // The forward consumers of each value: their gradients of it add up. A
  // value made from one parameter alone (its transpose, its slices) has a
  // gradient that adds up into the parameter's: the consumers of all such
  // values of one parameter share its one reduction.
  llvm::DenseMap<Value, int> consumers, readers;
  llvm::DenseMap<Value, BlockArgument> roots;
  std::function<BlockArgument(Value)> rootOf = [&](Value v) -> BlockArgument {
    if (auto it = roots.find(v); it != roots.end())
      return it->second;
    BlockArgument root;
    if (BlockArgument param = coster.parameterOf(v))
      root = param;
    else if (Operation *def = v.getDefiningOp();
             def && def->getNumOperands() > 0 && !isa<ConstantOp>(def)) {
      root = rootOf(def->getOperand(0));
      for (Value operand : def->getOperands().drop_front())
        if (!operand.getDefiningOp<ConstantOp>() && rootOf(operand) != root)
          root = nullptr;
    }
    return roots[v] = root;
  };
  auto sharedBy = [&](Value v) -> Value {
    BlockArgument root = rootOf(v);
    return root ? Value(root) : v;
  };
  for (Operation *op : p.nodes)
    for (Value v : op->getOperands())
      if (Operation *producer = v.getDefiningOp();
          producer && index.count(producer)) {
        ++consumers[sharedBy(v)];
        ++readers[v];
      }
  for (auto [n, op] : llvm::enumerate(p.nodes)) {
    const CandidateSet *set = p.candidates[n];
    p.sinkCost[n].assign(set->list.size(), 0);
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      Operation *producer = v.getDefiningOp();
      auto it = producer ? index.find(producer) : index.end();
      if (it == index.end())
        continue;
      int from = it->second;
      unsigned result = cast<OpResult>(v).getResultNumber();
      // The copy made for this consumer is kept when its gradient reads
      // it, or (a saved value) when the backward recomputes the consumer.
      StepShape::BackwardUses uses = step.backwardUses(v);
      bool saved = step.isSaved(v);
      KeptCopy kept = KeptCopy::None;
      if (uses.readsAs(op, i) || (saved && step.recomputed.contains(op)))
        kept = saved                             ? KeptCopy::Saved
               : step.isRecomputedForBackward(v) ? KeptCopy::Recomputed
                                                 : KeptCopy::None;
      // A weight's transpose the matmul takes as its GEMM flag
      // (loom-fuse-matmul-epilogue): the matmul and its backward read the
      // parameter, held anyway, unless the layouts differ.
      bool always = !uses.own && !(isFoldedTranspose(producer) &&
                                   coster.isParameter(producer->getOperand(0)));
      p.edges.push_back(
          {from, static_cast<int>(n),
           &edgeCosts(p.candidates[from], result, set, i,
                      cast<RankedTensorType>(v.getType()), kept, always,
                      consumers.lookup(sharedBy(v)),
                      rootOf(v) ? getElementTypeOrSelf(rootOf(v).getType())
                                : getElementTypeOrSelf(v.getType()),
                      readers.lookup(v)),
           static_cast<unsigned>(i), result});
      p.edges.back().share =
          1.0 / static_cast<double>(std::max(readers.lookup(v), 1));
    }
    for (auto [j, r] : llvm::enumerate(op->getResults()))
      if (llvm::is_contained(terminator->getOperands(), r)) {
        auto type = cast<RankedTensorType>(r.getType());
        for (size_t a = 0; a < set->list.size(); ++a)
          p.sinkCost[n][a] += redistributionSeconds(
              type, set->list[a].layouts.results[j],
              layout::TensorLayout::replicated(type.getRank()));
      }
    if (n % 64 == 0)
      progress("costing edges", static_cast<int64_t>(n),
               static_cast<int64_t>(p.nodes.size()));
  }
  std::map<std::pair<int, unsigned>, int> keptCopies;
  for (const EdgeRef &e : p.edges)
    if (e.costs->hasBytes)
      ++keptCopies[{e.from, e.result}];
  for (EdgeRef &e : p.edges)
    if (e.costs->hasBytes)
      e.keptWeight = 1.0 / keptCopies[{e.from, e.result}];
}

LogicalResult AutoSharder::solveWithinMemory(const CostProblem &p,
                                             SolvedPlan &plan) {
  search::CostGraph graph;
  for (size_t n = 0; n < p.nodes.size(); ++n)
    graph.addNode(std::vector<double>(p.candidates[n]->list.size(), 0));
  for (const EdgeRef &e : p.edges)
    graph.addEdge(e.from, e.to, e.costs->seconds);
  // Every solve below has this shape; only the memory penalty changes.
  const search::Solver solver(graph);

  // Solve, raising lambda (seconds per byte) until the memory fits.
  int64_t limit = options.memoryLimit > 0 ? options.memoryLimit
                                          : options.profile.memoryCapacity;
  int solves = 0;
  // The memory penalty is additive: the largest layer's recomputed results
  // count as the mean over the recomputing layers (exact for equal layers);
  // whether a plan fits is judged on its count (countMemory).
  auto solveWith = [&](double lambda, MemoryCount &memory) {
    for (size_t n = 0; n < p.nodes.size(); ++n) {
      std::vector<double> costs;
      for (size_t a = 0; a < p.candidates[n]->list.size(); ++a) {
        const NodeTerms &t = p.candidates[n]->list[a].terms;
        costs.push_back(t.seconds() + p.sinkCost[n][a] +
                        lambda * p.penaltyBytes(n, a));
      }
      graph.setNodeCosts(static_cast<int>(n), std::move(costs));
    }
    for (auto [k, e] : llvm::enumerate(p.edges)) {
      if (!e.costs->hasBytes)
        continue;
      double weight =
          lambda * e.keptWeight *
          (e.costs->kept == KeptCopy::Recomputed ? p.recomputedWeight : 1.0);
      Matrix costs = e.costs->seconds;
      for (size_t a = 0; a < costs.size(); ++a)
        for (size_t b = 0; b < costs[a].size(); ++b)
          costs[a][b] += weight * e.costs->bytes[a][b];
      graph.setEdgeCosts(static_cast<int>(k), std::move(costs));
    }
    progress("solving", ++solves, 0);
    search::Solution s = solver.solve(graph);
    memory = countMemory(p, s.choice);
    return s;
  };
  // Lambda: 0 if the fastest plan fits; else the most compact plan (memory
  // first, time only breaking ties) must fit, and lambda rises from the
  // ratio of the fastest plan's time to its memory until a plan fits, then
  // is bisected (in log scale, to 10%) down to the smallest that fits.
  MemoryCount &memory = plan.memory;
  double &lambda = plan.lambda;
  search::Solution &best = plan.best;
  lambda = 0;
  best = solveWith(0, memory);
  bool over = limit > 0 && memory.total() > static_cast<double>(limit);
  if (!over)
    return success();
  if (options.fastestOnly)
    return failure();
  double scale = std::max(best.cost, 1e-12) / std::max(memory.total(), 1.0);
  MemoryCount compactMemory;
  search::Solution compact = solveWith(scale * 1e6, compactMemory);
  if (compactMemory.total() > static_cast<double>(limit) && !options.diagnose)
    return failure();
  if (compactMemory.total() > static_cast<double>(limit))
    return infeasible(p.nodes, p.candidates, p.edges, compact.choice,
                      compactMemory, limit);
  best = compact;
  memory = compactMemory;
  lambda = scale * 1e6;
  // Keeps the plan of `candidate` if it fits.
  auto fitsWith = [&](double candidate) {
    MemoryCount m;
    search::Solution s = solveWith(candidate, m);
    if (m.total() > static_cast<double>(limit))
      return false;
    best = std::move(s);
    memory = m;
    lambda = candidate;
    return true;
  };
  double low = 0;
  for (double high = scale; high < lambda && !fitsWith(high); high *= 8)
    low = high;
  low = std::max(low, lambda / 8);
  while (lambda > low * 1.1) {
    double mid = std::sqrt(low * lambda);
    if (!fitsWith(mid))
      low = mid;
  }
  return success();
}

SearchReport AutoSharder::buildReport(const CostProblem &p,
                                      const SolvedPlan &plan) {
  const search::Solution &best = plan.best;
  const double lambda = plan.lambda;
  // The report, with each op's runner-up: its best other candidate with
  // every other op's choice held.
  SearchReport report;
  report.nodes = static_cast<int>(p.nodes.size());
  report.distinctOps = static_cast<int>(sets.size());
  report.exact = best.exact;
  report.memoryBound = lambda > 0;
  report.memoryBytes = plan.memory.total();
  std::vector<std::vector<int>> incident(p.nodes.size());
  for (auto [k, e] : llvm::enumerate(p.edges)) {
    incident[e.from].push_back(static_cast<int>(k));
    if (e.to != e.from)
      incident[e.to].push_back(static_cast<int>(k));
  }
  for (auto [n, op] : llvm::enumerate(p.nodes)) {
    const CandidateSet *set = p.candidates[n];
    int chosen = best.choice[n];
    // Seconds and bytes of candidate a of node n, its redistributions
    // (and the copies they keep) included.
    auto termsOf = [&](int a) {
      double s = set->list[a].terms.seconds() + p.sinkCost[n][a];
      double m = p.heldBytes(n, a);
      for (int k : incident[n]) {
        const EdgeRef &e = p.edges[k];
        int from = e.from == static_cast<int>(n) ? a : best.choice[e.from];
        int to = e.to == static_cast<int>(n) ? a : best.choice[e.to];
        s += e.costs->seconds[from][to];
        m += e.costs->bytes[from][to];
      }
      return std::make_pair(s, m);
    };
    SearchChoice c;
    c.op = op;
    c.fixed = set->fixed;
    c.layouts = compactLayouts(set->list[chosen].layouts, mesh);
    c.terms = set->list[chosen].terms;
    auto [chosenSeconds, chosenMemory] = termsOf(chosen);
    int runnerUp = -1;
    double runnerUpCost = 0;
    for (int a = 0; a < static_cast<int>(set->list.size()); ++a) {
      if (a == chosen)
        continue;
      auto [seconds, memory] = termsOf(a);
      double cost = seconds + lambda * memory;
      if (runnerUp < 0 || cost < runnerUpCost) {
        runnerUp = a;
        runnerUpCost = cost;
      }
    }
    if (runnerUp >= 0) {
      auto [seconds, memory] = termsOf(runnerUp);
      c.runnerUp = compactLayouts(set->list[runnerUp].layouts, mesh);
      c.runnerUpSeconds = seconds - chosenSeconds;
      c.runnerUpMemory = memory - chosenMemory;
    }
    report.seconds += set->list[chosen].terms.seconds() + p.sinkCost[n][chosen];
    report.choices.push_back(std::move(c));
    op->setAttr(LoomDialect::kShardingAttrName,
                factorsToAttr(func.getContext(), set->list[chosen].axes, mesh));
  }
  // The prediction counts each redistributed copy once per value and
  // layout, as the partitioned program makes it (the solve charged each
  // consumer its share, whatever layouts the others want).
  std::map<std::tuple<int, unsigned, layout::TensorLayout>, double> copies;
  for (const EdgeRef &e : p.edges) {
    int a = best.choice[e.from], b = best.choice[e.to];
    double copy = e.costs->copySeconds[a][b];
    report.seconds += e.costs->seconds[a][b] - copy * e.share;
    double &made = copies[{e.from, e.result,
                           p.candidates[e.to]->list[b].layouts.operands[e.operand]}];
    made = std::max(made, copy);
  }
  for (const auto &[key, seconds] : copies)
    report.seconds += seconds;
  return report;
}

FailureOr<SearchReport> AutoSharder::run() {
  CostProblem p;
  p.nodes = forwardOps(func, step);
  p.recomputedWeight = indexLayers(p.nodes);
  p.gradientWeight = 1.0 / static_cast<double>(std::max<size_t>(p.nodes.size(), 1));
  if (failed(costNodes(p)))
    return failure();
  costEdges(p);
  SolvedPlan plan;
  if (failed(solveWithinMemory(p, plan)))
    return failure();
  return buildReport(p, plan);
}

} // namespace

FailureOr<SearchReport>
loom::sharding::searchShardings(func::FuncOp func,
                                const SearchOptions &options) {
  auto mesh = meshOf(func, "loom-auto-sharding");
  if (failed(mesh))
    return failure();
  AutoSharder sharder(func, mesh->second, options);
  return sharder.run();
}
