//===- OutputFile.cpp - Writing a compiler output, failures named ---------===//

#include "compiler/pipeline/OutputFile.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"

namespace loom::pipeline {

std::string writeOutputFile(
    const std::string &path,
    llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(path, &error);
  if (!output)
    return error;
  write(output->os());
  output->os().flush();
  if (!output->os().has_error()) {
    output->keep();
    return "";
  }
  std::string message =
      path + ": cannot write: " + output->os().error().message();
  output->os().clear_error();
  // Only a regular file is removed (never a device such as /dev/full).
  if (!llvm::sys::fs::is_regular_file(path))
    output->keep();
  return message;
}

} // namespace loom::pipeline
