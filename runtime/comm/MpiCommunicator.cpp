//===- MpiCommunicator.cpp - One process per rank under mpirun ------------===//
//
// The `mpi` communicator: the ranks are the processes of MPI_COMM_WORLD.
// MPI is initialised on first use (MPI_THREAD_FUNNELED: only the thread
// that created the communicator calls it) and finalised at exit, when this
// file initialised it.
//
// Every group gets a sub-communicator, created on its first use with
// MPI_Comm_create_group from the group's rank list (so sub-communicator
// rank i is member i) and cached by that list. MPI_Comm_create_group is
// collective over the group's members only, not over the world, so the
// members of one group may create it while other ranks do something else;
// only the group's own members must make their first call on it together,
// which every collective requires anyway.
//
// Sums are not left to MPI_Allreduce, whose summation order is the
// library's choice: a reduce-scatter is an all-to-all followed by a local
// sum in member order, and an all-reduce is that reduce-scatter followed by
// an all-gather (the bytes a ring all-reduce moves). Results are then
// bitwise identical on every member and equal to the threads communicator's.
//
// Point-to-point messages travel in MPI_COMM_WORLD. `send` copies the
// message into a buffer it owns and starts an MPI_Isend; the buffer and
// request are kept (process-wide) until MPI_Test finds the send complete,
// which every later send or recv checks, and the communicator's destructor
// and the exit handler wait for those still pending. `recv` probes for the
// message, checks its size and receives it in place. A message over
// INT_MAX bytes is still one MPI message, of a derived datatype (1 GiB
// blocks and the rest), so its size is checked exactly and its order kept.
// Deadlines: every collective is started non-blocking (MPI_Ialltoall,
// MPI_Iallgather, MPI_Ibarrier) and a recv probes with MPI_Iprobe, and the
// rank polls (MPI_Test, spinning briefly, then sleeping up to a millisecond
// between polls) until it completes or the timeout passes. Past it the call
// returns an error saying the group did not complete (MPI cannot say which
// member is missing) and lostRank() turns true: the process exits with
// kLostRankExitCode, which ends the job under mpirun, rather than hanging
// behind a process that hangs.
//
// MPI tags only reach MPI_TAG_UB (at least 32767; 2^31 - 1 under Open
// MPI's ob1), so a tag is sent modulo MPI_TAG_UB + 1: two tags in flight
// between the same two ranks must differ modulo that bound.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Sum.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>

namespace loom::rt {

namespace {

/// A point-to-point send in flight: MPI reads `buffer` until `request`
/// completes.
struct PendingSend {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<unsigned char> buffer;
  int64_t peer = 0;
  int64_t tag = 0;
};

/// Process-wide state, deliberately leaked: the exit handler uses it.
struct MpiState {
  /// Whether this file called MPI_Init_thread (and so must finalise).
  bool initialisedHere = false;
  /// The sub-communicator of every group of two or more ranks used so far.
  std::map<RankGroup, MPI_Comm> comms;
  /// The sends not yet known to be complete, oldest first.
  std::vector<PendingSend> sends;
};

MpiState &state() {
  static MpiState *s = new MpiState;
  return *s;
}

/// Waits for every pending send (once MPI is finalised there are none to
/// wait for). A failed send has nobody left to report to.
void completeSends() {
  std::vector<PendingSend> &sends = state().sends;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !sends.empty()) {
    std::vector<MPI_Request> requests;
    for (PendingSend &send : sends)
      requests.push_back(send.request);
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
                MPI_STATUSES_IGNORE);
  }
  sends.clear();
}

std::string mpiError(const char *call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return std::string(call) + " failed with code " + std::to_string(code);
  return std::string(call) + " failed: " + std::string(text, length);
}

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  completeSends();
  for (auto &entry : state().comms)
    if (entry.second != MPI_COMM_WORLD)
      MPI_Comm_free(&entry.second);
  state().comms.clear();
  MPI_Finalize();
}

/// Initialises MPI unless someone already has.
std::string ensureInitialised() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return "";
  int provided = 0;
  int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  if (code != MPI_SUCCESS)
    return mpiError("MPI_Init_thread", code);
  state().initialisedHere = true;
  std::atexit(finalizeAtExit);
  // Report failures as messages rather than aborting every process.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return "";
}

std::string formatGroup(const RankGroup &group) {
  std::string s = "[";
  for (size_t i = 0; i < group.size(); ++i)
    s += (i ? ", " : "") + std::to_string(group[i]);
  return s + "]";
}

