//===- OpRulesTest.cpp - One rule per op, read alike from MLIR and plans --===//
//
// Each loom op's shape rule is defined once (common/ops/OpRules.h). These
// tests hold the table and the dialect together: every op the dialect
// registers has a rule of the kind its ODS class says (inferred ops
// implement InferTypeOpInterface), every rule names an op of the dialect,
// and the dialect's inference and the plan validator's check agree on a
// parsed module, messages included.
//
//===----------------------------------------------------------------------===//

#include "common/ops/OpRules.h"
#include "compiler/Registration.h"
#include "dialects/LoomDialect.h"
#include "dialects/OpRuleAdaptor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <set>

namespace loom {
namespace {

/// The names (without `loom.`) of the ops the dialect registers.
std::set<std::string> dialectOps(mlir::MLIRContext &context) {
  std::set<std::string> names;
  for (mlir::RegisteredOperationName op : context.getRegisteredOperations()) {
    llvm::StringRef name = op.getStringRef();
    if (name.consume_front("loom."))
      names.insert(name.str());
  }
  return names;
}

class OpRulesTest : public ::testing::Test {
protected:
  OpRulesTest() {
    mlir::DialectRegistry registry;
    registerLoomDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  mlir::MLIRContext context;
};

// Proves every op but the constant (typed by its value), the collectives
// (checked against the mesh, ops::checkCollective) and the point-to-point
// transfers (checked against their peer) has a rule, that
// InferTypeOpInterface and an inferred rule go together, and that no rule
// names an op the dialect lacks.
TEST_F(OpRulesTest, EveryOpHasOneRuleOfItsKind) {
  const std::set<std::string> exempt = {
      "constant",     "all_reduce", "reduce_scatter",
      "all_gather",   "all_to_all", "local_split",
      "make_partial", "send",       "recv"};
  std::set<std::string> ops = dialectOps(context);
  ASSERT_GT(ops.size(), 50u);
  for (const std::string &op : ops) {
    if (exempt.count(op))
      continue;
    const ops::OpRule *rule = ops::findOpRule(op);
    ASSERT_NE(rule, nullptr) << "loom." << op << " has no rule";
    auto name = mlir::RegisteredOperationName::lookup("loom." + op, &context);
    ASSERT_TRUE(name.has_value());
    bool infers = name->hasInterface<mlir::InferTypeOpInterface>();
    EXPECT_EQ(infers, rule->infer != nullptr)
        << "loom." << op << ": the ODS class and the rule disagree on "
        << "whether the result type is inferred";
  }
  for (const std::string &op : ops::opsWithRules())
    EXPECT_TRUE(ops.count(op)) << "rule '" << op << "' names no loom op";
}

// Proves the dialect's inference and the validator's check read one rule:
// for each op of a parsed function, the validator accepts the types MLIR
// inferred, and both report the same message for a wrong shape.
TEST_F(OpRulesTest, DialectAndValidatorAgree) {
  const char *ir = R"mlir(
    func.func @f(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>,
                 %i: tensor<5xi64>) -> tensor<4x5xf32> {
      %0 = loom.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %1 = loom.add %0, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
      %2 = loom.transpose %1 {permutation = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
      %3 = loom.reduce_sum %2 {axes = array<i64: 1>, keep_dims} : (tensor<4x2xf32>) -> tensor<4x1xf32>
      %4 = loom.gather %3, %i {axis = 1 : i64} : (tensor<4x1xf32>, tensor<5xi64>) -> tensor<4x5xf32>
      return %4 : tensor<4x5xf32>
    })mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  ASSERT_TRUE(module);
  int checked = 0;
  module->walk([&](mlir::Operation *op) {
    if (op->getDialect()->getNamespace() != "loom")
      return;
    std::vector<ops::Shape> shapes;
    std::vector<ops::TypeRef> operands, results;
    shapes.reserve(op->getNumOperands() + op->getNumResults());
    auto add = [&](mlir::Value v, std::vector<ops::TypeRef> &into) {
      auto type = llvm::cast<mlir::RankedTensorType>(v.getType());
      shapes.emplace_back(type.getShape().begin(), type.getShape().end());
      into.push_back({*toRuleDType(type.getElementType()), &shapes.back()});
    };
    for (mlir::Value v : op->getOperands())
      add(v, operands);
    for (mlir::Value v : op->getResults())
      add(v, results);
    ops::Attrs attrs = toRuleAttrs(llvm::dyn_cast_or_null<mlir::DictionaryAttr>(
        op->getPropertiesAsAttribute()));
    llvm::StringRef name = op->getName().getStringRef().drop_front(5);
    EXPECT_EQ(ops::checkOp(name.str(), attrs, operands, results), "")
        << name.str();
    ++checked;
  });
  EXPECT_EQ(checked, 5);

  // A contracting mismatch: MLIR's diagnostic carries the rule's message.
  const char *bad = R"mlir(
    func.func @g(%x: tensor<2x3xf32>, %w: tensor<5x4xf32>) -> tensor<2x4xf32> {
      %0 = loom.matmul %x, %w : (tensor<2x3xf32>, tensor<5x4xf32>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    })mlir";
  std::string diagnostic;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (diagnostic.empty())
      diagnostic = d.str();
    return mlir::success();
  });
  EXPECT_FALSE(mlir::parseSourceString<mlir::ModuleOp>(bad, &context));
  ops::Shape x{2, 3}, w{5, 4}, r{2, 4};
  std::string validator = ops::checkOp(
      "matmul", ops::Attrs(), {{ops::DType::F32, &x}, {ops::DType::F32, &w}},
      {{ops::DType::F32, &r}});
  EXPECT_EQ(validator, "contracting dimensions differ: lhs has 3, rhs has 5");
  EXPECT_EQ(diagnostic, validator);
}

// Proves the comparison and logic rules hold operands to their element
// types and give bool results, and trilu to rank 2: messages that the ODS
// operand constraints hide from textual IR, so that plan validation is
// where they are seen.
TEST_F(OpRulesTest, MaskRulesCheckElementTypes) {
  ops::Shape v{2, 3}, row{3}, vec{3};
  using ops::DType;
  auto check = [&](const char *op, DType in, DType out,
                   const ops::Attrs &attrs = {}) {
    return ops::checkOp(op, attrs, {{in, &v}, {in, &row}}, {{out, &v}});
  };
  EXPECT_EQ(check("equal", DType::Bool, DType::Bool), "");
  EXPECT_EQ(check("less", DType::I64, DType::Bool), "");
  EXPECT_EQ(check("less", DType::Bool, DType::Bool),
            "operands must be numbers, not bool");
  EXPECT_EQ(check("and", DType::Bool, DType::Bool), "");
  EXPECT_EQ(check("xor", DType::F32, DType::Bool),
            "operands must be bool, not f32");
  EXPECT_NE(check("greater", DType::F32, DType::F32), "");
  EXPECT_EQ(check("max", DType::F32, DType::F32), "");
  ops::Attrs trilu;
  trilu.set("upper", true);
  trilu.set("k", int64_t(1));
  EXPECT_EQ(
      ops::checkOp("trilu", trilu, {{DType::F32, &v}}, {{DType::F32, &v}}), "");
  EXPECT_EQ(
      ops::checkOp("trilu", trilu, {{DType::F32, &vec}}, {{DType::F32, &vec}}),
      "input must have rank at least 2, not 1");
}

// Proves the attribute schema generated from ODS is what checkAttrs holds
// a plan's attributes to: required attributes, their kinds, unit attributes
// that may be absent, and nothing else.
TEST_F(OpRulesTest, AttributesFollowTheSchemaFromOds) {
  const std::vector<ops::AttrSpec> *schema = ops::findAttrSchema("max_pool2d");
  ASSERT_NE(schema, nullptr);
  std::set<std::string> names;
  for (const ops::AttrSpec &spec : *schema)
    names.insert(spec.name);
  EXPECT_EQ(names, (std::set<std::string>{"ceil_mode", "dilations", "kernel",
                                          "padding", "strides"}));
  ops::Attrs attrs;
  for (const char *name : {"kernel", "strides", "dilations"})
    attrs.set(name, std::vector<int64_t>{1, 1});
  attrs.set("padding", std::vector<int64_t>{0, 0, 0, 0});
  EXPECT_EQ(ops::checkAttrs("max_pool2d", attrs), ""); // ceil_mode absent
  ops::Attrs missing;
  missing.set("kernel", std::vector<int64_t>{1, 1});
  EXPECT_EQ(ops::checkAttrs("max_pool2d", missing),
            "needs the integer list attribute 'dilations'");
  ops::Attrs mistyped = attrs;
  mistyped.set("kernel", int64_t(2));
  EXPECT_EQ(ops::checkAttrs("max_pool2d", mistyped),
            "attribute 'kernel' must be an integer list");
  ops::Attrs extra = attrs;
  extra.set("kernel_size", int64_t(2));
  EXPECT_EQ(ops::checkAttrs("max_pool2d", extra),
            "has an unknown attribute 'kernel_size'");
  // Every op of the dialect has a schema.
  for (const std::string &op : dialectOps(context))
    EXPECT_NE(ops::findAttrSchema(op), nullptr) << op;
}

} // namespace
} // namespace loom
