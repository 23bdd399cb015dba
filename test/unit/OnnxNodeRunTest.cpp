//===- OnnxNodeRunTest.cpp - Run the ONNX node tests Loom imports ---------===//
//
// Proves the CPU backend computes what ONNX specifies: every ONNX backend
// node test that the importer accepts is compiled to a plan, run on each of
// its data sets, and compared with the expected outputs as ONNX's own runner
// does (|actual - expected| <= atol + rtol * |expected|, rtol 1e-3, atol
// 1e-7; integers and bools exactly). Cases that still fail must be listed,
// with their reason, in onnx_node_known_failures.txt; a listed case that
// passes must be removed from the list.
//
// Built a second time with LOOM_NODE_TEST_BACKEND="cuda" (test/unit/cuda),
// the same oracle runs on the CUDA backend; there a case whose op or
// element type the backend does not support (it says so by name) is
// counted and listed, not failed.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "compiler/plan/PlanEmitter.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/io/TensorFile.h"

#include "mlir/IR/MLIRContext.h"
#include "onnx/onnx_pb.h"
#include "gtest/gtest.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#ifndef LOOM_NODE_TEST_BACKEND
#define LOOM_NODE_TEST_BACKEND "cpu"
#endif

namespace fs = std::filesystem;
using namespace loom;

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

/// "" when `actual` matches `expected`, else the first mismatch.
std::string compare(const rt::TensorView &actual,
                    const rt::TensorView &expected) {
  if (actual.shape != expected.shape)
    return "shape " + rt::formatShape(actual.shape) + ", expected " +
           rt::formatShape(expected.shape);
  if (actual.dtype != expected.dtype)
    return std::string("element type ") + rt::dtypeName(actual.dtype) +
           ", expected " + rt::dtypeName(expected.dtype);
  bool exact = !rt::isFloat(actual.dtype);
  for (int64_t i = 0; i < actual.numElements(); ++i) {
    double a = elementAsDouble(actual, i), e = elementAsDouble(expected, i);
    if (std::isnan(e) && std::isnan(a))
      continue;
    if (std::isinf(e) && a == e)
      continue;
    bool ok = exact ? a == e : std::fabs(a - e) <= 1e-7 + 1e-3 * std::fabs(e);
    if (!ok)
      return "element " + std::to_string(i) + " is " + std::to_string(a) +
             ", expected " + std::to_string(e);
  }
  return "";
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

/// Runs one node test; "" if every data set matches.
std::string runCase(const fs::path &dir, mlir::DialectRegistry &registry,
                    rt::Backend &backend, bool &imported) {
  mlir::MLIRContext context(registry);
  onnx_import::ImportResult result =
      onnx_import::importOnnxFile((dir / "model.onnx").string(), {}, context);
  imported = result.ok();
  if (!imported)
    return "";
  std::string error;
  std::optional<plan::Plan> plan = emitPlan(*result.module, error);
  if (!plan)
    return "emit: " + error;
  std::unique_ptr<rt::Executor> exec =
      rt::Executor::create(std::move(*plan), backend, error);
  if (!exec)
    return "load: " + error;
  std::vector<fs::path> sets;
  for (const auto &entry : fs::directory_iterator(dir))
    if (entry.is_directory() &&
        entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty())
    return "no test data";
  for (const fs::path &set : sets) {
    for (size_t i = 0; i < exec->inputs().size(); ++i) {
      std::string name;
      fs::path file = set / ("input_" + std::to_string(i) + ".pb");
      std::optional<rt::HostBuffer> value =
          readTestTensor(file, exec->inputs()[i].dtype, error, &name);
      if (!value)
        return "input: " + error;
      // Files name their input; fall back to the position.
      if (name.empty())
        name = exec->inputs()[i].name;
      if (!exec->setInput(name, value->view(), error))
        return "input " + name + ": " + error;
    }
    if (!exec->run(error))
      return "run: " + error;
    for (size_t j = 0; j < exec->outputs().size(); ++j) {
      fs::path file = set / ("output_" + std::to_string(j) + ".pb");
      std::optional<rt::HostBuffer> expected =
          readTestTensor(file, exec->outputs()[j].dtype, error);
      if (!expected)
        return "expected output: " + error;
      std::string diff =
          compare(exec->output(exec->outputs()[j].name), expected->view());
      if (!diff.empty())
        return set.filename().string() + " output '" + exec->outputs()[j].name +
               "': " + diff;
    }
  }
  return "";
}

/// Reads "test_name  reason" lines ('#' starts a comment).
std::map<std::string, std::string> readKnownFailures() {
  std::map<std::string, std::string> known;
  std::ifstream in(std::string(LOOM_SOURCE_DIR) +
                   "/test/unit/onnx_node_known_failures.txt");
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

TEST(OnnxNodeTests, ImportedCasesRunAndMatchTheExpectedOutputs) {
  fs::path root = LOOM_ONNX_NODE_TEST_DIR;
  ASSERT_TRUE(fs::is_directory(root));
  std::vector<fs::path> dirs;
  for (const auto &entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx"))
      dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());

  mlir::DialectRegistry registry;
  registerLoomDialects(registry);
  const std::string backendName = LOOM_NODE_TEST_BACKEND;
  std::string error;
  std::unique_ptr<rt::Backend> backend =
      rt::createBackend(backendName, 0, error);
  ASSERT_TRUE(backend) << error;
  std::map<std::string, std::string> known = readKnownFailures();
  int ran = 0, passed = 0;
  std::vector<std::string> unexpected, fixed, unsupported;
  for (const fs::path &dir : dirs) {
    bool imported = false;
    std::string failure = runCase(dir, registry, *backend, imported);
    if (!imported)
      continue;
    ++ran;
    std::string name = dir.filename().string();
    bool listed = known.count(name) != 0;
    if (failure.empty()) {
      ++passed;
      if (listed)
        fixed.push_back(name);
    } else if (backendName != "cpu" &&
               (failure.find("does not support op") != std::string::npos ||
                failure.find("does not support element type") !=
                    std::string::npos)) {
      unsupported.push_back(name + ": " + failure);
    } else if (!listed) {
      unexpected.push_back(name + ": " + failure);
    }
  }
  int notRun = static_cast<int>(unsupported.size());
  std::cout << "ONNX node tests run on backend '" << backendName << "': " << ran
            << " imported cases, " << passed << " match, "
            << ran - passed - notRun << " fail ("
            << ran - passed - notRun - static_cast<int>(unexpected.size())
            << " listed in onnx_node_known_failures.txt), " << notRun
            << " use ops or types the backend does not support\n";
  for (const std::string &u : unsupported)
    std::cout << "UNSUPPORTED " << u << "\n";
  for (const std::string &u : unexpected)
    std::cout << "UNEXPECTED FAILURE " << u << "\n";
  for (const std::string &f : fixed)
    std::cout << "NOW PASSES (remove from the list) " << f << "\n";
  EXPECT_TRUE(unexpected.empty());
  if (backendName == "cpu") {
    EXPECT_TRUE(fixed.empty());
    EXPECT_GT(ran, 150);
  } else {
    EXPECT_GT(passed, 100);
  }
}

} // namespace
