//===- CostGraph.cpp - Eliminations and exhaustive search -----------------===//

#include "compiler/search/CostGraph.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <map>
#include <set>
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

/// The working graph: undirected, one matrix per node pair, stored for the
/// pair (u, w) with u < w as M[choice of u][choice of w].
class Work {
public:
  explicit Work(const CostGraph &g) {
    costs.resize(g.numNodes());
    alive.assign(g.numNodes(), true);
    neighbours.resize(g.numNodes());
    for (int v = 0; v < g.numNodes(); ++v)
      costs[v] = g.nodeCosts(v);
    for (const CostGraph::Edge &e : g.edges()) {
      if (e.from == e.to) {
        // A self-loop only sees the diagonal.
        for (size_t a = 0; a < costs[e.from].size(); ++a)
          costs[e.from][a] += e.costs[a][a];
        continue;
      }
      Matrix m = e.costs;
      if (e.from > e.to)
        m = transpose(m);
      addPair(std::min(e.from, e.to), std::max(e.from, e.to), m);
    }
  }

  static Matrix transpose(const Matrix &m) {
    if (m.empty())
      return m;
    Matrix t(m[0].size(), std::vector<double>(m.size()));
    for (size_t a = 0; a < m.size(); ++a)
      for (size_t b = 0; b < m[a].size(); ++b)
        t[b][a] = m[a][b];
    return t;
  }

  /// Adds `m` (for u < w) to the pair's matrix; counts parallel edges.
  void addPair(int u, int w, const Matrix &m) {
    auto key = std::make_pair(u, w);
    auto it = pairs.find(key);
    if (it == pairs.end()) {
      pairs.emplace(key, m);
      neighbours[u].insert(w);
      neighbours[w].insert(u);
      return;
    }
    ++edgeEliminations;
    for (size_t a = 0; a < m.size(); ++a)
      for (size_t b = 0; b < m[a].size(); ++b)
        it->second[a][b] += m[a][b];
  }

  /// The cost between u (choice a) and w (choice b), in either order.
  double between(int u, int w, int a, int b) const {
    return PairView(*this, u, w)(a, b);
  }

  /// The matrix between u and w, looked up once, indexed by (choice of u,
  /// choice of w): the eliminations read it per pair of choices, and a
  /// map lookup each time was most of the solve.
  class PairView {
  public:
    PairView(const Work &work, int u, int w)
        : m(u < w ? work.pairs.at({u, w}) : work.pairs.at({w, u})),
          swapped(u > w) {}
    double operator()(size_t a, size_t b) const {
      return swapped ? m[b][a] : m[a][b];
    }

  private:
    const Matrix &m;
    bool swapped;
  };

  void removeNode(int v) {
    for (int u : neighbours[v]) {
      neighbours[u].erase(v);
      pairs.erase({std::min(u, v), std::max(u, v)});
    }
    neighbours[v].clear();
    alive[v] = false;
  }

  std::vector<std::vector<double>> costs;
  std::vector<bool> alive;
  std::vector<std::set<int>> neighbours;
  std::map<std::pair<int, int>, Matrix> pairs;
  int edgeEliminations = 0;
};

/// How to recover an eliminated node's choice.
struct Record {
  enum Kind { Isolated, Merge, Contract, Fixed } kind;
  int node;
  int u = -1, w = -1;
  /// Isolated/Fixed: the choice. Merge: best[a]. Contract: best2[a][c].
  int choice = 0;
  std::vector<int> best;
  std::vector<std::vector<int>> best2;
};

/// Folds leaf `v` into its one neighbour `u`: each choice of u gains the
/// cheapest pair cost plus v's cost.
Record mergeLeaf(Work &work, int v, int u) {
  const std::vector<double> &nv = work.costs[v];
  Record r{Record::Merge, v, u, -1, 0, {}, {}};
  Work::PairView uv(work, u, v);
  for (size_t a = 0; a < work.costs[u].size(); ++a) {
    double best = kInf;
    int arg = 0;
    for (size_t b = 0; b < nv.size(); ++b) {
      double c = uv(a, b) + nv[b];
      if (c < best) {
        best = c;
        arg = static_cast<int>(b);
      }
    }
    work.costs[u][a] += best;
    r.best.push_back(arg);
  }
  work.removeNode(v);
  return r;
}

/// Replaces `v`, of two neighbours u < w, by an edge u-w whose costs take
/// v's best choice for each pair of theirs.
Record contractNode(Work &work, int v, int u, int w) {
  const std::vector<double> &nv = work.costs[v];
  size_t su = work.costs[u].size(), sw = work.costs[w].size();
  Matrix m(su, std::vector<double>(sw, kInf));
  Record r{Record::Contract, v, u, w, 0, {}, {}};
  r.best2.assign(su, std::vector<int>(sw, 0));
  Work::PairView uv(work, u, v), vw(work, v, w);
  // u-v plus v's own cost per pair (a, b), summed once rather than per c.
  Matrix left(su, std::vector<double>(nv.size()));
  for (size_t a = 0; a < su; ++a)
    for (size_t b = 0; b < nv.size(); ++b)
      left[a][b] = uv(a, b) + nv[b];
  for (size_t a = 0; a < su; ++a)
    for (size_t c = 0; c < sw; ++c)
      for (size_t b = 0; b < nv.size(); ++b) {
        double cost = left[a][b] + vw(b, c);
        if (cost < m[a][c]) {
          m[a][c] = cost;
          r.best2[a][c] = static_cast<int>(b);
        }
      }
  work.removeNode(v);
  work.addPair(u, w, m); // u < w: the set is ordered
  return r;
}

