//===- ExportedParametersTest.cpp - Exporters' parameter changes undone ---===//
//
// Proves restoreExportedParameters' rules on hand-built graphs: an Identity
// named after a parameter becomes a parameter of its own (and a direct reuse
// stays one tie); a folded transpose, reshape, cast or leading rows of
// exactly one parameter becomes that op on the parameter; a tensor that
// views several parameters is refused naming them; a uniform tensor stays
// a constant; and each case is reported.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/ExportedParameters.h"

#include "gtest/gtest.h"

#include "onnx/onnx_pb.h"

#include <numeric>

using namespace loom::onnx_import;

namespace {

/// A FLOAT initializer of `shape` holding `values`.
void addFloats(onnx::GraphProto &g, const std::string &name,
               std::vector<int64_t> shape, std::vector<float> values) {
  onnx::TensorProto &t = *g.add_initializer();
  t.set_name(name);
  t.set_data_type(onnx::TensorProto_DataType_FLOAT);
  for (int64_t d : shape)
    t.add_dims(d);
  for (float v : values)
    t.add_float_data(v);
}

std::vector<float> iota(int n, float start = 0.5f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

/// A node `op` reading `inputs`, writing `output`.
onnx::NodeProto &addNode(onnx::GraphProto &g, const std::string &op,
                         std::vector<std::string> inputs,
                         const std::string &output) {
  onnx::NodeProto &n = *g.add_node();
  n.set_op_type(op);
  n.set_name("/" + output + "/" + op);
  for (auto &in : inputs)
    n.add_input(in);
  n.add_output(output);
  return n;
}

bool hasInitializer(const onnx::GraphProto &g, const std::string &name) {
  for (const auto &t : g.initializer())
    if (t.name() == name)
      return true;
  return false;
}

const onnx::NodeProto *producer(const onnx::GraphProto &g,
                                const std::string &value) {
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      if (o == value)
        return &n;
  return nullptr;
}

TEST(ExportedParameters, ParameterNames) {
  EXPECT_TRUE(isParameterName("fc.weight"));
  EXPECT_TRUE(isParameterName("layers.0.norm1.bias"));
  EXPECT_TRUE(isParameterName("scale"));
  EXPECT_FALSE(isParameterName("onnx::MatMul_12"));
  EXPECT_FALSE(isParameterName("/fc/Gemm_output_0"));
  EXPECT_FALSE(isParameterName("fc..weight"));
  EXPECT_FALSE(isParameterName("fc.weight."));
  EXPECT_FALSE(isParameterName("0.weight"));
  EXPECT_FALSE(isParameterName(""));
}

TEST(ExportedParameters, SharedValueBecomesParameterOfItsOwn) {
  onnx::GraphProto g;
  addFloats(g, "ln0.weight", {4}, {1, 1, 1, 1});
  addNode(g, "Identity", {"ln0.weight"}, "ln1.weight");
  addNode(g, "Mul", {"x", "ln1.weight"}, "y");
  addNode(g, "Mul", {"y", "ln0.weight"}, "z");
  std::vector<std::string> notes;
  EXPECT_EQ(restoreExportedParameters(g, "", notes), "");
  EXPECT_TRUE(hasInitializer(g, "ln1.weight"));
  EXPECT_EQ(producer(g, "ln1.weight"), nullptr) << "the Identity stays";
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'ln1.weight'"), std::string::npos) << notes[0];
}

TEST(ExportedParameters, ValueNamesAndOutputsAreNotSplit) {
  onnx::GraphProto g;
  addFloats(g, "w", {2}, {1, 2});
  addNode(g, "Identity", {"w"}, "/scope/Identity_output_0");
  addNode(g, "Identity", {"w"}, "logits");
  g.add_output()->set_name("logits");
  std::vector<std::string> notes;
  EXPECT_EQ(restoreExportedParameters(g, "", notes), "");
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(g.node_size(), 2);
}

TEST(ExportedParameters, FoldedTransposeIsComputedFromItsParameter) {
  onnx::GraphProto g;
  // wte [3, 2] and its transpose [2, 3] as the export folds it.
  addFloats(g, "wte.weight", {3, 2}, {1, 2, 3, 4, 5, 6});
  addFloats(g, "onnx::MatMul_7", {2, 3}, {1, 3, 5, 2, 4, 6});
  addNode(g, "MatMul", {"h", "onnx::MatMul_7"}, "logits");
  std::vector<std::string> notes;
  EXPECT_EQ(restoreExportedParameters(g, "", notes), "");
  EXPECT_FALSE(hasInitializer(g, "onnx::MatMul_7"));
  const onnx::NodeProto *t = producer(g, "onnx::MatMul_7");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->op_type(), "Transpose");
  EXPECT_EQ(t->input(0), "wte.weight");
  ASSERT_EQ(t->attribute_size(), 1);
  EXPECT_EQ(t->attribute(0).ints_size(), 2);
  EXPECT_EQ(t->attribute(0).ints(0), 1);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("transpose"), std::string::npos) << notes[0];
  // The new node comes before its reader.
  EXPECT_EQ(g.node(0).op_type(), "Transpose");
}

