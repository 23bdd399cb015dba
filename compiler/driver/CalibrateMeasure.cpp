//===- CalibrateMeasure.cpp - What `loom calibrate` measures, and how -----===//
//
// The measurements behind `loom calibrate` (CalibrateCommand.cpp): kernels
// timed on N thread ranks at once, the class mixes and tiny kernels (the
// collectives: CalibrateCollectives.cpp).
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/CalibrateMeasure.h"

#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <thread>

namespace loom::driver::calibrate {

Settings settings(bool quick) {
  Settings s;
  if (quick) {
    s.matmulSizes = {32, 64, 128};
    s.addElements = 1 << 18;
    s.stepRows = 64, s.stepCols = 256;
    s.tokens = 128, s.hidden = 64;
    s.convBatch = 2, s.convChannels = 16, s.convSize = 16;
    s.collectiveBytes = {4 << 10, 16 << 10, 64 << 10, 256 << 10};
    s.collectiveVolume = 1 << 19;
    s.batchSeconds = 0.01, s.trials = 2;
    return s;
  }
  s.matmulSizes = {256, 512, 1024, 2048};
  s.addElements = 1 << 24;
  s.stepRows = 256, s.stepCols = 1024;
  s.tokens = 1024, s.hidden = 256;
  s.convBatch = 8, s.convChannels = 64, s.convSize = 32;
  s.collectiveBytes = {4 << 10, 16 << 10, 64 << 10, 256 << 10,
                       1 << 20, 4 << 20,  16 << 20};
  s.collectiveVolume = int64_t(256) << 20;
  s.batchSeconds = 0.1, s.trials = 3;
  return s;
}

namespace {

/// Lets the ranks of a measurement wait for each other and agree on a
/// number.
class RankSync {
public:
  explicit RankSync(int ranks) : ranks(ranks) {}

  /// Returns the largest `value` any rank gave, once every rank has.
  double agreeMax(double value) {
    std::unique_lock<std::mutex> lock(mu);
    int round = generation;
    current = arrived == 0 ? value : std::max(current, value);
    if (++arrived == ranks) {
      agreed = current;
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != round; });
    }
    return agreed;
  }
  void barrier() { (void)agreeMax(0); }

private:
  int ranks;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0, generation = 0;
  double current = 0, agreed = 0;
};

} // namespace

/// Seconds per call of the kernel call `make` builds, on `ranks` threads at
/// once, each with its own backend (a CPU one using `threadsPerRank`
/// threads; a CUDA one on device r, waited for after each batch): after
/// a warm-up call, the ranks run `s.trials` batches of the same number of
/// calls together (each batch lasting at least `s.batchSeconds`), each
/// batch timed from the common start until the slowest rank is done (a
/// rank that ran alone on a core while others waited would look faster
/// than any rank of a run is); the result is the best batch.
double timeOnEveryRank(int ranks, int threadsPerRank,
                       const std::function<KernelCall()> &make,
                       const Settings &s, std::string &error) {
  std::vector<double> results(ranks);
  std::vector<std::string> errors(ranks);
  RankSync sync(ranks);
  std::vector<std::thread> workers;
  for (int r = 0; r < ranks; ++r)
    workers.emplace_back([&, r] {
      std::string setup;
      std::unique_ptr<rt::Backend> backend =
          rt::createBackend(s.backend, r, setup);
      KernelCall call = make();
      const rt::KernelFn *kernel =
          backend ? backend->findKernel(call.op) : nullptr;
      if (backend)
        backend->setNumThreads(threadsPerRank);
      // A device backend gets device copies of the operands.
      std::vector<void *> device;
      auto view = [&](Buffer &b) {
        rt::TensorView v = b.view();
        if (backend && !backend->hostAccessible()) {
          void *d = backend->allocate(std::max<size_t>(b.bytes.size(), 1));
          if (d && !b.bytes.empty())
            backend->copyToDevice(d, b.bytes.data(), b.bytes.size());
          device.push_back(d);
          v.data = d;
        }
        return v;
      };
      rt::KernelArgs args{call.op, call.attrs, {}, {}};
      for (Buffer &b : call.inputs)
        args.inputs.push_back(view(b));
      for (Buffer &b : call.outputs)
        args.outputs.push_back(view(b));
      auto runOnce = [&] {
        std::string e = (*kernel)(args);
        std::string sync = backend->synchronize();
        return e.empty() ? sync : e;
      };
      if (!backend)
        errors[r] = setup;
      else if (std::find(device.begin(), device.end(), nullptr) != device.end())
        errors[r] = "out of device memory";
      else if (!kernel)
        errors[r] =
            "backend '" + s.backend + "' has no '" + call.op + "' kernel";
      else
        errors[r] = runOnce();
      auto release = [&] {
        for (void *d : device)
          if (d)
            backend->deallocate(d);
      };
      // Every rank stops if one failed (they run the same call).
      if (sync.agreeMax(errors[r].empty() ? 0 : 1) > 0) {
        release();
        return;
      }
      Clock::time_point start = Clock::now();
      (void)runOnce();
      double once = std::max(secondsSince(start), 1e-9);
      auto calls = static_cast<int64_t>(
          sync.agreeMax(std::min(std::ceil(s.batchSeconds / once), 1e9)));
      double best = INFINITY;
      for (int trial = 0; trial < s.trials; ++trial) {
        sync.barrier();
        start = Clock::now();
        for (int64_t i = 0; i < calls; ++i)
          (void)(*kernel)(args);
        (void)backend->synchronize();
        double slowest = sync.agreeMax(secondsSince(start));
        best = std::min(best, slowest / static_cast<double>(calls));
      }
      results[r] = best;
      release();
    });
  for (std::thread &t : workers)
    t.join();
  for (const std::string &e : errors)
    if (!e.empty()) {
      error = e;
      return 0;
    }
  return std::accumulate(results.begin(), results.end(), 0.0) / ranks;
}

