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
#include <map>
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

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// How long and how big the measurements are.
struct Settings {
  std::vector<int64_t> matmulSizes;
  int64_t addElements;
  /// Elements of the step-sized tensors of the class mixes (rows x cols).
  int64_t stepRows, stepCols;
  /// The linear-layer matmuls of the mix: tokens x in -> out.
  int64_t tokens, hidden;
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
    s.stepRows = 64, s.stepCols = 256;
    s.tokens = 128, s.hidden = 64;
    s.rows = 256, s.cols = 1024;
    s.convBatch = 2, s.convChannels = 16, s.convSize = 16;
    s.collectiveBytes = {4 << 10, 16 << 10, 64 << 10, 256 << 10};
    s.collectiveVolume = 1 << 19;
    s.batchSeconds = 0.01, s.trials = 2;
    return s;
  }
  s.matmulSizes = {256, 512, 1024, 2048};
  s.addElements = 1 << 24;
  s.stepRows = 256, s.stepCols = 1024;
  s.tokens = 1024, s.hidden = 256;
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
/// calls together (each batch lasting at least `s.batchSeconds`), each
/// batch timed from the common start until the slowest rank is done (a
/// rank that ran alone on a core while others waited would look faster
/// than any rank of a run is); the result is the best batch.
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
        double slowest = sync.agreeMax(secondsSince(start));
        best = std::min(best, slowest / static_cast<double>(calls));
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

/// One kernel of a class's mix, and its roofline work.
struct MixKernel {
  std::function<KernelCall()> make;
  cost::OpWork work;
};

/// The kernels whose measured time against their roofline gives a class's
/// efficiency.
struct ClassMix {
  std::string kernelClass;
  std::vector<MixKernel> kernels;
};

/// The roofline work of `call` as dialects/Cost.cpp counts it: every
/// operand and result byte once, and `flops`.
cost::OpWork workOf(const KernelCall &call, double flops,
                    const std::string &kernelClass) {
  double bytes = 0;
  for (const Buffer &b : call.inputs)
    bytes += static_cast<double>(b.bytes.size());
  for (const Buffer &b : call.outputs)
    bytes += static_cast<double>(b.bytes.size());
  return {flops, bytes, "f32", kernelClass};
}

MixKernel mixKernel(std::function<KernelCall()> make, double flopsPerOutput,
                    const std::string &kernelClass) {
  KernelCall sample = make();
  double out = static_cast<double>(rt::numElements(sample.outputs[0].shape));
  double in = static_cast<double>(rt::numElements(sample.inputs[0].shape));
  double flops = kernelClass == "reduction" ? flopsPerOutput * in
                                            : flopsPerOutput * out;
  return {std::move(make), workOf(sample, flops, kernelClass)};
}

KernelCall f32Call(std::string op, std::vector<rt::Shape> inputs,
                   rt::Shape output) {
  KernelCall k{std::move(op), {}, {}, {}};
  for (rt::Shape &shape : inputs)
    k.inputs.push_back(Buffer(rt::DType::F32, std::move(shape)));
  k.outputs = {Buffer(rt::DType::F32, std::move(output))};
  return k;
}

