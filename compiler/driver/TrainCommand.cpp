//===- TrainCommand.cpp - `loom train`: training that survives lost ranks -===//
//
// Supervises a training job. It compiles the model for the mesh given (any
// loom compile flag), runs the plan as a child `loom run` (ranks as threads
// of one process, or MPI processes under mpirun) that checkpoints every
// --save-every steps, and when the child ends because a rank was lost (a
// threads rank that no longer arrives: exit code kLostRankExitCode; an MPI
// process killed: mpirun's exit by signal), it re-plans for one rank fewer:
// it compiles the model again for every mesh of the same axes over the
// ranks left, with the same global batch and memory limit, and takes the
// one the cost model predicts fastest. The new plan resumes from the last
// checkpoint (a sharded checkpoint loads under any plan of the model, each
// rank reading the blocks its shards overlap), losing only the steps since.
//
// Each attempt's plan and metrics stay in ROOT/elastic/; --metrics gathers
// every attempt's steps in order, the steps run again after a loss
// included. LOOM_FAULT (a fault to inject) applies to the first attempt
// only.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"
#include "compiler/driver/FrontEndFlags.h"

#include "common/plan/PlanChecksum.h"
#include "compiler/pipeline/Compiler.h"
#include "runtime/io/CheckpointStore.h"
#include "runtime/tool/RunOptions.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

using namespace llvm;

