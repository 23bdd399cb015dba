//===- PlanRobustnessTest.cpp - Bad plans are errors, never crashes -------===//
//
// Compiles each bundled model to a plan, then feeds the runtime truncated,
// bit-flipped, wrong-version, shape-mismatched and memory-overlapping
// variants. Each must end in a clear error, or (for harmless flips, e.g. in
// weights) in a plan that loads and runs; never a crash or a sanitizer
// report. Also checks the memory plan reuses activation storage.
//
//===----------------------------------------------------------------------===//

#include "common/plan/PlanChecksum.h"
#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"
#include "compiler/plan/PlanEmitter.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/PlanLayout.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

#include <cstring>
#include <random>

using namespace loom;

namespace {

plan::Plan compileModel(const std::string &file) {
  mlir::DialectRegistry registry;
  registerLoomDialects(registry);
  mlir::MLIRContext context(registry);
  onnx_import::ImportOptions options;
  options.batch = 2;
  auto result = onnx_import::importOnnxFile(
      std::string(LOOM_SOURCE_DIR) + "/models/" + file, options, context);
  EXPECT_TRUE(result.ok()) << result.message;
  std::string error;
  std::optional<plan::Plan> plan = emitPlan(*result.module, error);
  EXPECT_TRUE(plan) << error;
  return plan ? *plan : plan::Plan();
}

/// Loads `bytes` and, if the runtime accepts them, runs one step. Returns
/// the error, or "" if the plan loaded and ran.
std::string loadAndRun(const std::string &bytes, rt::Backend &backend) {
  std::string error;
  // Unsealed: these tests are of the validator, which a checksum would
  // shield from every mutated plan.
  std::optional<plan::Plan> plan =
      rt::parsePlan(bytes, "plan", error, /*requireChecksum=*/false);
  if (!plan)
    return error;
  std::unique_ptr<rt::Executor> exec =
      rt::Executor::create(std::move(*plan), backend, error);
  if (!exec)
    return error;
  exec->setRandomInputs(1);
  if (!exec->run(error))
    return error;
  return "";
}

/// Whether a model's plan reshapes temporaries, which the alias tests need:
/// the GPT splits and merges its attention heads and the CNN flattens its
/// features; the MLP's layers are Gemms of matrices and reshape nothing.
bool reshapesTemporaries(const std::string &model) {
  return model != "mlp.onnx";
}

class PlanRobustness : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    plan = compileModel(GetParam());
    ASSERT_TRUE(plan.SerializeToString(&bytes));
    backend = rt::createCpuBackend();
    backend->setNumThreads(1);
  }
  plan::Plan plan;
  std::string bytes;
  std::unique_ptr<rt::Backend> backend;
};

TEST_P(PlanRobustness, TheCompiledPlanRuns) {
  EXPECT_EQ(loadAndRun(bytes, *backend), "");
}

TEST_P(PlanRobustness, TruncatedPlansAreErrors) {
  size_t n = bytes.size();
  int rejected = 0;
  for (int i = 0; i < 40; ++i) {
    std::string error = loadAndRun(bytes.substr(0, n * i / 40), *backend);
    rejected += !error.empty();
  }
  // A prefix of a protobuf can parse, but not into a complete valid plan.
  EXPECT_EQ(rejected, 40);
}

TEST_P(PlanRobustness, BitFlippedPlansNeverCrash) {
  std::mt19937_64 rng(7);
  int loaded = 0, rejected = 0;
  for (int i = 0; i < 150; ++i) {
    std::string copy = bytes;
    // Values (with their weights) come first in the file, instructions and
    // outputs last: flip bits in the head and the tail as often as anywhere.
    size_t n = copy.size(), window = std::min<size_t>(n, 4096);
    size_t pos = i % 3 == 0   ? rng() % window
                 : i % 3 == 1 ? n - 1 - rng() % window
                              : rng() % n;
    copy[pos] = static_cast<char>(copy[pos] ^ (1 << (rng() % 8)));
    std::string error = loadAndRun(copy, *backend);
    (error.empty() ? loaded : rejected)++;
  }
  std::cout << GetParam() << ": " << loaded << " flipped plans ran, "
            << rejected << " were rejected\n";
  EXPECT_EQ(loaded + rejected, 150);
}

