//===- NodeTestImport.h - Importing one ONNX node test ----------*- C++ -*-===//
//
// The compile-time half of the ONNX node tests, shared by the import test,
// the in-process run test and `loom-node-test-plans`. Loom compiles static
// shapes, so an input that carries a shape, axes or a bound must be known
// when the model is compiled. The node tests feed such inputs as data; when
// the importer says it needs one of them known (naming the input), the
// input is bound to its value from the case's data, if every data set gives
// the same value, and the import is tried again. The run then feeds only
// the inputs that were not bound.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_NODE_NODETESTIMPORT_H
#define LOOM_TEST_UNIT_NODE_NODETESTIMPORT_H

#include "compiler/onnx/OnnxImporter.h"

#include <filesystem>
#include <set>
#include <string>

namespace loom::nodetest {

/// Imports the node test in `dir`; `bound` receives the inputs bound to
/// their data (empty when the model imports as it is).
onnx_import::ImportResult importNodeTest(const std::filesystem::path &dir,
                                         mlir::MLIRContext &context,
                                         std::set<std::string> &bound);

} // namespace loom::nodetest

#endif // LOOM_TEST_UNIT_NODE_NODETESTIMPORT_H
