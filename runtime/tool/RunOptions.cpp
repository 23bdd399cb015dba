//===- RunOptions.cpp - Parsing the options of `loom run` ----------------===//
//
// CLI11 (header-only) parses `loom run` and `loom-run` alike. The texts are
// the options' documentation: `loom run --help` prints them.
//
//===----------------------------------------------------------------------===//

#include "runtime/tool/RunOptions.h"

#include <CLI/CLI.hpp>

#include "runtime/comm/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace loom::rt {

std::optional<RunOptions> parseRunOptions(int argc, const char *const *argv,
                                          int &exitCode) {
  RunOptions o;
  std::string command = argc > 0 ? argv[0] : "loom run";
  CLI::App app("Run a compiled plan: on one device, or a partitioned plan on "
               "N ranks (threads of this process, one process per rank under "
               "mpirun, or GPUs over NCCL)",
               command);
  app.get_formatter()->column_width(28);
  app.add_option("plan", o.planPath, "The plan (loom compile -o MODEL.plan)")
      ->required()
      ->type_name("MODEL.plan");
  std::vector<std::string> data;
  app.add_option("--inputs", o.inputs,
                 "Input files (.npy or ONNX TensorProto .pb); random by "
                 "default")
      ->type_name("NAME=FILE,...");
  app.add_option("--data", data, "Alias for --inputs (training data)")
      ->type_name("NAME=FILE,...");
  app.add_option("--outputs", o.outputsDir, "Write each output as DIR/NAME.npy")
      ->type_name("DIR");
  app.add_option("--trace", o.traceFile,
                 "Write a Chrome trace (one track per rank)")
      ->type_name("FILE.json");
  app.add_option("--backend", o.backend, "cpu (default) or cuda")
      ->type_name("NAME");
  app.add_option("--threads", o.threads,
                 "Threads for the CPU kernels (default: all cores), shared "
                 "evenly by the ranks of a --comm threads run; per process "
                 "under mpirun")
      ->type_name("N");
  app.add_option("--seed", o.seed, "Seed of the random inputs")->type_name("N");
  app.add_option("--steps", o.steps,
                 "Training steps to run (training plans), reusing the same "
                 "batch")
      ->type_name("N");
  app.add_option("--metrics", o.metricsFile,
                 "Write one JSON object per training step")
      ->type_name("FILE.jsonl");
  app.add_option("--comm-report", o.commReportFile,
                 "Write one JSON object per collective instruction: calls, "
                 "bytes rank 0 received per call (counted by the "
                 "communicator), the bytes the compiler's layout math "
                 "predicted, and its time")
      ->type_name("FILE.jsonl");
  app.add_option("--save", o.saveDir,
                 "Write a checkpoint after the last step, atomically, as "
                 "DIR/step-N (DIR/latest names the newest)")
      ->type_name("DIR");
  app.add_option("--save-every", o.saveEvery,
                 "With --save, also write one after every step whose number "
                 "N divides")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  app.add_option("--keep-last", o.keepLast,
                 "With --save, keep only the newest K checkpoints in DIR "
                 "(default: all)")
      ->type_name("K")
      ->check(CLI::PositiveNumber);
  app.add_option("--resume", o.resumeDir,
                 "Start from a checkpoint: a --save DIR (its latest) or one "
                 "of its step directories; every file is checked against "
                 "the manifest's CRC-32")
      ->type_name("DIR");
  app.add_option("--tokens", o.tokensFile,
                 "Character-level language-model data: each byte of FILE is "
                 "a token; step k reads the next batch of consecutive windows "
                 "as the model's integer input, shifted by one as the labels")
      ->type_name("FILE");
  app.add_option("--repeat", o.repeat,
                 "Run the step N times and report the mean time")
      ->type_name("N");
  o.collectiveTimeout = kDefaultCollectiveTimeout;
  if (const char *env = std::getenv("LOOM_COLLECTIVE_TIMEOUT"); env && *env)
    o.collectiveTimeout = std::atof(env);
  app.add_option("--collective-timeout", o.collectiveTimeout,
                 "Seconds a rank waits for the others in a collective or a "
                 "message before it reports the ranks that did not arrive "
                 "and the run ends with exit code 3 (threads and mpi; default "
                 "1800, or LOOM_COLLECTIVE_TIMEOUT)")
      ->type_name("SECONDS");
  app.add_option("--ranks", o.ranks,
                 "Ranks to run the plan on (default: the plan's device "
                 "count); with --comm threads each rank is a thread of this "
                 "process")
      ->type_name("N");
  app.add_option("--comm", o.comm,
                 "How ranks communicate: threads (ranks are threads of this "
                 "process), mpi (one process per rank, under mpirun) or nccl "
                 "(GPU memory, one GPU per rank; --backend cuda; threads of "
                 "this process, or one process per GPU under mpirun). "
                 "Default: mpi under mpirun, else threads")
      ->type_name("threads|mpi|nccl");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    exitCode = 0;
    return std::nullopt;
  } catch (const CLI::ParseError &e) {
    std::cerr << "loom: error: " << e.what() << "; run `" << command
              << " --help`\n";
    exitCode = 1;
    return std::nullopt;
  }
  if (!(o.collectiveTimeout > 0)) {
    std::cerr << "loom: error: --collective-timeout must be a positive "
                 "number of seconds\n";
    exitCode = 1;
    return std::nullopt;
  }
  if (const char *fault = std::getenv("LOOM_FAULT"); fault && *fault) {
    long long rank = -1, step = -1;
    char end = 0;
    std::string text = fault;
    const std::string hang = ",hang";
    o.faultHangs =
        text.size() > hang.size() &&
        text.compare(text.size() - hang.size(), hang.size(), hang) == 0;
    if (o.faultHangs)
      text.resize(text.size() - hang.size());
    if (std::sscanf(text.c_str(), "rank:%lld,step:%lld%c", &rank, &step,
                    &end) != 2 ||
        rank < 0 || step < 1) {
      std::cerr << "loom: error: LOOM_FAULT must be rank:R,step:S or "
                   "rank:R,step:S,hang (R >= 0, S >= 1), got '"
                << fault << "'\n";
      exitCode = 1;
      return std::nullopt;
    }
    o.faultRank = rank;
    o.faultStep = step;
  }
  if ((o.saveEvery || o.keepLast) && o.saveDir.empty()) {
    std::cerr << "loom: error: --save-every and --keep-last need --save DIR\n";
    exitCode = 1;
    return std::nullopt;
  }
  o.inputs.insert(o.inputs.end(), data.begin(), data.end());
  o.threadsGiven = app.count("--threads") > 0;
  return o;
}

int runMain(int argc, const char *const *argv) {
  int exitCode = 0;
  std::optional<RunOptions> options = parseRunOptions(argc, argv, exitCode);
  return options ? runPlan(*options) : exitCode;
}

} // namespace loom::rt
