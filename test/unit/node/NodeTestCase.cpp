//===- NodeTestCase.cpp - Running one ONNX node test on a backend ---------===//

#include "test/unit/node/NodeTestCase.h"
#include "test/unit/node/NodeTestCounts.h"

#include "runtime/io/TensorFile.h"
#include "test/unit/support/Oracle.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

namespace fs = std::filesystem;

namespace loom::nodetest {
namespace {

double elementAsDouble(const rt::TensorView &v, int64_t i) {
  switch (v.dtype) {
  case rt::DType::F32:
    return v.as<float>()[i];
  case rt::DType::F16:
    return rt::halfToFloat(v.as<uint16_t>()[i]);
  case rt::DType::BF16:
    return rt::bf16ToFloat(v.as<uint16_t>()[i]);
  case rt::DType::I32:
    return v.as<int32_t>()[i];
  case rt::DType::I64:
    return static_cast<double>(v.as<int64_t>()[i]);
  case rt::DType::Bool:
    return v.as<uint8_t>()[i];
  }
  return 0;
}

/// Reads a test data file. ONNX's test data stores bfloat16 tensors as their
/// UINT16 bit patterns (numpy has no bfloat16): when the tensor a plan
/// expects is BF16, such a file is read as BF16.
std::optional<rt::HostBuffer> readTestTensor(const fs::path &file,
                                             rt::DType expected,
                                             std::string &error,
                                             std::string *name = nullptr) {
  if (expected == rt::DType::BF16) {
    onnx::TensorProto proto;
    std::ifstream in(file, std::ios::binary);
    if (proto.ParseFromIstream(&in) &&
        proto.data_type() == onnx::TensorProto::UINT16) {
      proto.set_data_type(onnx::TensorProto::BFLOAT16);
      std::string bytes = proto.SerializeAsString();
      return rt::parseOnnxTensor(bytes, error, name, file.string());
    }
  }
  return rt::readOnnxTensorFile(file.string(), error, name);
}

/// The name a test data file gives its tensor ("" if none or unreadable).
std::string tensorName(const fs::path &file) {
  onnx::TensorProto proto;
  std::ifstream in(file, std::ios::binary);
  return proto.ParseFromIstream(&in) ? proto.name() : "";
}

} // namespace

std::string compare(const rt::TensorView &actual,
                    const rt::TensorView &expected) {
  if (actual.shape != expected.shape)
    return "shape " + rt::formatShape(actual.shape) + ", expected " +
           rt::formatShape(expected.shape);
  if (actual.dtype != expected.dtype)
    return std::string("element type ") + rt::dtypeName(actual.dtype) +
           ", expected " + rt::dtypeName(expected.dtype);
  auto elements = [](const rt::TensorView &v) {
    std::vector<double> out(v.numElements());
    for (int64_t i = 0; i < v.numElements(); ++i)
      out[i] = elementAsDouble(v, i);
    return out;
  };
  oracle::Tolerance tolerance = rt::isFloat(actual.dtype)
                                    ? oracle::Tolerance::allclose(1e-3, 1e-7)
                                    : oracle::Tolerance::exact();
  return oracle::compareElements(elements(actual), actual.shape,
                                 elements(expected), expected.shape, tolerance)
      .message();
}

std::string runDataSets(const fs::path &dir, rt::Executor &exec,
                        const std::set<std::string> &bound) {
  std::vector<fs::path> sets;
  for (const auto &entry : fs::directory_iterator(dir))
    if (entry.is_directory() &&
        entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty())
    return "no test data";
  std::string error;
  for (const fs::path &set : sets) {
    // Files name their input; without a name, the position among the
    // plan's inputs says which (only when none is bound).
    size_t position = 0;
    for (int k = 0;; ++k) {
      fs::path file = set / ("input_" + std::to_string(k) + ".pb");
      if (!fs::exists(file))
        break;
      std::string name = tensorName(file);
      if (bound.count(name))
        continue;
      if (name.empty() && bound.empty() && position < exec.inputs().size())
        name = exec.inputs()[position].name;
      ++position;
      auto info =
          std::find_if(exec.inputs().begin(), exec.inputs().end(),
                       [&](const rt::IOInfo &in) { return in.name == name; });
      if (info == exec.inputs().end())
        return "input file " + file.filename().string() + " names '" + name +
               "', which the plan does not take";
      std::optional<rt::HostBuffer> value =
          readTestTensor(file, info->dtype, error);
      if (!value)
        return "input: " + error;
      if (!exec.setInput(name, value->view(), error))
        return "input " + name + ": " + error;
    }
    if (!exec.run(error))
      return "run: " + error;
    for (size_t j = 0; j < exec.outputs().size(); ++j) {
      fs::path file = set / ("output_" + std::to_string(j) + ".pb");
      std::optional<rt::HostBuffer> expected =
          readTestTensor(file, exec.outputs()[j].dtype, error);
      if (!expected)
        return "expected output: " + error;
      std::string diff =
          compare(exec.output(exec.outputs()[j].name), expected->view());
      if (!diff.empty())
        return set.filename().string() + " output '" + exec.outputs()[j].name +
               "': " + diff;
    }
  }
  return "";
}

std::map<std::string, std::string> readKnownFailures(const fs::path &file) {
  std::map<std::string, std::string> known;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    size_t space = line.find_first_of(" \t");
    std::string name = line.substr(0, space);
    std::string reason =
        space == std::string::npos
            ? ""
            : line.substr(line.find_first_not_of(" \t", space));
    known[name] = reason;
  }
  return known;
}

