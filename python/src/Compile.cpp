//===- Compile.cpp - loom._loom.compile and loom._loom.explain ------------===//
//
// The compiler as one call: a dict of options (the Python package's names
// for `loom compile`'s flags) in, the serialized plan and the parallel
// configuration it was compiled with out. The options are checked the way
// the command line checks its flags (the same parse functions and
// verifyOptions), and a key this function does not know is an error, so
// that a misspelt option never passes silently.
//
//===----------------------------------------------------------------------===//

#include "python/src/Bindings.h"

#include "common/plan/PlanChecksum.h"
#include "compiler/explain/Explain.h"
#include "compiler/pipeline/Compiler.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"

#include "llvm/Support/raw_ostream.h"

#include <pybind11/stl.h>

#include <set>

namespace py = pybind11;

namespace loom::python {
namespace {

using pipeline::CompileOptions;

/// A parser's value, or a ValueError with its message.
template <typename T>
T parsedOrThrow(std::optional<T> value, const std::string &error) {
  if (!value)
    throw py::value_error(error);
  return *std::move(value);
}

/// Reads the options dict, remembering which keys it took.
class OptionReader {
public:
  explicit OptionReader(const py::dict &dict) : dict(dict) {}

  template <typename T> std::optional<T> get(const char *key) {
    taken.insert(key);
    if (!dict.contains(key) || dict[key].is_none())
      return std::nullopt;
    try {
      return dict[key].cast<T>();
    } catch (const py::cast_error &) {
      throw py::value_error(
          std::string("option '") + key + "' has the wrong type (" +
          std::string(py::str(py::type::of(dict[key]))) + ")");
    }
  }
  template <typename T> void set(const char *key, T &target) {
    if (std::optional<T> v = get<T>(key))
      target = *v;
  }
  /// An enum from its spelling through one of CompileOptions' parsers.
  template <typename E, typename Parse>
  void parse(const char *key, E &target, Parse parse) {
    std::optional<std::string> text = get<std::string>(key);
    if (!text)
      return;
    std::string error;
    target = parsedOrThrow(parse(*text, error), error);
  }
  /// Every key of the dict was taken.
  void checkAllTaken() const {
    for (auto item : dict) {
      std::string key = py::str(item.first);
      if (!taken.count(key))
        throw py::value_error("unknown compile option '" + key + "'");
    }
  }

private:
  const py::dict &dict;
  std::set<std::string> taken;
};

CompileOptions readOptions(const py::dict &dict) {
  OptionReader r(dict);
  CompileOptions o;
  std::optional<std::string> model = r.get<std::string>("model");
  if (!model)
    throw py::value_error("compile needs 'model', the ONNX file");
  o.model.path = *model;
  if (auto batch = r.get<int64_t>("batch"))
    o.model.batch = *batch;
  r.set("dims", o.model.dims);
  r.set("input_shapes", o.model.inputShapes);
  r.set("freeze", o.model.freeze);
  r.set("sync_batchnorm", o.model.syncBatchNorm);

  pipeline::TrainingOptions &t = o.training;
  r.set("train", t.enabled);
  r.parse("loss", t.loss, pipeline::parseLoss);
  r.parse("optimizer", t.optimizer, pipeline::parseOptimizer);
  r.set("lr", t.lr);
  r.set("momentum", t.momentum);
  r.set("nesterov", t.nesterov);
  r.set("beta1", t.beta1);
  r.set("beta2", t.beta2);
  r.set("eps", t.epsilon);
  r.set("weight_decay", t.weightDecay);
  r.set("ignore_index", t.ignoreIndex);
  if (auto scale = r.get<double>("loss_scale"))
    t.lossScale = *scale;
  r.parse("lr_schedule", t.lrSchedule, pipeline::parseLrSchedule);
  r.set("warmup_steps", t.warmupSteps);
  r.set("total_steps", t.totalSteps);
  r.set("min_lr", t.minLr);

  r.parse("precision", o.precision, pipeline::parsePrecision);
  pipeline::ParallelConfig &p = o.parallel;
  r.set("mesh", p.mesh);
  r.set("stage_meshes", p.stageMeshes);
  if (auto m = r.get<int64_t>("micro_batches")) {
    p.microBatches = *m;
    o.microBatchesGiven = true;
  }
  if (dict.contains("schedule") && !dict["schedule"].is_none())
    o.scheduleGiven = true;
  r.parse("schedule", p.schedule, pipeline::parseSchedule);
  if (auto v = r.get<int64_t>("virtual_stages")) {
    p.virtualStages = *v;
    p.virtualStagesGiven = true;
  }
  if (auto zero = r.get<int64_t>("zero")) {
    std::string error;
    p.zero =
        parsedOrThrow(pipeline::parseZero(std::to_string(*zero), error), error);
  }
  if (auto recompute = r.get<std::string>("recompute"))
    p.recompute = *recompute;
  if (std::optional<std::string> mode = r.get<std::string>("mode")) {
    std::string error;
    o.mode = parsedOrThrow(pipeline::parseShardingMode(*mode, error), error);
  }
  r.set("cluster", o.cluster);
  r.set("memory_limit", o.memoryLimit);
  r.set("stages_auto", o.searchStages);
  r.set("strategy_file", o.strategyFile);
  r.set("save_strategy_file", o.saveStrategyFile);
  r.set("emit_mlir", o.emitMlir);
  r.set("fuse", o.fuse);
  if (auto mb = r.get<double>("bucket_mb")) {
    std::string error;
    o.bucketBytes = parsedOrThrow(pipeline::parseBucketMb(*mb, error), error);
  }
  r.parse("init", o.init, pipeline::parseInit);
  r.set("seed", o.seed);
  r.set("simulate", o.simulate);
  r.checkAllTaken();
  if (std::optional<std::string> error = pipeline::verifyOptions(o))
    throw py::value_error(*error);
  return o;
}

/// The compiler's log, a line at a time, to a Python callable (or kept).
/// The callable runs with the GIL held; an exception it raises stops the
/// calls and is raised again once the compile is over.
class LineSink : public llvm::raw_ostream {
public:
  explicit LineSink(py::object callback) : callback(std::move(callback)) {
    SetUnbuffered();
  }
  std::string text;
  std::optional<py::error_already_set> raised;

private:
  void write_impl(const char *p, size_t n) override {
    position += n;
    for (size_t i = 0; i < n; ++i) {
      if (p[i] != '\n') {
        line.push_back(p[i]);
        continue;
      }
      text += line + "\n";
      if (!callback.is_none() && !raised) {
        py::gil_scoped_acquire gil;
        try {
          callback(line);
        } catch (py::error_already_set &e) {
          raised.emplace(std::move(e));
        }
      }
      line.clear();
    }
  }
  uint64_t current_pos() const override { return position; }

