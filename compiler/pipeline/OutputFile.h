//===- OutputFile.h - Writing a compiler output, failures named -*- C++ -*-===//
//
// The compiler's outputs (the plan, --emit-mlir, --save-strategy, loom
// import's IR) go through one function that reports a write that failed (a
// full disk) as an error naming the file, where a bare LLVM stream would end
// the process with "LLVM ERROR: IO failure on output stream".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PIPELINE_OUTPUTFILE_H
#define LOOM_COMPILER_PIPELINE_OUTPUTFILE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace loom::pipeline {

/// Writes `path` ("-": standard output) with `write`; "" or the error,
/// naming the file. A regular file whose write failed is removed.
std::string writeOutputFile(const std::string &path,
                            llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace loom::pipeline

#endif // LOOM_COMPILER_PIPELINE_OUTPUTFILE_H
