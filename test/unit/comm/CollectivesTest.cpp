//===- CollectivesTest.cpp - The redistribution instructions --------------===//
//
// CollectiveRunner on a [dp=2, tp=2] mesh of threads: each instruction on
// small hand-checkable tensors of every element type, along leading and
// non-leading dimensions, in place, and every attribute and shape error.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Collectives.h"
#include "common/plan/CollectiveScratch.h"
#include "test/unit/comm/CommTestSupport.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace loom;
using namespace loom::rt;

namespace {

layout::Mesh mesh2x2() {
  std::string error;
  return *layout::Mesh::create({{"dp", 2}, {"tp", 2}}, error);
}

/// Small integers stored as `dtype` (exact in every type for |v| <= 256).
std::vector<unsigned char> encodeAs(const std::vector<int64_t> &values,
                                    DType dtype) {
  const size_t size = dtypeSize(dtype);
  std::vector<unsigned char> bytes(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char *p = bytes.data() + i * size;
    float f = static_cast<float>(values[i]);
    uint16_t h = dtype == DType::F16 ? floatToHalf(f) : floatToBf16(f);
    int32_t i32 = static_cast<int32_t>(values[i]);
    unsigned char b = static_cast<unsigned char>(values[i]);
    switch (dtype) {
    case DType::F32:
      std::memcpy(p, &f, 4);
      break;
    case DType::F16:
    case DType::BF16:
      std::memcpy(p, &h, 2);
      break;
    case DType::I32:
      std::memcpy(p, &i32, 4);
      break;
    case DType::I64:
      std::memcpy(p, &values[i], 8);
      break;
    case DType::Bool:
      *p = b;
      break;
    }
  }
  return bytes;
}

std::vector<int64_t> decodeAs(const std::vector<unsigned char> &bytes,
                              DType dtype) {
  const size_t size = dtypeSize(dtype);
  std::vector<int64_t> values(bytes.size() / size);
  for (size_t i = 0; i < values.size(); ++i) {
    const unsigned char *p = bytes.data() + i * size;
    float f = 0;
    uint16_t h = 0;
    int32_t i32 = 0;
    switch (dtype) {
    case DType::F32:
      std::memcpy(&f, p, 4);
      values[i] = static_cast<int64_t>(f);
      break;
    case DType::F16:
    case DType::BF16:
      std::memcpy(&h, p, 2);
      values[i] = static_cast<int64_t>(dtype == DType::F16 ? halfToFloat(h)
                                                           : bf16ToFloat(h));
      break;
    case DType::I32:
      std::memcpy(&i32, p, 4);
      values[i] = i32;
      break;
    case DType::I64:
      std::memcpy(&values[i], p, 8);
      break;
    case DType::Bool:
      values[i] = *p;
      break;
    }
  }
  return values;
}

/// Rank r's input: a [2, 4] tensor with element [i][j] = 16r + 4i + j.
int64_t in(int64_t r, int64_t i, int64_t j) { return 16 * r + 4 * i + j; }

/// The rank's coordinates on [dp=2, tp=2].
int64_t dp(int64_t r) { return r / 2; }
int64_t tp(int64_t r) { return r % 2; }
/// The rank with `r`'s coordinates except `axis` set to `c`.
int64_t along(int64_t r, int axis, int64_t c) {
  return axis == 0 ? 2 * c + tp(r) : 2 * dp(r) + c;
}

struct Case {
  std::string op;
  Attrs attrs;
  Shape outShape;
  /// Element [i][j] of rank r's output.
  std::function<int64_t(int64_t r, int64_t i, int64_t j)> expected;
  bool sums = false;
};

Attrs attrs(std::initializer_list<std::pair<const char *, int64_t>> values) {
  Attrs a;
  for (const auto &[name, value] : values)
    a.set(name, value);
  return a;
}

std::vector<Case> cases() {
  std::vector<Case> result;
  Attrs both;
  both.set("axes", std::vector<int64_t>{0, 1});
  result.push_back({"all_reduce",
                    both,
                    {2, 4},
                    [](int64_t, int64_t i, int64_t j) {
                      return in(0, i, j) + in(1, i, j) + in(2, i, j) +
                             in(3, i, j);
                    },
                    true});
  // Sum over tp, then keep the tp-th half of dim 1.
  result.push_back({"reduce_scatter",
                    attrs({{"axis", 1}, {"dim", 1}}),
                    {2, 2},
                    [](int64_t r, int64_t i, int64_t j) {
                      int64_t jj = 2 * tp(r) + j;
                      return in(along(r, 1, 0), i, jj) +
                             in(along(r, 1, 1), i, jj);
                    },
                    true});
  result.push_back({"reduce_scatter",
                    attrs({{"axis", 0}, {"dim", 0}}),
                    {1, 4},
                    [](int64_t r, int64_t i, int64_t j) {
                      int64_t ii = dp(r) + i;
                      return in(along(r, 0, 0), ii, j) +
                             in(along(r, 0, 1), ii, j);
                    },
                    true});
  // Concatenate the tp members along dim 1 (non-leading: interleaved).
  result.push_back({"all_gather",
                    attrs({{"axis", 1}, {"dim", 1}}),
                    {2, 8},
                    [](int64_t r, int64_t i, int64_t j) {
                      return in(along(r, 1, j / 4), i, j % 4);
                    }});
  result.push_back({"all_gather",
                    attrs({{"axis", 0}, {"dim", 0}}),
                    {4, 4},
                    [](int64_t r, int64_t i, int64_t j) {
                      return in(along(r, 0, i / 2), i % 2, j);
                    }});
  // Cut dim 1 among the dp members, concatenate what arrives along dim 0.
  result.push_back({"all_to_all",
                    attrs({{"axis", 0}, {"dim", 0}, {"to_dim", 1}}),
                    {4, 2},
                    [](int64_t r, int64_t i, int64_t j) {
                      return in(along(r, 0, i / 2), i % 2, 2 * dp(r) + j);
                    }});
  // Cut dim 0 among the tp members, concatenate along dim 1.
  result.push_back({"all_to_all",
                    attrs({{"axis", 1}, {"dim", 1}, {"to_dim", 0}}),
                    {1, 8},
                    [](int64_t r, int64_t i, int64_t j) {
                      return in(along(r, 1, j / 4), tp(r) + i, j % 4);
                    }});
  result.push_back({"local_split",
                    attrs({{"axis", 0}, {"dim", 1}}),
                    {2, 2},
                    [](int64_t r, int64_t i, int64_t j) {
                      return in(r, i, 2 * dp(r) + j);
                    }});
  result.push_back({"make_partial",
                    attrs({{"axis", 1}}),
                    {2, 4},
                    [](int64_t r, int64_t i, int64_t j) {
                      return tp(r) == 0 ? in(r, i, j) : 0;
                    }});
  return result;
}

/// The four ranks of a [2, 2] mesh as threads, each with its runner.
struct Ranks {
  Ranks() : comms(createThreadsCommunicators(4)), pool(4) {
    for (int64_t r = 0; r < 4; ++r)
      runners.emplace_back(mesh2x2(), *comms[r]);
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<CollectiveRunner> runners;
  commtest::RankPool pool;
};

} // namespace

TEST(Collectives, IsCollectiveOp) {
  for (const char *op : {"all_reduce", "reduce_scatter", "all_gather",
                         "all_to_all", "local_split", "make_partial"})
    EXPECT_TRUE(isCollectiveOp(op)) << op;
  EXPECT_FALSE(isCollectiveOp("matmul"));
  EXPECT_FALSE(isCollectiveOp("all_reduce "));
}

// Every instruction gives each rank exactly the hand-derived output, for
// every element type (sums for the numeric ones only).
TEST(Collectives, EveryInstructionEveryType) {
  Ranks ranks;
  for (const Case &c : cases()) {
    for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I32,
                        DType::I64, DType::Bool}) {
      if (c.sums && dtype == DType::Bool)
        continue;
      ranks.pool.run([&](int64_t r) {
        std::vector<int64_t> values;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 4; ++j)
            values.push_back(in(r, i, j));
        std::vector<unsigned char> input = encodeAs(values, dtype);
        std::vector<unsigned char> output(numElements(c.outShape) *
                                          dtypeSize(dtype));
        std::string error =
            ranks.runners[r].run(c.op, c.attrs, {dtype, {2, 4}, input.data()},
                                 {dtype, c.outShape, output.data()});
        EXPECT_EQ(error, "") << c.op;
        std::vector<int64_t> expected;
        for (int64_t i = 0; i < c.outShape[0]; ++i)
          for (int64_t j = 0; j < c.outShape[1]; ++j) {
            int64_t v = c.expected(r, i, j);
            expected.push_back(dtype == DType::Bool ? v & 0xff : v);
          }
        EXPECT_EQ(decodeAs(output, dtype), expected)
            << c.op << " " << dtypeName(dtype) << " on rank " << r;
      });
    }
  }
}

