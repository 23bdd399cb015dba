//===- RunCommand.cpp - `loom run`: execute a plan ------------------------===//
//
// Runs a plan on one device, or a partitioned plan on N ranks: as N threads
// of this process (`--comm threads`, the default; one backend and executor
// per thread, the --threads budget divided between them) or as one rank per
// process under mpirun (`--comm mpi`). `--backend cuda` runs each rank on a
// GPU (rank r on device r modulo the devices, so that N ranks may share one
// GPU as virtual devices); `--comm nccl` exchanges GPU memory over NCCL,
// one GPU per rank, as threads of this process or under mpirun. Files are read
// once and given to every rank; rank 0 alone prints and writes outputs, metrics
// and checkpoints, and one trace holds a track per rank. A pipelined plan
// runs the same way, each rank its own stage (the inputs of any stage are
// given to every rank, which keeps what its stage holds); the training loss
// reaches every stage, and an inference plan's outputs, which only the last
// stage has, are printed and written by that stage's first rank.
//
// Reports. After the steps, rank 0 prints the peak memory its executor held
// (the allocator's high-water mark) next to the plan's state and arena
// bytes. A pipelined plan (several stages) prints that for every rank, with
// the rank's stage and its measured bubble: the time its steps spent
// waiting in recv for another stage over their wall time, summed over the
// steps after the first (the first warms up kernels and allocators; over
// the only step when there is one), next to the schedule's ideal
// (p - 1) / (m + p - 1). `--trace` shows the same per rank: each recv's wait
// as a "bubble" span, and a "step" span with the peak and planned bytes.
//
// Failures. Setting a rank up (loading the plan, inputs, a checkpoint) talks
// to no other rank, so every rank finishes it and a failure is reported
// (with its rank) before any rank starts running. A failure while running
// may leave other ranks waiting in a collective forever: the failing rank
// prints its error and ends the whole process at once with exit status 1
// (std::_Exit: no destructors, no MPI_Finalize, which would wait too);
// under mpirun the launcher then stops the other processes.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"

#include "runtime/Backend.h"
#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/PlanLayout.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorFile.h"
#include "runtime/io/Trace.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

using namespace llvm;

