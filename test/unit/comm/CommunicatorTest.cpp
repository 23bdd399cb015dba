//===- CommunicatorTest.cpp - The threads communicator --------------------===//
//
// Every collective of the threads communicator on worlds of 1 to 8 ranks,
// checked against results computed here: sums in member order must match
// bit for bit on every member, groups of one mesh axis run concurrently,
// and long runs of calls on one group catch generation bugs. Then the
// point-to-point messages of pipeline stages: delivery, per-tag order,
// buffered sends and misuse.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "common/layout/Mesh.h"
#include "test/unit/comm/CommTestSupport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

using namespace loom;
using namespace loom::rt;

namespace {

/// Runs `body(rank, comm)` on one thread per rank of a fresh world.
template <typename Body> void onRanks(int64_t n, Body body) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createThreadsCommunicators(n);
  commtest::RankPool pool(n);
  pool.run([&](int64_t rank) { body(rank, *comms[rank]); });
}

RankGroup world(int64_t n) {
  RankGroup g(n);
  std::iota(g.begin(), g.end(), 0);
  return g;
}

const DType kSumTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32,
                           DType::I64};
const int64_t kWorldSizes[] = {1, 2, 3, 4, 8};

} // namespace

// An all-reduce over the whole world leaves every member with exactly the
// member-order sum, for every summable type and a count that the group
// size does not divide.
TEST(ThreadsCommunicator, AllReduceSumEveryTypeAndSize) {
  for (int64_t n : kWorldSizes) {
    for (DType dtype : kSumTypes) {
      const int64_t count = 37;
      const std::vector<unsigned char> expected =
          commtest::memberOrderSum(dtype, n, count);
      onRanks(n, [&](int64_t rank, Communicator &comm) {
        std::vector<unsigned char> data =
            commtest::contribution(dtype, rank, count);
        EXPECT_EQ(comm.allReduceSum(world(n), dtype, data.data(), count), "");
        EXPECT_EQ(data, expected)
            << "rank " << rank << " of " << n << ", " << dtypeName(dtype);
      });
    }
  }
}

// A reduce-scatter gives member i chunk i of the member-order sum.
TEST(ThreadsCommunicator, ReduceScatterSumEveryTypeAndSize) {
  for (int64_t n : kWorldSizes) {
    for (DType dtype : kSumTypes) {
      const int64_t perRank = 5, size = dtypeSize(dtype);
      const std::vector<unsigned char> sum =
          commtest::memberOrderSum(dtype, n, n * perRank);
      onRanks(n, [&](int64_t rank, Communicator &comm) {
        std::vector<unsigned char> send =
            commtest::contribution(dtype, rank, n * perRank);
        std::vector<unsigned char> recv(perRank * size);
        EXPECT_EQ(comm.reduceScatterSum(world(n), dtype, send.data(),
                                        recv.data(), perRank),
                  "");
        std::vector<unsigned char> expected(sum.begin() + rank * perRank * size,
                                            sum.begin() +
                                                (rank + 1) * perRank * size);
        EXPECT_EQ(recv, expected)
            << "rank " << rank << " of " << n << ", " << dtypeName(dtype);
      });
    }
  }
}

// An all-gather concatenates the members' bytes in member order, and an
// all-to-all delivers chunk j of member i as chunk i of member j.
TEST(ThreadsCommunicator, AllGatherAndAllToAll) {
  for (int64_t n : kWorldSizes) {
    const int64_t bytes = 6;
    auto byte = [](int64_t from, int64_t chunk, int64_t k) {
      return static_cast<unsigned char>(from * 50 + chunk * 7 + k);
    };
    onRanks(n, [&](int64_t rank, Communicator &comm) {
      std::vector<unsigned char> send(bytes), gathered(n * bytes);
      for (int64_t k = 0; k < bytes; ++k)
        send[k] = byte(rank, 0, k);
      EXPECT_EQ(comm.allGather(world(n), send.data(), gathered.data(), bytes),
                "");
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < bytes; ++k)
          EXPECT_EQ(gathered[i * bytes + k], byte(i, 0, k));

      std::vector<unsigned char> chunks(n * bytes), received(n * bytes);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < bytes; ++k)
          chunks[j * bytes + k] = byte(rank, j, k);
      EXPECT_EQ(comm.allToAll(world(n), chunks.data(), received.data(), bytes),
                "");
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < bytes; ++k)
          EXPECT_EQ(received[i * bytes + k], byte(i, rank, k));
      EXPECT_EQ(comm.barrier(world(n)), "");
    });
  }
}

