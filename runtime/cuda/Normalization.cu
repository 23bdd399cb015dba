//===- Normalization.cu - softmax, layer_norm and their kind on CUDA ------===//
//
// softmax and log_softmax (f32 rows of up to 1024 contiguous elements: one
// warp per row, held in registers; others: one block per row along the axis),
// layer_norm (one block per normalised row: mean, then the biased variance,
// then the output), layer_norm_grad (the input gradient per row, the scale and
// bias gradients as column sums over row chunks, then over the chunks) and
// batch_norm (inference form). Statistics are computed in f32 with block
// reductions.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

#include <algorithm>
#include <type_traits>

namespace loom::rt::cuda {
namespace {

/// Rows of `length` elements `stride` apart: row r starts at
/// (r / inner) * length * inner + r % inner.
template <typename T>
__global__ void softmaxKernel(const T *in, T *out, int64_t rows, int64_t length,
                              int64_t inner, bool logOf) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t start = (r / inner) * length * inner + r % inner;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < length; i += blockDim.x) {
      float x = toFloat(in[start + i * inner]);
      m = (x != x || m != m) ? NAN : fmaxf(m, x);
    }
    m = blockMax(m, shared);
    float s = 0;
    for (int64_t i = threadIdx.x; i < length; i += blockDim.x)
      s += expf(toFloat(in[start + i * inner]) - m);
    s = blockSum(s, shared);
    float logSum = logf(s);
    for (int64_t i = threadIdx.x; i < length; i += blockDim.x) {
      float x = toFloat(in[start + i * inner]) - m;
      out[start + i * inner] = fromFloat<T>(logOf ? x - logSum : expf(x) / s);
    }
    __syncthreads();
  }
}

/// Contiguous rows of at most 32 * PerLane elements: one warp per row, the
/// row held in registers, so that it is read from memory once.
template <typename T, int PerLane>
__global__ void warpSoftmaxKernel(const T *in, T *out, int64_t rows, int length,
                                  bool logOf) {
  int lane = threadIdx.x & 31;
  int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  int64_t warps = (gridDim.x * int64_t(blockDim.x)) >> 5;
  for (int64_t r = warp; r < rows; r += warps) {
    const T *p = in + r * length;
    float v[PerLane];
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < PerLane; ++j) {
      int c = lane + 32 * j;
      v[j] = c < length ? toFloat(p[c]) : -INFINITY;
      m = (v[j] != v[j] || m != m) ? NAN : fmaxf(m, v[j]);
    }
    for (int o = 16; o > 0; o >>= 1) {
      float other = __shfl_xor_sync(0xffffffffu, m, o);
      m = (other != other || m != m) ? NAN : fmaxf(m, other);
    }
    float s = 0;
#pragma unroll
    for (int j = 0; j < PerLane; ++j)
      if (lane + 32 * j < length)
        s += expf(v[j] - m);
    for (int o = 16; o > 0; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    float logSum = logf(s);
    T *q = out + r * length;
#pragma unroll
    for (int j = 0; j < PerLane; ++j) {
      int c = lane + 32 * j;
      if (c < length) {
        float x = v[j] - m;
        q[c] = fromFloat<T>(logOf ? x - logSum : expf(x) / s);
      }
    }
  }
}

/// Launches warpSoftmaxKernel with the fewest registers per lane that hold
/// a row; false for rows longer than 1024.
template <typename T>
bool launchWarpSoftmax(CudaContext &ctx, const T *in, T *out, int64_t rows,
                       int64_t length, bool logOf) {
  if (length > 1024)
    return false;
  unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((rows + 7) / 8, 65535 * 32));
  auto launch = [&](auto perLane) {
    warpSoftmaxKernel<T, decltype(perLane)::value>
        <<<blocks, 256, 0, ctx.stream>>>(in, out, rows,
                                         static_cast<int>(length), logOf);
  };
  if (length <= 32)
    launch(std::integral_constant<int, 1>{});
  else if (length <= 128)
    launch(std::integral_constant<int, 4>{});
  else if (length <= 512)
    launch(std::integral_constant<int, 16>{});
  else
    launch(std::integral_constant<int, 32>{});
  return true;
}

std::string runSoftmax(CudaContext &ctx, const KernelArgs &args, bool logOf) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= in.rank() || in.shape != out.shape ||
      in.dtype != out.dtype)
    return "cuda kernel '" + std::string(args.op) + "': invalid axis or result";
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < in.rank(); ++d)
    inner *= in.shape[d];
  int64_t length = in.shape[axis];
  int64_t rows = length ? in.numElements() / length : 0;
  if (rows == 0)
    return "";
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        // f32 only: on an H200 the warp form was slower than the block form
        // for bf16 rows of 1024 (0.85 against 0.77 ms for 100M elements).
        if constexpr (std::is_same_v<T, float>)
          if (inner == 1 && launchWarpSoftmax<T>(ctx, in.as<T>(), out.as<T>(),
                                                 rows, length, logOf))
            return;
        softmaxKernel<T>
            <<<static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)),
               length >= 1024 ? 512 : 128, 0, ctx.stream>>>(
                in.as<T>(), out.as<T>(), rows, length, inner, logOf);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

