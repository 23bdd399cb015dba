//===- ElementwiseTest.cpp - Binary and unary elementwise kernels ---------===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace loom::rt::test {
namespace {

class ElementwiseTest : public KernelTest {
protected:
  /// Runs a binary op and returns the reference computed by `ref` on the
  /// broadcast operands.
  void checkBinary(const std::string &op, DType dtype, const Shape &ls,
                   const Shape &rs, double lo, double hi, double rlo,
                   double rhi,
                   const std::function<double(double, double)> &ref) {
    SCOPED_TRACE(op + " " + dtypeName(dtype) + " " + formatShape(ls) + " " +
                 formatShape(rs));
    HostBuffer lhs = randomTensor(dtype, ls, rng, lo, hi);
    HostBuffer rhs = randomTensor(dtype, rs, rng, rlo, rhi);
    Shape os = broadcastShapes(ls, rs);
    std::vector<double> a = values(lhs), b = values(rhs), expected;
    for (int64_t i = 0; i < numElements(os); ++i) {
      std::vector<int64_t> idx = unravel(i, os);
      expected.push_back(
          ref(a[broadcastOffset(idx, ls)], b[broadcastOffset(idx, rs)]));
    }
    HostBuffer out = runOk(op, {}, {lhs, rhs}, dtype, os);
    if (isFloat(dtype))
      expectClose(out, expected, defaultTolerance(dtype));
    else
      expectEqual(out, expected);
  }

  HostBuffer runUnary(const std::string &op, const HostBuffer &in,
                      const Attrs &attrs = {}) {
    return runOk(op, attrs, {in}, in.dtype, in.shape);
  }
};

const std::vector<std::pair<Shape, Shape>> kBroadcastShapes = {
    {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}},   {{4}, {2, 3, 4}},
    {{2, 1, 4}, {3, 1}},    {{}, {3, 2}},       {{5, 1, 1, 3}, {1, 4, 2, 1}},
    {{3, 2}, {}},           {{64, 300}, {300}}, {{300}, {64, 1}}};

// Proves add/sub/mul/div/pow on f32, f16 and bf16 match a double reference
// under numpy broadcasting (same shapes, trailing, leading, both sides and
// scalar operands, and tensors big enough for the parallel loops).
TEST_P(ElementwiseTest, FloatBinaryBroadcasts) {
  std::map<std::string, std::function<double(double, double)>> ops = {
      {"add", std::plus<double>()},
      {"sub", std::minus<double>()},
      {"mul", std::multiplies<double>()},
      {"div", std::divides<double>()},
      {"pow", [](double a, double b) { return std::pow(a, b); }}};
  for (DType dtype : kFloatTypes)
    for (const auto &[ls, rs] : kBroadcastShapes)
      for (const auto &[op, ref] : ops) {
        bool positive = op == "div" || op == "pow";
        checkBinary(op, dtype, ls, rs, positive ? 0.5 : -2, 2,
                    positive ? 0.5 : -2, 2, ref);
      }
}

// Proves integer add/sub/mul/div/pow (i32, i64) are exact under broadcasting,
// that division truncates toward zero, and pow is repeated multiplication.
TEST_P(ElementwiseTest, IntegerBinaryBroadcasts) {
  auto truncDiv = [](double a, double b) { return std::trunc(a / b); };
  for (DType dtype : {DType::I32, DType::I64})
    for (const auto &[ls, rs] : kBroadcastShapes) {
      checkBinary("add", dtype, ls, rs, -50, 50, -50, 50, std::plus<double>());
      checkBinary("sub", dtype, ls, rs, -50, 50, -50, 50, std::minus<double>());
      checkBinary("mul", dtype, ls, rs, -50, 50, -50, 50,
                  std::multiplies<double>());
      checkBinary("div", dtype, ls, rs, -50, 50, 1, 9, truncDiv);
      checkBinary("div", dtype, ls, rs, -50, 50, -9, -1, truncDiv);
      checkBinary("pow", dtype, ls, rs, -6, 6, 0, 5,
                  [](double a, double b) { return std::pow(a, b); });
    }
}

// Proves integer division truncates toward zero for every sign combination.
TEST_P(ElementwiseTest, IntegerDivisionTruncatesTowardZero) {
  HostBuffer a = makeTensor(DType::I32, {4}, {-7, 7, -7, 7});
  HostBuffer b = makeTensor(DType::I32, {4}, {2, -2, -2, 2});
  expectEqual(runOk("div", {}, {a, b}, DType::I32, {4}), {-3, -3, 3, 3});
}

