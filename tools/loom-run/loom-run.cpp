//===- loom-run.cpp - Run a compiled plan, with the runtime alone ---------===//
//
// `loom run` without the compiler: no MLIR or LLVM in its link line, so it
// travels to machines that have only the runtime's libraries (the GPU
// bundle, scripts/gpu-bundle.sh). Same options, same output.
//
//===----------------------------------------------------------------------===//

#include "runtime/tool/RunOptions.h"

int main(int argc, char **argv) { return loom::rt::runMain(argc, argv); }