/// Eliminates nodes of degree 0, 1 and 2 until none is left.
void eliminateSimple(Work &work, std::vector<Record> &records,
                     Solution &solution) {
  const int n = static_cast<int>(work.costs.size());
  bool changed = true;
  while (changed) {
    changed = false;
    for (int v = 0; v < n; ++v) {
      if (!work.alive[v])
        continue;
      const std::set<int> &adj = work.neighbours[v];
      const std::vector<double> &nv = work.costs[v];
      if (adj.empty()) {
        int best = static_cast<int>(std::min_element(nv.begin(), nv.end()) -
                                    nv.begin());
        records.push_back({Record::Isolated, v, -1, -1, best, {}, {}});
        work.alive[v] = false;
        changed = true;
      } else if (adj.size() == 1) {
        records.push_back(mergeLeaf(work, v, *adj.begin()));
        ++solution.mergeEliminations;
        changed = true;
      } else if (adj.size() == 2) {
        int u = *adj.begin(), w = *std::next(adj.begin());
        records.push_back(contractNode(work, v, u, w));
        ++solution.contractions;
        changed = true;
      }
    }
  }
}

/// Exact search over the nodes `rest`, branch and bound in their order.
void searchRest(Work &work, const std::vector<int> &rest, Solution &solution) {
  std::vector<int> current(rest.size(), 0), best;
  double bestCost = kInf;
  std::function<void(size_t, double)> visit = [&](size_t i, double acc) {
    if (acc >= bestCost)
      return;
    if (i == rest.size()) {
      bestCost = acc;
      best = current;
      return;
    }
    int v = rest[i];
    for (size_t a = 0; a < work.costs[v].size(); ++a) {
      double c = acc + work.costs[v][a];
      for (size_t j = 0; j < i; ++j)
        if (work.neighbours[v].count(rest[j]))
          c += work.between(rest[j], v, current[j], static_cast<int>(a));
      current[i] = static_cast<int>(a);
      visit(i + 1, c);
    }
  };
  visit(0, 0);
  for (size_t i = 0; i < rest.size(); ++i) {
    solution.choice[rest[i]] = best[i];
    work.alive[rest[i]] = false;
  }
  solution.exhaustiveNodes += static_cast<int>(rest.size());
}

/// Fixes the busiest node of `rest` to its best local choice (each
/// neighbour at its cheapest for it) and folds that into its neighbours.
Record fixBusiest(Work &work, const std::vector<int> &rest) {
  int v = *std::max_element(rest.begin(), rest.end(), [&](int a, int b) {
    return work.neighbours[a].size() < work.neighbours[b].size();
  });
  int bestChoice = 0;
  double bestCost = kInf;
  for (size_t b = 0; b < work.costs[v].size(); ++b) {
    double c = work.costs[v][b];
    for (int u : work.neighbours[v]) {
      double m = kInf;
      for (size_t a = 0; a < work.costs[u].size(); ++a)
        m = std::min(
            m, work.between(u, v, static_cast<int>(a), static_cast<int>(b)));
      c += m;
    }
    if (c < bestCost) {
      bestCost = c;
      bestChoice = static_cast<int>(b);
    }
  }
  for (int u : work.neighbours[v])
    for (size_t a = 0; a < work.costs[u].size(); ++a)
      work.costs[u][a] += work.between(u, v, static_cast<int>(a), bestChoice);
  work.removeNode(v);
  return {Record::Fixed, v, -1, -1, bestChoice, {}, {}};
}

/// Recovers the eliminated nodes' choices, last eliminated first.
void replayRecords(const std::vector<Record> &records, Solution &solution) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    switch (it->kind) {
    case Record::Isolated:
    case Record::Fixed:
      solution.choice[it->node] = it->choice;
      break;
    case Record::Merge:
      solution.choice[it->node] = it->best[solution.choice[it->u]];
      break;
    case Record::Contract:
      solution.choice[it->node] =
          it->best2[solution.choice[it->u]][solution.choice[it->w]];
      break;
    }
  }
}

} // namespace

Solution solve(const CostGraph &graph, const SolveOptions &options) {
  Work work(graph);
  Solution solution;
  std::vector<Record> records;
  const int n = graph.numNodes();

  solution.choice.assign(n, 0);
  while (true) {
    eliminateSimple(work, records, solution);
    std::vector<int> rest;
    for (int v = 0; v < n; ++v)
      if (work.alive[v])
        rest.push_back(v);
    if (rest.empty())
      break;
    double product = 1;
    for (int v : rest)
      product *= static_cast<double>(work.costs[v].size());
    if (product <= options.exhaustiveLimit) {
      searchRest(work, rest, solution);
      break;
    }
    // Too large: fix the busiest node to its best local choice.
    records.push_back(fixBusiest(work, rest));
    ++solution.greedyFixes;
    solution.exact = false;
  }

  replayRecords(records, solution);
  solution.edgeEliminations = work.edgeEliminations;
  solution.cost = graph.cost(solution.choice);
  return solution;
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
