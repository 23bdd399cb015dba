//===- ThreadsCommunicator.cpp - Ranks as threads of one process ----------===//
//
// The `threads` communicator: N ranks are threads of one process sharing a
// world. Every distinct group has one rendezvous, reused by all of its
// collectives. A member posts its buffers and waits until every member has
// posted (first barrier); then it reads the others' buffers to compute its
// own result, and waits again (second barrier) so that no member returns,
// and reuses or frees its buffers, while another still reads them. Groups
// are independent, so disjoint groups run their collectives concurrently.
//
// Sums add the members' values in member order, one element at a time, and
// each element of an all-reduce is computed once (member i reduces the i-th
// slice into shared scratch that everyone copies), so every member receives
// bitwise identical results. The MPI communicator sums in the same order.
//
// Point-to-point messages go through the world's mailboxes, one FIFO queue
// per (source, destination, tag): `send` copies the message into its queue
// and wakes the destination, `recv` waits on its own condition variable
// until the queue it reads is not empty.
//
// Failures. Every wait has a deadline (the world's timeout): a member whose
// partners have not all arrived by then returns an error naming the ranks
// that did not, and so does a `recv` whose message never comes. A rank that
// fails calls abort(), which wakes every rank waiting in the world with an
// error naming it, so that no rank waits for one that will never come.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Sum.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

namespace loom::rt {

namespace {

/// Which collective a member posted; all members must post the same one.
enum class Kind { AllReduce, AllGather, ReduceScatter, AllToAll, Barrier };

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::AllReduce:
    return "allReduceSum";
  case Kind::AllGather:
    return "allGather";
  case Kind::ReduceScatter:
    return "reduceScatterSum";
  case Kind::AllToAll:
    return "allToAll";
  case Kind::Barrier:
    return "barrier";
  }
  return "?";
}

/// What one member contributes to a collective.
struct Post {
  Kind kind = Kind::Barrier;
  DType dtype = DType::F32;
  /// Elements (sums) or bytes (data movement) per member.
  int64_t count = 0;
  const void *send = nullptr;
  void *recv = nullptr;
};

/// E.g. `allReduceSum of 4 f32`.
std::string describe(const Post &post) {
  std::string s =
      std::string(kindName(post.kind)) + " of " + std::to_string(post.count);
  if (post.kind == Kind::AllReduce || post.kind == Kind::ReduceScatter)
    return s + " " + dtypeName(post.dtype);
  return post.kind == Kind::Barrier ? kindName(post.kind) : s + " bytes";
}

std::string formatGroup(const RankGroup &group) {
  std::string s = "[";
  for (size_t i = 0; i < group.size(); ++i)
    s += (i ? ", " : "") + std::to_string(group[i]);
  return s + "]";
}

/// memcpy that accepts empty (possibly null) buffers.
void copyBytes(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memmove(dst, src, bytes);
}

using Clock = std::chrono::steady_clock;

/// Why the world was aborted ("" while it was not), shared by all ranks.
struct Abort {
  std::mutex mutex;
  std::string reason;
  /// Set when a wait's deadline passed: a rank of the world is lost.
  std::atomic<bool> lostRank{false};
  /// The condition variables ranks wait on, each with the mutex its
  /// waiters hold, to wake them all.
  std::vector<std::pair<std::mutex *, std::condition_variable *>> waiters;
};

/// The meeting point of one group's members, reused by every collective on
/// that group. `posts` and `scratch` are written and read between barriers
/// only, which order those accesses.
class Rendezvous {
public:
  Rendezvous(const RankGroup &group, Abort &abort)
      : posts(group.size()), group_(group), present_(group.size()),
        abort_(abort) {
    std::lock_guard<std::mutex> lock(abort.mutex);
    abort.waiters.emplace_back(&mutex_, &cv_);
  }

