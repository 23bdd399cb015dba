//===- CalibrateCollectives.cpp - The collectives `loom calibrate` times --===//
//
// The threads communicator's collectives over N thread ranks, at each size
// of the calibration's settings, as a training step meets them.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/CalibrateMeasure.h"

#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <numeric>
#include <thread>

namespace loom::driver::calibrate {

/// Times every collective of the threads communicator over `ranks` ranks
/// at each size, as a step meets them: the other ranks are already waiting
/// in the collective when rank 0 arrives (it spins for a while after a
/// barrier), and the time is rank 0's from its call to its return; the
/// median over the calls.
std::vector<cost::CollectiveTiming>
measureCollectives(int ranks, const Settings &s, std::string &error) {
  using cost::CollectiveKind;
  const std::vector<CollectiveKind> kinds = {
      CollectiveKind::AllReduce, CollectiveKind::AllGather,
      CollectiveKind::ReduceScatter, CollectiveKind::AllToAll};
  std::vector<std::unique_ptr<rt::Communicator>> comms =
      rt::createThreadsCommunicators(ranks);
  rt::RankGroup group(ranks);
  std::iota(group.begin(), group.end(), 0);
  int64_t maxBytes =
      *std::max_element(s.collectiveBytes.begin(), s.collectiveBytes.end());
  // Sizes are rounded to whole f32 elements per rank.
  int64_t unit = 4 * ranks;
  std::vector<cost::CollectiveTiming> samples;
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> workers;
  for (int r = 0; r < ranks; ++r)
    workers.emplace_back([&, r] {
      rt::Communicator &comm = *comms[r];
      std::vector<float> send(maxBytes / 4 + ranks, 0.0f),
          recv(maxBytes / 4 + ranks, 0.0f);
      for (CollectiveKind kind : kinds)
        for (int64_t size : s.collectiveBytes) {
          int64_t bytes = std::max(unit, size / unit * unit);
          int64_t perRank = bytes / ranks;
          auto once = [&]() -> std::string {
            switch (kind) {
            case CollectiveKind::AllReduce:
              return comm.allReduceSum(group, rt::DType::F32, send.data(),
                                       bytes / 4);
            case CollectiveKind::AllGather:
              return comm.allGather(group, send.data(), recv.data(), perRank);
            case CollectiveKind::ReduceScatter:
              return comm.reduceScatterSum(group, rt::DType::F32, send.data(),
                                           recv.data(), perRank / 4);
            default:
              return comm.allToAll(group, send.data(), recv.data(), perRank);
            }
          };
          int64_t calls =
              std::clamp<int64_t>(s.collectiveVolume / bytes, 5, 41);
          std::string e = once();
          std::vector<double> times;
          for (int64_t i = 0; i < calls && e.empty(); ++i) {
            e = comm.barrier(group);
            if (r == 0) {
              // Arrive last: long enough for the others to block.
              Clock::time_point spin = Clock::now();
              while (secondsSince(spin) < 200e-6)
                ;
            }
            Clock::time_point start = Clock::now();
            if (e.empty())
              e = once();
            times.push_back(secondsSince(start));
          }
          if (!e.empty()) {
            errors[r] = e;
            return; // every rank fails the same way
          }
          if (r == 0) {
            std::nth_element(times.begin(), times.begin() + times.size() / 2,
                             times.end());
            samples.push_back({kind, static_cast<double>(bytes), ranks,
                               times[times.size() / 2]});
          }
        }
    });
  for (std::thread &t : workers)
    t.join();
  for (const std::string &e : errors)
    if (!e.empty())
      error = "collective measurement failed: " + e;
  return samples;
}

} // namespace loom::driver::calibrate