namespace loom::driver {
namespace {

namespace fs = std::filesystem;

cl::OptionCategory &elasticCategory() {
  static cl::OptionCategory category("Elastic training (loom train)");
  return category;
}
cl::opt<int64_t> stepsFlag("steps", cl::desc("Training steps in all"),
                           cl::value_desc("N"), cl::init(1),
                           cl::sub(trainCommand()), cl::cat(elasticCategory()));
cl::opt<std::string>
    saveFlag("save",
             cl::desc("The checkpoint root (as loom run --save); an existing "
                      "checkpoint there is resumed"),
             cl::value_desc("DIR"), cl::Required, cl::sub(trainCommand()),
             cl::cat(elasticCategory()));
cl::opt<int64_t> saveEveryFlag(
    "save-every",
    cl::desc("Checkpoint every N steps: the most steps a lost rank costs"),
    cl::value_desc("N"), cl::init(10), cl::sub(trainCommand()),
    cl::cat(elasticCategory()));
cl::opt<int64_t>
    keepLastFlag("keep-last",
                 cl::desc("Keep the newest K checkpoints (0: all)"),
                 cl::value_desc("K"), cl::init(0), cl::sub(trainCommand()),
                 cl::cat(elasticCategory()));
cl::opt<std::string> tokensFlag("tokens",
                                cl::desc("loom run --tokens: a byte stream of "
                                         "training text"),
                                cl::value_desc("FILE"), cl::sub(trainCommand()),
                                cl::cat(elasticCategory()));
cl::opt<std::string> dataFlag("data",
                              cl::desc("loom run --data: NAME=FILE,..."),
                              cl::value_desc("NAME=FILE,..."),
                              cl::sub(trainCommand()),
                              cl::cat(elasticCategory()));
cl::opt<std::string> metricsFlag(
    "metrics",
    cl::desc("Every attempt's steps, one JSON line each, in the order run"),
    cl::value_desc("FILE"), cl::sub(trainCommand()),
    cl::cat(elasticCategory()));
cl::opt<std::string> commFlag("comm",
                              cl::desc("threads (ranks in one process) or mpi "
                                       "(processes under mpirun)"),
                              cl::value_desc("threads|mpi"),
                              cl::init("threads"), cl::sub(trainCommand()),
                              cl::cat(elasticCategory()));
cl::opt<std::string> mpirunFlag("mpirun", cl::desc("--comm mpi: the launcher"),
                                cl::value_desc("PATH"), cl::init("mpirun"),
                                cl::sub(trainCommand()),
                                cl::cat(elasticCategory()));
cl::opt<int> threadsFlag("threads",
                         cl::desc("loom run --threads (0: loom run's default)"),
                         cl::value_desc("N"), cl::init(0),
                         cl::sub(trainCommand()), cl::cat(elasticCategory()));
cl::opt<double> timeoutFlag(
    "collective-timeout",
    cl::desc("Seconds a threads rank waits for its peers before the rank "
             "that did not come counts as lost"),
    cl::value_desc("SECONDS"), cl::init(60), cl::sub(trainCommand()),
    cl::cat(elasticCategory()));
cl::opt<int64_t> minRanksFlag("min-ranks",
                              cl::desc("Stop rather than re-plan below this "
                                       "many ranks"),
                              cl::value_desc("N"), cl::init(1),
                              cl::sub(trainCommand()),
                              cl::cat(elasticCategory()));

/// A mesh axis: its name and size.
using Axis = std::pair<std::string, int64_t>;

std::optional<std::vector<Axis>> parseMesh(const std::string &mesh,
                                           std::string &error) {
  std::vector<Axis> axes;
  StringRef rest(mesh);
  while (!rest.empty()) {
    auto [item, tail] = rest.split(',');
    rest = tail;
    StringRef name, value;
    int64_t size = 0;
    if (!pipeline::splitAssignment(item, name, value) ||
        value.getAsInteger(10, size) || size < 1) {
      error = "--mesh: expected AXIS=N,..., got '" + mesh + "'";
      return std::nullopt;
    }
    axes.emplace_back(name.str(), size);
  }
  return axes;
}

std::string formatMesh(const std::vector<Axis> &axes) {
  std::string text;
  for (const auto &[name, size] : axes)
    text += (text.empty() ? "" : ",") + name + "=" + std::to_string(size);
  return text;
}

int64_t devicesOf(const std::vector<Axis> &axes) {
  int64_t n = 1;
  for (const Axis &a : axes)
    n *= a.second;
  return n;
}

/// Every way to give `names` sizes whose product is `devices`, the first
/// axis largest first.
void meshesOver(const std::vector<Axis> &names, int64_t devices, size_t axis,
                std::vector<Axis> &current,
                std::vector<std::vector<Axis>> &out) {
  if (axis + 1 == names.size()) {
    current.emplace_back(names[axis].first, devices);
    out.push_back(current);
    current.pop_back();
    return;
  }
  for (int64_t size = devices; size >= 1; --size) {
    if (devices % size)
      continue;
    current.emplace_back(names[axis].first, size);
    meshesOver(names, devices / size, axis + 1, current, out);
    current.pop_back();
  }
}

/// Compiles `options` on every mesh of `axes`' names over `devices` and
/// returns the plan predicted fastest (printing each candidate), or
/// nullopt with `error` when none compiles.
std::optional<plan::Plan> replan(pipeline::CompileOptions options,
                                 const std::vector<Axis> &axes, int64_t devices,
                                 std::vector<Axis> &chosen,
                                 std::string &error) {
  std::vector<std::vector<Axis>> meshes;
  std::vector<Axis> current;
  meshesOver(axes, devices, 0, current, meshes);
  std::optional<plan::Plan> best;
  double bestSeconds = std::numeric_limits<double>::infinity();
  std::string reasons;
  for (const std::vector<Axis> &mesh : meshes) {
    options.parallel.mesh = formatMesh(mesh);
    std::string why;
    std::optional<pipeline::CompileResult> result =
        pipeline::compile(options, nulls(), why);
    outs() << "loom: train:   --mesh " << options.parallel.mesh << ": ";
    if (!result) {
      StringRef first = StringRef(why).split('\n').first;
      outs() << "does not compile (" << first << ")\n";
      reasons += "\n  --mesh " + options.parallel.mesh + ": " + first.str();
      continue;
    }
    double seconds = result->plan.explanation().step_seconds();
    outs() << format("predicted step %.3g ms", seconds * 1e3) << "\n";
    if (seconds < bestSeconds) {
      bestSeconds = seconds;
      best = std::move(result->plan);
      chosen = mesh;
    }
  }
  if (!best)
    error = "no mesh of " + std::to_string(devices) +
            " devices compiles:" + reasons;
  return best;
}

/// The step of the newest checkpoint in `root`: 0 when it has none, nullopt
/// (`error` set) when `latest` names a checkpoint that cannot be read.
std::optional<int64_t> checkpointStep(const std::string &root,
                                      std::string &error) {
  std::error_code ec;
  // The link itself: one that dangles is a damaged checkpoint, not none.
  if (!fs::exists(fs::symlink_status(fs::path(root) / "latest", ec)))
    return 0;
  std::optional<rt::CheckpointManifest> ckpt = rt::openCheckpoint(root, error);
  if (!ckpt) {
    // Starting over at step 1 would bury the steps the checkpoint holds.
    error = root + ": its latest checkpoint cannot be read (" + error +
            "); not starting over from step 1: repair it, point latest at an "
            "earlier step, or remove " +
            root;
    return std::nullopt;
  }
  return ckpt->step;
}

/// Runs `argv` and waits for it: its exit code, 128 + the signal that
/// ended it, or -1 when it could not start (`error` set).
int spawnAndWait(const std::vector<std::string> &argv, std::string &error) {
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  outs().flush();
  if (int rc =
          posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
      rc != 0) {
    error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      error = "waiting for " + argv[0] + ": " + std::strerror(errno);
      return -1;
    }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The command line of one attempt: `loom run` of `planPath` on `ranks`
/// ranks for the steps from `taken` to --steps.
std::vector<std::string> runCommand(const std::string &self,
                                    const std::string &planPath, int64_t ranks,
                                    int64_t taken, const std::string &metrics) {
  std::vector<std::string> argv;
  bool mpi = commFlag == "mpi";
  if (mpi) {
    argv = {mpirunFlag, "--oversubscribe"};
    if (::geteuid() == 0)
      argv.push_back("--allow-run-as-root");
    argv.insert(argv.end(), {"-np", std::to_string(ranks)});
    for (const char *var : {"LOOM_FAULT", "ASAN_OPTIONS", "LSAN_OPTIONS",
                            "UBSAN_OPTIONS", "LOOM_COLLECTIVE_TIMEOUT"})
      if (std::getenv(var))
        argv.insert(argv.end(), {"-x", var});
  }
  argv.insert(argv.end(),
              {self, "run", planPath, "--steps",
               std::to_string(stepsFlag - taken), "--save", saveFlag,
               "--save-every", std::to_string(saveEveryFlag), "--metrics",
               metrics});
  if (mpi)
    argv.insert(argv.end(), {"--comm", "mpi"});
  else
    argv.insert(argv.end(), {"--comm", "threads", "--collective-timeout",
                             std::to_string(timeoutFlag)});
  if (keepLastFlag > 0)
    argv.insert(argv.end(), {"--keep-last", std::to_string(keepLastFlag)});
  if (taken > 0)
    argv.insert(argv.end(), {"--resume", saveFlag});
  if (!tokensFlag.empty())
    argv.insert(argv.end(), {"--tokens", tokensFlag});
  if (!dataFlag.empty())
    argv.insert(argv.end(), {"--data", dataFlag});
  if (threadsFlag > 0)
    argv.insert(argv.end(), {"--threads", std::to_string(threadsFlag)});
  return argv;
}

std::string checkFlags(const pipeline::CompileOptions &options) {
  if (stepsFlag < 1)
    return "--steps must be at least 1";
  if (saveEveryFlag < 1)
    return "--save-every must be at least 1";
  if (keepLastFlag < 0)
    return "--keep-last must be 0 (keep all) or more";
  if (minRanksFlag < 1)
    return "--min-ranks must be at least 1";
  if (commFlag != "threads" && commFlag != "mpi")
    return "--comm must be 'threads' or 'mpi', not '" + commFlag + "'";
  if (!(timeoutFlag > 0))
    return "--collective-timeout must be a positive number of seconds";
  if (!options.parallel.stageMeshes.empty())
    return "loom train re-plans a --mesh; --stage-meshes is not supported";
  return "";
}

/// Appends the lines of `from` to `to` (when given).
void appendMetrics(const std::string &from, const std::string &to) {
  if (to.empty())
    return;
  std::ifstream in(from);
  std::ofstream out(to, std::ios::app);
  out << in.rdbuf();
}

int runTrain() {
  std::string error;
  std::optional<pipeline::CompileOptions> options =
      compileOptionsFromFlags(error);
  if (!options)
    return reportError(error);
  options->training.enabled = true;
  if (std::string bad = checkFlags(*options); !bad.empty())
    return reportError(bad);
  if (std::optional<std::string> bad = pipeline::verifyOptions(*options))
    return reportError(*bad);
  std::optional<std::vector<Axis>> axes =
      parseMesh(options->parallel.mesh, error);
  if (!axes)
    return reportError(error);
  int64_t ranks = devicesOf(*axes);
  std::string self = fs::read_symlink("/proc/self/exe").string();
  fs::path work = fs::path(saveFlag.getValue()) / "elastic";
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec)
    return reportError(work.string() + ": cannot create: " + ec.message());
  if (!metricsFlag.empty() && !std::ofstream(metricsFlag, std::ios::trunc))
    return reportError("--metrics " + metricsFlag + ": cannot write");
  std::optional<pipeline::CompileResult> first =
      pipeline::compile(*options, outs(), error);
  if (!first)
    return reportError(error);
  plan::Plan plan = std::move(first->plan);
  std::vector<Axis> mesh = *axes;
  for (int attempt = 1;; ++attempt) {
    std::optional<int64_t> latest = checkpointStep(saveFlag, error);
    if (!latest)
      return reportError(error);
    int64_t taken = *latest;
    if (taken >= stepsFlag) {
      outs() << "loom: train: " << stepsFlag << " steps done (" << attempt - 1
             << " attempt(s), ending on " << ranks << " ranks)\n";
      return 0;
    }
    std::string base = (work / ("attempt-" + std::to_string(attempt))).string();
    std::optional<std::string> bytes = plan::sealPlan(plan);
    if (!bytes || !(std::ofstream(base + ".plan", std::ios::binary) << *bytes))
      return reportError(base + ".plan: cannot write the plan");
    outs() << "loom: train: attempt " << attempt << " on " << ranks
           << " ranks (--mesh " << formatMesh(mesh) << "), steps " << taken + 1
           << " to " << stepsFlag
           << (taken > 0 ? ", resuming from the checkpoint of step " +
                               std::to_string(taken)
                         : std::string())
           << "\n";
    int rc = spawnAndWait(
        runCommand(self, base + ".plan", ranks, taken, base + ".jsonl"), error);
    appendMetrics(base + ".jsonl", metricsFlag);
    if (rc < 0)
      return reportError(error);
    if (rc == 0) {
      std::optional<int64_t> reached = checkpointStep(saveFlag, error);
      if (!reached)
        return reportError(error);
      if (*reached < stepsFlag)
        return reportError("the run ended before step " +
                           std::to_string(stepsFlag) + " without an error");
      continue;
    }
    bool lost = rc == rt::kLostRankExitCode || (commFlag == "mpi" && rc > 128);
    if (!lost)
      return reportError("the run failed (exit code " + std::to_string(rc) +
                         "), not from a lost rank: not re-planning");
    if (ranks - 1 < minRanksFlag)
      return reportError("a rank was lost, and " + std::to_string(ranks - 1) +
                         " ranks are fewer than --min-ranks " +
                         std::to_string(minRanksFlag));
    // A fault injected for a test strikes once.
    ::unsetenv("LOOM_FAULT");
    --ranks;
    outs() << "loom: train: a rank was lost (exit code " << rc
           << "); re-planning for " << ranks << " ranks:\n";
    std::optional<plan::Plan> next =
        replan(*options, *axes, ranks, mesh, error);
    if (!next)
      return reportError(error);
    plan = std::move(*next);
  }
}

} // namespace

std::optional<int> runTrainCommand() {
  if (trainCommand())
    return runTrain();
  return std::nullopt;
}

} // namespace loom::driver
