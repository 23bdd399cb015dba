//===- CompileCommand.cpp - `loom compile` and `loom simulate` ------------===//
//
// Both compile an ONNX model with the compiler library
// (compiler/pipeline): compile writes the plan and a one-line summary,
// simulate compiles without the weights and prints the explanation (what
// the plan is predicted to cost, as `loom explain` prints it).
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"
#include "compiler/driver/FrontEndFlags.h"

#include "common/plan/PlanChecksum.h"
#include "compiler/explain/Explain.h"
#include "compiler/pipeline/Compiler.h"
#include "compiler/pipeline/LoomPipeline.h"
#include "compiler/pipeline/OutputFile.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom::driver {

int runImport();

namespace {

/// "loom: compiled M into P: N instructions, partitioned over ...; per
/// device ... bytes of parameters and constants, ... of activations".
void printSummary(const pipeline::CompileOptions &options,
                  const pipeline::CompileResult &result) {
  const plan::Plan &plan = result.plan;
  const pipeline::ParallelConfig &parallel = result.parallel;
  // The largest stage's program (the only one without a pipeline).
  const plan::Program *program = &plan.stages(0).program();
  int collectives = 0, instructions = 0;
  int64_t ranks = 0;
  for (const plan::Stage &stage : plan.stages()) {
    const plan::Program &p = stage.program();
    if (p.state_bytes() + p.arena_bytes() >
        program->state_bytes() + program->arena_bytes())
      program = &p;
    for (const plan::Instruction &inst : p.instructions())
      collectives += inst.op() == "all_reduce" || inst.op() == "all_gather" ||
                     inst.op() == "reduce_scatter" || inst.op() == "all_to_all";
    ranks += stage.ranks_size();
    instructions += p.instructions_size();
  }
  std::string devices;
  if (!parallel.mesh.empty() || !parallel.stageMeshes.empty())
    devices = ", partitioned over " + std::to_string(ranks) + " devices (" +
              (parallel.stageMeshes.empty()
                   ? parallel.mesh
                   : "stage meshes " + parallel.stageMeshes) +
              ") with " + std::to_string(collectives) + " collectives";
  if (plan.stages_size() > 1)
    devices += " in " + std::to_string(plan.stages_size()) + " stages (" +
               pipeline::toString(parallel.schedule).str() +
               (parallel.schedule == pipeline::Schedule::Interleaved
                    ? " with " + std::to_string(parallel.virtualStages) +
                          " virtual stages"
                    : std::string()) +
               ", " + std::to_string(parallel.microBatches) + " micro-batches)";
  outs() << "loom: compiled " << options.model.path
         << (options.training.enabled
                 ? " (training step, " +
                       pipeline::toString(options.training.optimizer).str() +
                       ")"
                 : "")
         << " into " << planOutputFlag() << ": " << instructions
         << " instructions" << devices << "; per device"
         << (plan.stages_size() > 1 ? " (largest stage) " : " ")
         << program->state_bytes() << " bytes of parameters and constants, "
         << program->arena_bytes() << " bytes of activations\n";
}

/// "" when every file `options` writes can be written and none of them is
/// a file it reads; else what is wrong, naming the flag. Checked before any
/// work: `-o MODEL.onnx` would destroy the model, and a path that cannot be
/// written was found only after the compile.
std::string checkOutputs(const pipeline::CompileOptions &options) {
  struct Output {
    const char *flag;
    std::string path;
  };
  const Output outputs[] = {{"-o", planOutputFlag()},
                            {"--emit-mlir", options.emitMlir},
                            {"--save-strategy", options.saveStrategyFile}};
  const Output inputs[] = {{"the model", options.model.path},
                           {"--strategy", options.strategyFile},
                           {"--cluster", options.cluster}};
  for (const Output &out : outputs) {
    if (out.path.empty() || out.path == "-")
      continue;
    for (const Output &in : inputs)
      if (!in.path.empty() &&
          (out.path == in.path || sys::fs::equivalent(out.path, in.path)))
        return std::string(out.flag) + " " + out.path + " is " + in.flag +
               " this command reads; write it elsewhere";
    if (sys::fs::is_directory(out.path))
      return std::string(out.flag) + " " + out.path +
             " is a directory; give a file name";
    SmallString<256> dir(out.path);
    sys::path::remove_filename(dir);
    if (dir.empty())
      dir = ".";
    bool exists = sys::fs::exists(out.path);
    if (!sys::fs::is_directory(dir) ||
        sys::fs::access(exists ? StringRef(out.path) : StringRef(dir),
                        sys::fs::AccessMode::Write))
      return std::string(out.flag) + " " + out.path + " cannot be written (" +
             (sys::fs::is_directory(dir)
                  ? "no write permission"
                  : "no such directory " + dir.str().str()) +
             ")";
  }
  return "";
}

int runCompile() {
  std::string error;
  std::optional<pipeline::CompileOptions> options =
      compileOptionsFromFlags(error);
  if (!options)
    return reportError(error);
  if (!options->simulate && planOutputFlag().empty())
    return reportError("compile needs -o MODEL.plan");
  if (std::string bad = checkOutputs(*options); !bad.empty())
    return reportError(bad);
  std::optional<pipeline::CompileResult> result =
      pipeline::compile(*options, outs(), error);
  if (!result)
    return reportError(error);
  if (!planOutputFlag().empty()) {
    std::optional<std::string> bytes = plan::sealPlan(result->plan);
    if (!bytes)
      return reportError("cannot serialise the plan (over 2 GiB)");
    if (std::string e = pipeline::writeOutputFile(
            planOutputFlag(), [&](raw_ostream &os) { os << *bytes; });
        !e.empty())
      return reportError(e);
  }
  if (options->simulate) {
    explain::PrintOptions print;
    print.top = topFlagValue();
    explain::printExplanation(result->plan, "simulated " + options->model.path,
                              print, outs());
    pipeline::CompileOptions chosen = *options;
    chosen.parallel = result->parallel;
    if (int64_t built = pipeline::builtMicroBatches(chosen);
        built < chosen.parallel.microBatches)
      outs() << "(the stage programs were built with " << built << " of the "
             << chosen.parallel.microBatches
             << " micro-batches: their memory peak is reached by then, and "
                "the step is predicted for all of them)\n";
    return 0;
  }
  printSummary(*options, *result);
  return 0;
}

} // namespace

std::optional<int> runFrontEndCommand() {
  if (importCommand())
    return runImport();
  if (compileCommand() || simulateCommand())
    return runCompile();
  return std::nullopt;
}

} // namespace loom::driver
