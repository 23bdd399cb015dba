//===- Loss.cu - Cross-entropy, its gradient, label_count, mse_loss -------===//
//
// softmax_cross_entropy: one block per row computes the row's loss, then
// one block sums the rows in double and divides by the counted rows (the
// mean over nothing is 0, as on the CPU). softmax_cross_entropy_grad: one
// block counts the labels, then one block per row writes
// (softmax - onehot) * grad / count. A label out of range is a device
// error. With `lse` (a class block of a vocabulary-parallel loss; its
// offset is KernelArgs::block), a row's loss is the block's share (the
// log-sum-exp in the block of class 0, minus the label's logit in the
// block that holds it) and its gradient exp(x - lse) minus the block's part
// of the one-hot. mse_loss sums squared differences in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceUtil.cuh"

namespace loom::rt::cuda {
namespace {

/// The sum of `v` over a block of kThreads threads, in thread 0.
__device__ double blockSumDouble(double v, double *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  double total = shared[0];
  __syncthreads();
  return total;
}

template <typename I>
__device__ bool counted(I label, int64_t ignore, int64_t classes,
                        int *errorWord) {
  if (label == ignore)
    return false;
  if (label < 0 || label >= classes) {
    raise(errorWord, kLabelOutOfRange);
    return false;
  }
  return true;
}

/// A class block of a vocabulary-parallel loss: its first class, the
/// global class count, each row's log-sum-exp (null: the whole row).
template <typename T> struct ClassBlock {
  const T *lse = nullptr;
  int64_t offset = 0;
  int64_t classes = 0;
};

/// Per row: logsumexp - x[label] (0 for ignored rows).
template <typename T, typename I>
__global__ void crossEntropyRowsKernel(const T *logits, const I *labels,
                                       float *rowLoss, int64_t rows,
                                       int64_t classes, int64_t ignore,
                                       ClassBlock<T> block, int *errorWord) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *x = logits + r * classes;
    if (block.lse) {
      if (threadIdx.x == 0) {
        bool use = counted(labels[r], ignore, block.classes, errorWord);
        int64_t local = static_cast<int64_t>(labels[r]) - block.offset;
        float share = block.offset == 0 ? toFloat(block.lse[r]) : 0.0f;
        if (local >= 0 && local < classes)
          share -= toFloat(x[local]);
        rowLoss[r] = use ? share : 0.0f;
      }
      continue;
    }
    bool use = counted(labels[r], ignore, classes, errorWord);
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      m = fmaxf(m, toFloat(x[c]));
    m = blockMax(m, shared);
    float s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += expf(toFloat(x[c]) - m);
    s = blockSum(s, shared);
    if (threadIdx.x == 0)
      rowLoss[r] = use ? m + logf(s) - toFloat(x[labels[r]]) : 0.0f;
    __syncthreads();
  }
}

template <typename T, typename I>
__global__ void crossEntropyTotalKernel(const float *rowLoss, const I *labels,
                                        int64_t rows, int64_t ignore, bool sum,
                                        T *result) {
  __shared__ double shared[kThreads];
  double total = 0, count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += rowLoss[r];
    count += labels[r] != ignore ? 1.0 : 0.0;
  }
  total = blockSumDouble(total, shared);
  count = blockSumDouble(count, shared);
  if (threadIdx.x == 0)
    *result = fromFloat<T>(static_cast<float>(sum         ? total
                                              : count > 0 ? total / count
                                                          : 0.0));
}

template <typename I>
__global__ void countLabelsKernel(const I *labels, int64_t rows, int64_t ignore,
                                  float *count) {
  __shared__ double shared[kThreads];
  double c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    c += labels[r] != ignore ? 1.0 : 0.0;
  c = blockSumDouble(c, shared);
  if (threadIdx.x == 0)
    *count = static_cast<float>(c);
}

template <typename T, typename I>
__global__ void crossEntropyGradKernel(const T *logits, const I *labels,
                                       const T *grad, const float *count,
                                       T *out, int64_t rows, int64_t classes,
                                       int64_t ignore, bool sum,
                                       ClassBlock<T> block, int *errorWord) {
  __shared__ float shared[32];
  double g = toFloat(*grad);
  double factor = *count == 0 ? 0.0 : sum ? g : g / *count;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *x = logits + r * classes;
    T *y = out + r * classes;
    bool use = counted(labels[r], ignore, block.lse ? block.classes : classes,
                       errorWord);
    if (!use || factor == 0.0) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        y[c] = fromFloat<T>(0.0f);
      continue;
    }
    if (block.lse) {
      float lse = toFloat(block.lse[r]);
      int64_t local = static_cast<int64_t>(labels[r]) - block.offset;
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
        float p = expf(toFloat(x[c]) - lse);
        y[c] = fromFloat<T>(c == local ? static_cast<float>((p - 1.0) * factor)
                                       : static_cast<float>(p * factor));
      }
      continue;
    }
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      m = fmaxf(m, toFloat(x[c]));
    m = blockMax(m, shared);
    float s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += expf(toFloat(x[c]) - m);
    s = blockSum(s, shared);
    float scale = static_cast<float>(factor / s);
    int64_t label = labels[r];
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      float p = expf(toFloat(x[c]) - m);
      y[c] = fromFloat<T>(
          c == label ? static_cast<float>((p / s - 1.0) * factor) : p * scale);
    }
    __syncthreads();
  }
}