namespace loom::driver {
namespace {

cl::SubCommand runCmd("run", "Run a compiled plan");
cl::opt<std::string> planPath(cl::Positional, cl::Required,
                              cl::desc("<MODEL.plan>"), cl::sub(runCmd),
                              cl::cat(loomCategory()));
cl::list<std::string> inputFlags(
    "inputs",
    cl::desc("Input files (.npy or ONNX TensorProto .pb); random by default"),
    cl::value_desc("NAME=FILE,..."), cl::CommaSeparated, cl::sub(runCmd),
    cl::cat(loomCategory()));
cl::opt<std::string> outputsDir("outputs",
                                cl::desc("Write each output as DIR/NAME.npy"),
                                cl::value_desc("DIR"), cl::sub(runCmd),
                                cl::cat(loomCategory()));
cl::opt<std::string> traceFile("trace",
                               cl::desc("Write a Chrome trace (one track per "
                                        "rank)"),
                               cl::value_desc("FILE.json"), cl::sub(runCmd),
                               cl::cat(loomCategory()));
cl::opt<std::string> backendName("backend", cl::desc("cpu (default) or cuda"),
                                 cl::init("cpu"), cl::sub(runCmd),
                                 cl::cat(loomCategory()));
cl::opt<int> threads("threads",
                     cl::desc("Threads for the CPU kernels (default: all "
                              "cores), shared evenly by the ranks of a "
                              "--comm threads run; per process under mpirun"),
                     cl::init(0), cl::sub(runCmd), cl::cat(loomCategory()));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of the random inputs"),
                       cl::init(0), cl::sub(runCmd), cl::cat(loomCategory()));
cl::alias dataFlag("data", cl::desc("Alias for --inputs (training data)"),
                   cl::aliasopt(inputFlags), cl::cat(loomCategory()));
cl::opt<int> steps("steps",
                   cl::desc("Training steps to run (training plans), reusing "
                            "the same batch"),
                   cl::init(1), cl::sub(runCmd), cl::cat(loomCategory()));
cl::opt<std::string>
    metricsFile("metrics", cl::desc("Write one JSON object per training step"),
                cl::value_desc("FILE.jsonl"), cl::sub(runCmd),
                cl::cat(loomCategory()));
cl::opt<std::string> commReportFile(
    "comm-report",
    cl::desc("Write one JSON object per collective instruction: calls, bytes "
             "rank 0 received per call (counted by the communicator), the "
             "bytes the compiler's layout math predicted, and its time"),
    cl::value_desc("FILE.jsonl"), cl::sub(runCmd), cl::cat(loomCategory()));
cl::opt<std::string> saveDir("save",
                             cl::desc("Write a checkpoint after the last step"),
                             cl::value_desc("DIR"), cl::sub(runCmd),
                             cl::cat(loomCategory()));
cl::opt<std::string> resumeDir("resume", cl::desc("Start from a checkpoint"),
                               cl::value_desc("DIR"), cl::sub(runCmd),
                               cl::cat(loomCategory()));
cl::opt<std::string> tokensFile(
    "tokens",
    cl::desc("Character-level language-model data: each byte of FILE is a "
             "token; step k reads the next batch of consecutive windows as "
             "the model's integer input, shifted by one as the labels"),
    cl::value_desc("FILE"), cl::sub(runCmd), cl::cat(loomCategory()));
cl::opt<int> repeat("repeat",
                    cl::desc("Run the step N times and report the mean time"),
                    cl::init(1), cl::sub(runCmd), cl::cat(loomCategory()));
cl::opt<int> ranksFlag(
    "ranks",
    cl::desc("Ranks to run the plan on (default: the plan's device count); "
             "with --comm threads each rank is a thread of this process"),
    cl::init(0), cl::sub(runCmd), cl::cat(loomCategory()));
cl::opt<std::string>
    commFlag("comm",
             cl::desc("How ranks communicate: threads (ranks are threads of "
                      "this process), mpi (one process per rank, under "
                      "mpirun) or nccl (GPU memory, one GPU per rank; "
                      "--backend cuda; threads of this process, or one "
                      "process per GPU under mpirun). Default: mpi under "
                      "mpirun, else threads"),
             cl::value_desc("threads|mpi|nccl"), cl::sub(runCmd),
             cl::cat(loomCategory()));

/// The most ranks `--comm threads` runs in one process.
constexpr int64_t kMaxThreadRanks = 1024;

/// A file name for an output: ONNX names may contain '/' and ':'.
std::string fileNameFor(StringRef name) {
  std::string s;
  for (char c : name)
    s.push_back(isAlnum(c) || c == '.' || c == '-' || c == '_' ? c : '_');
  return s;
}

/// min / max / mean of a float output, for the summary line.
std::string summarize(const rt::TensorView &v) {
  if (!rt::isFloat(v.dtype) || v.numElements() == 0)
    return "";
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (int64_t i = 0; i < v.numElements(); ++i) {
    double x = v.dtype == rt::DType::F32 ? v.as<float>()[i]
               : v.dtype == rt::DType::F16
                   ? rt::halfToFloat(v.as<uint16_t>()[i])
                   : rt::bf16ToFloat(v.as<uint16_t>()[i]);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  std::string s;
  raw_string_ostream os(s);
  os << " min " << lo << " max " << hi << " mean " << sum / v.numElements();
  return s;
}

/// Feeds language-model batches from a byte file: windows of the sequence
/// length at consecutive offsets, the labels shifted by one token. The
/// file's bytes are read once and shared by every rank.
class TokenFeeder {
public:
  bool open(const std::string &path, const std::string &contents,
            const rt::Executor &exec, std::string &error) {
    bytes = &contents;
    for (const rt::IOInfo &in : exec.inputs()) {
      bool integer = in.dtype == rt::DType::I32 || in.dtype == rt::DType::I64;
      if (in.name == "labels")
        labels = in;
      else if (integer && in.shape.size() == 2)
        input = in;
    }
    if (input.name.empty() || labels.shape != input.shape) {
      error = "--tokens needs a model with one [batch, sequence] integer "
              "input and labels of the same shape";
      return false;
    }
    int64_t window = input.shape[1];
    if (static_cast<int64_t>(bytes->size()) < window + 2) {
      error = path + ": too short for windows of " + std::to_string(window) +
              " tokens";
      return false;
    }
    return true;
  }

  /// Sets the inputs of training step `step` (0-based): the global batch,
  /// of which each rank keeps its shard.
  bool feed(rt::Executor &exec, int64_t step, std::string &error) {
    int64_t batch = input.shape[0], window = input.shape[1];
    int64_t positions = static_cast<int64_t>(bytes->size()) - window - 1;
    std::vector<int64_t> x(batch * window), y(batch * window);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t start = ((step * batch + b) * window) % positions;
      for (int64_t t = 0; t < window; ++t) {
        x[b * window + t] = static_cast<unsigned char>((*bytes)[start + t]);
        y[b * window + t] = static_cast<unsigned char>((*bytes)[start + t + 1]);
      }
    }
    rt::TensorView xv{rt::DType::I64, input.shape, x.data()};
    rt::TensorView yv{rt::DType::I64, labels.shape, y.data()};
    return exec.setInput(input.name, xv, error) &&
           exec.setInput(labels.name, yv, error);
  }

private:
  const std::string *bytes = nullptr;
  rt::IOInfo input, labels;
};

/// What the ranks of one run share: read once, before any rank starts.
struct Shared {
  struct Input {
    std::string name, file;
    rt::HostBuffer value;
  };
  std::vector<Input> inputs;
  std::string tokens;
  rt::TraceWriter trace;
  /// Whether the ranks are threads of this process (the trace is then
  /// written once they have all finished).
  bool threaded = false;
  /// The plan's schedule, for the bubble report.
  plan::Schedule schedule;
};

/// One rank: its communicator (none on one device), backend and executor.
struct Rank {
  int64_t index = 0;
  /// The host communicator (the files, the trace, failures), and for
  /// --comm nccl the NCCL one the executor uses, bootstrapped over it.
  rt::Communicator *comm = nullptr;
  std::unique_ptr<rt::Communicator> nccl;
  /// The GPU of a --backend cuda rank (modulo the devices present).
  int device = 0;
  std::unique_ptr<rt::Backend> backend;
  std::unique_ptr<rt::Executor> exec;
  std::optional<TokenFeeder> tokens;
  std::unique_ptr<raw_fd_ostream> metrics;
  /// The times of the measured steps (see the file comment).
  rt::StepTiming measured;
  bool leader() const { return index == 0; }
  /// Adds the last step's times when step `i` (0-based) of `count` is
  /// measured: every step after the first, or the only one.
  void measure(int i, int count) {
    if (i == 0 && count > 1)
      return;
    const rt::StepTiming &last = exec->lastStepTiming();
    measured.seconds += last.seconds;
    measured.recvWaitSeconds += last.recvWaitSeconds;
    measured.steps += last.steps;
  }
};

/// Rank 0's printing and any rank's fatal error, one at a time.
std::mutex printMutex;

/// Reports a failure while ranks run and ends the process (see the file
/// comment for why it cannot wait for the other ranks).
[[noreturn]] void abortRun(int64_t rank, const std::string &message) {
  printMutex.lock(); // never released: nothing else prints from here on
  outs().flush();
  WithColor::error(errs(), "loom")
      << "rank " << rank << ": " << message << "\n";
  errs().flush();
  std::_Exit(1);
}

/// Loads the plan for `rank` and everything that needs no other rank:
/// inputs, the checkpoint to resume from, the token file, the metrics file.
std::string setUpRank(Rank &rank, plan::Plan plan, Shared &shared,
                      int backendThreads) {
  std::string error;
  rank.backend = rt::createBackend(backendName, rank.device, error);
  if (!rank.backend)
    return error;
  if (backendThreads > 0)
    rank.backend->setNumThreads(backendThreads);
  rt::Communicator *comm = rank.comm;
  if (rank.comm && commFlag == "nccl") {
    rank.nccl = rt::createNcclCommunicator(
        *rank.comm, rank.device, rt::cudaStreamOf(*rank.backend),
        rt::cudaCommStreamOf(*rank.backend), error);
    if (!rank.nccl)
      return error;
    comm = rank.nccl.get();
  }
  rank.exec = rt::Executor::create(std::move(plan), *rank.backend, error,
                                   {rank.index, comm});
  if (!rank.exec)
    return planPath + ": " + error;
  rt::Executor &exec = *rank.exec;
  if (exec.numStages() > 1)
    shared.trace.setRankName(static_cast<int>(rank.index),
                             "rank " + std::to_string(rank.index) + " (stage " +
                                 std::to_string(exec.stage()) + ")");
  exec.setRandomInputs(seed);
  for (Shared::Input &in : shared.inputs)
    if (!exec.setInput(in.name, in.value.view(), error))
      return in.file + ": " + error;
  if (!exec.isTraining()) {
    if (!resumeDir.empty() || !saveDir.empty() || steps != 1)
      return "--steps, --save and --resume need a training plan (loom "
             "compile --train)";
    return "";
  }
  if (steps < 1)
    return "--steps must be at least 1";
  if (!resumeDir.empty() && !rt::loadCheckpoint(exec, resumeDir, error))
    return error;
  if (!tokensFile.empty()) {
    rank.tokens.emplace();
    if (!rank.tokens->open(tokensFile, shared.tokens, exec, error))
      return error;
  }
  if (!metricsFile.empty() && rank.leader()) {
    std::error_code ec;
    rank.metrics = std::make_unique<raw_fd_ostream>(metricsFile, ec);
    if (ec)
      return "cannot write '" + metricsFile + "': " + ec.message();
  }
  return "";
}

/// Writes the trace. Under MPI every rank sends its spans to rank 0 (a
/// collective), which writes them all.
std::string writeTrace(Rank &rank, Shared &shared) {
  std::string error;
  rt::Communicator *comm = rank.comm;
  if (!shared.threaded && comm && comm->worldSize() > 1) {
    int64_t n = comm->worldSize();
    rt::RankGroup world(n);
    for (int64_t r = 0; r < n; ++r)
      world[r] = r;
    std::string mine = shared.trace.serialize();
    std::vector<int64_t> sizes(n);
    int64_t size = static_cast<int64_t>(mine.size());
    if (std::string e =
            comm->allGather(world, &size, sizes.data(), sizeof(int64_t));
        !e.empty())
      return "gathering the trace: " + e;
    int64_t longest = *std::max_element(sizes.begin(), sizes.end());
    mine.resize(longest);
    std::string all(longest * n, '\0');
    if (std::string e =
            comm->allGather(world, mine.data(), all.data(), longest);
        !e.empty())
      return "gathering the trace: " + e;
    if (!rank.leader())
      return "";
    rt::TraceWriter merged;
    for (int64_t r = 0; r < n; ++r)
      if (!merged.merge(std::string_view(all).substr(r * longest, sizes[r]),
                        error))
        return "rank " + std::to_string(r) + "'s trace: " + error;
    return merged.write(traceFile, error) ? "" : error;
  }
  if (!rank.leader())
    return "";
  return shared.trace.write(traceFile, error) ? "" : error;
}

/// --comm-report: rank 0's per-collective statistics.
std::string writeCommReport(const rt::Executor &exec) {
  if (commReportFile.empty())
    return "";
  std::error_code ec;
  raw_fd_ostream os(commReportFile, ec);
  if (ec)
    return "cannot write '" + commReportFile + "': " + ec.message();
  for (const rt::Executor::CollectiveStat &s : exec.collectiveStats()) {
    double calls = static_cast<double>(std::max<int64_t>(s.calls, 1));
    os << "{\"instruction\": " << s.instruction << ", \"op\": \"" << s.op
       << "\", \"location\": \"" << s.location << "\", \"shape\": \""
       << rt::formatShape(s.shape) << "\", \"calls\": " << s.calls
       << ", \"bytes_per_call\": "
       << format("%.1f", static_cast<double>(s.bytesReceived) / calls)
       << ", \"predicted_bytes\": " << s.predictedBytes
       << ", \"ms_per_call\": " << format("%.4f", 1e3 * s.seconds / calls)
       << "}\n";
  }
  return "";
}

/// Bytes for people: "512 bytes", "27.5 KiB", "1.2 MiB", "3.0 GiB".
std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  for (; value >= 1024 && unit < 3; ++unit)
    value /= 1024;
  std::string text;
  raw_string_ostream(text) << format("%.1f ", value) << units[unit];
  return text;
}

