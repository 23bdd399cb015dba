//===- Communicator.h - Collectives between the ranks of a mesh -*- C++ -*-===//
//
// One interface for every way ranks talk (as PyTorch's c10d backends are):
// `threads` runs N ranks as threads of one process and exchanges through
// shared memory; `mpi` runs one process per rank under mpirun; `nccl`
// (runtime/cuda/NcclCommunicator.h) exchanges GPU memory. Every
// collective is blocking, is called by every member of `group` with the same
// sizes, and names its group explicitly: the global ranks taking part,
// listed in member order (member i of a gather contributes chunk i). The
// calling rank must be a member. Sums are computed in member order, so every
// member receives bitwise identical results.
//
// Pipeline stages exchange activations point to point instead: `send` and
// `recv` between two global ranks, matched by tag (threads and mpi only).
//
// Errors (a group that does not contain the caller, an unsupported element
// type, a transport failure) are returned as a message; success is "".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_COMMUNICATOR_H
#define LOOM_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

using RankGroup = std::vector<int64_t>;

class Communicator {
public:
  virtual ~Communicator() = default;
  /// "threads", "mpi" or "nccl".
  virtual std::string name() const = 0;
  /// Whether the buffers of its collectives are device memory (NCCL); the
  /// others take host memory, and the executor of a device backend stages
  /// through host buffers for them.
  virtual bool takesDeviceMemory() const { return false; }
  /// A communicator of the same world and ranks that takes host memory:
  /// this one, or a device communicator's host bootstrap.
  virtual Communicator &hostCommunicator() { return *this; }
  virtual int64_t rank() const = 0;
  virtual int64_t worldSize() const = 0;

  /// In place: every member's `count` elements become the elementwise sum
  /// over the members. F32, F16, BF16 (summed in f32), I32 and I64.
  virtual std::string allReduceSum(const RankGroup &group, DType dtype,
                                   void *data, int64_t count) = 0;
  /// `recv` (n * bytesPerRank) is the concatenation of every member's
  /// `send` (bytesPerRank) in member order.
  virtual std::string allGather(const RankGroup &group, const void *send,
                                void *recv, int64_t bytesPerRank) = 0;
  /// `send` holds n chunks of `countPerRank` elements; member i receives in
  /// `recv` the sum over members of their chunk i.
  virtual std::string reduceScatterSum(const RankGroup &group, DType dtype,
                                       const void *send, void *recv,
                                       int64_t countPerRank) = 0;
  /// `send` holds n chunks of `bytesPerRank`; chunk j goes to member j, and
  /// chunk i of `recv` comes from member i.
  virtual std::string allToAll(const RankGroup &group, const void *send,
                               void *recv, int64_t bytesPerRank) = 0;
  /// Returns when every member has called it.
  virtual std::string barrier(const RankGroup &group) = 0;
  /// Tells the other ranks that this one failed (`reason`), so that none
  /// waits for it: their waits, now and later, return an error naming it.
  /// The threads communicator wakes its world; others do nothing (a dead
  /// MPI process ends the job through mpirun).
  virtual void abort(const std::string &reason) {}
  /// Whether a wait passed its deadline: a rank is lost (dead or hung), as
  /// opposed to an error of this rank's own. The threads communicator knows
  /// of any rank's wait, the MPI one of this process's; others say false.
  virtual bool lostRank() const { return false; }

  /// A device communicator whose collectives run on a stream of their own
  /// may return from them once they are queued instead of complete; the
  /// caller then orders every later use of their buffers (see
  /// Backend::beginCommunication). Returns whether it will; off until
  /// asked, and the others never do.
  virtual bool setQueued(bool queued) { return false; }

  /// Point to point, between pipeline stages. `send` copies `bytes` from
  /// `data` and returns without waiting for the receiver (the message is
  /// buffered); `recv` blocks until the message from global rank `peer`
  /// with `tag` has arrived and copies it into `data`, which must be exactly
  /// `bytes`. Messages from one rank to another with the same tag arrive in
  /// the order they were sent. Host memory. A rank cannot message itself; a
  /// `recv` whose size differs from the message's returns an error and
  /// leaves the message where it was.
  virtual std::string send(int64_t peer, int64_t tag, const void *data,
                           int64_t bytes) {
    return noPointToPoint("send");
  }
  virtual std::string recv(int64_t peer, int64_t tag, void *data,
                           int64_t bytes) {
    return noPointToPoint("recv");
  }

  /// Bytes this rank has received from other ranks so far: what the
  /// collectives above copied out of other members' buffers (threads) or
  /// received in messages (MPI), and what `recv` received, counted where
  /// the data moves.
  int64_t bytesReceived() const { return bytesReceived_; }

protected:
  void countReceived(int64_t bytes) { bytesReceived_ += bytes; }

private:
  /// The error of a backend without point-to-point messaging.
  std::string noPointToPoint(const char *call) const {
    return std::string(call) + ": the " + name() +
           " communicator has no point-to-point send/recv (pipeline stages "
           "need the threads or mpi communicator)";
  }

  int64_t bytesReceived_ = 0;
};

/// How long, by default, a rank waits in a collective or a recv for its
/// partners before it reports the ranks that did not come (seconds;
/// LOOM_COLLECTIVE_TIMEOUT or --collective-timeout set another).
inline constexpr double kDefaultCollectiveTimeout = 1800;

/// N communicators, one per rank, that share one in-process world; hand
/// communicator r to the thread that runs rank r. A wait longer than
/// `timeoutSeconds` is an error naming the ranks that did not arrive.
std::vector<std::unique_ptr<Communicator>>
createThreadsCommunicators(int64_t worldSize,
                           double timeoutSeconds = kDefaultCollectiveTimeout);

/// Whether this build has MPI.
bool mpiAvailable();
/// The communicator of this process in MPI_COMM_WORLD (initialising MPI on
/// first use; finalised at exit). nullptr and `error` when MPI is missing
/// or fails to start.
/// A collective or recv that has not completed within `timeoutSeconds` is
/// an error, and the communicator's lostRank() turns true.
std::unique_ptr<Communicator>
createMpiCommunicator(std::string &error,
                      double timeoutSeconds = kDefaultCollectiveTimeout);
/// Whether this build has the NCCL communicator (CUDA and NCCL found).
bool ncclAvailable();
/// An NCCL communicator for a rank that drives GPU `device`: its
/// collectives are queued on `commStream` after the work queued so far on
/// `stream` (the CUDA backend's two cudaStream_t, cudaCommStreamOf and
/// cudaStreamOf, so that they follow the kernels producing their inputs).
/// `bootstrap` is a host communicator over the same world that exchanges each
/// group's NCCL id when the group first communicates: an MPI communicator for
/// one process per GPU under mpirun, or threads communicators for one process
/// driving several GPUs. It must outlive the NCCL communicator. Buffers are
/// device memory. nullptr and `error` when this build has no NCCL.
std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap,
                                                     int device, void *stream,
                                                     void *commStream,
                                                     std::string &error);
/// Whether this process was started by mpirun (an MPI launcher's
/// environment variables are set), without initialising MPI.
bool launchedByMpirun();

} // namespace loom::rt

#endif // LOOM_RUNTIME_COMM_COMMUNICATOR_H
