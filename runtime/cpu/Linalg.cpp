//===- Linalg.cpp - Batched matmul and grouped 2-D convolution ------------===//
//
// matmul: oneDNN matmul with numpy-broadcast batch dimensions (size-1 batch
// dimensions broadcast in oneDNN) and transposition expressed as strides.
// conv2d: oneDNN direct convolution on NCHW / (G)OIHW. Plain loops with
// double accumulation otherwise.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuContext.h"
#include "runtime/cpu/KernelUtil.h"

namespace loom::rt::cpu {
namespace {

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// Operand of a matmul: its storage shape padded to the result's rank, and
/// whether the last two dimensions are transposed.
struct MatmulOperand {
  Shape storage;
  bool transposed;

#if LOOM_HAVE_DNNL
  /// Logical [..., rows, cols] dims and their strides into storage.
  dnnl::memory::desc desc() const {
    Shape dims = storage;
    std::vector<int64_t> strides = rowMajorStrides(storage);
    if (transposed) {
      size_t r = dims.size();
      std::swap(dims[r - 1], dims[r - 2]);
      std::swap(strides[r - 1], strides[r - 2]);
    }
    return stridedDesc(dims, strides);
  }
#endif
};

bool matmulOneDnn(CpuContext &ctx, const MatmulOperand &lhs, const void *a,
                  const MatmulOperand &rhs, const void *b,
                  const TensorView &out) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn || out.rank() > DNNL_MAX_NDIMS)
    return false;
  try {
    auto prim = ctx.primitives.get(
        CacheKey("matmul")
            .add(lhs.storage)
            .add(lhs.transposed)
            .add(rhs.storage)
            .add(rhs.transposed),
        [&] {
          dnnl::matmul::desc desc(lhs.desc(), rhs.desc(), plainDesc(out.shape));
          return makeCached<dnnl::matmul>(dnnl::matmul::primitive_desc(
              desc, userScratchpadAttr(), cpuEngine()));
        });
    execute(*prim,
            {{DNNL_ARG_SRC, wrapMemory(lhs.desc(), a)},
             {DNNL_ARG_WEIGHTS, wrapMemory(rhs.desc(), b)},
             {DNNL_ARG_DST, wrapMemory(plainDesc(out.shape), out.data)}});
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

void matmulPlain(const MatmulOperand &lhs, const float *a,
                 const MatmulOperand &rhs, const float *b,
                 const TensorView &out, int64_t m, int64_t k, int64_t n) {
  Shape batch(out.shape.begin(), out.shape.end() - 2);
  // Offsets of each batch's matrices, from the broadcast batch strides.
  Shape lhsBatch(lhs.storage.begin(), lhs.storage.end() - 2),
      rhsBatch(rhs.storage.begin(), rhs.storage.end() - 2);
  std::vector<int64_t> lhsStrides = broadcastStrides(lhsBatch, batch),
                       rhsStrides = broadcastStrides(rhsBatch, batch);
  for (auto &s : lhsStrides)
    s *= m * k;
  for (auto &s : rhsStrides)
    s *= k * n;
  int64_t batches = numElements(batch);
  std::vector<int64_t> lhsOffset(batches), rhsOffset(batches);
  StridedLoop<2>(batch, {lhsStrides, rhsStrides})
      .run([&](int64_t i, const std::array<int64_t, 2> &off) {
        lhsOffset[i] = off[0];
        rhsOffset[i] = off[1];
      });
  // Element (i, j) of a logical [rows, cols] operand.
  int64_t aRow = lhs.transposed ? 1 : k, aCol = lhs.transposed ? m : 1;
  int64_t bRow = rhs.transposed ? 1 : n, bCol = rhs.transposed ? k : 1;
  float *c = out.as<float>();
  int64_t rows = batches * m;
#pragma omp parallel for schedule(static) if (rows * n * k > kGrain)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t bi = row / m, i = row % m;
    const float *ab = a + lhsOffset[bi], *bb = b + rhsOffset[bi];
    std::vector<double> acc(n, 0.0);
    for (int64_t p = 0; p < k; ++p) {
      double av = ab[i * aRow + p * aCol];
      for (int64_t j = 0; j < n; ++j)
        acc[j] += av * bb[p * bRow + j * bCol];
    }
    for (int64_t j = 0; j < n; ++j)
      c[row * n + j] = static_cast<float>(acc[j]);
  }
}

/// fused_matmul's epilogue on the product in `out`: + bias per row, then
/// relu. In f32, before the result is rounded to a narrower type once.
void addBias(const TensorView &bias, bool relu, const TensorView &out) {
  int64_t n = out.shape.back(),
          rows = out.numElements() / std::max<int64_t>(n, 1);
  const float *b = bias.as<float>();
  float *c = out.as<float>();
#pragma omp parallel for schedule(static) if (rows * n > kGrain)
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < n; ++j) {
      float v = c[row * n + j] + b[j];
      c[row * n + j] = relu ? std::max(v, 0.0f) : v;
    }
}

