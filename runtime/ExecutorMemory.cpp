//===- ExecutorMemory.cpp - The executor's memory and what fills it -------===//
//
// The collectives' scratch charged to the executor's account, the state and
// the step arena a plan asks for, loading every persistent value's initial
// data (this rank's shard of the plan's global tensor, or of its seeded
// initializer), the host copies through which the executor reads and writes
// a backend whose memory the host cannot touch, and the sizes
// Executor::plannedBytes() and peakBytes() report.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutorImpl.h"

#include "runtime/Initializer.h"

#include <algorithm>
#include <cstring>

namespace loom::rt {

void *HostBufferOps::allocate(size_t bytes) {
  return account.remember(BufferOps::allocate(bytes), bytes);
}

void HostBufferOps::deallocate(void *ptr) {
  account.forget(ptr);
  BufferOps::deallocate(ptr);
}

void BackendBufferOps::copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    backend.copyOnDevice(dst, src, bytes);
}

void BackendBufferOps::copy2D(void *dst, size_t dstPitch, const void *src,
                              size_t srcPitch, size_t width, size_t height) {
  if (width && height)
    backend.copy2DOnDevice(dst, dstPitch, src, srcPitch, width, height);
}

void BackendBufferOps::zero(void *dst, size_t bytes) {
  if (bytes)
    backend.zero(dst, bytes);
}

void *BackendBufferOps::allocate(size_t bytes) {
  return account.remember(backend.allocate(bytes), bytes);
}

void BackendBufferOps::deallocate(void *ptr) {
  account.forget(ptr);
  backend.deallocate(ptr);
}

std::string Executor::Impl::allocateState() {
  state =
      std::make_unique<AlignedBuffer>(*backend, memory, program->state_bytes());
  if (!state->data)
    return "cannot allocate the plan's state (" +
           std::to_string(program->state_bytes()) + " bytes)";
  return "";
}

std::string Executor::Impl::allocateArena() {
  arena =
      std::make_unique<AlignedBuffer>(*backend, memory, program->arena_bytes());
  if (!arena->data)
    return "cannot allocate the plan's step arena (" +
           std::to_string(program->arena_bytes()) + " bytes, beside " +
           std::to_string(program->state_bytes()) + " bytes of state)";
  for (const plan::Value &v : program->values())
    if (!isPersistent(v.kind()) && !v.has_in_place_of())
      views[v.id()].data = arena->data + v.offset();
  return "";
}

std::string Executor::Impl::loadPaddedBlock(const plan::Value &v,
                                            const Shard &mine,
                                            const TensorView &view) {
  const Shape &logical = logicalShapes[v.id()];
  Shape shape = logicalBlockShape(mine, logical);
  HostBuffer block;
  block.dtype = view.dtype;
  block.shape = shape;
  block.bytes.assign(numElements(shape) * dtypeSize(view.dtype), 0);
  if (mine.holdsValue && numElements(shape) > 0) {
    std::string error;
    if (!v.data().empty()) {
      TensorView whole{view.dtype, logical,
                       const_cast<char *>(v.data().data())};
      block = blockOf(whole, shape, mine.offsets);
    } else if (!fillShardFromInitializer(v.init(), v.name(), logical,
                                         mine.offsets, block.view(), error)) {
      return error;
    }
  }
  onHost(view, false, true,
         [&](const TensorView &local) { placeLeading(block.view(), local); });
  return "";
}

/// Points every value the state holds at its memory and loads this rank's
/// shard of every persistent value; then drops the plan's copy of the data
/// (before the step arena is allocated: the two never coexist).
std::string Executor::Impl::load() {
  std::string error;
  for (const plan::Value &v : program->values()) {
    if (!isPersistent(v.kind()) && !v.has_in_place_of())
      continue;
    TensorView &view = views[v.id()];
    view.data = state->data + v.offset();
    if (!isPersistent(v.kind()))
      continue;
    Shard mine = shard(v.id());
    const Shape &logical = logicalShapes[v.id()];
    bool padded = logical != globalShapes[v.id()];
    bool seeded = (v.kind() == plan::Value::PARAMETER ||
                   v.kind() == plan::Value::BUFFER) &&
                  v.data().empty() && v.has_init();
    if (padded && (seeded || !v.data().empty())) {
      // The plan defines the logical value: this rank's block of it (its
      // shard less the padding) is computed or copied alone, and the
      // padding is zeros.
      if (std::string e = loadPaddedBlock(v, mine, view); !e.empty())
        return e;
    } else if (!v.data().empty()) {
      TensorView global{view.dtype, globalShapes[v.id()],
                        const_cast<char *>(v.data().data())};
      onHost(view, false, true, [&](const TensorView &local) {
        copyShardOut(global, mine, local);
      });
    } else if (seeded && mine.holdsValue) {
      bool filled = true;
      onHost(view, false, true, [&](const TensorView &local) {
        filled = fillShardFromInitializer(v.init(), v.name(), mine.globalShape,
                                          mine.offsets, local, error);
      });
      if (!filled)
        return error;
    }
  }
  // Released, not only cleared: a cleared string keeps its capacity, which
  // for a model's parameters is as large as they are.
  for (plan::Stage &s : *plan.mutable_stages())
    for (plan::Value &v : *s.mutable_program()->mutable_values())
      std::string().swap(*v.mutable_data());
  return "";
}

TensorView Executor::Impl::hostView(int32_t id) const {
  const TensorView &v = views[id];
  if (direct() || !v.data)
    return v;
  HostBuffer &copy = hostCopies[id];
  copy.dtype = v.dtype;
  copy.shape = v.shape;
  copy.bytes.resize(v.bytes());
  if (v.bytes())
    backend->copyToHost(copy.bytes.data(), v.data, v.bytes());
  return copy.view();
}

unsigned char *Executor::Impl::stagingFor(size_t bytes) {
  if (staging.size() < bytes) {
    memory.release(static_cast<int64_t>(staging.size()));
    staging.resize(bytes);
    memory.charge(static_cast<int64_t>(bytes));
  }
  return staging.data();
}

int64_t Executor::arenaBytes() const { return impl->program->arena_bytes(); }
int64_t Executor::stateBytes() const { return impl->program->state_bytes(); }
int64_t Executor::plannedBytes() const { return stateBytes() + arenaBytes(); }
int64_t Executor::peakBytes() const { return impl->memory.peakBytes(); }

} // namespace loom::rt
