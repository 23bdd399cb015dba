//===- RunCommand.cpp - `loom run`: execute a plan ------------------------===//

#include "compiler/driver/Commands.h"

#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorFile.h"
#include "runtime/io/Trace.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
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
  for (const std::string &flag : inputFlags) {
    auto [name, file] = StringRef(flag).split('=');
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
