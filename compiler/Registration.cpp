//===- Registration.cpp - Registers Loom's dialects and passes ------------===//

#include "compiler/Registration.h"

#include "dialects/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

void loom::registerLoomDialects(mlir::DialectRegistry &registry) {
  registry.insert<loom::LoomDialect, mlir::func::FuncDialect>();
}

void loom::registerLoomPasses() {
  registerLoomTransformsPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
}