TEST(ExportedParameters, ReshapeCastAndLeadingRows) {
  onnx::GraphProto g;
  addFloats(g, "pos.weight", {4, 2}, iota(8));
  addFloats(g, "onnx::Add_1", {2, 2}, iota(4));          // pos(arange(2))
  addFloats(g, "onnx::Add_2", {1, 4, 2}, iota(8));       // unsqueezed
  addFloats(g, "bias", {3}, {0.25f, -1.5f, 2.0f});
  {
    onnx::TensorProto &h = *g.add_initializer();      // bias as FLOAT16
    h.set_name("onnx::Mul_3");
    h.set_data_type(onnx::TensorProto_DataType_FLOAT16);
    h.add_dims(3);
    for (uint16_t bits : {uint16_t(0x3400), uint16_t(0xBE00), uint16_t(0x4000)})
      h.add_int32_data(bits);
  }
  addNode(g, "Add", {"x", "onnx::Add_1"}, "a");
  addNode(g, "Add", {"a", "onnx::Add_2"}, "b");
  addNode(g, "Mul", {"b", "onnx::Mul_3"}, "c");
  std::vector<std::string> notes;
  EXPECT_EQ(restoreExportedParameters(g, "", notes), "");
  EXPECT_EQ(notes.size(), 3u);
  const onnx::NodeProto *rows = producer(g, "onnx::Add_1");
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->op_type(), "Reshape");
  const onnx::NodeProto *slice = producer(g, rows->input(0));
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->op_type(), "Slice");
  EXPECT_EQ(slice->input(0), "pos.weight");
  const onnx::NodeProto *reshape = producer(g, "onnx::Add_2");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->op_type(), "Reshape");
  EXPECT_EQ(reshape->input(0), "pos.weight");
  const onnx::NodeProto *cast = producer(g, "onnx::Mul_3");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(cast->op_type(), "Cast");
  EXPECT_EQ(cast->input(0), "bias");
}

TEST(ExportedParameters, AViewOfSeveralParametersIsRefused) {
  onnx::GraphProto g;
  addFloats(g, "a.weight", {2, 2}, {1, 2, 3, 4});
  addFloats(g, "b.weight", {2, 2}, {1, 2, 3, 4});
  addFloats(g, "onnx::MatMul_5", {4}, {1, 2, 3, 4});
  addNode(g, "Add", {"x", "onnx::MatMul_5"}, "y");
  std::vector<std::string> notes;
  std::string error = restoreExportedParameters(g, "", notes);
  EXPECT_NE(error.find("'onnx::MatMul_5'"), std::string::npos) << error;
  EXPECT_NE(error.find("'a.weight', 'b.weight'"), std::string::npos) << error;
  EXPECT_NE(error.find("do_constant_folding=False"), std::string::npos);
}

TEST(ExportedParameters, UniformTensorsStayConstants) {
  onnx::GraphProto g;
  addFloats(g, "ln.weight", {4}, {1, 1, 1, 1});
  addFloats(g, "onnx::Mul_9", {1, 4}, {1, 1, 1, 1});
  addNode(g, "Mul", {"x", "onnx::Mul_9"}, "y");
  std::vector<std::string> notes;
  EXPECT_EQ(restoreExportedParameters(g, "", notes), "");
  EXPECT_TRUE(hasInitializer(g, "onnx::Mul_9"));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("stays a constant"), std::string::npos) << notes[0];
}

TEST(ExportedParameters, BatchNormStatisticsAreNotParameters) {
  onnx::GraphProto g;
  addFloats(g, "bn.running_var", {2}, {0.5f, 2.0f});
  addFloats(g, "onnx::Mul_4", {2}, {0.5f, 2.0f});
  addNode(g, "BatchNormalization",
          {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
          "y");
  addNode(g, "Mul", {"y", "onnx::Mul_4"}, "z");
  std::vector<std::string> notes;
  EXPECT_EQ(restoreExportedParameters(g, "", notes), "");
  EXPECT_TRUE(hasInitializer(g, "onnx::Mul_4"));
  EXPECT_TRUE(notes.empty());
}

} // namespace
