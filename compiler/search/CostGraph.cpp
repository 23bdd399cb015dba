//===- CostGraph.cpp - Eliminations and exhaustive search -----------------===//
//
// A Solver works in two phases. Planning walks the graph's shape (which
// nodes neighbour which, and how many candidates each has) and records each
// elimination as a step between numbered pair matrices ("slots"); solving
// replays the steps on the costs, in flat arrays. Replaying computes the
// same numbers in the same order as eliminating on the costs directly.
//
//===----------------------------------------------------------------------===//

#include "compiler/search/CostGraph.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace loom::search {

using Matrix = std::vector<std::vector<double>>;

int CostGraph::addNode(std::vector<double> costs) {
  nodes_.push_back(std::move(costs));
  return static_cast<int>(nodes_.size()) - 1;
}

void CostGraph::setNodeCosts(int node, std::vector<double> costs) {
  assert(costs.size() == nodes_[node].size() && "candidate count changed");
  nodes_[node] = std::move(costs);
}

void CostGraph::setEdgeCosts(int edge, std::vector<std::vector<double>> costs) {
  assert(costs.size() == edges_[edge].costs.size() &&
         "candidate count changed");
  edges_[edge].costs = std::move(costs);
}

void CostGraph::addEdge(int from, int to, Matrix costs) {
  edges_.push_back({from, to, std::move(costs)});
}

double CostGraph::cost(const std::vector<int> &choice) const {
  double total = 0;
  for (size_t v = 0; v < nodes_.size(); ++v)
    total += nodes_[v][choice[v]];
  for (const Edge &e : edges_)
    total += e.costs[choice[e.from]][choice[e.to]];
  return total;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// One elimination. A slot holds the matrix of a node pair (lo, hi), lo <
/// hi, as M[choice of lo][choice of hi].
struct Step {
  enum Kind { Isolated, Merge, Contract, Fix, Exhaustive } kind;
  int node = -1;
  /// Merge: the neighbour u and the slot u-node. Contract: the neighbours
  /// u < w, the slots u-node and node-w, and the slot u-w the contraction
  /// adds to (`fresh` when the pair had none).
  int u = -1, w = -1;
  int uv = -1, vw = -1, uw = -1;
  bool fresh = false;
  /// Fix: each neighbour, with the slot between it and `node`.
  std::vector<std::pair<int, int>> around;
  /// Exhaustive: the nodes left and, per node, the earlier ones it
  /// neighbours (their index in `rest`) with the slot between them.
  std::vector<int> rest;
  std::vector<std::vector<std::pair<int, int>>> earlier;
};

/// How a graph edge enters the working graph: onto its node's costs (a
/// self-loop, slot -1), as its slot's first matrix, or added to the slot
/// (parallel edges); transposed when its `from` is the pair's hi.
struct EdgeEntry {
  int slot = -1;
  bool transposed = false, add = false;
};

} // namespace

struct Solver::Plan {
  std::vector<size_t> sizes;
  /// Per slot, its pair (lo, hi).
  std::vector<std::pair<int, int>> slotNodes;
  std::vector<EdgeEntry> edges;
  std::vector<Step> steps;
  int edgeEliminations = 0, mergeEliminations = 0, contractions = 0,
      exhaustiveNodes = 0, greedyFixes = 0;
};

namespace {

using Plan = Solver::Plan;

/// The working graph's shape while planning: who neighbours whom, and the
/// slot of each pair.
class Shape {
public:
  Shape(const CostGraph &g, Plan &plan) : plan(plan) {
    const int n = g.numNodes();
    alive.assign(n, true);
    neighbours.resize(n);
    for (int v = 0; v < n; ++v)
      plan.sizes.push_back(g.nodeCosts(v).size());
    for (const CostGraph::Edge &e : g.edges()) {
      EdgeEntry entry;
      if (e.from != e.to) {
        auto [slot, fresh] = addPair(e.from, e.to);
        entry = {slot, e.from > e.to, !fresh};
      }
      plan.edges.push_back(entry);
    }
  }

  int slotOf(int a, int b) const {
    return pairs.at({std::min(a, b), std::max(a, b)});
  }

  /// A matrix between u and w: a new slot, or the pair's slot it adds to
  /// (an edge elimination). Returns the slot and whether it is new.
  std::pair<int, bool> addPair(int u, int w) {
    auto key = std::make_pair(std::min(u, w), std::max(u, w));
    auto it = pairs.find(key);
    if (it != pairs.end()) {
      ++plan.edgeEliminations;
      return {it->second, false};
    }
    int slot = static_cast<int>(plan.slotNodes.size());
    plan.slotNodes.push_back(key);
    pairs.emplace(key, slot);
    neighbours[u].insert(w);
    neighbours[w].insert(u);
    return {slot, true};
  }

