//===- CostGraphTest.cpp - The elimination solver equals the optimum ------===//
//
// Random cost graphs (chains, series-parallel branches, and general graphs
// with cycles and parallel edges) solved by the eliminations and by
// exhaustive enumeration: the costs must be equal, and the returned choice
// must cost what the solver says.
//
//===----------------------------------------------------------------------===//

#include "compiler/search/CostGraph.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

using namespace loom::search;

namespace {

std::vector<std::vector<double>> randomMatrix(std::mt19937 &rng, int rows,
                                              int cols) {
  std::uniform_real_distribution<double> cost(0, 10);
  std::vector<std::vector<double>> m(rows, std::vector<double>(cols));
  for (auto &row : m)
    for (double &c : row)
      c = cost(rng);
  return m;
}

int addRandomNode(CostGraph &g, std::mt19937 &rng) {
  std::uniform_int_distribution<int> count(1, 5);
  std::uniform_real_distribution<double> cost(0, 10);
  std::vector<double> costs(count(rng));
  for (double &c : costs)
    c = cost(rng);
  return g.addNode(costs);
}

void addRandomEdge(CostGraph &g, std::mt19937 &rng, int u, int v) {
  g.addEdge(u, v, randomMatrix(rng, g.numCandidates(u), g.numCandidates(v)));
}

/// A graph of `n` nodes: a random spanning tree, then `extra` random edges
/// (which make cycles, parallel edges and, now and then, self-loops).
CostGraph randomGraph(std::mt19937 &rng, int n, int extra) {
  CostGraph g;
  for (int i = 0; i < n; ++i)
    addRandomNode(g, rng);
  for (int v = 1; v < n; ++v)
    addRandomEdge(g, rng, std::uniform_int_distribution<int>(0, v - 1)(rng), v);
  for (int k = 0; k < extra; ++k) {
    std::uniform_int_distribution<int> node(0, n - 1);
    addRandomEdge(g, rng, node(rng), node(rng));
  }
  return g;
}

} // namespace

// The acceptance check of the search: at least 50 random small graphs where
// the dynamic programming's cost equals the exact optimum.
TEST(CostGraph, EliminationsEqualExhaustiveOnRandomGraphs) {
  std::mt19937 rng(7);
  int graphs = 0, fullyReduced = 0;
  for (int n = 1; n <= 8; ++n)
    for (int extra = 0; extra <= 6; ++extra)
      for (int trial = 0; trial < 3; ++trial) {
        CostGraph g = randomGraph(rng, n, extra);
        Solution dp = solve(g);
        Solution exact = solveExhaustive(g);
        ASSERT_EQ(dp.choice.size(), static_cast<size_t>(n));
        ASSERT_TRUE(std::isfinite(exact.cost)) << exact.cost;
        EXPECT_NEAR(dp.cost, exact.cost, 1e-9 * std::max(1.0, exact.cost))
            << "n=" << n << " extra=" << extra << " trial=" << trial;
        EXPECT_DOUBLE_EQ(dp.cost, g.cost(dp.choice));
        EXPECT_TRUE(dp.exact);
        fullyReduced += dp.exhaustiveNodes == 0;
        ++graphs;
      }
  EXPECT_GE(graphs, 50);
  std::printf("[ checked  ] %d random graphs, %d reduced by eliminations "
              "alone, the rest finished exhaustively\n",
              graphs, fullyReduced);
}

