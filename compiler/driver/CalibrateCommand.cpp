//===- CalibrateCommand.cpp - `loom calibrate`: measure a profile ---------===//
//
// Measures the machine at hand as the cost model sees it and writes a
// hardware profile (compiler/cost/HardwareProfile.h). A "device" is one rank
// of `loom run --ranks N --comm threads`: a thread of this process with
// cores / N kernel threads. Every kernel measurement runs on all N ranks at
// once (as a partitioned run does, so that ranks share memory bandwidth as
// they will) and reports the mean over ranks of each rank's best rate.
//
//   peak_flops.f32    the best f32 "matmul" rate over a few square sizes
//                     (2 M N K flops per call); each size's fraction of it
//                     goes into the notes
//   peak_flops.bf16   the "matmul" rate on bf16 (f16) operands at the best
//   peak_flops.f16    f32 size, whatever path the backend takes for them
//   memory_bandwidth  the faster of an "add" of two large f32 tensors
//                     (3 x 4 x size bytes) and a copy of one ("reshape",
//                     2 x 4 x size bytes)
//   efficiency        per kernel class, the roofline time of one
//                     representative kernel over its measured time (capped
//                     at 1): matmul 1 by definition (it defines the peak),
//                     elementwise the add's bandwidth over the memory
//                     bandwidth, conv from a 3x3 "conv2d", reduction from a
//                     row "reduce_sum", other from a row "softmax" (counted
//                     as memory traffic only)
//   intra_node        collectives of the threads communicator over the N
//                     ranks (all-reduce, all-gather, reduce-scatter,
//                     all-to-all; 4 KiB to 16 MiB): the cost model's
//                     t = steps x latency + bus factor x bytes / bandwidth
//                     fitted by least squares on relative error
//   inter_node        a copy of intra_node (one node: nothing to measure)
//   memory_capacity   MemTotal of /proc/meminfo / N
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"

#include "compiler/cost/CostModel.h"
#include "compiler/cost/HardwareProfile.h"
#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

using namespace llvm;

