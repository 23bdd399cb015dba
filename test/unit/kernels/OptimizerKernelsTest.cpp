//===- OptimizerKernelsTest.cpp - sgd_update, momentum_update, adam_update ===//
//
// References: (1) the update in double (the math, tolerance-checked), and
// (2) PyTorch 1.13's single-tensor op sequence replayed in f32 (bitwise,
// for f32). Updates run in place in a training plan, so every op is also
// run with its results aliasing its inputs.
//
//===----------------------------------------------------------------------===//

#include "test/unit/kernels/TrainTestUtil.h"

#include <cmath>
#include <cstring>

namespace loom::rt::test {
namespace {

class OptimizerKernelsTest : public KernelTest {};

struct SgdConfig {
  double lr, weightDecay, momentum;
  bool nesterov;
};

/// Momentum SGD in double (the .td formula).
void momentumRefDouble(std::vector<double> &p, const std::vector<double> &g,
                       std::vector<double> &v, const SgdConfig &c) {
  for (size_t i = 0; i < p.size(); ++i) {
    double d = g[i] + c.weightDecay * p[i];
    v[i] = c.momentum * v[i] + d;
    p[i] -= c.lr * (c.nesterov ? d + c.momentum * v[i] : v[i]);
  }
}

/// torch.optim.sgd._single_tensor_sgd (dampening 0) in f32, op by op.
void momentumRefTorch(std::vector<float> &p, const std::vector<float> &g,
                      std::vector<float> &v, const SgdConfig &c) {
  float lr = float(c.lr), wd = float(c.weightDecay), mom = float(c.momentum);
  for (size_t i = 0; i < p.size(); ++i) {
    float d = g[i];
    if (wd != 0)
      d = d + wd * p[i]; // grad.add(param, alpha=wd)
    v[i] = v[i] * mom;   // buf.mul_(momentum)
    v[i] = v[i] + d;     // .add_(d_p, alpha=1 - dampening)
    d = c.nesterov ? d + mom * v[i] : v[i];
    p[i] = p[i] + (-lr) * d; // param.add_(d_p, alpha=-lr)
  }
}

struct AdamConfig {
  double lr, beta1, beta2, eps, weightDecay;
  bool decoupled;
};

/// Adam / AdamW in double (the .td formula) at step t.
void adamRefDouble(std::vector<double> &p, const std::vector<double> &g,
                   std::vector<double> &m, std::vector<double> &v,
                   const AdamConfig &c, double t) {
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = c.decoupled ? g[i] : g[i] + c.weightDecay * p[i];
    if (c.decoupled)
      p[i] *= 1 - c.lr * c.weightDecay;
    m[i] = c.beta1 * m[i] + (1 - c.beta1) * gi;
    v[i] = c.beta2 * v[i] + (1 - c.beta2) * gi * gi;
    p[i] -= c.lr / (1 - std::pow(c.beta1, t)) * m[i] /
            (std::sqrt(v[i]) / std::sqrt(1 - std::pow(c.beta2, t)) + c.eps);
  }
}

/// torch.optim.adam._single_tensor_adam / adamw._single_tensor_adamw of
/// PyTorch 1.13 in f32, op by op; Python scalars in double, handed to f32
/// tensor ops as f32. The attributes are f32, so beta1 etc. are their f32
/// values; lr is an f32 tensor.
void adamRefTorch(std::vector<float> &p, const std::vector<float> &g,
                  std::vector<float> &m, std::vector<float> &v,
                  const AdamConfig &c, double step) {
  double lr = float(c.lr), beta1 = float(c.beta1), beta2 = float(c.beta2),
         eps = float(c.eps), wd = float(c.weightDecay);
  double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
  double stepSize = lr / bc1, bc2Sqrt = std::sqrt(bc2);
  for (size_t i = 0; i < p.size(); ++i) {
    float gi = g[i];
    if (c.decoupled)
      p[i] = p[i] * float(1 - lr * wd); // param.mul_(1 - lr * wd)
    else if (wd != 0)
      gi = gi + float(wd) * p[i];             // grad.add(param, alpha=wd)
    m[i] = m[i] * float(beta1);               // exp_avg.mul_(beta1)
    m[i] = m[i] + float(1 - beta1) * gi;      // .add_(grad, alpha=1 - beta1)
    v[i] = v[i] * float(beta2);               // exp_avg_sq.mul_(beta2)
    v[i] = v[i] + float(1 - beta2) * gi * gi; // .addcmul_(g, g, 1 - beta2)
    float denom = std::sqrt(v[i]) / float(bc2Sqrt); // sqrt() / bc2_sqrt
    denom = denom + float(eps);                     // .add_(eps)
    p[i] = p[i] + float(-stepSize) * m[i] / denom;  // addcdiv_(-step_size)
  }
}

HostBuffer scalar(DType dtype, double v) { return makeTensor(dtype, {}, {v}); }

std::vector<float> asFloats(const HostBuffer &t) {
  std::vector<double> d = values(t);
  return std::vector<float>(d.begin(), d.end());
}

Attrs sgdAttrs(const SgdConfig &c) {
  Attrs a;
  a.set("weight_decay", double(float(c.weightDecay)));
  a.set("momentum", double(float(c.momentum)));
  a.set("nesterov", c.nesterov);
  return a;
}

Attrs adamAttrs(const AdamConfig &c) {
  Attrs a;
  a.set("beta1", double(float(c.beta1)));
  a.set("beta2", double(float(c.beta2)));
  a.set("epsilon", double(float(c.eps)));
  a.set("weight_decay", double(float(c.weightDecay)));
  a.set("decoupled_weight_decay", c.decoupled);
  return a;
}

const std::vector<Shape> kShapes = {{7}, {3, 5}, {100, 1000}};

// Proves sgd_update is p - lr * (g + wd * p): bitwise PyTorch's f32 op
// sequence for f32 (with and without weight decay, small and parallel
// sizes), and within tolerance of the double formula for f16/bf16.
TEST_P(OptimizerKernelsTest, Sgd) {
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : kShapes)
      for (double wd : {0.0, 0.01}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape) +
                     " wd " + std::to_string(wd));
        SgdConfig c{0.1, wd, 0.0, false};
        HostBuffer p = randomTensor(dtype, shape, rng, -2, 2);
        HostBuffer g = randomTensor(dtype, shape, rng);
        MultiResult r =
            runKernel(*backend, "sgd_update", sgdAttrs(c),
                      {p, g, scalar(dtype, c.lr)}, {{dtype, shape}});
        ASSERT_EQ(r.error, "");
        std::vector<double> pd = values(p), gd = values(g);
        double lr = values(scalar(dtype, c.lr))[0], wdF = float(wd);
        for (size_t i = 0; i < pd.size(); ++i)
          pd[i] -= lr * (gd[i] + wdF * pd[i]);
        expectClose(r.outs[0], pd, defaultTolerance(dtype));
        if (dtype == DType::F32) {
          std::vector<float> pf = asFloats(p), gf = asFloats(g);
          // SGD without momentum is the momentum sequence minus the buffer.
          for (size_t i = 0; i < pf.size(); ++i) {
            float d = gf[i];
            if (float(wd) != 0)
              d = d + float(wd) * pf[i];
            pf[i] = pf[i] + (-float(c.lr)) * d;
          }
          EXPECT_EQ(rawValues<float>(r.outs[0]), pf);
        }
      }
}