// Input and output may share one buffer.
TEST(Collectives, InPlace) {
  Ranks ranks;
  for (const Case &c : cases()) {
    if (numElements(c.outShape) != 8)
      continue;
    ranks.pool.run([&](int64_t r) {
      std::vector<int64_t> data;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 4; ++j)
          data.push_back(in(r, i, j));
      TensorView view{DType::I64, {2, 4}, data.data()};
      EXPECT_EQ(ranks.runners[r].run(c.op, c.attrs, view,
                                     {DType::I64, c.outShape, data.data()}),
                "");
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < c.outShape[0]; ++i)
        for (int64_t j = 0; j < c.outShape[1]; ++j)
          expected.push_back(c.expected(r, i, j));
      EXPECT_EQ(data, expected) << c.op << " on rank " << r;
    });
  }
}

// Given scratch of collectiveScratch()'s size (the plan's), every
// instruction packs through it, writes nothing past it and allocates
// nothing of its own; given a byte less, it allocates its own.
TEST(Collectives, PacksThroughTheCallersScratch) {
  struct CountingOps : BufferOps {
    void *allocate(size_t bytes) override {
      ++allocations;
      return BufferOps::allocate(bytes);
    }
    int allocations = 0;
  };
  auto comms = createThreadsCommunicators(4);
  commtest::RankPool pool(4);
  int packing = 0;
  for (const Case &c : cases()) {
    const CollectiveScratch need =
        collectiveScratch(c.op, {2, 4}, c.outShape, 8,
                          static_cast<int>(c.attrs.getInt("dim", -1)),
                          static_cast<int>(c.attrs.getInt("to_dim", -1)));
    packing += need.total() > 0;
    for (int64_t shortBy : {0, 1}) {
      if (shortBy && need.total() == 0)
        continue;
      // Fresh runners: no scratch of their own yet.
      std::vector<CountingOps> ops(4);
      std::vector<CollectiveRunner> runners;
      for (int64_t r = 0; r < 4; ++r)
        runners.emplace_back(mesh2x2(), *comms[r], &ops[r]);
      pool.run([&](int64_t r) {
        std::vector<int64_t> input;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 4; ++j)
            input.push_back(in(r, i, j));
        std::vector<int64_t> output(numElements(c.outShape));
        // The scratch, then guard bytes that must stay as they are.
        std::vector<unsigned char> scratch(need.total() + 64, 0xa5);
        EXPECT_EQ(runners[r].run(c.op, c.attrs,
                                 {DType::I64, {2, 4}, input.data()},
                                 {DType::I64, c.outShape, output.data()},
                                 scratch.data(), need.total() - shortBy),
                  "")
            << c.op;
        for (size_t k = need.total(); k < scratch.size(); ++k)
          ASSERT_EQ(scratch[k], 0xa5) << c.op << ": wrote past its scratch";
        std::vector<int64_t> expected;
        for (int64_t i = 0; i < c.outShape[0]; ++i)
          for (int64_t j = 0; j < c.outShape[1]; ++j)
            expected.push_back(c.expected(r, i, j));
        EXPECT_EQ(output, expected) << c.op << " on rank " << r;
      });
      for (const CountingOps &o : ops)
        EXPECT_EQ(o.allocations, shortBy ? 1 : 0)
            << c.op << " given " << need.total() - shortBy << " bytes";
    }
  }
  // all_gather and reduce_scatter along dim 1, and the all_to_all cutting
  // dim 1, pack; the one cutting dim 0 into [1, 4] chunks does not.
  EXPECT_EQ(packing, 3);
}

