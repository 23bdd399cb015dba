//===- CompileOptions.cpp - The options' spellings ------------------------===//
//
// Each enum's spellings, the one table both ways: parsing a flag and
// naming the value in plans, summaries and the MLIR pass options. The
// schedule's are the dialect's (LoomAttrs.td).
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/CompileOptions.h"

#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cmath>
#include <utility>

using llvm::StringRef;

namespace loom::pipeline {
namespace {

template <typename E, size_t N>
using Spellings = std::array<std::pair<E, const char *>, N>;

constexpr Spellings<ShardingMode, 3> kModes = {{{ShardingMode::Data, "data"},
                                                {ShardingMode::Semi, "semi"},
                                                {ShardingMode::Auto, "auto"}}};
constexpr Spellings<Precision, 3> kPrecisions = {{{Precision::F32, "f32"},
                                                  {Precision::BF16, "bf16"},
                                                  {Precision::F16, "f16"}}};
constexpr Spellings<Loss, 2> kLosses = {
    {{Loss::CrossEntropy, "cross_entropy"}, {Loss::Mse, "mse"}}};
constexpr Spellings<Optimizer, 4> kOptimizers = {
    {{Optimizer::Sgd, "sgd"},
     {Optimizer::Momentum, "momentum"},
     {Optimizer::Adam, "adam"},
     {Optimizer::AdamW, "adamw"}}};
constexpr Spellings<LrSchedule, 2> kLrSchedules = {
    {{LrSchedule::Constant, "constant"}, {LrSchedule::Cosine, "cosine"}}};
constexpr Spellings<Init, 2> kInits = {
    {{Init::Onnx, "onnx"}, {Init::Seeded, "seeded"}}};

template <typename E, size_t N>
StringRef spell(const Spellings<E, N> &table, E value) {
  for (const auto &[e, text] : table)
    if (e == value)
      return text;
  return "";
}

template <typename E, size_t N>
std::optional<E> lookup(const Spellings<E, N> &table, StringRef text) {
  for (const auto &[e, spelling] : table)
    if (text == spelling)
      return e;
  return std::nullopt;
}

} // namespace

StringRef toString(ShardingMode mode) { return spell(kModes, mode); }
StringRef toString(Schedule schedule) {
  return stringifyPipelineSchedule(schedule);
}
StringRef toString(Precision precision) {
  return spell(kPrecisions, precision);
}
StringRef toString(Loss loss) { return spell(kLosses, loss); }
StringRef toString(Optimizer optimizer) {
  return spell(kOptimizers, optimizer);
}
StringRef toString(LrSchedule schedule) {
  return spell(kLrSchedules, schedule);
}

std::optional<ShardingMode> parseShardingMode(StringRef text,
                                              std::string &error) {
  if (auto mode = lookup(kModes, text))
    return mode;
  error = "--mode must be data, semi or auto, got '" + text.str() + "'";
  return std::nullopt;
}

std::optional<Schedule> parseSchedule(StringRef text, std::string &error) {
  if (auto schedule = symbolizePipelineSchedule(text))
    return schedule;
  error =
      "--schedule must be gpipe, 1f1b or interleaved, got '" + text.str() + "'";
  return std::nullopt;
}

std::optional<Precision> parsePrecision(StringRef text, std::string &error) {
  if (auto precision = lookup(kPrecisions, text))
    return precision;
  error = "--precision must be f32, bf16 or f16, not '" + text.str() + "'";
  return std::nullopt;
}

std::optional<Loss> parseLoss(StringRef text, std::string &error) {
  if (auto loss = lookup(kLosses, text))
    return loss;
  error = "--loss must be cross_entropy or mse, got '" + text.str() + "'";
  return std::nullopt;
}

std::optional<Optimizer> parseOptimizer(StringRef text, std::string &error) {
  if (auto optimizer = lookup(kOptimizers, text))
    return optimizer;
  error = "--optimizer must be sgd, momentum, adam or adamw, got '" +
          text.str() + "'";
  return std::nullopt;
}

std::optional<LrSchedule> parseLrSchedule(StringRef text, std::string &error) {
  if (auto schedule = lookup(kLrSchedules, text))
    return schedule;
  error = "--lr-schedule must be constant or cosine";
  return std::nullopt;
}

std::optional<Init> parseInit(StringRef text, std::string &error) {
  if (auto init = lookup(kInits, text))
    return init;
  error = "--init must be onnx or seeded";
  return std::nullopt;
}

std::optional<int> parseZero(StringRef text, std::string &error) {
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '3')
    return text[0] - '0';
  error = "--zero must be 0, 1, 2 or 3, got '" + text.str() + "'";
  return std::nullopt;
}

std::optional<int64_t> parseBucketMb(double megabytes, std::string &error) {
  if (!(megabytes >= 0) || megabytes > 1e6) {
    error = "--bucket-mb must be between 0 and 1e6 MiB, got " +
            std::to_string(megabytes);
    return std::nullopt;
  }
  return static_cast<int64_t>(std::llround(megabytes * (1 << 20)));
}

int64_t pipelineStages(StringRef mesh) {
  llvm::SmallVector<StringRef> axes;
  mesh.split(axes, ',');
  for (StringRef axis : axes) {
    StringRef name, value;
    int64_t size = 0;
    if (splitAssignment(axis.trim(), name, value) && name == "pp" &&
        !value.getAsInteger(10, size))
      return size;
  }
  return 1;
}

bool splitAssignment(StringRef text, StringRef &name, StringRef &value) {
  std::tie(name, value) = text.split('=');
  return !name.empty() && !value.empty() && text.contains('=');
}

} // namespace loom::pipeline
