//===- LinalgTest.cpp - matmul and conv2d ---------------------------------===//

#include "test/unit/kernels/KernelTestUtil.h"

#include <cmath>
#include <cstdio>

namespace loom::rt::test {
namespace {

class LinalgTest : public KernelTest {};

/// Matmul/conv tolerance: accumulation makes f32 looser than elementwise.
double linalgTolerance(DType dtype) {
  return dtype == DType::F32 ? 1e-4 : defaultTolerance(dtype);
}

std::vector<double> matmulRef(const HostBuffer &a, bool ta, const HostBuffer &b,
                              bool tb, const Shape &os) {
  size_t r = os.size();
  int64_t m = os[r - 2], n = os[r - 1];
  int64_t k = ta ? a.shape[a.shape.size() - 2] : a.shape.back();
  Shape batch(os.begin(), os.end() - 2);
  Shape aBatch(a.shape.begin(), a.shape.end() - 2),
      bBatch(b.shape.begin(), b.shape.end() - 2);
  std::vector<double> av = values(a), bv = values(b), out;
  for (int64_t i = 0; i < numElements(os); ++i) {
    std::vector<int64_t> idx = unravel(i, os);
    std::vector<int64_t> bi(idx.begin(), idx.end() - 2);
    int64_t aOff = batch.empty() ? 0 : broadcastOffset(bi, aBatch) * m * k;
    int64_t bOff = batch.empty() ? 0 : broadcastOffset(bi, bBatch) * k * n;
    int64_t row = idx[r - 2], col = idx[r - 1];
    double acc = 0;
    for (int64_t p = 0; p < k; ++p)
      acc += av[aOff + (ta ? p * m + row : row * k + p)] *
             bv[bOff + (tb ? col * k + p : p * n + col)];
    out.push_back(acc);
  }
  return out;
}

// Proves matmul with every transpose combination, batch dimensions that
// broadcast on either side (numpy rules, different ranks), f32/f16/bf16.
TEST_P(LinalgTest, MatmulBroadcastAndTranspose) {
  struct Case {
    Shape lhs, rhs; // logical [.., M, K] and [.., K, N] before transposition
  };
  std::vector<Case> cases = {
      {{3, 4}, {4, 5}},          {{2, 3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {3, 4, 5}}, {{3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {4, 5}},       {{1, 3, 3, 4}, {2, 1, 4, 5}},
      {{64, 128}, {128, 96}},    {{1, 1}, {1, 1}}};
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                       formatShape(c.lhs) + (ta ? "^T" : "") + " x " +
                       formatShape(c.rhs) + (tb ? "^T" : ""));
          Shape ls = c.lhs, rs = c.rhs;
          if (ta)
            std::swap(ls[ls.size() - 1], ls[ls.size() - 2]);
          if (tb)
            std::swap(rs[rs.size() - 1], rs[rs.size() - 2]);
          HostBuffer a = randomTensor(dtype, ls, rng);
          HostBuffer b = randomTensor(dtype, rs, rng);
          Shape lb(c.lhs.begin(), c.lhs.end() - 2),
              rb(c.rhs.begin(), c.rhs.end() - 2);
          Shape os = broadcastShapes(lb, rb);
          os.push_back(c.lhs[c.lhs.size() - 2]);
          os.push_back(c.rhs.back());
          Attrs attrs;
          attrs.set("transpose_lhs", ta);
          attrs.set("transpose_rhs", tb);
          expectClose(runOk("matmul", attrs, {a, b}, dtype, os),
                      matmulRef(a, ta, b, tb, os), linalgTolerance(dtype));
        }
}

// Proves a matmul with an empty contraction (K = 0) gives zeros.
TEST_P(LinalgTest, MatmulEmptyContraction) {
  HostBuffer a = makeTensor(DType::F32, {2, 0}, {});
  HostBuffer b = makeTensor(DType::F32, {0, 3}, {});
  expectEqual(runOk("matmul", {}, {a, b}, DType::F32, {2, 3}),
              std::vector<double>(6, 0.0));
}

// Proves fused_matmul is matmul, then + bias along the last dimension, then
// relu when asked: batched and broadcast operands, both transpositions (its
// GEMM is matmul's), every float type, with sizes that are not multiples
// of a vector width.
TEST_P(LinalgTest, FusedMatmulBiasRelu) {
  struct Case {
    Shape lhs, rhs;
    bool ta, tb;
  };
  std::vector<Case> cases = {{{3, 4}, {4, 5}, false, false},
                             {{2, 7, 9}, {13, 9}, false, true},
                             {{9, 7}, {2, 9, 13}, true, false},
                             {{2, 1, 33, 17}, {3, 17, 65}, false, false}};
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases)
      for (bool relu : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(c.lhs) +
                     " x " + formatShape(c.rhs) + (relu ? " relu" : ""));
        HostBuffer a = randomTensor(dtype, c.lhs, rng);
        HostBuffer b = randomTensor(dtype, c.rhs, rng);
        int64_t m = c.lhs[c.lhs.size() - (c.ta ? 1 : 2)];
        int64_t n = c.rhs[c.rhs.size() - (c.tb ? 2 : 1)];
        HostBuffer bias = randomTensor(dtype, {n}, rng);
        Shape os = broadcastShapes(Shape(c.lhs.begin(), c.lhs.end() - 2),
                                   Shape(c.rhs.begin(), c.rhs.end() - 2));
        os.push_back(m);
        os.push_back(n);
        Attrs attrs;
        attrs.set("transpose_lhs", c.ta);
        attrs.set("transpose_rhs", c.tb);
        attrs.set("relu", relu);
        std::vector<double> expected = matmulRef(a, c.ta, b, c.tb, os);
        std::vector<double> bv = values(bias);
        int negative = 0;
        for (size_t i = 0; i < expected.size(); ++i) {
          expected[i] += bv[i % n];
          negative += expected[i] < 0;
          if (relu)
            expected[i] = std::max(expected[i], 0.0);
        }
        ASSERT_GT(negative, 0) << "the relu case needs negative sums";
        expectClose(runOk("fused_matmul", attrs, {a, b, bias}, dtype, os),
                    expected, linalgTolerance(dtype));
      }
}

