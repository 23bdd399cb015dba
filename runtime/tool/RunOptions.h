//===- RunOptions.h - Running a plan: the options of `loom run` -*- C++ -*-===//
//
// What `loom run` and `loom-run` are asked to do, parsed once from the same
// command line by the same code (no MLIR or LLVM: `loom-run` is the runtime
// alone). runPlan() runs a plan as they ask; runMain() is a whole tool.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_TOOL_RUNOPTIONS_H
#define LOOM_RUNTIME_TOOL_RUNOPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::rt {

/// The options of one run of a plan; see `loom run --help` for each.
struct RunOptions {
  std::string planPath;
  /// NAME=FILE assignments, each flag's value possibly comma-separated.
  std::vector<std::string> inputs;
  std::string outputsDir;
  std::string traceFile;
  std::string backend = "cpu";
  /// Threads for the CPU kernels; 0: every core (--threads not given).
  int threads = 0;
  bool threadsGiven = false;
  uint64_t seed = 0;
  int steps = 1;
  std::string metricsFile;
  std::string commReportFile;
  std::string saveDir;
  /// Also save after every step whose number this divides (0: only last).
  int64_t saveEvery = 0;
  /// Keep only the newest this many checkpoints in saveDir (0: all).
  int64_t keepLast = 0;
  std::string resumeDir;
  std::string tokensFile;
  int repeat = 1;
  /// 0: the plan's device count.
  int ranks = 0;
  /// threads, mpi or nccl; empty: mpi under mpirun, else threads.
  std::string comm;
  /// Seconds a rank waits for its partners in a collective or a recv
  /// (threads communicator) before it reports the ranks that did not come.
  double collectiveTimeout = 0;
  /// Fault injection (LOOM_FAULT=rank:R,step:S): rank R dies as step S
  /// begins (a thread rank stops taking part, an MPI process is killed).
  int64_t faultRank = -1, faultStep = -1;
  /// LOOM_FAULT=rank:R,step:S,hang: the rank hangs instead (an MPI process
  /// sleeps, alive, rather than being killed).
  bool faultHangs = false;
};

/// The exit code of a run that lost a rank: a collective or recv of the
/// threads communicator passed its deadline (--collective-timeout) waiting
/// for a rank that died or hangs. A supervisor (loom train) re-plans for
/// the ranks left on it; every other failure exits 1.
inline constexpr int kLostRankExitCode = 3;

/// Parses the arguments after the subcommand (`argv[0]` names the command,
/// e.g. "loom run"). Returns the options, or nullopt with `exitCode` set:
/// 0 after --help, 1 after an error it printed.
std::optional<RunOptions> parseRunOptions(int argc, const char *const *argv,
                                          int &exitCode);

/// Runs the plan as `options` ask; returns the process exit code. Messages
/// go to stdout, errors to stderr as "loom: error: ...".
int runPlan(const RunOptions &options);

/// parseRunOptions() then runPlan().
int runMain(int argc, const char *const *argv);

} // namespace loom::rt

#endif // LOOM_RUNTIME_TOOL_RUNOPTIONS_H
