//===- NodeTestCase.h - Running one ONNX node test on a backend -*- C++ -*-===//
//
// The runtime half of the ONNX node tests, shared by the in-process test
// (OnnxNodeRunTest.cpp: import, emit, run) and by `loom-node-tests`, which
// runs plans emitted ahead of time (`loom-node-test-plans`, the GPU bundle)
// with the runtime alone. Outputs are compared as ONNX's own runner does:
// |actual - expected| <= atol + rtol * |expected|, rtol 1e-3, atol 1e-7;
// integers and bools exactly; an expected NaN or infinity is matched only
// by the same (test/unit/support/Oracle.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_NODE_NODETESTCASE_H
#define LOOM_TEST_UNIT_NODE_NODETESTCASE_H

#include "runtime/Executor.h"

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace loom::nodetest {

/// "" when `actual` matches `expected`, else what differs: the shape, the
/// element type, or the count of mismatching elements and the worst.
std::string compare(const rt::TensorView &actual,
                    const rt::TensorView &expected);

/// Runs every test_data_set_* of the case in `dir` through `exec` and
/// compares the outputs; "" if all match, else the first failure. Inputs in
/// `bound` were bound to their data at compile time (NodeTestImport.h):
/// their files are not fed.
std::string runDataSets(const std::filesystem::path &dir, rt::Executor &exec,
                        const std::set<std::string> &bound = {});

/// The file beside a case's plan that lists its bound inputs, one a line.
inline constexpr const char *kBoundInputsFile = "bound_inputs.txt";

/// The known failures: "test_name  reason" lines ('#' starts a comment).
std::map<std::string, std::string>
readKnownFailures(const std::filesystem::path &file);

/// The cases of one backend's run, sorted out.
struct Summary {
  std::string backend;
  int ran = 0, passed = 0;
  /// Failures not in the known list; known failures that now pass; cases
  /// whose op or element type a non-CPU backend says it does not support.
  std::vector<std::string> unexpected, fixed, unsupported;

  /// Counts the result of case `name` ("" passed, else its failure).
  void add(const std::string &name, const std::string &failure,
           const std::map<std::string, std::string> &known);
  /// The report: one summary line, then a line per case worth naming, and
  /// the floor the run fell below, if any.
  std::string report() const;
  /// "" when the run reaches the published counts (NodeTestCounts.h): the
  /// cases imported, and those matching on the CPU or, elsewhere, on CUDA;
  /// else which it fell below.
  std::string belowFloor() const;
  /// Whether the run holds: no unexpected failure, the floors reached, and
  /// on the CPU no listed case passing.
  bool ok() const;
};

} // namespace loom::nodetest

#endif // LOOM_TEST_UNIT_NODE_NODETESTCASE_H
