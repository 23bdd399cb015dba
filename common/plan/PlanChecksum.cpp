//===- PlanChecksum.cpp - A plan's CRC-32, sealed and verified ------------===//

#include "common/plan/PlanChecksum.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <zlib.h>

namespace loom::plan {

namespace {

std::string deterministicBytes(const Plan &plan) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.SetSerializationDeterministic(true);
  plan.SerializeToCodedStream(&out);
  out.Trim();
  return bytes;
}

} // namespace

uint32_t planChecksum(const Plan &plan) {
  // Without the field: a copy keeps the caller's plan as it is.
  if (plan.has_crc32()) {
    Plan copy = plan;
    return checksumWithout(copy);
  }
  std::string bytes = deterministicBytes(plan);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  return static_cast<uint32_t>(crc32_z(
      crc, reinterpret_cast<const Bytef *>(bytes.data()), bytes.size()));
}

uint32_t checksumWithout(Plan &plan) {
  bool had = plan.has_crc32();
  uint32_t saved = plan.crc32();
  plan.clear_crc32();
  uint32_t crc = planChecksum(plan);
  if (had)
    plan.set_crc32(saved);
  return crc;
}

std::optional<std::string> sealPlan(Plan &plan) {
  plan.clear_crc32();
  if (plan.ByteSizeLong() > static_cast<size_t>(INT32_MAX))
    return std::nullopt;
  plan.set_crc32(planChecksum(plan));
  std::string bytes;
  if (!plan.SerializeToString(&bytes))
    return std::nullopt;
  return bytes;
}

std::string checkPlanChecksum(Plan &plan) {
  if (!plan.has_crc32())
    return "carries no checksum (written by another tool, or by a Loom "
           "before plans had one); recompile the model";
  uint32_t crc = checksumWithout(plan);
  if (crc != plan.crc32())
    return "its contents do not match its checksum (CRC-32 " +
           std::to_string(crc) + ", the plan says " +
           std::to_string(plan.crc32()) +
           "): it was changed or damaged after it was compiled; recompile "
           "the model";
  return "";
}

} // namespace loom::plan
