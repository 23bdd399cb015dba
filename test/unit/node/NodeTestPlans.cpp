//===- NodeTestPlans.cpp - The ONNX node tests as plans, ahead of time ----===//
//
// `loom-node-test-plans OUT_DIR`: every ONNX node test the importer accepts
// is emitted as OUT_DIR/<test>/model.plan exactly as OnnxNodeRunTest.cpp
// emits it, next to a copy of its test_data_set_* folders, so that
// `loom-node-tests` can run the same oracle with the runtime alone (the GPU
// bundle, scripts/gpu-bundle.sh).
//
//===----------------------------------------------------------------------===//

#include "common/plan/PlanChecksum.h"
#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "compiler/plan/PlanEmitter.h"
#include "test/unit/node/NodeTestCase.h"
#include "test/unit/node/NodeTestImport.h"

#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace fs = std::filesystem;
using namespace loom;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: loom-node-test-plans OUT_DIR\n";
    return 2;
  }
  fs::path root = LOOM_ONNX_NODE_TEST_DIR, out = argv[1];
  std::vector<fs::path> dirs;
  for (const auto &entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx"))
      dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  mlir::DialectRegistry registry;
  registerLoomDialects(registry);
  int written = 0, notImported = 0, notEmitted = 0;
  for (const fs::path &dir : dirs) {
    mlir::MLIRContext context(registry);
    std::set<std::string> bound;
    onnx_import::ImportResult result =
        nodetest::importNodeTest(dir, context, bound);
    if (!result.ok()) {
      ++notImported;
      continue;
    }
    std::string error;
    std::optional<plan::Plan> plan = emitPlan(*result.module, error);
    if (!plan) {
      // The in-process test reports these as failures; so will the runner,
      // which finds no plan for a case with data.
      ++notEmitted;
      std::cerr << dir.filename().string() << ": emit: " << error << "\n";
    }
    fs::path caseDir = out / dir.filename();
    fs::create_directories(caseDir);
    if (plan) {
      std::optional<std::string> bytes = plan::sealPlan(*plan);
      std::ofstream file(caseDir / "model.plan", std::ios::binary);
      if (!bytes || !(file << *bytes)) {
        std::cerr << "cannot write " << (caseDir / "model.plan") << "\n";
        return 1;
      }
    }
    if (!bound.empty()) {
      std::ofstream list(caseDir / nodetest::kBoundInputsFile);
      for (const std::string &name : bound)
        list << name << "\n";
    }
    for (const auto &entry : fs::directory_iterator(dir))
      if (entry.is_directory())
        fs::copy(entry.path(), caseDir / entry.path().filename(),
                 fs::copy_options::recursive |
                     fs::copy_options::overwrite_existing);
    ++written;
  }
  std::cout << "loom-node-test-plans: " << written << " cases in " << out
            << " (" << notEmitted << " without a plan), " << notImported
            << " not imported\n";
  return 0;
}