/// dst[e] = the sum of chunk m (of `count` elements, at `src + m * count`)
/// over m in [0, n), in member order exactly as the threads communicator.
void sumChunks(DType dtype, const void *src, int64_t n, int64_t count,
               void *dst) {
  const auto *bytes = static_cast<const unsigned char *>(src);
  std::vector<const void *> chunks;
  for (int64_t m = 0; m < n; ++m)
    chunks.push_back(bytes +
                     m * count * static_cast<int64_t>(dtypeSize(dtype)));
  sumInMemberOrder(dtype, chunks, 0, dst, count);
}

/// `bytes` as MPI's (int count, datatype): MPI_BYTE when it fits an int,
/// else one element of a struct of 1 GiB blocks and the remaining bytes.
/// Either way the message is `bytes` basic MPI_BYTE elements, so sender and
/// receiver match whichever form each used.
class ByteType {
public:
  explicit ByteType(int64_t bytes) {
    if (bytes <= INT_MAX) {
      count = static_cast<int>(bytes);
      return;
    }
    const int64_t block = int64_t(1) << 30;
    MPI_Datatype blockType;
    MPI_Type_contiguous(static_cast<int>(block), MPI_BYTE, &blockType);
    int lengths[2] = {static_cast<int>(bytes / block),
                      static_cast<int>(bytes % block)};
    MPI_Aint displacements[2] = {0,
                                 static_cast<MPI_Aint>(bytes / block * block)};
    MPI_Datatype types[2] = {blockType, MPI_BYTE};
    MPI_Type_create_struct(2, lengths, displacements, types, &type);
    MPI_Type_free(&blockType);
    MPI_Type_commit(&type);
    count = 1;
    derived_ = true;
  }
  ~ByteType() {
    if (derived_)
      MPI_Type_free(&type);
  }
  ByteType(const ByteType &) = delete;
  ByteType &operator=(const ByteType &) = delete;

  MPI_Datatype type = MPI_BYTE;
  int count = 0;

private:
  bool derived_ = false;
};

/// The MPI tag that carries `tag`: its remainder modulo MPI_TAG_UB + 1.
int mpiTag(int64_t tag) {
  static const int64_t modulus = [] {
    void *value = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag);
    return (flag ? static_cast<int64_t>(*static_cast<int *>(value)) : 32767) +
           1;
  }();
  return static_cast<int>(((tag % modulus) + modulus) % modulus);
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int64_t rank, int64_t size, double timeoutSeconds)
      : rank_(rank), size_(size),
        // At most a billion seconds: more would overflow the clock.
        timeout_(
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(std::min(timeoutSeconds, 1e9)))) {
  }
  /// The messages it sent must leave before the buffers go.
  ~MpiCommunicator() override { completeSends(); }

  std::string name() const override { return "mpi"; }
  int64_t rank() const override { return rank_; }
  int64_t worldSize() const override { return size_; }

  std::string allReduceSum(const RankGroup &group, DType dtype, void *data,
                           int64_t count) override;
  std::string allGather(const RankGroup &group, const void *send, void *recv,
                        int64_t bytesPerRank) override;
  std::string reduceScatterSum(const RankGroup &group, DType dtype,
                               const void *send, void *recv,
                               int64_t countPerRank) override;
  std::string allToAll(const RankGroup &group, const void *send, void *recv,
                       int64_t bytesPerRank) override;
  std::string barrier(const RankGroup &group) override;
  std::string send(int64_t peer, int64_t tag, const void *data,
                   int64_t bytes) override;
  std::string recv(int64_t peer, int64_t tag, void *data,
                   int64_t bytes) override;
  bool lostRank() const override { return lost_; }

private:
  /// Polls `request` (a started collective on `group`) until it completes
  /// or the timeout passes; "" or the error (`call` named).
  std::string wait(MPI_Request &request, const char *call,
                   const RankGroup &group);
  /// The error of a wait past the timeout; marks a rank lost.
  std::string pastDeadline(const std::string &what);
  /// Checks the peer and size of a send or recv, then frees the completed
  /// sends; reports a pending send that failed.
  std::string startPointToPoint(int64_t peer, int64_t bytes);
  /// The sub-communicator of `group` (MPI_COMM_NULL for a singleton), or
  /// false with `error`.
  bool communicator(const RankGroup &group, MPI_Comm &comm, std::string &error);
  /// All-to-all of `send` into `scratch_` and the member-order sum of the
  /// received chunks into `recv`.
  std::string reduceScatter(MPI_Comm comm, int64_t n, DType dtype,
                            const void *send, void *recv, int64_t count);

  int64_t rank_;
  int64_t size_;
  std::chrono::steady_clock::duration timeout_;
  bool lost_ = false;
  std::vector<unsigned char> scratch_, padded_, reduced_;
  /// The group of the collective in flight (reduceScatter's callers').
  const RankGroup *group_ = nullptr;
};

