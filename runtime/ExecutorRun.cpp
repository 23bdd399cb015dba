//===- ExecutorRun.cpp - Running a step: inputs, instructions, outputs ----===//
//
// One step of a plan: the inputs written (this rank's shard of each, or
// seeded random data), the instructions run in order (kernels through the
// backend, collectives through the communicator, sends and recvs to the
// peer stages), the outputs read back, and what a step costs (its time, the
// pipeline bubble, each collective's calls, bytes and time). On a backend
// that overlaps communication, a collective is queued on its second stream
// and the executor moves on: a later kernel waits for it only if it reads
// what the collective writes or writes what it reads or writes.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutorImpl.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

namespace loom::rt {

namespace {

/// Fills `v` with seeded random data (see Executor::setRandomInputs).
void fillRandom(const TensorView &v, int64_t limit, std::mt19937_64 &rng) {
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (int64_t i = 0, count = v.numElements(); i < count; ++i) {
    switch (v.dtype) {
    case DType::F32:
      v.as<float>()[i] = real(rng);
      break;
    case DType::F16:
      v.as<uint16_t>()[i] = floatToHalf(real(rng));
      break;
    case DType::BF16:
      v.as<uint16_t>()[i] = floatToBf16(real(rng));
      break;
    case DType::I32:
      v.as<int32_t>()[i] =
          static_cast<int32_t>(rng() % std::max<int64_t>(limit, 1));
      break;
    case DType::I64:
      v.as<int64_t>()[i] =
          static_cast<int64_t>(rng() % std::max<int64_t>(limit, 1));
      break;
    case DType::Bool:
      v.as<uint8_t>()[i] = rng() & 1;
      break;
    }
  }
}

/// Sizes `buffer` to hold a block of `shape` of `dtype` elements, packed.
void shapeBlockBuffer(HostBuffer &buffer, DType dtype, const Shape &shape) {
  buffer.dtype = dtype;
  buffer.shape = shape;
  buffer.bytes.resize(numElements(shape) * dtypeSize(dtype));
}

} // namespace

bool convertTensor(const TensorView &value, DType dtype, HostBuffer &out,
                   const std::string &what, std::string &error) {
  out.dtype = dtype;
  out.shape = value.shape;
  out.bytes.resize(value.numElements() * dtypeSize(dtype));
  TensorView dst = out.view();
  int64_t count = value.numElements();
  if (value.dtype == dtype) {
    std::memcpy(dst.data, value.data, dst.bytes());
    return true;
  }
  auto readFloat = [&](int64_t i) -> float {
    switch (value.dtype) {
    case DType::F32:
      return value.as<float>()[i];
    case DType::F16:
      return halfToFloat(value.as<uint16_t>()[i]);
    default:
      return bf16ToFloat(value.as<uint16_t>()[i]);
    }
  };
  if (isFloat(value.dtype) && isFloat(dtype)) {
    for (int64_t i = 0; i < count; ++i) {
      float f = readFloat(i);
      if (dtype == DType::F32)
        dst.as<float>()[i] = f;
      else if (dtype == DType::F16)
        dst.as<uint16_t>()[i] = floatToHalf(f);
      else
        dst.as<uint16_t>()[i] = floatToBf16(f);
    }
    return true;
  }
  bool srcInt = value.dtype == DType::I32 || value.dtype == DType::I64;
  bool dstInt = dtype == DType::I32 || dtype == DType::I64;
  if (srcInt && dstInt) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = value.dtype == DType::I32 ? value.as<int32_t>()[i]
                                            : value.as<int64_t>()[i];
      if (dtype == DType::I32) {
        if (v < INT32_MIN || v > INT32_MAX) {
          error = what + " has value " + std::to_string(v) +
                  ", which does not fit i32";
          return false;
        }
        dst.as<int32_t>()[i] = static_cast<int32_t>(v);
      } else {
        dst.as<int64_t>()[i] = v;
      }
    }
    return true;
  }
  error = what + " must have element type " + dtypeName(dtype) + ", got " +
          dtypeName(value.dtype);
  return false;
}

void Executor::Impl::setUpCollectives() {
  bool hasCollectives =
      std::any_of(steps.begin(), steps.end(), [](const Step &step) {
        return step.kind == Step::Collective;
      });
  if (!hasCollectives)
    return;
  // A collective's validation needs a mesh; on one device without a
  // communicator, the groups are this rank alone.
  if (!comm) {
    ownComm = std::move(createThreadsCommunicators(1).front());
    comm = ownComm.get();
  }
  // A device communicator exchanges the backend's memory in place; any
  // other is given host copies (see run()).
  BufferOps *ops;
  if (!backend->hostAccessible() && comm->takesDeviceMemory()) {
    deviceOps = std::make_unique<BackendBufferOps>(*backend, memory);
    ops = deviceOps.get();
    overlap = backend->overlapsCommunication();
  } else {
    hostOps = std::make_unique<HostBufferOps>(memory);
    ops = hostOps.get();
  }
  std::vector<int64_t> meshRanks;
  if (stages.ownMeshes())
    meshRanks = stages.ranks[stage];
  collectives = std::make_unique<CollectiveRunner>(*stageMesh(), *comm, ops,
                                                   std::move(meshRanks));
}

