//===- CalibrateProfile.cpp - The profile `loom calibrate` measures -------===//
//
// Each step of `loom calibrate` (CalibrateCommand.cpp): the matmul peak,
// memory bandwidth, the per-call overhead, the efficiencies of the kernel
// classes and the links, each into the hardware profile with what the
// profile's notes say of it.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/CalibrateMeasure.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

using namespace llvm;

namespace loom::driver::calibrate {

std::string formatBytes(int64_t bytes) {
  bool mib = bytes >= (1 << 20);
  int64_t unit = mib ? (1 << 20) : (1 << 10);
  std::string n = bytes % unit == 0
                      ? std::to_string(bytes / unit)
                      : fixed(static_cast<double>(bytes) / unit, 2);
  return n + (mib ? " MiB" : " KiB");
}

std::string fixed(double v, int decimals) {
  std::string s;
  raw_string_ostream os(s);
  os << format("%.*f", decimals, v);
  return s;
}

/// f32 matmul at each size; the best is the peak. Then bf16 and f16 at the
/// best size. On failure, `fail` is the message to report.
bool measureMatmul(const Run &run, cost::HardwareProfile &p, Findings &found,
                   std::string &fail) {
  const Settings &s = run.s;
  std::string error;
  std::vector<double> rates;
  for (int64_t n : s.matmulSizes) {
    rates.push_back(
        matmulRate(run.ranks, run.threads, n, rt::DType::F32, s, error));
    if (!error.empty()) {
      fail = "matmul " + std::to_string(n) + "^3: " + error;
      return false;
    }
  }
  size_t bestIndex =
      std::max_element(rates.begin(), rates.end()) - rates.begin();
  double peak = rates[bestIndex];
  int64_t bestSize = s.matmulSizes[bestIndex];
  std::string sizesNote = "f32 matmul GFLOP/s per rank by size:";
  for (size_t i = 0; i < rates.size(); ++i) {
    std::string size = std::to_string(s.matmulSizes[i]);
    outs() << "  matmul f32  " << size << "^3: " << fixed(rates[i] / 1e9, 2)
           << " GFLOP/s (" << fixed(rates[i] / peak, 2) << " of peak)\n";
    sizesNote += " " + size + "^3 " + fixed(rates[i] / 1e9, 2) + " (" +
                 fixed(rates[i] / peak, 2) + ")";
  }
  p.peakFlops["f32"] = peak;
  for (auto [name, dtype] :
       {std::pair{"bf16", rt::DType::BF16}, std::pair{"f16", rt::DType::F16}}) {
    double rate = matmulRate(run.ranks, run.threads, bestSize, dtype, s, error);
    if (!error.empty()) {
      fail = std::string("matmul ") + name + ": " + error;
      return false;
    }
    p.peakFlops[name] = rate;
    outs() << "  matmul " << name << (std::string(name) == "f16" ? "  " : " ")
           << bestSize << "^3: " << fixed(rate / 1e9, 2) << " GFLOP/s\n";
  }
  found.sizesNote = sizesNote;
  found.bestSize = bestSize;
  return true;
}

/// Memory bandwidth: the fastest add or copy, large or step-sized.
bool measureBandwidth(const Run &run, cost::HardwareProfile &p, Findings &found,
                      std::string &fail) {
  const Settings &s = run.s;
  std::string error;
  auto streamRate = [&](const char *op, int operands, int64_t elems) {
    double t = timeOnEveryRank(
        run.ranks, run.threads,
        [&] {
          KernelCall call{op, {}, {}, {}};
          for (int i = 1; i < operands; ++i)
            call.inputs.push_back(Buffer(rt::DType::F32, {elems}));
          call.outputs = {Buffer(rt::DType::F32, {elems})};
          return call;
        },
        s, error);
    return error.empty() ? 4.0 * operands * static_cast<double>(elems) / t
                         : 0.0;
  };
  int64_t large = s.addElements, small = s.stepRows * s.stepCols;
  double addRate = streamRate("add", 3, large);
  double copyRate = error.empty() ? streamRate("reshape", 2, large) : 0;
  double stepAddRate = error.empty() ? streamRate("add", 3, small) : 0;
  double stepCopyRate = error.empty() ? streamRate("reshape", 2, small) : 0;
  if (!error.empty()) {
    fail = "memory bandwidth: " + error;
    return false;
  }
  p.memoryBandwidth = std::max({addRate, copyRate, stepAddRate, stepCopyRate});
  found.bandwidthNote = formatBytes(4 * large) + " f32 tensors: add " +
                        fixed(addRate / 1e9, 2) + " GB/s, copy " +
                        fixed(copyRate / 1e9, 2) + " GB/s; " +
                        formatBytes(4 * small) + " (step-sized): add " +
                        fixed(stepAddRate / 1e9, 2) + " GB/s, copy " +
                        fixed(stepCopyRate / 1e9, 2) + " GB/s";
  outs() << "  memory bandwidth: " << fixed(p.memoryBandwidth / 1e9, 2)
         << " GB/s per rank (" << found.bandwidthNote << ")\n";
  // The add's rate by its traffic, from a core's caches to memory: where
  // the cost model reads a kernel's bandwidth.
  p.bandwidthBySize.clear();
  found.curveNote.clear();
  for (int64_t elems = 1 << 14; elems <= large; elems *= 4) {
    double rate = streamRate("add", 3, elems);
    if (!error.empty()) {
      fail = "memory bandwidth: " + error;
      return false;
    }
    p.bandwidthBySize.emplace_back(12.0 * static_cast<double>(elems), rate);
    found.curveNote += (found.curveNote.empty() ? "" : ", ") +
                       formatBytes(12 * elems) + " " + fixed(rate / 1e9, 2);
  }
  outs() << "  memory bandwidth by traffic (add, GB/s): " << found.curveNote
         << "\n";
  return true;
}

/// The fixed cost of a kernel call: the median time of tiny kernels of
/// every class, whose roofline time is nothing.
bool measureOverhead(const Run &run, cost::HardwareProfile &p,
                     std::string &fail) {
  std::string error;
  std::vector<double> tiny;
  for (const std::function<KernelCall()> &make : tinyKernels()) {
    tiny.push_back(timeOnEveryRank(run.ranks, run.threads, make, run.s, error));
    if (!error.empty()) {
      fail = "tiny kernels: " + error;
      return false;
    }
  }
  std::nth_element(tiny.begin(), tiny.begin() + tiny.size() / 2, tiny.end());
  p.opOverhead = tiny[tiny.size() / 2];
  outs() << "  kernel call overhead: " << fixed(p.opOverhead * 1e6, 2)
         << " us (median of " << tiny.size() << " tiny kernels)\n";
  return true;
}

/// Efficiencies: the mix's roofline time (at full efficiency) over its
/// measured time less the calls' overhead, per class and per op of
/// opKernels.
bool measureEfficiency(const Run &run, cost::HardwareProfile &p,
                       std::string &fail) {
  const Settings &s = run.s;
  std::string error;
  cost::HardwareProfile roofline = p;
  roofline.opOverhead = 0;
  roofline.efficiency.clear();
  roofline.opEfficiency.clear();
  using Totals = std::map<std::string, std::pair<double, double>>;
  Totals classes, ops; // ideal, measured
  std::map<std::string, std::string> skipped; // op, why
  auto time = [&](const MixKernel &k, const std::string &what, Totals &into,
                  const std::string &key) {
    double t = timeOnEveryRank(run.ranks, run.threads, k.make, s, error);
    if (!error.empty()) {
      fail = what + ": " + error;
      return false;
    }
    auto &[ideal, measured] = into[key];
    measured += std::max(t - p.opOverhead, 0.5 * t);
    ideal += cost::computeSeconds(roofline, k.work);
    return true;
  };
  // Two sizes of step tensors: one that stays in a core's cache and one
  // that does not (a step has both).
  for (int64_t rows : {s.stepRows / 4, s.stepRows}) {
    for (const ClassMix &mix : classMixes(s, rows, s.stepCols))
      for (const MixKernel &k : mix.kernels)
        if (!time(k, mix.kernelClass, classes, mix.kernelClass))
          return false;
    // An op the backend cannot run as called here keeps its class's
    // figure (said below); the classes' kernels every backend has.
    for (const MixKernel &k : opKernels(rows, s.stepCols))
      if (!skipped.count(k.work.op) && !time(k, k.work.op, ops, k.work.op)) {
        skipped[k.work.op] = error;
        ops.erase(k.work.op);
        error.clear();
        fail.clear();
      }
  }
  auto ratio = [](const std::pair<double, double> &t) {
    return std::clamp(t.first / t.second, 1e-3, 1.0);
  };
  for (const auto &[kernelClass, t] : classes)
    p.efficiency[kernelClass] = ratio(t);
  for (const auto &[op, t] : ops)
    p.opEfficiency[op] = ratio(t);
  outs() << "  efficiency:";
  for (const std::string &c : cost::kKernelClasses)
    outs() << " " << c << " " << fixed(p.efficiency[c], 2);
  outs() << "\n  op efficiency:";
  for (const auto &[op, e] : p.opEfficiency)
    outs() << " " << op << " " << fixed(e, 3);
  outs() << "\n";
  for (const auto &[op, why] : skipped)
    outs() << "  op efficiency of " << op << " not measured (its class's "
           << "holds): " << why << "\n";
  return true;
}

/// Links (between two ranks when the profile has one).
bool measureLinks(const Run &run, cost::HardwareProfile &p, Findings &found,
                  std::string &fail) {
  std::string error;
  int linkRanks = std::max(run.ranks, 2);
  std::vector<cost::CollectiveTiming> samples =
      measureCollectives(linkRanks, run.s, error);
  if (!error.empty()) {
    fail = error;
    return false;
  }
  double largest = 0;
  for (const cost::CollectiveTiming &c : samples)
    largest = std::max(largest, c.bytes);
  for (const cost::CollectiveTiming &c : samples) {
    if (c.bytes < largest)
      continue;
    double busBw = cost::busFactor(c.kind, linkRanks) * c.bytes / c.seconds;
    outs() << "  " << cost::collectiveName(c.kind) << " of "
           << formatBytes(static_cast<int64_t>(c.bytes)) << ": "
           << fixed(c.seconds * 1e6, 1) << " us, bus bandwidth "
           << fixed(busBw / 1e9, 2) << " GB/s\n";
  }
  cost::LinkFit fit = cost::fitLink(samples);
  p.intraNode = p.interNode = fit.link;
  outs() << "  link fit: latency " << fixed(fit.link.latency * 1e6, 2)
         << " us per step, bus bandwidth " << fixed(fit.link.bandwidth / 1e9, 2)
         << " GB/s (" << samples.size() << " samples, worst relative error "
         << fixed(100 * fit.maxRelativeError, 0) << "%)\n";
  found.linkRanks = linkRanks;
  found.fit = fit;
  return true;
}

/// The profile's notes: how each of its numbers was measured.
std::vector<std::string> profileNotes(const Run &run, const Findings &found) {
  const Settings &s = run.s;
  int ranks = run.ranks, threads = run.threads, cores = run.cores;
  return {
      "measured by `loom calibrate" + std::string(run.quick ? " --quick" : "") +
          "` on the " + run.s.backend + " backend: " + std::to_string(ranks) +
          " ranks as threads of one process, " + std::to_string(threads) +
          " kernel thread" + (threads == 1 ? "" : "s") + " each, " +
          std::to_string(cores) +
          " cores; kernel rates are per rank with all ranks running at once",
      found.sizesNote,
      "peak_flops.bf16 and f16: the matmul kernel on bf16/f16 operands at " +
          std::to_string(found.bestSize) +
          (run.s.backend == "cpu"
               ? "^3; the cpu backend computes them in f32, converting "
                 "operands and result, so they are below the f32 peak"
               : "^3; the cuda backend runs them on tensor cores (cuBLASLt, "
                 "f32 accumulation)"),
      "memory_bandwidth: the fastest add or copy (reshape) of " +
          found.bandwidthNote,
      "memory_bandwidth_by_size: the add's rate by its traffic (operands and "
      "result; GB/s), which the cost model interpolates: " +
          found.curveNote,
      "op_overhead: the median time of tiny kernels (add, mul, erf, softmax, "
      "reduce_sum, layer_norm, transpose, matmul on a few elements)",
      "efficiency: roofline time over measured time (less op_overhead) of a "
      "mix per class, "
      "on step-sized tensors (" +
          std::to_string(s.stepRows / 4) + " x " + std::to_string(s.stepCols) +
          " and " + std::to_string(s.stepRows) + " x " +
          std::to_string(s.stepCols) +
          " f32): add, bias add, mul, sub, neg (elementwise); erf, exp, tanh, "
          "sigmoid (transcendental); "
          "reduce_sum, softmax, layer_norm (reduction); transpose and a copy "
          "(other); linear-layer and attention matmuls against the peak "
          "(matmul); a 3x3 conv2d (conv)",
      "op_efficiency: the same ratio for one op's kernel on the same sizes, "
      "as a transformer step calls it: erf, exp, tanh, sigmoid; select (a "
      "mask of the last dimension, a scalar, a tensor); softmax, layer_norm "
      "and layer_norm_grad over rows; softmax_cross_entropy and its "
      "gradient; transpose of [batch, sequence, heads, 64] to [batch, heads, "
      "sequence, 64]; transpose_innermost, a 2-D transpose (a transpose that "
      "moves the innermost dimension)",
      "intra_node: threads-communicator collectives over " +
          std::to_string(found.linkRanks) +
          " ranks (all_reduce, all_gather, reduce_scatter, all_to_all), each "
          "call timed on a rank arriving last with the others waiting, from " +
          formatBytes(s.collectiveBytes.front()) + " to " +
          formatBytes(s.collectiveBytes.back()) +
          ", fitted to steps x latency + bus bytes / bandwidth" +
          (found.fit.clamped ? " (the best fit had a term <= 0; it was clamped)"
                             : ""),
      "inter_node: a copy of intra_node; one node, nothing was measured "
      "across nodes",
      "memory_capacity: MemTotal of /proc/meminfo divided by the ranks" +
          std::string(run.s.backend == "cuda"
                          ? " (host memory, not the GPU's: set it to the "
                            "GPU's memory for planning)"
                          : "")};
}

} // namespace loom::driver::calibrate
