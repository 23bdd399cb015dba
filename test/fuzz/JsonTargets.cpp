//===- JsonTargets.cpp - Fuzzing the strategy, profile, manifest readers --===//
//
// The readers of Loom's JSON files, fed JSON-aware mutations of their
// seeds: strategy files (parseStrategyFile, then applyStrategies to the
// bundled GPT's training step on a dp=2 x tp=2 mesh), hardware profiles
// (parseProfile, with a round trip through toJson) and checkpoint manifests
// (openCheckpoint on a checkpoint root whose `latest` names a step
// directory holding the input as manifest.json).
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "common/layout/Mesh.h"
#include "compiler/Registration.h"
#include "compiler/cost/HardwareProfile.h"
#include "compiler/onnx/OnnxImporter.h"
#include "passes/sharding/StrategyFile.h"
#include "runtime/io/CheckpointStore.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace fs = std::filesystem;

namespace loom::fuzz {

namespace {

/// JSON-aware mutation of a seed, spliced with another.
std::string mutateJsonSeed(const std::vector<Seed> &corpus, Rng &rng) {
  return mutateJson(rng.pick(corpus).bytes, rng, rng.pick(corpus).bytes);
}

/// The seeds in test/fuzz/corpus/<reader>.
std::vector<Seed> corpusSeeds(const Config &config, const std::string &reader) {
  return seedsFromDirectory(config.sourceDir + "/test/fuzz/corpus/" + reader);
}

/// "" if `message` starts with `name` and ": ", else the broken promise.
std::string namesFile(const std::string &message, const std::string &name) {
  return message.rfind(name + ": ", 0) == 0
             ? ""
             : "the message does not start with the file's name";
}

//===----------------------------------------------------------------------===//
// Strategy files
//===----------------------------------------------------------------------===//

class StrategyTarget : public Target {
public:
  explicit StrategyTarget(const Config &config)
      : name(config.workDir + "/fuzz.strategy.json") {}

  std::vector<Seed> seeds(const Config &config) override {
    std::vector<Seed> out = corpusSeeds(config, "strategy");
    for (const char *file : {"gpt_megatron.json", "llama_megatron.json"})
      out.push_back(
          {file, readFileOrEmpty(config.sourceDir + "/models/" + file)});
    // A file `loom compile --save-strategy` wrote, when the fixture made
    // one: every key a saved file has (index, partial).
    std::string saved =
        readFileOrEmpty(config.planSeedDir + "/gpt-dp2tp2.strategy.json");
    if (!saved.empty())
      out.push_back({"gpt-dp2tp2.strategy.json", saved});

    registerLoomDialects(registry);
    registerLoomPasses();
    context = std::make_unique<mlir::MLIRContext>(
        registry, mlir::MLIRContext::Threading::DISABLED);
    onnx_import::ImportOptions options;
    options.batch = 4;
    options.withWeights = false;
    onnx_import::ImportResult r = onnx_import::importOnnxFile(
        config.sourceDir + "/models/gpt.onnx", options, *context);
    // The strategies apply to a training step, as `loom compile --train`
    // applies them (recompute and stage entries need one).
    mlir::PassManager pm(context.get());
    if (r.ok() &&
        succeeded(mlir::parsePassPipeline(
            "loom-build-training-graph{optimizer=sgd}", pm)) &&
        succeeded(pm.run(*r.module)))
      module = std::move(r.module);
    std::string error;
    mesh = layout::Mesh::create({{"dp", 2}, {"tp", 2}}, error);
    return module && mesh ? out : std::vector<Seed>{};
  }

  std::vector<std::string> stages() const override {
    return {"json", "entries", "apply"};
  }

  std::string mutate(const std::vector<Seed> &corpus, Rng &rng) override {
    return mutateJsonSeed(corpus, rng);
  }

  Outcome run(const std::string &input) override {
    Outcome o;
    std::string error;
    std::optional<sharding::StrategyFile> file =
        sharding::parseStrategyFile(input, name, error);
    if (!file) {
      o.message = error;
      o.stage = error.find(": not valid JSON") != std::string::npos ||
                        error.find(": not a strategy file") != std::string::npos
                    ? "json"
                    : "entries";
      o.violation = namesFile(error, name);
      return o;
    }
    // Applied to a copy of the model: each input starts from the same.
    mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
    auto func = copy->lookupSymbol<mlir::func::FuncOp>("main");
    if (!sharding::applyStrategies(func, *file, name, *mesh, error)) {
      o.message = error;
      o.stage = "apply";
      o.violation = namesFile(error, name);
      return o;
    }
    o.accepted = true;
    return o;
  }

private:
  std::string name;
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<layout::Mesh> mesh;
};

//===----------------------------------------------------------------------===//
// Hardware profiles
//===----------------------------------------------------------------------===//

class ProfileTarget : public Target {
public:
  explicit ProfileTarget(const Config &config)
      : name(config.workDir + "/fuzz.profile.json") {}

  std::vector<Seed> seeds(const Config &config) override {
    std::vector<Seed> out = corpusSeeds(config, "profile");
    for (const std::string &builtin : cost::builtinProfileNames())
      out.push_back({builtin, readFileOrEmpty(config.sourceDir + "/profiles/" +
                                              builtin + ".json")});
    return out;
  }

  std::vector<std::string> stages() const override {
    return {"json", "fields"};
  }

  std::string mutate(const std::vector<Seed> &corpus, Rng &rng) override {
    return mutateJsonSeed(corpus, rng);
  }

