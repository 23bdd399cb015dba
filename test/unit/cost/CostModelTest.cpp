//===- CostModelTest.cpp - Roofline, alpha-beta and memory, by hand -------===//

#include "compiler/cost/CostModel.h"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>

using namespace loom::cost;

namespace {

HardwareProfile h100() { return *builtinProfile("8xH100-80GB"); }

/// Two 8xH100 nodes: ranks 0-7 on node 0, 8-15 on node 1.
HardwareProfile twoH100Nodes() {
  HardwareProfile p = h100();
  p.nodes = 2;
  return p;
}

std::vector<int64_t> ranks(int64_t begin, int64_t end) {
  std::vector<int64_t> r(end - begin);
  std::iota(r.begin(), r.end(), begin);
  return r;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

} // namespace

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

// A large bf16 GEMM is compute-bound: flops / peak.
TEST(Roofline, ComputeBoundGemm) {
  double n = 8192;
  OpWork gemm{2 * n * n * n, 3 * n * n * 2, "bf16", "matmul", ""};
  EXPECT_DOUBLE_EQ(computeSeconds(h100(), gemm), 2 * n * n * n / 989e12);
  // The same GEMM in f32 runs on the f32 peak.
  gemm.dtype = "f32";
  EXPECT_DOUBLE_EQ(computeSeconds(h100(), gemm), 2 * n * n * n / 67e12);
}

// An elementwise add is memory-bound: bytes / bandwidth.
TEST(Roofline, MemoryBoundAdd) {
  double elements = 1 << 20;
  OpWork add{elements, 3 * 4 * elements, "f32", "elementwise", ""};
  EXPECT_DOUBLE_EQ(computeSeconds(h100(), add), 12 * elements / 3.35e12);
}

// The profile's op overhead is added to every op's roofline time.
TEST(Roofline, OpOverhead) {
  HardwareProfile p = h100();
  p.opOverhead = 5e-6;
  double elements = 1 << 20;
  OpWork add{elements, 3 * 4 * elements, "f32", "elementwise", ""};
  EXPECT_DOUBLE_EQ(computeSeconds(p, add), 5e-6 + 12 * elements / 3.35e12);
  EXPECT_DOUBLE_EQ(computeSeconds(p, OpWork{0, 0, "f32", "other", ""}), 5e-6);
}

// The kernel class's efficiency scales both roofs; unknown classes take
// "other"'s, unknown element types the f32 peak; no work costs nothing.
TEST(Roofline, EfficiencyAndFallbacks) {
  HardwareProfile p = h100();
  p.efficiency["matmul"] = 0.5;
  p.efficiency["other"] = 0.25;
  OpWork gemm{1e12, 1e6, "bf16", "matmul", ""};
  EXPECT_DOUBLE_EQ(computeSeconds(p, gemm), 1e12 / (989e12 * 0.5));
  OpWork copy{0, 1e9, "f32", "elementwise", ""};
  EXPECT_DOUBLE_EQ(computeSeconds(p, copy), 1e9 / 3.35e12);
  OpWork gather{0, 1e9, "i64", "gather", ""};
  EXPECT_DOUBLE_EQ(computeSeconds(p, gather), 1e9 / (3.35e12 * 0.25));
  OpWork intMath{1e12, 0, "i64", "elementwise", ""};
  EXPECT_DOUBLE_EQ(computeSeconds(p, intMath), 1e12 / 67e12);
  EXPECT_EQ(computeSeconds(p, OpWork{}), 0);
}

// An op's own efficiency replaces its class's; other ops of the class keep
// the class's.
TEST(Roofline, OpEfficiency) {
  HardwareProfile p = h100();
  p.efficiency["transcendental"] = 0.5;
  p.opEfficiency["erf"] = 0.125;
  OpWork erf{0, 1e9, "f32", "transcendental", "erf"};
  EXPECT_DOUBLE_EQ(computeSeconds(p, erf), 1e9 / (3.35e12 * 0.125));
  OpWork exp{0, 1e9, "f32", "transcendental", "exp"};
  EXPECT_DOUBLE_EQ(computeSeconds(p, exp), 1e9 / (3.35e12 * 0.5));
}

// With a bandwidth measured by size, a kernel's traffic picks its
// bandwidth: the ends hold, and between two sizes it is linear in
// log(bytes).
TEST(Roofline, BandwidthBySize) {
  HardwareProfile p = h100();
  p.bandwidthBySize = {{1e6, 100e9}, {1e8, 20e9}};
  EXPECT_DOUBLE_EQ(p.bandwidthFor(1e3), 100e9);
  EXPECT_DOUBLE_EQ(p.bandwidthFor(1e9), 20e9);
  EXPECT_NEAR(p.bandwidthFor(1e7), 60e9, 1e-3);
  OpWork add{0, 1e7, "f32", "elementwise", ""};
  EXPECT_NEAR(computeSeconds(p, add), 1e7 / 60e9, 1e-15);
  p.bandwidthBySize.clear();
  EXPECT_DOUBLE_EQ(p.bandwidthFor(1e7), 3.35e12);
}

// The ridge point: at flops/bytes = peak/bandwidth both roofs agree.
TEST(Roofline, RidgePoint) {
  HardwareProfile p = h100();
  double bytes = 1e9, flops = bytes * 989e12 / 3.35e12;
  double t = computeSeconds(p, {flops, bytes, "bf16", "matmul", ""});
  EXPECT_NEAR(t, bytes / 3.35e12, 1e-15);
  EXPECT_NEAR(t, flops / 989e12, 1e-15);
  EXPECT_GT(computeSeconds(p, {2 * flops, bytes, "bf16", "matmul", ""}), t);
  EXPECT_DOUBLE_EQ(computeSeconds(p, {flops / 2, bytes, "bf16", "matmul", ""}),
                   t);
}

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

// The nccl-tests bus factors and the ring step counts.
TEST(Collectives, FactorsAndSteps) {
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::ReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::AllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::Broadcast, 8), 1);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::SendRecv, 2), 1);
  EXPECT_EQ(latencySteps(CollectiveKind::AllReduce, 8), 14);
  EXPECT_EQ(latencySteps(CollectiveKind::ReduceScatter, 8), 7);
  EXPECT_EQ(latencySteps(CollectiveKind::AllGather, 8), 7);
  EXPECT_EQ(latencySteps(CollectiveKind::AllToAll, 8), 7);
  EXPECT_EQ(latencySteps(CollectiveKind::Broadcast, 8), 7);
  EXPECT_EQ(latencySteps(CollectiveKind::SendRecv, 2), 1);
  for (CollectiveKind k :
       {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
        CollectiveKind::AllGather, CollectiveKind::AllToAll,
        CollectiveKind::Broadcast, CollectiveKind::SendRecv}) {
    EXPECT_EQ(busFactor(k, 1), 0) << collectiveName(k);
    EXPECT_EQ(latencySteps(k, 1), 0) << collectiveName(k);
  }
  EXPECT_STREQ(collectiveName(CollectiveKind::ReduceScatter), "reduce_scatter");
}

