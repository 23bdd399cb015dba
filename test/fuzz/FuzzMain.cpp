//===- FuzzMain.cpp - The fuzzing harness's driver ------------------------===//
//
//   loom-fuzz --reader NAME [--count N] [--seed S] [--seconds T]
//             [--start I] [--only I] [--input FILE] [--input-timeout T]
//             [--source DIR] [--work DIR] [--plans DIR] [--regressions DIR]
//
// Replays every file of the reader's regression directory, then runs the
// reader on N inputs drawn from its seeds with seed S (input I depends on S
// and I alone: `--only I` reproduces one, `--start I` goes on after it), or
// on inputs for T seconds. LOOM_FUZZ_COUNT, LOOM_FUZZ_SEED and
// LOOM_FUZZ_SECONDS override the flags, for longer runs through ctest;
// LOOM_FUZZ_VERBOSE=1 prints every input's outcome. On a crash, a sanitizer
// report or an input running over the timeout (120 s) the input being read
// is written to crash-READER-I.bin in the working directory. Prints the
// outcomes per check and fails on a broken promise, or when too few inputs
// got past the reader's first check (a mutator that never reaches the
// reader's depth proves nothing).
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <thread>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

using namespace loom::fuzz;

namespace {

const std::map<std::string,
               std::function<std::unique_ptr<Target>(const Config &)>>
    kReaders = {{"onnx", makeOnnxTarget},
                {"plan", makePlanTarget},
                {"strategy", makeStrategyTarget},
                {"profile", makeProfileTarget},
                {"checkpoint", makeCheckpointTarget},
                {"npy", makeNpyTarget},
                {"tensorproto", makeTensorProtoTarget}};

//===----------------------------------------------------------------------===//
// The input being read, written out when the process dies
//===----------------------------------------------------------------------===//

const std::string *gInput = nullptr;
char gCrashPath[512];
/// What is being read, with how to reproduce it.
char gWhat[512];
std::atomic<int64_t> gStartedMs{-1};

void dumpInput() {
  static std::atomic<bool> dumped{false};
  if (!gInput || dumped.exchange(true))
    return;
  int fd = ::open(gCrashPath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return;
  const char *p = gInput->data();
  size_t left = gInput->size();
  while (left) {
    ssize_t n = ::write(fd, p, left);
    if (n <= 0)
      break;
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
  const char died[] = "\nloom-fuzz: died reading ";
  const char saved[] = "\nloom-fuzz: the input is saved in ";
  (void)!::write(2, died, sizeof died - 1);
  (void)!::write(2, gWhat, std::strlen(gWhat));
  (void)!::write(2, saved, sizeof saved - 1);
  (void)!::write(2, gCrashPath, std::strlen(gCrashPath));
  (void)!::write(2, "\n", 1);
}

void onSignal(int sig) {
  dumpInput();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

#if defined(__SANITIZE_ADDRESS__)
// UBSan (a library of its own under GCC) does not call the death callback
// ASan keeps: it aborts instead, which the SIGABRT handler sees. Flags in
// UBSAN_OPTIONS still win.
extern "C" const char *__ubsan_default_options() { return "abort_on_error=1"; }
#endif

void installCrashHandlers() {
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizers report SEGV and their own findings, then call this.
  __sanitizer_set_death_callback(dumpInput);
  std::signal(SIGABRT, onSignal);
#else
  static char altStack[1 << 16];
  stack_t ss{};
  ss.ss_sp = altStack;
  ss.ss_size = sizeof altStack;
  sigaltstack(&ss, nullptr);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    sigaction(sig, &sa, nullptr);
  }
#endif
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Aborts (saving the input) when one input takes longer than `limitS`.
void startWatchdog(int64_t limitS) {
  std::thread([limitS] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      int64_t started = gStartedMs.load();
      if (started >= 0 && nowMs() - started > limitS * 1000) {
        std::fprintf(stderr, "loom-fuzz: an input ran over %lld s: a hang\n",
                     static_cast<long long>(limitS));
        dumpInput();
        std::_Exit(3);
      }
    }
  }).detach();
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

struct Options {
  std::string reader, input, regressions;
  uint64_t seed = 20261127, count = 10000, seconds = 0;
  int64_t only = -1, start = 0, inputTimeout = 120;
  Config config;
};

struct Tally {
  uint64_t inputs = 0, accepted = 0, violations = 0;
  std::map<std::string, uint64_t> rejected;
  /// One example message per check, for the log.
  std::map<std::string, std::string> example;
};

void runOne(Target &target, const std::string &input, const std::string &what,
            Tally &tally) {
  std::snprintf(gWhat, sizeof gWhat, "%s", what.c_str());
  gInput = &input;
  gStartedMs = nowMs();
  Outcome o = target.run(input);
  if (std::getenv("LOOM_FUZZ_VERBOSE"))
    std::cerr << what << ": " << input.size() << " bytes, "
              << nowMs() - gStartedMs << " ms, "
              << (o.accepted ? std::string("accepted") : o.stage) << "\n";
  gStartedMs = -1;
  gInput = nullptr;
  ++tally.inputs;
  if (o.accepted) {
    ++tally.accepted;
  } else {
    ++tally.rejected[o.stage];
    if (o.message.empty())
      o.violation = "rejected without a message";
    if (!tally.example.count(o.stage)) {
      std::string line = o.message.substr(0, 240);
      std::replace(line.begin(), line.end(), '\n', ' ');
      tally.example[o.stage] = line;
    }
  }
  if (!o.violation.empty()) {
    ++tally.violations;
    if (tally.violations <= 10)
      std::cerr << "VIOLATION on " << what << ": " << o.violation
                << "\n  message: " << o.message.substr(0, 500) << "\n";
  }
}

std::string flagValue(int &i, int argc, char **argv) {
  if (i + 1 >= argc) {
    std::cerr << "loom-fuzz: " << argv[i] << " needs a value\n";
    std::exit(2);
  }
  return argv[++i];
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--reader")
      o.reader = flagValue(i, argc, argv);
    else if (flag == "--count")
      o.count = std::stoull(flagValue(i, argc, argv));
    else if (flag == "--seed")
      o.seed = std::stoull(flagValue(i, argc, argv));
    else if (flag == "--seconds")
      o.seconds = std::stoull(flagValue(i, argc, argv));
    else if (flag == "--only")
      o.only = std::stoll(flagValue(i, argc, argv));
    else if (flag == "--start")
      o.start = std::stoll(flagValue(i, argc, argv));
    else if (flag == "--input")
      o.input = flagValue(i, argc, argv);
    else if (flag == "--input-timeout")
      o.inputTimeout = std::stoll(flagValue(i, argc, argv));
    else if (flag == "--source")
      o.config.sourceDir = flagValue(i, argc, argv);
    else if (flag == "--work")
      o.config.workDir = flagValue(i, argc, argv);
    else if (flag == "--plans")
      o.config.planSeedDir = flagValue(i, argc, argv);
    else if (flag == "--regressions")
      o.regressions = flagValue(i, argc, argv);
    else {
      std::cerr << "loom-fuzz: unknown flag " << flag << "\n";
      std::exit(2);
    }
  }
  if (const char *v = std::getenv("LOOM_FUZZ_COUNT"))
    o.count = std::stoull(v);
  if (const char *v = std::getenv("LOOM_FUZZ_SEED"))
    o.seed = std::stoull(v);
  if (const char *v = std::getenv("LOOM_FUZZ_SECONDS"))
    o.seconds = std::stoull(v);
  if (!kReaders.count(o.reader)) {
    std::cerr << "loom-fuzz: --reader must be one of:";
    for (const auto &kv : kReaders)
      std::cerr << " " << kv.first;
    std::cerr << "\n";
    std::exit(2);
  }
  if (o.config.workDir.empty())
    o.config.workDir = "fuzz-work-" + o.reader;
  if (o.config.sourceDir.empty())
    o.config.sourceDir = LOOM_SOURCE_DIR;
  if (o.regressions.empty())
    o.regressions = o.config.sourceDir + "/test/fuzz/regressions/" + o.reader;
  return o;
}

/// The seed of input `index`: inputs do not depend on one another.
uint64_t inputSeed(uint64_t seed, uint64_t index) {
  Rng mix(seed * 0x100000001b3ull ^ index);
  return mix.next();
}

int report(const Options &o, const Target &target, const Tally &tally,
           const Tally &replayed, double seconds) {
  std::cout << "reader " << o.reader << ": " << replayed.inputs
            << " regression inputs, " << tally.inputs << " fuzzed inputs (seed "
            << o.seed << ") in " << seconds << " s ("
            << (seconds > 0 ? tally.inputs / seconds : 0) << "/s)\n";
  std::cout << "  accepted: " << tally.accepted << "\n";
  for (const std::string &stage : target.stages()) {
    auto it = tally.rejected.find(stage);
    std::cout << "  rejected by " << stage << ": "
              << (it == tally.rejected.end() ? 0 : it->second);
    if (tally.example.count(stage))
      std::cout << "  (e.g. " << tally.example.at(stage) << ")";
    std::cout << "\n";
  }
  for (const auto &[stage, n] : tally.rejected)
    if (!target.stages().empty() &&
        std::find(target.stages().begin(), target.stages().end(), stage) ==
            target.stages().end())
      std::cout << "  rejected by unlisted check '" << stage << "': " << n
                << "\n";
  int status = 0;
  if (tally.violations + replayed.violations) {
    std::cout << "FAIL: " << tally.violations + replayed.violations
              << " broken promises (see above)\n";
    status = 1;
  }
  // A run of many inputs must get past the first check, and some inputs
  // must be accepted: else the mutations never reach what they test.
  uint64_t first = tally.rejected.count(target.stages().front())
                       ? tally.rejected.at(target.stages().front())
                       : 0;
  if (tally.inputs >= 1000 &&
      (tally.accepted < tally.inputs / 100 ||
       tally.inputs - tally.accepted - first < tally.inputs / 100)) {
    std::cout << "FAIL: fewer than 1% of the inputs were accepted, or fewer "
                 "than 1% were refused past the first check ("
              << target.stages().front() << "): the fuzzer does not reach "
              << "the reader's depth\n";
    status = 1;
  }
  return status;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  // Protobuf logs what it refuses to parse (strings that are not UTF-8);
  // the readers' own messages are what is checked.
  google::protobuf::SetLogHandler(nullptr);
  std::error_code ec;
  std::filesystem::create_directories(o.config.workDir, ec);
  std::unique_ptr<Target> target = kReaders.at(o.reader)(o.config);
  std::vector<Seed> corpus = target->seeds(o.config);
  if (corpus.empty()) {
    std::cerr << "loom-fuzz: reader " << o.reader << " has no seeds\n";
    return 1;
  }
  std::vector<Seed> regressions = seedsFromDirectory(o.regressions);
  installCrashHandlers();
  startWatchdog(o.inputTimeout);

  Tally replayed, tally;
  if (!o.input.empty()) {
    std::snprintf(gCrashPath, sizeof gCrashPath, "crash-%s-input.bin",
                  o.reader.c_str());
    runOne(*target, readFileOrEmpty(o.input), o.input, tally);
    return report(o, *target, tally, replayed, 0);
  }
  for (const Seed &r : regressions) {
    std::snprintf(gCrashPath, sizeof gCrashPath, "crash-%s-regression.bin",
                  o.reader.c_str());
    runOne(*target, r.bytes, "regression " + r.name, replayed);
  }
  // Regression inputs are seeds too: their neighbourhoods are where bugs
  // were.
  corpus.insert(corpus.end(), regressions.begin(), regressions.end());

  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  uint64_t first = static_cast<uint64_t>(o.only >= 0 ? o.only : o.start);
  for (uint64_t i = first;; ++i) {
    if (o.only >= 0 ? i > first
                    : (o.seconds ? elapsed() >= o.seconds : i >= o.count))
      break;
    Rng rng(inputSeed(o.seed, i));
    std::string input = target->mutate(corpus, rng);
    std::snprintf(gCrashPath, sizeof gCrashPath, "crash-%s-%llu.bin",
                  o.reader.c_str(), static_cast<unsigned long long>(i));
    runOne(*target, input,
           "input #" + std::to_string(i) + " (reproduce: loom-fuzz --reader " +
               o.reader + " --seed " + std::to_string(o.seed) + " --only " +
               std::to_string(i) + ")",
           tally);
  }
  return report(o, *target, tally, replayed, elapsed());
}
