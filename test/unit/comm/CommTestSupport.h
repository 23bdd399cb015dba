//===- CommTestSupport.h - Ranks and plans for comm tests -------*- C++ -*-===//
//
// Test support shared by the communicator tests and the MPI check: a pool
// of rank threads created once and reused, the translation of a layout
// plan into the runtime's collective instructions, and the execution of
// those instructions on one rank's buffer.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_COMM_COMMTESTSUPPORT_H
#define LOOM_TEST_UNIT_COMM_COMMTESTSUPPORT_H

#include "common/layout/Redistribution.h"
#include "runtime/comm/Collectives.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loom::commtest {

/// `n` threads, one per rank, that run jobs until the pool is destroyed.
class RankPool {
public:
  explicit RankPool(int64_t n);
  ~RankPool();
  RankPool(const RankPool &) = delete;
  RankPool &operator=(const RankPool &) = delete;

  /// Runs `job(rank)` on every rank's thread and waits until all return.
  void run(const std::function<void(int64_t rank)> &job);

private:
  void loop(int64_t rank);

  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int64_t)> *job_ = nullptr;
  uint64_t generation_ = 0;
  int64_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

/// One step of a plan as a runtime instruction, with the local shapes of
/// its input and output.
struct Instruction {
  std::string op;
  rt::Attrs attrs;
  rt::Shape inShape, outShape;
};

/// The instructions executing `plan` on a tensor of `globalShape`; nullopt
/// with `error` if a step does not apply or the steps miss the target.
std::optional<std::vector<Instruction>>
lowerPlan(const layout::Mesh &mesh, const layout::RedistributionPlan &plan,
          const std::vector<int64_t> &globalShape, std::string &error);

/// Runs `instructions` on one rank's `buffer` of `dtype` elements, which
/// ends holding the output of the last one. Returns "" or the error.
std::string runInstructions(rt::CollectiveRunner &runner,
                            const std::vector<Instruction> &instructions,
                            rt::DType dtype,
                            std::vector<unsigned char> &buffer);

/// Integers to and from buffers of I64, I32 or F32 (exact for the small
/// integers the tests use).
std::vector<unsigned char> encode(const std::vector<int64_t> &values,
                                  rt::DType dtype);
std::vector<int64_t> decode(const std::vector<unsigned char> &bytes,
                            rt::DType dtype);

/// Member `member`'s `count` elements of `dtype` for iteration `iter` of a
/// sum test: floats that are not exactly representable (so that the
/// summation order shows in the result), integers beyond 32 bits for I64.
std::vector<unsigned char> contribution(rt::DType dtype, int64_t member,
                                        int64_t count, int64_t iter = 0);
/// The sum of members 0 to n-1's contributions as the Communicator contract
/// defines it: added in member order, in f32 for the float types.
std::vector<unsigned char> memberOrderSum(rt::DType dtype, int64_t n,
                                          int64_t count, int64_t iter = 0);

} // namespace loom::commtest

#endif // LOOM_TEST_UNIT_COMM_COMMTESTSUPPORT_H