// Every group of one mesh axis runs its collectives at the same time as
// the others, alternating between the two axes, for many iterations with
// inputs that change each time (a stale or mixed-up rendezvous shows).
TEST(ThreadsCommunicator, ConcurrentGroupsOfEveryAxis) {
  for (std::vector<int64_t> sizes :
       {std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 3}}) {
    std::string error;
    std::optional<layout::Mesh> mesh =
        layout::Mesh::create({{"dp", sizes[0]}, {"tp", sizes[1]}}, error);
    ASSERT_TRUE(mesh) << error;
    const int64_t n = mesh->numDevices();
    // groups[axis][rank]: the rank's group along the axis.
    std::vector<std::vector<RankGroup>> groups(2, std::vector<RankGroup>(n));
    for (int axis = 0; axis < 2; ++axis)
      for (const RankGroup &g : layout::commGroups(*mesh, {axis}))
        for (int64_t r : g)
          groups[axis][r] = g;
    const int64_t count = 11;
    onRanks(n, [&](int64_t rank, Communicator &comm) {
      for (int64_t iter = 0; iter < 200; ++iter) {
        int axis = iter % 2;
        const RankGroup &g = groups[axis][rank];
        int64_t member = std::find(g.begin(), g.end(), rank) - g.begin();
        int64_t size = static_cast<int64_t>(g.size());
        DType dtype = iter % 3 == 0 ? DType::BF16 : DType::I64;
        // Members contribute as if they were ranks 0..size-1 of a world.
        std::vector<unsigned char> data =
            commtest::contribution(dtype, member, count, iter);
        EXPECT_EQ(comm.allReduceSum(g, dtype, data.data(), count), "");
        EXPECT_EQ(data, commtest::memberOrderSum(dtype, size, count, iter))
            << "iteration " << iter << ", rank " << rank;

        std::vector<int64_t> mine = {rank, iter}, all(2 * size);
        EXPECT_EQ(comm.allGather(g, mine.data(), all.data(), 16), "");
        for (int64_t i = 0; i < size; ++i) {
          EXPECT_EQ(all[2 * i], g[i]);
          EXPECT_EQ(all[2 * i + 1], iter);
        }
      }
    });
  }
}

// Two hundred consecutive collectives of every kind on one group, each
// checked, on worlds of 3 and 4 ranks.
TEST(ThreadsCommunicator, ManyConsecutiveCalls) {
  for (int64_t n : {3, 4}) {
    onRanks(n, [&](int64_t rank, Communicator &comm) {
      RankGroup g = world(n);
      for (int64_t iter = 0; iter < 200; ++iter) {
        switch (iter % 4) {
        case 0: {
          std::vector<int64_t> v = {rank + iter, 1};
          EXPECT_EQ(comm.allReduceSum(g, DType::I64, v.data(), 2), "");
          EXPECT_EQ(v[0], n * (n - 1) / 2 + n * iter);
          EXPECT_EQ(v[1], n);
          break;
        }
        case 1: {
          std::vector<int64_t> send(n), recv(1);
          for (int64_t j = 0; j < n; ++j)
            send[j] = rank * 100 + j + iter;
          EXPECT_EQ(
              comm.reduceScatterSum(g, DType::I64, send.data(), recv.data(), 1),
              "");
          EXPECT_EQ(recv[0], 100 * n * (n - 1) / 2 + n * (rank + iter));
          break;
        }
        case 2: {
          std::vector<int64_t> send(n), recv(n);
          for (int64_t j = 0; j < n; ++j)
            send[j] = rank * 100 + j + iter;
          EXPECT_EQ(comm.allToAll(g, send.data(), recv.data(), 8), "");
          for (int64_t i = 0; i < n; ++i)
            EXPECT_EQ(recv[i], i * 100 + rank + iter);
          break;
        }
        default:
          EXPECT_EQ(comm.barrier(g), "");
        }
      }
    });
  }
}