TEST_P(PlanRobustness, WrongVersionIsAClearError) {
  // A newer plan, and an older one (version 1 had no Value.alias_of: its
  // reader would take an alias for an overlap).
  for (uint32_t version : {kPlanFormatVersion + 1, kPlanFormatVersion - 1}) {
    plan::Plan copy = plan;
    copy.set_format_version(version);
    std::string error = loadAndRun(copy.SerializeAsString(), *backend);
    EXPECT_NE(error.find("plan format version " + std::to_string(version) +
                         " is not supported by this runtime, which reads "
                         "version " +
                         std::to_string(kPlanFormatVersion) +
                         "; recompile the model"),
              std::string::npos)
        << error;
  }
}

TEST_P(PlanRobustness, ShapeMismatchNamesTheInstruction) {
  plan::Plan copy = plan;
  plan::Program *program = copy.mutable_stages(0)->mutable_program();
  // Grow the first instruction's result by one row: its bytes grow too, so
  // only the shape rule can catch it.
  int32_t id = program->instructions(0).results(0);
  plan::Value *v = program->mutable_values(id);
  v->mutable_type()->set_shape(0, v->type().shape(0) + 1);
  v->set_bytes(v->bytes() / (v->type().shape(0) - 1) * v->type().shape(0));
  std::string error = loadAndRun(copy.SerializeAsString(), *backend);
  EXPECT_NE(error.find("instruction #0 (" + program->instructions(0).op()),
            std::string::npos)
      << error;
}

// Proves a plan carries the CRC-32 of its contents: the sealed plan
// parses, one patched after sealing (a changed value's shape, as an edit of
// an operand or a learning rate would be) is refused naming why, and so is
// a plan with no checksum; validatePlan (loom explain's check) catches what
// the validator catches without running anything.
TEST_P(PlanRobustness, ChecksumsCatchEditedPlans) {
  plan::Plan sealed = plan;
  std::optional<std::string> bytes = plan::sealPlan(sealed);
  ASSERT_TRUE(bytes);
  std::string error;
  EXPECT_TRUE(rt::parsePlan(*bytes, "p.plan", error)) << error;
  plan::Plan edited = sealed;
  plan::Value *v = edited.mutable_stages(0)->mutable_program()->mutable_values(
      edited.stages(0).program().instructions(0).results(0));
  v->mutable_type()->set_shape(0, v->type().shape(0) + 1);
  EXPECT_FALSE(rt::parsePlan(edited.SerializeAsString(), "p.plan", error));
  EXPECT_EQ(error.find("p.plan: its contents do not match its checksum"), 0u)
      << error;
  EXPECT_FALSE(rt::parsePlan(plan.SerializeAsString(), "p.plan", error));
  EXPECT_EQ(error.find("p.plan: carries no checksum"), 0u) << error;
  EXPECT_EQ(rt::validatePlan(sealed, *backend), "");
  std::string invalid = rt::validatePlan(edited, *backend);
  EXPECT_NE(invalid, "");
  EXPECT_EQ("invalid plan: " + invalid,
            loadAndRun(edited.SerializeAsString(), *backend));
}

// Proves the validator checks every instruction's attributes against the
// op's schema (generated from the dialect's ODS): a dropped, mistyped or
// unknown attribute is an error naming the instruction and the attribute,
// never a kernel run on a default.
TEST_P(PlanRobustness, AttributesFollowTheOpsSchema) {
  const plan::Program &program = plan.stages(0).program();
  int index = -1;
  for (int i = 0; i < program.instructions_size() && index < 0; ++i)
    if (program.instructions(i).attributes_size() > 0)
      index = i;
  ASSERT_GE(index, 0) << "no instruction with attributes";
  const plan::Attribute &first = program.instructions(index).attributes(0);
  auto mutate = [&](auto &&edit) {
    plan::Plan copy = plan;
    plan::Instruction *inst =
        copy.mutable_stages(0)->mutable_program()->mutable_instructions(index);
    edit(*inst);
    return loadAndRun(copy.SerializeAsString(), *backend);
  };
  std::string at = "instruction #" + std::to_string(index) + " (" +
                   program.instructions(index).op();
  std::string unknown = mutate([](plan::Instruction &inst) {
    plan::Attribute *extra = inst.add_attributes();
    extra->set_name("no_such_attribute");
    extra->set_int_value(1);
  });
  EXPECT_NE(unknown.find(at), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("unknown attribute 'no_such_attribute'"),
            std::string::npos)
      << unknown;
  std::string mistyped = mutate([](plan::Instruction &inst) {
    inst.mutable_attributes(0)->set_string_value("text");
  });
  EXPECT_NE(mistyped.find("attribute '" + first.name() + "' must be"),
            std::string::npos)
      << mistyped;
  // A required attribute (unit attributes may be absent) that goes
  // missing is named.
  if (first.value_case() != plan::Attribute::kBoolValue) {
    std::string dropped = mutate([](plan::Instruction &inst) {
      inst.mutable_attributes()->DeleteSubrange(0, 1);
    });
    EXPECT_NE(dropped.find(" attribute '" + first.name() + "'"),
              std::string::npos)
        << dropped;
    EXPECT_NE(dropped.find("needs the "), std::string::npos) << dropped;
  }
}

