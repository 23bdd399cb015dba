//===- ImportRobustnessTest.cpp - Corrupt models never crash the importer -===//
//
// Feeds truncated and bit-flipped copies of every bundled model to the
// importer. Each must end in success or an error message that names the
// file; a crash, hang or sanitizer report fails the test. The corruptions
// are drawn from a fixed seed, so a failure reproduces.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "compiler/onnx/OnnxImporter.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

#include <random>

using namespace loom::onnx_import;

namespace {

class CorruptModel : public ::testing::TestWithParam<const char *> {
protected:
  void check(const std::string &bytes, const std::string &what) {
    mlir::MLIRContext context(registry);
    ImportOptions options;
    options.batch = 2;
    ImportResult r = importOnnxBytes(bytes, name, options, context);
    ++counts[static_cast<int>(r.status)];
    if (!r.ok()) {
      EXPECT_EQ(r.message.rfind(name + ": ", 0), 0u)
          << what << ": message does not name the file: " << r.message;
    }
  }

  void SetUp() override {
    loom::registerLoomDialects(registry);
    name = std::string(LOOM_SOURCE_DIR) + "/models/" + GetParam();
    auto buffer = llvm::MemoryBuffer::getFile(name);
    ASSERT_TRUE(bool(buffer)) << name;
    original = (*buffer)->getBuffer().str();
  }

  void TearDown() override {
    std::cout << GetParam() << ": " << counts[0] << " imported, " << counts[1]
              << " unsupported, " << counts[2] << " invalid, " << counts[3]
              << " internal errors\n";
  }

  mlir::DialectRegistry registry;
  std::string name, original;
  int counts[4] = {0, 0, 0, 0};
};

TEST_P(CorruptModel, TruncatedCopies) {
  size_t n = original.size();
  std::vector<size_t> lengths = {0, 1, 2, 3, 7, 16, 64, 255, n - 1, n - 2};
  for (int i = 1; i < 60; ++i)
    lengths.push_back(n * i / 60);
  for (size_t len : lengths)
    check(original.substr(0, len), "truncated to " + std::to_string(len));
}

TEST_P(CorruptModel, BitFlippedCopies) {
  std::mt19937_64 rng(20261121);
  // Most bytes of a model are weights; flip bits in the graph structure
  // (the head and tail of the file) as often as in the data.
  size_t n = original.size();
  for (int i = 0; i < 240; ++i) {
    std::string copy = original;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      size_t region = rng() % 3;
      size_t pos = region == 0   ? rng() % std::min<size_t>(n, 4096)
                   : region == 1 ? n - 1 - rng() % std::min<size_t>(n, 8192)
                                 : rng() % n;
      copy[pos] = static_cast<char>(copy[pos] ^ (1 << (rng() % 8)));
    }
    check(copy, "bit flip #" + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CorruptModel,
                         ::testing::Values("mlp.onnx", "gpt.onnx",
                                           "gpt_opset14.onnx", "cnn.onnx",
                                           "lstm.onnx", "gru.onnx"),
                         [](const auto &info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('.'));
                         });

} // namespace
