//===- Kernel.cpp - Kernel attribute access -------------------------------===//

#include "runtime/Kernel.h"

#include "common/ops/KernelScratch.h"

#include <atomic>
#include <cstdint>
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

namespace {
std::atomic<size_t> heapBytesTaken{0};
} // namespace

size_t ScratchPool::heapBytesOfAllPools() { return heapBytesTaken.load(); }

void *ScratchPool::takeBytes(size_t bytes) {
  constexpr size_t align = static_cast<size_t>(ops::kScratchAlign);
  const size_t rounded = (bytes + align - 1) / align * align;
  if (next) {
    auto at = reinterpret_cast<uintptr_t>(next);
    unsigned char *aligned = next + (align - at % align) % align;
    if (aligned <= end && static_cast<size_t>(end - aligned) >= rounded) {
      next = aligned + rounded;
      return aligned;
    }
  }
  // Over-allocated by an alignment so that the part starts aligned.
  heap.push_back(std::make_unique<unsigned char[]>(rounded + align));
  onHeap += rounded + align;
  heapBytesTaken += rounded + align;
  auto at = reinterpret_cast<uintptr_t>(heap.back().get());
  return heap.back().get() + (align - at % align) % align;
}

} // namespace loom::rt