/// The class mixes, on r x c tensors (the size of a step's activations).
std::vector<ClassMix> classMixes(const Settings &s, int64_t r, int64_t c) {
  int64_t n = r * c;
  std::vector<ClassMix> mixes;
  ClassMix elementwise{"elementwise", {}};
  for (const char *op : {"add", "mul", "sub"})
    elementwise.kernels.push_back(mixKernel(
        [=] { return f32Call(op, {{n}, {n}}, {n}); }, 1, "elementwise"));
  elementwise.kernels.push_back(mixKernel(
      [=] { return f32Call("add", {{r, c}, {c}}, {r, c}); }, 1, "elementwise"));
  for (const char *op : {"erf", "neg"})
    elementwise.kernels.push_back(mixKernel(
        [=] { return f32Call(op, {{n}}, {n}); }, 1, "elementwise"));
  mixes.push_back(std::move(elementwise));

  ClassMix reduction{"reduction", {}};
  reduction.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("reduce_sum", {{r, c}}, {r});
        k.attrs.set("axes", std::vector<int64_t>{1});
        return k;
      },
      1, "reduction"));
  reduction.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("softmax", {{r, c}}, {r, c});
        k.attrs.set("axis", int64_t(1));
        return k;
      },
      5, "reduction"));
  reduction.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("layer_norm", {{r, c}, {c}, {c}}, {r, c});
        k.attrs.set("axis", int64_t(1));
        k.attrs.set("epsilon", 1e-5);
        return k;
      },
      8, "reduction"));
  mixes.push_back(std::move(reduction));

  ClassMix other{"other", {}};
  other.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("transpose", {{r, c}}, {c, r});
        k.attrs.set("permutation", std::vector<int64_t>{1, 0});
        return k;
      },
      0, "other"));
  other.kernels.push_back(
      mixKernel([=] { return f32Call("reshape", {{n}}, {n}); }, 0, "other"));
  mixes.push_back(std::move(other));

  // Linear layers (tokens x hidden, hidden x 4 hidden) and attention
  // (batched, head size 64 or less), against the peak; the tokens scale
  // with the rows.
  int64_t t = std::max<int64_t>(16, s.tokens * r / s.stepRows), h = s.hidden, hd = std::min<int64_t>(64, h / 4),
          heads = t / 128 > 0 ? 32 : 8, seq = std::min<int64_t>(128, t / 4);
  ClassMix matmul{"matmul", {}};
  auto linear = [&](int64_t m, int64_t k, int64_t nn) {
    matmul.kernels.push_back(mixKernel(
        [=] { return f32Call("matmul", {{m, k}, {k, nn}}, {m, nn}); },
        2.0 * static_cast<double>(k), "matmul"));
  };
  linear(t, h, h);
  linear(t, h, 4 * h);
  linear(t, 4 * h, h);
  matmul.kernels.push_back(mixKernel(
      [=] {
        return f32Call("matmul", {{heads, seq, hd}, {heads, hd, seq}},
                       {heads, seq, seq});
      },
      2.0 * static_cast<double>(hd), "matmul"));
  matmul.kernels.push_back(mixKernel(
      [=] {
        return f32Call("matmul", {{heads, seq, seq}, {heads, seq, hd}},
                       {heads, seq, hd});
      },
      2.0 * static_cast<double>(seq), "matmul"));
  mixes.push_back(std::move(matmul));

  int64_t b = s.convBatch, ch = s.convChannels, hw = s.convSize;
  ClassMix conv{"conv", {}};
  conv.kernels.push_back(
      {[=] {
         KernelCall k = f32Call("conv2d", {{b, ch, hw, hw}, {ch, ch, 3, 3}},
                                {b, ch, hw, hw});
         k.attrs.set("strides", std::vector<int64_t>{1, 1});
         k.attrs.set("padding", std::vector<int64_t>{1, 1, 1, 1});
         k.attrs.set("dilations", std::vector<int64_t>{1, 1});
         k.attrs.set("groups", int64_t(1));
         return k;
       },
       {2.0 * b * ch * hw * hw * ch * 9,
        4.0 * (2 * b * ch * hw * hw + ch * ch * 9), "f32", "conv"}});
  mixes.push_back(std::move(conv));
  return mixes;
}

