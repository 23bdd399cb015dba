//===- Cudnn.cuh - cuDNN calls and padded copies for the CUDA kernels
//------===//
//
// Internal to the CUDA backend's convolution and pooling (Conv.cu,
// Pool.cu): errors named by op, cuDNN descriptors that free themselves, the
// backend's cuDNN handle (made on first use: most models never need it), and
// the padded copies through which asymmetric padding and ceil-mode windows
// reach cuDNN, which pads symmetrically.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDNN_CUH
#define LOOM_RUNTIME_CUDA_CUDNN_CUH

#include "runtime/cuda/DeviceUtil.cuh"

#include <algorithm>
#include <initializer_list>
#include <memory>

namespace loom::rt::cuda {

inline std::string opError(std::string_view op, const std::string &what) {
  return "cuda kernel '" + std::string(op) + "': " + what;
}

/// "" if every tensor has the first one's element type, a float type.
inline std::string
expectOneFloatType(std::string_view op,
                   std::initializer_list<const TensorView *> ts) {
  DType dtype = (*ts.begin())->dtype;
  for (const TensorView *t : ts)
    if (t->dtype != dtype)
      return opError(op, std::string("operands must have one element type, "
                                     "got ") +
                             dtypeName(dtype) + " and " + dtypeName(t->dtype));
  if (!isFloat(dtype))
    return unsupportedType(op, dtype);
  return "";
}

//===----------------------------------------------------------------------===//
// cuDNN: status, descriptors, the handle, algorithms; padding copies
//===----------------------------------------------------------------------===//

/// The first failing cuDNN call of a kernel, as the kernel's error.
class CudnnStatus {
public:
  explicit CudnnStatus(std::string_view op) : op(op) {}
  /// Whether this and every earlier call succeeded; records the first
  /// failure, naming `what` was being done.
  bool operator()(cudnnStatus_t status, const char *what) {
    if (status != CUDNN_STATUS_SUCCESS && error.empty())
      error = opError(op, std::string("cuDNN: ") + what + ": " +
                              cudnnGetErrorString(status));
    return error.empty();
  }
  std::string error;

private:
  std::string_view op;
};

/// A cuDNN descriptor, destroyed at the end of its scope.
template <typename D, cudnnStatus_t (*Create)(D *), cudnnStatus_t (*Destroy)(D)>
class Descriptor {
public:
  Descriptor() : status(Create(&d)) {}
  ~Descriptor() {
    if (status == CUDNN_STATUS_SUCCESS)
      Destroy(d);
  }
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;
  operator D() const { return d; }
  cudnnStatus_t created() const { return status; }

private:
  D d{};
  cudnnStatus_t status;
};

using TensorDesc =
    Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
               cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
               cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
               cudnnDestroyConvolutionDescriptor>;
using PoolDesc =
    Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
               cudnnDestroyPoolingDescriptor>;

inline cudnnDataType_t cudnnTypeOf(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return CUDNN_DATA_HALF;
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

/// Sets a dense NCHW descriptor.
inline bool setNchw(CudnnStatus &ok, cudnnTensorDescriptor_t d, DType dtype,
                    int64_t n, int64_t c, int64_t h, int64_t w,
                    const char *what) {
  return ok(cudnnSetTensor4dDescriptor(
                d, CUDNN_TENSOR_NCHW, cudnnTypeOf(dtype), static_cast<int>(n),
                static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
            what);
}

/// The backend's cuDNN handle (made on first use: most models never need
/// it), bound to the kernels' stream; nullptr after a failure `ok` records.
inline cudnnHandle_t cudnnOf(CudaContext &ctx, CudnnStatus &ok) {
  if (!ctx.cudnn) {
    cudnnHandle_t handle = nullptr;
    if (!ok(cudnnCreate(&handle), "cannot create a handle"))
      return nullptr;
    ctx.cudnn = handle;
  }
  return ok(cudnnSetStream(ctx.cudnn, ctx.stream), "cudnnSetStream") ? ctx.cudnn
                                                                     : nullptr;
}

/// Workspace a convolution algorithm may use.
/// `fill` where src has no element. Negative offsets crop.
template <typename T>
__global__ void padKernel(const T *src, T *dst, int64_t h, int64_t w,
                          int64_t hp, int64_t wp, int64_t top, int64_t left,
                          float fill, int64_t n) {
  LOOM_GRID_LOOP(i, n) {
    int64_t col = i % wp, row = (i / wp) % hp, plane = i / (wp * hp);
    int64_t sr = row - top, sc = col - left;
    dst[i] = sr >= 0 && sr < h && sc >= 0 && sc < w
                 ? src[(plane * h + sr) * w + sc]
                 : fromFloat<T>(fill);
  }
}

/// Copies planes of h x w into (hp x wp)-planes of a new scratch at (top,
/// left), `fill` around them; nullptr if memory ran out.
inline std::unique_ptr<Scratch> padded(CudaContext &ctx, const TensorView &src,
                                       int64_t planes, int64_t h, int64_t w,
                                       int64_t hp, int64_t wp, int64_t top,
                                       int64_t left, float fill) {
  int64_t n = planes * hp * wp;
  auto out = std::make_unique<Scratch>(ctx, std::max<int64_t>(n, 1) *
                                                dtypeSize(src.dtype));
  if (!*out)
    return nullptr;
  dispatchFloat(src.dtype, [&](auto t) {
    using T = decltype(t);
    padKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        src.as<T>(), out->as<T>(), h, w, hp, wp, top, left, fill, n);
  });
  return out;
}

/// The (top, left) window of h x w of each (hp x wp)-plane of `src` into
/// `dst`; 0 where the window leaves the plane.
inline void crop(CudaContext &ctx, const Scratch &src, const TensorView &dst,
                 int64_t planes, int64_t h, int64_t w, int64_t hp, int64_t wp,
                 int64_t top, int64_t left) {
  int64_t n = planes * h * w;
  dispatchFloat(dst.dtype, [&](auto t) {
    using T = decltype(t);
    padKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        src.as<T>(), dst.as<T>(), hp, wp, h, w, -top, -left, 0.0f, n);
  });
}

/// The output position whose window reads input position `in` at window
/// offset `k` along one axis, if any.
inline __device__ bool convOutputOf(int64_t in, int64_t k, int64_t stride,
                                    int64_t padBegin, int64_t dilation,
                                    int64_t outs, int64_t &out) {
  int64_t t = in + padBegin - k * dilation;
  if (t < 0 || t % stride != 0)
    return false;
  out = t / stride;
  return out < outs;
}

} // namespace loom::rt::cuda

#endif // LOOM_RUNTIME_CUDA_CUDNN_CUH