template <typename T>
__device__ void rowStatistics(const T *x, int64_t cols, float epsilon,
                              float *shared, float &mean, float &rstd) {
  float s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    s += toFloat(x[c]);
  mean = blockSum(s, shared) / static_cast<float>(cols);
  float v = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = toFloat(x[c]) - mean;
    v += d * d;
  }
  float variance = blockSum(v, shared) / static_cast<float>(cols);
  rstd = rsqrtf(variance + epsilon);
}

template <typename T>
__global__ void layerNormKernel(const T *in, const T *scale, const T *bias,
                                T *out, int64_t rows, int64_t cols,
                                float epsilon) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *x = in + r * cols;
    float mean, rstd;
    rowStatistics(x, cols, epsilon, shared, mean, rstd);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float y = (toFloat(x[c]) - mean) * rstd * toFloat(scale[c]);
      if (bias)
        y += toFloat(bias[c]);
      out[r * cols + c] = fromFloat<T>(y);
    }
    __syncthreads();
  }
}

/// Rows and columns of a layer_norm over [axis, rank).
bool normShape(const TensorView &in, int64_t axis, int64_t &rows,
               int64_t &cols) {
  if (axis < 0 || axis >= in.rank())
    return false;
  cols = 1;
  for (int64_t d = axis; d < in.rank(); ++d)
    cols *= in.shape[d];
  rows = cols ? in.numElements() / cols : 0;
  return true;
}

std::string runLayerNorm(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &scale = args.inputs[1],
                   &out = args.outputs[0];
  const TensorView *bias = args.inputs.size() > 2 ? &args.inputs[2] : nullptr;
  int64_t rows, cols;
  if (!normShape(in, args.attrs.getInt("axis"), rows, cols) ||
      scale.numElements() != cols || (bias && bias->numElements() != cols) ||
      out.shape != in.shape || out.dtype != in.dtype ||
      scale.dtype != in.dtype || (bias && bias->dtype != in.dtype))
    return "cuda kernel 'layer_norm': invalid axis, scale, bias or result";
  if (rows == 0)
    return "";
  float epsilon = static_cast<float>(args.attrs.getFloat("epsilon"));
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        layerNormKernel<T>
            <<<static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)),
               rowThreadsFor(cols), 0, ctx.stream>>>(
                in.as<T>(), scale.as<T>(), bias ? bias->as<T>() : nullptr,
                out.as<T>(), rows, cols, epsilon);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

/// dx per row; the row's mean and rstd are kept for the column sums.
template <typename T>
__global__ void layerNormGradInputKernel(const T *in, const T *scale,
                                         const T *grad, T *dx, float *means,
                                         float *rstds, int64_t rows,
                                         int64_t cols, float epsilon) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *x = in + r * cols, *dy = grad + r * cols;
    float mean, rstd;
    rowStatistics(x, cols, epsilon, shared, mean, rstd);
    float sg = 0, sgx = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float g = toFloat(dy[c]) * toFloat(scale[c]);
      float xhat = (toFloat(x[c]) - mean) * rstd;
      sg += g;
      sgx += g * xhat;
    }
    float meanG = blockSum(sg, shared) / static_cast<float>(cols);
    float meanGX = blockSum(sgx, shared) / static_cast<float>(cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float g = toFloat(dy[c]) * toFloat(scale[c]);
      float xhat = (toFloat(x[c]) - mean) * rstd;
      dx[r * cols + c] = fromFloat<T>(rstd * (g - meanG - xhat * meanGX));
    }
    if (threadIdx.x == 0) {
      means[r] = mean;
      rstds[r] = rstd;
    }
    __syncthreads();
  }
}

/// Partial column sums of dy * xhat and dy over the rows of chunk
/// blockIdx.y.
template <typename T>
__global__ void
layerNormGradParamsKernel(const T *in, const T *grad, const float *means,
                          const float *rstds, float *partial, int64_t rows,
                          int64_t cols, int64_t rowsPerChunk) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols)
    return;
  int64_t begin = blockIdx.y * rowsPerChunk,
          end = min(rows, begin + rowsPerChunk);
  float ds = 0, db = 0;
  for (int64_t r = begin; r < end; ++r) {
    float dy = toFloat(grad[r * cols + c]);
    ds += dy * (toFloat(in[r * cols + c]) - means[r]) * rstds[r];
    db += dy;
  }
  partial[(blockIdx.y * 2) * cols + c] = ds;
  partial[(blockIdx.y * 2 + 1) * cols + c] = db;
}

