//===- CompileOptions.h - What one compile is asked to do -------*- C++ -*-===//
//
// The options of a compile as values: the model and its bindings, the
// training step, the precision, and the parallel configuration. The driver
// fills them from its flags once (parseCompileOptions checks them, with the
// flags' names in its messages) and hands them to the compiler, which
// reads them and never writes them back. Where a search chooses part of
// the parallel configuration (--stages auto, --mode auto's ZeRO level and
// recompute), it returns a new ParallelConfig value.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PIPELINE_COMPILEOPTIONS_H
#define LOOM_COMPILER_PIPELINE_COMPILEOPTIONS_H

#include "dialects/LoomEnums.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::pipeline {

/// How the ops are sharded over the mesh: data (the batch over every
/// device), semi (the user's strategies completed by propagation) or auto
/// (the cost-model search).
enum class ShardingMode { Data, Semi, Auto };
/// The pipeline's schedule of the micro-batches: the dialect's enum (the
/// `schedule` of loom.pipeline), its spellings those of --schedule.
using Schedule = ::loom::PipelineSchedule;
/// The forward and backward's compute type (f32 master weights under the
/// others).
enum class Precision { F32, BF16, F16 };
enum class Loss { CrossEntropy, Mse };
enum class Optimizer { Sgd, Momentum, Adam, AdamW };
enum class LrSchedule { Constant, Cosine };
/// Initial parameter values: the model's initializers, or drawn by the
/// runtime from a seed.
enum class Init { Onnx, Seeded };

/// The spellings the flags and plans use ("1f1b", "bf16", "adamw", ...).
llvm::StringRef toString(ShardingMode mode);
llvm::StringRef toString(Schedule schedule);
llvm::StringRef toString(Precision precision);
llvm::StringRef toString(Loss loss);
llvm::StringRef toString(Optimizer optimizer);
llvm::StringRef toString(LrSchedule schedule);

/// The model file and how its symbolic dimensions are bound.
struct ModelInput {
  std::string path;
  /// Dimension 0 of every input whose batch is symbolic (--batch).
  std::optional<int64_t> batch;
  std::map<std::string, int64_t> dims;
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Glob patterns of initializers kept constant (--freeze).
  std::vector<std::string> freeze;
  /// Training-mode batch normalization takes its statistics over the
  /// global batch (--sync-batchnorm), not per data-parallel replica.
  bool syncBatchNorm = false;
  /// The groups of the batch with statistics of their own (the
  /// data-parallel replicas; 1 with syncBatchNorm): set by the compile from
  /// its mesh (ImportOptions::batchNormGroups).
  int64_t batchNormGroups = 1;
};

/// The training step (--train and its flags).
struct TrainingOptions {
  bool enabled = false;
  Loss loss = Loss::CrossEntropy;
  Optimizer optimizer = Optimizer::AdamW;
  double lr = 1e-3, momentum = 0.9;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weightDecay = 0.0;
  int64_t ignoreIndex = -100;
  /// The static loss scale, when one was given.
  std::optional<double> lossScale;
  LrSchedule lrSchedule = LrSchedule::Constant;
  int64_t warmupSteps = 0, totalSteps = 1000;
  double minLr = 0.0;
};

/// How the step is spread over devices: what --mesh, --micro-batches,
/// --schedule, --virtual-stages, --stage-meshes, --zero and --recompute
/// say, or what the planner chose for them.
struct ParallelConfig {
  /// The mesh as named axes, "dp=2,tp=4"; pp=P first pipelines the step
  /// over P stages. Empty: one device (or stageMeshes).
  std::string mesh;
  /// Stages on submeshes of their own, "dp=4/tp=2": replaces mesh.
  std::string stageMeshes;
  int64_t microBatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  /// Chunks per stage under Schedule::Interleaved.
  int64_t virtualStages = 2;
  /// Whether --virtual-stages was given (it needs the interleaved
  /// schedule).
  bool virtualStagesGiven = false;
  /// The ZeRO level, when given; unset: 0, or under --mode auto the
  /// search's choice.
  std::optional<int> zero;
  /// What to recompute, when given: "layers", ONNX node patterns, or ""
  /// for nothing; unset: nothing, or under --mode auto the search's choice.
  std::optional<std::string> recompute;
  /// The layers' stages when a search or an earlier compile fixed them.
  std::optional<llvm::StringMap<int64_t>> layerStages;
};

struct CompileOptions {
  ModelInput model;
  TrainingOptions training;
  Precision precision = Precision::F32;
  ParallelConfig parallel;
  /// The sharding mode; unset: semi with a strategy file, else data.
  std::optional<ShardingMode> mode;
  /// The hardware profile: a built-in name or a profile JSON file.
  std::string cluster = "8xH100-80GB";
  /// Bytes per device (0: the profile's).
  int64_t memoryLimit = 0;
  /// --stages auto: the planner chooses stages and micro-batches.
  bool searchStages = false;
  /// Whether --schedule and --micro-batches were given (--stages auto
  /// then keeps them).
  bool scheduleGiven = false, microBatchesGiven = false;
  std::string strategyFile, saveStrategyFile;
  /// Where to write the compiled program as MLIR (empty: nowhere).
  std::string emitMlir;
  /// Fold transposes and bias epilogues into GEMMs.
  bool fuse = true;
  /// Bytes per device of a data-parallel gradient bucket (--bucket-mb;
  /// 0: one all-reduce per gradient). 25 MiB, DDP's default.
  int64_t bucketBytes = 25 << 20;
  Init init = Init::Onnx;
  uint64_t seed = 0;
  /// A simulation: shapes only, no plan file needed.
  bool simulate = false;

  ShardingMode shardingMode() const {
    return mode ? *mode
                : (strategyFile.empty() ? ShardingMode::Data
                                        : ShardingMode::Semi);
  }
};

/// The enums from their flag spellings; an error naming the flag and its
/// values otherwise.
std::optional<ShardingMode> parseShardingMode(llvm::StringRef text,
                                              std::string &error);
std::optional<Schedule> parseSchedule(llvm::StringRef text, std::string &error);
std::optional<Precision> parsePrecision(llvm::StringRef text,
                                        std::string &error);
std::optional<Loss> parseLoss(llvm::StringRef text, std::string &error);
std::optional<Optimizer> parseOptimizer(llvm::StringRef text,
                                        std::string &error);
std::optional<LrSchedule> parseLrSchedule(llvm::StringRef text,
                                          std::string &error);
std::optional<Init> parseInit(llvm::StringRef text, std::string &error);
/// --zero: "0" to "3".
std::optional<int> parseZero(llvm::StringRef text, std::string &error);
/// --bucket-mb: MiB (not negative, fractions allowed) as bytes.
std::optional<int64_t> parseBucketMb(double megabytes, std::string &error);

/// The pipeline stages of a mesh: its pp axis's size, 1 without one.
int64_t pipelineStages(llvm::StringRef mesh);

/// Parses "NAME=VALUE" into its two halves.
bool splitAssignment(llvm::StringRef text, llvm::StringRef &name,
                     llvm::StringRef &value);

} // namespace loom::pipeline

#endif // LOOM_COMPILER_PIPELINE_COMPILEOPTIONS_H