/// matmul, and fused_matmul (a third input, the bias, and `relu`).
std::string matmulKernel(CpuContext &ctx, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &lhs = a.inputs[0], &rhs = a.inputs[1],
                     &out = a.outputs[0];
    if (lhs.rank() < 2 || rhs.rank() < 2 || out.rank() < 2)
      return "matmul operands must have rank at least 2";
    size_t rank = out.shape.size();
    MatmulOperand l{padLeft(lhs.shape, rank), a.attrs.getBool("transpose_lhs")};
    MatmulOperand r{padLeft(rhs.shape, rank), a.attrs.getBool("transpose_rhs")};
    int64_t m = l.storage[rank - (l.transposed ? 1 : 2)];
    int64_t k = l.storage[rank - (l.transposed ? 2 : 1)];
    int64_t n = r.storage[rank - (r.transposed ? 2 : 1)];
    int64_t rk = r.storage[rank - (r.transposed ? 1 : 2)];
    Shape batch(out.shape.begin(), out.shape.end() - 2);
    if (k != rk || out.shape[rank - 2] != m || out.shape[rank - 1] != n ||
        !broadcastsTo(Shape(lhs.shape.begin(), lhs.shape.end() - 2), batch) ||
        !broadcastsTo(Shape(rhs.shape.begin(), rhs.shape.end() - 2), batch))
      return "matmul shapes " + formatShape(lhs.shape) + " x " +
             formatShape(rhs.shape) + " -> " + formatShape(out.shape) +
             " do not agree";
    if (out.numElements() == 0)
      return {};
    if (lhs.numElements() == 0 || rhs.numElements() == 0) // k == 0
      std::fill(out.as<float>(), out.as<float>() + out.numElements(), 0.0f);
    else if (!matmulOneDnn(ctx, l, lhs.data, r, rhs.data, out))
      matmulPlain(l, lhs.as<float>(), r, rhs.as<float>(), out, m, k, n);
    if (a.inputs.size() == 3)
      addBias(a.inputs[2], a.attrs.getBool("relu"), out);
    return {};
  });
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

struct ConvGeometry {
  int64_t batch, channels, height, width;         // input
  int64_t outChannels, kernelH, kernelW;          // weight
  int64_t outH, outW;                             // result
  int64_t strideH, strideW, dilationH, dilationW; // attributes
  int64_t padTop, padLeft, padBottom, padRight, groups;
};

bool convOneDnn(CpuContext &ctx, const ConvGeometry &g, const float *x,
                const float *w, const float *bias, float *y) {
#if LOOM_HAVE_DNNL
  if (!ctx.useOneDnn)
    return false;
  using dims = dnnl::memory::dims;
  dnnl::memory::desc src = plainDesc({g.batch, g.channels, g.height, g.width});
  dnnl::memory::desc dst = plainDesc({g.batch, g.outChannels, g.outH, g.outW});
  int64_t perGroupIn = g.channels / g.groups;
  dnnl::memory::desc weights =
      g.groups == 1
          ? plainDesc({g.outChannels, perGroupIn, g.kernelH, g.kernelW})
          : plainDesc({g.groups, g.outChannels / g.groups, perGroupIn,
                       g.kernelH, g.kernelW});
  dnnl::memory::desc biasDesc = plainDesc({g.outChannels});
  try {
    CacheKey key("conv2d");
    key.add({g.batch, g.channels, g.height, g.width, g.outChannels, g.kernelH,
             g.kernelW, g.outH, g.outW, g.strideH, g.strideW, g.dilationH,
             g.dilationW, g.padTop, g.padLeft, g.padBottom, g.padRight,
             g.groups})
        .add(bias != nullptr);
    auto prim = ctx.primitives.get(key, [&] {
      dims strides{g.strideH, g.strideW},
          dilates{g.dilationH - 1, g.dilationW - 1}, padL{g.padTop, g.padLeft},
          padR{g.padBottom, g.padRight};
      auto make = [&](const dnnl::convolution_forward::desc &desc) {
        return makeCached<dnnl::convolution_forward>(
            dnnl::convolution_forward::primitive_desc(
                desc, userScratchpadAttr(), cpuEngine()));
      };
      if (bias)
        return make(dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_inference,
            dnnl::algorithm::convolution_direct, src, weights, biasDesc, dst,
            strides, dilates, padL, padR));
      return make(dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference,
          dnnl::algorithm::convolution_direct, src, weights, dst, strides,
          dilates, padL, padR));
    });
    std::unordered_map<int, dnnl::memory> margs{
        {DNNL_ARG_SRC, wrapMemory(src, x)},
        {DNNL_ARG_WEIGHTS, wrapMemory(weights, w)},
        {DNNL_ARG_DST, wrapMemory(dst, y)}};
    if (bias)
      margs.emplace(DNNL_ARG_BIAS, wrapMemory(biasDesc, bias));
    execute(*prim, std::move(margs));
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
#else
  return false;
