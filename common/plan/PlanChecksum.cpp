//===- PlanChecksum.cpp - A plan's CRC-32, sealed and verified ------------===//

#include "common/plan/PlanChecksum.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <zlib.h>

namespace loom::plan {

namespace {

/// CRC-32 of the bytes written to it, kept as they pass: the serialized
/// plan is as large as the model's parameters and is never held whole.
class CrcSink : public google::protobuf::io::CopyingOutputStream {
public:
  bool Write(const void *buffer, int size) override {
    crc = crc32_z(crc, static_cast<const Bytef *>(buffer),
                  static_cast<z_size_t>(size));
    return true;
  }
  uLong crc = crc32_z(0L, Z_NULL, 0);
};

} // namespace

uint32_t planChecksum(const Plan &plan) {
  // Without the field: a copy keeps the caller's plan as it is.
  if (plan.has_crc32()) {
    Plan copy = plan;
    return checksumWithout(copy);
  }
  CrcSink sink;
  {
    google::protobuf::io::CopyingOutputStreamAdaptor adaptor(&sink);
    google::protobuf::io::CodedOutputStream out(&adaptor);
    out.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&out);
    out.Trim();
  } // the adaptor writes what it buffers into the sink as it goes
  return static_cast<uint32_t>(sink.crc);
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