template <typename T>
__global__ void layerNormGradReduceKernel(const float *partial, int64_t chunks,
                                          int64_t cols, T *dscale, T *dbias) {
  LOOM_GRID_LOOP(c, cols) {
    float ds = 0, db = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      ds += partial[(k * 2) * cols + c];
      db += partial[(k * 2 + 1) * cols + c];
    }
    dscale[c] = fromFloat<T>(ds);
    dbias[c] = fromFloat<T>(db);
  }
}

std::string runLayerNormGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &scale = args.inputs[1],
                   &grad = args.inputs[2];
  const TensorView &dx = args.outputs[0], &dscale = args.outputs[1],
                   &dbias = args.outputs[2];
  int64_t rows, cols;
  if (!normShape(in, args.attrs.getInt("axis"), rows, cols) ||
      scale.numElements() != cols || grad.shape != in.shape ||
      dx.shape != in.shape || dscale.numElements() != cols ||
      dbias.numElements() != cols)
    return "cuda kernel 'layer_norm_grad': invalid axis or shapes";
  for (const TensorView *t : {&scale, &grad, &dx, &dscale, &dbias})
    if (t->dtype != in.dtype)
      return "cuda kernel 'layer_norm_grad': element types differ";
  if (cols == 0)
    return "";
  float epsilon = static_cast<float>(args.attrs.getFloat("epsilon"));
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(rows / 64, 128));
  int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  Scratch stats(ctx, sizeof(float) * (2 * rows + 1));
  Scratch partial(ctx, sizeof(float) * 2 * chunks * cols);
  if (!stats || !partial)
    return "cuda kernel 'layer_norm_grad': out of device memory";
  float *means = stats.as<float>(), *rstds = means + rows;
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        if (rows > 0)
          layerNormGradInputKernel<T>
              <<<static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)),
                 rowThreadsFor(cols), 0, ctx.stream>>>(
                  in.as<T>(), scale.as<T>(), grad.as<T>(), dx.as<T>(), means,
                  rstds, rows, cols, epsilon);
        dim3 grid(static_cast<unsigned>((cols + 255) / 256),
                  static_cast<unsigned>(chunks));
        layerNormGradParamsKernel<T><<<grid, 256, 0, ctx.stream>>>(
            in.as<T>(), grad.as<T>(), means, rstds, partial.as<float>(), rows,
            cols, rowsPerChunk);
        layerNormGradReduceKernel<T>
            <<<blocksFor(cols), kThreads, 0, ctx.stream>>>(
                partial.as<float>(), chunks, cols, dscale.as<T>(),
                dbias.as<T>());
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

template <typename T>
__global__ void batchNormKernel(const T *in, const T *scale, const T *bias,
                                const T *mean, const T *variance, T *out,
                                int64_t n, int64_t channels, int64_t spatial,
                                float epsilon) {
  LOOM_GRID_LOOP(i, n) {
    int64_t c = (i / spatial) % channels;
    float factor = toFloat(scale[c]) * rsqrtf(toFloat(variance[c]) + epsilon);
    out[i] = fromFloat<T>((toFloat(in[i]) - toFloat(mean[c])) * factor +
                          toFloat(bias[c]));
  }
}

std::string runBatchNorm(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.rank() < 2 || out.shape != in.shape || out.dtype != in.dtype)
    return "cuda kernel 'batch_norm': input must have rank at least 2";
  int64_t channels = in.shape[1];
  int64_t spatial = 1;
  for (int64_t d = 2; d < in.rank(); ++d)
    spatial *= in.shape[d];
  for (size_t i = 1; i < 5; ++i)
    if (args.inputs[i].numElements() != channels ||
        args.inputs[i].dtype != in.dtype)
      return "cuda kernel 'batch_norm': parameters must have " +
             std::to_string(channels) + " elements";
  int64_t n = in.numElements();
  if (n == 0)
    return "";
  float epsilon = static_cast<float>(args.attrs.getFloat("epsilon"));
  if (!dispatchFloat(in.dtype, [&](auto t) {
        using T = decltype(t);
        batchNormKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
            in.as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(),
            args.inputs[3].as<T>(), args.inputs[4].as<T>(), out.as<T>(), n,
            channels, spatial, epsilon);
      }))
    return unsupportedType(args.op, in.dtype);
  return launchStatus(args.op);
}

} // namespace

void registerNormalizationKernels(KernelTable &table) {
  table["softmax"] = {[](CudaContext &ctx, const KernelArgs &args) {
                        return runSoftmax(ctx, args, false);
                      },
                      1, 1};
  table["log_softmax"] = {[](CudaContext &ctx, const KernelArgs &args) {
                            return runSoftmax(ctx, args, true);
                          },
                          1, 1};
  table["layer_norm"] = {runLayerNorm, 2, 3};
  table["layer_norm_grad"] = {runLayerNormGrad, 3, 3, 3};
  table["batch_norm"] = {runBatchNorm, 5, 5};
}

} // namespace loom::rt::cuda