#endif
}

void convPlain(const ConvGeometry &g, const float *x, const float *w,
               const float *bias, float *y) {
  int64_t perGroupIn = g.channels / g.groups,
          perGroupOut = g.outChannels / g.groups;
  int64_t planes = g.batch * g.outChannels;
#pragma omp parallel for schedule(static) if (planes > 1)
  for (int64_t plane = 0; plane < planes; ++plane) {
    int64_t n = plane / g.outChannels, o = plane % g.outChannels;
    int64_t firstIn = (o / perGroupOut) * perGroupIn;
    float *out = y + plane * g.outH * g.outW;
    for (int64_t oh = 0; oh < g.outH; ++oh)
      for (int64_t ow = 0; ow < g.outW; ++ow) {
        double acc = bias ? bias[o] : 0.0;
        for (int64_t c = 0; c < perGroupIn; ++c) {
          const float *in =
              x + (n * g.channels + firstIn + c) * g.height * g.width;
          const float *ker = w + (o * perGroupIn + c) * g.kernelH * g.kernelW;
          for (int64_t kh = 0; kh < g.kernelH; ++kh) {
            int64_t ih = oh * g.strideH - g.padTop + kh * g.dilationH;
            if (ih < 0 || ih >= g.height)
              continue;
            for (int64_t kw = 0; kw < g.kernelW; ++kw) {
              int64_t iw = ow * g.strideW - g.padLeft + kw * g.dilationW;
              if (iw >= 0 && iw < g.width)
                acc += static_cast<double>(in[ih * g.width + iw]) *
                       ker[kh * g.kernelW + kw];
            }
          }
        }
        out[oh * g.outW + ow] = static_cast<float>(acc);
      }
  }
}

std::string conv2dKernel(CpuContext &ctx, const KernelArgs &args) {
  return runInF32(args, [&](const KernelArgs &a) -> std::string {
    const TensorView &x = a.inputs[0], &w = a.inputs[1], &y = a.outputs[0];
    const float *bias = a.inputs.size() > 2 ? a.inputs[2].as<float>() : nullptr;
    std::vector<int64_t> strides = a.attrs.getInts("strides"),
                         padding = a.attrs.getInts("padding"),
                         dilations = a.attrs.getInts("dilations");
    if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4 ||
        strides.size() != 2 || padding.size() != 4 || dilations.size() != 2)
      return "conv2d needs rank-4 operands, 2 strides, 4 paddings and 2 "
             "dilations";
    ConvGeometry g{x.shape[0],   x.shape[1], x.shape[2],
                   x.shape[3],   w.shape[0], w.shape[2],
                   w.shape[3],   y.shape[2], y.shape[3],
                   strides[0],   strides[1], dilations[0],
                   dilations[1], padding[0], padding[1],
                   padding[2],   padding[3], a.attrs.getInt("groups", 1)};
    if (y.shape[0] != g.batch || y.shape[1] != g.outChannels ||
        (bias && a.inputs[2].numElements() != g.outChannels))
      return "conv2d result " + formatShape(y.shape) +
             " or bias does not "
             "match input " +
             formatShape(x.shape) + " and weight " + formatShape(w.shape);
    if (g.groups < 1 || g.channels % g.groups || g.outChannels % g.groups ||
        w.shape[1] * g.groups != g.channels)
      return "conv2d groups (" + std::to_string(g.groups) +
             ") do not match input " + formatShape(x.shape) + " and weight " +
             formatShape(w.shape);
    if (y.numElements() == 0)
      return {};
    if (x.numElements() == 0 ||
        !convOneDnn(ctx, g, x.as<float>(), w.as<float>(), bias, y.as<float>()))
      convPlain(g, x.as<float>(), w.as<float>(), bias, y.as<float>());
    return {};
  });
}

} // namespace

void registerLinalgKernels(KernelTable &table) {
  table["matmul"] = {matmulKernel, 2, 2};
  table["fused_matmul"] = {matmulKernel, 3, 3};
  table["conv2d"] = {conv2dKernel, 2, 3};
}

} // namespace loom::rt::cpu