// Proves integer overflow wraps (two's complement) instead of being
// undefined: add, sub, mul, min / -1, neg of min, and pow.
TEST_P(ElementwiseTest, IntegerOverflowWraps) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min(),
                    kMax = std::numeric_limits<int32_t>::max();
  auto i32 = [](std::vector<int32_t> v) {
    Shape s{static_cast<int64_t>(v.size())};
    return rawTensor(DType::I32, s, v);
  };
  auto result = [&](const std::string &op, std::vector<int32_t> a,
                    std::vector<int32_t> b) {
    Shape s{static_cast<int64_t>(a.size())};
    return rawValues<int32_t>(runOk(op, {}, {i32(a), i32(b)}, DType::I32, s));
  };
  EXPECT_EQ(result("add", {kMax, kMin}, {1, -1}),
            (std::vector<int32_t>{kMin, kMax}));
  EXPECT_EQ(result("sub", {kMin, kMax}, {1, -1}),
            (std::vector<int32_t>{kMax, kMin}));
  EXPECT_EQ(result("mul", {65536, kMin}, {65536, -1}),
            (std::vector<int32_t>{0, kMin}));
  EXPECT_EQ(result("div", {kMin}, {-1}), (std::vector<int32_t>{kMin}));
  // 3^40 wraps modulo 2^32: the reference multiplies 40 times.
  uint32_t wrapped = 1;
  for (int i = 0; i < 40; ++i)
    wrapped *= 3u;
  EXPECT_EQ(result("pow", {3}, {40}),
            (std::vector<int32_t>{static_cast<int32_t>(wrapped)}));
  EXPECT_EQ(rawValues<int32_t>(runUnary("neg", i32({kMin, 5, -6}))),
            (std::vector<int32_t>{kMin, -5, 6}));

  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  HostBuffer a = rawTensor<int64_t>(DType::I64, {2}, {kMin64, kMin64});
  HostBuffer b = rawTensor<int64_t>(DType::I64, {2}, {-1, -1});
  EXPECT_EQ(rawValues<int64_t>(runOk("div", {}, {a, b}, DType::I64, {2})),
            (std::vector<int64_t>{kMin64, kMin64}));
  EXPECT_EQ(rawValues<int64_t>(runOk("sub", {}, {b, a}, DType::I64, {2})),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::max()}));
}

// Proves integer division by zero is reported as an error, for i32 and i64,
// including a zero reached only through broadcasting.
TEST_P(ElementwiseTest, IntegerDivisionByZeroIsAnError) {
  for (DType dtype : {DType::I32, DType::I64}) {
    HostBuffer a = makeTensor(dtype, {2, 3}, {1, 2, 3, 4, 5, 6});
    HostBuffer b = makeTensor(dtype, {3}, {1, 0, 2});
    OpResult r = run("div", {}, {a, b}, dtype, {2, 3});
    EXPECT_NE(r.error.find("division by zero"), std::string::npos) << r.error;
  }
}

