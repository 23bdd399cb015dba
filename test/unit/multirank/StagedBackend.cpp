//===- StagedBackend.cpp - A CPU backend whose memory the host cannot touch
//===//

#include "StagedBackend.h"

#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace loom::test {
namespace {

constexpr uintptr_t kTag = uintptr_t(1) << 62;

void *tag(void *p) {
  return p ? reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(p) | kTag)
           : nullptr;
}

/// The host pointer behind a device pointer; aborts on an untagged one
/// (host memory handed to a device hook).
void *untag(const void *p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  if (p && !(v & kTag))
    std::abort();
  return reinterpret_cast<void *>(v & ~kTag);
}

class StagedBackend final : public rt::Backend {
public:
  StagedBackend() : cpu(rt::createCpuBackend()) {
    cpu->setNumThreads(1);
    for (const std::string &op : cpu->supportedOps()) {
      const rt::KernelFn *inner = cpu->findKernel(op);
      kernels.emplace(op, [inner](const rt::KernelArgs &args) {
        rt::KernelArgs host{args.op, args.attrs, args.inputs, args.outputs};
        for (rt::TensorView &v : host.inputs)
          v.data = untag(v.data);
        for (rt::TensorView &v : host.outputs)
          v.data = untag(v.data);
        return (*inner)(host);
      });
    }
  }

  std::string name() const override { return "staged-cpu"; }
  const rt::KernelFn *findKernel(std::string_view op) const override {
    auto it = kernels.find(op);
    return it == kernels.end() ? nullptr : &it->second;
  }
  std::vector<std::string> supportedOps() const override {
    return cpu->supportedOps();
  }
  void setNumThreads(int threads) override { cpu->setNumThreads(threads); }

  bool hostAccessible() const override { return false; }
  void *allocate(size_t bytes) override {
    return tag(rt::Backend::allocate(bytes));
  }
  void deallocate(void *ptr) override { rt::Backend::deallocate(untag(ptr)); }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(untag(dst), src, bytes);
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, untag(src), bytes);
  }
  void copyOnDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memmove(untag(dst), untag(src), bytes);
  }
  void copy2DOnDevice(void *dst, size_t dstPitch, const void *src,
                      size_t srcPitch, size_t width, size_t height) override {
    rt::Backend::copy2DOnDevice(untag(dst), dstPitch, untag(src), srcPitch,
                                width, height);
  }
  void zero(void *dst, size_t bytes) override {
    if (bytes)
      std::memset(untag(dst), 0, bytes);
  }

private:
  std::unique_ptr<rt::Backend> cpu;
  std::map<std::string, rt::KernelFn, std::less<>> kernels;
};

} // namespace

std::unique_ptr<rt::Backend> createStagedBackend() {
  return std::make_unique<StagedBackend>();
}

std::unique_ptr<rt::Backend> createTestBackend() {
  const char *which = std::getenv("LOOM_TEST_BACKEND");
  if (which && std::string(which) == "staged")
    return createStagedBackend();
  std::unique_ptr<rt::Backend> backend = rt::createCpuBackend();
  backend->setNumThreads(1);
  return backend;
}

std::string loadError(const plan::Plan &plan, int64_t worldSize, int64_t rank) {
  std::unique_ptr<rt::Backend> backend = createTestBackend();
  std::vector<std::unique_ptr<rt::Communicator>> comms;
  rt::RankContext ctx;
  ctx.rank = rank;
  if (worldSize > 0) {
    comms = rt::createThreadsCommunicators(worldSize);
    ctx.comm = comms[rank].get();
  }
  std::string error;
  std::unique_ptr<rt::Executor> exec =
      rt::Executor::create(plan, *backend, error, ctx);
  return exec ? "" : error;
}

} // namespace loom::test
