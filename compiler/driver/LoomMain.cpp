//===- LoomMain.cpp - The `loom` command line -----------------------------===//
//
// Subcommands as in DESIGN.md section 8. Those not built yet say so and exit
// with status 2.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/LoomMain.h"
#include "compiler/driver/Commands.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom::driver {

cl::OptionCategory &loomCategory() {
  static cl::OptionCategory category("Loom options");
  return category;
}

int reportError(const Twine &message) {
  WithColor::error(errs(), "loom") << message << "\n";
  return 1;
}

namespace {

cl::SubCommand explainCmd("explain", "Explain a plan's strategies and costs "
                                     "[not implemented yet]");
cl::SubCommand simulateCmd("simulate",
                           "Predict step time and memory on a cluster "
                           "[not implemented yet]");
cl::list<std::string> plannedArgs(cl::Sink, cl::sub(explainCmd),
                                  cl::sub(simulateCmd));

} // namespace

int loomMain(int argc, char **argv) {
  cl::HideUnrelatedOptions(loomCategory());
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "loom " << LOOM_VERSION << " (MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom: an auto-parallel compiler for deep-learning training\n\n"
      "  loom import MODEL.onnx [-o OUT.mlir] [--batch N]\n"
      "  loom compile MODEL.onnx -o MODEL.plan [--batch N]\n"
      "  loom compile MODEL.onnx --train --optimizer adamw --lr 1e-3 ...\n"
      "  loom run MODEL.plan [--inputs NAME=FILE,...] [--outputs DIR]\n"
      "  loom run TRAIN.plan --steps N --data ... [--save DIR] [--resume DIR]\n"
      "  loom export TRAIN.plan --checkpoint DIR -o TRAINED.onnx\n"
      "  loom calibrate -o PROFILE.json [--ranks N] [--quick]\n"
      "  loom explain | simulate   not implemented yet\n\n"
      "Run `loom SUBCOMMAND --help` for a subcommand's options.\n");
  if (std::optional<int> rc = runFrontEndCommand())
    return *rc;
  if (std::optional<int> rc = runRunCommand())
    return *rc;
  if (std::optional<int> rc = runExportCommand())
    return *rc;
  if (std::optional<int> rc = runCalibrateCommand())
    return *rc;
  for (cl::SubCommand *planned : {&explainCmd, &simulateCmd})
    if (*planned) {
      WithColor::error(errs(), "loom")
          << "'loom " << planned->getName()
          << "' is not implemented yet. Today Loom compiles models for one "
             "device or a mesh, and runs them: `loom compile MODEL.onnx "
             "--mesh dp=2,tp=2 --mode auto -o MODEL.plan --emit-mlir "
             "MODEL.mlir`, `loom run MODEL.plan`.\n";
      return 2;
    }
  errs() << "loom: no subcommand given; run `loom --help`\n";
  return 1;
}

} // namespace loom::driver