template <typename F> bool dispatchLabels(DType dtype, F &&f) {
  if (dtype == DType::I32)
    f(int32_t{});
  else if (dtype == DType::I64)
    f(int64_t{});
  else
    return false;
  return true;
}

/// The class block of a vocabulary-parallel loss's kernel (no lse: none).
template <typename T>
ClassBlock<T> classBlock(const KernelArgs &args, const TensorView *lse,
                         int64_t classes) {
  ClassBlock<T> block;
  if (!lse)
    return block;
  block.lse = lse->as<T>();
  block.classes = classes;
  if (args.block && args.block->globalShape.size() == 2) {
    block.offset = args.block->offsets[1];
    block.classes = args.block->globalShape[1];
  }
  return block;
}

std::string runCrossEntropy(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &logits = args.inputs[0], &labels = args.inputs[1],
                   &out = args.outputs[0];
  if (logits.rank() != 2 || labels.rank() != 1 ||
      labels.shape[0] != logits.shape[0] || out.numElements() != 1 ||
      out.dtype != logits.dtype)
    return "cuda kernel 'softmax_cross_entropy' needs logits [N, C], labels "
           "[N] and a scalar result";
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  int64_t ignore = args.attrs.getInt("ignore_index", -100);
  bool sum = args.attrs.getBool("sum");
  const TensorView *lse = args.inputs.size() > 2 ? &args.inputs[2] : nullptr;
  if (lse && (lse->dtype != logits.dtype || lse->shape != Shape{rows}))
    return "cuda kernel 'softmax_cross_entropy' needs lse [N] of the logits' "
           "type";
  Scratch rowLoss(ctx, sizeof(float) * std::max<int64_t>(rows, 1));
  if (!rowLoss)
    return "cuda kernel 'softmax_cross_entropy': out of device memory";
  bool labelsOk = false;
  bool floatOk = dispatchFloat(logits.dtype, [&](auto t) {
    using T = decltype(t);
    labelsOk = dispatchLabels(labels.dtype, [&](auto l) {
      using I = decltype(l);
      if (rows > 0)
        crossEntropyRowsKernel<T, I>
            <<<static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)),
               rowThreadsFor(classes), 0, ctx.stream>>>(
                logits.as<T>(), labels.as<I>(), rowLoss.as<float>(), rows,
                classes, ignore, classBlock<T>(args, lse, classes),
                ctx.errorWord);
      crossEntropyTotalKernel<T, I><<<1, kThreads, 0, ctx.stream>>>(
          rowLoss.as<float>(), labels.as<I>(), rows, ignore, sum, out.as<T>());
    });
  });
  if (!floatOk || !labelsOk)
    return "cuda kernel 'softmax_cross_entropy' needs float logits and i32 "
           "or i64 labels";
  return launchStatus(args.op);
}

