//===- MpiCommCheck.cpp - The MPI communicator on a [2, 2] mesh -----------===//
//
// Run under `mpirun -np 4`. Proves that the MPI communicator implements the
// Communicator contract and the redistribution instructions: every
// collective over the groups of each axis and of both axes, for every
// summable type, must give bitwise the member-order results the threads
// communicator gives; and every ordered pair of layouts of tensors of rank
// 1 to 3 on the [2, 2] mesh, planned and executed across the processes,
// must reproduce the global tensor exactly. Point-to-point messages go
// round a ring of the four processes, keep their order per tag, and do not
// deadlock when two ranks both send first (messages large enough that MPI
// needs the receiver). Exits 0 when all is right.
//
//===----------------------------------------------------------------------===//

#include "test/unit/comm/CommTestSupport.h"
#include "test/unit/layout/Simulator.h"

#include <algorithm>
#include <cstdio>

using namespace loom;

namespace {

/// Counts and prints (up to a limit) this rank's failed checks.
struct Checker {
  int64_t rank = 0;
  int64_t failures = 0;
  int64_t checks = 0;

  void check(bool ok, const std::string &what) {
    ++checks;
    if (!ok && ++failures <= 10)
      std::fprintf(stderr, "rank %lld: FAILED %s\n",
                   static_cast<long long>(rank), what.c_str());
  }
  void ok(const std::string &error, const std::string &what) {
    check(error.empty(), what + ": " + error);
  }
};

/// Every collective over this rank's group along `axes`, checked.
void checkCollectives(rt::CollectiveRunner &runner,
                      const std::vector<int> &axes, int64_t iter, Checker &c) {
  rt::Communicator &comm = runner.communicator();
  const rt::RankGroup &group = runner.group(axes);
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t member =
      std::find(group.begin(), group.end(), comm.rank()) - group.begin();
  const std::string where = "over " + runner.mesh().axisListToString(axes) +
                            " iteration " + std::to_string(iter);
  for (rt::DType dtype : {rt::DType::F32, rt::DType::F16, rt::DType::BF16,
                          rt::DType::I32, rt::DType::I64}) {
    const std::string what = std::string(rt::dtypeName(dtype)) + " " + where;
    const int64_t count = 37, perRank = 5, size = rt::dtypeSize(dtype);
    std::vector<unsigned char> data =
        commtest::contribution(dtype, member, count, iter);
    c.ok(comm.allReduceSum(group, dtype, data.data(), count),
         "allReduceSum " + what);
    c.check(data == commtest::memberOrderSum(dtype, n, count, iter),
            "allReduceSum " + what + ": wrong sum");

    std::vector<unsigned char> send =
        commtest::contribution(dtype, member, n * perRank, iter);
    std::vector<unsigned char> recv(perRank * size);
    c.ok(comm.reduceScatterSum(group, dtype, send.data(), recv.data(), perRank),
         "reduceScatterSum " + what);
    std::vector<unsigned char> sum =
        commtest::memberOrderSum(dtype, n, n * perRank, iter);
    c.check(std::equal(recv.begin(), recv.end(),
                       sum.begin() + member * perRank * size),
            "reduceScatterSum " + what + ": wrong sum");
  }

  std::vector<int64_t> mine = {comm.rank(), iter}, all(2 * n);
  c.ok(comm.allGather(group, mine.data(), all.data(), 16),
       "allGather " + where);
  for (int64_t i = 0; i < n; ++i)
    c.check(all[2 * i] == group[i] && all[2 * i + 1] == iter,
            "allGather " + where + ": wrong data");

  std::vector<int64_t> chunks(n), received(n);
  for (int64_t j = 0; j < n; ++j)
    chunks[j] = comm.rank() * 100 + j + iter;
  c.ok(comm.allToAll(group, chunks.data(), received.data(), 8),
       "allToAll " + where);
  for (int64_t i = 0; i < n; ++i)
    c.check(received[i] == group[i] * 100 + member + iter,
            "allToAll " + where + ": wrong data");
  c.ok(comm.barrier(group), "barrier " + where);
}

/// Point-to-point messages between the four processes, checked.
void checkPointToPoint(rt::Communicator &comm, Checker &c) {
  const int64_t n = comm.worldSize(), rank = comm.rank();
  const int64_t next = (rank + 1) % n, prev = (rank + n - 1) % n;
  // A ring, 20 rounds alternating two tags, one of them beyond MPI_TAG_UB.
  for (int64_t iter = 0; iter < 20; ++iter) {
    const int64_t tag = iter % 2 ? (int64_t(1) << 40) + 3 : 7;
    const std::string what = "ring iteration " + std::to_string(iter);
    std::vector<int64_t> out(6), in(6, -1);
    for (int64_t k = 0; k < 6; ++k)
      out[k] = rank * 1000 + iter * 10 + k;
    c.ok(comm.send(next, tag, out.data(), 48), "send " + what);
    c.ok(comm.recv(prev, tag, in.data(), 48), "recv " + what);
    for (int64_t k = 0; k < 6; ++k)
      c.check(in[k] == prev * 1000 + iter * 10 + k, what + ": wrong data");
  }

  // Three messages with tag 1, then one with tag 2; the receiver takes tag
  // 2 first, then tag 1's in the order sent.
  for (int32_t v : {10, 11, 12}) {
    int32_t mine = v + static_cast<int32_t>(rank);
    c.ok(comm.send(next, 1, &mine, 4), "send of tag 1");
  }
  int64_t other = 20 + rank;
  c.ok(comm.send(next, 2, &other, 8), "send of tag 2");
  other = -1;
  c.ok(comm.recv(prev, 2, &other, 8), "recv of tag 2");
  c.check(other == 20 + prev, "tag 2 overtaking tag 1: wrong data");
  for (int32_t v : {10, 11, 12}) {
    int32_t got = -1;
    c.ok(comm.recv(prev, 1, &got, 4), "recv of tag 1");
    c.check(got == v + prev, "tag 1 message " + std::to_string(v) +
                                 " out of order: got " + std::to_string(got));
  }

  // Ranks 0-1 and 2-3 both send 8 MiB before receiving: beyond any eager
  // limit, so a send that waited for its receiver would deadlock here.
  const int64_t partner = rank ^ 1, count = int64_t(1) << 20;
  std::vector<int64_t> big(count), got(count, -1);
  for (int64_t k = 0; k < count; ++k)
    big[k] = rank * count + k;
  c.ok(comm.send(partner, 3, big.data(), count * 8), "send of 8 MiB");
  c.ok(comm.recv(partner, 3, got.data(), count * 8), "recv of 8 MiB");
  bool right = true;
  for (int64_t k = 0; k < count; ++k)
    right = right && got[k] == partner * count + k;
  c.check(right, "8 MiB exchange: wrong data");

  // A receive of the wrong size is refused and leaves the message.
  int64_t v = 100 + rank, w[2] = {-1, -1};
  c.ok(comm.send(next, 4, &v, 8), "send of 8 bytes");
  c.check(comm.recv(prev, 4, w, 16) ==
              "recv: the message from rank " + std::to_string(prev) +
                  " with tag 4 has 8 bytes, not the 16 expected",
          "recv of the wrong size is refused");
  c.ok(comm.recv(prev, 4, w, 8), "recv of the right size after a refusal");
  c.check(w[0] == 100 + prev, "recv after a refusal: wrong data");
  c.check(comm.send(rank, 0, &v, 8) ==
              "send: rank " + std::to_string(rank) + " cannot message itself",
          "a send to itself is refused");
}

/// Every layout pair of a tensor of `shape` on the mesh, executed across
/// the processes; returns the number of pairs.
int64_t checkEveryPair(rt::CollectiveRunner &runner,
                       const std::vector<int64_t> &shape, rt::DType dtype,
                       Checker &c) {
  const layout::Mesh &mesh = runner.mesh();
  rt::Communicator &comm = runner.communicator();
  const rt::RankGroup world = runner.group({0, 1});
  std::vector<layout::TensorLayout> layouts =
      layout::sim::enumerateLayouts(mesh, shape);
  const layout::sim::Tensor global = layout::sim::makeGlobal(shape, 42);
  layout::Planner planner(mesh, shape,
                          static_cast<int64_t>(rt::dtypeSize(dtype)));
  int64_t pairs = 0;
  std::string error;
  for (size_t i = 0; i < layouts.size(); ++i) {
    for (size_t j = 0; j < layouts.size(); ++j) {
      const layout::TensorLayout &source = layouts[i], &target = layouts[j];
      const std::string what =
          source.toString(mesh) + " -> " + target.toString(mesh);
      std::optional<layout::RedistributionPlan> p =
          planner.plan(source, target, error);
      std::optional<std::vector<commtest::Instruction>> instructions;
      if (p)
        instructions = commtest::lowerPlan(mesh, *p, shape, error);
      if (!instructions) {
        c.check(false, what + ": no plan: " + error);
        continue;
      }
      std::vector<unsigned char> buffer =
          commtest::encode(layout::sim::materialize(mesh, source, global,
                                                    i * 7919 + j)[comm.rank()],
                           dtype);
      error = commtest::runInstructions(runner, *instructions, dtype, buffer);
      c.ok(error, what);
      if (!error.empty())
        continue;
      // Every rank gathers every rank's result and checks the whole.
      std::vector<unsigned char> all(world.size() * buffer.size());
      c.ok(comm.allGather(world, buffer.data(), all.data(), buffer.size()),
           what + ": gathering the results");
      layout::sim::RankBuffers buffers;
      for (size_t r = 0; r < world.size(); ++r)
        buffers.push_back(commtest::decode(
            std::vector<unsigned char>(all.begin() + r * buffer.size(),
                                       all.begin() + (r + 1) * buffer.size()),
            dtype));
      std::optional<layout::sim::Tensor> out =
          layout::sim::reconstruct(mesh, target, shape, buffers, error);
      c.check(out && out->data == global.data,
              what + ": " + (out ? "wrong result" : error));
      ++pairs;
    }
  }
  return pairs;
}

} // namespace

