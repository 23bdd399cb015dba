//===- CalibrateMeasure.h - What `loom calibrate` measures ------*- C++ -*-===//
//
// The measurements behind `loom calibrate`: kernels of the CPU backend timed
// on N thread ranks at once (from a common start to the slowest rank), the
// mixes of kernels that give each kernel class's efficiency, the tiny
// kernels that give the fixed cost of a call, and the collectives of the
// threads communicator timed on a rank arriving last.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_DRIVER_CALIBRATEMEASURE_H
#define LOOM_COMPILER_DRIVER_CALIBRATEMEASURE_H

#include "compiler/cost/CostModel.h"
#include "compiler/cost/HardwareProfile.h"
#include "runtime/Backend.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::driver::calibrate {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// How long and how big the measurements are.
struct Settings {
  std::vector<int64_t> matmulSizes;
  int64_t addElements;
  /// Elements of the step-sized tensors of the class mixes (rows x cols).
  int64_t stepRows, stepCols;
  /// The linear-layer matmuls of the mix: tokens x in -> out.
  int64_t tokens, hidden;
  int64_t convBatch, convChannels, convSize;
  std::vector<int64_t> collectiveBytes;
  /// Bytes each collective measurement moves in all (calls = this / size,
  /// between 4 and 200).
  int64_t collectiveVolume;
  /// Each kernel measurement: the best of `trials` batches of calls, each
  /// batch lasting at least `batchSeconds`.
  double batchSeconds;
  int trials;
  /// The backend measured: "cpu", or "cuda" (rank r on device r modulo the
  /// devices, operands in device memory).
  std::string backend = "cpu";
};

/// The settings of a full or a --quick calibration.
Settings settings(bool quick);

/// A buffer for a kernel operand, filled with small values.
struct Buffer {
  rt::DType dtype;
  rt::Shape shape;
  std::vector<unsigned char> bytes;

  Buffer(rt::DType dtype, rt::Shape shape) : dtype(dtype), shape(shape) {
    int64_t n = rt::numElements(shape);
    bytes.resize(n * rt::dtypeSize(dtype));
    // Floats in [0.25, 1.23]; integers (labels) in [0, 7); bools mixed.
    for (int64_t i = 0; i < n; ++i) {
      float v = 0.25f + 0.001f * static_cast<float>(i % 977);
      switch (dtype) {
      case rt::DType::F32:
        reinterpret_cast<float *>(bytes.data())[i] = v;
        break;
      case rt::DType::BF16:
        reinterpret_cast<uint16_t *>(bytes.data())[i] = rt::floatToBf16(v);
        break;
      case rt::DType::F16:
        reinterpret_cast<uint16_t *>(bytes.data())[i] = rt::floatToHalf(v);
        break;
      case rt::DType::I32:
        reinterpret_cast<int32_t *>(bytes.data())[i] = int32_t(i % 7);
        break;
      case rt::DType::I64:
        reinterpret_cast<int64_t *>(bytes.data())[i] = i % 7;
        break;
      case rt::DType::Bool:
        bytes[i] = i % 3 == 0;
        break;
      }
    }
  }
  rt::TensorView view() { return {dtype, shape, bytes.data()}; }
};

/// One kernel call, ready to repeat.
struct KernelCall {
  std::string op;
  rt::Attrs attrs;
  std::vector<Buffer> inputs, outputs;
};

/// One kernel of a class's mix, and its roofline work.
struct MixKernel {
  std::function<KernelCall()> make;
  cost::OpWork work;
};

/// The kernels whose measured time against their roofline gives a class's
/// efficiency.
struct ClassMix {
  std::string kernelClass;
  std::vector<MixKernel> kernels;
};

/// Seconds per call of the kernel call `make` builds, on `ranks` threads at
/// once, each with its own backend (`s.backend`; a CPU one uses
/// `threadsPerRank` threads; see the definition). Sets `error` if the backend
/// rejects the call.
double timeOnEveryRank(int ranks, int threadsPerRank,
                       const std::function<KernelCall()> &make,
                       const Settings &s, std::string &error);

/// Rate (FLOP/s) of an n^3 matmul in `dtype`.
double matmulRate(int ranks, int threads, int64_t n, rt::DType dtype,
                  const Settings &s, std::string &error);

/// A call of `op` on f32 buffers of the given shapes.
KernelCall f32Call(std::string op, std::vector<rt::Shape> inputs,
                   rt::Shape output);

/// The class mixes, on r x c tensors (the size of a step's activations).
std::vector<ClassMix> classMixes(const Settings &s, int64_t r, int64_t c);

/// The ops whose kernels a profile gives efficiencies of their own
/// (op_efficiency), each as a transformer step calls it, on r x c tensors:
/// the functions of the transcendental class one by one, the attention
/// mask's select, softmax and layer norm and their gradients, the loss, a
/// head permutation and a 2-D transpose. Each kernel's work names its
/// kernel as dialects/Cost.cpp does (OpWork::kernel).
std::vector<MixKernel> opKernels(int64_t r, int64_t c);

/// Kernels of every class on a few elements: their time is the fixed cost
/// of a call.
std::vector<std::function<KernelCall()>> tinyKernels();

/// The threads communicator's collectives over `ranks` ranks at each of
/// `s.collectiveBytes` (see the definition).
std::vector<cost::CollectiveTiming>
measureCollectives(int ranks, const Settings &s, std::string &error);

// The steps of `loom calibrate` (CalibrateProfile.cpp).

/// E.g. "256 KiB", "16 MiB", "15.99 MiB".
std::string formatBytes(int64_t bytes);
/// `v` with `decimals` decimals.
std::string fixed(double v, int decimals);

/// What every measurement shares: the ranks, each rank's kernel threads,
/// the machine's cores and the sizes and timings of the run.
struct Run {
  int ranks = 1, threads = 1, cores = 1;
  Settings s;
  /// --quick: the short run's sizes.
  bool quick = false;
};

/// What the measurements found that the profile's notes tell.
struct Findings {
  std::string sizesNote, bandwidthNote, curveNote;
  int64_t bestSize = 0;
  int linkRanks = 0;
  cost::LinkFit fit;
};

/// f32 matmul at each size; the best is the peak. Then bf16 and f16 at the
/// best size. On failure, `fail` is the message to report.
bool measureMatmul(const Run &run, cost::HardwareProfile &p, Findings &found,
                   std::string &fail);
/// Memory bandwidth: the fastest add or copy, large or step-sized.
bool measureBandwidth(const Run &run, cost::HardwareProfile &p, Findings &found,
                      std::string &fail);
/// The fixed cost of a kernel call: the median time of tiny kernels of
/// every class, whose roofline time is nothing.
bool measureOverhead(const Run &run, cost::HardwareProfile &p,
                     std::string &fail);
/// Efficiencies: the mix's roofline time (at full efficiency) over its
/// measured time less the calls' overhead.
bool measureEfficiency(const Run &run, cost::HardwareProfile &p,
                       std::string &fail);
/// Links (between two ranks when the profile has one).
bool measureLinks(const Run &run, cost::HardwareProfile &p, Findings &found,
                  std::string &fail);
/// The profile's notes: how each of its numbers was measured.
std::vector<std::string> profileNotes(const Run &run, const Findings &found);

} // namespace loom::driver::calibrate

#endif // LOOM_COMPILER_DRIVER_CALIBRATEMEASURE_H
