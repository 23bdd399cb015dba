//===- FrontEndFlags.cpp - The model and its bindings ---------------------===//
//
// The subcommands that read an ONNX model and the binding flags they
// share, read into pipeline::ModelInput.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/FrontEndFlags.h"

#include "compiler/driver/Commands.h"

#include "llvm/ADT/SmallVector.h"

using namespace llvm;

namespace loom::driver {

cl::SubCommand &importCommand() {
  static cl::SubCommand command(
      "import", "Import an ONNX model into the loom dialect (MLIR)");
  return command;
}

cl::SubCommand &compileCommand() {
  static cl::SubCommand command(
      "compile", "Compile an ONNX model into a plan for `loom run`");
  return command;
}

cl::SubCommand &trainCommand() {
  static cl::SubCommand command(
      "train", "Train a model on a mesh of ranks and keep training when a "
               "rank dies: checkpoint, re-plan for the ranks left, reshard, "
               "resume (every loom compile flag, and the run's)");
  return command;
}

cl::SubCommand &simulateCommand() {
  static cl::SubCommand command(
      "simulate", "Predict a model's step time and memory on a cluster, "
                  "without its weights (e.g. --cluster 8xH100-80GB --mesh "
                  "dp=16,tp=8 --mode auto)");
  return command;
}

namespace {

cl::opt<std::string>
    modelPath(cl::Positional, cl::Required, cl::desc("<MODEL.onnx>"),
              cl::sub(importCommand()), cl::sub(compileCommand()),
              cl::sub(trainCommand()), cl::sub(simulateCommand()),
              cl::cat(loomCategory()));
cl::opt<int64_t> batchFlag(
    "batch",
    cl::desc("Bind dimension 0 of every input whose batch is symbolic"),
    cl::value_desc("N"), cl::init(0), cl::sub(importCommand()),
    cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(loomCategory()));
cl::list<std::string>
    dimFlags("dim", cl::desc("Bind a named symbolic dimension"),
             cl::value_desc("NAME=N"), cl::sub(importCommand()),
             cl::sub(compileCommand()), cl::sub(trainCommand()),
             cl::sub(simulateCommand()), cl::cat(loomCategory()));
cl::list<std::string>
    shapeFlags("input-shape",
               cl::desc("Give an input's full shape, e.g. x=8x32"),
               cl::value_desc("NAME=D0xD1x..."), cl::sub(importCommand()),
               cl::sub(compileCommand()), cl::sub(trainCommand()),
               cl::sub(simulateCommand()), cl::cat(loomCategory()));
cl::list<std::string> freezeFlags(
    "freeze",
    cl::desc("Keep the matching floating-point initializers constant (not "
             "trained), e.g. --freeze 'embed.*,rope.*'; glob patterns, each "
             "must match one"),
    cl::value_desc("PATTERN,..."), cl::CommaSeparated, cl::sub(importCommand()),
    cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(loomCategory()));
cl::opt<bool> syncBatchNormFlag(
    "sync-batchnorm",
    cl::desc("Training-mode BatchNormalization takes its statistics over the "
             "global batch, all data-parallel replicas together (PyTorch's "
             "SyncBatchNorm), not per replica (DDP's default)"),
    cl::init(false), cl::sub(compileCommand()), cl::sub(trainCommand()),
    cl::sub(simulateCommand()), cl::cat(loomCategory()));

} // namespace

std::optional<pipeline::ModelInput> modelInputFromFlags(std::string &error) {
  pipeline::ModelInput model;
  model.path = modelPath;
  if (batchFlag.getNumOccurrences()) {
    if (batchFlag < 1) {
      error = "--batch must be at least 1";
      return std::nullopt;
    }
    model.batch = batchFlag;
  }
  for (const std::string &d : dimFlags) {
    StringRef name, value;
    int64_t n;
    if (!pipeline::splitAssignment(d, name, value) ||
        value.getAsInteger(10, n) || n < 1) {
      error = "--dim expects NAME=N with N at least 1, got '" + d + "'";
      return std::nullopt;
    }
    model.dims[name.str()] = n;
  }
  for (const std::string &s : shapeFlags) {
    StringRef name, value;
    if (!pipeline::splitAssignment(s, name, value)) {
      error = "--input-shape expects NAME=D0xD1x..., got '" + s + "'";
      return std::nullopt;
    }
    SmallVector<StringRef> parts;
    value.split(parts, 'x');
    std::vector<int64_t> shape;
    for (StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 1) {
        error = "--input-shape '" + s + "': '" + p.str() +
                "' is not a dimension size";
        return std::nullopt;
      }
      shape.push_back(d);
    }
    model.inputShapes[name.str()] = shape;
  }
  for (const std::string &pattern : freezeFlags) {
    if (pattern.empty()) {
      error = "--freeze has an empty pattern";
      return std::nullopt;
    }
    model.freeze.push_back(pattern);
  }
  model.syncBatchNorm = syncBatchNormFlag;
  return model;
}

} // namespace loom::driver
