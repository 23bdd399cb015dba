//===- FrontEndCommands.cpp - `loom import`, `compile` and `simulate` -----===//
//
// All read an ONNX model with the same binding flags; import prints the
// loom dialect, compile lowers it to a plan for the runtime, and simulate
// compiles it without its weights and prints what the plan is predicted to
// cost (the explanation `loom explain` prints for a compiled plan).
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "compiler/plan/Explain.h"
#include "compiler/plan/PlanEmitter.h"
#include "dialects/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "passes/AutoSharding.h"
#include "passes/OptimizerSharding.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "passes/Recompute.h"
#include "passes/StrategyFile.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <functional>
#include <map>

using namespace llvm;
using namespace mlir;

namespace loom::driver {
namespace {

cl::SubCommand importCmd("import",
                         "Import an ONNX model into the loom dialect (MLIR)");
cl::SubCommand compileCmd("compile",
                          "Compile an ONNX model into a plan for `loom run`");
cl::SubCommand simulateCmd(
    "simulate", "Predict a model's step time and memory on a cluster, "
                "without its weights (e.g. --cluster 8xH100-80GB --mesh "
                "dp=16,tp=8 --mode auto)");

// Shared by import and compile.
cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                               cl::desc("<MODEL.onnx>"), cl::sub(importCmd),
                               cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(loomCategory()));
cl::opt<int64_t> batchFlag(
    "batch",
    cl::desc("Bind dimension 0 of every input whose batch is symbolic"),
    cl::value_desc("N"), cl::init(0), cl::sub(importCmd), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(loomCategory()));
cl::list<std::string> dimFlags("dim",
                               cl::desc("Bind a named symbolic dimension"),
                               cl::value_desc("NAME=N"), cl::sub(importCmd),
                               cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(loomCategory()));
cl::list<std::string>
    shapeFlags("input-shape",
               cl::desc("Give an input's full shape, e.g. x=8x32"),
               cl::value_desc("NAME=D0xD1x..."), cl::sub(importCmd),
               cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(loomCategory()));

// import only.
cl::opt<std::string> importOutput("o",
                                  cl::desc("Output file (default: stdout)"),
                                  cl::value_desc("OUT.mlir"), cl::init("-"),
                                  cl::sub(importCmd), cl::cat(loomCategory()));
cl::opt<bool> noWeights("no-weights",
                        cl::desc("Leave out initial parameter values (shapes "
                                 "only)"),
                        cl::sub(importCmd), cl::cat(loomCategory()));
cl::opt<bool>
    printLocations("locations",
                   cl::desc("Print each op's location: the ONNX node it came "
                            "from"),
                   cl::sub(importCmd), cl::cat(loomCategory()));
cl::opt<bool> fuse(
    "fuse",
    cl::desc("Run the import clean-up passes (fuse decomposed layer norms)"),
    cl::sub(importCmd), cl::cat(loomCategory()));

// compile only.
cl::opt<std::string> planOutput("o",
                                cl::desc("The plan file to write (optional "
                                         "for simulate)"),
                                cl::value_desc("MODEL.plan"),
                                cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(loomCategory()));
cl::OptionCategory &trainCategory() {
  static cl::OptionCategory category("Training (loom compile --train)");
  return category;
}
cl::opt<bool> train("train",
                    cl::desc("Compile a training step: loss, backward and "
                             "optimizer update"),
                    cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<std::string> lossFlag("loss", cl::desc("cross_entropy or mse"),
                              cl::init("cross_entropy"), cl::sub(compileCmd), cl::sub(simulateCmd),
                              cl::cat(trainCategory()));
cl::opt<std::string> optimizerFlag("optimizer",
                                   cl::desc("sgd, momentum, adam or adamw"),
                                   cl::init("adamw"), cl::sub(compileCmd), cl::sub(simulateCmd),
                                   cl::cat(trainCategory()));
cl::opt<double> lrFlag("lr", cl::desc("Learning rate"), cl::init(1e-3),
                       cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<double> momentumFlag("momentum", cl::desc("Momentum (momentum)"),
                             cl::init(0.9), cl::sub(compileCmd), cl::sub(simulateCmd),
                             cl::cat(trainCategory()));
cl::opt<bool> nesterovFlag("nesterov", cl::desc("Nesterov momentum"),
                           cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<double> beta1Flag("beta1", cl::desc("Adam beta1"), cl::init(0.9),
                          cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<double> beta2Flag("beta2", cl::desc("Adam beta2"), cl::init(0.999),
                          cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<double> epsFlag("eps", cl::desc("Adam epsilon"), cl::init(1e-8),
                        cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<double> weightDecayFlag("weight-decay",
                                cl::desc("Weight decay (decoupled for adamw)"),
                                cl::init(0.0), cl::sub(compileCmd), cl::sub(simulateCmd),
                                cl::cat(trainCategory()));
cl::opt<int64_t> ignoreIndexFlag("ignore-index",
                                 cl::desc("Labels cross_entropy ignores"),
                                 cl::init(-100), cl::sub(compileCmd), cl::sub(simulateCmd),
                                 cl::cat(trainCategory()));
cl::opt<std::string> initFlag(
    "init",
    cl::desc("Initial parameter values: onnx (the model's initializers) or "
             "seeded (uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for tensors of "
             "rank >= 2, zeros for biases, ones for other vectors; computed "
             "by the runtime from --seed)"),
    cl::init("onnx"), cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<uint64_t> seedFlag("seed", cl::desc("Seed of --init seeded"),
                           cl::init(0), cl::sub(compileCmd), cl::sub(simulateCmd),
                           cl::cat(trainCategory()));
cl::opt<int64_t> microBatchesFlag(
    "micro-batches",
    cl::desc("Split each step's batch into M micro-batches run one after "
             "another, accumulating gradients (--batch must divide by M)"),
    cl::init(1), cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(trainCategory()));
cl::opt<std::string> precisionFlag(
    "precision",
    cl::desc("Compute precision: f32, or bf16 / f16 over f32 master weights "
             "(the forward and backward in bf16 or f16; the loss, gradients "
             "of the parameters, optimizer state and updates in f32)"),
    cl::init("f32"), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(trainCategory()));
cl::opt<double> lossScaleFlag(
    "loss-scale",
    cl::desc("Static loss scale S (f16 training): the backward runs on S "
             "times the loss and each gradient is divided by S before its "
             "update"),
    cl::init(1.0), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(trainCategory()));
cl::opt<std::string> scheduleFlag("lr-schedule",
                                  cl::desc("constant, or cosine (linear "
                                           "warm-up, then cosine decay)"),
                                  cl::init("constant"), cl::sub(compileCmd), cl::sub(simulateCmd),
                                  cl::cat(trainCategory()));
cl::opt<int64_t> warmupFlag("warmup-steps", cl::desc("Warm-up steps (cosine)"),
                            cl::init(0), cl::sub(compileCmd), cl::sub(simulateCmd),
                            cl::cat(trainCategory()));
cl::opt<int64_t> totalStepsFlag("total-steps",
                                cl::desc("Steps of the cosine schedule"),
                                cl::init(1000), cl::sub(compileCmd), cl::sub(simulateCmd),
                                cl::cat(trainCategory()));
cl::opt<double> minLrFlag("min-lr", cl::desc("Final learning rate (cosine)"),
                          cl::init(0.0), cl::sub(compileCmd), cl::sub(simulateCmd),
                          cl::cat(trainCategory()));

cl::OptionCategory &parallelCategory() {
  static cl::OptionCategory category("Parallelism (loom compile --mesh)");
  return category;
}
cl::opt<std::string> meshFlag(
    "mesh",
    cl::desc("The device mesh as named axes, outermost first, e.g. "
             "dp=2,tp=4 (ranks are row-major: put tensor parallelism last); "
             "an axis pp=P, first, splits the model into P pipeline stages, "
             "each on the rest of the mesh"),
    cl::value_desc("AXIS=N,..."), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<std::string> stageMeshesFlag(
    "stage-meshes",
    cl::desc("Pipeline stages on submeshes of their own, one per stage in "
             "order, separated by '/', e.g. dp=4/tp=2/dp=2 (4, 2 and 2 "
             "devices); each stage's program is compiled on its own submesh. "
             "Replaces --mesh"),
    cl::value_desc("MESH/MESH/..."), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<std::string> modeFlag(
    "mode",
    cl::desc("data (split the batch over every device, replicate "
             "parameters), semi (the --strategy file and loom.strategy "
             "attributes, completed by propagation) or auto (a cost-model "
             "search on --cluster). Default: semi with --strategy, else "
             "data"),
    cl::value_desc("data|semi|auto"), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<std::string> clusterFlag(
    "cluster",
    cl::desc("--mode auto: the hardware profile (a built-in name such as "
             "8xH100-80GB or 8xA100-80GB, or a JSON file from loom "
             "calibrate)"),
    cl::value_desc("PROFILE"), cl::init("8xH100-80GB"), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<int64_t> memoryLimitFlag(
    "memory-limit",
    cl::desc("--mode auto: bytes of memory per device (default: the "
             "profile's)"),
    cl::value_desc("BYTES"), cl::init(0), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<std::string> pipelineScheduleFlag(
    "schedule",
    cl::desc("The pipeline schedule of the micro-batches (with pp=P in "
             "--mesh): gpipe (every forward, then every backward), 1f1b "
             "(one forward, one backward in turn after a warm-up) or "
             "interleaved (1F1B over --virtual-stages chunks of layers per "
             "stage; the micro-batches a multiple of P)"),
    cl::value_desc("gpipe|1f1b|interleaved"), cl::init("1f1b"),
    cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(parallelCategory()));
cl::opt<int64_t> virtualStagesFlag(
    "virtual-stages",
    cl::desc("--schedule interleaved: chunks of layers per pipeline stage "
             "(chunk c runs on stage c mod P; default 2)"),
    cl::value_desc("V"), cl::init(2), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<std::string> stagesFlag(
    "stages",
    cl::desc("--mode auto: `auto` searches the pipeline too: the number of "
             "stages P (dividing the first --mesh axis, which keeps 1/P of "
             "its size per stage), the micro-batch count (unless "
             "--micro-batches is given), the schedule (1f1b or interleaved "
             "with 2 virtual stages, unless --schedule is given) and the "
             "layers of each stage, for the least predicted step within the "
             "memory limit"),
    cl::value_desc("auto"), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<std::string> zeroFlag(
    "zero",
    cl::desc("Optimizer sharding over the data-parallel axes (ZeRO): 0 "
             "(none), 1 (optimizer state), 2 (+ gradients), 3 (+ "
             "parameters). Default: 0, or under --mode auto the level the "
             "search finds fastest within the memory limit"),
    cl::value_desc("0|1|2|3"), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));
cl::opt<std::string> recomputeFlag(
    "recompute",
    cl::desc("Recompute forward ops in the backward pass instead of keeping "
             "their results: `layers` (every op of each layer but the last, "
             "whose output is kept) or comma-separated ONNX node name "
             "patterns (e.g. '/blocks.*/attn/*'). Default: none, or under "
             "--mode auto `layers` when no plan fits without it"),
    cl::value_desc("layers|PATTERNS"), cl::sub(compileCmd),
    cl::sub(simulateCmd), cl::cat(parallelCategory()));
cl::opt<int> topFlag(
    "top",
    cl::desc("simulate: list only the N nodes with the largest predicted "
             "time (0: every node)"),
    cl::value_desc("N"), cl::init(0), cl::sub(simulateCmd),
    cl::cat(loomCategory()));
cl::opt<std::string> strategyFlag(
    "strategy", cl::desc("A JSON strategy file (see docs/partitioning.md)"),
    cl::value_desc("FILE"), cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(parallelCategory()));
cl::opt<std::string> saveStrategyFlag(
    "save-strategy",
    cl::desc("Write every op's final strategy to FILE, in the --strategy "
             "format"),
    cl::value_desc("FILE"), cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(parallelCategory()));
cl::opt<std::string> emitMlirFlag(
    "emit-mlir",
    cl::desc("Also write the compiled (per-device) program as MLIR"),
    cl::value_desc("FILE"), cl::sub(compileCmd), cl::sub(simulateCmd), cl::cat(parallelCategory()));

cl::opt<bool> fuseFlag(
    "fuse",
    cl::desc("Fold weight transposes and bias (+relu) epilogues into the "
             "GEMMs of the compiled program (loom-fuse-matmul-epilogue); "
             "--fuse=false keeps them separate kernels"),
    cl::init(true), cl::sub(compileCmd), cl::sub(simulateCmd),
    cl::cat(parallelCategory()));

/// Parses "NAME=VALUE" into its two halves.
bool splitAssignment(StringRef text, StringRef &name, StringRef &value) {
  std::tie(name, value) = text.split('=');
  return !name.empty() && !value.empty() && text.contains('=');
}

/// Reads the binding flags into import options; an error message if bad.
std::optional<std::string> readBindings(onnx_import::ImportOptions &options) {
  if (batchFlag.getNumOccurrences()) {
    if (batchFlag < 1)
      return std::string("--batch must be at least 1");
    options.batch = batchFlag;
  }
  for (const std::string &d : dimFlags) {
    StringRef name, value;
    int64_t n;
    if (!splitAssignment(d, name, value) || value.getAsInteger(10, n) || n < 1)
      return "--dim expects NAME=N with N at least 1, got '" + d + "'";
    options.dims[name] = n;
  }
  for (const std::string &s : shapeFlags) {
    StringRef name, value;
    if (!splitAssignment(s, name, value))
      return "--input-shape expects NAME=D0xD1x..., got '" + s + "'";
    SmallVector<StringRef> parts;
    value.split(parts, 'x');
    SmallVector<int64_t> shape;
    for (StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 1)
        return "--input-shape '" + s + "': '" + p.str() +
               "' is not a dimension size";
      shape.push_back(d);
    }
    options.inputShapes[name] = shape;
  }
  return std::nullopt;
}

/// Imports the model named on the command line; nullptr after reporting.
OwningOpRef<ModuleOp> importModel(MLIRContext &context, bool withWeights,
                                  int &exitCode, bool withBuffers = false) {
  onnx_import::ImportOptions options;
  if (auto bad = readBindings(options)) {
    exitCode = reportError(*bad);
    return nullptr;
  }
  options.withWeights = withWeights;
  options.withBuffers = withBuffers;
  onnx_import::ImportResult result =
      onnx_import::importOnnxFile(modelPath, options, context);
  if (result.status == onnx_import::ImportStatus::InternalError) {
    exitCode = reportError(result.message +
                           "\nThis is a bug in Loom; please report it with "
                           "the model.");
    return nullptr;
  }
  if (!result.ok()) {
    exitCode = reportError(result.message);
    return nullptr;
  }
  return std::move(result.module);
}

LogicalResult runCleanup(ModuleOp module) {
  PassManager pm(module->getContext());
  pm.addNestedPass<func::FuncOp>(createFuseLayerNorm());
  pm.addPass(createCSEPass());
  return pm.run(module);
}

int runImport() {
  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  int exitCode = 0;
  OwningOpRef<ModuleOp> module = importModel(context, !noWeights, exitCode);
  if (!module)
    return exitCode;
  if (fuse && failed(runCleanup(*module)))
    return reportError("the import clean-up passes failed");

  std::string errorMessage;
  auto output = mlir::openOutputFile(importOutput, &errorMessage);
  if (!output)
    return reportError(errorMessage);
  OpPrintingFlags flags;
  if (printLocations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(output->os(), flags);
  output->os() << "\n";
  output->keep();

  // A summary for people, when the IR went to a file.
  if (importOutput != "-") {
    std::map<std::string, int> histogram;
    module->walk([&](Operation *op) {
      if (isa<LoomDialect>(op->getDialect()))
        ++histogram[op->getName().stripDialect().str()];
    });
    auto func = *module->getOps<func::FuncOp>().begin();
    int params = 0;
    int64_t paramElements = 0;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, LoomDialect::kParamAttrName)) {
        ++params;
        paramElements += cast<RankedTensorType>(func.getArgument(i).getType())
                             .getNumElements();
      }
    outs() << "loom: imported " << modelPath << " into " << importOutput << ": "
           << params << " parameters (" << paramElements << " elements); ops:";
    for (auto &[name, count] : histogram)
      outs() << " " << name << "=" << count;
    outs() << "\n";
  }
  return 0;
}

/// Parses --mesh into the dialect's mesh attribute.
std::optional<MeshAttr> parseMesh(MLIRContext &context, std::string &error) {
  SmallVector<StringRef> parts;
  StringRef(meshFlag).split(parts, ',');
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  for (StringRef part : parts) {
    StringRef name, value;
    int64_t size = 0;
    if (!splitAssignment(part.trim(), name, value) || name.empty() ||
        value.getAsInteger(10, size) || size < 1) {
      error = "--mesh expects named axes like dp=2,tp=4, got '" + meshFlag +
              "'";
      return std::nullopt;
    }
    for (StringAttr n : names)
      if (n.getValue() == name) {
        error = "--mesh names axis '" + name.str() + "' twice";
        return std::nullopt;
      }
    names.push_back(StringAttr::get(&context, name));
    sizes.push_back(size);
  }
  return MeshAttr::get(&context, names, sizes);
}

/// The hardware profile of --cluster; nullopt after reporting.
std::optional<cost::HardwareProfile> loadCluster(int &exitCode) {
  std::string error;
  std::optional<cost::HardwareProfile> profile =
      cost::findProfile(clusterFlag, error);
  if (!profile)
    exitCode = reportError("--cluster: " + error);
  return profile;
}

/// Shows the search's progress on stderr once it has run for a second:
/// one updating line on a terminal, else a line every ten seconds.
class SearchProgress {
public:
  void operator()(StringRef phase, int64_t done, int64_t total) {
    double now = seconds();
    bool terminal = errs().is_displayed();
    if (now < 1.0 || now - last < (terminal ? 0.25 : 10.0))
      return;
    last = now;
    errs() << (terminal ? "\r" : "") << "loom: search: " << phase << " "
           << done;
    if (total > 0)
      errs() << "/" << total;
    errs() << format(" (%.1f s)", now) << (terminal ? "   " : "\n");
    shown = true;
  }
  ~SearchProgress() {
    if (shown && errs().is_displayed())
      errs() << "\n";
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  }

private:
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double last = 0;
  bool shown = false;
};

/// What --mode auto chose besides layouts, kept for the searches that
/// follow when a plan comes out over the memory limit.
struct AutoChoice {
  int zero = 0;
  std::string recompute;
};
std::optional<AutoChoice> earlierChoice;

/// One pipeline shape `--stages auto` weighs: partition() costs it (the
/// stage split included) and stops before pipelining and emitting.
struct StageCandidate {
  int64_t stages = 1, microBatches = 1;
  std::string mesh;
  /// --schedule and --virtual-stages.
  std::string schedule = "1f1b";
  int64_t virtualStages = 2;
  /// How the summary names its schedule ("" for the one given).
  std::string describe() const {
    return schedule == "interleaved"
               ? ", interleaved (" + std::to_string(virtualStages) +
                     " virtual stages)"
               : "";
  }
  /// Makes it the shape the next buildPlan compiles.
  void select() const;
  /// The predicted step, and the largest stage's memory as the split
  /// counts it (state + saved results in flight).
  double seconds = 0, memoryBytes = 0;
  bool fits = false;
  /// Why it could not be costed, if it could not.
  std::string why;
  /// The layers' costs on one stage's submesh, the limit and the sends
  /// (of these layers' bytes) the split used: for the split over
  /// submeshes of different sizes.
  std::vector<search::LayerCost> layers;
  int64_t stageDevices = 0;
  double memoryLimit = 0;
  std::function<double(double)> sendSeconds;
};
StageCandidate *evaluating = nullptr;
/// --stage-meshes: each compile's stage functions are made for submeshes
/// of their own, and layers go to the stages the first compile chose.
bool ownStageMeshes = false;
std::optional<llvm::StringMap<int64_t>> fixedLayerStages;
/// The layers' stages the last compile chose (empty where given per node).
llvm::StringMap<int64_t> chosenLayerStages;
/// The shapes `--stages auto` costed, best first: the next is compiled when
/// one's plan exceeds the memory limit.
std::vector<StageCandidate> rankedShapes;
/// The layers' stages --stage-meshes compiles with, when --stages auto
/// chose them with the submeshes (else the first compile chooses).
std::optional<llvm::StringMap<int64_t>> presetLayerStages;
/// partition()'s code for a candidate costed, not an error.
constexpr int kEvaluated = -1;
/// partition()'s code when a search under a lowered limit (after a plan
/// over the memory limit: earlierChoice is set) finds no plan; the caller
/// reports the plan it had.
constexpr int kNoPlanUnderLoweredLimit = -2;

void StageCandidate::select() const {
  meshFlag = mesh;
  microBatchesFlag = microBatches;
  pipelineScheduleFlag = schedule;
  virtualStagesFlag = virtualStages;
}

/// Sharding (from --mode and --strategy) and partitioning of @main, with
/// the explanation of the result.
int partition(ModuleOp module, const cost::HardwareProfile &cluster,
              int64_t searchLimit,
              std::optional<explain::ExplanationBuilder> &explanation) {
  MLIRContext &context = *module->getContext();
  std::string error;
  std::optional<MeshAttr> meshAttr = parseMesh(context, error);
  if (!meshAttr)
    return reportError(error);
  std::optional<layout::Mesh> mesh = sharding::toMesh(*meshAttr, error);
  if (!mesh)
    return reportError("--mesh: " + error);
  std::string mode = modeFlag.empty()
                         ? (strategyFlag.empty() ? "data" : "semi")
                         : modeFlag.getValue();
  if (mode != "data" && mode != "semi" && mode != "auto")
    return reportError("--mode must be data, semi or auto, got '" + mode +
                       "'");
  // The pipeline axis: stages run the step's parts on the rest of the mesh,
  // which is what the ops are sharded over.
  sharding::PipelineOptions pipeline;
  pipeline.microBatches = microBatchesFlag;
  pipeline.schedule = pipelineScheduleFlag;
  pipeline.ownMeshes = ownStageMeshes;
  if (fixedLayerStages)
    pipeline.layerStages = *fixedLayerStages;
  const layout::Mesh fullMesh = *mesh;
  if (std::optional<unsigned> pp = meshAttr->getAxisIndex("pp")) {
    if (*pp != 0)
      return reportError("--mesh: the pipeline axis pp must come first, got '" +
                         meshFlag + "'");
    if (!train)
      return reportError("--mesh pp=N pipelines a training step: it needs "
                         "--train");
    pipeline.stages = meshAttr->getAxisSizes()[0];
    SmallVector<StringAttr> names;
    SmallVector<int64_t> sizes;
    for (auto [name, size] : llvm::zip(meshAttr->getAxisNames().drop_front(),
                                       meshAttr->getAxisSizes().drop_front())) {
      names.push_back(name);
      sizes.push_back(size);
    }
    if (names.empty()) {
      // One device per stage: a one-device submesh.
      names.push_back(StringAttr::get(&context, "dp"));
      sizes.push_back(1);
    }
    meshAttr = MeshAttr::get(&context, names, sizes);
    mesh = sharding::toMesh(*meshAttr, error);
    if (!mesh)
      return reportError("--mesh: " + error);
  }
  if (pipelineScheduleFlag != "gpipe" && pipelineScheduleFlag != "1f1b" &&
      pipelineScheduleFlag != "interleaved")
    return reportError("--schedule must be gpipe, 1f1b or interleaved, got '" +
                       pipelineScheduleFlag + "'");
  if (pipelineScheduleFlag == "interleaved") {
    if (virtualStagesFlag < 1)
      return reportError("--virtual-stages must be at least 1, got " +
                         std::to_string(virtualStagesFlag));
    if (pipeline.microBatches % pipeline.stages != 0)
      return reportError(
          "--schedule interleaved runs the micro-batches in groups of the "
          "pipeline's stages: --micro-batches " +
          std::to_string(pipeline.microBatches) +
          " is not a multiple of pp=" + std::to_string(pipeline.stages));
    pipeline.virtualStages = virtualStagesFlag;
  } else if (virtualStagesFlag.getNumOccurrences()) {
    return reportError("--virtual-stages needs --schedule interleaved");
  }
  func::FuncOp func;
  for (auto f : module.getOps<func::FuncOp>())
    if (f.getSymName() == "main")
      func = f;
  if (!func)
    return reportError(modelPath + ": no function @main");
  func->setAttr(LoomDialect::kMeshAttrName, *meshAttr);
  bool grown = false;
  cost::HardwareProfile profile = sharding::profileForMesh(cluster, *mesh, grown);
  explanation.emplace(profile, *mesh, mode);
  // The pipeline's costs: ops of the per-device program on the stage's
  // submesh, and sends from a rank to the same rank of the next stage.
  sharding::GroupCache groups(*mesh);
  bool fullGrown = false;
  const cost::HardwareProfile fullProfile =
      sharding::profileForMesh(cluster, fullMesh, fullGrown);
  const int64_t stageSize = mesh->numDevices();
  pipeline.opSeconds = [&](Operation *op) {
    return sharding::opSeconds(op, groups, profile);
  };
  pipeline.sendSeconds = [&fullProfile, stageSize](double bytes) {
    return cost::collectiveSeconds(fullProfile, cost::CollectiveKind::SendRecv,
                                   bytes, {0, stageSize});
  };

  if (!strategyFlag.empty()) {
    auto buffer = llvm::MemoryBuffer::getFile(strategyFlag);
    if (!buffer)
      return reportError(strategyFlag + ": " + buffer.getError().message());
    std::optional<sharding::StrategyFile> file = sharding::parseStrategyFile(
        (*buffer)->getBuffer(), strategyFlag, error);
    if (!file)
      return reportError(error);
    if (!sharding::applyStrategies(func, *file, strategyFlag, *mesh, error))
      return reportError(error);
  }
  explanation->noteFixed(func);
  llvm::SmallPtrSet<Operation *, 16> userFixed;
  for (Operation &op : func.getBody().front())
    if (op.hasAttr(LoomDialect::kShardingAttrName) ||
        op.hasAttr(LoomDialect::kStrategyAttrName))
      userFixed.insert(&op);

  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    std::string where;
    if (auto name = dyn_cast<NameLoc>(d.getLocation()))
      where = "ONNX node '" + name.getName().str() + "': ";
    diagnostics += where + d.str() + "\n";
    return success();
  });
  int zero = 0;
  if (!zeroFlag.empty()) {
    if (zeroFlag.size() != 1 || zeroFlag[0] < '0' || zeroFlag[0] > '3')
      return reportError("--zero must be 0, 1, 2 or 3, got '" + zeroFlag + "'");
    zero = zeroFlag[0] - '0';
    if (zero > 0 && !train)
      return reportError("--zero " + zeroFlag +
                         " shards optimizer state: it needs --train");
  }
  std::optional<sharding::SearchReport> report;
  std::optional<SearchProgress> progress;
  if (mode == "auto")
    progress.emplace();
  auto searchOptions = [&] {
    sharding::SearchOptions search;
    search.profile = profile;
    search.memoryLimit = searchLimit;
    search.progress = std::ref(*progress);
    if (pipeline.stages > 1) {
      // One micro-batch's program is searched; a stage holds about 1/P of
      // the state and stage 0 the most micro-batches in flight.
      double p = static_cast<double>(pipeline.stages);
      search.stateShare = 1.0 / p;
      search.savedShare =
          search::inFlight(pipeline.schedule, pipeline.stages,
                           pipeline.microBatches, 0, pipeline.virtualStages) /
          p;
    }
    return search;
  };
  // A search again after the plan came out over the memory limit keeps the
  // ZeRO level and recompute the first attempt chose.
  const bool chooseZero =
      mode == "auto" && train && zeroFlag.empty() && !earlierChoice;
  const bool chooseRecompute =
      mode == "auto" && train && recomputeFlag.empty() && !earlierChoice;
  std::string recompute = recomputeFlag;
  if (earlierChoice && zeroFlag.empty())
    zero = earlierChoice->zero;
  if (earlierChoice && recomputeFlag.empty() &&
      earlierChoice->recompute == "layers") {
    recompute = "layers";
    if (failed(sharding::markRecompute(func, recompute, error)))
      return reportError(modelPath + ": " + error);
  }
  int trials = 0;
  if (chooseZero || chooseRecompute) {
    // The ZeRO level and recompute are part of the search when memory
    // binds: the lowest level (lower levels communicate less) at which the
    // fastest plan fits is the choice; if there is none, the highest level,
    // trading time for memory as the search does; recomputing layers only
    // when nothing fits without. When nothing fits at all, the most
    // compact choice's search says why.
    // Level 1 is not tried without micro-batches: level 2 communicates as
    // much and holds less. With them it holds as much (the gradients add up
    // whole until the step's reduce-scatter), and level 1 is tried first.
    std::vector<int> levels = !chooseZero ? std::vector<int>{zero}
                              : pipeline.microBatches > 1
                                  ? std::vector<int>{0, 1, 2, 3}
                                  : std::vector<int>{0, 2, 3};
    std::vector<std::string> policies = {recompute};
    if (chooseRecompute)
      policies.push_back("layers");
    auto fits = [&](int level, const std::string &policy, bool fastestOnly) {
      OpBuilder builder(func);
      auto trial = cast<func::FuncOp>(builder.clone(*func));
      trial.setSymName("main_trial");
      trial->setAttr(LoomDialect::kZeroAttrName,
                     builder.getI64IntegerAttr(level));
      std::string ignored;
      bool marked = policy == recomputeFlag ||
                    succeeded(sharding::markRecompute(trial, policy, ignored));
      sharding::SearchOptions search = searchOptions();
      search.fastestOnly = fastestOnly;
      bool ok = marked && succeeded(sharding::searchShardings(trial, search));
      trials += marked;
      trial.erase();
      return ok;
    };
    // With micro-batches, recomputing comes before the higher levels:
    // ZeRO-3 re-gathers parameters that the micro-batches share, and
    // level 2 saves no gradient memory (see above).
    bool found = false;
    if (pipeline.microBatches > 1)
      for (int level : levels) {
        for (const std::string &policy : policies)
          if (fits(level, policy, /*fastestOnly=*/true)) {
            zero = level;
            recompute = policy;
            found = true;
            break;
          }
        if (found)
          break;
      }
    for (const std::string &policy : policies) {
      if (found)
        break;
      for (int level : levels)
        if (fits(level, policy, /*fastestOnly=*/true)) {
          zero = level;
          recompute = policy;
          found = true;
          break;
        }
      if (!found && fits(levels.back(), policy, /*fastestOnly=*/false)) {
        zero = levels.back();
        recompute = policy;
        found = true;
      }
      if (found)
        break;
    }
    if (!found) {
      zero = levels.back();
      recompute = policies.back();
    }
    diagnostics.clear();
    if (recompute != recomputeFlag) {
      if (FailureOr<int> n = sharding::markRecompute(func, recompute, error);
          failed(n))
        recompute = recomputeFlag;
    }
  }
  if (zero > 0)
    func->setAttr(LoomDialect::kZeroAttrName,
                  OpBuilder(func).getI64IntegerAttr(zero));
  if (mode == "auto") {
    // The search fixes the forward ops; propagation completes the rest.
    FailureOr<sharding::SearchReport> found =
        sharding::searchShardings(func, searchOptions());
    outs() << "loom: --mode auto on " << profile.name;
    if (grown)
      outs() << " x" << profile.nodes << " nodes";
    std::string searches =
        trials ? " over " + std::to_string(trials + 1) + " searches" : "";
    if (failed(found)) {
      outs() << ": searched in " << format("%.2f", progress->seconds()) << " s"
             << searches << "; no plan\n";
      outs().flush();
      if (earlierChoice && !evaluating)
        return kNoPlanUnderLoweredLimit;
      return reportError(modelPath + ": cannot shard the model on " +
                         mesh->toString() + ": " + diagnostics);
    }
    report = std::move(*found);
    outs() << ": searched " << report->nodes << " ops (" << report->distinctOps
           << " distinct) in " << format("%.2f", progress->seconds()) << " s"
           << searches << "; "
           << (zero ? "ZeRO-" + std::to_string(zero) + "; " : "")
           << (!recompute.empty() ? "recompute " + recompute + "; " : "")
           << "predicted step " << explain::formatSeconds(report->seconds)
           << ", " << sharding::formatBytes(report->memoryBytes)
           << " per device"
           << (report->exact ? " (exact search)" : " (heuristic search)")
           << "\n";
  }
  PassManager propagate(&context);
  PropagateShardingOptions options;
  options.mode = mode == "data" ? "data" : "semi";
  propagate.addNestedPass<func::FuncOp>(createPropagateSharding(options));
  if (failed(propagate.run(module)))
    return reportError(modelPath + ": cannot shard the model on " +
                       mesh->toString() + ": " + diagnostics);
  explanation->recordShardings(func, report ? &*report : nullptr);
  if (!saveStrategyFlag.empty()) {
    auto output = mlir::openOutputFile(saveStrategyFlag, &error);
    if (!output)
      return reportError(error);
    output->os() << sharding::writeStrategyFile(func, *mesh);
    output->keep();
  }
  if (zero > 0) {
    FailureOr<sharding::ZeroReport> zeroReport =
        sharding::shardOptimizer(func, zero);
    if (failed(zeroReport))
      return reportError(modelPath + ": cannot shard the optimizer (--zero " +
                         std::to_string(zero) + "): " + diagnostics);
    explanation->recordZero(*zeroReport);
    // The updates now want split gradients: the backward ops (but those
    // the user fixed) are propagated again, so that a gradient stays a
    // partial sum up to its reduce-scatter instead of being all-reduced
    // on the way.
    Operation *loss = sharding::analyzeStep(func).loss;
    bool backward = false;
    for (Operation &op : func.getBody().front()) {
      if (backward && !userFixed.contains(&op) &&
          !sharding::isOptimizerUpdate(&op))
        op.removeAttr(LoomDialect::kShardingAttrName);
      backward |= &op == loss;
    }
    if (failed(propagate.run(module)))
      return reportError(modelPath + ": cannot shard the model on " +
                         mesh->toString() + " with --zero " +
                         std::to_string(zero) + ": " + diagnostics);
  }
  explanation->recordRecompute(sharding::applyRecompute(func), recompute);
  // Partitioning does not keep stage marks: take them per ONNX node.
  for (Operation &op : func.getBody().front())
    if (auto stage = op.getAttrOfType<IntegerAttr>(LoomDialect::kStageAttrName))
      pipeline.nodeStages[sharding::nodeName(&op)] = stage.getInt();
  PassManager lower(&context);
  PartitionOptions partitionOptions;
  partitionOptions.recordLayouts = ownStageMeshes;
  lower.addNestedPass<func::FuncOp>(createPartition(partitionOptions));
  lower.addPass(createCSEPass());
  if (failed(lower.run(module)))
    return reportError(modelPath + ": cannot partition the model on " +
                       mesh->toString() + ": " + diagnostics);
  explanation->recordProgram(func);
  if (mode == "auto" && train && pipeline.nodeStages.empty() &&
      pipeline.layerStages.empty() && (pipeline.stages > 1 || evaluating)) {
    // The stages' layers by the cost model (Alpa's inter-op pass on this
    // submesh): each layer costed on the partitioned program.
    FailureOr<std::vector<search::LayerCost>> layers =
        sharding::measureLayers(func, pipeline, error);
    if (failed(layers) && evaluating) {
      evaluating->why = error;
      return kEvaluated;
    }
    if (failed(layers))
      return reportError(modelPath + ": cannot split the step into " +
                         std::to_string(pipeline.stages) +
                         " pipeline stages: " + error);
    search::StageSplitOptions splitOptions;
    splitOptions.stages = pipeline.stages;
    splitOptions.microBatches = pipeline.microBatches;
    splitOptions.schedule = pipeline.schedule;
    splitOptions.virtualStages = pipeline.virtualStages;
    splitOptions.memoryLimit = static_cast<double>(
        searchLimit > 0 ? searchLimit : profile.memoryCapacity);
    splitOptions.sendSeconds = pipeline.sendSeconds;
    std::optional<search::StageSplit> split =
        search::splitStages(*layers, splitOptions);
    if (!split && evaluating) {
      evaluating->why = "too few layers";
      return kEvaluated;
    }
    if (!split)
      return reportError(
          modelPath + ": the model has " + std::to_string(layers->size()) +
          " layers (ONNX node names' first path components), too few for " +
          std::to_string(pipeline.stages * pipeline.virtualStages) +
          (pipeline.virtualStages > 1 ? " pipeline chunks"
                                      : " pipeline stages"));
    double memory = 0;
    for (double m : split->memoryBytes)
      memory = std::max(memory, m);
    if (evaluating) {
      evaluating->seconds = split->seconds;
      evaluating->memoryBytes = memory;
      evaluating->fits = split->fits;
      // The sends' seconds by value: pipeline.sendSeconds refers to this
      // build's profile.
      auto sends = std::make_shared<std::map<double, double>>();
      for (const search::LayerCost &layer : *layers)
        for (double bytes : {layer.forwardBytes, layer.backwardBytes})
          if (bytes > 0 && pipeline.sendSeconds)
            (*sends)[bytes] = pipeline.sendSeconds(bytes);
      evaluating->sendSeconds = [sends](double bytes) {
        auto it = sends->find(bytes);
        return it == sends->end() ? 0.0 : it->second;
      };
      evaluating->layers = std::move(*layers);
      evaluating->stageDevices = stageSize;
      evaluating->memoryLimit = splitOptions.memoryLimit;
      return kEvaluated;
    }
    outs() << "loom: pipeline stages by the cost model: "
           << split->starts.size()
           << (pipeline.virtualStages > 1
                   ? " chunks (" + std::to_string(pipeline.virtualStages) +
                         " per stage) of"
                   : " stages of");
    for (size_t s = 0; s < split->starts.size(); ++s) {
      size_t end = split->end(s, layers->size());
      for (size_t i = split->starts[s]; i < end; ++i)
        pipeline.layerStages[(*layers)[i].name] = static_cast<int64_t>(s);
      outs() << (s ? ", " : " ") << end - split->starts[s];
    }
    outs() << " layers; predicted step "
           << explain::formatSeconds(split->seconds)
           << ", the largest stage holding " << sharding::formatBytes(memory)
           << (split->fits ? ""
                           : " (over the limit: no split fits by this "
                             "count; the most compact)")
           << "\n";
  }
  if (pipeline.stages > 1 || pipeline.microBatches > 1) {
    FailureOr<sharding::PipelineReport> stages =
        sharding::pipelineStep(func, pipeline, error);
    if (failed(stages))
      return reportError(modelPath + ": cannot pipeline the step on " +
                         meshFlag + ": " + error);
    explanation->recordPipeline(*stages);
    chosenLayerStages = stages->layerStages;
  }
  return 0;
}

/// Imports the model, builds the training step, shards and partitions it
/// (the search under `searchLimit` bytes per device), and emits the plan
/// with its explanation; nullopt after reporting.
std::optional<plan::Plan> buildPlan(const cost::HardwareProfile &cluster,
                                    int64_t searchLimit, int &exitCode) {
  // A context per attempt: the next one starts from the model again, with
  // the same names.
  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  const bool simulating = static_cast<bool>(simulateCmd);
  auto fail = [&](int code) -> std::optional<plan::Plan> {
    exitCode = code;
    return std::nullopt;
  };
  // A simulation needs only shapes, and seeded initialisation draws the
  // parameters: neither reads them (a shape-only model, gpt_shapes.py, will
  // do). Seeded initialisation keeps the buffers' data.
  bool seeded = initFlag == "seeded";
  OwningOpRef<ModuleOp> module = importModel(
      context, !simulating && !seeded, exitCode, !simulating && seeded);
  if (!module)
    return std::nullopt;
  if (failed(runCleanup(*module)))
    return fail(reportError("the clean-up passes failed"));
  if (precisionFlag != "f32") {
    if (precisionFlag != "bf16" && precisionFlag != "f16")
      return fail(reportError("--precision must be f32, bf16 or f16, not '" +
                              precisionFlag + "'"));
    MixedPrecisionOptions options;
    options.precision = precisionFlag;
    PassManager pm(&context);
    pm.addNestedPass<func::FuncOp>(createMixedPrecision(options));
    if (failed(pm.run(*module)))
      return fail(
          reportError(modelPath + ": cannot compute in " + precisionFlag));
  }
  if (lossScaleFlag.getNumOccurrences() && !train)
    return fail(reportError("--loss-scale needs --train"));
  if (train) {
    if (scheduleFlag != "constant" && scheduleFlag != "cosine")
      return fail(reportError("--lr-schedule must be constant or cosine"));
    if (!(lrFlag > 0))
      return fail(reportError("--lr must be positive"));
    BuildTrainingGraphOptions options;
    options.loss = lossFlag;
    options.optimizer = optimizerFlag;
    options.momentum = momentumFlag;
    options.nesterov = nesterovFlag;
    options.beta1 = beta1Flag;
    options.beta2 = beta2Flag;
    options.epsilon = epsFlag;
    options.weightDecay = weightDecayFlag;
    options.ignoreIndex = ignoreIndexFlag;
    options.lossScale = lossScaleFlag;
    // On a mesh, micro-batches are unrolled after partitioning (with the
    // pipeline stages), so that their gradients are reduced once.
    options.microBatches = meshFlag.empty() ? microBatchesFlag.getValue() : 1;
    PassManager pm(&context);
    pm.addPass(createBuildTrainingGraph(options));
    pm.addPass(createCSEPass());
    std::string diagnostics;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return success();
    });
    if (failed(pm.run(*module)))
      return fail(reportError(modelPath +
                         ": cannot build the training step: " + diagnostics));
  }
  if (!recomputeFlag.empty()) {
    if (!train)
      return fail(reportError("--recompute needs --train"));
    std::string error;
    for (auto func : module->getOps<func::FuncOp>())
      if (failed(sharding::markRecompute(func, recomputeFlag, error)))
        return fail(reportError(modelPath + ": " + error));
  }
  std::optional<explain::ExplanationBuilder> explanation;
  if (!meshFlag.empty()) {
    if (int code = partition(*module, cluster, searchLimit, explanation))
      return fail(code);
  } else if (!modeFlag.empty() || !strategyFlag.empty() ||
             !saveStrategyFlag.empty()) {
    return fail(reportError("--mode, --strategy and --save-strategy need --mesh"));
  } else {
    explanation.emplace(cluster, std::nullopt, "single");
    for (auto func : module->getOps<func::FuncOp>()) {
      explanation->recordShardings(func, nullptr);
      explanation->recordRecompute(sharding::applyRecompute(func),
                                   recomputeFlag);
      explanation->recordProgram(func);
    }
  }
  if (fuseFlag) {
    PassManager pm(&context);
    pm.addNestedPass<func::FuncOp>(createFuseMatmulEpilogue());
    if (failed(pm.run(*module)))
      return fail(reportError(modelPath + ": cannot fuse matmul epilogues"));
  }
  std::string error;
  if (!emitMlirFlag.empty()) {
    auto output = mlir::openOutputFile(emitMlirFlag, &error);
    if (!output)
      return fail(reportError(error));
    module->print(output->os());
    output->os() << "\n";
    output->keep();
  }
  std::optional<plan::Plan> plan = emitPlan(*module, error);
  if (!plan)
    return fail(reportError(modelPath + ": " + error));
  *plan->mutable_explanation() = explanation->finish();
  return plan;
}

/// The messages between the stages of `plan`, each end checked against the
/// other: the same tags and global types both ways. Stages of a
/// --stage-meshes plan come from different compiles, which must agree on
/// what crosses.
std::optional<std::string> checkStageMessages(const plan::Plan &plan) {
  using End = std::tuple<int64_t, int64_t, int64_t>; // from, to, tag
  std::map<End, std::string> sends, recvs;
  auto typeText = [](const plan::Value &v) {
    std::string text = plan::DType_Name(v.global_type().dtype()) + "[";
    for (int64_t d : v.global_type().shape())
      text += std::to_string(d) + ",";
    return text + "]";
  };
  for (const plan::Stage &stage : plan.stages()) {
    const plan::Program &program = stage.program();
    for (const plan::Instruction &inst : program.instructions()) {
      if (inst.op() != "send" && inst.op() != "recv")
        continue;
      int64_t peer = -1, tag = -1;
      for (const plan::Attribute &a : inst.attributes()) {
        if (a.name() == "peer_stage")
          peer = a.int_value();
        if (a.name() == "tag")
          tag = a.int_value();
      }
      if (inst.op() == "send")
        sends[{stage.index(), peer, tag}] =
            typeText(program.values(inst.operands(0)));
      else
        recvs[{peer, stage.index(), tag}] =
            typeText(program.values(inst.results(0)));
    }
  }
  for (const auto &[ends, type] : sends) {
    auto [from, to, tag] = ends;
    auto it = recvs.find(ends);
    std::string where = "stage " + std::to_string(from) + " sends tag " +
                        std::to_string(tag) + " (" + type + ") to stage " +
                        std::to_string(to);
    if (it == recvs.end())
      return where + ", which does not receive it";
    if (it->second != type)
      return where + ", which receives it as " + it->second;
  }
  for (const auto &[ends, type] : recvs)
    if (!sends.count(ends))
      return "stage " + std::to_string(std::get<1>(ends)) + " receives tag " +
             std::to_string(std::get<2>(ends)) + " from stage " +
             std::to_string(std::get<0>(ends)) + ", which does not send it";
  return std::nullopt;
}

/// --stage-meshes in auto mode: each distinct submesh's layer costs (from
/// a costing compile of P stages on it), and the layers split over the
/// stages on their own submeshes (search::splitOnSubmeshes with the
/// stages' shapes given). nullopt when a submesh's compile does not cost
/// layers (the user gave stages per node, or an interleaved schedule): the
/// first compile's split then stands; an exit code in `exitCode` after an
/// error.
std::optional<llvm::StringMap<int64_t>>
splitOverStageMeshes(const cost::HardwareProfile &cluster, int64_t searchLimit,
                     ArrayRef<StringRef> meshes, int &exitCode) {
  if (modeFlag != "auto" || pipelineScheduleFlag == "interleaved")
    return std::nullopt;
  std::vector<search::SubmeshShape> shapes;
  search::SubmeshSplitOptions options;
  options.devices = 0;
  options.microBatches = microBatchesFlag;
  options.schedule = pipelineScheduleFlag;
  std::map<std::string, size_t> index;
  for (StringRef mesh : meshes) {
    auto [it, added] = index.try_emplace(mesh.str(), shapes.size());
    if (added) {
      StageCandidate c;
      meshFlag = "pp=" + std::to_string(meshes.size()) + "," + mesh.str();
      evaluating = &c;
      int code = 0;
      std::optional<plan::Plan> none = buildPlan(cluster, searchLimit, code);
      evaluating = nullptr;
      if (code > 0) {
        exitCode = code;
        return std::nullopt;
      }
      if (code != kEvaluated || !c.why.empty())
        return std::nullopt;
      shapes.push_back(
          {mesh.str(), c.stageDevices, std::move(c.layers), c.sendSeconds});
      options.memoryLimit = c.memoryLimit;
    }
    options.stageShapes.push_back(it->second);
    options.devices += shapes[it->second].devices;
  }
  std::optional<search::SubmeshSplit> split =
      search::splitOnSubmeshes(shapes, options);
  if (!split)
    return std::nullopt;
  const std::vector<search::LayerCost> &layers = shapes.front().layers;
  llvm::StringMap<int64_t> stages;
  outs() << "loom: pipeline stages over the stage meshes by the cost model:";
  for (size_t s = 0; s < split->starts.size(); ++s) {
    size_t end = split->end(s, layers.size());
    for (size_t i = split->starts[s]; i < end; ++i)
      stages[layers[i].name] = static_cast<int64_t>(s);
    outs() << (s ? ", " : " ") << end - split->starts[s];
  }
  outs() << " layers; predicted step " << explain::formatSeconds(split->seconds)
         << "\n";
  return stages;
}

/// --stage-meshes: compiles the step once per distinct submesh (with P
/// stages of it, P the number of stage meshes; every compile gives layers
/// the same stages: --stages auto's, the auto-mode split over the stage
/// meshes, or the first compile's) and takes stage s from the compile on
/// its own submesh. Every compile numbers the values that cross stages
/// by the compute ops that make them, so the stages' sends and receives
/// pair up; this is checked.
std::optional<plan::Plan>
buildOnStageMeshes(const cost::HardwareProfile &cluster, int64_t searchLimit,
                   int &exitCode) {
  auto fail = [&](const std::string &message) -> std::optional<plan::Plan> {
    exitCode = reportError(message);
    return std::nullopt;
  };
  SmallVector<StringRef> shapes;
  StringRef(stageMeshesFlag).split(shapes, '/');
  if (shapes.size() < 2)
    return fail("--stage-meshes expects a submesh per stage separated by "
                "'/', e.g. dp=4/tp=2, got '" +
                stageMeshesFlag + "'");
  for (StringRef shape : shapes)
    if (shape.empty() || shape.contains("pp="))
      return fail("--stage-meshes: each stage's submesh names its axes, "
                  "without pp (the stages are the list), got '" +
                  stageMeshesFlag + "'");
  const std::string stages = std::to_string(shapes.size());
  std::map<std::string, plan::Plan> plans;
  ownStageMeshes = true;
  fixedLayerStages = presetLayerStages;
  if (!fixedLayerStages) {
    fixedLayerStages =
        splitOverStageMeshes(cluster, searchLimit, shapes, exitCode);
    if (exitCode)
      return std::nullopt;
  }
  for (StringRef shape : shapes) {
    if (plans.count(shape.str()))
      continue;
    meshFlag = "pp=" + stages + "," + shape.str();
    std::optional<plan::Plan> plan = buildPlan(cluster, searchLimit, exitCode);
    if (!plan)
      return std::nullopt;
    if (!fixedLayerStages)
      fixedLayerStages = chosenLayerStages;
    plans[shape.str()] = std::move(*plan);
  }
  plan::Plan out = plans[shapes.front().str()];
  out.clear_stages();
  int64_t next = 0;
  for (auto [s, shape] : llvm::enumerate(shapes)) {
    plan::Stage *stage = out.add_stages();
    *stage = plans[shape.str()].stages(static_cast<int>(s));
    stage->clear_ranks();
    int64_t devices = 1;
    for (const plan::Mesh::Axis &axis : stage->mesh().axes())
      devices *= axis.size();
    for (int64_t r = 0; r < devices; ++r)
      stage->add_ranks(next++);
    // The stage as its own compile explains it (the per-node table and the
    // totals are the first submesh's compile).
    const plan::Explanation &own = plans[shape.str()].explanation();
    if (static_cast<int>(s) < own.stages_size() &&
        static_cast<int>(s) < out.explanation().stages_size())
      *out.mutable_explanation()->mutable_stages(static_cast<int>(s)) =
          own.stages(static_cast<int>(s));
  }
  out.mutable_mesh()->mutable_axes(0)->set_size(next);
  // The predicted step from the stages' own times (1F1B and GPipe), the
  // totals' split between compute and communication kept.
  plan::Explanation &explanation = *out.mutable_explanation();
  std::vector<double> micro, step;
  for (const plan::Explanation::Stage &stage : explanation.stages()) {
    micro.push_back(stage.micro_batch_seconds());
    step.push_back(stage.step_seconds());
  }
  double seconds = search::pipelineSeconds(micro, step, microBatchesFlag);
  if (explanation.virtual_stages() <= 1 && seconds > 0 &&
      explanation.step_seconds() > 0) {
    double scale = seconds / explanation.step_seconds();
    explanation.set_step_seconds(seconds);
    explanation.set_compute_seconds(explanation.compute_seconds() * scale);
    explanation.set_comm_seconds(explanation.comm_seconds() * scale);
  }
  if (std::optional<std::string> mismatch = checkStageMessages(out))
    return fail(modelPath + ": the compiles on " + stageMeshesFlag +
                " disagree on the values that cross stages: " + *mismatch);
  return out;
}

/// Stages on submeshes of different sizes that --stages auto may compile:
/// the submeshes (as --stage-meshes takes them), each layer's stage, and
/// the pipeline they were costed for.
struct MixedSubmeshes {
  std::string stageMeshes;
  llvm::StringMap<int64_t> layerStages;
  int64_t microBatches = 1;
  std::string schedule;
  double seconds = 0;
};

/// Alpa's choice of submeshes: per micro-batch count, the 1F1B (or GPipe)
/// shapes costed are the submesh sizes stages may take, and
/// search::splitOnSubmeshes splits the layers over stages of mixed sizes
/// (every stage within the memory limit). This reports each count's best
/// split against the equal stages, and returns the fastest split whose
/// stages are not all of one size.
std::optional<MixedSubmeshes>
chooseMixedSubmeshes(const std::vector<StageCandidate> &candidates) {
  std::optional<MixedSubmeshes> best;
  std::map<std::pair<std::string, int64_t>, std::vector<const StageCandidate *>>
      groups;
  for (const StageCandidate &c : candidates)
    if (c.why.empty() && c.schedule != "interleaved" && !c.layers.empty())
      groups[{c.schedule, c.microBatches}].push_back(&c);
  for (const auto &[key, group] : groups) {
    if (group.size() < 2)
      continue;
    std::vector<search::SubmeshShape> shapes;
    const StageCandidate *uniform = nullptr;
    for (const StageCandidate *c : group) {
      StringRef submesh = c->mesh;
      if (c->stages > 1)
        submesh = submesh.split(',').second;
      shapes.push_back(
          {submesh.str(), c->stageDevices, c->layers, c->sendSeconds});
      if (c->fits && (!uniform || c->seconds < uniform->seconds))
        uniform = c;
    }
    search::SubmeshSplitOptions options;
    options.devices = group.front()->stageDevices * group.front()->stages;
    options.microBatches = key.second;
    options.schedule = key.first;
    options.memoryLimit = group.front()->memoryLimit;
    std::optional<search::SubmeshSplit> mixed =
        search::splitOnSubmeshes(shapes, options);
    if (!mixed)
      continue;
    bool equal =
        std::all_of(mixed->shapes.begin(), mixed->shapes.end(),
                    [&](size_t k) { return k == mixed->shapes.front(); });
    outs() << "loom: --stages auto: submeshes of different sizes, "
           << key.second << " micro-batch" << (key.second == 1 ? "" : "es")
           << ": ";
    if (equal) {
      outs() << "the best split has equal stages\n";
      continue;
    }
    const std::vector<search::LayerCost> &layers = shapes.front().layers;
    outs() << "predicted step " << explain::formatSeconds(mixed->seconds)
           << " with " << mixed->starts.size() << " stages (";
    for (size_t s = 0; s < mixed->starts.size(); ++s) {
      size_t end = mixed->end(s, layers.size());
      outs() << (s ? "; " : "") << layers[mixed->starts[s]].name
             << (end - mixed->starts[s] > 1 ? " to " + layers[end - 1].name
                                            : std::string())
             << " on " << shapes[mixed->shapes[s]].name;
    }
    outs() << ")";
    if (uniform)
      outs() << ", against " << explain::formatSeconds(uniform->seconds)
             << " on equal stages (" << uniform->mesh << ")";
    outs() << "\n";
    if (best && best->seconds <= mixed->seconds)
      continue;
    best.emplace();
    for (size_t s = 0; s < mixed->starts.size(); ++s) {
      best->stageMeshes += (s ? "/" : "") + shapes[mixed->shapes[s]].name;
      for (size_t i = mixed->starts[s]; i < mixed->end(s, layers.size()); ++i)
        best->layerStages[layers[i].name] = static_cast<int64_t>(s);
    }
    best->microBatches = key.second;
    best->schedule = key.first;
    best->seconds = mixed->seconds;
  }
  return best;
}

/// `--stages auto`: costs every pipeline shape of the mesh (P stages
/// dividing its first axis, M micro-batches) and sets --mesh,
/// --micro-batches and --batch to the fastest that fits; an exit code
/// after reporting, or 0.
int chooseStages(const cost::HardwareProfile &cluster) {
  if (stagesFlag != "auto")
    return reportError("--stages takes `auto` (give a fixed stage count as "
                       "pp=N in --mesh), got '" +
                       stagesFlag + "'");
  if (modeFlag != "auto" || !train || meshFlag.empty())
    return reportError("--stages auto needs --mode auto, --train and --mesh");
  if (StringRef(meshFlag).contains("pp="))
    return reportError("--stages auto chooses the pipeline axis: leave pp out "
                       "of --mesh");
  if (!batchFlag.getNumOccurrences())
    return reportError("--stages auto needs --batch N");
  StringRef first, rest;
  std::tie(first, rest) = StringRef(meshFlag).split(',');
  StringRef axis, sizeText;
  int64_t size = 0;
  if (!splitAssignment(first, axis, sizeText) ||
      sizeText.getAsInteger(10, size) || size < 1)
    return reportError("--mesh expects named axes like dp=2,tp=4, got '" +
                       meshFlag + "'");
  const int64_t batch = batchFlag;
  const std::string original = meshFlag;
  const bool fixedM = microBatchesFlag.getNumOccurrences() > 0;
  // The schedules tried: the one given, else 1F1B (which holds fewer
  // micro-batches than GPipe at the same bubble) and interleaved 1F1B
  // (a smaller bubble for more sends and memory).
  std::vector<std::pair<std::string, int64_t>> schedules;
  if (pipelineScheduleFlag.getNumOccurrences())
    schedules.push_back({pipelineScheduleFlag, virtualStagesFlag});
  else if (virtualStagesFlag.getNumOccurrences())
    schedules.push_back({"interleaved", virtualStagesFlag});
  else
    schedules = {{"1f1b", 1}, {"interleaved", virtualStagesFlag}};
  std::vector<StageCandidate> candidates;
  for (int64_t p = 1; p <= size; ++p) {
    if (size % p != 0)
      continue;
    int64_t ways = size / p; // the first axis's share of each stage
    std::string mesh = meshFlag;
    if (p > 1)
      mesh = "pp=" + std::to_string(p) + "," + axis.str() + "=" +
             std::to_string(ways) + (rest.empty() ? "" : "," + rest.str());
    std::vector<int64_t> ms;
    if (fixedM) {
      ms.push_back(microBatchesFlag);
    } else if (p == 1) {
      ms.push_back(1);
    } else if (batch % ways == 0) {
      // Micro-batches of one row per rank of the first axis, then of 2
      // and 4: more micro-batches shrink the bubble, fewer the per-op
      // overheads; at least as many as stages.
      int64_t most = batch / ways;
      for (int64_t m = most; m >= p && ms.size() < 3; m /= 2) {
        ms.push_back(m);
        if (m % 2)
          break;
      }
    }
    for (int64_t m : ms)
      for (const auto &[schedule, chunks] : schedules) {
        if (batch % m != 0 ||
            (schedule == "interleaved" && (p == 1 || m % p != 0)))
          continue;
        StageCandidate c;
        c.stages = p;
        c.microBatches = m;
        c.mesh = mesh;
        c.schedule = schedule;
        c.virtualStages = chunks;
        candidates.push_back(c);
      }
  }
  const StageCandidate *best = nullptr;
  for (StageCandidate &c : candidates) {
    c.select();
    batchFlag = batch / c.microBatches;
    earlierChoice.reset();
    evaluating = &c;
    int code = 0;
    std::optional<plan::Plan> none = buildPlan(cluster, memoryLimitFlag, code);
    evaluating = nullptr;
    if (code != kEvaluated)
      c.why = code ? "no plan: the error above" : "not costed";
    outs() << "loom: --stages auto: " << c.mesh << ", " << c.microBatches
           << " micro-batch" << (c.microBatches == 1 ? "" : "es")
           << c.describe() << ": ";
    if (!c.why.empty()) {
      outs() << "not possible (" << c.why << ")\n";
      continue;
    }
    outs() << "predicted step " << explain::formatSeconds(c.seconds)
           << ", largest stage " << sharding::formatBytes(c.memoryBytes)
           << (c.fits ? "" : " (over the memory limit)") << "\n";
    if (!best || (c.fits && !best->fits) ||
        (c.fits == best->fits && c.seconds < best->seconds))
      best = &c;
  }
  if (!best)
    return reportError(modelPath +
                       ": --stages auto found no pipeline shape "
                       "of --mesh " +
                       original + " that can be costed");
  std::optional<MixedSubmeshes> mixed = chooseMixedSubmeshes(candidates);
  for (const StageCandidate &c : candidates)
    if (c.why.empty())
      rankedShapes.push_back(c);
  std::stable_sort(rankedShapes.begin(), rankedShapes.end(),
                   [](const StageCandidate &a, const StageCandidate &b) {
                     if (a.fits != b.fits)
                       return a.fits;
                     return a.seconds < b.seconds;
                   });
  batchFlag = batch;
  earlierChoice.reset();
  if (mixed && (!best->fits || mixed->seconds < best->seconds)) {
    // Compiled as --stage-meshes would, with the layers where the split
    // put them; the equal stages stay ranked for the memory fallback.
    outs() << "loom: --stages auto chose submeshes of different sizes, "
           << mixed->stageMeshes << ", with " << mixed->microBatches
           << " micro-batch" << (mixed->microBatches == 1 ? "" : "es")
           << " (predicted " << explain::formatSeconds(mixed->seconds)
           << ", against " << explain::formatSeconds(best->seconds) << " for "
           << best->mesh << best->describe() << ")\n";
    stageMeshesFlag = mixed->stageMeshes;
    presetLayerStages = std::move(mixed->layerStages);
    meshFlag = "";
    microBatchesFlag = mixed->microBatches;
    pipelineScheduleFlag = mixed->schedule;
    virtualStagesFlag = 1;
    return 0;
  }
  outs() << "loom: --stages auto chose " << best->mesh << " with "
         << best->microBatches << " micro-batch"
         << (best->microBatches == 1 ? "" : "es") << best->describe()
         << (best->fits ? ""
                        : "; none fits the memory limit by the split's "
                          "count: the fastest")
         << "\n";
  best->select();
  return 0;
}

/// ": at its peak ..." (explain::describeArenaPeak), for an error.
static std::string peakClause(const plan::Plan &plan) {
  std::string peak = explain::describeArenaPeak(plan, /*top=*/4);
  return peak.empty() ? peak : ": " + peak;
}

int runCompile() {
  int exitCode = 0;
  const bool simulating = static_cast<bool>(simulateCmd);
  if (!simulating && planOutput.empty())
    return reportError("compile needs -o MODEL.plan");
  std::optional<cost::HardwareProfile> cluster = loadCluster(exitCode);
  if (!cluster)
    return exitCode;
  if (!stageMeshesFlag.empty() &&
      (!meshFlag.empty() || !stagesFlag.empty() || !train))
    return reportError("--stage-meshes pipelines a training step (--train) "
                       "over the submeshes it lists: it replaces --mesh and "
                       "--stages");
  if (!stagesFlag.empty())
    if (int code = chooseStages(*cluster))
      return code;
  if (microBatchesFlag != 1) {
    // The graph is imported for one micro-batch.
    if (!train)
      return reportError("--micro-batches needs --train");
    if (microBatchesFlag < 1 || !batchFlag.getNumOccurrences() ||
        batchFlag % microBatchesFlag != 0)
      return reportError("--micro-batches M needs --batch N with N divisible "
                         "by M");
    batchFlag = batchFlag / microBatchesFlag;
  }
  // Memory per device is a hard limit. The search's estimate of it is
  // additive (parameters, optimizer state, saved activations, kept copies);
  // the plan's static memory plan is exact. When the plan exceeds the
  // limit, search again under a limit lowered by the excess.
  int64_t limit = memoryLimitFlag > 0 ? memoryLimitFlag.getValue()
                                      : cluster->memoryCapacity;
  int64_t searchLimit = memoryLimitFlag;
  std::optional<plan::Plan> plan;
  size_t shape = 0;
  // --stages auto's submeshes of different sizes, before rankedShapes[0].
  bool mixed = presetLayerStages.has_value();
  for (int attempt = 0;; ++attempt) {
    std::optional<plan::Plan> over = std::move(plan);
    plan = stageMeshesFlag.empty()
               ? buildPlan(*cluster, searchLimit, exitCode)
               : buildOnStageMeshes(*cluster, searchLimit, exitCode);
    if (!plan && exitCode == kNoPlanUnderLoweredLimit) {
      if (!over)
        return reportError(modelPath + ": no plan fits the memory limit");
      // The search's count is below the program's: the last plan is the
      // nearest to the limit there is.
      int64_t peak = 0;
      for (const plan::Stage &stage : over->stages())
        peak = std::max(peak, stage.program().state_bytes() +
                                  stage.program().arena_bytes());
      return reportError(
          modelPath + ": the plan needs " + sharding::formatBytes(peak) +
          " per device, over the limit of " + sharding::formatBytes(limit) +
          ", and no plan fits a search under " +
          sharding::formatBytes(static_cast<double>(searchLimit)) +
          " (the search counted " +
          sharding::formatBytes(over->explanation().search_memory_bytes()) +
          " for it)" + peakClause(*over) +
          "\nuse more devices, a smaller batch, or a larger --memory-limit");
    }
    if (!plan)
      return exitCode;
    int64_t peak = 0;
    for (const plan::Stage &stage : plan->stages())
      peak = std::max(peak, stage.program().state_bytes() +
                                stage.program().arena_bytes());
    if (plan->explanation().mode() != "auto" || limit <= 0 || peak <= limit)
      break;
    const size_t nextShape = mixed ? 0 : shape + 1;
    if (nextShape < rankedShapes.size() && rankedShapes[nextShape].fits) {
      // The split's count of memory misses the arena's transients: the
      // next pipeline shape rather than a search under a lowered limit.
      shape = nextShape;
      const StageCandidate &next = rankedShapes[shape];
      outs() << "loom: the plan of "
             << (mixed ? "--stage-meshes " + stageMeshesFlag
                       : meshFlag.getValue())
             << " needs " << sharding::formatBytes(static_cast<double>(peak))
             << " per device, over the limit of "
             << sharding::formatBytes(static_cast<double>(limit))
             << "; --stages auto takes the next shape, " << next.mesh
             << " with " << next.microBatches << " micro-batches"
             << next.describe() << "\n";
      if (mixed) {
        mixed = false;
        stageMeshesFlag = "";
        presetLayerStages.reset();
        fixedLayerStages.reset();
        ownStageMeshes = false;
      }
      batchFlag = batchFlag * microBatchesFlag / next.microBatches;
      next.select();
      earlierChoice.reset();
      searchLimit = memoryLimitFlag;
      attempt = -1;
      continue;
    }
    earlierChoice = AutoChoice{plan->explanation().zero_level(),
                               plan->explanation().recompute()};
    if (attempt == 5)
      return reportError(
          modelPath + ": the plan needs " + sharding::formatBytes(peak) +
          " per device, over the limit of " + sharding::formatBytes(limit) +
          ", after " + std::to_string(attempt + 1) + " searches" +
          peakClause(*plan) +
          "\nuse more devices, a smaller batch, or a larger --memory-limit");
    // Lower by the excess (at least), and by 2% more each time. Below a
    // tenth of the limit, the search's estimate is too far from the plan
    // for another search to help.
    double current = static_cast<double>(searchLimit > 0 ? searchLimit : limit);
    double excess = static_cast<double>(peak - limit);
    int64_t lowered = static_cast<int64_t>(
        std::min(current * static_cast<double>(limit) / static_cast<double>(peak),
                 current - excess) -
        0.02 * (attempt + 1) * static_cast<double>(limit));
    if (lowered < limit / 10)
      return reportError(
          modelPath + ": the plan needs " + sharding::formatBytes(peak) +
          " per device, over the limit of " + sharding::formatBytes(limit) +
          ", while the search counted " +
          sharding::formatBytes(plan->explanation().search_memory_bytes()) +
          "; the buffers of its partitioned program at its peak are what the "
          "search misses" +
          peakClause(*plan) +
          "\nuse more devices, a smaller batch, or a larger --memory-limit");
    outs() << "loom: the plan needs " << sharding::formatBytes(peak)
           << " per device, over the limit of " << sharding::formatBytes(limit)
           << "; searching again as if the limit were "
           << sharding::formatBytes(lowered) << "\n";
    searchLimit = lowered;
  }
  std::string error;
  if (initFlag == "seeded") {
    // Replace the initializers' data by a seeded rule on the global tensor
    // (in every pipeline stage).
    for (plan::Stage &stage : *plan->mutable_stages())
      for (plan::Value &v : *stage.mutable_program()->mutable_values()) {
        if (v.kind() != plan::Value::PARAMETER)
          continue;
        const auto &shape = v.global_type().shape();
        StringRef name = v.name();
        double bound = 0, low = 0;
        if (shape.size() >= 2) {
          int64_t fanIn = 1;
          for (int d = 1; d < shape.size(); ++d)
            fanIn *= shape[d];
          bound =
              1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fanIn, 1)));
          low = -bound;
        } else if (!name.ends_with("bias")) {
          low = bound = 1.0; // scales of normalisations
        }
        v.clear_data();
        plan::Initializer *init = v.mutable_init();
        init->set_distribution("uniform");
        init->set_low(low);
        init->set_high(bound);
        init->set_seed(seedFlag);
      }
  } else if (initFlag != "onnx") {
    return reportError("--init must be onnx or seeded");
  }
  if (train) {
    plan::Training *t = plan->mutable_training();
    t->set_loss(lossFlag);
    t->set_optimizer(optimizerFlag);
    t->set_lr(lrFlag);
    t->set_lr_schedule(scheduleFlag);
    t->set_warmup_steps(warmupFlag);
    t->set_total_steps(totalStepsFlag);
    t->set_min_lr(minLrFlag);
    plan->mutable_schedule()->set_micro_batches(microBatchesFlag);
  }
  if (!planOutput.empty()) {
    std::string bytes;
    if (!plan->SerializeToString(&bytes))
      return reportError("cannot serialise the plan");
    auto output = mlir::openOutputFile(planOutput, &error);
    if (!output)
      return reportError(error);
    output->os() << bytes;
    output->keep();
  }
  if (simulating) {
    explain::PrintOptions print;
    print.top = topFlag;
    explain::printExplanation(*plan, "simulated " + modelPath, print, outs());
    return 0;
  }
  // The largest stage's program (the only one without a pipeline).
  const plan::Program *program = &plan->stages(0).program();
  int collectives = 0;
  for (const plan::Stage &stage : plan->stages()) {
    const plan::Program &p = stage.program();
    if (p.state_bytes() + p.arena_bytes() >
        program->state_bytes() + program->arena_bytes())
      program = &p;
    for (const plan::Instruction &inst : p.instructions())
      collectives += inst.op() == "all_reduce" || inst.op() == "all_gather" ||
                     inst.op() == "reduce_scatter" || inst.op() == "all_to_all";
  }
  std::string devices;
  int64_t ranks = 0;
  for (const plan::Stage &stage : plan->stages())
    ranks += stage.ranks_size();
  if (!meshFlag.empty())
    devices = ", partitioned over " + std::to_string(ranks) + " devices (" +
              (stageMeshesFlag.empty() ? meshFlag.getValue()
                                       : "stage meshes " + stageMeshesFlag) +
              ") with " + std::to_string(collectives) + " collectives";
  if (plan->stages_size() > 1)
    devices +=
        " in " + std::to_string(plan->stages_size()) + " stages (" +
        pipelineScheduleFlag +
        (pipelineScheduleFlag == "interleaved"
             ? " with " + std::to_string(virtualStagesFlag) + " virtual stages"
             : std::string()) +
        ", " + std::to_string(microBatchesFlag) + " micro-batches)";
  int instructions = 0;
  for (const plan::Stage &stage : plan->stages())
    instructions += stage.program().instructions_size();
  outs() << "loom: compiled " << modelPath
         << (train ? " (training step, " + optimizerFlag + ")" : "") << " into "
         << planOutput << ": " << instructions << " instructions" << devices
         << "; per device"
         << (plan->stages_size() > 1 ? " (largest stage) " : " ")
         << program->state_bytes() << " bytes of parameters and constants, "
         << program->arena_bytes() << " bytes of activations\n";
  return 0;
}

} // namespace

std::optional<int> runFrontEndCommand() {
  if (importCmd)
    return runImport();
  if (compileCmd || simulateCmd)
    return runCompile();
  return std::nullopt;
}

} // namespace loom::driver
