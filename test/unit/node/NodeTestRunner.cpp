//===- NodeTestRunner.cpp - ONNX node tests from plans, runtime alone -----===//
//
// `loom-node-tests [--backend cpu|cuda] CASES_DIR KNOWN_FAILURES`: runs the
// cases `loom-node-test-plans` wrote (a plan and its data sets per folder)
// on one backend and judges them as OnnxNodeRunTest.cpp does (a case
// without a plan fails). Prints the summary; exits 0 when the run holds, 1
// when it does not, 77 (skipped) when the backend has no device here.
//
//===----------------------------------------------------------------------===//

#include "test/unit/node/NodeTestCase.h"

#include "runtime/Backend.h"

#include <algorithm>
#include <fstream>
#include <iostream>

namespace fs = std::filesystem;
using namespace loom;

int main(int argc, char **argv) {
  std::string backendName = "cpu";
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--backend" && i + 1 < argc)
      backendName = argv[++i];
    else
      positional.push_back(arg);
  }
  if (positional.size() != 2) {
    std::cerr << "usage: loom-node-tests [--backend cpu|cuda] CASES_DIR "
                 "KNOWN_FAILURES\n";
    return 2;
  }
  std::string error;
  if (backendName == "cuda" && rt::cudaDeviceCount(error) == 0) {
    std::cout << "skipped: " << error << "\n";
    return 77;
  }
  std::unique_ptr<rt::Backend> backend =
      rt::createBackend(backendName, 0, error);
  if (!backend) {
    std::cerr << "loom-node-tests: " << error << "\n";
    return 1;
  }
  std::vector<fs::path> dirs;
  for (const auto &entry : fs::directory_iterator(positional[0]))
    if (entry.is_directory())
      dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  std::map<std::string, std::string> known =
      nodetest::readKnownFailures(positional[1]);
  nodetest::Summary summary;
  summary.backend = backendName;
  for (const fs::path &dir : dirs) {
    std::string failure;
    if (!fs::exists(dir / "model.plan")) {
      failure = "no plan (the emitter failed when the bundle was made)";
    } else if (std::optional<plan::Plan> plan =
                   rt::readPlanFile((dir / "model.plan").string(), error)) {
      std::unique_ptr<rt::Executor> exec =
          rt::Executor::create(std::move(*plan), *backend, error);
      // The inputs bound at compile time (NodeTestImport.h), if any.
      std::set<std::string> bound;
      std::ifstream list(dir / nodetest::kBoundInputsFile);
      for (std::string name; std::getline(list, name);)
        if (!name.empty())
          bound.insert(name);
      failure =
          exec ? nodetest::runDataSets(dir, *exec, bound) : "load: " + error;
    } else {
      failure = "load: " + error;
    }
    summary.add(dir.filename().string(), failure, known);
  }
  std::cout << summary.report();
  return summary.ok() ? 0 : 1;
}