/// The schedule's name, as the compiler's --schedule spells it.
const char *scheduleName(plan::Schedule::Kind kind) {
  switch (kind) {
  case plan::Schedule::SINGLE:
    return "single";
  case plan::Schedule::GPIPE:
    return "gpipe";
  case plan::Schedule::ONE_F_ONE_B:
    return "1f1b";
  case plan::Schedule::INTERLEAVED:
    return "interleaved";
  default:
    return "an unspecified schedule";
  }
}

/// What one rank reports after its steps (doubles, to gather as one
/// buffer).
struct RankReport {
  double stage = 0, peakBytes = 0, plannedBytes = 0, seconds = 0,
         recvWaitSeconds = 0, steps = 0;
};

/// Every rank's report of a pipelined plan (a collective over the host
/// communicator), or this rank's alone for one stage.
std::string gatherReports(Rank &rank, std::vector<RankReport> &reports) {
  const rt::Executor &exec = *rank.exec;
  RankReport mine{static_cast<double>(exec.stage()),
                  static_cast<double>(exec.peakBytes()),
                  static_cast<double>(exec.plannedBytes()),
                  rank.measured.seconds,
                  rank.measured.recvWaitSeconds,
                  static_cast<double>(rank.measured.steps)};
  if (exec.numStages() == 1 || !rank.comm) {
    reports = {mine};
    return "";
  }
  int64_t n = rank.comm->worldSize();
  rt::RankGroup world(n);
  for (int64_t r = 0; r < n; ++r)
    world[r] = r;
  reports.assign(n, {});
  if (std::string e = rank.comm->allGather(world, &mine, reports.data(),
                                           sizeof(RankReport));
      !e.empty())
    return "gathering the ranks' memory and bubble: " + e;
  return "";
}