  py::object callback;
  std::string line;
  uint64_t position = 0;
};

py::tuple compile(const py::dict &dict, py::object progress) {
  CompileOptions options = readOptions(dict);
  std::optional<pipeline::CompileResult> result;
  std::string error;
  LineSink log(std::move(progress));
  {
    py::gil_scoped_release release;
    result = pipeline::compile(options, log, error);
  }
  if (log.raised)
    throw std::move(*log.raised);
  if (!result)
    throw CompileFailure(error);
  std::optional<std::string> sealed = plan::sealPlan(result->plan);
  if (!sealed)
    throw CompileFailure(options.model.path +
                         ": the plan is too large to serialize");
  std::string &bytes = *sealed;
  const pipeline::ParallelConfig &p = result->parallel;
  py::dict parallel;
  parallel["mesh"] = p.mesh;
  parallel["stage_meshes"] = p.stageMeshes;
  parallel["micro_batches"] = p.microBatches;
  parallel["schedule"] = pipeline::toString(p.schedule).str();
  // The plan's own ZeRO level and recompute, as explained: those the
  // search chose under --mode auto, not only those given.
  const plan::Explanation &explained = result->plan.explanation();
  parallel["zero"] = py::int_(explained.zero_level());
  parallel["recompute"] =
      !explained.recompute().empty() ? py::object(py::str(explained.recompute()))
      : p.recompute                  ? py::object(py::str(*p.recompute))
                                     : py::none();
  parallel["peak_bytes"] = pipeline::peakBytes(result->plan);
  parallel["step_seconds"] = result->plan.explanation().step_seconds();
  return py::make_tuple(py::bytes(bytes), parallel, log.text);
}

std::string explain(const py::bytes &bytes, const std::string &title, int top) {
  std::string error;
  std::optional<plan::Plan> parsed =
      rt::parsePlan(std::string(bytes), "explain", error);
  std::unique_ptr<rt::Backend> cpu = rt::createCpuBackend();
  if (parsed)
    if (std::string bad = rt::validatePlan(*parsed, *cpu); !bad.empty())
      error = "explain: invalid plan: " + bad;
  if (!parsed || !error.empty())
    throw py::value_error(error);
  plan::Plan &plan = *parsed;
  if (top < 0)
    throw py::value_error("explain: top must be at least 0");
  explain::PrintOptions options;
  options.top = top;
  std::string text;
  llvm::raw_string_ostream os(text);
  explain::printExplanation(plan, title, options, os);
  return text;
}

} // namespace

void bindCompile(py::module_ &m) {
  m.def("compile", &compile, py::arg("options"),
        py::arg("progress") = py::none(),
        "Compiles options['model'] into a plan: returns (plan bytes, the "
        "parallel configuration as a dict, the compiler's log). Raises "
        "CompileError with the compiler's message, ValueError for bad "
        "options.");
  m.def("explain", &explain, py::arg("plan"), py::arg("title") = "plan",
        py::arg("top") = 0,
        "The plan's explanation, as `loom explain` prints it.");
}

} // namespace loom::python