namespace {

KernelCall matmulCall(int64_t n, rt::DType dtype) {
  KernelCall c{"matmul", {}, {}, {}};
  c.inputs = {Buffer(dtype, {n, n}), Buffer(dtype, {n, n})};
  c.outputs = {Buffer(dtype, {n, n})};
  return c;
}

} // namespace

double matmulRate(int ranks, int threads, int64_t n, rt::DType dtype,
                  const Settings &s, std::string &error) {
  double t = timeOnEveryRank(
      ranks, threads, [&] { return matmulCall(n, dtype); }, s, error);
  return error.empty() ? 2.0 * n * n * n / t : 0.0;
}

namespace {

/// The roofline work of `call` as dialects/Cost.cpp counts it: every
/// operand and result byte once, and `flops`.
cost::OpWork workOf(const KernelCall &call, double flops,
                    const std::string &kernelClass) {
  double bytes = 0;
  for (const Buffer &b : call.inputs)
    bytes += static_cast<double>(b.bytes.size());
  for (const Buffer &b : call.outputs)
    bytes += static_cast<double>(b.bytes.size());
  return {flops, bytes, "f32", kernelClass, ""};
}

MixKernel mixKernel(std::function<KernelCall()> make, double flopsPerOutput,
                    const std::string &kernelClass) {
  KernelCall sample = make();
  double out = static_cast<double>(rt::numElements(sample.outputs[0].shape));
  double in = static_cast<double>(rt::numElements(sample.inputs[0].shape));
  double flops = kernelClass == "reduction" ? flopsPerOutput * in
                                            : flopsPerOutput * out;
  return {std::move(make), workOf(sample, flops, kernelClass)};
}

} // namespace

KernelCall f32Call(std::string op, std::vector<rt::Shape> inputs,
                   rt::Shape output) {
  KernelCall k{std::move(op), {}, {}, {}};
  for (rt::Shape &shape : inputs)
    k.inputs.push_back(Buffer(rt::DType::F32, std::move(shape)));
  k.outputs = {Buffer(rt::DType::F32, std::move(output))};
  return k;
}