/// Prints the reports of a run of `total` steps (see the file comment); the
/// caller holds printMutex.
void printReports(const std::vector<RankReport> &reports,
                  const rt::Executor &exec, const Shared &shared, int total) {
  if (exec.numStages() == 1) {
    const RankReport &r = reports[0];
    outs() << "loom: peak memory "
           << formatBytes(static_cast<int64_t>(r.peakBytes)) << " (planned "
           << formatBytes(static_cast<int64_t>(r.plannedBytes)) << ")"
           << (exec.numRanks() > 1 ? " on rank 0" : "") << "\n";
    return;
  }
  int64_t p = exec.numStages();
  int64_t m = std::max<int64_t>(shared.schedule.micro_batches(), 1);
  int64_t v = std::max<int64_t>(shared.schedule.virtual_stages(), 1);
  double ideal =
      static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
  std::string measured = total == 1   ? "its only step"
                         : total == 2 ? "step 2"
                                      : "steps 2 to " + std::to_string(total);
  outs() << "loom: pipeline of " << p << " stages, "
         << scheduleName(shared.schedule.kind()) << ", " << m
         << (m == 1 ? " micro-batch" : " micro-batches")
         << (v > 1 ? ", " + std::to_string(v) + " virtual stages"
                   : std::string())
         << (v > 1 ? ": ideal bubble (p - 1) / (v m + p - 1) = "
                   : ": ideal bubble (p - 1) / (m + p - 1) = ")
         << format("%.1f%%", 100 * ideal) << "; measured over " << measured
         << "\n";
  for (size_t r = 0; r < reports.size(); ++r) {
    const RankReport &report = reports[r];
    double steps = std::max(report.steps, 1.0);
    outs() << "loom: rank " << r << " (stage "
           << static_cast<int64_t>(report.stage) << "): peak memory "
           << formatBytes(static_cast<int64_t>(report.peakBytes))
           << " (planned "
           << formatBytes(static_cast<int64_t>(report.plannedBytes))
           << "), bubble "
           << format("%.1f%%",
                     report.seconds > 0
                         ? 100 * report.recvWaitSeconds / report.seconds
                         : 0.0)
           << " (recv wait "
           << format("%.3f", 1e3 * report.recvWaitSeconds / steps) << " ms of "
           << format("%.3f", 1e3 * report.seconds / steps) << " ms per step)\n";
  }
}

