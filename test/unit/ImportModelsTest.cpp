//===- ImportModelsTest.cpp - The bundled models import and verify --------===//
//
// Proves that each bundled model imports with its batch bound, that the
// result verifies and re-parses, that parameters keep their PyTorch names,
// shapes and initial values, and that a missing batch binding is a clear
// error rather than a crash.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

#include "onnx/onnx_pb.h"

using namespace loom::onnx_import;
using namespace mlir;

namespace {

std::string modelPath(const char *name) {
  return std::string(LOOM_SOURCE_DIR) + "/models/" + name;
}

struct ModelCase {
  const char *file;
  int parameters;
  int64_t parameterElements;
  std::vector<int64_t> outputShape;
};

class BundledModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(BundledModel, ImportsVerifiesAndRoundTrips) {
  const ModelCase &c = GetParam();
  DialectRegistry registry;
  loom::registerLoomDialects(registry);
  MLIRContext context(registry);
  ImportOptions options;
  options.batch = 3;
  ImportResult result = importOnnxFile(modelPath(c.file), options, context);
  ASSERT_TRUE(result.ok()) << result.message;

  auto func = *result.module->getOps<func::FuncOp>().begin();
  int params = 0;
  int64_t elements = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    if (!func.getArgAttr(i, loom::LoomDialect::kParamAttrName))
      continue;
    ++params;
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    elements += type.getNumElements();
    auto init = func.getArgAttrOfType<ElementsAttr>(
        i, loom::LoomDialect::kInitAttrName);
    ASSERT_TRUE(init) << "parameter #" << i << " has no initial value";
    EXPECT_EQ(init.getType(), type);
  }
  EXPECT_EQ(params, c.parameters);
  EXPECT_EQ(elements, c.parameterElements);
  auto resultType = cast<RankedTensorType>(func.getResultTypes()[0]);
  EXPECT_EQ(resultType.getShape(), ArrayRef<int64_t>(c.outputShape));

  // Printing and parsing again (in a fresh context, where the weight blobs
  // keep their names) gives the same module, weights included.
  std::string printed;
  llvm::raw_string_ostream os(printed);
  result.module->print(os);
  MLIRContext fresh(registry);
  OwningOpRef<ModuleOp> reparsed = parseSourceString<ModuleOp>(printed, &fresh);
  ASSERT_TRUE(reparsed);
  std::string again;
  llvm::raw_string_ostream os2(again);
  reparsed->print(os2);
  EXPECT_TRUE(printed == again) << "the module changed when re-parsed";
}