// The example of the brief: 1 GiB all-reduced over one 8xH100 node takes
// 2*7/8 GiB at 370 GB/s plus 14 steps of 5 us (about 5.15 ms).
TEST(Collectives, AllReduceOneGiBOnH100Node) {
  double t =
      collectiveSeconds(h100(), CollectiveKind::AllReduce, kGiB, ranks(0, 8));
  EXPECT_DOUBLE_EQ(t, 2.0 * 7 / 8 * kGiB / 370e9 + 14 * 5e-6);
  EXPECT_NEAR(t, 5.148e-3, 1e-6);
}

// Reduce-scatter and all-gather of the same buffer each cost half an
// all-reduce, bandwidth and latency alike (the ring all-reduce is the two).
TEST(Collectives, AllReduceIsReduceScatterPlusAllGather) {
  HardwareProfile p = h100();
  std::vector<int64_t> g = ranks(0, 4);
  double ar = collectiveSeconds(p, CollectiveKind::AllReduce, 1e8, g);
  double rs = collectiveSeconds(p, CollectiveKind::ReduceScatter, 1e8, g);
  double ag = collectiveSeconds(p, CollectiveKind::AllGather, 1e8, g);
  EXPECT_DOUBLE_EQ(rs, 3.0 / 4 * 1e8 / 370e9 + 3 * 5e-6);
  EXPECT_DOUBLE_EQ(rs, ag);
  EXPECT_DOUBLE_EQ(ar, rs + ag);
}

