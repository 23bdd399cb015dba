//===- LoomMain.cpp - The `loom` command line -----------------------------===//
//
// Subcommands as in DESIGN.md section 8.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/LoomMain.h"
#include "compiler/driver/Commands.h"

#include "runtime/tool/RunOptions.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <string_view>
#include <vector>

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
/// `loom run` is the runtime's run tool (runtime/tool/RunOptions.h), which
/// `loom-run` is too: its arguments go to it unparsed. It is declared here so
/// that `loom --help` lists it.
cl::SubCommand runCmd("run", "Run a compiled plan");
} // namespace

int loomMain(int argc, char **argv) {
  if (argc > 1 && std::string_view(argv[1]) == "run") {
    std::vector<const char *> args{"loom run"};
    args.insert(args.end(), argv + 2, argv + argc);
    return rt::runMain(static_cast<int>(args.size()), args.data());
  }
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
      "  loom reshard CKPT [--to PLAN] -o DIR\n"
      "  loom train MODEL.onnx --mesh ... --steps N --save DIR [--comm mpi]\n"
      "  loom calibrate -o PROFILE.json [--ranks N] [--quick]\n"
      "  loom explain MODEL.plan [--top N]\n"
      "  loom simulate MODEL.onnx --cluster PROFILE --mesh dp=8,tp=8 --mode "
      "auto [--train ...]\n\n"
      "Run `loom SUBCOMMAND --help` for a subcommand's options.\n");
  if (std::optional<int> rc = runFrontEndCommand())
    return *rc;
  if (std::optional<int> rc = runExportCommand())
    return *rc;
  if (std::optional<int> rc = runReshardCommand())
    return *rc;
  if (std::optional<int> rc = runTrainCommand())
    return *rc;
  if (std::optional<int> rc = runCalibrateCommand())
    return *rc;
  if (std::optional<int> rc = runExplainCommand())
    return *rc;
  errs() << "loom: no subcommand given; run `loom --help`\n";
  return 1;
}

} // namespace loom::driver
