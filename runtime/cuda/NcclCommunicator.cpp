//===- NcclCommunicator.cpp - Collectives on GPU memory over NCCL ---------===//
//
// The `nccl` communicator: every rank drives one GPU, and each distinct
// group gets its own NCCL communicator the first time it communicates: its
// member 0 creates an NCCL unique id, the members exchange it over the host
// bootstrap communicator (MPI under mpirun, threads in one process), and
// each calls ncclCommInitRank with its member index. Member order is NCCL
// rank order, so gathers concatenate in member order as the interface
// requires. Collectives are queued on the CUDA backend's second stream,
// after the work queued on its first (an event orders them), and then
// waited for: the interface's collectives are blocking. The executor may
// ask for queued collectives instead (setQueued): it then orders the
// kernels that use their buffers through the backend's events, and the
// collectives overlap the kernels in between. NCCL's sums are
// not computed in member order; they are identical on every member of an
// all-reduce (NCCL's ring reduces each element once) but may differ from
// the threads communicator's in the last bits.
//
// The bytes counted as received are what ring algorithms move into a rank:
// (n - 1) / n of the data for a gather or reduce-scatter chunk set, twice
// that for an all-reduce.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

namespace loom::rt {
namespace {

std::optional<ncclDataType_t> ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::F16:
    return ncclFloat16;
  case DType::BF16:
    return ncclBfloat16;
  case DType::I32:
    return ncclInt32;
  case DType::I64:
    return ncclInt64;
  default:
    return std::nullopt;
  }
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &bootstrap, int device, cudaStream_t stream,
                   cudaStream_t commStream)
      : bootstrap(bootstrap), device(device), stream(stream),
        commStream(commStream) {
    cudaSetDevice(device);
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  }

  ~NcclCommunicator() override {
    cudaSetDevice(device);
    cudaStreamSynchronize(commStream);
    for (auto &[group, comm] : comms)
      ncclCommDestroy(comm);
    cudaEventDestroy(ready);
  }

  bool setQueued(bool q) override {
    queued = q;
    return true;
  }

  std::string name() const override { return "nccl"; }
  int64_t rank() const override { return bootstrap.rank(); }
  int64_t worldSize() const override { return bootstrap.worldSize(); }
  bool takesDeviceMemory() const override { return true; }
  Communicator &hostCommunicator() override { return bootstrap; }

  std::string allReduceSum(const RankGroup &group, DType dtype, void *data,
                           int64_t count) override {
    auto type = ncclType(dtype);
    if (!type)
      return unsupported(dtype);
    ncclComm_t comm;
    if (std::string e = commFor(group, comm); !e.empty())
      return e;
    int64_t n = static_cast<int64_t>(group.size());
    countReceived(2 * (n - 1) * count * dtypeSize(dtype) / n);
    return finish(
        ncclAllReduce(data, data, count, *type, ncclSum, comm, commStream),
        comm);
  }

  std::string allGather(const RankGroup &group, const void *send, void *recv,
                        int64_t bytesPerRank) override {
    ncclComm_t comm;
    if (std::string e = commFor(group, comm); !e.empty())
      return e;
    countReceived((static_cast<int64_t>(group.size()) - 1) * bytesPerRank);
    return finish(
        ncclAllGather(send, recv, bytesPerRank, ncclUint8, comm, commStream),
        comm);
  }

  std::string reduceScatterSum(const RankGroup &group, DType dtype,
                               const void *send, void *recv,
                               int64_t countPerRank) override {
    auto type = ncclType(dtype);
    if (!type)
      return unsupported(dtype);
    ncclComm_t comm;
    if (std::string e = commFor(group, comm); !e.empty())
      return e;
    countReceived((static_cast<int64_t>(group.size()) - 1) * countPerRank *
                  dtypeSize(dtype));
    return finish(ncclReduceScatter(send, recv, countPerRank, *type, ncclSum,
                                    comm, commStream),
                  comm);
  }

  std::string allToAll(const RankGroup &group, const void *send, void *recv,
                       int64_t bytesPerRank) override {
    ncclComm_t comm;
    if (std::string e = commFor(group, comm); !e.empty())
      return e;
    int n = static_cast<int>(group.size());
    countReceived((n - 1) * bytesPerRank);
    ncclResult_t r = ncclGroupStart();
    for (int j = 0; j < n && r == ncclSuccess; ++j) {
      r = ncclSend(static_cast<const char *>(send) + j * bytesPerRank,
                   bytesPerRank, ncclUint8, j, comm, commStream);
      if (r == ncclSuccess)
        r = ncclRecv(static_cast<char *>(recv) + j * bytesPerRank, bytesPerRank,
                     ncclUint8, j, comm, commStream);
    }
    ncclResult_t end = ncclGroupEnd();
    return finish(r != ncclSuccess ? r : end, comm);
  }

  std::string barrier(const RankGroup &group) override {
    cudaSetDevice(device);
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(commStream);
    if (e != cudaSuccess)
      return std::string("nccl barrier: ") + cudaGetErrorString(e);
    return bootstrap.barrier(group);
  }

