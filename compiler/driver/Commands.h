//===- Commands.h - The `loom` subcommands ---------------------*- C++ -*-===//
//
// Each subcommand's options live in the file that runs it; these functions
// run the subcommand the command line selected, if it is theirs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_DRIVER_COMMANDS_H
#define LOOM_COMPILER_DRIVER_COMMANDS_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

namespace loom::driver {

/// The category of every Loom option (others are hidden from --help).
llvm::cl::OptionCategory &loomCategory();

/// Prints "loom: error: MESSAGE" and returns exit code 1.
int reportError(const llvm::Twine &message);

/// `loom import` (ImportCommand.cpp), `loom compile` and `loom simulate`
/// (CompileCommand.cpp, CompileFlags.cpp).
std::optional<int> runFrontEndCommand();
/// `loom export` (ExportCommand.cpp).
std::optional<int> runExportCommand();
/// `loom train` (TrainCommand.cpp).
std::optional<int> runTrainCommand();
/// `loom reshard` (ReshardCommand.cpp).
std::optional<int> runReshardCommand();
/// `loom calibrate` (CalibrateCommand.cpp).
std::optional<int> runCalibrateCommand();
/// `loom explain` (ExplainCommand.cpp).
std::optional<int> runExplainCommand();

} // namespace loom::driver

#endif // LOOM_COMPILER_DRIVER_COMMANDS_H
