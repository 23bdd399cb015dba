//===- CostGraph.h - Choosing one strategy per node at least cost -*- C++ -*-//
//
// The search problem of auto-parallel compilation, without MLIR: a graph
// whose nodes are ops, each with a list of candidate strategies and a cost
// per candidate, and whose edges carry a cost per pair of candidates (the
// redistribution between the producer's choice and the consumer's). A
// solution picks one candidate per node; its cost is the sum of the chosen
// node costs and edge costs.
//
// `solve` follows MindSpore's dynamic programming over the cost graph:
// eliminations that each remove a node or an edge while keeping the
// optimum, recorded so that the eliminated choices can be recovered:
//   - edge elimination: parallel edges between two nodes become one (their
//     matrices add);
//   - merge (leaf) elimination: a node with a single neighbour folds into
//     it: N_u[a] += min_b (E[a][b] + N_v[b]);
//   - contraction (two-neighbour) elimination: a node whose only neighbours
//     are u and w becomes an edge u-w (MindSpore's op elimination when the
//     node sits on a chain, and its triangle elimination when u and w are
//     already joined): E'[a][c] = min_b (E_uv[a][b] + N_v[b] + E_vw[b][c]);
//   - an isolated node takes its cheapest candidate.
// These are exact. Series-parallel graphs (chains, residual branches,
// attention's q/k/v fan-out) reduce completely. What remains otherwise is
// solved exhaustively when its product of candidate counts is at most
// `exhaustiveLimit` (exact), and else by fixing the highest-degree node to
// its best local choice and continuing (a heuristic; the result says so).
//
// Which node each step eliminates, and between which matrices, depends only
// on the graph's shape (its edges and candidate counts), not on the costs:
// a `Solver` finds the order once and replays it with each set of costs
// (the memory search solves one graph for many memory penalties).
//
// `solveExhaustive` enumerates every assignment: the reference the tests
// compare `solve` against.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_SEARCH_COSTGRAPH_H
#define LOOM_COMPILER_SEARCH_COSTGRAPH_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::search {

class CostGraph {
public:
  /// Adds a node with one cost per candidate; returns its index.
  int addNode(std::vector<double> costs);
  /// Replaces a node's costs (same candidate count).
  void setNodeCosts(int node, std::vector<double> costs);
  /// Adds an edge; `costs[a][b]` is the cost when `from` takes candidate a
  /// and `to` candidate b. Parallel edges are allowed.
  void addEdge(int from, int to, std::vector<std::vector<double>> costs);
  /// Replaces the costs of the edge added `edge`-th (same shape).
  void setEdgeCosts(int edge, std::vector<std::vector<double>> costs);

  int numNodes() const { return static_cast<int>(nodes_.size()); }
  int numCandidates(int node) const {
    return static_cast<int>(nodes_[node].size());
  }
  const std::vector<double> &nodeCosts(int node) const { return nodes_[node]; }

  struct Edge {
    int from, to;
    std::vector<std::vector<double>> costs;
  };
  const std::vector<Edge> &edges() const { return edges_; }

  /// The cost of `choice` (one candidate index per node).
  double cost(const std::vector<int> &choice) const;

private:
  std::vector<std::vector<double>> nodes_;
  std::vector<Edge> edges_;
};

struct Solution {
  std::vector<int> choice;
  double cost = 0;
  /// True when every step was exact (eliminations and exhaustive search);
  /// false when the greedy fallback fixed a node.
  bool exact = true;
  /// Counts of each elimination, for reports.
  int edgeEliminations = 0, mergeEliminations = 0, contractions = 0,
      exhaustiveNodes = 0, greedyFixes = 0;
};

struct SolveOptions {
  /// The largest product of candidate counts searched exhaustively.
  double exhaustiveLimit = 1e6;
};

/// The eliminations for one graph shape, found once and replayed on costs.
class Solver {
public:
  explicit Solver(const CostGraph &graph, const SolveOptions &options = {});
  ~Solver();
  Solver(Solver &&) noexcept;
  Solver &operator=(Solver &&) noexcept;
  /// Solves `graph`, which must have the shape the solver was built for
  /// (the same edges, in order, and candidate counts); only costs differ.
  Solution solve(const CostGraph &graph) const;

  /// The steps, defined in CostGraph.cpp.
  struct Plan;

private:
  std::unique_ptr<Plan> plan;
};

/// Solver(graph, options).solve(graph).
Solution solve(const CostGraph &graph, const SolveOptions &options = {});
Solution solveExhaustive(const CostGraph &graph);

} // namespace loom::search

#endif // LOOM_COMPILER_SEARCH_COSTGRAPH_H
