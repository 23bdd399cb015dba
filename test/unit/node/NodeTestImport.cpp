//===- NodeTestImport.cpp - Importing one ONNX node test ------------------===//

#include "test/unit/node/NodeTestImport.h"

#include "onnx/onnx_pb.h"

#include <fstream>
#include <map>
#include <optional>
#include <regex>
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

} // namespace

onnx_import::ImportResult importNodeTest(const fs::path &dir,
                                         mlir::MLIRContext &context,
                                         std::set<std::string> &bound) {
  // "... (input 'NAME') is computed at run time; Loom needs it to be a
  // constant ...": the importer's words for an input it needs known.
  static const std::regex needsKnown(
      R"(input '([^']+)'\)? (is computed at run time|must be a constant))");
  onnx_import::ImportOptions options;
  bound.clear();
  std::string model = (dir / "model.onnx").string();
  for (;;) {
    onnx_import::ImportResult result =
        onnx_import::importOnnxFile(model, options, context);
    std::smatch match;
    if (result.ok() ||
        result.status != onnx_import::ImportStatus::Unsupported ||
        !std::regex_search(result.message, match, needsKnown))
      return result;
    std::string name = match[1];
    std::optional<std::string> value;
    if (bound.count(name) || !(value = sameValueInEverySet(dir, name)))
      return result;
    options.inputValues[name] = *value;
    bound.insert(name);
  }
}

} // namespace loom::nodetest