void Executor::Impl::orderAfterCollectives(
    const std::vector<const TensorView *> &reads,
    const std::vector<const TensorView *> &writes, bool all) {
  auto hits = [](const TensorView *v, const unsigned char *begin,
                 const unsigned char *end) {
    auto *p = static_cast<const unsigned char *>(v->data);
    return v->bytes() && begin != end && p < end && begin < p + v->bytes();
  };
  auto it = inFlight.begin();
  while (it != inFlight.end()) {
    bool wait = all;
    for (const TensorView *v : reads)
      wait = wait || hits(v, it->out, it->outEnd);
    for (const TensorView *v : writes)
      wait = wait || hits(v, it->in, it->inEnd) ||
             hits(v, it->out, it->outEnd) ||
             hits(v, it->scratch, it->scratchEnd);
    if (!wait) {
      ++it;
      continue;
    }
    backend->waitCommunication(it->token);
    it = inFlight.erase(it);
  }
}

void Executor::Impl::writeInput(int32_t id, const TensorView &step) {
  TensorView global = step;
  const plan::Value &v = program->values(id);
  if (v.has_micro_batch()) {
    // Rows [k * b, (k + 1) * b) of the step's input.
    const Shape &shape = globalShapes[id];
    int64_t rowElements = 1;
    for (size_t d = 1; d < shape.size(); ++d)
      rowElements *= shape[d];
    global.shape = shape;
    global.data = static_cast<unsigned char *>(step.data) +
                  v.micro_batch() * shape[0] * rowElements *
                      static_cast<int64_t>(dtypeSize(step.dtype));
  }
  Shard mine = shard(id);
  onHost(views[id], false, true,
         [&](const TensorView &local) { copyShardOut(global, mine, local); });
}

bool Executor::setInput(const std::string &name, const TensorView &value,
                        std::string &error) {
  auto it = impl->inputIndex.find(name);
  if (it == impl->inputIndex.end()) {
    error = "the plan has no input named '" + name + "'";
    return false;
  }
  const PlanInput &input = impl->planInputs[it->second];
  if (value.shape != input.shape) {
    error = "input '" + name + "' must have shape " + formatShape(input.shape) +
            ", got " + formatShape(value.shape);
    return false;
  }
  HostBuffer converted;
  TensorView step = value;
  if (value.dtype != input.dtype) {
    if (!convertTensor(value, input.dtype, converted, "input '" + name + "'",
                       error))
      return false;
    step = converted.view();
  }
  // A name only other stages have leaves nothing to write.
  auto ids = impl->inputIds.find(name);
  if (ids != impl->inputIds.end())
    for (int32_t id : ids->second)
      impl->writeInput(id, step);
  return true;
}

void Executor::setRandomInputs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Every name of the plan in name order, drawn whole whether or not this
  // stage has it, so that the stream stays in step with a single-device
  // run of the whole batch.
  for (const auto &[name, index] : impl->inputIndex) {
    const PlanInput &input = impl->planInputs[index];
    HostBuffer global{input.dtype, input.shape, {}};
    global.bytes.resize(numElements(input.shape) * dtypeSize(input.dtype));
    fillRandom(global.view(), input.randomBound, rng);
    auto ids = impl->inputIds.find(name);
    if (ids != impl->inputIds.end())
      for (int32_t id : ids->second)
        impl->writeInput(id, global.view());
  }
}

std::string Executor::Impl::send(const Step &step) {
  const TensorView &v = views[step.operands[0]];
  if (step.pieces.size() == 1 && step.pieces[0].whole) {
    int64_t bytes = static_cast<int64_t>(v.bytes());
    int64_t peer = step.pieces[0].peer;
    if (direct())
      return comm->send(peer, step.tag, v.data, bytes);
    unsigned char *host = stagingFor(v.bytes());
    if (bytes)
      backend->copyToHost(host, v.data, v.bytes());
    return comm->send(peer, step.tag, host, bytes);
  }
  // Blocks of the buffer to several ranks (stages on different submeshes):
  // each packed, then sent (sends are buffered).
  std::string e;
  onHost(v, true, false, [&](const TensorView &local) {
    HostBuffer packed;
    for (const Step::Piece &piece : step.pieces) {
      shapeBlockBuffer(packed, v.dtype, piece.block.localShape);
      copyShardOut(local, piece.block, packed.view());
      memory.charge(static_cast<int64_t>(packed.bytes.size()));
      e = comm->send(piece.peer, step.tag, packed.bytes.data(),
                     static_cast<int64_t>(packed.bytes.size()));
      memory.release(static_cast<int64_t>(packed.bytes.size()));
      if (!e.empty())
        return;
    }
  });
  return e;
}

