//===- RunCommand.cpp - `loom run`: execute a plan ------------------------===//

#include "compiler/driver/Commands.h"

#include "runtime/Backend.h"
#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorFile.h"
#include "runtime/io/Trace.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>

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
                              "cores)"),
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
/// length at consecutive offsets, the labels shifted by one token.
class TokenFeeder {
public:
  bool open(const std::string &path, const rt::Executor &exec,
            std::string &error) {
    auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false);
    if (!buffer) {
      error = path + ": cannot read the token file";
      return false;
    }
    bytes = (*buffer)->getBuffer().str();
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
    if (static_cast<int64_t>(bytes.size()) < window + 2) {
      error = path + ": too short for windows of " + std::to_string(window) +
              " tokens";
      return false;
    }
    return true;
  }

  /// Sets the inputs of training step `step` (0-based).
  bool feed(rt::Executor &exec, int64_t step, std::string &error) {
    int64_t batch = input.shape[0], window = input.shape[1];
    int64_t positions = static_cast<int64_t>(bytes.size()) - window - 1;
    std::vector<int64_t> x(batch * window), y(batch * window);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t start = ((step * batch + b) * window) % positions;
      for (int64_t t = 0; t < window; ++t) {
        x[b * window + t] = static_cast<unsigned char>(bytes[start + t]);
        y[b * window + t] = static_cast<unsigned char>(bytes[start + t + 1]);
      }
    }
    rt::TensorView xv{rt::DType::I64, input.shape, x.data()};
    rt::TensorView yv{rt::DType::I64, labels.shape, y.data()};
    return exec.setInput(input.name, xv, error) &&
           exec.setInput(labels.name, yv, error);
  }

private:
  std::string bytes;
  rt::IOInfo input, labels;
};

int trainPlan(rt::Executor &exec, rt::TraceWriter &trace) {
  std::string error;
  if (steps < 1)
    return reportError("--steps must be at least 1");
  if (!resumeDir.empty() && !rt::loadCheckpoint(exec, resumeDir, error))
    return reportError(error);
  std::optional<TokenFeeder> tokens;
  if (!tokensFile.empty()) {
    tokens.emplace();
    if (!tokens->open(tokensFile, exec, error))
      return reportError(error);
  }
  std::unique_ptr<raw_fd_ostream> metrics;
  if (!metricsFile.empty()) {
    std::error_code ec;
    metrics = std::make_unique<raw_fd_ostream>(metricsFile, ec);
    if (ec)
      return reportError("cannot write '" + metricsFile + "': " + ec.message());
  }
  for (int i = 0; i < steps; ++i) {
    double loss = 0, lr = 0;
    if (tokens && !tokens->feed(exec, exec.stepsTaken(), error))
      return reportError(error);
    auto start = std::chrono::steady_clock::now();
    if (!exec.trainStep(error, traceFile.empty() ? nullptr : &trace, loss, lr))
      return reportError(planPath + ": step " +
                         std::to_string(exec.stepsTaken() + 1) + ": " + error);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    outs() << "loom: step " << exec.stepsTaken() << " loss "
           << format("%.6g", loss) << " lr " << format("%.6g", lr) << " ("
           << format("%.1f", ms) << " ms)\n";
    outs().flush();
    if (metrics)
      *metrics << "{\"step\": " << exec.stepsTaken()
               << ", \"loss\": " << format("%.9g", loss)
               << ", \"lr\": " << format("%.9g", lr)
               << ", \"step_time_ms\": " << format("%.3f", ms) << "}\n";
    if (!std::isfinite(loss))
      return reportError("the loss is not finite at step " +
                         std::to_string(exec.stepsTaken()) +
                         "; lower --lr or check the data");
  }
  if (!traceFile.empty() && !trace.write(traceFile, error))
    return reportError(error);
  if (!saveDir.empty()) {
    if (!rt::saveCheckpoint(exec, saveDir, error))
      return reportError(error);
    outs() << "loom: saved a checkpoint of step " << exec.stepsTaken() << " to "
           << saveDir << "\n";
  }
  return 0;
}

int runPlan() {
  if (backendName != "cpu")
    return reportError("backend '" + backendName +
                       "' is not built yet; this Loom runs plans on 'cpu'");
  if (repeat < 1)
    return reportError("--repeat must be at least 1");
  std::string error;
  std::optional<plan::Plan> plan = rt::readPlanFile(planPath, error);
  if (!plan)
    return reportError(error);
  std::unique_ptr<rt::Backend> backend = rt::createCpuBackend();
  if (threads > 0)
    backend->setNumThreads(threads);
  std::unique_ptr<rt::Executor> exec =
      rt::Executor::create(std::move(*plan), *backend, error);
  if (!exec)
    return reportError(planPath + ": " + error);

  exec->setRandomInputs(seed);
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
    if (!exec->setInput(name.str(), value->view(), error))
      return reportError(file + ": " + error);
  }

  rt::TraceWriter trace;
  trace.setRankName(0, "rank 0");
  if (exec->isTraining())
    return trainPlan(*exec, trace);
  if (!resumeDir.empty() || !saveDir.empty() || steps != 1)
    return reportError("--steps, --save and --resume need a training plan "
                       "(loom compile --train)");
  double totalMs = 0;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (!exec->run(error, traceFile.empty() ? nullptr : &trace))
      return reportError(planPath + ": " + error);
    totalMs += std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - start)
                   .count();
  }
  if (!traceFile.empty() && !trace.write(traceFile, error))
    return reportError(error);

  if (!outputsDir.empty())
    if (std::error_code ec = sys::fs::create_directories(outputsDir))
      return reportError("cannot create '" + outputsDir + "': " + ec.message());
  for (const rt::IOInfo &out : exec->outputs()) {
    rt::TensorView v = exec->output(out.name);
    outs() << "loom: output '" << out.name << "' " << rt::dtypeName(v.dtype)
           << rt::formatShape(v.shape) << summarize(v) << "\n";
    if (!outputsDir.empty()) {
      SmallString<256> path(outputsDir);
      sys::path::append(path, fileNameFor(out.name) + ".npy");
      if (!rt::writeNpy(path.str().str(), v, error))
        return reportError(error);
    }
  }
  outs() << "loom: " << repeat << (repeat == 1 ? " step" : " steps") << " in "
         << format("%.3f", totalMs / repeat) << " ms each on "
         << backend->name() << "\n";
  return 0;
}

} // namespace

std::optional<int> runRunCommand() {
  if (runCmd)
    return runPlan();
  return std::nullopt;
}

} // namespace loom::driver
