//===- CalibrateCommand.cpp - `loom calibrate`: measure a profile ---------===//
//
// Measures the machine at hand as the cost model sees it and writes a
// hardware profile (compiler/cost/HardwareProfile.h). A "device" is one rank
// of `loom run --ranks N --comm threads`: a thread of this process with
// cores / N kernel threads. Every kernel measurement runs on all N ranks at
// once (as a partitioned run does, so that ranks share cores and memory
// bandwidth as they will) and times a batch of calls from a common start
// until the slowest rank is done.
//
//   peak_flops.f32    the best f32 "matmul" rate over a few square sizes
//                     (2 M N K flops per call); each size's fraction of it
//                     goes into the notes
//   peak_flops.bf16   the "matmul" rate on bf16 (f16) operands at the best
//   peak_flops.f16    f32 size, whatever path the backend takes for them
//   memory_bandwidth  the fastest of an "add" (3 x 4 x size bytes) and a
//                     copy ("reshape", 2 x 4 x size bytes), on large f32
//                     tensors and on tensors the size of a step's
//                     activations (which stay in cache)
//   op_overhead       the median time of tiny kernels of every class
//   efficiency        per kernel class, the roofline time of a mix of the
//                     class's kernels at step sizes over their measured
//                     time (capped at 1): matmul from linear-layer and
//                     attention shapes against the peak; elementwise from
//                     add, bias add, mul, sub, erf and neg; reduction from
//                     reduce_sum, softmax and layer_norm; other (data
//                     movement) from transpose and a copy; conv from a 3x3
//                     "conv2d"
//   intra_node        collectives of the threads communicator over the N
//                     ranks (all-reduce, all-gather, reduce-scatter,
//                     all-to-all; 4 KiB to 16 MiB), each call timed on a
//                     rank that arrives last, the others already waiting
//                     (as in a step): the cost model's
//                     t = steps x latency + bus factor x bytes / bandwidth
//                     fitted by least squares on relative error. With one
//                     rank, the links are measured between two.
//   inter_node        a copy of intra_node (one node: nothing to measure)
//   memory_capacity   MemTotal of /proc/meminfo / N
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/CalibrateMeasure.h"
#include "compiler/driver/Commands.h"

#include "compiler/cost/CostModel.h"
#include "compiler/cost/HardwareProfile.h"
#include "runtime/Backend.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

using namespace llvm;

namespace loom::driver {
namespace {

cl::SubCommand calibrateCmd("calibrate",
                            "Measure a hardware profile of this machine");
cl::opt<std::string> outputPath("o", cl::desc("The profile (JSON) to write"),
                                cl::value_desc("PROFILE.json"), cl::Required,
                                cl::sub(calibrateCmd), cl::cat(loomCategory()));
cl::opt<std::string> backendName("backend",
                                 cl::desc("cpu (default) or cuda (rank r on "
                                          "GPU r modulo the GPUs)"),
                                 cl::init("cpu"), cl::sub(calibrateCmd),
                                 cl::cat(loomCategory()));
cl::opt<int>
    ranksFlag("ranks",
              cl::desc("Ranks (devices) of the profile, run as threads of this "
                       "process (default: the cores, between 2 and 4; 1 for a "
                       "single-device run; at most twice the cores)"),
              cl::init(0), cl::sub(calibrateCmd), cl::cat(loomCategory()));
cl::opt<int> threadsFlag("threads",
                         cl::desc("Threads for the CPU kernels, shared evenly "
                                  "by the ranks (default: all cores)"),
                         cl::init(0), cl::sub(calibrateCmd),
                         cl::cat(loomCategory()));
cl::opt<std::string> nameFlag("name", cl::desc("The profile's name"),
                              cl::init("calibrated-cpu"), cl::sub(calibrateCmd),
                              cl::cat(loomCategory()));
cl::opt<bool> quickFlag("quick",
                        cl::desc("Small sizes and short timings (a few "
                                 "seconds; for tests, not for planning)"),
                        cl::sub(calibrateCmd), cl::cat(loomCategory()));

using namespace calibrate;

/// MemTotal of /proc/meminfo in bytes, or 0.
int64_t memTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemTotal:")
      return kb * 1024;
  return 0;
}

int runCalibrate() {
  if (backendName != "cpu" && backendName != "cuda")
    return reportError("--backend must be 'cpu' or 'cuda', not '" +
                       backendName + "'");
  if (std::string why; backendName == "cuda" && rt::cudaDeviceCount(why) == 0)
    return reportError(why);
  int cores = std::max(1u, std::thread::hardware_concurrency());
  int ranks = ranksFlag.getNumOccurrences() ? static_cast<int>(ranksFlag)
                                            : std::clamp(cores, 2, 4);
  if (ranks < 1)
    return reportError("--ranks must be at least 1");
  if (ranks > 2 * cores)
    return reportError("--ranks " + std::to_string(ranks) +
                       " is more than twice the " + std::to_string(cores) +
                       " cores; the measurement would say more about "
                       "oversubscription than about the machine");
  // Refuse an output that cannot be written before measuring for a minute.
  StringRef dir = sys::path::parent_path(outputPath);
  if (!dir.empty() && !sys::fs::is_directory(dir))
    return reportError("cannot open output file '" + outputPath +
                       "': No such file or directory");
  int total = threadsFlag > 0 ? static_cast<int>(threadsFlag) : cores;
  Run run;
  run.ranks = ranks;
  run.cores = cores;
  run.threads = std::max(1, total / ranks);
  run.s = settings(quickFlag);
  run.s.backend = backendName;
  run.quick = quickFlag;
  int threads = run.threads;
  Clock::time_point begin = Clock::now();
  outs() << "loom: calibrating the " << backendName << " backend: " << ranks
         << " ranks, " << threads << " kernel thread"
         << (threads == 1 ? "" : "s") << " each, " << cores << " cores"
         << (quickFlag ? " (quick)" : "") << "\n";

  cost::HardwareProfile p;
  p.name = nameFlag;
  p.devicesPerNode = ranks;
  p.nodes = 1;
  Findings found;
  std::string fail;
  if (!measureMatmul(run, p, found, fail) ||
      !measureBandwidth(run, p, found, fail) ||
      !measureOverhead(run, p, fail) || !measureEfficiency(run, p, fail) ||
      !measureLinks(run, p, found, fail))
    return reportError(fail);

  int64_t mem = memTotalBytes();
  if (mem <= 0)
    return reportError("cannot read MemTotal from /proc/meminfo");
  p.memoryCapacity = mem / ranks;
  outs() << "  memory capacity: " << fixed(p.memoryCapacity / 1e9, 2)
         << " GB per rank (MemTotal / " << ranks << ")\n";

  p.notes = profileNotes(run, found);

  std::string error;
  if (std::string invalid = cost::validateProfile(p); !invalid.empty())
    return reportError("the measured profile is not valid: " + invalid);
  if (!cost::saveProfile(p, outputPath, error))
    return reportError(error);
  if (!cost::loadProfile(outputPath, error))
    return reportError(error);
  outs() << "loom: wrote profile '" << p.name << "' to " << outputPath << " in "
         << fixed(secondsSince(begin), 1) << " s\n";
  return 0;
}

} // namespace

std::optional<int> runCalibrateCommand() {
  if (!calibrateCmd)
    return std::nullopt;
  return runCalibrate();
}

} // namespace loom::driver
