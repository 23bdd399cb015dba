//===- DropoutTest.cpp - Philox and the CPU dropout kernel ----------------===//
//
// Proves that the generator is Philox4x32-10 (Random123's known answers),
// that dropout keeps 1 - p of a million elements to within 1% and scales
// what it keeps by 1 / (1 - p), that its mask changes with the step and
// the seed, that a rank's block of a global tensor draws exactly that block
// of the whole tensor's mask (and, with an index offset, a micro-batch its
// rows of the full batch's), and that without a step it is the identity.
//
//===----------------------------------------------------------------------===//

#include "common/ops/Philox.h"
#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>

namespace loom::rt::test {
namespace {

namespace philox = ops::philox;

TEST(Philox, KnownAnswers) {
  struct Answer {
    philox::Words counter;
    uint32_t k0, k1;
    philox::Words expected;
  };
  // Random123's kat_vectors for philox4x32_10.
  const Answer answers[] = {
      {{{0, 0, 0, 0}},
       0,
       0,
       {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Answer &a : answers) {
    philox::Words got = philox::philox4x32(a.counter, a.k0, a.k1);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got.v[i], a.expected.v[i]) << "word " << i;
  }
}

class DropoutTest : public KernelTest {
protected:
  /// dropout of `x` at `step` (no step operand when 0) with `block`.
  HostBuffer dropout(const HostBuffer &x, double ratio, int64_t seed,
                     double step, const GlobalBlock *block = nullptr,
                     int64_t indexOffset = 0) {
    Attrs attrs;
    attrs.set("ratio", static_cast<double>(static_cast<float>(ratio)));
    attrs.set("seed", seed);
    if (indexOffset)
      attrs.set("index_offset", indexOffset);
    HostBuffer in = x, stepValue = makeTensor(DType::F32, {}, {step});
    HostBuffer out = makeTensor(x.dtype, x.shape,
                                std::vector<double>(numElements(x.shape), 0));
    KernelArgs args{"dropout", attrs, {in.view()}, {out.view()}, block};
    if (step != 0)
      args.inputs.push_back(stepValue.view());
    const KernelFn *kernel = backend->findKernel("dropout");
    EXPECT_NE(kernel, nullptr);
    if (kernel) {
      EXPECT_EQ((*kernel)(args), "");
    }
    return out;
  }
};

TEST_P(DropoutTest, KeepsOneMinusPOfAMillionAndScalesThem) {
  const int64_t n = 1000000;
  HostBuffer x =
      makeTensor(DType::F32, {1000, 1000}, std::vector<double>(n, 1.0));
  for (double p : {0.1, 0.5}) {
    std::vector<double> y = values(dropout(x, p, 42, 1));
    const double scale = 1.0f / (1.0f - static_cast<float>(p));
    int64_t kept = 0;
    for (double v : y) {
      if (v != 0) {
        ++kept;
        ASSERT_EQ(v, static_cast<float>(scale)) << "p " << p;
      }
    }
    double rate = static_cast<double>(kept) / n;
    EXPECT_NEAR(rate, 1 - p, 0.01 * (1 - p)) << "p " << p;
  }
}

TEST_P(DropoutTest, MaskChangesWithStepAndSeed) {
  const int64_t n = 100000;
  HostBuffer x = makeTensor(DType::F32, {n}, std::vector<double>(n, 1.0));
  std::vector<double> base = values(dropout(x, 0.5, 7, 1));
  auto agreement = [&](const std::vector<double> &other) {
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i)
      same += (base[i] != 0) == (other[i] != 0);
    return static_cast<double>(same) / n;
  };
  // Independent masks with p = 0.5 agree on about half the elements.
  EXPECT_EQ(agreement(values(dropout(x, 0.5, 7, 1))), 1.0);
  EXPECT_NEAR(agreement(values(dropout(x, 0.5, 7, 2))), 0.5, 0.02);
  EXPECT_NEAR(agreement(values(dropout(x, 0.5, 8, 1))), 0.5, 0.02);
}

TEST_P(DropoutTest, BlockDrawsItsPartOfTheGlobalMask) {
  const Shape global{6, 10, 8};
  HostBuffer whole = randomTensor(DType::F32, global, rng);
  std::vector<double> all = values(dropout(whole, 0.3, 99, 5));
  std::vector<double> wholeValues = values(whole);
  // The block at rows 3..6, columns 5..10 (as under dp=2 x tp=2).
  const Shape local{3, 5, 8};
  const std::vector<int64_t> offsets{3, 5, 0};
  std::vector<double> blockValues;
  std::vector<double> expected;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t k = 0; k < 8; ++k) {
        int64_t g = ((i + 3) * 10 + (j + 5)) * 8 + k;
        blockValues.push_back(wholeValues[g]);
        expected.push_back(all[g]);
      }
  GlobalBlock block{global, offsets};
  HostBuffer part = makeTensor(DType::F32, local, blockValues);
  expectEqual(dropout(part, 0.3, 99, 5, &block), expected);
}

TEST_P(DropoutTest, IndexOffsetDrawsTheNextMicroBatchsRows) {
  // Micro-batch 1 of two [4, 6] micro-batches draws rows 4..8 of the
  // [8, 6] batch's mask, also when a rank holds a block of it.
  HostBuffer batch = randomTensor(DType::F32, {8, 6}, rng);
  std::vector<double> all = values(dropout(batch, 0.5, 17, 3));
  std::vector<double> batchValues = values(batch);
  std::vector<double> second(batchValues.begin() + 24, batchValues.end());
  std::vector<double> expected(all.begin() + 24, all.end());
  HostBuffer micro = makeTensor(DType::F32, {4, 6}, second);
  expectEqual(dropout(micro, 0.5, 17, 3, nullptr, 24), expected);
  // Columns 3..6 of micro-batch 1 (a tp=2 block).
  GlobalBlock block{{4, 6}, {0, 3}};
  std::vector<double> blockValues, blockExpected;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 3; j < 6; ++j) {
      blockValues.push_back(second[i * 6 + j]);
      blockExpected.push_back(expected[i * 6 + j]);
    }
  expectEqual(dropout(makeTensor(DType::F32, {4, 3}, blockValues), 0.5, 17, 3,
                      &block, 24),
              blockExpected);
}

TEST_P(DropoutTest, HalfTypesRoundTheScaledValue) {
  for (DType dtype : {DType::F16, DType::BF16}) {
    HostBuffer x = randomTensor(dtype, {64, 33}, rng);
    HostBuffer f = makeTensor(DType::F32, x.shape, values(x));
    std::vector<double> ref = values(dropout(f, 0.25, 3, 2));
    // The f32 result rounded once to the type is what the type gives.
    expectEqual(dropout(x, 0.25, 3, 2),
                values(makeTensor(dtype, x.shape, ref)));
  }
}

TEST_P(DropoutTest, WithoutStepIsTheIdentity) {
  HostBuffer x = randomTensor(DType::F32, {5, 7}, rng);
  expectEqual(dropout(x, 0.5, 1, 0), values(x));
}

LOOM_KERNEL_TEST_PATHS(DropoutTest);

} // namespace
} // namespace loom::rt::test