/// Training steps, then the trace and the checkpoint.
std::string trainRank(Rank &rank, Shared &shared) {
  rt::Executor &exec = *rank.exec;
  rt::TraceWriter *trace = traceFile.empty() ? nullptr : &shared.trace;
  std::string error;
  for (int i = 0; i < steps; ++i) {
    double loss = 0, lr = 0;
    if (rank.tokens && !rank.tokens->feed(exec, exec.stepsTaken(), error))
      return error;
    auto start = std::chrono::steady_clock::now();
    if (!exec.trainStep(error, trace, loss, lr))
      return planPath + ": step " + std::to_string(exec.stepsTaken() + 1) +
             ": " + error;
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    rank.measure(i, steps);
    if (rank.leader()) {
      std::lock_guard<std::mutex> lock(printMutex);
      outs() << "loom: step " << exec.stepsTaken() << " loss "
             << format("%.6g", loss) << " lr " << format("%.6g", lr) << " ("
             << format("%.1f", ms) << " ms)\n";
      outs().flush();
      if (rank.metrics)
        *rank.metrics << "{\"step\": " << exec.stepsTaken()
                      << ", \"loss\": " << format("%.9g", loss)
                      << ", \"lr\": " << format("%.9g", lr)
                      << ", \"step_time_ms\": " << format("%.3f", ms) << "}\n";
    }
    // The loss is replicated: every rank stops at the same step.
    if (!std::isfinite(loss))
      return "the loss is not finite at step " +
             std::to_string(exec.stepsTaken()) +
             "; lower --lr or check the data";
  }
  if (rank.metrics)
    rank.metrics->flush();
  std::vector<RankReport> reports;
  if (std::string e = gatherReports(rank, reports); !e.empty())
    return e;
  if (rank.leader()) {
    std::lock_guard<std::mutex> lock(printMutex);
    printReports(reports, exec, shared, steps);
    outs().flush();
  }
  if (rank.leader())
    if (std::string e = writeCommReport(exec); !e.empty())
      return e;
  if (!traceFile.empty() && !shared.threaded)
    if (std::string e = writeTrace(rank, shared); !e.empty())
      return e;
  if (!saveDir.empty()) {
    if (!rt::saveCheckpoint(exec, saveDir, error))
      return error;
    if (rank.leader()) {
      std::lock_guard<std::mutex> lock(printMutex);
      outs() << "loom: saved a checkpoint of step " << exec.stepsTaken()
             << " to " << saveDir << "\n";
    }
  }
  return "";
}

