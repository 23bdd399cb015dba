//===- ImportCommand.cpp - `loom import` ----------------------------------===//
//
// Imports an ONNX model into the loom dialect and prints it, with a summary
// of its parameters and ops when the IR goes to a file.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"
#include "compiler/driver/FrontEndFlags.h"

#include "compiler/Registration.h"
#include "compiler/pipeline/Compiler.h"
#include "compiler/pipeline/OutputFile.h"
#include "dialects/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;
using namespace mlir;

namespace loom::driver {
namespace {

cl::opt<std::string> importOutput("o",
                                  cl::desc("Output file (default: stdout)"),
                                  cl::value_desc("OUT.mlir"), cl::init("-"),
                                  cl::sub(importCommand()),
                                  cl::cat(loomCategory()));
cl::opt<bool> noWeights("no-weights",
                        cl::desc("Leave out initial parameter values (shapes "
                                 "only)"),
                        cl::sub(importCommand()), cl::cat(loomCategory()));
cl::opt<bool>
    printLocations("locations",
                   cl::desc("Print each op's location: the ONNX node it came "
                            "from"),
                   cl::sub(importCommand()), cl::cat(loomCategory()));
cl::opt<bool> fuse(
    "fuse",
    cl::desc("Run the import clean-up passes (fuse decomposed layer norms)"),
    cl::sub(importCommand()), cl::cat(loomCategory()));

/// "loom: imported M into F: P parameters (E elements); ops: a=1 b=2".
void printSummary(ModuleOp module, StringRef model) {
  std::map<std::string, int> histogram;
  module->walk([&](Operation *op) {
    if (isa<LoomDialect>(op->getDialect()))
      ++histogram[op->getName().stripDialect().str()];
  });
  auto func = *module.getOps<func::FuncOp>().begin();
  int params = 0;
  int64_t paramElements = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, LoomDialect::kParamAttrName)) {
      ++params;
      paramElements += cast<RankedTensorType>(func.getArgument(i).getType())
                           .getNumElements();
    }
  outs() << "loom: imported " << model << " into " << importOutput << ": "
         << params << " parameters (" << paramElements << " elements); ops:";
  for (auto &[name, count] : histogram)
    outs() << " " << name << "=" << count;
  outs() << "\n";
}

} // namespace

int runImport() {
  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  std::string error;
  std::optional<pipeline::ModelInput> model = modelInputFromFlags(error);
  if (!model)
    return reportError(error);
  OwningOpRef<ModuleOp> module = pipeline::importModel(
      context, *model, !noWeights, /*withBuffers=*/false, error, &errs());
  if (!module)
    return reportError(error);
  if (fuse && failed(pipeline::runImportCleanup(*module)))
    return reportError("the import clean-up passes failed");

  OpPrintingFlags flags;
  if (printLocations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  if (std::string e = pipeline::writeOutputFile(importOutput,
                                                [&](raw_ostream &os) {
                                                  module->print(os, flags);
                                                  os << "\n";
                                                });
      !e.empty())
    return reportError(e);

  // A summary for people, when the IR went to a file.
  if (importOutput != "-")
    printSummary(*module, model->path);
  return 0;
}

} // namespace loom::driver