struct ConvCase {
  Shape input, weight; // NCHW, OIHW
  std::vector<int64_t> strides, padding, dilations;
  int64_t groups;
  bool bias;
};

std::vector<double> convRef(const ConvCase &c, const HostBuffer &x,
                            const HostBuffer &w, const HostBuffer *bias,
                            const Shape &os) {
  std::vector<double> xv = values(x), wv = values(w), out;
  std::vector<double> bv = bias ? values(*bias) : std::vector<double>();
  int64_t C = c.input[1], H = c.input[2], W = c.input[3];
  int64_t O = c.weight[0], KH = c.weight[2], KW = c.weight[3];
  int64_t cpg = C / c.groups, opg = O / c.groups;
  for (int64_t i = 0; i < numElements(os); ++i) {
    std::vector<int64_t> idx = unravel(i, os);
    int64_t n = idx[0], o = idx[1], oh = idx[2], ow = idx[3];
    double acc = bias ? bv[o] : 0;
    for (int64_t ci = 0; ci < cpg; ++ci)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          int64_t ih = oh * c.strides[0] - c.padding[0] + kh * c.dilations[0];
          int64_t iw = ow * c.strides[1] - c.padding[1] + kw * c.dilations[1];
          if (ih < 0 || ih >= H || iw < 0 || iw >= W)
            continue;
          int64_t ch = (o / opg) * cpg + ci;
          acc += xv[((n * C + ch) * H + ih) * W + iw] *
                 wv[((o * cpg + ci) * KH + kh) * KW + kw];
        }
    out.push_back(acc);
  }
  return out;
}

// Proves conv2d against a direct reference: strides, asymmetric padding,
// dilations, grouped and depthwise, 1x1, with and without bias, f32/f16/bf16.
TEST_P(LinalgTest, Conv2d) {
  std::vector<ConvCase> cases = {
      {{2, 3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{1, 4, 9, 7}, {6, 4, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
      {{1, 2, 10, 10}, {3, 2, 3, 3}, {1, 2}, {2, 1, 0, 2}, {2, 2}, 1, true},
      {{2, 4, 6, 6}, {6, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
      {{1, 6, 7, 7}, {6, 1, 3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 2}, 6, false},
      {{3, 5, 4, 4}, {7, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {{1, 16, 28, 28}, {32, 16, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, true},
      {{1, 3, 5, 5}, {2, 3, 5, 5}, {3, 3}, {3, 2, 1, 3}, {1, 1}, 1, true}};
  for (DType dtype : kFloatTypes)
    for (const ConvCase &c : cases) {
      Shape os{c.input[0], c.weight[0]};
      for (int i = 0; i < 2; ++i) {
        int64_t in = c.input[2 + i], k = c.weight[2 + i];
        os.push_back((in + c.padding[i] + c.padding[i + 2] -
                      c.dilations[i] * (k - 1) - 1) /
                         c.strides[i] +
                     1);
      }
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(c.input) +
                   " * " + formatShape(c.weight) + " -> " + formatShape(os) +
                   " groups " + std::to_string(c.groups));
      HostBuffer x = randomTensor(dtype, c.input, rng);
      HostBuffer w = randomTensor(dtype, c.weight, rng);
      HostBuffer b = randomTensor(dtype, {c.weight[0]}, rng);
      Attrs attrs;
      attrs.set("strides", c.strides);
      attrs.set("padding", c.padding);
      attrs.set("dilations", c.dilations);
      attrs.set("groups", c.groups);
      std::vector<HostBuffer> inputs = {x, w};
      if (c.bias)
        inputs.push_back(b);
      expectClose(runOk("conv2d", attrs, inputs, dtype, os),
                  convRef(c, x, w, c.bias ? &b : nullptr, os),
                  linalgTolerance(dtype));
    }
}

LOOM_KERNEL_TEST_PATHS(LinalgTest);

} // namespace
} // namespace loom::rt::test