// A group's member order, not rank order, decides who contributes which
// chunk: group [3, 1] makes rank 3 member 0.
TEST(ThreadsCommunicator, MemberOrderIsTheGroupsOrder) {
  onRanks(4, [&](int64_t rank, Communicator &comm) {
    RankGroup g = rank % 2 ? RankGroup{3, 1} : RankGroup{2, 0};
    int32_t mine = static_cast<int32_t>(rank);
    std::vector<int32_t> all(2);
    EXPECT_EQ(comm.allGather(g, &mine, all.data(), 4), "");
    EXPECT_EQ(all, (std::vector<int32_t>{int32_t(g[0]), int32_t(g[1])}));
  });
}

// Empty buffers and singleton groups need no partner and still succeed.
TEST(ThreadsCommunicator, SingletonGroupsAndEmptyBuffers) {
  onRanks(2, [&](int64_t rank, Communicator &comm) {
    RankGroup self = {rank};
    std::vector<int64_t> v = {rank, 7}, out(2);
    EXPECT_EQ(comm.allReduceSum(self, DType::I64, v.data(), 2), "");
    EXPECT_EQ(v, (std::vector<int64_t>{rank, 7}));
    EXPECT_EQ(comm.allGather(self, v.data(), out.data(), 16), "");
    EXPECT_EQ(out, v);
    EXPECT_EQ(comm.reduceScatterSum(self, DType::I64, v.data(), out.data(), 2),
              "");
    EXPECT_EQ(comm.allToAll(self, v.data(), out.data(), 16), "");
    EXPECT_EQ(out, v);
    EXPECT_EQ(comm.barrier(self), "");
    EXPECT_EQ(comm.allReduceSum(world(2), DType::F32, nullptr, 0), "");
    EXPECT_EQ(comm.allGather(world(2), nullptr, nullptr, 0), "");
  });
}

// Misuse is reported as a message, not a hang or a crash.
TEST(ThreadsCommunicator, Errors) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createThreadsCommunicators(4);
  Communicator &comm = *comms[0];
  EXPECT_EQ(comm.name(), "threads");
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.worldSize(), 4);
  int64_t v = 0;
  EXPECT_EQ(comm.allReduceSum({1, 2}, DType::I64, &v, 1),
            "allReduceSum: rank 0 is not a member of group [1, 2]");
  EXPECT_EQ(comm.barrier({0, 4}),
            "barrier: group [0, 4] names rank 4, outside the world of 4 ranks");
  EXPECT_EQ(comm.allGather({0, 1, 0}, &v, &v, 8),
            "allGather: group [0, 1, 0] lists rank 0 twice");
  bool flag = true;
  EXPECT_EQ(comm.allReduceSum({0}, DType::Bool, &flag, 1),
            "allReduceSum: cannot sum bool");

  // Members that disagree on the size all get the same error.
  onRanks(2, [&](int64_t rank, Communicator &c) {
    std::vector<int64_t> data(2, 1);
    EXPECT_EQ(c.allReduceSum(world(2), DType::I64, data.data(), 1 + rank),
              "allReduceSum: the members of group [0, 1] called different "
              "collectives or sizes (member 0: allReduceSum of 1 i64, member "
              "1: allReduceSum of 2 i64)");
    // The group is still usable afterwards.
    EXPECT_EQ(c.allReduceSum(world(2), DType::I64, data.data(), 2), "");
    EXPECT_EQ(data, (std::vector<int64_t>{2, 2}));
  });
}

