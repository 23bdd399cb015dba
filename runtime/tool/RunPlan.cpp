//===- RunPlan.cpp - Running a plan: `loom run` and `loom-run` ------------===//
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
// Measuring from outside. A heap counter preloaded into the process
// (test/memcount) defines `loom_memory_mark`; `loom run` marks "start"
// before it reads the plan, and each rank "begin" after its backend exists
// and before its executor is created, "created" once it is, "step" after
// each training step and "end" after the last, so that
// the counter's high-water marks between them are everything the executor,
// its kernels and their libraries held for the plan
// (test/e2e/memory_measured.py). The symbol is looked up at run time
// (dlsym): without the counter nothing is called.
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

#include "runtime/tool/RunOptions.h"
#include "runtime/tool/RunOutputs.h"

#include "runtime/Backend.h"
#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/PlanLayout.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/FileUtil.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorFile.h"
#include "runtime/io/Trace.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>


namespace loom::rt {
namespace {

/// Tells a preloaded heap counter (test/memcount) where the measurement of
/// a rank's plan begins and ends; nothing without one.
void markMemory(const char *what) {
  using Mark = void (*)(const char *);
  static const Mark mark =
      reinterpret_cast<Mark>(dlsym(RTLD_DEFAULT, "loom_memory_mark"));
  if (mark)
    mark(what);
}

/// Prints "loom: error: MESSAGE" and returns exit code 1.
int reportError(const std::string &message) {
  // One write: under mpirun the processes' lines share one stream.
  std::cerr << ("loom: error: " + message + "\n");
  return 1;
}

/// The NAME=FILE assignments of every --inputs / --data flag, each flag's
/// value split on commas.
std::vector<std::string>
splitAssignments(const std::vector<std::string> &flags) {
  std::vector<std::string> out;
  for (const std::string &flag : flags) {
    size_t begin = 0;
    while (begin <= flag.size()) {
      size_t comma = flag.find(',', begin);
      if (comma == std::string::npos)
        comma = flag.size();
      if (comma > begin)
        out.push_back(flag.substr(begin, comma - begin));
      begin = comma + 1;
    }
  }
  return out;
}

/// The most ranks `--comm threads` runs in one process.
constexpr int64_t kMaxThreadRanks = 1024;

/// Feeds language-model batches from a byte file: windows of the sequence
/// length at consecutive offsets, the labels shifted by one token. The
/// file's bytes are read once and shared by every rank.
class TokenFeeder {
public:
  bool open(const std::string &path, const std::string &contents,
            const Executor &exec, std::string &error) {
    bytes = &contents;
    for (const IOInfo &in : exec.inputs()) {
      bool integer = in.dtype == DType::I32 || in.dtype == DType::I64;
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
  bool feed(Executor &exec, int64_t step, std::string &error) {
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
    TensorView xv{DType::I64, input.shape, x.data()};
    TensorView yv{DType::I64, labels.shape, y.data()};
    return exec.setInput(input.name, xv, error) &&
           exec.setInput(labels.name, yv, error);
  }

private:
  const std::string *bytes = nullptr;
  IOInfo input, labels;
};

/// What the ranks of one run share: read once, before any rank starts.
struct Shared {
  explicit Shared(const RunOptions &options) : o(options) {}
  const RunOptions &o;
  struct Input {
    std::string name, file;
    HostBuffer value;
  };
  std::vector<Input> inputs;
  std::string tokens;
  TraceWriter trace;
  /// Whether the ranks are threads of this process (the trace is then
  /// written once they have all finished).
  bool threaded = false;
  /// The plan's schedule, for the bubble report.
  plan::Schedule schedule;
  /// The communicator kind: threads, mpi or nccl.
  std::string comm;
};

/// One rank: its communicator (none on one device), backend and executor.
struct Rank {
  int64_t index = 0;
  /// The host communicator (the files, the trace, failures), and for
  /// --comm nccl the NCCL one the executor uses, bootstrapped over it.
  Communicator *comm = nullptr;
  std::unique_ptr<Communicator> nccl;
  /// The GPU of a --backend cuda rank (modulo the devices present).
  int device = 0;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executor> exec;
  std::optional<TokenFeeder> tokens;
  std::unique_ptr<std::ofstream> metrics;
  /// The times of the measured steps (see the file comment).
  StepTiming measured;
  bool leader() const { return index == 0; }
  /// Adds the last step's times when step `i` (0-based) of `count` is
  /// measured: every step after the first, or the only one.
  void measure(int i, int count) {
    if (i == 0 && count > 1)
      return;
    const StepTiming &last = exec->lastStepTiming();
    measured.seconds += last.seconds;
    measured.recvWaitSeconds += last.recvWaitSeconds;
    measured.steps += last.steps;
  }
};

/// Rank 0's printing and any rank's fatal error, one at a time.
std::mutex printMutex;

/// Reports a failure while `rank` runs and ends the process (see the file
/// comment for why it cannot wait for the other ranks): exit code
/// kLostRankExitCode when a rank was lost (its communicator says), else 1.
[[noreturn]] void abortRun(const Rank &rank, const std::string &message) {
  printMutex.lock(); // never released: nothing else prints from here on
  std::cout.flush();
  std::cerr << ("loom: error: rank " + std::to_string(rank.index) + ": " +
                message + "\n");
  std::cerr.flush();
  std::_Exit(rank.comm && rank.comm->lostRank() ? kLostRankExitCode : 1);
}

/// The plan a rank's executor is made from: this rank's own (moved into
/// the executor), or one shared by the threads' ranks (copied, one rank at
/// a time).
struct PlanSource {
  plan::Plan *owned = nullptr;
  const plan::Plan *shared = nullptr;
};

/// Loads the plan for `rank` and everything that needs no other rank:
/// inputs, the checkpoint to resume from, the token file, the metrics file.
std::string setUpRank(Rank &rank, PlanSource plan, Shared &shared,
                      int backendThreads) {
  const RunOptions &o = shared.o;
  std::string error;
  rank.backend = createBackend(o.backend, rank.device, error);
  if (!rank.backend)
    return error;
  if (backendThreads > 0)
    rank.backend->setNumThreads(backendThreads);
  Communicator *comm = rank.comm;
  if (rank.comm && shared.comm == "nccl") {
    rank.nccl = createNcclCommunicator(*rank.comm, rank.device,
                                       cudaStreamOf(*rank.backend),
                                       cudaCommStreamOf(*rank.backend), error);
    if (!rank.nccl)
      return error;
    comm = rank.nccl.get();
  }
  markMemory("begin");
  if (plan.owned) {
    rank.exec = Executor::create(std::move(*plan.owned), *rank.backend, error,
                                 {rank.index, comm});
  } else {
    // One rank copies the plan at a time: a copy holds the model's
    // parameters until its executor has loaded its shard and let them go.
    static std::mutex copying;
    std::lock_guard<std::mutex> lock(copying);
    rank.exec = Executor::create(*plan.shared, *rank.backend, error,
                                 {rank.index, comm});
  }
  if (!rank.exec)
    return o.planPath + ": " + error;
  markMemory("created");
  Executor &exec = *rank.exec;
  if (exec.numStages() > 1)
    shared.trace.setRankName(static_cast<int>(rank.index),
                             "rank " + std::to_string(rank.index) + " (stage " +
                                 std::to_string(exec.stage()) + ")");
  exec.setRandomInputs(o.seed);
  for (Shared::Input &in : shared.inputs)
    if (!exec.setInput(in.name, in.value.view(), error))
      return in.file + ": " + error;
  if (exec.isTraining() && o.tokensFile.empty()) {
    std::vector<std::string> given;
    for (const Shared::Input &in : shared.inputs)
      given.push_back(in.name);
    if (std::string bad = checkTrainingData(exec.inputs(), given); !bad.empty())
      return bad;
    if (shared.inputs.empty() && rank.leader()) {
      std::lock_guard<std::mutex> lock(printMutex);
      std::cerr << "loom: note: no --data or --tokens: training on seeded "
                   "random inputs and labels (--seed "
                << o.seed << ")\n";
    }
  }
  if (!exec.isTraining()) {
    if (!o.resumeDir.empty() || !o.saveDir.empty() || o.steps != 1)
      return "--steps, --save and --resume need a training plan (loom "
             "compile --train)";
    return "";
  }
  if (o.steps < 1)
    return "--steps must be at least 1";
  if (!o.resumeDir.empty() && !loadCheckpoint(exec, o.resumeDir, error))
    return error;
  if (!o.tokensFile.empty()) {
    rank.tokens.emplace();
    if (!rank.tokens->open(o.tokensFile, shared.tokens, exec, error))
      return error;
  }
  if (!o.metricsFile.empty() && rank.leader()) {
    rank.metrics = std::make_unique<std::ofstream>(o.metricsFile);
    if (!*rank.metrics)
      return "cannot write '" + o.metricsFile + "': " + std::strerror(errno);
  }
  return "";
}

/// Writes the trace. Under MPI every rank sends its spans to rank 0 (a
/// collective), which writes them all.
std::string writeTrace(Rank &rank, Shared &shared) {
  std::string error;
  Communicator *comm = rank.comm;
  if (!shared.threaded && comm && comm->worldSize() > 1) {
    int64_t n = comm->worldSize();
    RankGroup world(n);
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
    TraceWriter merged;
    for (int64_t r = 0; r < n; ++r)
      if (!merged.merge(std::string_view(all).substr(r * longest, sizes[r]),
                        error))
        return "rank " + std::to_string(r) + "'s trace: " + error;
    return merged.write(shared.o.traceFile, error) ? "" : error;
  }
  if (!rank.leader())
    return "";
  return shared.trace.write(shared.o.traceFile, error) ? "" : error;
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
  const Executor &exec = *rank.exec;
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
  RankGroup world(n);
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
void printReports(const std::vector<RankReport> &reports, const Executor &exec,
                  const Shared &shared, int total) {
  if (exec.numStages() == 1) {
    const RankReport &r = reports[0];
    std::cout << "loom: peak memory "
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
  std::cout << "loom: pipeline of " << p << " stages, "
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
    std::cout << "loom: rank " << r << " (stage "
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
              << format("%.3f", 1e3 * report.recvWaitSeconds / steps)
              << " ms of " << format("%.3f", 1e3 * report.seconds / steps)
              << " ms per step)\n";
  }
}

/// LOOM_FAULT: this rank dies as its step begins. A thread rank stops
/// taking part for good (its peers time out waiting for it); an MPI process
/// is killed, as a lost node's would be.
[[noreturn]] void dieForFault(const Rank &rank, const Shared &shared) {
  {
    std::lock_guard<std::mutex> lock(printMutex);
    // One write, so that another process's line cannot split it.
    std::cerr << ("loom: LOOM_FAULT: rank " + std::to_string(rank.index) +
                  (shared.o.faultHangs ? " hangs" : " dies") + " at step " +
                  std::to_string(shared.o.faultStep) + "\n");
  }
  if (!shared.threaded && !shared.o.faultHangs)
    std::raise(SIGKILL);
  std::mutex never;
  std::unique_lock<std::mutex> lock(never);
  std::condition_variable().wait(lock, [] { return false; });
  std::abort(); // unreachable
}

/// Saves the checkpoint of the step taken (`--save`), every rank taking
/// part; the metrics so far are flushed first.
std::string save(Rank &rank, const RunOptions &o) {
  if (rank.metrics)
    rank.metrics->flush();
  std::string error, dir;
  if (!saveCheckpoint(*rank.exec, o.saveDir, error, o.keepLast, &dir))
    return error;
  if (rank.leader()) {
    std::lock_guard<std::mutex> lock(printMutex);
    std::cout << "loom: saved a checkpoint of step " << rank.exec->stepsTaken()
              << " to " << dir << "\n";
    std::cout.flush();
  }
  return "";
}

/// Training steps, then the trace and the checkpoint.
std::string trainRank(Rank &rank, Shared &shared) {
  const RunOptions &o = shared.o;
  Executor &exec = *rank.exec;
  TraceWriter *trace = o.traceFile.empty() ? nullptr : &shared.trace;
  std::string error;
  for (int i = 0; i < o.steps; ++i) {
    double loss = 0, lr = 0;
    if (rank.tokens && !rank.tokens->feed(exec, exec.stepsTaken(), error))
      return error;
    if (static_cast<int64_t>(rank.index) == o.faultRank &&
        exec.stepsTaken() + 1 == o.faultStep)
      dieForFault(rank, shared);
    auto start = std::chrono::steady_clock::now();
    if (!exec.trainStep(error, trace, loss, lr))
      return o.planPath + ": step " + std::to_string(exec.stepsTaken() + 1) +
             ": " + error;
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    rank.measure(i, o.steps);
    markMemory("step");
    if (rank.leader()) {
      std::lock_guard<std::mutex> lock(printMutex);
      std::cout << "loom: step " << exec.stepsTaken() << " loss "
                << format("%.6g", loss) << " lr " << format("%.6g", lr) << " ("
                << format("%.1f", ms) << " ms)\n";
      std::cout.flush();
      if (rank.metrics)
        *rank.metrics << "{\"step\": " << exec.stepsTaken()
                      << ", \"loss\": " << format("%.9g", loss)
                      << ", \"lr\": " << format("%.9g", lr)
                      << ", \"step_time_ms\": " << format("%.3f", ms) << "}\n"
                      << std::flush; // a rank lost later ends the process
      if (rank.metrics && !*rank.metrics)
        return o.metricsFile + ": cannot write (" + std::strerror(errno) + ")";
    }
    // The loss is replicated: every rank stops at the same step.
    if (!std::isfinite(loss))
      return "the loss is not finite at step " +
             std::to_string(exec.stepsTaken()) +
             "; lower --lr or check the data";
    if (o.saveEvery > 0 && exec.stepsTaken() % o.saveEvery == 0 &&
        i + 1 < o.steps)
      if (std::string e = save(rank, o); !e.empty())
        return e;
  }
  markMemory("end");
  if (rank.metrics)
    rank.metrics->flush();
  std::vector<RankReport> reports;
  if (std::string e = gatherReports(rank, reports); !e.empty())
    return e;
  if (rank.leader()) {
    std::lock_guard<std::mutex> lock(printMutex);
    printReports(reports, exec, shared, o.steps);
    std::cout.flush();
  }
  if (rank.leader())
    if (std::string e = writeCommReport(exec, o.commReportFile); !e.empty())
      return e;
  if (!o.traceFile.empty() && !shared.threaded)
    if (std::string e = writeTrace(rank, shared); !e.empty())
      return e;
  if (!o.saveDir.empty())
    return save(rank, o);
  return "";
}

/// Inference: --repeat steps, the trace, then the first rank of the last
/// stage (rank 0 of a single-stage plan) reports the outputs.
std::string inferRank(Rank &rank, Shared &shared) {
  const RunOptions &o = shared.o;
  Executor &exec = *rank.exec;
  std::string error;
  double totalMs = 0;
  for (int i = 0; i < o.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (!exec.run(error, o.traceFile.empty() ? nullptr : &shared.trace))
      return o.planPath + ": " + error;
    totalMs += std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - start)
                   .count();
    rank.measure(i, o.repeat);
  }
  if (!o.traceFile.empty() && !shared.threaded)
    if (std::string e = writeTrace(rank, shared); !e.empty())
      return e;
  std::vector<RankReport> reports;
  if (std::string e = gatherReports(rank, reports); !e.empty())
    return e;
  if (rank.leader())
    if (std::string e = writeCommReport(exec, o.commReportFile); !e.empty())
      return e;
  if (rank.index != exec.stageRanks(exec.numStages() - 1).front())
    return "";
  if (!o.outputsDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.outputsDir, ec);
    if (ec)
      return "cannot create '" + o.outputsDir + "': " + ec.message();
  }
  std::lock_guard<std::mutex> lock(printMutex);
  for (const IOInfo &out : exec.outputs()) {
    TensorView v = exec.output(out.name);
    std::cout << "loom: output '" << out.name << "' " << dtypeName(v.dtype)
              << formatShape(v.shape) << summarize(v) << "\n";
    if (!o.outputsDir.empty()) {
      std::filesystem::path path =
          std::filesystem::path(o.outputsDir) / checkpointFileName(out.name);
      if (!writeNpy(path.string(), v, error))
        return error;
    }
  }
  std::cout << "loom: " << o.repeat << (o.repeat == 1 ? " step" : " steps")
            << " in " << format("%.3f", totalMs / o.repeat) << " ms each on "
            << rank.backend->name()
            << (exec.numRanks() > 1
                    ? " (" + std::to_string(exec.numRanks()) + " ranks)"
                    : std::string())
            << "\n";
  printReports(reports, exec, shared, o.repeat);
  std::cout.flush();
  return "";
}

std::string runRank(Rank &rank, Shared &shared) {
  return rank.exec->isTraining() ? trainRank(rank, shared)
                                 : inferRank(rank, shared);
}

/// `n` ranks as threads of this process (n = 1: no thread, no
/// communicator, exactly a single-device run).
int runThreadRanks(plan::Plan plan, int64_t n, Shared &shared) {
  const RunOptions &o = shared.o;
  if (n == 1) {
    Rank rank;
    if (std::string e = setUpRank(rank, {&plan, nullptr}, shared, o.threads);
        !e.empty())
      return reportError(e);
    if (std::string e = runRank(rank, shared); !e.empty())
      return reportError(e);
    return 0;
  }
  shared.threaded = true;
  int total = o.threads > 0
                  ? o.threads
                  : static_cast<int>(std::thread::hardware_concurrency());
  int perRank = std::max(1, total / static_cast<int>(n));
  std::vector<std::unique_ptr<Communicator>> comms =
      createThreadsCommunicators(n, o.collectiveTimeout);
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
    errors[rank.index] = setUpRank(rank, {nullptr, &plan}, shared, perRank);
    // Peers waiting for it (loading a checkpoint) stop at once.
    if (!errors[rank.index].empty())
      rank.comm->abort(errors[rank.index]);
  });
  for (int64_t r = 0; r < n; ++r)
    if (!errors[r].empty())
      return reportError("rank " + std::to_string(r) + ": " + errors[r]);
  plan = plan::Plan(); // every executor has its own: the parameters go
  onEveryRank([&](Rank &rank) {
    if (std::string e = runRank(rank, shared); !e.empty())
      abortRun(rank, e);
  });
  if (!o.traceFile.empty())
    if (std::string e = writeTrace(ranks[0], shared); !e.empty())
      return reportError(e);
  return 0;
}

/// This process's rank of an MPI run.
int runMpiRank(plan::Plan plan, Communicator &comm, Shared &shared) {
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
  int perProcess = shared.o.threads;
  if (!shared.o.threadsGiven)
    if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
      perProcess =
          std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                          std::max(1, std::atoi(local)));
  std::string e = setUpRank(rank, {&plan, nullptr}, shared, perProcess);
  if (n == 1) {
    if (e.empty())
      e = runRank(rank, shared);
    return e.empty() ? 0 : reportError(e);
  }
  // Agree on whether every rank is set up, so that all stop together.
  RankGroup world(n);
  for (int64_t r = 0; r < n; ++r)
    world[r] = r;
  int32_t failed = e.empty() ? 0 : 1;
  if (std::string agree = comm.allReduceSum(world, DType::I32, &failed, 1);
      !agree.empty())
    abortRun(rank, e.empty() ? agree : e);
  if (!e.empty())
    return reportError("rank " + std::to_string(rank.index) + ": " + e);
  if (failed)
    return rank.leader()
               ? reportError("rank 0: stopping: " + std::to_string(failed) +
                             " other rank(s) failed to start")
               : 1;
  if (std::string run = runRank(rank, shared); !run.empty())
    abortRun(rank, run);
  return 0;
}

} // namespace

