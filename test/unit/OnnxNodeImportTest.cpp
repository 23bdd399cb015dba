//===- OnnxNodeImportTest.cpp - Import every ONNX backend node test -------===//
//
// Proves that every model in ONNX's backend node tests either imports (and
// verifies) or is rejected on purpose as unsupported: "failed" (an invalid
// model or an internal error) must be zero, because those models are valid,
// and as many must import as README.md states (NodeTestCounts.h). Prints the
// counts, and why models were rejected, grouped. Inputs that must be known at
// compile time are bound to their data (NodeTestImport.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "test/unit/node/NodeTestCounts.h"
#include "test/unit/node/NodeTestImport.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <map>

using namespace loom::onnx_import;

namespace {

/// The part of a rejection message that says why, without the file, the
/// node and the names it quotes, so that equal reasons group together:
/// "Op: why" for a node's refusal, "why" for the model's.
std::string reasonOf(std::string message, const std::string &file) {
  if (message.rfind(file + ": ", 0) == 0)
    message = message.substr(file.size() + 2);
  std::string op;
  if (message.rfind("node '", 0) == 0) {
    size_t paren = message.find("' (");
    size_t comma = message.find(',', paren);
    size_t colon = message.find("): ", paren);
    if (paren != std::string::npos && comma != std::string::npos &&
        colon != std::string::npos) {
      op = message.substr(paren + 3, comma - paren - 3);
      message = message.substr(colon + 3);
    }
  }
  // Quoted names ('x', 'blocks.0.q') become '...'.
  std::string elided;
  for (size_t i = 0; i < message.size(); ++i) {
    size_t close =
        message[i] == '\'' ? message.find('\'', i + 1) : std::string::npos;
    if (close == std::string::npos) {
      elided += message[i];
      continue;
    }
    elided += "'...'";
    i = close;
  }
  message = elided;
  if (message.rfind("operator ", 0) == 0)
    message = message.substr(0, message.find(" is not supported")) +
              " is not supported";
  return op.empty() ? message : op + ": " + message;
}

TEST(OnnxNodeTests, EveryModelImportsOrIsRejectedOnPurpose) {
  namespace fs = std::filesystem;
  fs::path root = LOOM_ONNX_NODE_TEST_DIR;
  ASSERT_TRUE(fs::is_directory(root)) << root << " is missing; install "
                                      << "libonnx-testdata";
  std::vector<fs::path> models;
  for (const auto &entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx"))
      models.push_back(entry.path() / "model.onnx");
  std::sort(models.begin(), models.end());
  ASSERT_GT(models.size(), 900u);

  mlir::DialectRegistry registry;
  loom::registerLoomDialects(registry);
  int imported = 0, withBound = 0, unsupported = 0, failed = 0;
  std::map<std::string, int> reasons;
  std::vector<std::string> failures;
  for (const fs::path &model : models) {
    mlir::MLIRContext context(registry);
    std::set<std::string> bound;
    ImportResult result =
        loom::nodetest::importNodeTest(model.parent_path(), context, bound);
    switch (result.status) {
    case ImportStatus::Ok:
      ++imported;
      withBound += !bound.empty();
      break;
    case ImportStatus::Unsupported:
      ++unsupported;
      ++reasons[reasonOf(result.message, model.string())];
      break;
    default:
      ++failed;
      failures.push_back(std::string(statusName(result.status)) + ": " +
                         result.message);
    }
  }
  std::cout << "ONNX node tests: " << models.size() << " models, " << imported
            << " imported (" << withBound
            << " with shape, axes or bound inputs bound to their data at "
               "compile time), "
            << unsupported << " rejected as unsupported, " << failed
            << " failed\n";
  std::cout << "Rejections by reason:\n";
  for (const auto &[reason, count] : reasons)
    std::cout << "  " << count << "  " << reason << "\n";
  for (const std::string &f : failures)
    std::cout << "FAILED " << f << "\n";
  EXPECT_EQ(failed, 0);
  EXPECT_GE(imported, loom::nodetest::kImportedCases)
      << "fewer models import than README.md states";
  EXPECT_EQ(imported + unsupported + failed, static_cast<int>(models.size()));
}

} // namespace
