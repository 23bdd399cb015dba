//===- CudaBackend.h - What the CUDA backend offers beyond Backend -*- C++
//-*-===//
//
// For the driver, the NCCL communicator, tests and benchmarks: the device
// count, a CUDA backend's device and stream, and its allocator's
// statistics. Available when the build has the CUDA backend.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDABACKEND_H
#define LOOM_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"
#include "runtime/cuda/CachingAllocator.h"

#include <string>

namespace loom::rt::cuda {

/// The number of CUDA devices, or 0 and `error` ("no CUDA device: ...").
int deviceCount(std::string &error);

/// The device and the stream (a cudaStream_t) of a backend made by
/// createCudaBackend(); -1 and nullptr for any other backend.
int deviceOf(const Backend &backend);
void *streamOf(const Backend &backend);

/// The caching allocator's statistics of a CUDA backend (zeros for others).
CachingAllocator::Stats allocatorStats(const Backend &backend);

} // namespace loom::rt::cuda

#endif // LOOM_RUNTIME_CUDA_CUDABACKEND_H