std::vector<ClassMix> classMixes(const Settings &s, int64_t r, int64_t c) {
  int64_t n = r * c;
  std::vector<ClassMix> mixes;
  ClassMix elementwise{"elementwise", {}};
  for (const char *op : {"add", "mul", "sub"})
    elementwise.kernels.push_back(mixKernel(
        [=] { return f32Call(op, {{n}, {n}}, {n}); }, 1, "elementwise"));
  elementwise.kernels.push_back(mixKernel(
      [=] { return f32Call("add", {{r, c}, {c}}, {r, c}); }, 1, "elementwise"));
  elementwise.kernels.push_back(
      mixKernel([=] { return f32Call("neg", {{n}}, {n}); }, 1, "elementwise"));
  mixes.push_back(std::move(elementwise));

  // Functions a processor evaluates as a series: on a CPU, compute-bound
  // at rates that depend on the function, far below an add's.
  ClassMix transcendental{"transcendental", {}};
  for (const char *op : {"erf", "exp", "tanh", "sigmoid"})
    transcendental.kernels.push_back(mixKernel(
        [=] { return f32Call(op, {{n}}, {n}); }, 1, "transcendental"));
  mixes.push_back(std::move(transcendental));

  ClassMix reduction{"reduction", {}};
  reduction.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("reduce_sum", {{r, c}}, {r});
        k.attrs.set("axes", std::vector<int64_t>{1});
        return k;
      },
      1, "reduction"));
  reduction.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("softmax", {{r, c}}, {r, c});
        k.attrs.set("axis", int64_t(1));
        return k;
      },
      5, "reduction"));
  reduction.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("layer_norm", {{r, c}, {c}, {c}}, {r, c});
        k.attrs.set("axis", int64_t(1));
        k.attrs.set("epsilon", 1e-5);
        return k;
      },
      8, "reduction"));
  mixes.push_back(std::move(reduction));

  ClassMix other{"other", {}};
  other.kernels.push_back(mixKernel(
      [=] {
        KernelCall k = f32Call("transpose", {{r, c}}, {c, r});
        k.attrs.set("permutation", std::vector<int64_t>{1, 0});
        return k;
      },
      0, "other"));
  other.kernels.push_back(
      mixKernel([=] { return f32Call("reshape", {{n}}, {n}); }, 0, "other"));
  mixes.push_back(std::move(other));

  // Linear layers (tokens x hidden, hidden x 4 hidden) and attention
  // (batched, head size 64 or less), against the peak; the tokens scale
  // with the rows.
  int64_t t = std::max<int64_t>(16, s.tokens * r / s.stepRows), h = s.hidden, hd = std::min<int64_t>(64, h / 4),
          heads = t / 128 > 0 ? 32 : 8, seq = std::min<int64_t>(128, t / 4);
  ClassMix matmul{"matmul", {}};
  auto linear = [&](int64_t m, int64_t k, int64_t nn) {
    matmul.kernels.push_back(mixKernel(
        [=] { return f32Call("matmul", {{m, k}, {k, nn}}, {m, nn}); },
        2.0 * static_cast<double>(k), "matmul"));
  };
  linear(t, h, h);
  linear(t, h, 4 * h);
  linear(t, 4 * h, h);
  matmul.kernels.push_back(mixKernel(
      [=] {
        return f32Call("matmul", {{heads, seq, hd}, {heads, hd, seq}},
                       {heads, seq, seq});
      },
      2.0 * static_cast<double>(hd), "matmul"));
  matmul.kernels.push_back(mixKernel(
      [=] {
        return f32Call("matmul", {{heads, seq, seq}, {heads, seq, hd}},
                       {heads, seq, hd});
      },
      2.0 * static_cast<double>(seq), "matmul"));
  mixes.push_back(std::move(matmul));

  int64_t b = s.convBatch, ch = s.convChannels, hw = s.convSize;
  ClassMix conv{"conv", {}};
  conv.kernels.push_back(
      {[=] {
         KernelCall k = f32Call("conv2d", {{b, ch, hw, hw}, {ch, ch, 3, 3}},
                                {b, ch, hw, hw});
         k.attrs.set("strides", std::vector<int64_t>{1, 1});
         k.attrs.set("padding", std::vector<int64_t>{1, 1, 1, 1});
         k.attrs.set("dilations", std::vector<int64_t>{1, 1});
         k.attrs.set("groups", int64_t(1));
         return k;
       },
       {2.0 * b * ch * hw * hw * ch * 9,
        4.0 * (2 * b * ch * hw * hw + ch * ch * 9), "f32", "conv", ""}});
  mixes.push_back(std::move(conv));
  return mixes;
}