TEST_P(PlanRobustness, MissingWeightsAreAClearError) {
  plan::Plan copy = plan;
  for (plan::Value &v :
       *copy.mutable_stages(0)->mutable_program()->mutable_values())
    if (v.kind() == plan::Value::PARAMETER)
      v.clear_data();
  std::string error = loadAndRun(copy.SerializeAsString(), *backend);
  EXPECT_NE(error.find("has no initial data"), std::string::npos) << error;
}

// A logical shape (a value optimizer sharding padded) is a leading block
// of a parameter's, buffer's or optimizer state's global shape, and its
// initial data has the logical shape's size.
TEST_P(PlanRobustness, BadLogicalShapesAreRejected) {
  auto withLogical = [&](plan::Value::Kind kind, int64_t delta) {
    plan::Plan copy = plan;
    for (plan::Value &v :
         *copy.mutable_stages(0)->mutable_program()->mutable_values())
      if (v.kind() == kind && v.global_type().shape_size() > 0) {
        for (int64_t d : v.global_type().shape())
          v.add_logical_shape(d);
        v.set_logical_shape(0, v.logical_shape(0) + delta);
        break;
      }
    return loadAndRun(copy.SerializeAsString(), *backend);
  };
  std::string error = withLogical(plan::Value::PARAMETER, 1);
  EXPECT_NE(error.find("not a leading block of its global shape"),
            std::string::npos)
      << error;
  error = withLogical(plan::Value::INPUT, 0);
  EXPECT_NE(error.find("only parameters, buffers and optimizer state are "
                       "padded"),
            std::string::npos)
      << error;
  error = withLogical(plan::Value::PARAMETER, -1);
  EXPECT_NE(error.find("(its logical shape)"), std::string::npos) << error;
}

TEST_P(PlanRobustness, OverlappingLiveValuesAreRejected) {
  plan::Plan copy = plan;
  plan::Program *program = copy.mutable_stages(0)->mutable_program();
  // The first instruction's result and the input it reads are live at once.
  const plan::Instruction &first = program->instructions(0);
  int32_t in = -1;
  for (int32_t id : first.operands())
    if (program->values(id).kind() == plan::Value::INPUT)
      in = id;
  if (in < 0)
    GTEST_SKIP() << "the first instruction reads no input";
  // Both at the arena's start, where either fits.
  int32_t out = first.results(0);
  program->mutable_values(out)->set_offset(0);
  program->mutable_values(in)->set_offset(0);
  std::string error = loadAndRun(copy.SerializeAsString(), *backend);
  EXPECT_NE(error.find("overlaps"), std::string::npos) << error;
}

// A value off its elements' alignment would have kernels store to
// misaligned addresses (a bit flip in an offset found it under UBSan).
TEST_P(PlanRobustness, MisalignedValuesAreRejected) {
  plan::Plan copy = plan;
  plan::Program *program = copy.mutable_stages(0)->mutable_program();
  int32_t target = -1;
  for (const plan::Value &v : program->values())
    if (v.kind() == plan::Value::TEMPORARY && !v.has_alias_of() &&
        !v.has_in_place_of() && v.type().dtype() == plan::F32) {
      target = v.id();
      break;
    }
  ASSERT_GE(target, 0) << "the plan has no f32 temporary";
  program->mutable_values(target)->set_offset(program->values(target).offset() +
                                              1);
  std::string error = loadAndRun(copy.SerializeAsString(), *backend);
  EXPECT_NE(error.find("not a multiple of its 4-byte f32 elements"),
            std::string::npos)
      << error;
}

