//===- Module.cpp - loom._loom: the extension module ----------------------===//

#include "python/src/Bindings.h"

namespace py = pybind11;

PYBIND11_MODULE(_loom, m) {
  m.doc() = "Loom's compiler and runtime, in process (use the `loom` "
            "package rather than this module)";
  py::register_exception<loom::python::CompileFailure>(m, "CompileError");
  py::register_exception<loom::python::RunFailure>(m, "RunError");
  loom::python::bindCompile(m);
  loom::python::bindJob(m);
}
