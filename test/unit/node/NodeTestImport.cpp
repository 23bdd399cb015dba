//===- NodeTestImport.cpp - Importing one ONNX node test ------------------===//

#include "test/unit/node/NodeTestImport.h"

#include "onnx/onnx_pb.h"

#include <fstream>
#include <map>
#include <optional>
#include <sstream>

namespace fs = std::filesystem;

namespace loom::nodetest {
namespace {

/// The serialized value of input `name` in every data set of `dir`, if all
/// give the same one.
std::optional<std::string> sameValueInEverySet(const fs::path &dir,
                                               const std::string &name) {
  std::optional<std::string> value;
  for (const auto &set : fs::directory_iterator(dir)) {
    if (!set.is_directory() ||
        set.path().filename().string().rfind("test_data_set_", 0) != 0)
      continue;
    std::optional<std::string> found;
    for (int k = 0;; ++k) {
      fs::path file = set.path() / ("input_" + std::to_string(k) + ".pb");
      if (!fs::exists(file))
        break;
      std::ifstream in(file, std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      onnx::TensorProto proto;
      if (proto.ParseFromString(bytes.str()) && proto.name() == name) {
        found = bytes.str();
        break;
      }
    }
    if (!found || (value && *value != *found))
      return std::nullopt;
    value = found;
  }
  return value;
}

/// Whether `message` is the importer's refusal of an input it needs known,
/// "... (input 'NAME') is computed at run time ...", and which input.
bool inputNeededKnown(const std::string &message, std::string &name) {
  static const std::string start = "(input '",
                           end = "') is computed at run time";
  size_t at = message.find(end);
  if (at == std::string::npos)
    return false;
  size_t open = message.rfind(start, at);
  if (open == std::string::npos)
    return false;
  name = message.substr(open + start.size(), at - open - start.size());
  return !name.empty() && name.find('\'') == std::string::npos;
}

} // namespace

onnx_import::ImportResult importNodeTest(const fs::path &dir,
                                         mlir::MLIRContext &context,
                                         std::set<std::string> &bound) {
  onnx_import::ImportOptions options;
  bound.clear();
  std::string model = (dir / "model.onnx").string();
  for (;;) {
    onnx_import::ImportResult result =
        onnx_import::importOnnxFile(model, options, context);
    std::string name;
    if (result.ok() ||
        result.status != onnx_import::ImportStatus::Unsupported ||
        !inputNeededKnown(result.message, name))
      return result;
    std::optional<std::string> value;
    if (bound.count(name) || !(value = sameValueInEverySet(dir, name)))
      return result;
    options.inputValues[name] = *value;
    bound.insert(name);
  }
}

} // namespace loom::nodetest
