//===- Registration.h - Registers Loom's dialects and passes ---*- C++ -*-===//

#ifndef LOOM_COMPILER_REGISTRATION_H
#define LOOM_COMPILER_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace loom {
/// Adds every dialect a Loom program uses (loom, func) to `registry`.
void registerLoomDialects(mlir::DialectRegistry &registry);
/// Registers Loom's passes and pipelines with the global pass registry.
void registerLoomPasses();
} // namespace loom

#endif // LOOM_COMPILER_REGISTRATION_H