int main() {
  std::string error;
  std::unique_ptr<rt::Communicator> comm = rt::createMpiCommunicator(error);
  if (!comm) {
    std::fprintf(stderr, "cannot start MPI: %s\n", error.c_str());
    return 1;
  }
  if (comm->worldSize() != 4) {
    std::fprintf(stderr, "run with 4 processes (mpirun -np 4), not %lld\n",
                 static_cast<long long>(comm->worldSize()));
    return 1;
  }
  std::optional<layout::Mesh> mesh =
      layout::Mesh::create({{"dp", 2}, {"tp", 2}}, error);
  rt::CollectiveRunner runner(*mesh, *comm);
  Checker c;
  c.rank = comm->rank();

  c.check(comm->name() == "mpi", "name is " + comm->name());
  c.check(rt::launchedByMpirun(), "launchedByMpirun() under mpirun");
  int64_t v = 0;
  c.check(comm->allReduceSum({(comm->rank() + 1) % 4}, rt::DType::I64, &v, 1) ==
              "allReduceSum: rank " + std::to_string(comm->rank()) +
                  " is not a member of group [" +
                  std::to_string((comm->rank() + 1) % 4) + "]",
          "a group without the caller is refused");

  // The groups of one axis run at the same time in different processes;
  // alternate the axes to exercise the cached sub-communicators.
  for (int64_t iter = 0; iter < 20; ++iter)
    for (std::vector<int> axes :
         {std::vector<int>{0}, std::vector<int>{1}, std::vector<int>{0, 1},
          std::vector<int>{1, 0}, std::vector<int>{}})
      checkCollectives(runner, axes, iter, c);
  checkPointToPoint(*comm, c);

  int64_t pairs = 0;
  for (rt::DType dtype : {rt::DType::I64, rt::DType::F32})
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{8}, std::vector<int64_t>{8, 4},
          std::vector<int64_t>{4, 8, 4}})
      pairs += checkEveryPair(runner, shape, dtype, c);

  // Agree on the outcome, so that every process exits alike.
  int64_t failures = c.failures;
  error =
      comm->allReduceSum(runner.group({0, 1}), rt::DType::I64, &failures, 1);
  if (!error.empty()) {
    std::fprintf(stderr, "rank %lld: %s\n", static_cast<long long>(c.rank),
                 error.c_str());
    return 1;
  }
  if (c.rank == 0)
    std::printf("loom-mpi-comm-check: 4 ranks, %lld checks per rank, %lld "
                "layout pairs executed: %s\n",
                static_cast<long long>(c.checks), static_cast<long long>(pairs),
                failures ? "FAILED" : "all correct");
  return failures ? 1 : 0;
}