// A group inside one node uses NVLink; a group whose ranks fall on two
// nodes uses InfiniBand, however few of its ranks cross.
TEST(Collectives, SlowestLinkTheGroupSpans) {
  HardwareProfile p = twoH100Nodes();
  double bytes = 64e6;
  EXPECT_FALSE(spansNodes(p, ranks(0, 8)));
  EXPECT_FALSE(spansNodes(p, ranks(8, 16)));
  EXPECT_TRUE(spansNodes(p, {7, 8}));
  EXPECT_TRUE(spansNodes(p, {0, 8}));
  EXPECT_EQ(&groupLink(p, ranks(8, 16)), &p.intraNode);
  EXPECT_EQ(&groupLink(p, {0, 8}), &p.interNode);

  // Tensor parallelism inside a node, data parallelism across nodes.
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::AllReduce, bytes, ranks(8, 16)),
      2.0 * 7 / 8 * bytes / 370e9 + 14 * 5e-6);
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::AllReduce, bytes, {3, 11}),
      2.0 * 1 / 2 * bytes / 48e9 + 2 * 1e-5);
  // All 16 ranks: the inter-node bandwidth for the whole ring, whose 15
  // steps cross the node boundary once.
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::AllGather, bytes, ranks(0, 16)),
      15.0 / 16 * bytes / 48e9 + 14 * 5e-6 + 1 * 1e-5);
  // One rank over the boundary is enough for the bandwidth.
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::ReduceScatter, bytes, ranks(4, 9)),
      4.0 / 5 * bytes / 48e9 + 3 * 5e-6 + 1 * 1e-5);
  // An all-to-all is no ring: every step may cross.
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::AllToAll, bytes, ranks(0, 16)),
      15.0 / 16 * bytes / 48e9 + 15 * 1e-5);
  // Pipeline send/recv between stages on two nodes, and within one.
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::SendRecv, bytes, {7, 15}),
      bytes / 48e9 + 1e-5);
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::SendRecv, bytes, {6, 7}),
      bytes / 370e9 + 5e-6);
}

// NCCL's ring latency over many nodes: of a ring's steps, those between
// two ranks of one node take the intra-node latency and only the node
// crossings the inter-node one (2(N-1) for an all-reduce, N-1 otherwise).
TEST(Collectives, RingLatencyCrossesEachNodeOnce) {
  HardwareProfile p = *builtinProfile("8xA100-80GB");
  p.nodes = 192;
  std::vector<int64_t> all = ranks(0, 1536);
  EXPECT_EQ(nodesSpanned(p, all), 192);
  EXPECT_EQ(interNodeSteps(p, CollectiveKind::AllGather, all), 191);
  EXPECT_EQ(interNodeSteps(p, CollectiveKind::AllReduce, all), 382);
  EXPECT_DOUBLE_EQ(collectiveSeconds(p, CollectiveKind::AllGather, 0, all),
                   (1535 - 191) * 5e-6 + 191 * 1e-5);
  EXPECT_DOUBLE_EQ(collectiveSeconds(p, CollectiveKind::AllReduce, 0, all),
                   (3070 - 382) * 5e-6 + 382 * 1e-5);
  // One rank per node (data parallelism across nodes, tensor inside):
  // every step crosses.
  std::vector<int64_t> strided;
  for (int64_t node = 0; node < 16; ++node)
    strided.push_back(node * 8 + 3);
  EXPECT_EQ(interNodeSteps(p, CollectiveKind::AllReduce, strided), 30);
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::AllReduce, 1e9, strided),
      30 * 1e-5 + 2.0 * 15 / 16 * 1e9 / 24e9);
  EXPECT_EQ(interNodeSteps(p, CollectiveKind::AllReduce, ranks(0, 8)), 0);
}

