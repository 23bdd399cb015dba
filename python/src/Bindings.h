//===- Bindings.h - The native half of Loom's Python package ----*- C++ -*-===//
//
// `loom._loom`, the extension the Python package `loom` is built on: the
// compiler as a function (options in, a serialized plan out, its progress
// lines to a callback) and a Job that runs a plan's ranks in this process.
// Loom's errors cross as Python exceptions carrying Loom's message:
// CompileError from the compiler, RunError from the runtime, ValueError
// for arguments that are wrong before anything runs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PYTHON_SRC_BINDINGS_H
#define LOOM_PYTHON_SRC_BINDINGS_H

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

namespace loom::python {

/// The compiler rejected the model or the options (loom.CompileError).
struct CompileFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// The runtime failed to load or run a plan (loom.RunError).
struct RunFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void bindCompile(pybind11::module_ &m);
void bindJob(pybind11::module_ &m);

} // namespace loom::python

#endif // LOOM_PYTHON_SRC_BINDINGS_H