/// Sleeps between polls: nothing for the first thousand, then doubling
/// from a microsecond up to a millisecond.
class Backoff {
public:
  void pause() {
    if (++polls_ < 1000)
      return;
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_));
    sleep_ = std::min<int64_t>(sleep_ * 2, 1000);
  }

private:
  int64_t polls_ = 0, sleep_ = 1;
};

std::string MpiCommunicator::pastDeadline(const std::string &what) {
  lost_ = true;
  double seconds = std::chrono::duration<double>(timeout_).count();
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return what + " did not complete within " + text +
         " (--collective-timeout): a rank is lost (dead or hung)";
}

std::string MpiCommunicator::wait(MPI_Request &request, const char *call,
                                  const RankGroup &group) {
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  Backoff backoff;
  for (;;) {
    int done = 0;
    int code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS)
      return mpiError(call, code);
    if (done)
      return "";
    if (std::chrono::steady_clock::now() > deadline)
      return pastDeadline(std::string(call) + " on group " +
                          formatGroup(group));
    backoff.pause();
  }
}

bool MpiCommunicator::communicator(const RankGroup &group, MPI_Comm &comm,
                                   std::string &error) {
  auto it = state().comms.find(group);
  if (it != state().comms.end()) {
    comm = it->second;
    return true;
  }
  std::set<int64_t> seen;
  for (int64_t r : group) {
    if (r < 0 || r >= size_) {
      error = "group " + formatGroup(group) + " names rank " +
              std::to_string(r) + ", outside the world of " +
              std::to_string(size_) + " ranks";
      return false;
    }
    if (!seen.insert(r).second) {
      error = "group " + formatGroup(group) + " lists rank " +
              std::to_string(r) + " twice";
      return false;
    }
  }
  if (!seen.count(rank_)) {
    error = "rank " + std::to_string(rank_) + " is not a member of group " +
            formatGroup(group);
    return false;
  }
  comm = MPI_COMM_NULL;
  if (group.size() == 1)
    return true;
  bool isWorld = static_cast<int64_t>(group.size()) == size_;
  for (size_t i = 0; isWorld && i < group.size(); ++i)
    isWorld = group[i] == static_cast<int64_t>(i);
  if (isWorld) {
    comm = MPI_COMM_WORLD;
  } else {
    std::vector<int> ranks(group.begin(), group.end());
    MPI_Group world, members;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, static_cast<int>(ranks.size()), ranks.data(),
                   &members);
    int code = MPI_Comm_create_group(MPI_COMM_WORLD, members, /*tag=*/0, &comm);
    MPI_Group_free(&members);
    MPI_Group_free(&world);
    if (code != MPI_SUCCESS) {
      error = mpiError("MPI_Comm_create_group", code);
      return false;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  state().comms.emplace(group, comm);
  return true;
}

/// Checks that `bytes` fits MPI's int counts.
bool fitsInt(int64_t bytes, const char *what, std::string &error) {
  if (bytes >= 0 && bytes <= INT_MAX)
    return true;
  error = std::string(what) + ": " + std::to_string(bytes) +
          " bytes per rank exceed MPI's int counts";
  return false;
}

std::string MpiCommunicator::reduceScatter(MPI_Comm comm, int64_t n,
                                           DType dtype, const void *send,
                                           void *recv, int64_t count) {
  const int64_t bytes = count * static_cast<int64_t>(dtypeSize(dtype));
  std::string error;
  if (!fitsInt(bytes, "reduceScatterSum", error))
    return error;
  scratch_.resize(static_cast<size_t>(n * bytes));
  MPI_Request request;
  int code =
      MPI_Ialltoall(send, static_cast<int>(bytes), MPI_BYTE, scratch_.data(),
                    static_cast<int>(bytes), MPI_BYTE, comm, &request);
  if (code != MPI_SUCCESS)
    return mpiError("MPI_Ialltoall", code);
  if (std::string e = wait(request, "MPI_Ialltoall", *group_); !e.empty())
    return e;
  countReceived((n - 1) * bytes);
  sumChunks(dtype, scratch_.data(), n, count, recv);
  return "";
}

std::string MpiCommunicator::allReduceSum(const RankGroup &group, DType dtype,
                                          void *data, int64_t count) {
  MPI_Comm comm;
  std::string error;
  if (!communicator(group, comm, error))
    return "allReduceSum: " + error;
  if (dtype == DType::Bool)
    return std::string("allReduceSum: cannot sum ") + dtypeName(dtype);
  if (comm == MPI_COMM_NULL || count == 0)
    return "";
  // Reduce-scatter slices of ceil(count / n) elements (the last padded with
  // zeros), then all-gather the sums.
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t elementBytes = static_cast<int64_t>(dtypeSize(dtype));
  const int64_t slice = (count + n - 1) / n;
  const int64_t sliceBytes = slice * elementBytes;
  if (!fitsInt(sliceBytes, "allReduceSum", error))
    return error;
  padded_.assign(static_cast<size_t>(n * sliceBytes), 0);
  std::memcpy(padded_.data(), data, static_cast<size_t>(count * elementBytes));
  reduced_.resize(static_cast<size_t>(sliceBytes));
  group_ = &group;
  error = reduceScatter(comm, n, dtype, padded_.data(), reduced_.data(), slice);
  if (!error.empty())
    return "allReduceSum: " + error;
  MPI_Request request;
  int code = MPI_Iallgather(
      reduced_.data(), static_cast<int>(sliceBytes), MPI_BYTE, padded_.data(),
      static_cast<int>(sliceBytes), MPI_BYTE, comm, &request);
  if (code != MPI_SUCCESS)
    return "allReduceSum: " + mpiError("MPI_Iallgather", code);
  if (std::string e = wait(request, "MPI_Iallgather", group); !e.empty())
    return "allReduceSum: " + e;
  countReceived((n - 1) * sliceBytes);
  std::memcpy(data, padded_.data(), static_cast<size_t>(count * elementBytes));
  return "";
}

std::string MpiCommunicator::allGather(const RankGroup &group, const void *send,
                                       void *recv, int64_t bytesPerRank) {
  MPI_Comm comm;
  std::string error;
  if (!communicator(group, comm, error))
    return "allGather: " + error;
  if (bytesPerRank == 0)
    return "";
  if (comm == MPI_COMM_NULL) {
    std::memmove(recv, send, static_cast<size_t>(bytesPerRank));
    return "";
  }
  if (!fitsInt(bytesPerRank, "allGather", error))
    return error;
  MPI_Request request;
  int code =
      MPI_Iallgather(send, static_cast<int>(bytesPerRank), MPI_BYTE, recv,
                     static_cast<int>(bytesPerRank), MPI_BYTE, comm, &request);
  if (code != MPI_SUCCESS)
    return "allGather: " + mpiError("MPI_Iallgather", code);
  if (std::string e = wait(request, "MPI_Iallgather", group); !e.empty())
    return "allGather: " + e;
  countReceived((static_cast<int64_t>(group.size()) - 1) * bytesPerRank);
  return "";
}

std::string MpiCommunicator::reduceScatterSum(const RankGroup &group,
                                              DType dtype, const void *send,
                                              void *recv,
                                              int64_t countPerRank) {
  MPI_Comm comm;
  std::string error;
  if (!communicator(group, comm, error))
    return "reduceScatterSum: " + error;
  if (dtype == DType::Bool)
    return std::string("reduceScatterSum: cannot sum ") + dtypeName(dtype);
  if (countPerRank == 0)
    return "";
  if (comm == MPI_COMM_NULL) {
    std::memmove(recv, send, countPerRank * dtypeSize(dtype));
    return "";
  }
  group_ = &group;
  error = reduceScatter(comm, static_cast<int64_t>(group.size()), dtype, send,
                        recv, countPerRank);
  return error.empty() ? "" : "reduceScatterSum: " + error;
}

std::string MpiCommunicator::allToAll(const RankGroup &group, const void *send,
                                      void *recv, int64_t bytesPerRank) {
  MPI_Comm comm;
  std::string error;
  if (!communicator(group, comm, error))
    return "allToAll: " + error;
  if (bytesPerRank == 0)
    return "";
  if (comm == MPI_COMM_NULL) {
    std::memmove(recv, send, static_cast<size_t>(bytesPerRank));
    return "";
  }
  if (!fitsInt(bytesPerRank, "allToAll", error))
    return error;
  MPI_Request request;
  int code =
      MPI_Ialltoall(send, static_cast<int>(bytesPerRank), MPI_BYTE, recv,
                    static_cast<int>(bytesPerRank), MPI_BYTE, comm, &request);
  if (code != MPI_SUCCESS)
    return "allToAll: " + mpiError("MPI_Ialltoall", code);
  if (std::string e = wait(request, "MPI_Ialltoall", group); !e.empty())
    return "allToAll: " + e;
  countReceived((static_cast<int64_t>(group.size()) - 1) * bytesPerRank);
  return "";
}

std::string MpiCommunicator::barrier(const RankGroup &group) {
  MPI_Comm comm;
  std::string error;
  if (!communicator(group, comm, error))
    return "barrier: " + error;
  if (comm == MPI_COMM_NULL)
    return "";
  MPI_Request request;
  int code = MPI_Ibarrier(comm, &request);
  if (code != MPI_SUCCESS)
    return "barrier: " + mpiError("MPI_Ibarrier", code);
  std::string e = wait(request, "MPI_Ibarrier", group);
  return e.empty() ? "" : "barrier: " + e;
}

std::string MpiCommunicator::startPointToPoint(int64_t peer, int64_t bytes) {
  if (peer < 0 || peer >= size_)
    return "rank " + std::to_string(peer) + " is outside the world of " +
           std::to_string(size_) + " ranks";
  if (peer == rank_)
    return "rank " + std::to_string(rank_) + " cannot message itself";
  if (bytes < 0)
    return "negative size " + std::to_string(bytes);
  std::string error;
  std::vector<PendingSend> &sends = state().sends;
  size_t kept = 0;
  for (size_t i = 0; i < sends.size(); ++i) {
    int done = 0;
    int code = MPI_Test(&sends[i].request, &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS && error.empty())
      error = "the earlier send to rank " + std::to_string(sends[i].peer) +
              " with tag " + std::to_string(sends[i].tag) + ": " +
              mpiError("MPI_Test", code);
    if (code != MPI_SUCCESS || done)
      continue;
    if (kept != i)
      sends[kept] = std::move(sends[i]);
    ++kept;
  }
  sends.erase(sends.begin() + static_cast<std::ptrdiff_t>(kept), sends.end());
  return error;
}

std::string MpiCommunicator::send(int64_t peer, int64_t tag, const void *data,
                                  int64_t bytes) {
  std::string error = startPointToPoint(peer, bytes);
  if (!error.empty())
    return "send: " + error;
  PendingSend pending;
  const auto *begin = static_cast<const unsigned char *>(data);
  pending.buffer.assign(begin, begin + bytes);
  pending.peer = peer;
  pending.tag = tag;
  ByteType type(bytes);
  int code = MPI_Isend(pending.buffer.data(), type.count, type.type,
                       static_cast<int>(peer), mpiTag(tag), MPI_COMM_WORLD,
                       &pending.request);
  if (code != MPI_SUCCESS)
    return "send: " + mpiError("MPI_Isend", code);
  state().sends.push_back(std::move(pending));
  return "";
}

std::string MpiCommunicator::recv(int64_t peer, int64_t tag, void *data,
                                  int64_t bytes) {
  std::string error = startPointToPoint(peer, bytes);
  if (!error.empty())
    return "recv: " + error;
  // Only this thread calls MPI (MPI_THREAD_FUNNELED) and messages between
  // two ranks with one tag do not overtake, so the MPI_Recv below receives
  // the message probed here.
  MPI_Status status;
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  Backoff backoff;
  for (int found = 0; !found; backoff.pause()) {
    int code = MPI_Iprobe(static_cast<int>(peer), mpiTag(tag), MPI_COMM_WORLD,
                          &found, &status);
    if (code != MPI_SUCCESS)
      return "recv: " + mpiError("MPI_Iprobe", code);
    if (!found && std::chrono::steady_clock::now() > deadline)
      return "recv: " +
             pastDeadline("the message from rank " + std::to_string(peer) +
                          " (tag " + std::to_string(tag) + ")");
  }
  MPI_Count size = 0;
  int code = MPI_Get_elements_x(&status, MPI_BYTE, &size);
  if (code != MPI_SUCCESS)
    return "recv: " + mpiError("MPI_Get_elements_x", code);
  if (size != bytes)
    return "recv: the message from rank " + std::to_string(peer) +
           " with tag " + std::to_string(tag) + " has " +
           std::to_string(static_cast<long long>(size)) + " bytes, not the " +
           std::to_string(bytes) + " expected";
  ByteType type(bytes);
  code = MPI_Recv(data, type.count, type.type, static_cast<int>(peer),
                  mpiTag(tag), MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (code != MPI_SUCCESS)
    return "recv: " + mpiError("MPI_Recv", code);
  countReceived(bytes);
  return "";
}

} // namespace

bool mpiAvailable() { return true; }

std::unique_ptr<Communicator> createMpiCommunicator(std::string &error,
                                                    double timeoutSeconds) {
  error = ensureInitialised();
  if (!error.empty())
    return nullptr;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::make_unique<MpiCommunicator>(rank, size, timeoutSeconds);
}

} // namespace loom::rt