int runPlan(const RunOptions &o) {
  markMemory("start");
  std::string error;
  if (o.backend != "cpu" && o.backend != "cuda")
    return reportError("--backend must be 'cpu' or 'cuda', not '" + o.backend +
                       "'");
  if (o.backend == "cuda" && cudaDeviceCount(error) == 0)
    return reportError(error);
  if (o.repeat < 1)
    return reportError("--repeat must be at least 1");
  if (o.ranks < 0)
    return reportError("--ranks must be at least 1");
  std::string comm = o.comm;
  if (comm.empty())
    comm = launchedByMpirun() ? "mpi" : "threads";
  if (comm != "threads" && comm != "mpi" && comm != "nccl")
    return reportError("--comm must be 'threads', 'mpi' or 'nccl', not '" +
                       comm + "'");
  if (comm == "nccl" && o.backend != "cuda")
    return reportError("--comm nccl exchanges GPU memory; use it with "
                       "--backend cuda");
  if (comm == "nccl" && !ncclAvailable())
    return reportError("--comm nccl: this Loom was built without NCCL");
  if (std::string bad = checkRunOutputs(o); !bad.empty())
    return reportError(bad);
  std::optional<plan::Plan> plan = readPlanFile(o.planPath, error);
  if (!plan)
    return reportError(error);
  // The plan's device count; an invalid mesh is left to the executor to
  // report.
  std::optional<layout::Mesh> mesh;
  int64_t devices = 1;
  if (meshFromProto(plan->mesh(), mesh, error) && mesh)
    devices = mesh->numDevices();

  // The mode of a run that o.comm leaves open is filled in here.
  Shared shared(o);
  shared.comm = comm;
  shared.schedule = plan->schedule();
  for (const std::string &flag : splitAssignments(o.inputs)) {
    size_t eq = flag.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == flag.size())
      return reportError("--inputs expects NAME=FILE, got '" + flag + "'");
    std::string name = flag.substr(0, eq), file = flag.substr(eq + 1);
    std::optional<HostBuffer> value = readTensorFile(file, error);
    if (!value)
      return reportError(error);
    shared.inputs.push_back({name, file, std::move(*value)});
  }
  if (!o.tokensFile.empty() &&
      !readWholeFile(o.tokensFile, shared.tokens, error))
    return reportError(o.tokensFile + ": cannot read the token file: " + error);

  // NCCL bootstraps over MPI under mpirun, else over threads.
  if (comm == "mpi" || (comm == "nccl" && launchedByMpirun())) {
    std::unique_ptr<Communicator> mpi =
        createMpiCommunicator(error, o.collectiveTimeout);
    if (!mpi)
      return reportError(error);
    if (o.ranks > 0 && o.ranks != mpi->worldSize())
      return reportError("--ranks " + std::to_string(o.ranks) +
                         " differs from the " +
                         std::to_string(mpi->worldSize()) +
                         " processes mpirun started; leave --ranks out "
                         "under mpirun");
    return runMpiRank(std::move(*plan), *mpi, shared);
  }
  int64_t n = o.ranks > 0 ? o.ranks : devices;
  if (n > kMaxThreadRanks)
    return reportError("this run needs " + std::to_string(n) +
                       " ranks, more than the " +
                       std::to_string(kMaxThreadRanks) +
                       " that --comm threads runs in one process; run it "
                       "under mpirun");
  return runThreadRanks(std::move(*plan), n, shared);
}

} // namespace loom::rt