void Summary::add(const std::string &name, const std::string &failure,
                  const std::map<std::string, std::string> &known) {
  ++ran;
  bool listed = known.count(name) != 0;
  if (failure.empty()) {
    ++passed;
    if (listed)
      fixed.push_back(name);
  } else if (backend != "cpu" &&
             (failure.find("does not support op") != std::string::npos ||
              failure.find("does not support element type") !=
                  std::string::npos)) {
    unsupported.push_back(name + ": " + failure);
  } else if (!listed) {
    unexpected.push_back(name + ": " + failure);
  }
}

std::string Summary::report() const {
  int notRun = static_cast<int>(unsupported.size());
  std::ostringstream os;
  os << "ONNX node tests run on backend '" << backend << "': " << ran
     << " imported cases, " << passed << " match, " << ran - passed - notRun
     << " fail (" << ran - passed - notRun - static_cast<int>(unexpected.size())
     << " listed in onnx_node_known_failures.txt), " << notRun
     << " use ops or types the backend does not support\n";
  for (const std::string &u : unsupported)
    os << "UNSUPPORTED " << u << "\n";
  for (const std::string &u : unexpected)
    os << "UNEXPECTED FAILURE " << u << "\n";
  for (const std::string &f : fixed)
    os << "NOW PASSES (remove from the list) " << f << "\n";
  std::string floor = belowFloor();
  if (!floor.empty())
    os << "BELOW THE FLOOR " << floor << "\n";
  return os.str();
}

std::string Summary::belowFloor() const {
  if (ran < kImportedCases)
    return std::to_string(ran) + " imported cases, fewer than the " +
           std::to_string(kImportedCases) + " README.md states";
  if (backend == "cpu" && passed < kMatchingOnCpu)
    return std::to_string(passed) + " cases match, fewer than the " +
           std::to_string(kMatchingOnCpu) + " README.md states";
  if (backend != "cpu" && passed < kMatchingOnCuda)
    return std::to_string(passed) + " cases match, fewer than the " +
           std::to_string(kMatchingOnCuda) +
           " of the last GPU check (docs/gpu.md)";
  return "";
}

bool Summary::ok() const {
  return unexpected.empty() && belowFloor().empty() &&
         (backend != "cpu" || fixed.empty());
}

} // namespace loom::nodetest