// Point to point: each of 4 ranks sends to the next and receives from the
// previous, 100 times with values that change each round, alternating two
// tags; every value must arrive at the right rank, and be counted.
TEST(ThreadsCommunicator, PointToPointRing) {
  const int64_t n = 4, count = 6;
  onRanks(n, [&](int64_t rank, Communicator &comm) {
    const int64_t next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (int64_t iter = 0; iter < 100; ++iter) {
      std::vector<int64_t> out(count), in(count, -1);
      for (int64_t k = 0; k < count; ++k)
        out[k] = rank * 1000 + iter * 10 + k;
      const int64_t tag = iter % 2;
      ASSERT_EQ(comm.send(next, tag, out.data(), count * 8), "");
      ASSERT_EQ(comm.recv(prev, tag, in.data(), count * 8), "");
      for (int64_t k = 0; k < count; ++k)
        EXPECT_EQ(in[k], prev * 1000 + iter * 10 + k)
            << "rank " << rank << " iteration " << iter;
    }
    EXPECT_EQ(comm.bytesReceived(), 100 * count * 8);
  });
}

// Sends are buffered and each tag is its own FIFO queue: rank 0 sends three
// messages with tag 1 and one with tag 2 before rank 1 receives any; rank 1
// receives tag 2 first, then the three of tag 1 in the order sent.
TEST(ThreadsCommunicator, PointToPointBufferedInOrderPerTag) {
  onRanks(2, [&](int64_t rank, Communicator &comm) {
    if (rank == 0) {
      for (int32_t v : {10, 11, 12})
        ASSERT_EQ(comm.send(1, 1, &v, 4), "");
      int64_t other = 20;
      ASSERT_EQ(comm.send(1, 2, &other, 8), "");
    }
    // Rank 1 starts receiving only after all four sends returned.
    ASSERT_EQ(comm.barrier(world(2)), "");
    if (rank == 1) {
      int64_t other = 0;
      ASSERT_EQ(comm.recv(0, 2, &other, 8), "");
      EXPECT_EQ(other, 20);
      for (int32_t expected : {10, 11, 12}) {
        int32_t v = 0;
        ASSERT_EQ(comm.recv(0, 1, &v, 4), "");
        EXPECT_EQ(v, expected);
      }
    }
  });
}

// Both ranks send to each other before either receives: with sends that
// waited for their receiver this would deadlock; buffered sends return.
TEST(ThreadsCommunicator, PointToPointExchangeSendsFirst) {
  onRanks(2, [&](int64_t rank, Communicator &comm) {
    const int64_t count = 1 << 18, peer = 1 - rank;
    std::vector<int32_t> out(count), in(count);
    for (int64_t k = 0; k < count; ++k)
      out[k] = static_cast<int32_t>(rank * count + k);
    ASSERT_EQ(comm.send(peer, 0, out.data(), count * 4), "");
    ASSERT_EQ(comm.recv(peer, 0, in.data(), count * 4), "");
    for (int64_t k = 0; k < count; ++k)
      ASSERT_EQ(in[k], peer * count + k) << "rank " << rank << ", " << k;
  });
}

// Misuse is reported as a message: a size mismatch returns at once (and
// leaves the message to a receive of the right size), and a rank cannot
// message itself or a rank outside the world.
TEST(ThreadsCommunicator, PointToPointErrors) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createThreadsCommunicators(2);
  Communicator &c0 = *comms[0], &c1 = *comms[1];
  int64_t v = 42, w[2] = {0, 0};
  EXPECT_EQ(c0.send(0, 0, &v, 8), "send: rank 0 cannot message itself");
  EXPECT_EQ(c0.recv(0, 0, &v, 8), "recv: rank 0 cannot message itself");
  EXPECT_EQ(c0.send(2, 0, &v, 8),
            "send: rank 2 is outside the world of 2 ranks");
  EXPECT_EQ(c1.recv(-1, 0, &v, 8),
            "recv: rank -1 is outside the world of 2 ranks");
  EXPECT_EQ(c0.send(1, 0, &v, -1), "send: negative size -1");

  ASSERT_EQ(c1.send(0, 5, &v, 8), "");
  EXPECT_EQ(c0.recv(1, 5, w, 16), "recv: the message from rank 1 with tag 5 "
                                  "has 8 bytes, not the 16 expected");
  EXPECT_EQ(c0.bytesReceived(), 0);
  ASSERT_EQ(c0.recv(1, 5, w, 8), "");
  EXPECT_EQ(w[0], 42);
  EXPECT_EQ(c0.bytesReceived(), 8);

  // Empty messages are messages too.
  ASSERT_EQ(c0.send(1, 6, nullptr, 0), "");
  EXPECT_EQ(c1.recv(0, 6, nullptr, 0), "");
}

