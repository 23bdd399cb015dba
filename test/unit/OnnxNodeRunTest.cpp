//===- OnnxNodeRunTest.cpp - Run the ONNX node tests Loom imports ---------===//
//
// Proves the CPU backend computes what ONNX specifies: every ONNX backend
// node test that the importer accepts is compiled to a plan, run on each of
// its data sets, and compared with the expected outputs as ONNX's own runner
// does (|actual - expected| <= atol + rtol * |expected|, rtol 1e-3, atol
// 1e-7; integers and bools exactly: node/NodeTestCase.h). Cases that still
// fail must be listed, with their reason, in onnx_node_known_failures.txt; a
// listed case that passes must be removed from the list; and the cases run
// and matching must reach the counts README.md states (NodeTestCounts.h).
//
// Built a second time with LOOM_NODE_TEST_BACKEND="cuda" (test/unit/cuda),
// the same oracle runs on the CUDA backend; there a case whose op or
// element type the backend does not support (it says so by name) is
// counted and listed, not failed, and the matching cases must reach the
// last GPU check's count (docs/gpu.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "compiler/plan/PlanEmitter.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "test/unit/node/NodeTestCase.h"
#include "test/unit/node/NodeTestImport.h"

#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <iostream>
#include <map>

#ifndef LOOM_NODE_TEST_BACKEND
#define LOOM_NODE_TEST_BACKEND "cpu"
#endif

namespace fs = std::filesystem;
using namespace loom;

namespace {

/// Runs one node test; "" if every data set matches.
std::string runCase(const fs::path &dir, mlir::DialectRegistry &registry,
                    rt::Backend &backend, bool &imported) {
  mlir::MLIRContext context(registry);
  std::set<std::string> bound;
  onnx_import::ImportResult result =
      nodetest::importNodeTest(dir, context, bound);
  imported = result.ok();
  if (!imported)
    return "";
  std::string error;
  std::optional<plan::Plan> plan = emitPlan(*result.module, error);
  if (!plan)
    return "emit: " + error;
  std::unique_ptr<rt::Executor> exec =
      rt::Executor::create(std::move(*plan), backend, error);
  if (!exec)
    return "load: " + error;
  return nodetest::runDataSets(dir, *exec, bound);
}

TEST(OnnxNodeTests, ImportedCasesRunAndMatchTheExpectedOutputs) {
  fs::path root = LOOM_ONNX_NODE_TEST_DIR;
  ASSERT_TRUE(fs::is_directory(root));
  std::vector<fs::path> dirs;
  for (const auto &entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx"))
      dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());

  mlir::DialectRegistry registry;
  registerLoomDialects(registry);
  const std::string backendName = LOOM_NODE_TEST_BACKEND;
  std::string error;
  std::unique_ptr<rt::Backend> backend =
      rt::createBackend(backendName, 0, error);
  ASSERT_TRUE(backend) << error;
  std::map<std::string, std::string> known = nodetest::readKnownFailures(
      std::string(LOOM_SOURCE_DIR) + "/test/unit/onnx_node_known_failures.txt");
  nodetest::Summary summary;
  summary.backend = backendName;
  for (const fs::path &dir : dirs) {
    bool imported = false;
    std::string failure = runCase(dir, registry, *backend, imported);
    if (imported)
      summary.add(dir.filename().string(), failure, known);
  }
  std::cout << summary.report();
  EXPECT_TRUE(summary.unexpected.empty());
  EXPECT_EQ(summary.belowFloor(), "");
  EXPECT_TRUE(summary.ok());
}

} // namespace
