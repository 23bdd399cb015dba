//===- ExportCommand.cpp - `loom export`: trained weights into ONNX -------===//
//
// Writes a checkpoint's parameters and buffers back into the ONNX model the
// plan was compiled from, initializer by initializer (same names, checked
// shapes and element types), so that the trained model runs anywhere ONNX
// does.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"
#include "compiler/onnx/ExportedParameters.h"

#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"

#include "llvm/Support/raw_ostream.h"

#include "onnx/onnx_pb.h"

#include <filesystem>
#include <fstream>

using namespace llvm;

namespace loom::driver {
namespace {

cl::SubCommand exportCmd("export",
                         "Write a checkpoint's trained weights back into the "
                         "ONNX model a plan was compiled from");
cl::opt<std::string> planPath(cl::Positional, cl::Required,
                              cl::desc("<MODEL.plan>"), cl::sub(exportCmd),
                              cl::cat(loomCategory()));
cl::opt<std::string> checkpointDir(
    "checkpoint",
    cl::desc("The checkpoint: a loom run --save DIR (its latest) or "
             "one of its step directories"),
    cl::value_desc("DIR"), cl::Required, cl::sub(exportCmd),
    cl::cat(loomCategory()));
cl::opt<std::string> outputPath("o", cl::desc("The ONNX file to write"),
                                cl::value_desc("MODEL.onnx"), cl::Required,
                                cl::sub(exportCmd), cl::cat(loomCategory()));
cl::opt<std::string> modelPath("model",
                               cl::desc("The ONNX model (default: the one the "
                                        "plan was compiled from)"),
                               cl::value_desc("MODEL.onnx"), cl::sub(exportCmd),
                               cl::cat(loomCategory()));

std::optional<int> onnxType(rt::DType d) {
  switch (d) {
  case rt::DType::F32:
    return onnx::TensorProto::FLOAT;
  case rt::DType::F16:
    return onnx::TensorProto::FLOAT16;
  default:
    return std::nullopt;
  }
}

std::optional<rt::DType> loomType(int onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return rt::DType::F32;
  case onnx::TensorProto::FLOAT16:
    return rt::DType::F16;
  default:
    return std::nullopt;
  }
}

int runExport() {
  std::string error;
  std::optional<plan::Plan> plan = rt::readPlanFile(planPath, error);
  if (!plan)
    return reportError(error);
  std::string source = modelPath.empty() ? plan->source() : modelPath;
  if (source.empty())
    return reportError(planPath + ": the plan does not name its model; give "
                                  "it with --model");
  onnx::ModelProto model;
  {
    std::ifstream in(source, std::ios::binary);
    if (!in || !model.ParseFromIstream(&in))
      return reportError(source + ": cannot read the ONNX model");
  }
  // The plan trains the parameters the import restored (shared values split,
  // folded views computed from their parameters): the model written has
  // them too, so that it computes what the trained plan does.
  std::vector<std::string> restored;
  if (std::string e = onnx_import::restoreExportedParameters(
          *model.mutable_graph(),
          std::filesystem::path(source).parent_path().string(), restored);
      !e.empty())
    return reportError(source + ": " + e);
  std::optional<rt::CheckpointManifest> ckpt =
      rt::openCheckpoint(checkpointDir, error);
  if (!ckpt)
    return reportError(error);
  // The tensors the plan trains and keeps: parameters and buffers, of
  // every pipeline stage.
  std::map<std::string, bool> wanted;
  for (const plan::Stage &stage : plan->stages())
    for (const plan::Value &v : stage.program().values())
      if (v.kind() == plan::Value::PARAMETER || v.kind() == plan::Value::BUFFER)
        wanted[v.name()] = false;
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    auto it = wanted.find(init.name());
    if (it == wanted.end())
      continue;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    std::optional<rt::DType> modelType = loomType(init.data_type());
    std::optional<rt::CheckpointEntry> entry =
        ckpt->entryOf(init.name(), modelType.value_or(rt::DType::F32), dims);
    if (!entry)
      return reportError(ckpt->dir + "/manifest.json: has no '" + init.name() +
                         "', which the plan trains");
    std::string file = ckpt->dir + "/manifest.json: '" + init.name() + "'";
    std::optional<rt::HostBuffer> value =
        rt::readCheckpointTensor(*ckpt, *entry, error);
    if (!value)
      return reportError(error);
    std::optional<int> type = onnxType(value->dtype);
    if (value->shape != dims || !type || *type != init.data_type())
      return reportError(file + ": " + rt::dtypeName(value->dtype) +
                         rt::formatShape(value->shape) +
                         " does not match the model's initializer '" +
                         init.name() + "'");
    init.clear_float_data();
    init.clear_int32_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(value->bytes.data(), value->bytes.size());
    it->second = true;
  }
  for (const auto &[name, found] : wanted)
    if (!found)
      return reportError(source + ": has no initializer '" + name +
                         "' for the plan's parameter");
  std::ofstream out(outputPath, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out))
    return reportError("cannot write '" + outputPath + "'");
  outs() << "loom: wrote " << wanted.size() << " trained tensors from "
         << ckpt->dir << " (step " << ckpt->step << ") into " << outputPath
         << "\n";
  return 0;
}

} // namespace

std::optional<int> runExportCommand() {
  if (exportCmd)
    return runExport();
  return std::nullopt;
}

} // namespace loom::driver