/// Inference: --repeat steps, the trace, then the first rank of the last
/// stage (rank 0 of a single-stage plan) reports the outputs.
std::string inferRank(Rank &rank, Shared &shared) {
  rt::Executor &exec = *rank.exec;
  std::string error;
  double totalMs = 0;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (!exec.run(error, traceFile.empty() ? nullptr : &shared.trace))
      return planPath + ": " + error;
    totalMs += std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - start)
                   .count();
    rank.measure(i, repeat);
  }
  if (!traceFile.empty() && !shared.threaded)
    if (std::string e = writeTrace(rank, shared); !e.empty())
      return e;
  std::vector<RankReport> reports;
  if (std::string e = gatherReports(rank, reports); !e.empty())
    return e;
  if (rank.leader())
    if (std::string e = writeCommReport(exec); !e.empty())
      return e;
  if (rank.index != exec.stageRanks(exec.numStages() - 1).front())
    return "";
  if (!outputsDir.empty())
    if (std::error_code ec = sys::fs::create_directories(outputsDir))
      return "cannot create '" + outputsDir + "': " + ec.message();
  std::lock_guard<std::mutex> lock(printMutex);
  for (const rt::IOInfo &out : exec.outputs()) {
    rt::TensorView v = exec.output(out.name);
    outs() << "loom: output '" << out.name << "' " << rt::dtypeName(v.dtype)
           << rt::formatShape(v.shape) << summarize(v) << "\n";
    if (!outputsDir.empty()) {
      SmallString<256> path(outputsDir);
      sys::path::append(path, fileNameFor(out.name) + ".npy");
      if (!rt::writeNpy(path.str().str(), v, error))
        return error;
    }
  }
  outs() << "loom: " << repeat << (repeat == 1 ? " step" : " steps") << " in "
         << format("%.3f", totalMs / repeat) << " ms each on "
         << rank.backend->name()
         << (exec.numRanks() > 1
                 ? " (" + std::to_string(exec.numRanks()) + " ranks)"
                 : std::string())
         << "\n";
  printReports(reports, exec, shared, repeat);
  outs().flush();
  return "";
}