// A rank's group over some axes lists its members in the documented order
// (first axis outermost).
TEST(Collectives, Groups) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createThreadsCommunicators(4);
  CollectiveRunner runner(mesh2x2(), *comms[3]);
  EXPECT_EQ(runner.group({0}), (RankGroup{1, 3}));
  EXPECT_EQ(runner.group({1}), (RankGroup{2, 3}));
  EXPECT_EQ(runner.group({0, 1}), (RankGroup{0, 1, 2, 3}));
  EXPECT_EQ(runner.group({1, 0}), (RankGroup{0, 2, 1, 3}));
  EXPECT_EQ(runner.group({}), (RankGroup{3}));
  EXPECT_EQ(runner.group({2}), RankGroup{});
}

// Bad attributes and shapes are reported before any exchange, saying what
// is wrong.
TEST(Collectives, Errors) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createThreadsCommunicators(4);
  CollectiveRunner runner(mesh2x2(), *comms[0]);
  std::vector<unsigned char> a(256), b(256);
  auto run = [&](const char *op, const Attrs &attrs, Shape inShape,
                 Shape outShape, DType outType = DType::F32) {
    return runner.run(op, attrs, {DType::F32, inShape, a.data()},
                      {outType, outShape, b.data()});
  };
  Attrs axes;
  axes.set("axes", std::vector<int64_t>{0, 1});
  Attrs twice;
  twice.set("axes", std::vector<int64_t>{1, 1});

  EXPECT_EQ(run("matmul", {}, {2}, {2}),
            "'matmul' is not a collective instruction");
  EXPECT_EQ(run("all_reduce", axes, {2}, {2}, DType::I64),
            "all_reduce: input is f32 but output is i64");
  EXPECT_EQ(run("all_gather", attrs({{"axis", 1}, {"dim", 0}}), {2, 3}, {4}),
            "all_gather: input has rank 2 but output has rank 1");
  EXPECT_EQ(run("all_reduce", {}, {2}, {2}),
            "all_reduce: missing attribute 'axes'");
  EXPECT_EQ(run("all_reduce", twice, {2}, {2}),
            "all_reduce: axis 1 is listed twice");
  EXPECT_EQ(run("all_reduce", axes, {2, 3}, {3, 3}),
            "all_reduce over axes [dp, tp]: output dim 0 is 3, expected 2");
  EXPECT_EQ(run("all_gather", attrs({{"dim", 0}}), {2}, {4}),
            "all_gather: missing attribute 'axis'");
  EXPECT_EQ(run("local_split", attrs({{"axis", 2}, {"dim", 0}}), {2}, {1}),
            "local_split: axis 2 is not an axis of [dp=2, tp=2]");
  EXPECT_EQ(run("all_gather", attrs({{"axis", 1}}), {2}, {4}),
            "all_gather over axis 1 (size 2): missing attribute 'dim'");
  EXPECT_EQ(run("all_gather", attrs({{"axis", 1}, {"dim", 2}}), {2, 3}, {4, 3}),
            "all_gather over axis 1 (size 2): dim 2 is out of range for "
            "rank 2");
  EXPECT_EQ(run("all_gather", attrs({{"axis", 1}, {"dim", 0}}), {2, 3}, {3, 3}),
            "all_gather over axis 1 (size 2) along dim 0: output dim 0 is 3, "
            "expected 4");
  EXPECT_EQ(
      run("reduce_scatter", attrs({{"axis", 0}, {"dim", 1}}), {2, 3}, {2, 1}),
      "reduce_scatter over axis 0 (size 2) along dim 1: input dim 1 is "
      "3, not divisible by 2");
  EXPECT_EQ(
      run("reduce_scatter", attrs({{"axis", 0}, {"dim", 1}}), {2, 4}, {1, 2}),
      "reduce_scatter over axis 0 (size 2) along dim 1: output dim 0 "
      "is 1, expected 2");
  EXPECT_EQ(run("all_to_all", attrs({{"axis", 0}, {"dim", 1}}), {2, 4}, {2, 4}),
            "all_to_all over axis 0 (size 2): missing attribute 'to_dim'");
  EXPECT_EQ(run("all_to_all", attrs({{"axis", 0}, {"dim", 1}, {"to_dim", 1}}),
                {2, 4}, {2, 4}),
            "all_to_all over axis 0 (size 2): dim and to_dim are both 1");
  EXPECT_EQ(run("all_to_all", attrs({{"axis", 0}, {"dim", 0}, {"to_dim", 1}}),
                {2, 4}, {4, 4}),
            "all_to_all over axis 0 (size 2) from dim 0 to dim 1: output dim "
            "1 is 4, expected 2");
  EXPECT_EQ(run("all_to_all", attrs({{"axis", 0}, {"dim", 0}, {"to_dim", 1}}),
                {2, 3}, {4, 1}),
            "all_to_all over axis 0 (size 2) from dim 0 to dim 1: input dim 1 "
            "is 3, not divisible by 2");
  EXPECT_EQ(run("local_split", attrs({{"axis", 1}, {"dim", 0}}), {4}, {4}),
            "local_split over axis 1 (size 2) along dim 0: output dim 0 is 4, "
            "expected 2");
  EXPECT_EQ(run("make_partial", attrs({{"axis", 0}}), {4}, {2}),
            "make_partial over axis 0 (size 2): output dim 0 is 2, expected 4");

  // A rank outside the mesh.
  std::vector<std::unique_ptr<Communicator>> eight =
      createThreadsCommunicators(8);
  CollectiveRunner outside(mesh2x2(), *eight[5]);
  EXPECT_EQ(outside.run("make_partial", attrs({{"axis", 0}}),
                        {DType::F32, {2}, a.data()},
                        {DType::F32, {2}, b.data()}),
            "make_partial: rank 5 is not on mesh [dp=2, tp=2]");
}
