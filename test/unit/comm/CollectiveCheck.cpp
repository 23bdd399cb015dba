//===- CollectiveCheck.cpp - Every collective of one communicator ---------===//
//
// `loom-collective-check --comm threads|nccl [--ranks N]`: every collective
// of the Communicator interface (all-reduce, all-gather, reduce-scatter,
// all-to-all, barrier) with every element type the sums take, on N ranks
// (threads of this process; NCCL: one rank per GPU of this machine, one by
// default), each rank's buffers in its backend's memory (cuda for NCCL),
// against sums computed here. The GPU bundle runs it with NCCL on its one
// GPU, and with the threads communicator on the CPU. Prints a line per
// case; exits 0 when all hold, 1 when one fails, 77 (skipped) when NCCL or
// a GPU is missing.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"
#include "runtime/Tensor.h"
#include "runtime/comm/Communicator.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>

using namespace loom;
using namespace loom::rt;

namespace {

/// The value member `rank` contributes at element `i` (small integers, so
/// that every sum is exact in every element type).
double valueOf(int64_t rank, int64_t i) {
  return static_cast<double>((rank + 1) * 3 + i % 7) - 5;
}

void store(DType dtype, void *data, int64_t i, double v) {
  switch (dtype) {
  case DType::F32:
    static_cast<float *>(data)[i] = static_cast<float>(v);
    return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = floatToHalf(static_cast<float>(v));
    return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = floatToBf16(static_cast<float>(v));
    return;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(v);
    return;
  case DType::I64:
    static_cast<int64_t *>(data)[i] = static_cast<int64_t>(v);
    return;
  case DType::Bool:
    static_cast<uint8_t *>(data)[i] = v != 0;
    return;
  }
}

double load(DType dtype, const void *data, int64_t i) {
  TensorView view{dtype, {i + 1}, const_cast<void *>(data)};
  switch (dtype) {
  case DType::F32:
    return view.as<float>()[i];
  case DType::F16:
    return halfToFloat(view.as<uint16_t>()[i]);
  case DType::BF16:
    return bf16ToFloat(view.as<uint16_t>()[i]);
  case DType::I32:
    return view.as<int32_t>()[i];
  case DType::I64:
    return static_cast<double>(view.as<int64_t>()[i]);
  case DType::Bool:
    return view.as<uint8_t>()[i];
  }
  return 0;
}

/// One rank's side: its backend, communicator, and buffers in the memory
/// the communicator takes.
struct RankSide {
  int64_t rank = 0;
  std::unique_ptr<Backend> backend;
  Communicator *comm = nullptr;
  std::unique_ptr<Communicator> device;

  /// Host bytes copied into a fresh buffer of the communicator's memory.
  void *upload(const std::vector<unsigned char> &host) {
    void *p = backend->allocate(std::max<size_t>(host.size(), 1));
    backend->copyToDevice(p, host.data(), host.size());
    return p;
  }
  std::vector<unsigned char> download(const void *p, size_t bytes) {
    std::vector<unsigned char> host(bytes);
    backend->synchronize();
    backend->copyToHost(host.data(), p, bytes);
    return host;
  }
};

/// Runs `fn` on every rank at once; the failures, one line each.
std::string onEveryRank(std::vector<RankSide> &ranks,
                        const std::function<std::string(RankSide &)> &fn) {
  std::vector<std::string> errors(ranks.size());
  std::vector<std::thread> threads;
  for (RankSide &r : ranks)
    threads.emplace_back([&, i = r.rank] { errors[i] = fn(ranks[i]); });
  for (std::thread &t : threads)
    t.join();
  std::string all;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      all += "rank " + std::to_string(r) + ": " + errors[r] + "; ";
  return all;
}

/// Compares `count` elements of `got` with `want(i)`; "" or the first miss.
std::string expect(DType dtype, const std::vector<unsigned char> &got,
                   int64_t count, const std::function<double(int64_t)> &want) {
  for (int64_t i = 0; i < count; ++i)
    if (load(dtype, got.data(), i) != want(i))
      return "element " + std::to_string(i) + " is " +
             std::to_string(load(dtype, got.data(), i)) + ", expected " +
             std::to_string(want(i));
  return "";
}

std::vector<unsigned char> filled(DType dtype, int64_t rank, int64_t count) {
  std::vector<unsigned char> host(count * dtypeSize(dtype));
  for (int64_t i = 0; i < count; ++i)
    store(dtype, host.data(), i, valueOf(rank, i));
  return host;
}

} // namespace

