//===- StagedBackend.cpp - A CPU backend whose memory the host cannot touch
//===//

#include "StagedBackend.h"

#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
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

class StagedBackend : public rt::Backend {
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
    auto *d = static_cast<unsigned char *>(untag(dst));
    auto *s = static_cast<const unsigned char *>(untag(src));
    for (size_t r = 0; r < height; ++r)
      std::memmove(d + r * dstPitch, s + r * srcPitch, width);
  }
  void zero(void *dst, size_t bytes) override {
    if (bytes)
      std::memset(untag(dst), 0, bytes);
  }

private:
  std::unique_ptr<rt::Backend> cpu;
  std::map<std::string, rt::KernelFn, std::less<>> kernels;
};

/// The staged backend with a second queue that is as late as a GPU stream
/// may be: what a communication section queues (its copies and zeroing,
/// and the collectives of a QueuedCommunicator) runs only when
/// waitCommunication reaches its token, when memory is freed, or at
/// synchronize(), in queue order. Kernels run at once. So a kernel the
/// executor lets run before a collective it depends on reads stale bytes,
/// and one that overwrites a collective's input changes what it sends: the
/// oracles of the multi-rank tests fail on a missing wait.
class QueuedBackend final : public StagedBackend {
public:
  bool overlapsCommunication() const override { return true; }
  void beginCommunication() override { open = true; }
  int64_t endCommunication() override {
    open = false;
    return static_cast<int64_t>(queue.size());
  }
  void waitCommunication(int64_t token) override {
    runUpTo(static_cast<size_t>(token));
  }
  std::string synchronize() override {
    runUpTo(queue.size());
    return error;
  }

  void deallocate(void *ptr) override {
    runUpTo(queue.size());
    StagedBackend::deallocate(ptr);
  }
  void copyOnDevice(void *dst, const void *src, size_t bytes) override {
    later([=, this] { StagedBackend::copyOnDevice(dst, src, bytes); });
  }
  void copy2DOnDevice(void *dst, size_t dstPitch, const void *src,
                      size_t srcPitch, size_t width, size_t height) override {
    later([=, this] {
      StagedBackend::copy2DOnDevice(dst, dstPitch, src, srcPitch, width,
                                    height);
    });
  }
  void zero(void *dst, size_t bytes) override {
    later([=, this] { StagedBackend::zero(dst, bytes); });
  }

  /// Runs `fn` now, or queues it inside a communication section.
  void later(std::function<std::string()> fn) {
    if (!open) {
      record(fn());
      return;
    }
    queue.push_back(std::move(fn));
  }
  void later(std::function<void()> fn) {
    later(std::function<std::string()>([fn = std::move(fn)] {
      fn();
      return std::string();
    }));
  }

private:
  void runUpTo(size_t token) {
    while (done < token && done < queue.size())
      record(queue[done++]());
  }
  void record(const std::string &e) {
    if (error.empty())
      error = e;
  }

  bool open = false;
  std::vector<std::function<std::string()>> queue;
  size_t done = 0;
  std::string error;
};

/// A threads communicator that takes the staged backends' memory, and
/// whose collectives, when queued, run in the backend's second queue.
class QueuedCommunicator final : public rt::Communicator {
public:
  QueuedCommunicator(std::unique_ptr<rt::Communicator> inner,
                     QueuedBackend &backend)
      : inner(std::move(inner)), backend(backend) {}

  std::string name() const override { return "queued-threads"; }
  bool takesDeviceMemory() const override { return true; }
  rt::Communicator &hostCommunicator() override { return *inner; }
  int64_t rank() const override { return inner->rank(); }
  int64_t worldSize() const override { return inner->worldSize(); }
  bool setQueued(bool q) override {
    queued = q;
    return true;
  }

  std::string allReduceSum(const rt::RankGroup &group, rt::DType dtype,
                           void *data, int64_t count) override {
    return issue([=, this] {
      return inner->allReduceSum(group, dtype, untag(data), count);
    });
  }
  std::string allGather(const rt::RankGroup &group, const void *send,
                        void *recv, int64_t bytesPerRank) override {
    return issue([=, this] {
      return inner->allGather(group, untag(send), untag(recv), bytesPerRank);
    });
  }
  std::string reduceScatterSum(const rt::RankGroup &group, rt::DType dtype,
                               const void *send, void *recv,
                               int64_t countPerRank) override {
    return issue([=, this] {
      return inner->reduceScatterSum(group, dtype, untag(send), untag(recv),
                                     countPerRank);
    });
  }
  std::string allToAll(const rt::RankGroup &group, const void *send, void *recv,
                       int64_t bytesPerRank) override {
    return issue([=, this] {
      return inner->allToAll(group, untag(send), untag(recv), bytesPerRank);
    });
  }
  std::string barrier(const rt::RankGroup &group) override {
    return inner->barrier(group);
  }
  // Messages are staged through host memory by the executor.
  std::string send(int64_t peer, int64_t tag, const void *data,
                   int64_t bytes) override {
    return inner->send(peer, tag, data, bytes);
  }
  std::string recv(int64_t peer, int64_t tag, void *data,
                   int64_t bytes) override {
    return inner->recv(peer, tag, data, bytes);
  }

private:
  /// Runs `fn` now, or queues it when queued (its error then surfaces at
  /// the backend's synchronize()). Counts what it received when it runs.
  std::string issue(std::function<std::string()> fn) {
    auto counted = [this, fn = std::move(fn)] {
      int64_t before = inner->bytesReceived();
      std::string e = fn();
      countReceived(inner->bytesReceived() - before);
      return e;
    };
    if (!queued)
      return counted();
    backend.later(std::function<std::string()>(counted));
    return "";
  }

  std::unique_ptr<rt::Communicator> inner;
  QueuedBackend &backend;
  bool queued = false;
};

bool queuedMode() {
  const char *which = std::getenv("LOOM_TEST_BACKEND");
  return which && std::string(which) == "queued";
}

} // namespace

std::unique_ptr<rt::Backend> createStagedBackend() {
  return std::make_unique<StagedBackend>();
}

std::unique_ptr<rt::Communicator>
wrapTestCommunicator(std::unique_ptr<rt::Communicator> comm,
                     rt::Backend &backend) {
  auto *queued = dynamic_cast<QueuedBackend *>(&backend);
  if (!queued)
    return comm;
  return std::make_unique<QueuedCommunicator>(std::move(comm), *queued);
}

std::unique_ptr<rt::Backend> createTestBackend() {
  const char *which = std::getenv("LOOM_TEST_BACKEND");
  if (which && std::string(which) == "staged")
    return createStagedBackend();
  if (queuedMode())
    return std::make_unique<QueuedBackend>();
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
