//===- ExportCommand.cpp - `loom export`: trained weights into ONNX -------===//
//
// Writes a checkpoint's parameters and buffers back into the ONNX model the
// plan was compiled from, initializer by initializer (same names, checked
// shapes and element types), so that the trained model runs anywhere ONNX
// does; and, with --state-dict, as a PyTorch state dict in an .npz archive
// (the source module's names and layouts; see docs/python.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"
#include "compiler/onnx/ExportedParameters.h"

#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/io/Npz.h"

#include "llvm/Support/raw_ostream.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>
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
                                cl::value_desc("MODEL.onnx"),
                                cl::sub(exportCmd), cl::cat(loomCategory()));
cl::opt<std::string> stateDictPath(
    "state-dict",
    cl::desc("Also (or only) write the trained tensors as a PyTorch state "
             "dict: an .npz archive under the source module's names and "
             "layouts, for model.load_state_dict({k: torch.from_numpy(v) "
             "for k, v in numpy.load(FILE).items()}, strict=True)"),
    cl::value_desc("FILE.npz"), cl::sub(exportCmd), cl::cat(loomCategory()));
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

/// The module path of an ONNX node name as torch.onnx.export writes it
/// ("/blocks/blocks.0/attn/q/MatMul" -> "blocks.0.attn.q": a container's
/// child repeats the container's name), or "" at the top level.
std::string modulePath(StringRef node) {
  SmallVector<StringRef> parts;
  node.split(parts, '/', -1, /*KeepEmpty=*/false);
  if (!parts.empty())
    parts.pop_back(); // the op
  SmallVector<StringRef> path;
  for (StringRef p : parts) {
    if (!path.empty() && p.starts_with((path.back() + ".").str()))
      path.back() = p;
    else
      path.push_back(p);
  }
  return llvm::join(path, ".");
}

/// The state-dict key of a trained initializer and whether its value is the
/// transpose of the module's tensor. A parameter keeps its name; a tensor
/// with an exporter's name is an nn.Linear weight the export folded into its
/// transpose (every reader a MatMul taking it as its right operand, inside
/// one module): "<module>.weight". Else "" with `error` set.
std::string stateDictKey(const onnx::GraphProto &graph, const std::string &name,
                         bool &transposed, std::string &error) {
  transposed = false;
  if (onnx_import::isParameterName(name))
    return name;
  std::string module;
  bool ok = true;
  for (const onnx::NodeProto &node : graph.node())
    for (int i = 0; i < node.input_size(); ++i) {
      if (node.input(i) != name)
        continue;
      std::string path = modulePath(node.name());
      ok &= node.op_type() == "MatMul" && i == 1 && !path.empty() &&
            (module.empty() || module == path);
      module = path;
    }
  if (!ok || module.empty()) {
    error = "the trained tensor '" + name +
            "' has no name of the source model's and is no folded nn.Linear "
            "weight, so it has no state-dict key; export the model with "
            "do_constant_folding=False";
    return "";
  }
  transposed = true;
  return module + ".weight";
}

/// `value` transposed (a 2-D tensor).
rt::HostBuffer transpose2d(const rt::HostBuffer &value) {
  rt::HostBuffer out = value;
  const int64_t rows = value.shape[0], cols = value.shape[1];
  const size_t size = rt::dtypeSize(value.dtype);
  out.shape = {cols, rows};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out.bytes[(c * rows + r) * size],
                  &value.bytes[(r * cols + c) * size], size);
  return out;
}

int runExport() {
  std::string error;
  if (outputPath.empty() && stateDictPath.empty())
    return reportError("loom export writes an ONNX model (-o MODEL.onnx), a "
                       "state dict (--state-dict FILE.npz) or both: give one");
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
  std::vector<std::pair<std::string, rt::HostBuffer>> stateDict;
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
    if (!stateDictPath.empty()) {
      bool transposed = false;
      std::string key =
          stateDictKey(model.graph(), init.name(), transposed, error);
      if (key.empty())
        return reportError(source + ": " + error);
      stateDict.emplace_back(key, transposed && value->shape.size() == 2
                                      ? transpose2d(*value)
                                      : std::move(*value));
    }
  }
  for (const auto &[name, found] : wanted)
    if (!found)
      return reportError(source + ": has no initializer '" + name +
                         "' for the plan's parameter");
  if (!outputPath.empty()) {
    std::ofstream out(outputPath, std::ios::binary);
    if (!out || !model.SerializeToOstream(&out))
      return reportError("cannot write '" + outputPath + "'");
    outs() << "loom: wrote " << wanted.size() << " trained tensors from "
           << ckpt->dir << " (step " << ckpt->step << ") into " << outputPath
           << "\n";
  }
  if (stateDictPath.empty())
    return 0;
  // BatchNorm's count of the batches its statistics saw, which PyTorch keeps
  // beside them: the forwards this checkpoint trained (each micro-batch's),
  // counted from 0.
  const int64_t forwards =
      ckpt->step * std::max<int64_t>(1, plan->schedule().micro_batches());
  std::vector<std::pair<std::string, rt::HostBuffer>> counts;
  for (const auto &[key, value] : stateDict)
    if (StringRef(key).ends_with(".running_mean")) {
      rt::HostBuffer count;
      count.dtype = rt::DType::I64;
      count.bytes.resize(sizeof(int64_t));
      std::memcpy(count.bytes.data(), &forwards, sizeof(int64_t));
      counts.emplace_back(
          StringRef(key).drop_back(strlen("running_mean")).str() +
              "num_batches_tracked",
          std::move(count));
    }
  for (auto &c : counts)
    stateDict.push_back(std::move(c));
  std::vector<std::pair<std::string, rt::TensorView>> views;
  for (auto &[key, value] : stateDict)
    views.emplace_back(key, value.view());
  if (!rt::writeNpz(stateDictPath, views, error))
    return reportError(error);
  outs() << "loom: wrote " << views.size() << " tensors of the state dict from "
         << ckpt->dir << " (step " << ckpt->step << ") into " << stateDictPath
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
