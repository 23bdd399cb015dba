//===- LoomMain.cpp - The `loom` command line -----------------------------===//
//
// Subcommands as in DESIGN.md section 8. Those not built yet say so and exit
// with status 2; `import` is the front door that works today.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/LoomMain.h"

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "passes/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;
using namespace mlir;

namespace loom::driver {
namespace {

cl::OptionCategory loomCategory("Loom options");

//===--- import ---------------------------------------------------------===//

cl::SubCommand importCmd("import",
                         "Import an ONNX model into the loom dialect (MLIR)");
cl::opt<std::string> importInput(cl::Positional, cl::Required,
                                 cl::desc("<MODEL.onnx>"), cl::sub(importCmd),
                                 cl::cat(loomCategory));
cl::opt<std::string> importOutput("o",
                                  cl::desc("Output file (default: stdout)"),
                                  cl::value_desc("OUT.mlir"), cl::init("-"),
                                  cl::sub(importCmd), cl::cat(loomCategory));
cl::opt<int64_t> importBatch(
    "batch",
    cl::desc("Bind dimension 0 of every input whose batch is symbolic"),
    cl::value_desc("N"), cl::init(0), cl::sub(importCmd),
    cl::cat(loomCategory));
cl::list<std::string> importDims("dim",
                                 cl::desc("Bind a named symbolic dimension"),
                                 cl::value_desc("NAME=N"), cl::sub(importCmd),
                                 cl::cat(loomCategory));
cl::list<std::string>
    importShapes("input-shape",
                 cl::desc("Give an input's full shape, e.g. x=8x32"),
                 cl::value_desc("NAME=D0xD1x..."), cl::sub(importCmd),
                 cl::cat(loomCategory));
cl::opt<bool> importNoWeights(
    "no-weights", cl::desc("Leave out initial parameter values (shapes only)"),
    cl::sub(importCmd), cl::cat(loomCategory));
cl::opt<bool> importLocations(
    "locations",
    cl::desc("Print each op's location: the ONNX node it came from"),
    cl::sub(importCmd), cl::cat(loomCategory));
cl::opt<bool> importFuse(
    "fuse",
    cl::desc("Run the import clean-up passes (fuse decomposed layer norms)"),
    cl::sub(importCmd), cl::cat(loomCategory));

//===--- commands not built yet ------------------------------------------===//

cl::SubCommand compileCmd("compile", "Compile a model into a partitioned plan "
                                     "[not implemented yet]");
cl::SubCommand runCmd("run", "Run a compiled plan [not implemented yet]");
cl::SubCommand explainCmd("explain", "Explain a plan's strategies and costs "
                                     "[not implemented yet]");
cl::SubCommand simulateCmd("simulate",
                           "Predict step time and memory on a cluster "
                           "[not implemented yet]");
cl::SubCommand calibrateCmd("calibrate",
                            "Measure a hardware profile of this machine "
                            "[not implemented yet]");
cl::SubCommand exportCmd("export",
                         "Write trained weights back into an ONNX model "
                         "[not implemented yet]");
cl::list<std::string> plannedArgs(cl::Sink, cl::sub(compileCmd),
                                  cl::sub(runCmd), cl::sub(explainCmd),
                                  cl::sub(simulateCmd), cl::sub(calibrateCmd),
                                  cl::sub(exportCmd));

int error(const Twine &message) {
  WithColor::error(errs(), "loom") << message << "\n";
  return 1;
}

/// Parses "NAME=VALUE" into its two halves.
bool splitAssignment(StringRef text, StringRef &name, StringRef &value) {
  std::tie(name, value) = text.split('=');
  return !name.empty() && !value.empty() && text.contains('=');
}

int runImport() {
  onnx_import::ImportOptions options;
  if (importBatch.getNumOccurrences()) {
    if (importBatch < 1)
      return error("--batch must be at least 1");
    options.batch = importBatch;
  }
  for (const std::string &d : importDims) {
    StringRef name, value;
    int64_t n;
    if (!splitAssignment(d, name, value) || value.getAsInteger(10, n) || n < 1)
      return error("--dim expects NAME=N with N at least 1, got '" + d + "'");
    options.dims[name] = n;
  }
  for (const std::string &s : importShapes) {
    StringRef name, value;
    if (!splitAssignment(s, name, value))
      return error("--input-shape expects NAME=D0xD1x..., got '" + s + "'");
    SmallVector<StringRef> parts;
    value.split(parts, 'x');
    SmallVector<int64_t> shape;
    for (StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 1)
        return error("--input-shape '" + s + "': '" + p +
                     "' is not a dimension size");
      shape.push_back(d);
    }
    options.inputShapes[name] = shape;
  }
  options.withWeights = !importNoWeights;

  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  onnx_import::ImportResult result =
      onnx_import::importOnnxFile(importInput, options, context);
  if (result.status == onnx_import::ImportStatus::InternalError)
    return error(result.message + "\nThis is a bug in Loom; please report it "
                                  "with the model.");
  if (!result.ok())
    return error(result.message);

  if (importFuse) {
    PassManager pm(&context);
    pm.addNestedPass<func::FuncOp>(createFuseLayerNorm());
    if (failed(pm.run(*result.module)))
      return error("the import clean-up passes failed");
  }

  std::string errorMessage;
  auto output = mlir::openOutputFile(importOutput, &errorMessage);
  if (!output)
    return error(errorMessage);
  OpPrintingFlags flags;
  if (importLocations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  result.module->print(output->os(), flags);
  output->os() << "\n";
  output->keep();

  // A summary for people, when the IR went to a file.
  if (importOutput != "-") {
    std::map<std::string, int> histogram;
    result.module->walk([&](Operation *op) {
      if (isa<LoomDialect>(op->getDialect()))
        ++histogram[op->getName().stripDialect().str()];
    });
    auto func = *result.module->getOps<func::FuncOp>().begin();
    int params = 0;
    int64_t paramElements = 0;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, LoomDialect::kParamAttrName)) {
        ++params;
        paramElements += cast<RankedTensorType>(func.getArgument(i).getType())
                             .getNumElements();
      }
    outs() << "loom: imported " << importInput << " into " << importOutput
           << ": " << params << " parameters (" << paramElements
           << " elements); ops:";
    for (auto &[name, count] : histogram)
      outs() << " " << name << "=" << count;
    outs() << "\n";
  }
  return 0;
}

} // namespace

int loomMain(int argc, char **argv) {
  cl::HideUnrelatedOptions(loomCategory);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "loom " << LOOM_VERSION << " (MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom: an auto-parallel compiler for deep-learning training\n\n"
      "  loom import MODEL.onnx [-o OUT.mlir] [--batch N]   works today\n"
      "  loom compile | run | explain | simulate | calibrate | export\n"
      "                                                     not implemented "
      "yet\n\n"
      "Run `loom SUBCOMMAND --help` for a subcommand's options.\n");
  if (importCmd)
    return runImport();
  for (cl::SubCommand *planned : {&compileCmd, &runCmd, &explainCmd,
                                  &simulateCmd, &calibrateCmd, &exportCmd})
    if (*planned) {
      WithColor::error(errs(), "loom")
          << "'loom " << planned->getName()
          << "' is not implemented yet. Today Loom imports models: "
             "`loom import MODEL.onnx -o OUT.mlir`.\n";
      return 2;
    }
  errs() << "loom: no subcommand given; run `loom --help`\n";
  return 1;
}

} // namespace loom::driver
