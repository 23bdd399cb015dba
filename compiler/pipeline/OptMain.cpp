//===- OptMain.cpp - loom-opt ---------------------------------------------===//
//
// mlir-opt with the loom dialect, Loom's passes and `loom-compile-pipeline`.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/LoomPipeline.h"

#include "compiler/Registration.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int loom::pipeline::optMain(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registerLoomDialects(registry);
  registerLoomPasses();
  registerLoomCompilePipeline();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
