//===- FrontEndFlags.h - The model-reading commands' flags ------*- C++ -*-===//
//
// The subcommands that read an ONNX model, and the flags that bind
// its symbolic dimensions, defined once. Subcommands are reached through
// functions so that options in other files can name them whatever the
// order of static initialisation.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_DRIVER_FRONTENDFLAGS_H
#define LOOM_COMPILER_DRIVER_FRONTENDFLAGS_H

#include "compiler/pipeline/CompileOptions.h"

#include "llvm/Support/CommandLine.h"

#include <optional>
#include <string>

namespace loom::driver {

llvm::cl::SubCommand &importCommand();
llvm::cl::SubCommand &compileCommand();
llvm::cl::SubCommand &simulateCommand();
/// `loom train` (TrainCommand.cpp) takes every flag of compile but -o.
llvm::cl::SubCommand &trainCommand();

/// The model's path, its bindings (--batch, --dim, --input-shape) and
/// its frozen initializers (--freeze);
/// nullopt with `error` set when a binding is malformed.
std::optional<pipeline::ModelInput> modelInputFromFlags(std::string &error);

/// The options of `loom compile` and `loom simulate` (CompileFlags.cpp);
/// nullopt with `error` set.
std::optional<pipeline::CompileOptions>
compileOptionsFromFlags(std::string &error);
/// -o of compile and simulate, and simulate's --top.
const std::string &planOutputFlag();
int topFlagValue();

} // namespace loom::driver

#endif // LOOM_COMPILER_DRIVER_FRONTENDFLAGS_H