  /// Blocks until all members have arrived, member `index` being this
  /// rank. The last to arrive runs `onLast` first, while the others are
  /// still waiting. "" or, at `deadline` or when the world is aborted, the
  /// error that says who did not arrive or why the world stopped.
  template <typename Fn>
  std::string arrive(size_t index, Clock::time_point deadline, Fn onLast) {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t generation = generation_;
    present_[index] = true;
    if (++arrived_ == group_.size()) {
      onLast();
      arrived_ = 0;
      std::fill(present_.begin(), present_.end(), false);
      ++generation_;
      lock.unlock();
      cv_.notify_all();
      return "";
    }
    auto done = [&] { return generation_ != generation || !aborted().empty(); };
    if (cv_.wait_until(lock, deadline, done) && generation_ != generation)
      return "";
    if (std::string why = aborted(); !why.empty())
      return why;
    abort_.lostRank = true;
    std::string missing;
    for (size_t m = 0; m < group_.size(); ++m)
      if (!present_[m])
        missing += (missing.empty() ? "" : ", ") + std::to_string(group_[m]);
    return "rank" +
           std::string(missing.find(',') == std::string::npos ? " " : "s ") +
           missing + " of group " + formatGroup(group_) + " did not arrive";
  }
  std::string arrive(size_t index, Clock::time_point deadline) {
    return arrive(index, deadline, [] {});
  }

  std::vector<Post> posts;
  /// The all-reduce result, written slice by slice by its members.
  std::vector<unsigned char> scratch;

private:
  std::string aborted() {
    std::lock_guard<std::mutex> lock(abort_.mutex);
    return abort_.reason;
  }

  const RankGroup group_;
  std::vector<bool> present_;
  Abort &abort_;
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t arrived_ = 0;
  uint64_t generation_ = 0;
};

/// A point-to-point channel: source rank, destination rank, tag.
using MailboxKey = std::tuple<int64_t, int64_t, int64_t>;

/// What the communicators of one process share: the rendezvous of every
/// group that has been used, created by the first member to use it, and
/// the messages sent but not yet received.
struct World {
  World(int64_t size, double timeoutSeconds)
      : size(size), delivered(static_cast<size_t>(size)),
        // At most a billion seconds: a larger (or infinite) timeout would
        // overflow the clock's count.
        timeout(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(std::min(timeoutSeconds, 1e9)))) {
    for (std::condition_variable &cv : delivered)
      abort.waiters.emplace_back(&mutex, &cv);
  }

  Rendezvous &rendezvous(const RankGroup &group) {
    std::lock_guard<std::mutex> lock(mutex);
    std::unique_ptr<Rendezvous> &slot = groups[group];
    if (!slot)
      slot = std::make_unique<Rendezvous>(group, abort);
    return *slot;
  }

  /// Stops the world: every wait, now or later, returns `reason`.
  void stop(const std::string &reason) {
    std::vector<std::pair<std::mutex *, std::condition_variable *>> waiters;
    {
      std::lock_guard<std::mutex> lock(abort.mutex);
      if (abort.reason.empty())
        abort.reason = reason;
      waiters = abort.waiters;
    }
    // Under each waiter's mutex, so that none checks the reason, misses
    // it, and then sleeps through the notification.
    for (auto [m, cv] : waiters) {
      std::lock_guard<std::mutex> lock(*m);
      cv->notify_all();
    }
  }

  std::string aborted() {
    std::lock_guard<std::mutex> lock(abort.mutex);
    return abort.reason;
  }

  const int64_t size;
  Abort abort;
  /// Guards `groups` and `mailboxes`.
  std::mutex mutex;
  std::map<RankGroup, std::unique_ptr<Rendezvous>> groups;
  /// The messages of each channel in the order they were sent; a channel
  /// is erased when its last message is received.
  std::map<MailboxKey, std::deque<std::vector<unsigned char>>> mailboxes;
  /// delivered[r] is notified when a message for rank r arrives.
  std::vector<std::condition_variable> delivered;
  /// How long a rank waits for its partners.
  const Clock::duration timeout;
};