std::string runCrossEntropyGrad(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &logits = args.inputs[0], &labels = args.inputs[1],
                   &grad = args.inputs[2], &out = args.outputs[0];
  if (logits.rank() != 2 || labels.rank() != 1 ||
      labels.shape[0] != logits.shape[0] || grad.numElements() != 1 ||
      grad.dtype != logits.dtype || out.shape != logits.shape ||
      out.dtype != logits.dtype)
    return "cuda kernel 'softmax_cross_entropy_grad' needs logits [N, C], "
           "labels [N], a scalar grad and a result like the logits";
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  int64_t ignore = args.attrs.getInt("ignore_index", -100);
  bool sum = args.attrs.getBool("sum");
  const TensorView *lse = args.inputs.size() > 3 ? &args.inputs[3] : nullptr;
  if (lse && (lse->dtype != logits.dtype || lse->shape != Shape{rows}))
    return "cuda kernel 'softmax_cross_entropy_grad' needs lse [N] of the "
           "logits' type";
  if (rows == 0)
    return "";
  Scratch count(ctx, sizeof(float));
  if (!count)
    return "cuda kernel 'softmax_cross_entropy_grad': out of device memory";
  bool labelsOk = false;
  bool floatOk = dispatchFloat(logits.dtype, [&](auto t) {
    using T = decltype(t);
    labelsOk = dispatchLabels(labels.dtype, [&](auto l) {
      using I = decltype(l);
      countLabelsKernel<I><<<1, kThreads, 0, ctx.stream>>>(
          labels.as<I>(), rows, ignore, count.as<float>());
      crossEntropyGradKernel<T, I>
          <<<static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)),
             rowThreadsFor(classes), 0, ctx.stream>>>(
              logits.as<T>(), labels.as<I>(), grad.as<T>(), count.as<float>(),
              out.as<T>(), rows, classes, ignore, sum,
              classBlock<T>(args, lse, classes), ctx.errorWord);
    });
  });
  if (!floatOk || !labelsOk)
    return "cuda kernel 'softmax_cross_entropy_grad' needs float logits and "
           "i32 or i64 labels";
  return launchStatus(args.op);
}

template <typename T>
__global__ void storeCountKernel(const float *count, T *out) {
  *out = fromFloat<T>(*count);
}

std::string runLabelCount(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &labels = args.inputs[0], &out = args.outputs[0];
  if (labels.rank() != 1 || out.numElements() != 1)
    return "cuda kernel 'label_count' needs labels [N] and a scalar result";
  int64_t ignore = args.attrs.getInt("ignore_index", -100);
  Scratch count(ctx, sizeof(float));
  if (!count)
    return "cuda kernel 'label_count': out of device memory";
  if (!dispatchLabels(labels.dtype, [&](auto l) {
        using I = decltype(l);
        countLabelsKernel<I><<<1, kThreads, 0, ctx.stream>>>(
            labels.as<I>(), labels.shape[0], ignore, count.as<float>());
      }))
    return "cuda kernel 'label_count' labels must be i32 or i64";
  if (!dispatchFloat(out.dtype, [&](auto t) {
        using T = decltype(t);
        storeCountKernel<T>
            <<<1, 1, 0, ctx.stream>>>(count.as<float>(), out.as<T>());
      }))
    return "cuda kernel 'label_count' result must be a float scalar";
  return launchStatus(args.op);
}

template <typename T>
__global__ void squaredDifferenceKernel(const T *p, const T *t, int64_t n,
                                        double *total) {
  __shared__ double shared[kThreads];
  double s = 0;
  LOOM_GRID_LOOP(i, n) {
    double d = static_cast<double>(toFloat(p[i])) - toFloat(t[i]);
    s += d * d;
  }
  s = blockSumDouble(s, shared);
  if (threadIdx.x == 0)
    atomicAdd(total, s);
}

template <typename T>
__global__ void mseFinishKernel(const double *total, int64_t n, bool sum,
                                T *out) {
  *out = fromFloat<T>(static_cast<float>(sum ? *total : n ? *total / n : 0.0));
}

std::string runMse(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &p = args.inputs[0], &t = args.inputs[1],
                   &out = args.outputs[0];
  if (p.shape != t.shape || p.dtype != t.dtype || out.numElements() != 1 ||
      out.dtype != p.dtype)
    return "cuda kernel 'mse_loss' needs prediction and target of one type "
           "and a scalar result";
  int64_t n = p.numElements();
  bool sum = args.attrs.getBool("sum");
  Scratch total(ctx, sizeof(double));
  if (!total)
    return "cuda kernel 'mse_loss': out of device memory";
  cudaMemsetAsync(total.as<double>(), 0, sizeof(double), ctx.stream);
  if (!dispatchFloat(p.dtype, [&](auto x) {
        using T = decltype(x);
        if (n > 0)
          squaredDifferenceKernel<T>
              <<<std::min(blocksFor(n), 1024u), kThreads, 0, ctx.stream>>>(
                  p.as<T>(), t.as<T>(), n, total.as<double>());
        mseFinishKernel<T>
            <<<1, 1, 0, ctx.stream>>>(total.as<double>(), n, sum, out.as<T>());
      }))
    return unsupportedType(args.op, p.dtype);
  return launchStatus(args.op);
}

} // namespace

void registerLossKernels(KernelTable &table) {
  table["softmax_cross_entropy"] = {runCrossEntropy, 2, 3};
  table["softmax_cross_entropy_grad"] = {runCrossEntropyGrad, 3, 4};
  table["label_count"] = {runLabelCount, 1, 1};
  table["mse_loss"] = {runMse, 2, 2};
}

} // namespace loom::rt::cuda