std::string Executor::Impl::recv(const Step &step, TraceWriter *trace,
                                 double &waitSeconds, double &waitStart) {
  const TensorView &v = views[step.results[0]];
  waitStart = trace ? trace->elapsedMicros() : 0;
  auto began = std::chrono::steady_clock::now();
  std::string e;
  if (step.pieces.size() == 1 && step.pieces[0].whole) {
    int64_t bytes = static_cast<int64_t>(v.bytes());
    void *dst = direct() ? v.data : stagingFor(v.bytes());
    e = comm->recv(step.pieces[0].peer, step.tag, dst, bytes);
    waitSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count();
    if (e.empty() && !direct() && bytes)
      backend->copyToDevice(v.data, dst, v.bytes());
    return e;
  }
  // Blocks from several ranks, each received whole and written into place.
  onHost(v, false, true, [&](const TensorView &local) {
    HostBuffer packed;
    for (const Step::Piece &piece : step.pieces) {
      shapeBlockBuffer(packed, v.dtype, piece.block.localShape);
      memory.charge(static_cast<int64_t>(packed.bytes.size()));
      e = comm->recv(piece.peer, step.tag, packed.bytes.data(),
                     static_cast<int64_t>(packed.bytes.size()));
      if (e.empty())
        copyShardIn(packed.view(), piece.block, local, /*accumulate=*/false);
      memory.release(static_cast<int64_t>(packed.bytes.size()));
      if (!e.empty())
        return;
    }
  });
  waitSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  return e;
}

std::string Executor::Impl::runKernel(const Step &step, bool traced) {
  KernelArgs kernelArgs{step.inst->op(), step.attrs, {}, {}, &step.block};
  // Its scratch in the step arena (validated against its rule).
  if (step.inst->scratch_bytes() > 0) {
    kernelArgs.scratch = arena->data + step.inst->scratch_offset();
    kernelArgs.scratchBytes = static_cast<size_t>(step.inst->scratch_bytes());
  }
  for (int32_t id : step.operands)
    kernelArgs.inputs.push_back(views[id]);
  for (int32_t id : step.results)
    kernelArgs.outputs.push_back(views[id]);
  if (!inFlight.empty()) {
    std::vector<const TensorView *> reads, writes;
    for (const TensorView &v : kernelArgs.inputs)
      reads.push_back(&v);
    for (const TensorView &v : kernelArgs.outputs)
      writes.push_back(&v);
    // The kernel writes its scratch, whose bytes a collective still in
    // flight may hold.
    const TensorView scratch{DType::Bool,
                             {static_cast<int64_t>(kernelArgs.scratchBytes)},
                             kernelArgs.scratch};
    if (kernelArgs.scratchBytes > 0)
      writes.push_back(&scratch);
    orderAfterCollectives(reads, writes);
  }
  std::string e = (*step.kernel)(kernelArgs);
  // Asynchronous kernels: time each with --trace, else only report their
  // errors at the end of the step.
  if (e.empty() && traced)
    e = backend->synchronize();
  return e;
}

std::string Executor::Impl::runCollective(const Step &step,
                                          CollectiveStat &stat, bool traced) {
  auto began = std::chrono::steady_clock::now();
  int64_t before = comm->bytesReceived();
  const TensorView &in = views[step.operands[0]];
  const TensorView &out = views[step.results[0]];
  // Its scratch in the step arena (validated against its rule).
  unsigned char *scratch = step.inst->scratch_bytes() > 0
                               ? arena->data + step.inst->scratch_offset()
                               : nullptr;
  const size_t scratchBytes = static_cast<size_t>(step.inst->scratch_bytes());
  std::string e;
  if (overlap && !traced) {
    // Queued on the backend's second stream; kernels that touch its
    // buffers wait for it (runKernel), the others run meanwhile.
    backend->beginCommunication();
    comm->setQueued(true);
    e = collectives->run(step.inst->op(), step.attrs, in, out, scratch,
                         scratchBytes);
    comm->setQueued(false);
    auto *inBytes = static_cast<const unsigned char *>(in.data);
    auto *outBytes = static_cast<const unsigned char *>(out.data);
    inFlight.push_back({backend->endCommunication(), inBytes,
                        inBytes + in.bytes(), outBytes, outBytes + out.bytes(),
                        scratch, scratch + scratchBytes});
  } else if (direct() || deviceOps) {
    e = collectives->run(step.inst->op(), step.attrs, in, out, scratch,
                         scratchBytes);
  } else {
    // A host communicator on device memory: through host copies, and host
    // scratch of the runner's own beside the staging.
    onHost(in, true, false, [&](const TensorView &hostIn) {
      onHost(out, false, true, [&](const TensorView &hostOut) {
        e = collectives->run(step.inst->op(), step.attrs, hostIn, hostOut);
      });
    });
  }
  ++stat.calls;
  stat.bytesReceived += comm->bytesReceived() - before;
  stat.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  return e;
}

