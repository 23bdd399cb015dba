//===- ExplainCommand.cpp - `loom explain`: a plan's strategies and costs -===//
//
// Prints the explanation a compiled plan carries (compiler/explain/Explain.h):
// per ONNX node the layouts chosen, the compute, communication and memory
// terms, and the runner-up the search beat; the predicted step time and
// memory per device.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"

#include "compiler/explain/Explain.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom::driver {
namespace {

cl::SubCommand explainCmd("explain",
                          "Explain a plan: per ONNX node its layouts, "
                          "predicted costs and the runner-up it beat");
cl::opt<std::string> planPath(cl::Positional, cl::Required,
                              cl::desc("<MODEL.plan>"), cl::sub(explainCmd),
                              cl::cat(loomCategory()));
cl::opt<int> topFlag("top",
                     cl::desc("List only the N nodes with the largest "
                              "predicted time (0: every node, in program "
                              "order)"),
                     cl::value_desc("N"), cl::init(0), cl::sub(explainCmd),
                     cl::cat(loomCategory()));

int runExplain() {
  std::string error;
  std::optional<plan::Plan> plan = rt::readPlanFile(planPath, error);
  if (!plan)
    return reportError(error);
  // Checked as loom run checks it: the explanation's indices into the
  // program are trusted only after the program is.
  std::unique_ptr<rt::Backend> cpu = rt::createCpuBackend();
  if (std::string bad = rt::validatePlan(*plan, *cpu); !bad.empty())
    return reportError(planPath + ": invalid plan: " + bad);
  if (topFlag < 0)
    return reportError("--top must be at least 0");
  std::string title = "plan " + planPath;
  if (!plan->source().empty())
    title += " (from " + plan->source() + ")";
  explain::PrintOptions options;
  options.top = topFlag;
  explain::printExplanation(*plan, title, options, outs());
  return 0;
}

} // namespace

std::optional<int> runExplainCommand() {
  if (explainCmd)
    return runExplain();
  return std::nullopt;
}

} // namespace loom::driver
