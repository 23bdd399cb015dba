//===- LoomMain.h - The `loom` command line ---------------------*- C++ -*-===//

#ifndef LOOM_COMPILER_DRIVER_LOOMMAIN_H
#define LOOM_COMPILER_DRIVER_LOOMMAIN_H

namespace loom::driver {
/// Runs the `loom` CLI; returns the process exit code.
int loomMain(int argc, char **argv);
} // namespace loom::driver

#endif // LOOM_COMPILER_DRIVER_LOOMMAIN_H