std::string Executor::Impl::runMessage(const Step &step, TraceWriter *trace,
                                       TraceWriter::Args &args,
                                       double &waited) {
  orderAfterCollectives({}, {}, /*all=*/true);
  std::string peers;
  for (const Step::Piece &piece : step.pieces)
    peers += (peers.empty() ? "" : ",") + std::to_string(piece.peer);
  TraceWriter::Args messageArgs{
      {"peer", peers},
      {"tag", std::to_string(step.tag)},
      {"bytes",
       std::to_string(
           views[step.kind == Step::Send ? step.operands[0] : step.results[0]]
               .bytes())}};
  args.insert(args.end(), messageArgs.begin(), messageArgs.end());
  if (step.kind == Step::Send)
    return send(step);
  double wait = 0, waitStart = 0;
  std::string e = recv(step, trace, wait, waitStart);
  waited += wait;
  if (trace && e.empty())
    trace->addSpan(static_cast<int>(rank), "bubble", "idle", waitStart,
                   wait * 1e6, std::move(messageArgs));
  return e;
}

bool Executor::run(std::string &error, TraceWriter *trace) {
  using Clock = std::chrono::steady_clock;
  using us = std::chrono::duration<double, std::micro>;
  int traceRank = static_cast<int>(impl->rank);
  double stepStart = trace ? trace->elapsedMicros() : 0;
  auto stepBegan = Clock::now();
  double waited = 0;
  for (size_t i = 0; i < impl->steps.size(); ++i) {
    const Impl::Step &step = impl->steps[i];
    double start = trace ? trace->elapsedMicros() : 0;
    auto began = Clock::now();
    std::string e;
    const char *category = "kernel";
    TraceWriter::Args args{{"location", step.inst->location()}};
    switch (step.kind) {
    case Impl::Step::Kernel:
      e = impl->runKernel(step, trace != nullptr);
      break;
    case Impl::Step::Collective:
      category = "collective";
      e = impl->runCollective(step, impl->collectiveStats[impl->statOf[i]],
                              trace != nullptr);
      break;
    case Impl::Step::Send:
    case Impl::Step::Recv:
      category = "p2p";
      e = impl->runMessage(step, trace, args, waited);
      break;
    }
    if (!e.empty()) {
      impl->orderAfterCollectives({}, {}, /*all=*/true);
      impl->backend->synchronize();
      error =
          describeInstruction(static_cast<int64_t>(i), *step.inst) + ": " + e;
      return false;
    }
    if (trace)
      trace->addSpan(traceRank, step.inst->op(), category, start,
                     us(Clock::now() - began).count(), std::move(args));
  }
  impl->orderAfterCollectives({}, {}, /*all=*/true);
  if (std::string e = impl->backend->synchronize(); !e.empty()) {
    error = "running the step on backend '" + impl->backend->name() + "': " + e;
    return false;
  }
  StepTiming &last = impl->lastTiming, &total = impl->totalTiming;
  last.seconds =
      std::chrono::duration<double>(Clock::now() - stepBegan).count();
  last.recvWaitSeconds = waited;
  last.steps = 1;
  total.seconds += last.seconds;
  total.recvWaitSeconds += last.recvWaitSeconds;
  ++total.steps;
  if (trace)
    trace->addSpan(
        traceRank, "step", "step", stepStart, last.seconds * 1e6,
        {{"stage", std::to_string(impl->stage)},
         {"peak_bytes", std::to_string(peakBytes())},
         {"planned_bytes", std::to_string(plannedBytes())},
         {"state_bytes", std::to_string(stateBytes())},
         {"recv_wait_us", std::to_string(waited * 1e6)},
         {"bubble_fraction", std::to_string(last.bubbleFraction())}});
  return true;
}

const StepTiming &Executor::lastStepTiming() const { return impl->lastTiming; }
const StepTiming &Executor::totalStepTiming() const {
  return impl->totalTiming;
}

const std::vector<Executor::CollectiveStat> &Executor::collectiveStats() const {
  return impl->collectiveStats;
}

TensorView Executor::output(const std::string &name) const {
  auto it = impl->outputIds.find(name);
  if (it == impl->outputIds.end())
    return {};
  return impl->hostView(it->second);
}

} // namespace loom::rt