namespace loom::driver {
namespace {

cl::SubCommand calibrateCmd("calibrate",
                            "Measure a hardware profile of this machine");
cl::opt<std::string> outputPath("o", cl::desc("The profile (JSON) to write"),
                                cl::value_desc("PROFILE.json"), cl::Required,
                                cl::sub(calibrateCmd), cl::cat(loomCategory()));
cl::opt<std::string> backendName("backend", cl::desc("cpu (default)"),
                                 cl::init("cpu"), cl::sub(calibrateCmd),
                                 cl::cat(loomCategory()));
cl::opt<int> ranksFlag(
    "ranks",
    cl::desc("Ranks (devices) of the profile, run as threads of this "
             "process (default: the cores, between 2 and 4; at most twice "
             "the cores)"),
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

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// How long and how big the measurements are.
struct Settings {
  std::vector<int64_t> matmulSizes;
  int64_t addElements;
  int64_t rows, cols; // reduce_sum and softmax operands
  int64_t convBatch, convChannels, convSize;
  std::vector<int64_t> collectiveBytes;
  /// Bytes each collective measurement moves in all (calls = this / size,
  /// between 4 and 200).
  int64_t collectiveVolume;
  /// Each kernel measurement: the best of `trials` batches of calls, each
  /// batch lasting at least `batchSeconds`.
  double batchSeconds;
  int trials;
};

Settings settings(bool quick) {
  Settings s;
  if (quick) {
    s.matmulSizes = {32, 64, 128};
    s.addElements = 1 << 18;
    s.rows = 256, s.cols = 1024;
    s.convBatch = 2, s.convChannels = 16, s.convSize = 16;
    s.collectiveBytes = {4 << 10, 16 << 10, 64 << 10, 256 << 10};
    s.collectiveVolume = 1 << 19;
    s.batchSeconds = 0.01, s.trials = 2;
    return s;
  }
  s.matmulSizes = {256, 512, 1024, 2048};
  s.addElements = 1 << 24;
  s.rows = 4096, s.cols = 4096;
  s.convBatch = 8, s.convChannels = 64, s.convSize = 32;
  s.collectiveBytes = {4 << 10, 16 << 10, 64 << 10, 256 << 10,
                       1 << 20, 4 << 20,  16 << 20};
  s.collectiveVolume = int64_t(256) << 20;
  s.batchSeconds = 0.1, s.trials = 3;
  return s;
}

/// A buffer for a kernel operand, filled with small values.
struct Buffer {
  rt::DType dtype;
  rt::Shape shape;
  std::vector<unsigned char> bytes;

  Buffer(rt::DType dtype, rt::Shape shape) : dtype(dtype), shape(shape) {
    int64_t n = rt::numElements(shape);
    bytes.resize(n * rt::dtypeSize(dtype));
    for (int64_t i = 0; i < n; ++i) {
      float v = 0.25f + 0.001f * static_cast<float>(i % 977);
      if (dtype == rt::DType::F32)
        reinterpret_cast<float *>(bytes.data())[i] = v;
      else
        reinterpret_cast<uint16_t *>(bytes.data())[i] =
            dtype == rt::DType::BF16 ? rt::floatToBf16(v) : rt::floatToHalf(v);
    }
  }
  rt::TensorView view() { return {dtype, shape, bytes.data()}; }
};

/// One kernel call, ready to repeat.
struct KernelCall {
  std::string op;
  rt::Attrs attrs;
  std::vector<Buffer> inputs, outputs;
};

/// Lets the ranks of a measurement wait for each other and agree on a
/// number.
class RankSync {
public:
  explicit RankSync(int ranks) : ranks(ranks) {}

  /// Returns the largest `value` any rank gave, once every rank has.
  double agreeMax(double value) {
    std::unique_lock<std::mutex> lock(mu);
    int round = generation;
    current = arrived == 0 ? value : std::max(current, value);
    if (++arrived == ranks) {
      agreed = current;
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != round; });
    }
    return agreed;
  }
  void barrier() { (void)agreeMax(0); }

private:
  int ranks;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0, generation = 0;
  double current = 0, agreed = 0;
};

/// Seconds per call of the kernel call `make` builds, on `ranks` threads at
/// once, each with its own CPU backend using `threadsPerRank` threads: after
/// a warm-up call, the ranks run `s.trials` batches of the same number of
/// calls together (each batch lasting at least `s.batchSeconds`), and the
/// result is the mean over ranks of each rank's best batch.
double timeOnEveryRank(int ranks, int threadsPerRank,
                       const std::function<KernelCall()> &make,
                       const Settings &s, std::string &error) {
  std::vector<double> results(ranks);
  std::vector<std::string> errors(ranks);
  RankSync sync(ranks);
  std::vector<std::thread> workers;
  for (int r = 0; r < ranks; ++r)
    workers.emplace_back([&, r] {
      std::unique_ptr<rt::Backend> backend = rt::createCpuBackend();
      backend->setNumThreads(threadsPerRank);
      KernelCall call = make();
      const rt::KernelFn *kernel = backend->findKernel(call.op);
      rt::KernelArgs args{call.op, call.attrs, {}, {}};
      for (Buffer &b : call.inputs)
        args.inputs.push_back(b.view());
      for (Buffer &b : call.outputs)
        args.outputs.push_back(b.view());
      if (!kernel)
        errors[r] = "backend 'cpu' has no '" + call.op + "' kernel";
      else
        errors[r] = (*kernel)(args);
      // Every rank stops if one failed (they run the same call).
      if (sync.agreeMax(errors[r].empty() ? 0 : 1) > 0)
        return;
      Clock::time_point start = Clock::now();
      (void)(*kernel)(args);
      double once = std::max(secondsSince(start), 1e-9);
      auto calls = static_cast<int64_t>(
          sync.agreeMax(std::min(std::ceil(s.batchSeconds / once), 1e9)));
      double best = INFINITY;
      for (int trial = 0; trial < s.trials; ++trial) {
        sync.barrier();
        start = Clock::now();
        for (int64_t i = 0; i < calls; ++i)
          (void)(*kernel)(args);
        best = std::min(best, secondsSince(start) / static_cast<double>(calls));
      }
      results[r] = best;
    });
  for (std::thread &t : workers)
    t.join();
  for (const std::string &e : errors)
    if (!e.empty()) {
      error = e;
      return 0;
    }
  return std::accumulate(results.begin(), results.end(), 0.0) / ranks;
}

KernelCall matmulCall(int64_t n, rt::DType dtype) {
  KernelCall c{"matmul", {}, {}, {}};
  c.inputs = {Buffer(dtype, {n, n}), Buffer(dtype, {n, n})};
  c.outputs = {Buffer(dtype, {n, n})};
  return c;
}

/// Rate (FLOP/s) of an n^3 matmul in `dtype`.
double matmulRate(int ranks, int threads, int64_t n, rt::DType dtype,
                  const Settings &s, std::string &error) {
  double t = timeOnEveryRank(
      ranks, threads, [&] { return matmulCall(n, dtype); }, s, error);
  return error.empty() ? 2.0 * n * n * n / t : 0.0;
}

/// A representative kernel of a class and its roofline work.
struct ClassBench {
  std::string kernelClass;
  std::function<KernelCall()> make;
  cost::OpWork work;
};

std::vector<ClassBench> classBenches(const Settings &s) {
  std::vector<ClassBench> benches;
  int64_t r = s.rows, c = s.cols;
  benches.push_back({"reduction",
                     [=] {
                       KernelCall k{"reduce_sum", {}, {}, {}};
                       k.attrs.set("axes", std::vector<int64_t>{1});
                       k.inputs = {Buffer(rt::DType::F32, {r, c})};
                       k.outputs = {Buffer(rt::DType::F32, {r})};
                       return k;
                     },
                     {double(r * c), 4.0 * (r * c + r), "f32", "reduction"}});
  benches.push_back({"other",
                     [=] {
                       KernelCall k{"softmax", {}, {}, {}};
                       k.attrs.set("axis", int64_t(1));
                       k.inputs = {Buffer(rt::DType::F32, {r, c})};
                       k.outputs = {Buffer(rt::DType::F32, {r, c})};
                       return k;
                     },
                     {0, 4.0 * 2 * r * c, "f32", "other"}});
  int64_t b = s.convBatch, ch = s.convChannels, hw = s.convSize;
  double convFlops = 2.0 * b * ch * hw * hw * ch * 9;
  double convBytes = 4.0 * (2 * b * ch * hw * hw + ch * ch * 9);
  benches.push_back({"conv",
                     [=] {
                       KernelCall k{"conv2d", {}, {}, {}};
                       k.attrs.set("strides", std::vector<int64_t>{1, 1});
                       k.attrs.set("padding", std::vector<int64_t>{1, 1, 1, 1});
                       k.attrs.set("dilations", std::vector<int64_t>{1, 1});
                       k.attrs.set("groups", int64_t(1));
                       k.inputs = {Buffer(rt::DType::F32, {b, ch, hw, hw}),
                                   Buffer(rt::DType::F32, {ch, ch, 3, 3})};
                       k.outputs = {Buffer(rt::DType::F32, {b, ch, hw, hw})};
                       return k;
                     },
                     {convFlops, convBytes, "f32", "conv"}});
  return benches;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Times every collective of the threads communicator over `ranks` ranks
/// at each size; rank 0's time between two barriers, per call.
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
              std::clamp<int64_t>(s.collectiveVolume / bytes, 4, 200);
          std::string e = once();
          e += comm.barrier(group);
          Clock::time_point start = Clock::now();
          for (int64_t i = 0; i < calls && e.empty(); ++i)
            e = once();
          e += comm.barrier(group);
          double t = secondsSince(start) / static_cast<double>(calls);
          if (!e.empty()) {
            errors[r] = e;
            return; // every rank fails the same way
          }
          if (r == 0)
            samples.push_back({kind, static_cast<double>(bytes), ranks, t});
        }
    });
  for (std::thread &t : workers)
    t.join();
  for (const std::string &e : errors)
    if (!e.empty())
      error = "collective measurement failed: " + e;
  return samples;
}

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