// A reshape of a temporary moves no bytes: its result is the operand's
// memory, and the operand stays live while the result is used. The models
// that reshape temporaries must have such reshapes to check, and every alias
// in a plan is one of them.
TEST_P(PlanRobustness, ReshapesShareTheirOperandsBytes) {
  const plan::Program &program = plan.stages(0).program();
  int reshapes = 0, aliases = 0;
  for (const plan::Value &v : program.values())
    aliases += v.has_alias_of();
  for (const plan::Instruction &inst : program.instructions()) {
    if (inst.op() != "reshape")
      continue;
    const plan::Value &from = program.values(inst.operands(0));
    const plan::Value &to = program.values(inst.results(0));
    if (from.kind() != plan::Value::TEMPORARY)
      continue;
    ++reshapes;
    EXPECT_TRUE(to.has_alias_of()) << inst.location();
    EXPECT_EQ(to.alias_of(), from.has_alias_of() ? from.alias_of() : from.id());
    EXPECT_EQ(to.offset(), from.offset()) << inst.location();
  }
  std::cout << GetParam() << ": " << reshapes
            << " reshapes of temporaries share their operand's bytes\n";
  if (reshapesTemporaries(GetParam()))
    EXPECT_GT(reshapes, 0) << "no reshape of a temporary to check";
  else
    EXPECT_EQ(reshapes, 0) << "the model reshapes temporaries now: say so "
                              "in reshapesTemporaries()";
  EXPECT_EQ(aliases, reshapes);
}

// An alias must be a reshape's result at its operand's offset.
TEST_P(PlanRobustness, BadAliasesAreRejected) {
  // An instruction's result other than a reshape's.
  plan::Plan copy = plan;
  plan::Program *program = copy.mutable_stages(0)->mutable_program();
  const plan::Instruction *other = nullptr;
  for (const plan::Instruction &inst : program->instructions())
    if (!other && inst.op() != "reshape" && inst.operands_size() > 0)
      other = &inst;
  ASSERT_TRUE(other) << "no instruction other than a reshape";
  program->mutable_values(other->results(0))->set_alias_of(other->operands(0));
  std::string error = loadAndRun(copy.SerializeAsString(), *backend);
  EXPECT_NE(error.find("is not a valid alias of value #"), std::string::npos)
      << error;
  // A reshape's result away from its operand's offset.
  copy = plan;
  program = copy.mutable_stages(0)->mutable_program();
  plan::Value *alias = nullptr;
  for (plan::Value &v : *program->mutable_values())
    if (v.has_alias_of() && !alias)
      alias = &v;
  if (!reshapesTemporaries(GetParam())) {
    EXPECT_FALSE(alias) << "the model reshapes temporaries now: say so in "
                           "reshapesTemporaries()";
    return;
  }
  ASSERT_TRUE(alias) << "no reshape of a temporary";
  alias->set_offset(alias->offset() + 4);
  error = loadAndRun(copy.SerializeAsString(), *backend);
  EXPECT_NE(error.find("is not a valid alias of value #"), std::string::npos)
      << error;
}

TEST_P(PlanRobustness, TheMemoryPlanReusesStorage) {
  const plan::Program &program = plan.stages(0).program();
  int64_t total = 0;
  for (const plan::Value &v : program.values())
    if (v.kind() == plan::Value::TEMPORARY)
      total += v.bytes();
  std::cout << GetParam() << ": activation arena " << program.arena_bytes()
            << " bytes for " << total << " bytes of temporaries\n";
  EXPECT_LT(program.arena_bytes(), total);
}

// The live bytes at the arena's peak never exceed the arena (placement can
// only add gaps), and are at least its largest temporary.
TEST_P(PlanRobustness, TheArenaPeakBoundsTheArena) {
  const plan::Program &program = plan.stages(0).program();
  ArenaPeak peak = arenaPeak(program, /*top=*/3);
  ASSERT_GE(peak.instruction, 0);
  EXPECT_LE(peak.bytes, program.arena_bytes());
  std::cout << GetParam() << ": arena " << program.arena_bytes() << " bytes, "
            << peak.bytes << " live at its peak\n";
  int64_t largest = 0;
  for (const plan::Value &v : program.values())
    if (v.kind() == plan::Value::TEMPORARY && !v.has_in_place_of())
      largest = std::max(largest, v.bytes());
  EXPECT_GE(peak.bytes, largest);
  ASSERT_FALSE(peak.largest.empty());
  EXPECT_LE(peak.largest.size(), 3u);
  for (size_t k = 1; k < peak.largest.size(); ++k)
    EXPECT_GE(program.values(peak.largest[k - 1]).bytes(),
              program.values(peak.largest[k]).bytes());
}

