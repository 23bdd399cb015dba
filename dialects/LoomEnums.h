//===- LoomEnums.h - The loom dialect's enumerated annotations --*- C++ -*-===//
//
// The enums of LoomAttrs.td (the pipeline schedule, the per-step scalars,
// the phase boundaries) with their spellings: stringify*, symbolize* and
// the *Attr classes' values. A header of its own, so that the compiler's
// options take the enums without the whole dialect.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_LOOMENUMS_H
#define LOOM_DIALECTS_LOOMENUMS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

#include "dialects/LoomEnums.h.inc"

namespace loom {

/// An option modifier, as llvm::cl::values, that takes every value of an
/// enum of LoomAttrs.td under its spelling: the options of passes and
/// pipelines then share the dialect's spellings, e.g.
///   Option<PipelineSchedule> schedule{*this, "schedule",
///       EnumSpellings<PipelineSchedule, symbolizePipelineSchedule>()};
template <typename EnumT, std::optional<EnumT> (*Symbolize)(uint32_t)>
struct EnumSpellings {
  template <typename OptionT> void apply(OptionT &option) const {
    for (uint32_t i = 0; std::optional<EnumT> value = Symbolize(i); ++i)
      option.getParser().addLiteralOption(stringifyEnum(*value), *value,
                                          stringifyEnum(*value));
  }
};

} // namespace loom

#endif // LOOM_DIALECTS_LOOMENUMS_H