// Proves momentum_update over three steps (velocity fed back), plain and
// Nesterov, with and without weight decay: bitwise PyTorch's f32 sequence
// for f32, within tolerance of the double formula for f16/bf16.
TEST_P(OptimizerKernelsTest, Momentum) {
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : kShapes)
      for (bool nesterov : {false, true})
        for (double wd : {0.0, 1e-3}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape) +
                       (nesterov ? " nesterov" : "") + " wd " +
                       std::to_string(wd));
          SgdConfig c{0.05, wd, 0.9, nesterov};
          HostBuffer p = randomTensor(dtype, shape, rng, -2, 2);
          HostBuffer v =
              makeTensor(dtype, shape, std::vector<double>(numElements(shape)));
          std::vector<double> pd = values(p), vd = values(v);
          std::vector<float> pf = asFloats(p), vf = asFloats(v);
          SgdConfig rounded{values(scalar(dtype, c.lr))[0], float(wd),
                            float(c.momentum), nesterov};
          for (int step = 0; step < 3; ++step) {
            HostBuffer g = randomTensor(dtype, shape, rng);
            MultiResult r = runKernel(*backend, "momentum_update", sgdAttrs(c),
                                      {p, g, v, scalar(dtype, c.lr)},
                                      {{dtype, shape}, {dtype, shape}});
            ASSERT_EQ(r.error, "");
            momentumRefDouble(pd, values(g), vd, rounded);
            momentumRefTorch(pf, asFloats(g), vf, c);
            p = r.outs[0];
            v = r.outs[1];
            // Kernel state is rounded each step; compare with tolerance
            // growing with the steps for the half types.
            expectClose(p, pd, defaultTolerance(dtype) * (step + 1));
            expectClose(v, vd, defaultTolerance(dtype) * (step + 1));
            if (dtype == DType::F32) {
              EXPECT_EQ(rawValues<float>(p), pf);
              EXPECT_EQ(rawValues<float>(v), vf);
            } else {
              pd = values(p); // continue from the kernel's rounded state
              vd = values(v);
            }
          }
        }
}