INSTANTIATE_TEST_SUITE_P(Models, PlanRobustness,
                         ::testing::Values("mlp.onnx", "gpt.onnx", "cnn.onnx"),
                         [](const auto &info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('.'));
                         });

// A padded value holds its logical tensor as the leading block, zeros
// after it in every padded dimension; the block reads back unchanged.
TEST(PaddedValues, TheLeadingBlockRoundTrips) {
  std::vector<float> logical = {1, 2, 3, 4, 5, 6}; // 2x3
  rt::TensorView view{rt::DType::F32, {2, 3}, logical.data()};
  std::vector<float> got(12, -1.0f); // stale memory: zeroed around the block
  rt::TensorView padded{rt::DType::F32, {3, 4}, got.data()};
  rt::placeLeading(view, padded);
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0}));
  rt::HostBuffer back = rt::blockOf(padded, {2, 3}, {0, 0});
  ASSERT_EQ(back.shape, (rt::Shape{2, 3}));
  EXPECT_EQ(std::memcmp(back.bytes.data(), logical.data(), 6 * sizeof(float)),
            0);
  // A block inside, as a rank's shard of a global tensor.
  rt::HostBuffer inner = rt::blockOf(padded, {2, 2}, {0, 1});
  const auto *p = reinterpret_cast<const float *>(inner.bytes.data());
  EXPECT_EQ(std::vector<float>(p, p + 4), (std::vector<float>{2, 3, 5, 6}));
}

// A chain x -> a -> b -> c: the peak is where b is made while a is still
// read (x + a + b), and it lists those, largest first, with their makers.
// A pipeline whose stage functions break its contract (a stage missing, a
// schedule that differs) is an error of the emitter, never a crash.
TEST(PlanEmitter, ABrokenPipelineContractIsAnError) {
  mlir::DialectRegistry registry;
  registerLoomDialects(registry);
  mlir::MLIRContext context(registry);
  auto stage = [](int s, const char *schedule) {
    return "func.func @main_stage" + std::to_string(s) +
           "() attributes {loom.pipeline = {micro_batches = 2 : i64, "
           "schedule = #loom.schedule<" +
           schedule + ">, stage = " + std::to_string(s) +
           " : i64, stages = 2 : i64}} { return }\n";
  };
  const std::pair<std::string, std::string> cases[] = {
      {stage(0, "gpipe"), "says 2 stages but the module has 1"},
      {stage(0, "gpipe") + stage(1, "interleaved"), "'schedule' differs"}};
  for (const auto &[text, message] : cases) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    ASSERT_TRUE(module) << text;
    std::string error;
    EXPECT_FALSE(emitPlan(*module, error));
    EXPECT_NE(error.find("phase 'pipelined': "), std::string::npos) << error;
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}

TEST(ArenaPeak, ResultsMeetTheOperandsTheyReplace) {
  plan::Program program;
  auto value = [&](plan::Value::Kind kind, int64_t bytes) {
    plan::Value *v = program.add_values();
    v->set_id(program.values_size() - 1);
    v->set_kind(kind);
    v->set_bytes(bytes);
    return v->id();
  };
  int32_t x = value(plan::Value::INPUT, 10);
  int32_t a = value(plan::Value::TEMPORARY, 100);
  int32_t b = value(plan::Value::TEMPORARY, 50);
  int32_t c = value(plan::Value::TEMPORARY, 30);
  auto instruction = [&](int32_t in, int32_t out) {
    plan::Instruction *inst = program.add_instructions();
    inst->set_op("relu");
    inst->add_operands(in);
    inst->add_results(out);
  };
  instruction(x, a);
  instruction(a, b);
  instruction(b, c);
  plan::Program::Output *out = program.add_outputs();
  out->set_value(c);
  ArenaPeak peak = arenaPeak(program, /*top=*/5);
  EXPECT_EQ(peak.bytes, 160);
  EXPECT_EQ(peak.instruction, 1);
  EXPECT_EQ(peak.largest, (std::vector<int32_t>{a, b, x}));
  EXPECT_EQ(peak.producers, (std::vector<int>{0, 1, -1}));
  // Only the largest when asked for one.
  EXPECT_EQ(arenaPeak(program, 1).largest, (std::vector<int32_t>{a}));
}

} // namespace
