//===- loom-opt.cpp - The MLIR pass driver with Loom's dialect and passes -===//

#include "compiler/Registration.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  loom::registerLoomDialects(registry);
  loom::registerLoomPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
