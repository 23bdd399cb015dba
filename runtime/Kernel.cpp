//===- Kernel.cpp - Kernel attribute access -------------------------------===//

#include "runtime/Kernel.h"

#include <limits>

namespace loom::rt {

std::string checkArity(std::string_view backend, std::string_view op,
                       const KernelArgs &args, int minInputs, int maxInputs,
                       int outputs) {
  int inputs = static_cast<int>(args.inputs.size());
  if (inputs >= minInputs && inputs <= maxInputs &&
      args.outputs.size() == static_cast<size_t>(outputs))
    return "";
  std::string expected = std::to_string(minInputs);
  if (maxInputs == std::numeric_limits<int>::max())
    expected = "at least " + expected;
  else if (maxInputs != minInputs)
    expected += " to " + std::to_string(maxInputs);
  return std::string(backend) + " kernel '" + std::string(op) + "' expects " +
         expected + " inputs and " + std::to_string(outputs) +
         (outputs == 1 ? " output" : " outputs") + ", got " +
         std::to_string(inputs) + " and " + std::to_string(args.outputs.size());
}

} // namespace loom::rt