// Proves integer pow with negative exponents gives the truncated quotient
// (1, +-1 or 0) and that 0 to a negative power is a division-by-zero error.
TEST_P(ElementwiseTest, IntegerPowNegativeExponent) {
  HostBuffer base = makeTensor(DType::I64, {5}, {1, -1, -1, 2, -3});
  HostBuffer exp = makeTensor(DType::I64, {5}, {-3, -3, -2, -1, -2});
  expectEqual(runOk("pow", {}, {base, exp}, DType::I64, {5}), {1, -1, 1, 0, 0});
  HostBuffer zero = makeTensor(DType::I64, {1}, {0});
  HostBuffer minusOne = makeTensor(DType::I64, {1}, {-1});
  OpResult r = run("pow", {}, {zero, minusOne}, DType::I64, {1});
  EXPECT_NE(r.error.find("division by zero"), std::string::npos) << r.error;
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Proves every unary float op matches its double reference on f32, f16 and
// bf16, on a small tensor and on one large enough for parallel loops.
TEST_P(ElementwiseTest, FloatUnaryOps) {
  struct Case {
    std::string op;
    double lo, hi;
    std::function<double(double)> ref;
    bool tanhApprox = false;
  };
  std::vector<Case> cases = {
      {"neg", -3, 3, [](double x) { return -x; }},
      {"exp", -3, 3, [](double x) { return std::exp(x); }},
      {"log", 0.05, 4, [](double x) { return std::log(x); }},
      {"sqrt", 0, 4, [](double x) { return std::sqrt(x); }},
      {"erf", -3, 3, [](double x) { return std::erf(x); }},
      {"tanh", -3, 3, [](double x) { return std::tanh(x); }},
      {"relu", -3, 3, [](double x) { return x < 0 ? 0 : x; }},
      {"sigmoid", -6, 6, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"gelu", -4, 4, gelu},
      {"gelu", -4, 4, geluTanh, true}};
  for (const Case &c : cases)
    for (DType dtype : kFloatTypes)
      for (Shape shape : {Shape{3, 5, 7}, Shape{40000}, Shape{}}) {
        SCOPED_TRACE(c.op + (c.tanhApprox ? " (tanh)" : "") + " " +
                     dtypeName(dtype) + " " + formatShape(shape));
        HostBuffer in = randomTensor(dtype, shape, rng, c.lo, c.hi);
        Attrs attrs;
        if (c.tanhApprox)
          attrs.set("tanh_approximation", true);
        std::vector<double> expected;
        for (double x : values(in))
          expected.push_back(c.ref(x));
        expectClose(runUnary(c.op, in, attrs), expected,
                    defaultTolerance(dtype));
      }
}

// Proves the two gelu forms are distinguishable at f32 tolerance, so the
// test above would notice tanh_approximation being ignored.
TEST_P(ElementwiseTest, GeluFormsDiffer) {
  HostBuffer in = makeTensor(DType::F32, {1}, {1.5});
  double erfForm = values(runUnary("gelu", in))[0];
  Attrs attrs;
  attrs.set("tanh_approximation", true);
  double tanhForm = values(runUnary("gelu", in, attrs))[0];
  EXPECT_NEAR(erfForm, gelu(1.5), 1e-6);
  EXPECT_NEAR(tanhForm, geluTanh(1.5), 1e-6);
  EXPECT_GT(std::abs(erfForm - tanhForm), 1e-4);
}

// Proves neg works on integers (i32, i64) and keeps -0.0 on floats.
TEST_P(ElementwiseTest, NegIntegersAndSignedZero) {
  HostBuffer i = makeTensor(DType::I64, {3}, {4, -9, 0});
  expectEqual(runUnary("neg", i), {-4, 9, 0});
  HostBuffer z = makeTensor(DType::F32, {1}, {0.0});
  EXPECT_TRUE(std::signbit(values(runUnary("neg", z))[0]));
}

// Proves NaN propagates through every unary float op (relu included, as in
// numpy and PyTorch), relu maps -inf to 0, and exp overflows to inf.
TEST_P(ElementwiseTest, SpecialValues) {
  double nan = std::numeric_limits<double>::quiet_NaN(),
         inf = std::numeric_limits<double>::infinity();
  for (const char *op : {"neg", "exp", "log", "sqrt", "erf", "tanh", "relu",
                         "sigmoid", "gelu"}) {
    // Enough elements for vectorised code paths, NaN at several lanes.
    std::vector<double> vals(37, 0.5);
    vals[0] = vals[17] = vals[36] = nan;
    HostBuffer x = makeTensor(DType::F32, {37}, vals);
    std::vector<double> got = values(runUnary(op, x));
    for (int i : {0, 17, 36})
      EXPECT_TRUE(std::isnan(got[i])) << op << " at " << i;
  }
  HostBuffer x = makeTensor(DType::F32, {2}, {-inf, inf});
  EXPECT_EQ(values(runUnary("relu", x)), (std::vector<double>{0, inf}));
  HostBuffer big = makeTensor(DType::F32, {1}, {100});
  EXPECT_EQ(values(runUnary("exp", big))[0], inf);
}

/// An activation of common/ops/ElementwiseMath.h: its attributes, the
/// parameters unary_grad takes for them, and a double reference.
struct Activation {
  std::string op;
  std::vector<std::pair<std::string, double>> params;
  double lo, hi;
  std::function<double(double)> ref;
};

std::vector<Activation> activations() {
  auto softplus = [](double x) {
    return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x)));
  };
  auto elu = [](double a) {
    return [a](double x) { return x > 0 ? x : a * std::expm1(x); };
  };
  auto clamp = [](double x, double lo, double hi) {
    return std::min(std::max(x, lo), hi);
  };
  double inf = std::numeric_limits<double>::infinity();
  return {
      {"cos", {}, -6, 6, [](double x) { return std::cos(x); }},
      {"sin", {}, -6, 6, [](double x) { return std::sin(x); }},
      {"abs", {}, -3, 3, [](double x) { return std::abs(x); }},
      {"reciprocal", {}, 0.3, 3, [](double x) { return 1 / x; }},
      {"softplus", {}, -30, 30, softplus},
      {"mish", {}, -6, 6, [=](double x) { return x * std::tanh(softplus(x)); }},
      {"hard_swish",
       {},
       -5,
       5,
       [=](double x) { return x * clamp(x / 6 + 0.5, 0, 1); }},
      {"leaky_relu",
       {{"alpha", 0.1}},
       -3,
       3,
       [](double x) { return x > 0 ? x : 0.1 * x; }},
      {"elu", {{"alpha", 0.7}}, -4, 4, elu(0.7)},
      {"selu",
       {{"alpha", 1.5}, {"gamma", 2.0}},
       -4,
       4,
       [=](double x) { return 2.0 * elu(1.5)(x); }},
      {"hard_sigmoid",
       {{"alpha", 0.2}, {"beta", 0.4}},
       -5,
       5,
       [=](double x) { return clamp(0.2 * x + 0.4, 0, 1); }},
      {"clip",
       {{"min", -0.5}, {"max", 1.25}},
       -3,
       3,
       [=](double x) { return clamp(x, -0.5, 1.25); }},
      {"clip",
       {{"min", -inf}, {"max", 1.25}},
       -3,
       3,
       [=](double x) { return clamp(x, -inf, 1.25); }},
  };
}