std::vector<MixKernel> opKernels(int64_t r, int64_t c) {
  int64_t n = r * c;
  std::vector<MixKernel> kernels;
  // `flops` per output (per input for reductions), as dialects/Cost.cpp
  // counts them.
  auto add = [&](std::function<KernelCall()> make, double flops,
                 const std::string &kernelClass) {
    MixKernel k = mixKernel(make, flops, kernelClass);
    k.work.op = k.make().op;
    kernels.push_back(std::move(k));
  };
  for (const char *op : {"erf", "exp", "tanh", "sigmoid"})
    add([=] { return f32Call(op, {{n}}, {n}); }, 1, "transcendental");
  add(
      [=] {
        KernelCall k{"select", {}, {}, {}};
        k.inputs = {Buffer(rt::DType::Bool, {1, c}), Buffer(rt::DType::F32, {}),
                    Buffer(rt::DType::F32, {r, c})};
        k.outputs = {Buffer(rt::DType::F32, {r, c})};
        return k;
      },
      1, "elementwise");
  add(
      [=] {
        KernelCall k = f32Call("softmax", {{r, c}}, {r, c});
        k.attrs.set("axis", int64_t(1));
        return k;
      },
      5, "reduction");
  add(
      [=] {
        KernelCall k = f32Call("layer_norm", {{r, c}, {c}, {c}}, {r, c});
        k.attrs.set("axis", int64_t(1));
        k.attrs.set("epsilon", 1e-5);
        return k;
      },
      8, "reduction");
  add(
      [=] {
        KernelCall k =
            f32Call("layer_norm_grad", {{r, c}, {c}, {r, c}}, {r, c});
        k.outputs.push_back(Buffer(rt::DType::F32, {c}));
        k.outputs.push_back(Buffer(rt::DType::F32, {c}));
        k.attrs.set("axis", int64_t(1));
        k.attrs.set("epsilon", 1e-5);
        return k;
      },
      8, "reduction");
  auto loss = [=](bool grad) {
    KernelCall k{grad ? "softmax_cross_entropy_grad" : "softmax_cross_entropy",
                 {},
                 {},
                 {}};
    k.inputs = {Buffer(rt::DType::F32, {r, c}), Buffer(rt::DType::I64, {r})};
    if (grad)
      k.inputs.push_back(Buffer(rt::DType::F32, {}));
    k.outputs = {Buffer(rt::DType::F32, grad ? rt::Shape{r, c} : rt::Shape{})};
    return k;
  };
  add([=] { return loss(false); }, 5, "reduction");
  add([=] { return loss(true); }, 5, "reduction");
  // [batch, sequence, heads, 64] to [batch, heads, sequence, 64].
  int64_t seq = std::min<int64_t>(r, 64), heads = std::max<int64_t>(c / 64, 1);
  int64_t batch = std::max<int64_t>(n / (seq * heads * 64), 1);
  add(
      [=] {
        KernelCall k = f32Call("transpose", {{batch, seq, heads, 64}},
                               {batch, heads, seq, 64});
        k.attrs.set("permutation", std::vector<int64_t>{0, 2, 1, 3});
        return k;
      },
      0, "other");
  // A weight gradient's [c, r] to [r, c]: the innermost dimension moves
  // (dialects/Cost.cpp names its kernel apart).
  add(
      [=] {
        KernelCall k = f32Call("transpose", {{c, r}}, {r, c});
        k.attrs.set("permutation", std::vector<int64_t>{1, 0});
        return k;
      },
      0, "other");
  kernels.back().work.op = "transpose_innermost";
  return kernels;
}

std::vector<std::function<KernelCall()>> tinyKernels() {
  return {
      [] { return f32Call("add", {{16}, {16}}, {16}); },
      [] { return f32Call("mul", {{16}, {16}}, {16}); },
      [] { return f32Call("erf", {{16}}, {16}); },
      [] {
        KernelCall k = f32Call("softmax", {{4, 8}}, {4, 8});
        k.attrs.set("axis", int64_t(1));
        return k;
      },
      [] {
        KernelCall k = f32Call("reduce_sum", {{4, 8}}, {4});
        k.attrs.set("axes", std::vector<int64_t>{1});
        return k;
      },
      [] {
        KernelCall k = f32Call("layer_norm", {{4, 8}, {8}, {8}}, {4, 8});
        k.attrs.set("axis", int64_t(1));
        k.attrs.set("epsilon", 1e-5);
        return k;
      },
      [] {
        KernelCall k = f32Call("transpose", {{4, 8}}, {8, 4});
        k.attrs.set("permutation", std::vector<int64_t>{1, 0});
        return k;
      },
      [] { return f32Call("matmul", {{4, 8}, {8, 4}}, {4, 4}); },
  };
}

} // namespace loom::driver::calibrate