// Proves adam_update (Adam with L2 decay, AdamW, no decay) over steps 1-3:
// bitwise PyTorch 1.13's f32 op sequence for f32 and within tolerance of
// the double formula, f32/f16/bf16.
TEST_P(OptimizerKernelsTest, Adam) {
  std::vector<AdamConfig> configs = {{1e-3, 0.9, 0.999, 1e-8, 0.0, false},
                                     {1e-2, 0.9, 0.999, 1e-8, 0.01, false},
                                     {1e-2, 0.8, 0.99, 1e-6, 0.1, true}};
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : kShapes)
      for (const AdamConfig &c : configs) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape) +
                     (c.decoupled ? " adamw" : " adam") + " wd " +
                     std::to_string(c.weightDecay));
        HostBuffer p = randomTensor(dtype, shape, rng, -2, 2);
        HostBuffer m =
            makeTensor(dtype, shape, std::vector<double>(numElements(shape)));
        HostBuffer v = m;
        std::vector<double> pd = values(p), md = values(m), vd = values(v);
        std::vector<float> pf = asFloats(p), mf = asFloats(m), vf = asFloats(v);
        AdamConfig rounded{values(scalar(dtype, c.lr))[0],
                           float(c.beta1),
                           float(c.beta2),
                           float(c.eps),
                           float(c.weightDecay),
                           c.decoupled};
        for (int step = 1; step <= 3; ++step) {
          HostBuffer g = randomTensor(dtype, shape, rng);
          MultiResult r =
              runKernel(*backend, "adam_update", adamAttrs(c),
                        {p, g, m, v, scalar(dtype, c.lr), scalar(dtype, step)},
                        {{dtype, shape}, {dtype, shape}, {dtype, shape}});
          ASSERT_EQ(r.error, "");
          adamRefDouble(pd, values(g), md, vd, rounded, step);
          adamRefTorch(pf, asFloats(g), mf, vf, c, step);
          p = r.outs[0];
          m = r.outs[1];
          v = r.outs[2];
          double tol = defaultTolerance(dtype);
          expectClose(p, pd, tol);
          expectClose(m, md, tol);
          expectClose(v, vd, tol, 1e-3);
          if (dtype == DType::F32) {
            EXPECT_EQ(rawValues<float>(p), pf);
            EXPECT_EQ(rawValues<float>(m), mf);
            EXPECT_EQ(rawValues<float>(v), vf);
          } else {
            pd = values(p);
            md = values(m);
            vd = values(v);
          }
        }
      }
}

// Proves Adam's steps 1, 2, 3 against values computed by hand: with a
// constant gradient g the bias-corrected moments are g and g^2, so each
// step moves p by lr * g / (|g| + eps); p = 1, g = 0.5, lr = 0.1 gives
// 0.9, 0.8, 0.7 (minus 2e-9 per step). AdamW with wd = 0.1 first scales p
// by 1 - lr * wd = 0.99: 0.89, 0.7811, 0.673289.
TEST_P(OptimizerKernelsTest, AdamHandComputedSteps) {
  for (bool decoupled : {false, true}) {
    AdamConfig c{0.1, 0.9, 0.999, 1e-8, decoupled ? 0.1 : 0.0, decoupled};
    HostBuffer p = makeTensor(DType::F32, {2}, {1.0, -1.0});
    HostBuffer g = makeTensor(DType::F32, {2}, {0.5, -0.5});
    HostBuffer m = makeTensor(DType::F32, {2}, {0, 0}), v = m;
    std::vector<double> expected =
        decoupled ? std::vector<double>{0.89, 0.7811, 0.673289}
                  : std::vector<double>{0.9 - 2e-9, 0.8 - 4e-9, 0.7 - 6e-9};
    for (int step = 1; step <= 3; ++step) {
      MultiResult r = runKernel(
          *backend, "adam_update", adamAttrs(c),
          {p, g, m, v, scalar(DType::F32, c.lr), scalar(DType::F32, step)},
          {{DType::F32, {2}}, {DType::F32, {2}}, {DType::F32, {2}}});
      ASSERT_EQ(r.error, "");
      p = r.outs[0];
      m = r.outs[1];
      v = r.outs[2];
      double want = expected[step - 1];
      expectClose(p, {want, -want}, 1e-6);
      // m = (1 - b1^t) g and v = (1 - b2^t) g^2 exactly in real numbers.
      expectClose(
          m,
          {(1 - std::pow(0.9, step)) * 0.5, -(1 - std::pow(0.9, step)) * 0.5},
          1e-6);
      // (1e-4: the f32 attribute 0.999 is 0.99900001, 1.3e-5 relative off.)
      expectClose(v,
                  {(1 - std::pow(0.999, step)) * 0.25,
                   (1 - std::pow(0.999, step)) * 0.25},
                  1e-4, 1e-3);
    }
  }
}