// All-to-all and broadcast by hand on the A100 node.
TEST(Collectives, AllToAllAndBroadcast) {
  HardwareProfile p = *builtinProfile("8xA100-80GB");
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::AllToAll, 8e6, ranks(0, 8)),
      7.0 / 8 * 8e6 / 230e9 + 7 * 5e-6);
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(p, CollectiveKind::Broadcast, 8e6, ranks(0, 2)),
      8e6 / 230e9 + 5e-6);
}

// A group of one rank (or none) moves nothing and costs nothing.
TEST(Collectives, SingleRankIsFree) {
  HardwareProfile p = twoH100Nodes();
  for (CollectiveKind k :
       {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
        CollectiveKind::AllGather, CollectiveKind::AllToAll,
        CollectiveKind::Broadcast, CollectiveKind::SendRecv}) {
    EXPECT_EQ(collectiveSeconds(p, k, kGiB, {5}), 0) << collectiveName(k);
    EXPECT_EQ(collectiveSeconds(p, k, kGiB, {}), 0) << collectiveName(k);
  }
}

// Doubling the group on one link: the bandwidth term grows by the bus
// factor only (toward 2 for all-reduce), the latency term linearly.
TEST(Collectives, GroupSizeScaling) {
  HardwareProfile p = h100();
  p.intraNode.latency = 1e-30; // bandwidth term alone
  double t2 = collectiveSeconds(p, CollectiveKind::AllReduce, 1e9, ranks(0, 2));
  double t8 = collectiveSeconds(p, CollectiveKind::AllReduce, 1e9, ranks(0, 8));
  EXPECT_NEAR(t8 / t2, (2.0 * 7 / 8) / (2.0 * 1 / 2), 1e-12);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

// Optimizer state in the parameters' element type, as Loom's training
// graph holds it.
TEST(Memory, OptimizerState) {
  int64_t paramBytes = 4 * 1000; // 1000 f32 parameters
  EXPECT_EQ(optimizerStateBytes("sgd", paramBytes), 0);
  EXPECT_EQ(optimizerStateBytes("momentum", paramBytes), 4000);
  EXPECT_EQ(optimizerStateBytes("adam", paramBytes), 8000);
  EXPECT_EQ(optimizerStateBytes("adamw", paramBytes), 8000);
  EXPECT_EQ(optimizerStateBytes("lamb", paramBytes), -1);
  EXPECT_TRUE(isKnownOptimizer("adamw"));
  EXPECT_FALSE(isKnownOptimizer("Adam"));
}

// Mixed-precision Adam: 2 (bf16 weights) + 2 (bf16 gradients) + 12 (f32
// master copy and two moments) = 16 bytes per parameter (ZeRO's figure).
TEST(Memory, MixedPrecisionAdamIs16BytesPerParameter) {
  int64_t params = 1'000'000;
  MemoryEstimate m{2 * params, 2 * params,
                   mixedPrecisionOptimizerStateBytes("adamw", params), 0};
  EXPECT_EQ(m.total(), 16 * params);
  EXPECT_EQ(mixedPrecisionOptimizerStateBytes("sgd", params), 4 * params);
  EXPECT_EQ(mixedPrecisionOptimizerStateBytes("momentum", params), 8 * params);
  EXPECT_EQ(mixedPrecisionOptimizerStateBytes("rmsprop", params), -1);
}

// The total is the sum of the four parts, and fits up to the capacity.
TEST(Memory, TotalAndFit) {
  HardwareProfile p = h100();
  MemoryEstimate m{10, 20, 30, 40};
  EXPECT_EQ(m.total(), 100);
  MemoryEstimate full{p.memoryCapacity / 2, p.memoryCapacity / 4,
                      p.memoryCapacity / 8, p.memoryCapacity / 8};
  EXPECT_EQ(full.total(), p.memoryCapacity);
  EXPECT_TRUE(fitsInMemory(p, full));
  full.activations += 1;
  EXPECT_FALSE(fitsInMemory(p, full));
}

//===----------------------------------------------------------------------===//
// Fitting a link to timings
//===----------------------------------------------------------------------===//

namespace {

/// Timings of every ring collective at sizes from 4 KiB to 16 MiB over
/// `n` ranks, as `link` predicts them, each scaled by (1 + noise(i)).
std::vector<CollectiveTiming>
syntheticTimings(const LinkProfile &link, int64_t n,
                 const std::function<double(int)> &noise) {
  HardwareProfile p = h100();
  p.intraNode = link;
  std::vector<CollectiveTiming> timings;
  int i = 0;
  for (CollectiveKind k :
       {CollectiveKind::AllReduce, CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter, CollectiveKind::AllToAll})
    for (double bytes = 4096; bytes <= 16 << 20; bytes *= 4)
      timings.push_back(
          {k, bytes, n,
           collectiveSeconds(p, k, bytes, ranks(0, n)) * (1 + noise(i++))});
  return timings;
}

} // namespace

// Exact timings give back the link they came from.
TEST(LinkFitting, RecoversTheLink) {
  LinkProfile link{12e9, 7e-6};
  LinkFit fit = fitLink(syntheticTimings(link, 4, [](int) { return 0.0; }));
  EXPECT_NEAR(fit.link.bandwidth / link.bandwidth, 1, 1e-9);
  EXPECT_NEAR(fit.link.latency / link.latency, 1, 1e-9);
  EXPECT_LT(fit.maxRelativeError, 1e-9);
  EXPECT_FALSE(fit.clamped);
}

// +-5% alternating noise: the fit stays within a few percent, and reports
// an error of about the noise.
TEST(LinkFitting, ToleratesNoise) {
  LinkProfile link{5e9, 3e-5};
  LinkFit fit = fitLink(
      syntheticTimings(link, 2, [](int i) { return i % 2 ? 0.05 : -0.05; }));
  EXPECT_NEAR(fit.link.bandwidth / link.bandwidth, 1, 0.05);
  EXPECT_NEAR(fit.link.latency / link.latency, 1, 0.1);
  EXPECT_GT(fit.maxRelativeError, 0.03);
  EXPECT_LT(fit.maxRelativeError, 0.1);
}

// Timings that only a negative latency would fit: the latency is held at
// its floor and the bandwidth refitted; a positive link always comes out.
TEST(LinkFitting, ClampsANegativeLatency) {
  std::vector<CollectiveTiming> t = {
      {CollectiveKind::AllGather, 1e6, 2, 0.5e-4},
      {CollectiveKind::AllGather, 2e6, 2, 1.5e-4}};
  LinkFit fit = fitLink(t);
  EXPECT_TRUE(fit.clamped);
  EXPECT_DOUBLE_EQ(fit.link.latency, kMinFitLatency);
  EXPECT_GT(fit.link.bandwidth, 0);
}

// Nothing to fit: single-rank groups and zero times are ignored.
TEST(LinkFitting, NothingToFit) {
  LinkFit fit = fitLink({{CollectiveKind::AllReduce, 1e6, 1, 1e-3},
                         {CollectiveKind::AllReduce, 1e6, 4, 0}});
  EXPECT_EQ(fit.link, (LinkProfile{0, 0}));
  EXPECT_EQ(fitLink({}).link, (LinkProfile{0, 0}));
}