std::string runRank(Rank &rank, Shared &shared) {
  return rank.exec->isTraining() ? trainRank(rank, shared)
                                 : inferRank(rank, shared);
}

/// `n` ranks as threads of this process (n = 1: no thread, no
/// communicator, exactly a single-device run).
int runThreadRanks(plan::Plan plan, int64_t n, Shared &shared) {
  if (n == 1) {
    Rank rank;
    if (std::string e = setUpRank(rank, std::move(plan), shared, threads);
        !e.empty())
      return reportError(e);
    if (std::string e = runRank(rank, shared); !e.empty())
      return reportError(e);
    return 0;
  }
  shared.threaded = true;
  int total = threads > 0
                  ? threads
                  : static_cast<int>(std::thread::hardware_concurrency());
  int perRank = std::max(1, total / static_cast<int>(n));
  std::vector<std::unique_ptr<rt::Communicator>> comms =
      rt::createThreadsCommunicators(n);
  std::vector<Rank> ranks(n);
  std::vector<std::string> errors(n);
  auto onEveryRank = [&](const std::function<void(Rank &)> &fn) {
    std::vector<std::thread> workers;
    for (int64_t r = 0; r < n; ++r)
      workers.emplace_back([&, r] { fn(ranks[r]); });
    for (std::thread &t : workers)
      t.join();
  };
  for (int64_t r = 0; r < n; ++r) {
    ranks[r].index = r;
    ranks[r].device = static_cast<int>(r);
    ranks[r].comm = comms[r].get();
  }
  onEveryRank([&](Rank &rank) {
    errors[rank.index] = setUpRank(rank, plan, shared, perRank);
  });
  for (int64_t r = 0; r < n; ++r)
    if (!errors[r].empty())
      return reportError("rank " + std::to_string(r) + ": " + errors[r]);
  onEveryRank([&](Rank &rank) {
    if (std::string e = runRank(rank, shared); !e.empty())
      abortRun(rank.index, e);
  });
  if (!traceFile.empty())
    if (std::string e = writeTrace(ranks[0], shared); !e.empty())
      return reportError(e);
  return 0;
}

/// This process's rank of an MPI run.
int runMpiRank(plan::Plan plan, rt::Communicator &comm, Shared &shared) {
  int64_t n = comm.worldSize();
  Rank rank;
  rank.index = comm.rank();
  rank.comm = &comm;
  // One GPU per process of a node.
  rank.device = static_cast<int>(rank.index);
  if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
    rank.device = std::atoi(local);
  // Without --threads, the processes mpirun started on this node share its
  // cores (oversubscribed OpenMP teams would spin against each other).
  int perProcess = threads;
  if (!threads.getNumOccurrences())
    if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
      perProcess = std::max(
          1, static_cast<int>(std::thread::hardware_concurrency()) /
                 std::max(1, std::atoi(local)));
  std::string e = setUpRank(rank, std::move(plan), shared, perProcess);
  if (n == 1) {
    if (e.empty())
      e = runRank(rank, shared);
    return e.empty() ? 0 : reportError(e);
  }
  // Agree on whether every rank is set up, so that all stop together.
  rt::RankGroup world(n);
  for (int64_t r = 0; r < n; ++r)
    world[r] = r;
  int32_t failed = e.empty() ? 0 : 1;
  if (std::string agree = comm.allReduceSum(world, rt::DType::I32, &failed, 1);
      !agree.empty())
    abortRun(rank.index, e.empty() ? agree : e);
  if (!e.empty())
    return reportError("rank " + std::to_string(rank.index) + ": " + e);
  if (failed)
    return rank.leader()
               ? reportError("rank 0: stopping: " + std::to_string(failed) +
                             " other rank(s) failed to start")
               : 1;
  if (std::string run = runRank(rank, shared); !run.empty())
    abortRun(rank.index, run);
  return 0;
}