/// "N s" for the timeout in messages.
std::string seconds(Clock::duration d) {
  double s = std::chrono::duration<double>(d).count();
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

class ThreadsCommunicator final : public Communicator {
public:
  ThreadsCommunicator(std::shared_ptr<World> world, int64_t rank)
      : world_(std::move(world)), rank_(rank) {}

  std::string name() const override { return "threads"; }
  int64_t rank() const override { return rank_; }
  int64_t worldSize() const override { return world_->size; }

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
  void abort(const std::string &reason) override {
    world_->stop("rank " + std::to_string(rank_) + " failed: " + reason);
  }
  bool lostRank() const override { return world_->abort.lostRank; }

private:
  /// Checks the peer and size of a send or recv.
  std::string checkPeer(const char *call, int64_t peer, int64_t bytes) const;

  /// This rank's membership of a group.
  struct Member {
    Rendezvous *rendezvous = nullptr;
    size_t index = 0;
    size_t size = 0;
  };

  /// Looks up (on first use: validates and joins) `group`.
  const Member *join(const RankGroup &group, std::string &error);

  /// Posts `post`, waits for the others, runs `compute(posts, member)`,
  /// waits again and then runs `finish(rendezvous)`. Returns the mismatch
  /// if the members posted different collectives or sizes.
  template <typename Compute, typename Finish>
  std::string collective(const RankGroup &group, const Member &member,
                         const Post &post, size_t scratchBytes, Compute compute,
                         Finish finish);

  std::shared_ptr<World> world_;
  int64_t rank_;
  std::map<RankGroup, Member> members_;
};

const ThreadsCommunicator::Member *
ThreadsCommunicator::join(const RankGroup &group, std::string &error) {
  auto it = members_.find(group);
  if (it != members_.end())
    return &it->second;
  std::set<int64_t> seen;
  for (int64_t r : group) {
    if (r < 0 || r >= world_->size) {
      error = "group " + formatGroup(group) + " names rank " +
              std::to_string(r) + ", outside the world of " +
              std::to_string(world_->size) + " ranks";
      return nullptr;
    }
    if (!seen.insert(r).second) {
      error = "group " + formatGroup(group) + " lists rank " +
              std::to_string(r) + " twice";
      return nullptr;
    }
  }
  auto self = std::find(group.begin(), group.end(), rank_);
  if (self == group.end()) {
    error = "rank " + std::to_string(rank_) + " is not a member of group " +
            formatGroup(group);
    return nullptr;
  }
  Member member;
  member.index = static_cast<size_t>(self - group.begin());
  member.size = group.size();
  if (group.size() > 1)
    member.rendezvous = &world_->rendezvous(group);
  return &members_.emplace(group, member).first->second;
}

template <typename Compute, typename Finish>
std::string
ThreadsCommunicator::collective(const RankGroup &group, const Member &member,
                                const Post &post, size_t scratchBytes,
                                Compute compute, Finish finish) {
  Rendezvous &rv = *member.rendezvous;
  rv.posts[member.index] = post;
  Clock::time_point deadline = Clock::now() + world_->timeout;
  auto waited = [&](const std::string &e) {
    return std::string(kindName(post.kind)) + " on group " +
           formatGroup(group) + ": " + e +
           (e.find("did not arrive") != std::string::npos
                ? " within " + seconds(world_->timeout) +
                      " (--collective-timeout)"
                : "");
  };
  if (std::string e = rv.arrive(member.index, deadline,
                                [&] {
                                  if (rv.scratch.size() < scratchBytes)
                                    rv.scratch.resize(scratchBytes);
                                });
      !e.empty())
    return waited(e);
  // Every member finds the same first disagreement, so all return it.
  std::string error;
  const Post &first = rv.posts[0];
  for (size_t m = 1; m < rv.posts.size() && error.empty(); ++m) {
    const Post &other = rv.posts[m];
    if (other.kind != first.kind || other.dtype != first.dtype ||
        other.count != first.count)
      error = std::string(kindName(post.kind)) + ": the members of group " +
              formatGroup(group) +
              " called different collectives or sizes (member 0: " +
              describe(first) + ", member " + std::to_string(m) + ": " +
              describe(other) + ")";
  }
  if (error.empty())
    compute(rv.posts, member.index);
  if (std::string e = rv.arrive(member.index, Clock::now() + world_->timeout);
      !e.empty())
    return waited(e);
  if (error.empty())
    finish(rv);
  return error;
}

std::string ThreadsCommunicator::allReduceSum(const RankGroup &group,
                                              DType dtype, void *data,
                                              int64_t count) {
  std::string error;
  const Member *member = join(group, error);
  if (!member)
    return "allReduceSum: " + error;
  if (!canSum(dtype))
    return std::string("allReduceSum: cannot sum ") + dtypeName(dtype);
  if (member->size == 1)
    return "";
  const size_t elementBytes = dtypeSize(dtype);
  const size_t bytes = static_cast<size_t>(count) * elementBytes;
  Post post{Kind::AllReduce, dtype, count, data, data};
  int64_t n = static_cast<int64_t>(member->size);
  return collective(
      group, *member, post, bytes,
      [&](const std::vector<Post> &posts, size_t i) {
        // Member i sums slice i of every member's buffer into the scratch.
        int64_t first = count * static_cast<int64_t>(i) / n;
        int64_t last = count * static_cast<int64_t>(i + 1) / n;
        std::vector<const void *> srcs;
        for (const Post &p : posts)
          srcs.push_back(p.send);
        sumInMemberOrder(dtype, srcs, first,
                         member->rendezvous->scratch.data() +
                             first * elementBytes,
                         last - first);
        // Read slice i of the n - 1 others, then the n - 1 slices the
        // others summed.
        countReceived(2 * (n - 1) * (last - first) *
                      static_cast<int64_t>(elementBytes));
      },
      [&](Rendezvous &rv) { copyBytes(data, rv.scratch.data(), bytes); });
}

std::string ThreadsCommunicator::allGather(const RankGroup &group,
                                           const void *send, void *recv,
                                           int64_t bytesPerRank) {
  std::string error;
  const Member *member = join(group, error);
  if (!member)
    return "allGather: " + error;
  const size_t bytes = static_cast<size_t>(bytesPerRank);
  if (member->size == 1) {
    copyBytes(recv, send, bytes);
    return "";
  }
  Post post{Kind::AllGather, DType::F32, bytesPerRank, send, recv};
  return collective(
      group, *member, post, 0,
      [&](const std::vector<Post> &posts, size_t) {
        auto *out = static_cast<unsigned char *>(recv);
        for (size_t m = 0; m < posts.size(); ++m)
          copyBytes(out + m * bytes, posts[m].send, bytes);
        countReceived(static_cast<int64_t>((posts.size() - 1) * bytes));
      },
      [](Rendezvous &) {});
}

std::string ThreadsCommunicator::reduceScatterSum(const RankGroup &group,
                                                  DType dtype, const void *send,
                                                  void *recv,
                                                  int64_t countPerRank) {
  std::string error;
  const Member *member = join(group, error);
  if (!member)
    return "reduceScatterSum: " + error;
  if (!canSum(dtype))
    return std::string("reduceScatterSum: cannot sum ") + dtypeName(dtype);
  if (member->size == 1) {
    copyBytes(recv, send, countPerRank * dtypeSize(dtype));
    return "";
  }
  Post post{Kind::ReduceScatter, dtype, countPerRank, send, recv};
  return collective(
      group, *member, post, 0,
      [&](const std::vector<Post> &posts, size_t i) {
        std::vector<const void *> srcs;
        for (const Post &p : posts)
          srcs.push_back(p.send);
        sumInMemberOrder(dtype, srcs, countPerRank * static_cast<int64_t>(i),
                         recv, countPerRank);
        countReceived(static_cast<int64_t>(posts.size() - 1) * countPerRank *
                      static_cast<int64_t>(dtypeSize(dtype)));
      },
      [](Rendezvous &) {});
}

std::string ThreadsCommunicator::allToAll(const RankGroup &group,
                                          const void *send, void *recv,
                                          int64_t bytesPerRank) {
  std::string error;
  const Member *member = join(group, error);
  if (!member)
    return "allToAll: " + error;
  const size_t bytes = static_cast<size_t>(bytesPerRank);
  if (member->size == 1) {
    copyBytes(recv, send, bytes);
    return "";
  }
  Post post{Kind::AllToAll, DType::F32, bytesPerRank, send, recv};
  return collective(
      group, *member, post, 0,
      [&](const std::vector<Post> &posts, size_t i) {
        auto *out = static_cast<unsigned char *>(recv);
        for (size_t m = 0; m < posts.size(); ++m)
          copyBytes(out + m * bytes,
                    static_cast<const unsigned char *>(posts[m].send) +
                        i * bytes,
                    bytes);
        countReceived(static_cast<int64_t>((posts.size() - 1) * bytes));
      },
      [](Rendezvous &) {});
}

std::string ThreadsCommunicator::barrier(const RankGroup &group) {
  std::string error;
  const Member *member = join(group, error);
  if (!member)
    return "barrier: " + error;
  if (member->size == 1)
    return "";
  Post post{Kind::Barrier, DType::F32, 0, nullptr, nullptr};
  return collective(
      group, *member, post, 0, [](const std::vector<Post> &, size_t) {},
      [](Rendezvous &) {});
}

std::string ThreadsCommunicator::checkPeer(const char *call, int64_t peer,
                                           int64_t bytes) const {
  const std::string prefix = std::string(call) + ": ";
  if (peer < 0 || peer >= world_->size)
    return prefix + "rank " + std::to_string(peer) +
           " is outside the world of " + std::to_string(world_->size) +
           " ranks";
  if (peer == rank_)
    return prefix + "rank " + std::to_string(rank_) + " cannot message itself";
  if (bytes < 0)
    return prefix + "negative size " + std::to_string(bytes);
  return "";
}

std::string ThreadsCommunicator::send(int64_t peer, int64_t tag,
                                      const void *data, int64_t bytes) {
  std::string error = checkPeer("send", peer, bytes);
  if (!error.empty())
    return error;
  const auto *begin = static_cast<const unsigned char *>(data);
  std::vector<unsigned char> message(begin, begin + bytes);
  {
    std::lock_guard<std::mutex> lock(world_->mutex);
    world_->mailboxes[MailboxKey{rank_, peer, tag}].push_back(
        std::move(message));
  }
  world_->delivered[static_cast<size_t>(peer)].notify_all();
  return "";
}

std::string ThreadsCommunicator::recv(int64_t peer, int64_t tag, void *data,
                                      int64_t bytes) {
  std::string error = checkPeer("recv", peer, bytes);
  if (!error.empty())
    return error;
  std::unique_lock<std::mutex> lock(world_->mutex);
  // Only this rank receives on the channel, so no one else erases it.
  auto box = world_->mailboxes.try_emplace(MailboxKey{peer, rank_, tag}).first;
  std::string stopped;
  auto ready = [&] {
    stopped = world_->aborted();
    return !box->second.empty() || !stopped.empty();
  };
  if (!world_->delivered[static_cast<size_t>(rank_)].wait_until(
          lock, Clock::now() + world_->timeout, ready)) {
    world_->abort.lostRank = true;
    return "recv: nothing came from rank " + std::to_string(peer) + " (tag " +
           std::to_string(tag) + ") within " + seconds(world_->timeout) +
           " (--collective-timeout)";
  }
  if (box->second.empty())
    return "recv from rank " + std::to_string(peer) + ": " + stopped;
  std::vector<unsigned char> &message = box->second.front();
  const int64_t size = static_cast<int64_t>(message.size());
  if (size != bytes)
    return "recv: the message from rank " + std::to_string(peer) +
           " with tag " + std::to_string(tag) + " has " + std::to_string(size) +
           " bytes, not the " + std::to_string(bytes) + " expected";
  copyBytes(data, message.data(), message.size());
  box->second.pop_front();
  if (box->second.empty())
    world_->mailboxes.erase(box);
  lock.unlock();
  countReceived(bytes);
  return "";
}

} // namespace

std::vector<std::unique_ptr<Communicator>>
createThreadsCommunicators(int64_t worldSize, double timeoutSeconds) {
  auto world = std::make_shared<World>(worldSize, timeoutSeconds);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int64_t r = 0; r < worldSize; ++r)
    comms.push_back(std::make_unique<ThreadsCommunicator>(world, r));
  return comms;
}

} // namespace loom::rt