  void removeNode(int v) {
    for (int u : neighbours[v]) {
      neighbours[u].erase(v);
      pairs.erase({std::min(u, v), std::max(u, v)});
    }
    neighbours[v].clear();
    alive[v] = false;
  }

  Plan &plan;
  std::vector<bool> alive;
  std::vector<std::set<int>> neighbours;
  std::map<std::pair<int, int>, int> pairs;
};

/// Plans eliminations of nodes of degree 0, 1 and 2 until none is left.
void planSimple(Shape &shape, Plan &plan) {
  const int n = static_cast<int>(plan.sizes.size());
  bool changed = true;
  while (changed) {
    changed = false;
    for (int v = 0; v < n; ++v) {
      if (!shape.alive[v])
        continue;
      const std::set<int> &adj = shape.neighbours[v];
      Step step;
      step.node = v;
      if (adj.empty()) {
        step.kind = Step::Isolated;
        shape.alive[v] = false;
      } else if (adj.size() == 1) {
        step.kind = Step::Merge;
        step.u = *adj.begin();
        step.uv = shape.slotOf(step.u, v);
        shape.removeNode(v);
        ++plan.mergeEliminations;
      } else if (adj.size() == 2) {
        step.kind = Step::Contract;
        step.u = *adj.begin();
        step.w = *std::next(adj.begin());
        step.uv = shape.slotOf(step.u, v);
        step.vw = shape.slotOf(v, step.w);
        shape.removeNode(v);
        std::tie(step.uw, step.fresh) = shape.addPair(step.u, step.w);
        ++plan.contractions;
      } else {
        continue;
      }
      plan.steps.push_back(std::move(step));
      changed = true;
    }
  }
}

/// Plans the end of the solve for the nodes `rest` that did not reduce:
/// an exhaustive search when small enough (true), else fixing the busiest
/// node (false: plan again).
bool planRest(Shape &shape, Plan &plan, const std::vector<int> &rest,
              const SolveOptions &options) {
  double product = 1;
  for (int v : rest)
    product *= static_cast<double>(plan.sizes[v]);
  Step step;
  if (product <= options.exhaustiveLimit) {
    step.kind = Step::Exhaustive;
    step.rest = rest;
    step.earlier.resize(rest.size());
    for (size_t i = 0; i < rest.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (shape.neighbours[rest[i]].count(rest[j]))
          step.earlier[i].push_back(
              {static_cast<int>(j), shape.slotOf(rest[j], rest[i])});
    for (int v : rest)
      shape.alive[v] = false;
    plan.exhaustiveNodes += static_cast<int>(rest.size());
    plan.steps.push_back(std::move(step));
    return true;
  }
  int v = *std::max_element(rest.begin(), rest.end(), [&](int a, int b) {
    return shape.neighbours[a].size() < shape.neighbours[b].size();
  });
  step.kind = Step::Fix;
  step.node = v;
  for (int u : shape.neighbours[v])
    step.around.push_back({u, shape.slotOf(u, v)});
  shape.removeNode(v);
  ++plan.greedyFixes;
  plan.steps.push_back(std::move(step));
  return false;
}

/// The costs while solving: each node's, each slot's (flat), and what each
/// step recorded to recover its node's choice.
class Numbers {
public:
  Numbers(const Plan &plan, const CostGraph &g) : plan(plan) {
    costs.resize(plan.sizes.size());
    for (size_t v = 0; v < plan.sizes.size(); ++v) {
      assert(g.nodeCosts(v).size() == plan.sizes[v] && "another graph shape");
      costs[v] = g.nodeCosts(v);
    }
    slots.resize(plan.slotNodes.size());
    assert(g.edges().size() == plan.edges.size() && "another graph shape");
    for (size_t k = 0; k < plan.edges.size(); ++k)
      enter(g.edges()[k], plan.edges[k]);
    chosen.assign(plan.steps.size(), 0);
    best.resize(plan.steps.size());
  }

  /// A slot read as (choice of `first`, choice of the other node).
  struct View {
    const double *m;
    size_t cols;
    bool swapped;
    double operator()(size_t a, size_t b) const {
      return swapped ? m[b * cols + a] : m[a * cols + b];
    }
  };
  View view(int slot, int first) const {
    const auto &[lo, hi] = plan.slotNodes[slot];
    return {slots[slot].data(), plan.sizes[hi], first != lo};
  }

  void run(Solution &solution);

private:
  void enter(const CostGraph::Edge &e, const EdgeEntry &entry);
  void merge(size_t k, const Step &s);
  void contract(size_t k, const Step &s);
  void fix(size_t k, const Step &s);
  void exhaustive(const Step &s, Solution &solution);

  const Plan &plan;
  std::vector<std::vector<double>> costs;
  std::vector<std::vector<double>> slots;
  /// Per step: Isolated and Fix, the choice; Merge, the best choice per
  /// choice of u; Contract, per (choice of u, choice of w), row-major.
  std::vector<int> chosen;
  std::vector<std::vector<int>> best;
};

void Numbers::enter(const CostGraph::Edge &e, const EdgeEntry &entry) {
  if (entry.slot < 0) {
    // A self-loop only sees the diagonal.
    for (size_t a = 0; a < costs[e.from].size(); ++a)
      costs[e.from][a] += e.costs[a][a];
    return;
  }
  const auto &[lo, hi] = plan.slotNodes[entry.slot];
  const size_t rows = plan.sizes[lo], cols = plan.sizes[hi];
  std::vector<double> &m = slots[entry.slot];
  if (!entry.add)
    m.assign(rows * cols, 0);
  for (size_t a = 0; a < rows; ++a)
    for (size_t b = 0; b < cols; ++b) {
      double c = entry.transposed ? e.costs[b][a] : e.costs[a][b];
      if (entry.add)
        m[a * cols + b] += c;
      else
        m[a * cols + b] = c;
    }
}

/// Folds leaf v into its one neighbour u: each choice of u gains the
/// cheapest pair cost plus v's cost.
void Numbers::merge(size_t k, const Step &s) {
  const std::vector<double> &nv = costs[s.node];
  View uv = view(s.uv, s.u);
  std::vector<int> &arg = best[k];
  arg.assign(costs[s.u].size(), 0);
  for (size_t a = 0; a < costs[s.u].size(); ++a) {
    double least = kInf;
    for (size_t b = 0; b < nv.size(); ++b) {
      double c = uv(a, b) + nv[b];
      if (c < least) {
        least = c;
        arg[a] = static_cast<int>(b);
      }
    }
    costs[s.u][a] += least;
  }
}

/// Replaces v, of two neighbours u < w, by a u-w matrix whose costs take
/// v's best choice for each pair of theirs (the first best, in v's order).
void Numbers::contract(size_t k, const Step &s) {
  const std::vector<double> &nv = costs[s.node];
  const size_t su = costs[s.u].size(), sv = nv.size(), sw = costs[s.w].size();
  View uv = view(s.uv, s.u), vw = view(s.vw, s.node);
  // v-w as rows of v's choices, so that the innermost loop runs over w's.
  std::vector<double> right(sv * sw);
  for (size_t b = 0; b < sv; ++b)
    for (size_t c = 0; c < sw; ++c)
      right[b * sw + c] = vw(b, c);
  std::vector<double> m(su * sw, kInf);
  std::vector<int> &arg = best[k];
  arg.assign(su * sw, 0);
  for (size_t a = 0; a < su; ++a) {
    double *row = &m[a * sw];
    int *argRow = &arg[a * sw];
    for (size_t b = 0; b < sv; ++b) {
      const double left = uv(a, b) + nv[b];
      const double *r = &right[b * sw];
      // Selects rather than branches, so that the loop vectorizes.
      const int bi = static_cast<int>(b);
      for (size_t c = 0; c < sw; ++c) {
        const double cost = left + r[c], was = row[c];
        const int wasArg = argRow[c];
        const bool better = cost < was;
        row[c] = better ? cost : was;
        argRow[c] = better ? bi : wasArg;
      }
    }
  }
  std::vector<double> &target = slots[s.uw];
  if (s.fresh) {
    target = std::move(m);
  } else {
    for (size_t i = 0; i < target.size(); ++i)
      target[i] += m[i];
  }
  slots[s.uv].clear();
  slots[s.vw].clear();
}

/// Fixes v to its best local choice (each neighbour at its cheapest for
/// it) and folds that into its neighbours.
void Numbers::fix(size_t k, const Step &s) {
  const int v = s.node;
  int bestChoice = 0;
  double bestCost = kInf;
  for (size_t b = 0; b < costs[v].size(); ++b) {
    double c = costs[v][b];
    for (const auto &[u, slot] : s.around) {
      View uv = view(slot, u);
      double m = kInf;
      for (size_t a = 0; a < costs[u].size(); ++a)
        m = std::min(m, uv(a, b));
      c += m;
    }
    if (c < bestCost) {
      bestCost = c;
      bestChoice = static_cast<int>(b);
    }
  }
  for (const auto &[u, slot] : s.around) {
    View uv = view(slot, u);
    for (size_t a = 0; a < costs[u].size(); ++a)
      costs[u][a] += uv(a, static_cast<size_t>(bestChoice));
  }
  chosen[k] = bestChoice;
}

/// Exact search over the nodes left, branch and bound in their order.
void Numbers::exhaustive(const Step &s, Solution &solution) {
  const std::vector<int> &rest = s.rest;
  std::vector<int> current(rest.size(), 0), found;
  double bestCost = kInf;
  std::function<void(size_t, double)> visit = [&](size_t i, double acc) {
    if (acc >= bestCost)
      return;
    if (i == rest.size()) {
      bestCost = acc;
      found = current;
      return;
    }
    int v = rest[i];
    for (size_t a = 0; a < costs[v].size(); ++a) {
      double c = acc + costs[v][a];
      for (const auto &[j, slot] : s.earlier[i])
        c += view(slot, rest[j])(current[j], a);
      current[i] = static_cast<int>(a);
      visit(i + 1, c);
    }
  };
  visit(0, 0);
  for (size_t i = 0; i < rest.size() && i < found.size(); ++i)
    solution.choice[rest[i]] = found[i];
}

void Numbers::run(Solution &solution) {
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const Step &s = plan.steps[k];
    switch (s.kind) {
    case Step::Isolated: {
      const std::vector<double> &nv = costs[s.node];
      chosen[k] =
          static_cast<int>(std::min_element(nv.begin(), nv.end()) - nv.begin());
      break;
    }
    case Step::Merge:
      merge(k, s);
      break;
    case Step::Contract:
      contract(k, s);
      break;
    case Step::Fix:
      fix(k, s);
      break;
    case Step::Exhaustive:
      exhaustive(s, solution);
      break;
    }
  }
  // Recover the eliminated nodes' choices, last eliminated first.
  for (size_t k = plan.steps.size(); k-- > 0;) {
    const Step &s = plan.steps[k];
    std::vector<int> &choice = solution.choice;
    switch (s.kind) {
    case Step::Isolated:
    case Step::Fix:
      choice[s.node] = chosen[k];
      break;
    case Step::Merge:
      choice[s.node] = best[k][choice[s.u]];
      break;
    case Step::Contract:
      choice[s.node] = best[k][choice[s.u] * costs[s.w].size() + choice[s.w]];
      break;
    case Step::Exhaustive:
      break;
    }
  }
}

} // namespace