private:
  static std::string unsupported(DType dtype) {
    return std::string("the nccl communicator does not sum ") +
           dtypeName(dtype) + " elements";
  }

  /// The NCCL communicator of `group`, created on first use; the second
  /// stream then waits for the work queued so far on the first.
  std::string commFor(const RankGroup &group, ncclComm_t &comm) {
    cudaSetDevice(device);
    if (cudaError_t e = cudaEventRecord(ready, stream); e == cudaSuccess)
      cudaStreamWaitEvent(commStream, ready, 0);
    else
      return std::string("nccl: ") + cudaGetErrorString(e);
    auto it = comms.find(group);
    if (it != comms.end()) {
      comm = it->second;
      return "";
    }
    auto me = std::find(group.begin(), group.end(), rank());
    if (me == group.end())
      return "rank " + std::to_string(rank()) + " is not in the group";
    int member = static_cast<int>(me - group.begin());
    int n = static_cast<int>(group.size());
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (member == 0)
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
        return std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
    std::vector<ncclUniqueId> ids(n);
    if (std::string e = bootstrap.allGather(group, &id, ids.data(), sizeof(id));
        !e.empty())
      return "exchanging the NCCL id: " + e;
    if (ncclResult_t r = ncclCommInitRank(&comm, n, ids[0], member);
        r != ncclSuccess)
      return std::string("ncclCommInitRank: ") + ncclGetErrorString(r);
    comms.emplace(group, comm);
    return "";
  }

  /// Waits for a queued collective unless `queued`; "" or what failed.
  std::string finish(ncclResult_t r, ncclComm_t comm) {
    if (r != ncclSuccess)
      return std::string("nccl: ") + ncclGetErrorString(r);
    if (!queued)
      if (cudaError_t e = cudaStreamSynchronize(commStream); e != cudaSuccess)
        return std::string("nccl: ") + cudaGetErrorString(e);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess)
      return std::string("nccl: ") + ncclGetErrorString(async);
    return "";
  }

  Communicator &bootstrap;
  int device;
  /// The backend's kernels' stream and its stream for collectives.
  cudaStream_t stream, commStream;
  /// Recorded on `stream` before each collective, waited for on
  /// `commStream`.
  cudaEvent_t ready = nullptr;
  bool queued = false;
  std::map<RankGroup, ncclComm_t> comms;
};

} // namespace

bool ncclAvailable() { return true; }

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap,
                                                     int device, void *stream,
                                                     void *commStream,
                                                     std::string &error) {
  if (!stream || !commStream) {
    error = "the nccl communicator needs the CUDA backend's streams";
    return nullptr;
  }
  return std::make_unique<NcclCommunicator>(
      bootstrap, device, static_cast<cudaStream_t>(stream),
      static_cast<cudaStream_t>(commStream));
}

} // namespace loom::rt