// Proves each activation matches its double reference on f32, f16 and bf16
// (mish among them, which no ONNX opset before 18 reaches), and that NaN
// stays NaN.
TEST_P(ElementwiseTest, Activations) {
  for (const Activation &a : activations())
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(a.op + " " + dtypeName(dtype));
      Attrs attrs;
      for (const auto &[name, value] : a.params)
        attrs.set(name, value);
      HostBuffer in = randomTensor(dtype, {3, 5, 7}, rng, a.lo, a.hi);
      std::vector<double> expected;
      for (double x : values(in))
        expected.push_back(a.ref(x));
      expectClose(runUnary(a.op, in, attrs), expected, defaultTolerance(dtype));
      if (dtype == DType::F32) {
        HostBuffer nan = makeTensor(
            DType::F32, {2}, {std::numeric_limits<double>::quiet_NaN(), 1});
        EXPECT_TRUE(std::isnan(values(runUnary(a.op, nan, attrs))[0]));
      }
    }
}

// Proves unary_grad gives dy * f'(x) for each activation, f' taken by
// central differences of the double reference (the inputs avoid the
// kinks, which test/e2e/gradient_rules.py holds to PyTorch).
TEST_P(ElementwiseTest, UnaryGradIsGradTimesTheDerivative) {
  for (const Activation &a : activations()) {
    SCOPED_TRACE(a.op);
    Attrs attrs;
    attrs.set("fn", a.op);
    attrs.set("alpha", a.params.size() > 0 ? a.params[0].second : 0.0);
    attrs.set("beta", a.params.size() > 1 ? a.params[1].second : 0.0);
    HostBuffer x = randomTensor(DType::F32, {4, 9}, rng, a.lo, a.hi);
    HostBuffer dy = randomTensor(DType::F32, {4, 9}, rng, -1, 1);
    std::vector<double> xs = values(x), dys = values(dy), expected;
    const double h = 1e-5;
    for (size_t i = 0; i < xs.size(); ++i)
      expected.push_back(dys[i] * (a.ref(xs[i] + h) - a.ref(xs[i] - h)) /
                         (2 * h));
    expectClose(runOk("unary_grad", attrs, {x, dy}, DType::F32, {4, 9}),
                expected, 1e-4);
  }
}

// Proves abs works on integers, the minimum wrapping to itself.
TEST_P(ElementwiseTest, AbsIntegers) {
  HostBuffer i = makeTensor(DType::I64, {3}, {4, -9, 0});
  expectEqual(runUnary("abs", i), {4, 9, 0});
  HostBuffer m = rawTensor<int32_t>(DType::I32, {1}, {INT32_MIN});
  EXPECT_EQ(rawValues<int32_t>(runUnary("abs", m))[0], INT32_MIN);
}

LOOM_KERNEL_TEST_PATHS(ElementwiseTest);

} // namespace
} // namespace loom::rt::test
