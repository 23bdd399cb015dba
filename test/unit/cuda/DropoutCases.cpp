//===- DropoutCases.cpp - Conformance cases: dropout ----------------------===//
//
// dropout's mask is a Philox draw at each element's global index, written
// once (common/ops/Philox.h) for both backends: the CUDA results must equal
// the CPU's bit for bit, on a whole tensor and on a rank's block of a
// larger one (the block's offsets shift every index), with an index offset
// (a micro-batch's), in every float type, and without a step (the
// identity).
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

namespace loom::rt::conformance {

void addDropoutCases(std::vector<CaseSpec> &cases) {
  struct Variant {
    const char *name;
    Shape shape;
    std::optional<GlobalBlock> block;
    double ratio;
    bool step;
    int64_t indexOffset = 0;
  };
  const std::vector<Variant> variants = {
      {"half", {37, 129}, std::nullopt, 0.5, true},
      {"tenth", {4, 5, 67}, std::nullopt, 0.1, true},
      // Rows 4..8 and columns 6..12 of an [8, 12] tensor.
      {"block", {4, 6}, GlobalBlock{{8, 12}, {4, 6}}, 0.3, true},
      {"block3d", {2, 3, 5}, GlobalBlock{{4, 3, 10}, {2, 0, 5}}, 0.5, true},
      {"no_step", {7, 9}, std::nullopt, 0.5, false},
      // Micro-batch 3 of a step: indices shifted by 3 micro-batches.
      {"offset_block", {4, 6}, GlobalBlock{{8, 12}, {4, 6}}, 0.5, true, 288},
  };
  for (DType dtype : kFloatTypes)
    for (const Variant &v : variants) {
      if (dtype != DType::F32 && std::string(v.name) != "half")
        continue;
      addCase(cases, "dropout", v.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("ratio", static_cast<double>(static_cast<float>(v.ratio)));
        c.attrs.set("seed", int64_t(0x5eed0123456789));
        if (v.indexOffset)
          c.attrs.set("index_offset", v.indexOffset);
        c.inputs = {uniform(dtype, v.shape, rng)};
        if (v.step)
          c.inputs.push_back(scalar(DType::F32, 3));
        c.outputs = {{dtype, v.shape}};
        c.block = v.block;
        c.tolerance = exact();
        return c;
      });
    }
}

} // namespace loom::rt::conformance
