//===- BackendRegistry.cpp - Backends by name -----------------------------===//

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"

namespace loom::rt {

#ifndef LOOM_HAVE_CUDA
bool cudaBackendBuilt() { return false; }

int cudaDeviceCount(std::string &error) {
  error = "no CUDA device: this Loom was built without the CUDA toolkit";
  return 0;
}

void *cudaStreamOf(const Backend &) { return nullptr; }

void *cudaCommStreamOf(const Backend &) { return nullptr; }

std::unique_ptr<Backend> createCudaBackend(int, std::string &error) {
  error = "no CUDA device: this Loom was built without the CUDA toolkit "
          "(configure with the toolkit present and LOOM_ENABLE_CUDA=ON)";
  return nullptr;
}
#endif

#ifndef LOOM_HAVE_NCCL
bool ncclAvailable() { return false; }

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &, int,
                                                     void *, void *,
                                                     std::string &error) {
  error = "this Loom was built without NCCL (it needs the CUDA toolkit with "
          "NCCL)";
  return nullptr;
}
#endif

std::unique_ptr<Backend> createBackend(const std::string &name, int device,
                                       std::string &error) {
  if (name == "cpu")
    return createCpuBackend();
  if (name == "cuda")
    return createCudaBackend(device, error);
  error = "unknown backend '" + name + "'; this Loom has 'cpu'" +
          std::string(cudaBackendBuilt() ? " and 'cuda'" : "");
  return nullptr;
}

} // namespace loom::rt