INSTANTIATE_TEST_SUITE_P(
    Models, BundledModel,
    ::testing::Values(ModelCase{"mlp.onnx", 6, 6922, {3, 10}},
                      ModelCase{"gpt.onnx", 37, 136960, {3, 64, 256}},
                      ModelCase{"gpt_opset14.onnx", 37, 136960, {3, 64, 256}},
                      ModelCase{"cnn.onnx", 20, 19994, {3, 10}},
                      ModelCase{"lstm.onnx", 18, 9893, {3, 5}},
                      ModelCase{"gru.onnx", 10, 2965, {3, 5}}),
    [](const auto &info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

TEST(ImportErrors, UnboundBatchNamesTheInputAndTheFlag) {
  DialectRegistry registry;
  loom::registerLoomDialects(registry);
  MLIRContext context(registry);
  ImportResult result = importOnnxFile(modelPath("gpt.onnx"), {}, context);
  ASSERT_EQ(result.status, ImportStatus::Unsupported);
  EXPECT_NE(result.message.find("graph input 'input_ids' dimension 0 is "
                                "symbolic ('batch')"),
            std::string::npos)
      << result.message;
  EXPECT_NE(result.message.find("--batch N"), std::string::npos);
}

TEST(ImportErrors, MissingFileIsAClearError) {
  MLIRContext context;
  ImportResult result = importOnnxFile("/nonexistent/model.onnx", {}, context);
  ASSERT_EQ(result.status, ImportStatus::InvalidModel);
  EXPECT_NE(result.message.find("/nonexistent/model.onnx: cannot read"),
            std::string::npos)
      << result.message;
}

TEST(ImportFreeze, SmallFrozenInitializersFoldAndPatternsMustMatch) {
  DialectRegistry registry;
  loom::registerLoomDialects(registry);
  MLIRContext context(registry);
  ImportOptions options;
  options.batch = 2;
  options.freeze = {"fc1.*", "fc3.bias"};
  ImportResult result = importOnnxFile(modelPath("mlp.onnx"), options, context);
  ASSERT_TRUE(result.ok()) << result.message;
  auto func = *result.module->getOps<func::FuncOp>().begin();
  // The frozen ones (at most 65,536 elements each) are folded constants,
  // not arguments; the input and the other parameters remain.
  std::vector<std::string> params;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    if (auto p = func.getArgAttrOfType<StringAttr>(
            i, loom::LoomDialect::kParamAttrName))
      params.push_back(p.str());
    EXPECT_FALSE(func.getArgAttrOfType<StringAttr>(
        i, loom::LoomDialect::kBufferAttrName));
  }
  EXPECT_EQ(params,
            (std::vector<std::string>{"fc2.weight", "fc2.bias", "fc3.weight"}));
  EXPECT_EQ(func.getNumArguments(), 4u);

  // A pattern that matches nothing is a typo: the error lists the names.
  options.freeze = {"fc4.*"};
  ImportResult bad = importOnnxFile(modelPath("mlp.onnx"), options, context);
  ASSERT_EQ(bad.status, ImportStatus::InvalidModel);
  EXPECT_NE(bad.message.find("--freeze pattern 'fc4.*' matches no "
                             "floating-point initializer; the model's are: "
                             "fc1.weight, fc1.bias"),
            std::string::npos)
      << bad.message;
}

TEST(ImportInputValues, AGivenInputIsAConstantAndIsChecked) {
  DialectRegistry registry;
  loom::registerLoomDialects(registry);
  MLIRContext context(registry);
  // Reshape's target shape as a graph input: known only when given.
  std::string model = std::string(LOOM_ONNX_NODE_TEST_DIR) +
                      "/test_reshape_reordered_all_dims/model.onnx";
  ImportResult refused = importOnnxFile(model, {}, context);
  ASSERT_EQ(refused.status, ImportStatus::Unsupported);
  EXPECT_NE(refused.message.find("(input 'shape') is computed at run time"),
            std::string::npos)
      << refused.message;

  onnx::TensorProto shape;
  shape.set_data_type(onnx::TensorProto::INT64);
  shape.add_dims(3);
  for (int64_t d : {4, 2, 3})
    shape.add_int64_data(d);
  ImportOptions options;
  options.inputValues["shape"] = shape.SerializeAsString();
  ImportResult ok = importOnnxFile(model, options, context);
  ASSERT_TRUE(ok.ok()) << ok.message;
  auto func = *ok.module->getOps<func::FuncOp>().begin();
  ASSERT_EQ(func.getNumArguments(), 1u); // `data` alone
  EXPECT_EQ(cast<RankedTensorType>(func.getResultTypes()[0]).getShape(),
            ArrayRef<int64_t>({4, 2, 3}));

  // A value of another type or shape than the input's, or for a name that
  // is not an input, is an error.
  shape.add_dims(1);
  options.inputValues["shape"] = shape.SerializeAsString();
  ImportResult badShape = importOnnxFile(model, options, context);
  ASSERT_EQ(badShape.status, ImportStatus::InvalidModel);
  EXPECT_NE(badShape.message.find("the value given for input 'shape' is "
                                  "INT64 [3, 1], which the input's declared "
                                  "type does not admit"),
            std::string::npos)
      << badShape.message;
  options.inputValues.clear();
  options.inputValues["nonesuch"] = shape.SerializeAsString();
  ImportResult badName = importOnnxFile(model, options, context);
  EXPECT_NE(badName.message.find("a value is given for 'nonesuch', which is "
                                 "not a graph input"),
            std::string::npos)
      << badName.message;
}

TEST(ImportErrors, InputShapeOverridesAndIsChecked) {
  DialectRegistry registry;
  loom::registerLoomDialects(registry);
  MLIRContext context(registry);
  ImportOptions options;
  options.inputShapes["x"] = {5, 32};
  ImportResult ok = importOnnxFile(modelPath("mlp.onnx"), options, context);
  ASSERT_TRUE(ok.ok()) << ok.message;
  auto func = *ok.module->getOps<func::FuncOp>().begin();
  EXPECT_EQ(cast<RankedTensorType>(func.getArgumentTypes()[0]).getShape(),
            ArrayRef<int64_t>({5, 32}));

  options.inputShapes["x"] = {5, 31};
  ImportResult bad = importOnnxFile(modelPath("mlp.onnx"), options, context);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message.find("node '"), std::string::npos) << bad.message;
}

// Proves a Clip whose bound is a run-time value (ONNX's test_clip feeds min
// and max as graph inputs) is rejected as unsupported, naming the node, the
// input and what is supported, and that constant or absent bounds import.
TEST(ImportErrors, ClipNeedsConstantBounds) {
  DialectRegistry registry;
  loom::registerLoomDialects(registry);
  MLIRContext context(registry);
  std::string dir = LOOM_ONNX_NODE_TEST_DIR;
  ImportResult bad = importOnnxFile(dir + "/test_clip/model.onnx", {}, context);
  ASSERT_EQ(bad.status, ImportStatus::Unsupported) << bad.message;
  for (const char *part :
       {"(Clip, opset 13): the min (input 'min') is computed at run time",
        "Loom needs Clip's bounds to be constants (or absent)"})
    EXPECT_NE(bad.message.find(part), std::string::npos) << bad.message;
  ImportResult ok = importOnnxFile(
      dir + "/test_clip_default_inbounds/model.onnx", {}, context);
  EXPECT_TRUE(ok.ok()) << ok.message;
}

} // namespace