/// Runs `op` twice: into separate results and with result i aliasing input
/// aliasOf[i]; expects bitwise equal results.
void expectAliasingIsTransparent(Backend &backend, const std::string &op,
                                 const Attrs &attrs,
                                 const std::vector<HostBuffer> &inputs,
                                 const std::vector<size_t> &aliasOf) {
  std::vector<OutSpec> specs;
  for (size_t i : aliasOf)
    specs.push_back({inputs[i].dtype, inputs[i].shape});
  MultiResult separate = runKernel(backend, op, attrs, inputs, specs);
  ASSERT_EQ(separate.error, "");
  std::vector<HostBuffer> inPlace = inputs;
  std::vector<TensorView> in, out;
  for (HostBuffer &b : inPlace)
    in.push_back(b.view());
  for (size_t i : aliasOf)
    out.push_back(inPlace[i].view());
  ASSERT_EQ(runViews(backend, op, attrs, in, out), "");
  for (size_t k = 0; k < aliasOf.size(); ++k)
    EXPECT_EQ(inPlace[aliasOf[k]].bytes, separate.outs[k].bytes)
        << op << " result " << k;
}

// Proves the updates are correct in place: with new_param aliasing param,
// new_velocity velocity, new_m m and new_v v, every result is bitwise the
// non-aliased one, f32/f16/bf16, small and parallel sizes.
TEST_P(OptimizerKernelsTest, InPlaceMatchesOutOfPlace) {
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : {Shape{11}, Shape{200, 500}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + formatShape(shape));
      auto t = [&](double lo, double hi) {
        return randomTensor(dtype, shape, rng, lo, hi);
      };
      HostBuffer p = t(-2, 2), g = t(-1, 1), vel = t(-1, 1), m = t(-1, 1),
                 v = t(0, 1);
      expectAliasingIsTransparent(*backend, "sgd_update",
                                  sgdAttrs({0.1, 0.01, 0, false}),
                                  {p, g, scalar(dtype, 0.1)}, {0});
      for (bool nesterov : {false, true})
        expectAliasingIsTransparent(*backend, "momentum_update",
                                    sgdAttrs({0.1, 0.01, 0.9, nesterov}),
                                    {p, g, vel, scalar(dtype, 0.1)}, {0, 2});
      for (bool decoupled : {false, true})
        expectAliasingIsTransparent(
            *backend, "adam_update",
            adamAttrs({1e-3, 0.9, 0.999, 1e-8, 0.01, decoupled}),
            {p, g, m, v, scalar(dtype, 1e-3), scalar(dtype, 4)}, {0, 2, 3});
    }
}

// Proves malformed updates are errors, not out-of-bounds accesses: a
// non-scalar lr, a grad of another shape, a result of another shape, mixed
// element types, integer tensors and a wrong result count.
TEST_P(OptimizerKernelsTest, MalformedUpdatesAreErrors) {
  auto t = [&](Shape s, DType d = DType::F32) {
    return randomTensor(d, std::move(s), rng);
  };
  Attrs attrs = sgdAttrs({0.1, 0, 0.9, false});
  EXPECT_NE(runKernel(*backend, "sgd_update", attrs, {t({4}), t({4}), t({2})},
                      {{DType::F32, {4}}})
                .error,
            "");
  EXPECT_NE(runKernel(*backend, "sgd_update", attrs, {t({4}), t({5}), t({})},
                      {{DType::F32, {4}}})
                .error,
            "");
  EXPECT_NE(runKernel(*backend, "sgd_update", attrs, {t({4}), t({4}), t({})},
                      {{DType::F32, {5}}})
                .error,
            "");
  EXPECT_NE(runKernel(*backend, "sgd_update", attrs,
                      {t({4}), t({4}, DType::F16), t({})}, {{DType::F32, {4}}})
                .error,
            "");
  EXPECT_NE(
      runKernel(*backend, "sgd_update", attrs,
                {t({4}, DType::I32), t({4}, DType::I32), t({}, DType::I32)},
                {{DType::I32, {4}}})
          .error,
      "");
  MultiResult r =
      runKernel(*backend, "momentum_update", attrs,
                {t({4}), t({4}), t({4}), t({})}, {{DType::F32, {4}}});
  EXPECT_NE(r.error.find("expects 4 inputs and 2 outputs"), std::string::npos)
      << r.error;
  r = runKernel(*backend, "adam_update",
                adamAttrs({1e-3, 0.9, 0.999, 1e-8, 0, false}),
                {t({4}), t({4}), t({4}), t({3}), t({}), t({})},
                {{DType::F32, {4}}, {DType::F32, {4}}, {DType::F32, {4}}});
  EXPECT_NE(r.error, "");
}

LOOM_KERNEL_TEST_PATHS(OptimizerKernelsTest);

} // namespace
} // namespace loom::rt::test