namespace {

/// A backend that implements the collectives only.
class CollectivesOnly final : public Communicator {
public:
  std::string name() const override { return "test"; }
  int64_t rank() const override { return 0; }
  int64_t worldSize() const override { return 2; }
  std::string allReduceSum(const RankGroup &, DType, void *, int64_t) override {
    return "";
  }
  std::string allGather(const RankGroup &, const void *, void *,
                        int64_t) override {
    return "";
  }
  std::string reduceScatterSum(const RankGroup &, DType, const void *, void *,
                               int64_t) override {
    return "";
  }
  std::string allToAll(const RankGroup &, const void *, void *,
                       int64_t) override {
    return "";
  }
  std::string barrier(const RankGroup &) override { return ""; }
};

} // namespace

// A backend without point-to-point messaging says so, naming itself.
TEST(Communicator, PointToPointUnsupportedByDefault) {
  CollectivesOnly comm;
  int64_t v = 0;
  EXPECT_EQ(comm.send(1, 0, &v, 8),
            "send: the test communicator has no point-to-point send/recv "
            "(pipeline stages need the threads or mpi communicator)");
  EXPECT_EQ(comm.recv(1, 0, &v, 8),
            "recv: the test communicator has no point-to-point send/recv "
            "(pipeline stages need the threads or mpi communicator)");
}

// Proves a rank that never arrives is reported, not waited for: the others'
// collective (and a recv whose message never comes) returns at the
// deadline with an error naming the missing rank; and a rank that fails
// and aborts wakes every waiting rank with an error naming it, at once.
TEST(ThreadsCommunicator, MissingRanksTimeOutAndFailuresAbort) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createThreadsCommunicators(3, /*timeoutSeconds=*/0.2);
  std::vector<std::string> errors(3);
  commtest::RankPool pool(3);
  pool.run([&](int64_t rank) {
    float x = 1;
    if (rank != 2) // rank 2 never comes
      errors[rank] = comms[rank]->allReduceSum(world(3), DType::F32, &x, 1);
  });
  for (int64_t r : {0, 1})
    EXPECT_EQ(errors[r], "allReduceSum on group [0, 1, 2]: rank 2 of group "
                         "[0, 1, 2] did not arrive within 0.2 s "
                         "(--collective-timeout)");
  float y = 0;
  EXPECT_EQ(comms[1]->recv(2, 7, &y, sizeof y),
            "recv: nothing came from rank 2 (tag 7) within 0.2 s "
            "(--collective-timeout)");

  std::vector<std::unique_ptr<Communicator>> fresh =
      createThreadsCommunicators(3, /*timeoutSeconds=*/600);
  auto start = std::chrono::steady_clock::now();
  pool.run([&](int64_t rank) {
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      fresh[0]->abort("out of memory");
      errors[0] = "";
    } else if (rank == 1) {
      errors[1] = fresh[1]->barrier(world(3));
    } else {
      float z = 0;
      errors[2] = fresh[2]->recv(0, 1, &z, sizeof z);
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_EQ(errors[1], "barrier on group [0, 1, 2]: rank 0 failed: out of "
                       "memory");
  EXPECT_EQ(errors[2], "recv from rank 0: rank 0 failed: out of memory");
  // Later waits fail at once too.
  EXPECT_EQ(fresh[1]->barrier({1, 2}),
            "barrier on group [1, 2]: rank 0 failed: out of memory");
}