int runPlan() {
  std::string error;
  if (backendName != "cpu" && backendName != "cuda")
    return reportError("--backend must be 'cpu' or 'cuda', not '" +
                       backendName + "'");
  if (backendName == "cuda" && rt::cudaDeviceCount(error) == 0)
    return reportError(error);
  if (repeat < 1)
    return reportError("--repeat must be at least 1");
  if (ranksFlag < 0)
    return reportError("--ranks must be at least 1");
  std::string comm = commFlag;
  if (comm.empty())
    comm = rt::launchedByMpirun() ? "mpi" : "threads";
  if (comm != "threads" && comm != "mpi" && comm != "nccl")
    return reportError("--comm must be 'threads', 'mpi' or 'nccl', not '" +
                       comm + "'");
  if (comm == "nccl" && backendName != "cuda")
    return reportError("--comm nccl exchanges GPU memory; use it with "
                       "--backend cuda");
  if (comm == "nccl" && !rt::ncclAvailable())
    return reportError("--comm nccl: this Loom was built without NCCL");
  std::optional<plan::Plan> plan = rt::readPlanFile(planPath, error);
  if (!plan)
    return reportError(error);
  // The plan's device count; an invalid mesh is left to the executor to
  // report.
  std::optional<layout::Mesh> mesh;
  int64_t devices = 1;
  if (rt::meshFromProto(plan->mesh(), mesh, error) && mesh)
    devices = mesh->numDevices();

  Shared shared;
  shared.schedule = plan->schedule();
  // --data (an alias) does not split on commas by itself.
  SmallVector<StringRef> assignments;
  for (const std::string &flags : inputFlags)
    SplitString(flags, assignments, ",");
  for (StringRef flag : assignments) {
    auto [name, file] = flag.split('=');
    if (name.empty() || file.empty())
      return reportError("--inputs expects NAME=FILE, got '" + flag + "'");
    std::optional<rt::HostBuffer> value = rt::readTensorFile(file.str(), error);
    if (!value)
      return reportError(error);
    shared.inputs.push_back({name.str(), file.str(), std::move(*value)});
  }
  if (!tokensFile.empty()) {
    auto buffer = MemoryBuffer::getFile(tokensFile, /*IsText=*/false);
    if (!buffer)
      return reportError(tokensFile + ": cannot read the token file");
    shared.tokens = (*buffer)->getBuffer().str();
  }

  // NCCL bootstraps over MPI under mpirun, else over threads.
  if (comm == "mpi" || (comm == "nccl" && rt::launchedByMpirun())) {
    std::unique_ptr<rt::Communicator> mpi = rt::createMpiCommunicator(error);
    if (!mpi)
      return reportError(error);
    if (ranksFlag > 0 && ranksFlag != mpi->worldSize())
      return reportError("--ranks " + std::to_string(ranksFlag) +
                         " differs from the " +
                         std::to_string(mpi->worldSize()) +
                         " processes mpirun started; leave --ranks out "
                         "under mpirun");
    return runMpiRank(std::move(*plan), *mpi, shared);
  }
  int64_t n = ranksFlag > 0 ? ranksFlag : devices;
  if (n > kMaxThreadRanks)
    return reportError("this run needs " + std::to_string(n) +
                       " ranks, more than the " +
                       std::to_string(kMaxThreadRanks) +
                       " that --comm threads runs in one process; run it "
                       "under mpirun");
  return runThreadRanks(std::move(*plan), n, shared);
}

} // namespace

std::optional<int> runRunCommand() {
  if (runCmd)
    return runPlan();
  return std::nullopt;
}

} // namespace loom::driver