  Outcome run(const std::string &input) override {
    Outcome o;
    std::string error;
    std::optional<cost::HardwareProfile> profile =
        cost::parseProfile(input, name, error);
    if (!profile) {
      o.message = error;
      o.stage = error.find("JSON") != std::string::npos ||
                        error.find("nested deeper") != std::string::npos
                    ? "json"
                    : "fields";
      o.violation = namesFile(error, name);
      return o;
    }
    o.accepted = true;
    // What parseProfile accepts is valid, writes out and reads back equal,
    // and gives the cost model finite positive figures.
    if (std::string why = cost::validateProfile(*profile); !why.empty())
      o.violation = "an accepted profile does not validate: " + why;
    std::optional<cost::HardwareProfile> back =
        cost::parseProfile(profile->toJson(), name, error);
    if (!back)
      o.violation = "the profile's own JSON does not read back: " + error;
    else if (*back != *profile)
      o.violation = "the profile's own JSON reads back different";
    for (const std::string &dtype : cost::kProfileDtypes)
      if (!(profile->peak(dtype) > 0) || !std::isfinite(profile->peak(dtype)))
        o.violation = "an accepted profile has a peak of " +
                      std::to_string(profile->peak(dtype)) + " for " + dtype;
    for (const std::string &kernel : cost::kKernelClasses) {
      double e = profile->efficiencyOf(kernel);
      if (!(e > 0 && e <= 1))
        o.violation = "an accepted profile has an efficiency of " +
                      std::to_string(e) + " for " + kernel;
    }
    return o;
  }

private:
  std::string name;
};

//===----------------------------------------------------------------------===//
// Checkpoint manifests
//===----------------------------------------------------------------------===//

class CheckpointTarget : public Target {
public:
  explicit CheckpointTarget(const Config &config)
      : root(config.workDir + "/checkpoint"),
        manifest(root + "/step-00000001/manifest.json") {}

  std::vector<Seed> seeds(const Config &config) override {
    std::error_code ec;
    fs::remove_all(root, ec);
    // A real sharded save: its block files stay beside every mutated
    // manifest, so that accepted ones read real data (readCheckpointBlock).
    std::vector<float> grid(24), bias(6);
    for (int i = 0; i < 24; ++i)
      grid[i] = static_cast<float>(i);
    rt::CheckpointWriter out;
    out.prepare(root, 1);
    out.join(root, 1, 0);
    for (int64_t r : {0, 2})
      out.addShard("w", "parameter", {4, 6}, {r, 0},
                   {rt::DType::F32, {2, 6}, grid.data() + r * 6});
    out.addShard("b", "parameter", {6}, {0}, {rt::DType::F32, {6}, bias.data()});
    out.finish();
    std::vector<Seed> seeds = corpusSeeds(config, "checkpoint");
    if (out.commitRanks(0, 1).empty()) {
      fs::create_directories(root + "/step-00000001", ec);
      fs::create_directory_symlink("step-00000001", root + "/latest", ec);
    } else {
      std::ifstream in(manifest, std::ios::binary);
      seeds.push_back({"saved manifest.json",
                       std::string(std::istreambuf_iterator<char>(in), {})});
    }
    return seeds;
  }

  std::vector<std::string> stages() const override {
    return {"json", "manifest"};
  }

  std::string mutate(const std::vector<Seed> &corpus, Rng &rng) override {
    return mutateJsonSeed(corpus, rng);
  }

  Outcome run(const std::string &input) override {
    Outcome o;
    {
      std::ofstream out(manifest, std::ios::binary | std::ios::trunc);
      out.write(input.data(), static_cast<std::streamsize>(input.size()));
      if (!out) {
        o.violation = "cannot write " + manifest;
        return o;
      }
    }
    std::string error;
    std::optional<rt::CheckpointManifest> m = rt::openCheckpoint(root, error);
    if (!m) {
      o.message = error;
      o.stage = error.find("not valid JSON") != std::string::npos ||
                        error.find("not a JSON object") != std::string::npos
                    ? "json"
                    : "manifest";
      o.violation = namesFile(error, manifest);
      return o;
    }
    o.accepted = true;
    if (m->step < 0)
      o.violation = "an accepted manifest has step " + std::to_string(m->step);
    // Every tensor whole, and its middle third: refused with a message or
    // read.
    for (const rt::CheckpointEntry &e : m->tensors) {
      std::vector<int64_t> offsets(e.shape.size());
      rt::Shape middle(e.shape.size());
      for (size_t d = 0; d < e.shape.size(); ++d) {
        offsets[d] = e.shape[d] / 3;
        middle[d] = e.shape[d] - 2 * offsets[d];
      }
      for (auto [at, shape] : {std::pair{std::vector<int64_t>(e.shape.size()),
                                         e.shape},
                               std::pair{offsets, middle}}) {
        std::string why;
        if (!rt::readCheckpointBlock(*m, e, at, shape, why) && why.empty())
          o.violation = "a block of '" + e.name + "' refused without a message";
      }
    }
    return o;
  }

private:
  std::string root, manifest;
};

} // namespace

std::unique_ptr<Target> makeStrategyTarget(const Config &config) {
  return std::make_unique<StrategyTarget>(config);
}

std::unique_ptr<Target> makeProfileTarget(const Config &config) {
  return std::make_unique<ProfileTarget>(config);
}

std::unique_ptr<Target> makeCheckpointTarget(const Config &config) {
  return std::make_unique<CheckpointTarget>(config);
}

} // namespace loom::fuzz