int main(int argc, char **argv) {
  std::string commName = "threads";
  int64_t n = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--comm" && i + 1 < argc)
      commName = argv[++i];
    else if (arg == "--ranks" && i + 1 < argc)
      n = std::atoll(argv[++i]);
    else {
      std::cerr << "usage: loom-collective-check --comm threads|nccl "
                   "[--ranks N]\n";
      return 2;
    }
  }
  bool nccl = commName == "nccl";
  std::string error;
  if (nccl) {
    if (!ncclAvailable()) {
      std::cout << "skipped: this Loom was built without NCCL\n";
      return 77;
    }
    int gpus = cudaDeviceCount(error);
    if (gpus == 0) {
      std::cout << "skipped: " << error << "\n";
      return 77;
    }
    if (n == 0)
      n = 1;
    if (n > gpus) {
      std::cerr << "--ranks " << n << " needs as many GPUs; this machine has "
                << gpus << "\n";
      return 2;
    }
  } else if (commName != "threads") {
    std::cerr << "--comm must be threads or nccl\n";
    return 2;
  }
  if (n <= 0)
    n = 4;

  std::vector<std::unique_ptr<Communicator>> hosts =
      createThreadsCommunicators(n);
  std::vector<RankSide> ranks(n);
  for (int64_t r = 0; r < n; ++r) {
    ranks[r].rank = r;
    ranks[r].backend =
        createBackend(nccl ? "cuda" : "cpu", static_cast<int>(r), error);
    if (!ranks[r].backend) {
      std::cerr << error << "\n";
      return 1;
    }
    ranks[r].comm = hosts[r].get();
  }
  if (nccl) {
    // Every rank bootstraps its NCCL communicator at once (a collective of
    // the host communicators).
    std::string failed = onEveryRank(ranks, [&](RankSide &r) {
      std::string e;
      r.device = createNcclCommunicator(*r.comm, static_cast<int>(r.rank),
                                        cudaStreamOf(*r.backend),
                                        cudaCommStreamOf(*r.backend), e);
      if (!r.device)
        return e;
      r.comm = r.device.get();
      return std::string();
    });
    if (!failed.empty()) {
      std::cerr << "creating the NCCL communicators: " << failed << "\n";
      return 1;
    }
  }

  RankGroup world(n);
  for (int64_t r = 0; r < n; ++r)
    world[r] = r;
  const int64_t count = 1000; // elements per member chunk
  int failures = 0, cases = 0;
  auto report = [&](const std::string &what, const std::string &failed) {
    ++cases;
    if (!failed.empty())
      ++failures;
    std::cout << (failed.empty() ? "ok   " : "FAIL ") << commName << " x" << n
              << " " << what << (failed.empty() ? "" : ": " + failed) << "\n";
  };
  auto sumOf = [&](int64_t i) {
    double s = 0;
    for (int64_t r = 0; r < n; ++r)
      s += valueOf(r, i);
    return s;
  };
  for (DType dtype :
       {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    size_t es = dtypeSize(dtype);
    std::string t = dtypeName(dtype);
    report("all_reduce_sum " + t, onEveryRank(ranks, [&](RankSide &r) {
             void *buf = r.upload(filled(dtype, r.rank, count));
             std::string e = r.comm->allReduceSum(world, dtype, buf, count);
             if (e.empty())
               e = expect(dtype, r.download(buf, count * es), count, sumOf);
             r.backend->deallocate(buf);
             return e;
           }));
    report("reduce_scatter_sum " + t, onEveryRank(ranks, [&](RankSide &r) {
             void *send = r.upload(filled(dtype, r.rank, count * n));
             void *recv = r.upload(std::vector<unsigned char>(count * es));
             std::string e =
                 r.comm->reduceScatterSum(world, dtype, send, recv, count);
             if (e.empty())
               e = expect(dtype, r.download(recv, count * es), count,
                          [&](int64_t i) { return sumOf(r.rank * count + i); });
             r.backend->deallocate(send);
             r.backend->deallocate(recv);
             return e;
           }));
  }
  size_t bytes = 4096 + 3; // an odd size: collectives move bytes
  auto byteOf = [](int64_t rank, int64_t chunk, size_t i) {
    return static_cast<unsigned char>((rank * 31 + chunk * 7 + i) % 251);
  };
  report("all_gather bytes", onEveryRank(ranks, [&](RankSide &r) {
           std::vector<unsigned char> mine(bytes);
           for (size_t i = 0; i < bytes; ++i)
             mine[i] = byteOf(r.rank, 0, i);
           void *send = r.upload(mine);
           void *recv = r.upload(std::vector<unsigned char>(bytes * n));
           std::string e = r.comm->allGather(world, send, recv, bytes);
           if (e.empty()) {
             std::vector<unsigned char> got = r.download(recv, bytes * n);
             for (int64_t m = 0; m < n && e.empty(); ++m)
               for (size_t i = 0; i < bytes && e.empty(); ++i)
                 if (got[m * bytes + i] != byteOf(m, 0, i))
                   e = "byte " + std::to_string(i) + " of member " +
                       std::to_string(m) + " differs";
           }
           r.backend->deallocate(send);
           r.backend->deallocate(recv);
           return e;
         }));
  report("all_to_all bytes", onEveryRank(ranks, [&](RankSide &r) {
           std::vector<unsigned char> mine(bytes * n);
           for (int64_t j = 0; j < n; ++j)
             for (size_t i = 0; i < bytes; ++i)
               mine[j * bytes + i] = byteOf(r.rank, j, i);
           void *send = r.upload(mine);
           void *recv = r.upload(std::vector<unsigned char>(bytes * n));
           std::string e = r.comm->allToAll(world, send, recv, bytes);
           if (e.empty()) {
             std::vector<unsigned char> got = r.download(recv, bytes * n);
             for (int64_t m = 0; m < n && e.empty(); ++m)
               for (size_t i = 0; i < bytes && e.empty(); ++i)
                 if (got[m * bytes + i] != byteOf(m, r.rank, i))
                   e = "byte " + std::to_string(i) + " from member " +
                       std::to_string(m) + " differs";
           }
           r.backend->deallocate(send);
           r.backend->deallocate(recv);
           return e;
         }));
  report("barrier", onEveryRank(ranks, [&](RankSide &r) {
           return r.comm->barrier(world);
         }));
  std::cout << cases - failures << " passed, " << failures << " failed\n";
  return failures == 0 ? 0 : 1;
}