Solver::Solver(const CostGraph &graph, const SolveOptions &options)
    : plan(std::make_unique<Plan>()) {
  Shape shape(graph, *plan);
  const int n = graph.numNodes();
  while (true) {
    planSimple(shape, *plan);
    std::vector<int> rest;
    for (int v = 0; v < n; ++v)
      if (shape.alive[v])
        rest.push_back(v);
    if (rest.empty() || planRest(shape, *plan, rest, options))
      break;
  }
}

Solver::~Solver() = default;
Solver::Solver(Solver &&) noexcept = default;
Solver &Solver::operator=(Solver &&) noexcept = default;

Solution Solver::solve(const CostGraph &graph) const {
  Solution solution;
  solution.choice.assign(graph.numNodes(), 0);
  Numbers numbers(*plan, graph);
  numbers.run(solution);
  solution.exact = plan->greedyFixes == 0;
  solution.edgeEliminations = plan->edgeEliminations;
  solution.mergeEliminations = plan->mergeEliminations;
  solution.contractions = plan->contractions;
  solution.exhaustiveNodes = plan->exhaustiveNodes;
  solution.greedyFixes = plan->greedyFixes;
  solution.cost = graph.cost(solution.choice);
  return solution;
}

Solution solve(const CostGraph &graph, const SolveOptions &options) {
  return Solver(graph, options).solve(graph);
}

Solution solveExhaustive(const CostGraph &graph) {
  const int n = graph.numNodes();
  Solution best;
  best.cost = kInf;
  std::vector<int> choice(n, 0);
  std::function<void(int)> visit = [&](int v) {
    if (v == n) {
      double c = graph.cost(choice);
      if (c < best.cost) {
        best.cost = c;
        best.choice = choice;
      }
      return;
    }
    for (int a = 0; a < graph.numCandidates(v); ++a) {
      choice[v] = a;
      visit(v + 1);
    }
  };
  visit(0);
  return best;
}

} // namespace loom::search