// Series-parallel graphs (chains with parallel branches, like residual
// blocks and attention's q/k/v fan-out) need no exhaustive step at all.
TEST(CostGraph, SeriesParallelGraphsReduceCompletely) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    CostGraph g;
    int prev = addRandomNode(g, rng);
    for (int block = 0; block < 4; ++block) {
      // prev -> a -> b -> join, prev -> c -> join, prev -> join.
      int a = addRandomNode(g, rng), b = addRandomNode(g, rng),
          c = addRandomNode(g, rng), join = addRandomNode(g, rng);
      addRandomEdge(g, rng, prev, a);
      addRandomEdge(g, rng, a, b);
      addRandomEdge(g, rng, b, join);
      addRandomEdge(g, rng, prev, c);
      addRandomEdge(g, rng, c, join);
      addRandomEdge(g, rng, prev, join);
      prev = join;
    }
    SolveOptions noExhaustive;
    noExhaustive.exhaustiveLimit = 0;
    Solution dp = solve(g, noExhaustive);
    EXPECT_TRUE(dp.exact);
    EXPECT_EQ(dp.greedyFixes, 0);
    EXPECT_EQ(dp.exhaustiveNodes, 0);
    if (g.numNodes() <= 9) {
      Solution exact = solveExhaustive(g);
      EXPECT_NEAR(dp.cost, exact.cost, 1e-9 * exact.cost);
    }
  }
}

// With exhaustive search disabled, graphs that do not reduce fall back to
// fixing nodes greedily: the answer is still a valid choice, never better
// than the optimum, and flagged as not exact.
TEST(CostGraph, GreedyFallbackIsFlagged) {
  std::mt19937 rng(3);
  CostGraph g;
  for (int i = 0; i < 5; ++i)
    addRandomNode(g, rng);
  for (int u = 0; u < 5; ++u) // K5: every node has degree 4
    for (int v = u + 1; v < 5; ++v)
      addRandomEdge(g, rng, u, v);
  SolveOptions noExhaustive;
  noExhaustive.exhaustiveLimit = 0;
  Solution greedy = solve(g, noExhaustive);
  Solution exact = solveExhaustive(g);
  EXPECT_FALSE(greedy.exact);
  EXPECT_GT(greedy.greedyFixes, 0);
  EXPECT_GE(greedy.cost, exact.cost - 1e-9);
  EXPECT_DOUBLE_EQ(greedy.cost, g.cost(greedy.choice));
  EXPECT_NEAR(solve(g).cost, exact.cost, 1e-9);
}

// A long chain (a deep model's spine) is solved in linear time.
TEST(CostGraph, LongChainIsFast) {
  std::mt19937 rng(5);
  CostGraph g;
  int prev = g.addNode(std::vector<double>(25, 1.0));
  for (int i = 0; i < 20000; ++i) {
    int next = g.addNode(std::vector<double>(25, 1.0));
    addRandomEdge(g, rng, prev, next);
    prev = next;
  }
  auto start = std::chrono::steady_clock::now();
  Solution dp = solve(g);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_TRUE(dp.exact);
  EXPECT_EQ(dp.exhaustiveNodes, 0);
  EXPECT_LT(seconds, 10.0);
  std::printf("[ timing   ] chain of 20001 nodes x 25 candidates: %.2f s\n",
              seconds);
}

// A Solver planned on one graph solves any graph of its shape: with new
// costs on the same edges it returns the fresh solve's choice (the same
// eliminations in the same order) and, where enumerable, the optimum.
TEST(CostGraph, SolverReplaysOnNewCosts) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 7;
    CostGraph shape = randomGraph(rng, n, trial % 5);
    Solver solver(shape);
    for (int round = 0; round < 3; ++round) {
      CostGraph g;
      for (int v = 0; v < n; ++v)
        g.addNode(randomMatrix(rng, 1, shape.numCandidates(v))[0]);
      for (const CostGraph::Edge &e : shape.edges())
        g.addEdge(e.from, e.to,
                  randomMatrix(rng, shape.numCandidates(e.from),
                               shape.numCandidates(e.to)));
      Solution replayed = solver.solve(g), fresh = solve(g);
      EXPECT_EQ(replayed.choice, fresh.choice) << "trial " << trial;
      EXPECT_DOUBLE_EQ(replayed.cost, fresh.cost);
      ASSERT_TRUE(std::isfinite(replayed.cost)) << replayed.cost;
      EXPECT_NEAR(replayed.cost, solveExhaustive(g).cost,
                  1e-9 * std::max(1.0, replayed.cost));
    }
  }
}