std::string fixed(double v, int decimals);

/// E.g. "256 KiB", "16 MiB", "15.99 MiB".
std::string formatBytes(int64_t bytes) {
  bool mib = bytes >= (1 << 20);
  int64_t unit = mib ? (1 << 20) : (1 << 10);
  std::string n = bytes % unit == 0
                      ? std::to_string(bytes / unit)
                      : fixed(static_cast<double>(bytes) / unit, 2);
  return n + (mib ? " MiB" : " KiB");
}

std::string fixed(double v, int decimals) {
  std::string s;
  raw_string_ostream os(s);
  os << format("%.*f", decimals, v);
  return s;
}

int runCalibrate() {
  if (backendName != "cpu")
    return reportError("backend '" + backendName +
                       "' is not built yet; this Loom calibrates 'cpu'");
  int cores = std::max(1u, std::thread::hardware_concurrency());
  int ranks = ranksFlag ? static_cast<int>(ranksFlag) : std::clamp(cores, 2, 4);
  if (ranks < 2)
    return reportError("--ranks must be at least 2 (the links are measured "
                       "between ranks)");
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
  int threads = std::max(1, total / ranks);
  Settings s = settings(quickFlag);
  Clock::time_point begin = Clock::now();
  outs() << "loom: calibrating the cpu backend: " << ranks << " ranks, "
         << threads << " kernel thread" << (threads == 1 ? "" : "s")
         << " each, " << cores << " cores" << (quickFlag ? " (quick)" : "")
         << "\n";

  cost::HardwareProfile p;
  p.name = nameFlag;
  p.devicesPerNode = ranks;
  p.nodes = 1;
  std::string error;

  // f32 matmul at each size; the best is the peak.
  std::vector<double> rates;
  for (int64_t n : s.matmulSizes) {
    rates.push_back(matmulRate(ranks, threads, n, rt::DType::F32, s, error));
    if (!error.empty())
      return reportError("matmul " + std::to_string(n) + "^3: " + error);
  }
  size_t bestIndex =
      std::max_element(rates.begin(), rates.end()) - rates.begin();
  double peak = rates[bestIndex];
  int64_t bestSize = s.matmulSizes[bestIndex];
  std::string sizesNote = "f32 matmul GFLOP/s per rank by size:";
  for (size_t i = 0; i < rates.size(); ++i) {
    std::string size = std::to_string(s.matmulSizes[i]);
    outs() << "  matmul f32  " << size << "^3: " << fixed(rates[i] / 1e9, 2)
           << " GFLOP/s (" << fixed(rates[i] / peak, 2) << " of peak)\n";
    sizesNote += " " + size + "^3 " + fixed(rates[i] / 1e9, 2) + " (" +
                 fixed(rates[i] / peak, 2) + ")";
  }
  p.peakFlops["f32"] = peak;
  for (auto [name, dtype] :
       {std::pair{"bf16", rt::DType::BF16}, std::pair{"f16", rt::DType::F16}}) {
    double rate = matmulRate(ranks, threads, bestSize, dtype, s, error);
    if (!error.empty())
      return reportError(std::string("matmul ") + name + ": " + error);
    p.peakFlops[name] = rate;
    outs() << "  matmul " << name << (std::string(name) == "f16" ? "  " : " ")
           << bestSize << "^3: " << fixed(rate / 1e9, 2) << " GFLOP/s\n";
  }

  // Memory bandwidth: the faster of a large add and a large copy.
  int64_t elems = s.addElements;
  auto streamRate = [&](const char *op, int operands) {
    double t = timeOnEveryRank(
        ranks, threads,
        [&] {
          KernelCall call{op, {}, {}, {}};
          for (int i = 1; i < operands; ++i)
            call.inputs.push_back(Buffer(rt::DType::F32, {elems}));
          call.outputs = {Buffer(rt::DType::F32, {elems})};
          return call;
        },
        s, error);
    return error.empty() ? 4.0 * operands * static_cast<double>(elems) / t
                         : 0.0;
  };
  double addRate = streamRate("add", 3);
  if (!error.empty())
    return reportError("add: " + error);
  double copyRate = streamRate("reshape", 2);
  if (!error.empty())
    return reportError("reshape: " + error);
  p.memoryBandwidth = std::max(addRate, copyRate);
  outs() << "  memory bandwidth: " << fixed(p.memoryBandwidth / 1e9, 2)
         << " GB/s per rank (" << formatBytes(4 * elems) << " f32 tensors: add "
         << fixed(addRate / 1e9, 2) << " GB/s, copy "
         << fixed(copyRate / 1e9, 2) << " GB/s)\n";

  // Efficiencies: roofline time (at full efficiency) over measured time.
  cost::HardwareProfile roofline = p;
  p.efficiency = {
      {"matmul", 1.0},
      {"elementwise", std::clamp(addRate / p.memoryBandwidth, 1e-3, 1.0)}};
  for (const ClassBench &bench : classBenches(s)) {
    double t = timeOnEveryRank(ranks, threads, bench.make, s, error);
    if (!error.empty())
      return reportError(bench.kernelClass + ": " + error);
    double ideal = cost::computeSeconds(roofline, bench.work);
    p.efficiency[bench.kernelClass] = std::clamp(ideal / t, 1e-3, 1.0);
  }
  outs() << "  efficiency:";
  for (const std::string &c : cost::kKernelClasses)
    outs() << " " << c << " " << fixed(p.efficiency[c], 2);
  outs() << "\n";

  // Links.
  std::vector<cost::CollectiveTiming> samples =
      measureCollectives(ranks, s, error);
  if (!error.empty())
    return reportError(error);
  double largest = 0;
  for (const cost::CollectiveTiming &c : samples)
    largest = std::max(largest, c.bytes);
  for (const cost::CollectiveTiming &c : samples) {
    if (c.bytes < largest)
      continue;
    double busBw = cost::busFactor(c.kind, ranks) * c.bytes / c.seconds;
    outs() << "  " << cost::collectiveName(c.kind) << " of "
           << formatBytes(static_cast<int64_t>(c.bytes)) << ": "
           << fixed(c.seconds * 1e6, 1) << " us, bus bandwidth "
           << fixed(busBw / 1e9, 2) << " GB/s\n";
  }
  cost::LinkFit fit = cost::fitLink(samples);
  p.intraNode = p.interNode = fit.link;
  outs() << "  link fit: latency " << fixed(fit.link.latency * 1e6, 2)
         << " us per step, bus bandwidth " << fixed(fit.link.bandwidth / 1e9, 2)
         << " GB/s (" << samples.size() << " samples, worst relative error "
         << fixed(100 * fit.maxRelativeError, 0) << "%)\n";

  int64_t mem = memTotalBytes();
  if (mem <= 0)
    return reportError("cannot read MemTotal from /proc/meminfo");
  p.memoryCapacity = mem / ranks;
  outs() << "  memory capacity: " << fixed(p.memoryCapacity / 1e9, 2)
         << " GB per rank (MemTotal / " << ranks << ")\n";

  p.notes = {
      "measured by `loom calibrate" + std::string(quickFlag ? " --quick" : "") +
          "` on the cpu backend: " + std::to_string(ranks) +
          " ranks as threads of one process, " + std::to_string(threads) +
          " kernel thread" + (threads == 1 ? "" : "s") + " each, " +
          std::to_string(cores) +
          " cores; kernel rates are per rank with all ranks running at once",
      sizesNote,
      "peak_flops.bf16 and f16: the matmul kernel on bf16/f16 operands at " +
          std::to_string(bestSize) +
          "^3; the cpu backend computes them in f32, converting operands and "
          "result, so they are below the f32 peak",
      "memory_bandwidth: the faster of add (" + fixed(addRate / 1e9, 2) +
          " GB/s) and a copy (reshape, " + fixed(copyRate / 1e9, 2) +
          " GB/s) of " + formatBytes(4 * elems) + " f32 tensors",
      "efficiency: roofline time over measured time of add (elementwise), "
      "reduce_sum (reduction), softmax (other, memory traffic only) and a "
      "3x3 conv2d (conv); matmul is 1 by definition",
      "intra_node: threads-communicator collectives (all_reduce, all_gather, "
      "reduce_scatter, all_to_all) from " +
          formatBytes(s.collectiveBytes.front()) + " to " +
          formatBytes(s.collectiveBytes.back()) +
          ", fitted to steps x latency + bus bytes / bandwidth" +
          (fit.clamped ? " (the best fit had a term <= 0; it was clamped)"
                       : ""),
      "inter_node: a copy of intra_node; one node, nothing was measured "
      "across nodes",
      "memory_capacity: MemTotal of /proc/meminfo divided by the ranks"};

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