/// Kernels of every class on a few elements: their time is the fixed cost
/// of a call.
std::vector<std::function<KernelCall()>> tinyKernels() {
  return {
      [] { return f32Call("add", {{16}, {16}}, {16}); },
      [] { return f32Call("mul", {{16}, {16}}, {16}); },
      [] { return f32Call("erf", {{16}}, {16}); },
      [] {
        KernelCall k = f32Call("softmax", {{4, 8}}, {4, 8});
        k.attrs.set("axis", int64_t(1));
        return k;
      },
      [] {
        KernelCall k = f32Call("reduce_sum", {{4, 8}}, {4});
        k.attrs.set("axes", std::vector<int64_t>{1});
        return k;
      },
      [] {
        KernelCall k = f32Call("layer_norm", {{4, 8}, {8}, {8}}, {4, 8});
        k.attrs.set("axis", int64_t(1));
        k.attrs.set("epsilon", 1e-5);
        return k;
      },
      [] {
        KernelCall k = f32Call("transpose", {{4, 8}}, {8, 4});
        k.attrs.set("permutation", std::vector<int64_t>{1, 0});
        return k;
      },
      [] { return f32Call("matmul", {{4, 8}, {8, 4}}, {4, 4}); },
  };
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

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

  // Memory bandwidth: the fastest add or copy, large or step-sized.
  auto streamRate = [&](const char *op, int operands, int64_t elems) {
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
  int64_t large = s.addElements, small = s.stepRows * s.stepCols;
  double addRate = streamRate("add", 3, large);
  double copyRate = error.empty() ? streamRate("reshape", 2, large) : 0;
  double stepAddRate = error.empty() ? streamRate("add", 3, small) : 0;
  double stepCopyRate = error.empty() ? streamRate("reshape", 2, small) : 0;
  if (!error.empty())
    return reportError("memory bandwidth: " + error);
  p.memoryBandwidth =
      std::max({addRate, copyRate, stepAddRate, stepCopyRate});
  std::string bandwidthNote =
      formatBytes(4 * large) + " f32 tensors: add " + fixed(addRate / 1e9, 2) +
      " GB/s, copy " + fixed(copyRate / 1e9, 2) + " GB/s; " +
      formatBytes(4 * small) + " (step-sized): add " +
      fixed(stepAddRate / 1e9, 2) + " GB/s, copy " +
      fixed(stepCopyRate / 1e9, 2) + " GB/s";
  outs() << "  memory bandwidth: " << fixed(p.memoryBandwidth / 1e9, 2)
         << " GB/s per rank (" << bandwidthNote << ")\n";

  // The fixed cost of a kernel call: the median time of tiny kernels of
  // every class, whose roofline time is nothing.
  std::vector<double> tiny;
  for (const std::function<KernelCall()> &make : tinyKernels()) {
    tiny.push_back(timeOnEveryRank(ranks, threads, make, s, error));
    if (!error.empty())
      return reportError("tiny kernels: " + error);
  }
  std::nth_element(tiny.begin(), tiny.begin() + tiny.size() / 2, tiny.end());
  p.opOverhead = tiny[tiny.size() / 2];
  outs() << "  kernel call overhead: " << fixed(p.opOverhead * 1e6, 2)
         << " us (median of " << tiny.size() << " tiny kernels)\n";

  // Efficiencies: the mix's roofline time (at full efficiency) over its
  // measured time less the calls' overhead.
  cost::HardwareProfile roofline = p;
  roofline.opOverhead = 0;
  // Two sizes of step tensors: one that stays in a core's cache and one
  // that does not (a step has both).
  std::map<std::string, std::pair<double, double>> totals; // ideal, measured
  for (int64_t scale : {int64_t(4), int64_t(1)})
    for (const ClassMix &mix :
         classMixes(s, s.stepRows / scale, s.stepCols)) {
      auto &[ideal, measured] = totals[mix.kernelClass];
      for (const MixKernel &k : mix.kernels) {
        double t = timeOnEveryRank(ranks, threads, k.make, s, error);
        if (!error.empty())
          return reportError(mix.kernelClass + ": " + error);
        measured += std::max(t - p.opOverhead, 0.5 * t);
        ideal += cost::computeSeconds(roofline, k.work);
      }
    }
  for (const auto &[kernelClass, t] : totals)
    p.efficiency[kernelClass] = std::clamp(t.first / t.second, 1e-3, 1.0);
  outs() << "  efficiency:";
  for (const std::string &c : cost::kKernelClasses)
    outs() << " " << c << " " << fixed(p.efficiency[c], 2);
  outs() << "\n";

  // Links (between two ranks when the profile has one).
  int linkRanks = std::max(ranks, 2);
  std::vector<cost::CollectiveTiming> samples =
      measureCollectives(linkRanks, s, error);
  if (!error.empty())
    return reportError(error);
  double largest = 0;
  for (const cost::CollectiveTiming &c : samples)
    largest = std::max(largest, c.bytes);
  for (const cost::CollectiveTiming &c : samples) {
    if (c.bytes < largest)
      continue;
    double busBw = cost::busFactor(c.kind, linkRanks) * c.bytes / c.seconds;
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
      "memory_bandwidth: the fastest add or copy (reshape) of " +
          bandwidthNote,
      "op_overhead: the median time of tiny kernels (add, mul, erf, softmax, "
      "reduce_sum, layer_norm, transpose, matmul on a few elements)",
      "efficiency: roofline time over measured time (less op_overhead) of a "
      "mix per class, "
      "on step-sized tensors (" + std::to_string(s.stepRows / 4) + " x " +
          std::to_string(s.stepCols) + " and " + std::to_string(s.stepRows) +
          " x " + std::to_string(s.stepCols) +
          " f32): add, bias add, mul, sub, erf, neg (elementwise); "
          "reduce_sum, softmax, layer_norm (reduction); transpose and a copy "
          "(other); linear-layer and attention matmuls against the peak "
          "(matmul); a 3x3 conv2d (conv)",
      "intra_node: threads-communicator collectives over " +
          std::to_string(linkRanks) +
          " ranks (all_reduce, all_gather, reduce_scatter, all_to_all), each "
          "call timed on a rank arriving last with the others waiting, from " +
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
