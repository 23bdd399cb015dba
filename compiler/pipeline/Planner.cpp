//===- Planner.cpp - The searches over whole compiles ---------------------===//
//
// The auto-parallel planner's outer loops, each over parallel
// configurations as values:
//
//   chooseStages          --stages auto: costs every pipeline shape of the
//                         mesh (stages, micro-batches, schedule; an attempt
//                         that stops after the stage split) and returns the
//                         fastest that fits, or stages on submeshes of
//                         different sizes when those are faster;
//   compileWithinMemory   compiles a configuration and, when --mode auto's
//                         plan exceeds the memory limit, takes the next
//                         pipeline shape or searches again under a limit
//                         lowered by the excess.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/CompileSession.h"
#include "compiler/pipeline/Compiler.h"

#include "compiler/analysis/StepCost.h"

#include <algorithm>
#include <map>

using namespace llvm;

namespace loom::pipeline {

std::string StageCandidate::describe() const {
  return schedule == Schedule::Interleaved
             ? ", interleaved (" + std::to_string(virtualStages) +
                   " virtual stages)"
             : "";
}

ParallelConfig StageCandidate::config(const ParallelConfig &base) const {
  ParallelConfig config = base;
  config.mesh = mesh;
  config.microBatches = microBatches;
  config.schedule = schedule;
  config.virtualStages = virtualStages;
  return config;
}

namespace {

/// Stages on submeshes of different sizes that --stages auto may compile:
/// the submeshes (as --stage-meshes takes them), each layer's stage, and
/// the pipeline they were costed for.
struct MixedSubmeshes {
  std::string stageMeshes;
  StringMap<int64_t> layerStages;
  int64_t microBatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  double seconds = 0;
};

/// The mixed split of one group of candidates (one schedule and
/// micro-batch count), reported on `log`; nullopt when there is none or
/// its stages are all of one size.
std::optional<MixedSubmeshes>
mixedSplit(const std::vector<const StageCandidate *> &group, Schedule schedule,
           int64_t microBatches, raw_ostream &log) {
  std::vector<search::SubmeshShape> shapes;
  const StageCandidate *uniform = nullptr;
  for (const StageCandidate *c : group) {
    StringRef submesh = c->mesh;
    if (c->stages > 1)
      submesh = submesh.split(',').second;
    shapes.push_back(
        {submesh.str(), c->stageDevices, c->layers, c->sendSeconds});
    if (c->fits && (!uniform || c->seconds < uniform->seconds))
      uniform = c;
  }
  search::SubmeshSplitOptions options;
  options.devices = group.front()->stageDevices * group.front()->stages;
  options.microBatches = microBatches;
  options.schedule = toString(schedule).str();
  options.memoryLimit = group.front()->memoryLimit;
  std::optional<search::SubmeshSplit> mixed =
      search::splitOnSubmeshes(shapes, options);
  if (!mixed)
    return std::nullopt;
  bool equal =
      std::all_of(mixed->shapes.begin(), mixed->shapes.end(),
                  [&](size_t k) { return k == mixed->shapes.front(); });
  log << "loom: --stages auto: submeshes of different sizes, " << microBatches
      << " micro-batch" << (microBatches == 1 ? "" : "es") << ": ";
  if (equal) {
    log << "the best split has equal stages\n";
    return std::nullopt;
  }
  const std::vector<search::LayerCost> &layers = shapes.front().layers;
  log << "predicted step " << explain::formatSeconds(mixed->seconds) << " with "
      << mixed->starts.size() << " stages (";
  for (size_t s = 0; s < mixed->starts.size(); ++s) {
    size_t end = mixed->end(s, layers.size());
    log << (s ? "; " : "") << layers[mixed->starts[s]].name
        << (end - mixed->starts[s] > 1 ? " to " + layers[end - 1].name
                                       : std::string())
        << " on " << shapes[mixed->shapes[s]].name;
  }
  log << ")";
  if (uniform)
    log << ", against " << explain::formatSeconds(uniform->seconds)
        << " on equal stages (" << uniform->mesh << ")";
  log << "\n";
  MixedSubmeshes out;
  for (size_t s = 0; s < mixed->starts.size(); ++s) {
    out.stageMeshes += (s ? "/" : "") + shapes[mixed->shapes[s]].name;
    for (size_t i = mixed->starts[s]; i < mixed->end(s, layers.size()); ++i)
      out.layerStages[layers[i].name] = static_cast<int64_t>(s);
  }
  out.microBatches = microBatches;
  out.schedule = schedule;
  out.seconds = mixed->seconds;
  return out;
}

/// Alpa's choice of submeshes: per micro-batch count, the 1F1B (or GPipe)
/// shapes costed are the submesh sizes stages may take, and
/// search::splitOnSubmeshes splits the layers over stages of mixed sizes
/// (every stage within the memory limit). This reports each count's best
/// split against the equal stages, and returns the fastest split whose
/// stages are not all of one size.
std::optional<MixedSubmeshes>
chooseMixedSubmeshes(const std::vector<StageCandidate> &candidates,
                     raw_ostream &log) {
  std::optional<MixedSubmeshes> best;
  std::map<std::pair<Schedule, int64_t>, std::vector<const StageCandidate *>>
      groups;
  for (const StageCandidate &c : candidates)
    if (c.why.empty() && c.schedule != Schedule::Interleaved &&
        !c.layers.empty())
      groups[{c.schedule, c.microBatches}].push_back(&c);
  for (const auto &[key, group] : groups) {
    if (group.size() < 2)
      continue;
    std::optional<MixedSubmeshes> mixed =
        mixedSplit(group, key.first, key.second, log);
    if (mixed && (!best || best->seconds > mixed->seconds))
      best = std::move(mixed);
  }
  return best;
}

/// The micro-batch counts --stages auto tries for P stages, each with
/// `ways` of the first axis's devices: one row per rank of that axis, then
/// 2 and 4 (more micro-batches shrink the bubble, fewer the per-op
/// overheads), at least as many as stages.
std::vector<int64_t> microBatchCounts(int64_t p, int64_t ways, int64_t batch,
                                      std::optional<int64_t> fixed) {
  std::vector<int64_t> ms;
  if (fixed) {
    ms.push_back(*fixed);
  } else if (p == 1) {
    ms.push_back(1);
  } else if (batch % ways == 0) {
    int64_t most = batch / ways;
    for (int64_t m = most; m >= p && ms.size() < 3; m /= 2) {
      ms.push_back(m);
      if (m % 2)
        break;
    }
  }
  return ms;
}

} // namespace

/// `--stages auto`: costs every pipeline shape of the mesh (P stages
/// dividing its first axis, M micro-batches) and sets `chosen` to the
/// fastest that fits; 0, or 1 after an error.
int CompileSession::chooseStages(ParallelConfig &chosen) {
  const ParallelConfig &given = options.parallel;
  if (options.mode != ShardingMode::Auto || !options.training.enabled ||
      given.mesh.empty())
    return fail("--stages auto needs --mode auto, --train and --mesh");
  if (StringRef(given.mesh).contains("pp="))
    return fail("--stages auto chooses the pipeline axis: leave pp out of "
                "--mesh");
  if (!options.model.batch)
    return fail("--stages auto needs --batch N");
  auto [first, rest] = StringRef(given.mesh).split(',');
  StringRef axis, sizeText;
  int64_t size = 0;
  if (!splitAssignment(first, axis, sizeText) ||
      sizeText.getAsInteger(10, size) || size < 1)
    return fail("--mesh expects named axes like dp=2,tp=4, got '" + given.mesh +
                "'");
  const int64_t batch = *options.model.batch;
  // The schedules tried: the one given, else 1F1B (which holds fewer
  // micro-batches than GPipe at the same bubble) and interleaved 1F1B
  // (a smaller bubble for more sends and memory).
  std::vector<std::pair<Schedule, int64_t>> schedules;
  if (options.scheduleGiven)
    schedules.push_back({given.schedule, given.virtualStages});
  else if (given.virtualStagesGiven)
    schedules.push_back({Schedule::Interleaved, given.virtualStages});
  else
    schedules = {{Schedule::OneFOneB, 1},
                 {Schedule::Interleaved, given.virtualStages}};
  std::vector<StageCandidate> candidates;
  for (int64_t p = 1; p <= size; ++p) {
    if (size % p != 0)
      continue;
    int64_t ways = size / p; // the first axis's share of each stage
    std::string mesh = given.mesh;
    if (p > 1)
      mesh = "pp=" + std::to_string(p) + "," + axis.str() + "=" +
             std::to_string(ways) + (rest.empty() ? "" : "," + rest.str());
    std::optional<int64_t> fixed;
    if (options.microBatchesGiven)
      fixed = given.microBatches;
    for (int64_t m : microBatchCounts(p, ways, batch, fixed))
      for (const auto &[schedule, chunks] : schedules) {
        if (batch % m != 0 ||
            (schedule == Schedule::Interleaved && (p == 1 || m % p != 0)))
          continue;
        StageCandidate c;
        c.stages = p;
        c.microBatches = m;
        c.mesh = mesh;
        c.schedule = schedule;
        c.virtualStages = chunks;
        candidates.push_back(c);
      }
  }
  const StageCandidate *best = nullptr;
  for (StageCandidate &c : candidates) {
    Attempt attempt;
    attempt.parallel = c.config(given);
    attempt.searchLimit = options.memoryLimit;
    attempt.evaluating = &c;
    earlier.reset();
    int code = 0;
    std::optional<plan::Plan> none = buildPlan(attempt, code);
    if (code != kEvaluated)
      c.why = code ? "no plan: " + error : "not costed";
    log << "loom: --stages auto: " << c.mesh << ", " << c.microBatches
        << " micro-batch" << (c.microBatches == 1 ? "" : "es") << c.describe()
        << ": ";
    if (!c.why.empty()) {
      log << "not possible (" << c.why << ")\n";
      continue;
    }
    log << "predicted step " << explain::formatSeconds(c.seconds)
        << ", largest stage " << sharding::formatBytes(c.memoryBytes)
        << (c.fits ? "" : " (over the memory limit)") << "\n";
    if (!best || (c.fits && !best->fits) ||
        (c.fits == best->fits && c.seconds < best->seconds))
      best = &c;
  }
  if (!best)
    return fail(modelPath() +
                ": --stages auto found no pipeline shape of --mesh " +
                given.mesh + " that can be costed");
  std::optional<MixedSubmeshes> mixed = chooseMixedSubmeshes(candidates, log);
  for (const StageCandidate &c : candidates)
    if (c.why.empty())
      rankedShapes.push_back(c);
  std::stable_sort(rankedShapes.begin(), rankedShapes.end(),
                   [](const StageCandidate &a, const StageCandidate &b) {
                     if (a.fits != b.fits)
                       return a.fits;
                     return a.seconds < b.seconds;
                   });
  earlier.reset();
  if (mixed && (!best->fits || mixed->seconds < best->seconds)) {
    // Compiled as --stage-meshes would, with the layers where the split
    // put them; the equal stages stay ranked for the memory fallback.
    log << "loom: --stages auto chose submeshes of different sizes, "
        << mixed->stageMeshes << ", with " << mixed->microBatches
        << " micro-batch" << (mixed->microBatches == 1 ? "" : "es")
        << " (predicted " << explain::formatSeconds(mixed->seconds)
        << ", against " << explain::formatSeconds(best->seconds) << " for "
        << best->mesh << best->describe() << ")\n";
    chosen = given;
    chosen.stageMeshes = mixed->stageMeshes;
    chosen.layerStages = std::move(mixed->layerStages);
    chosen.mesh = "";
    chosen.microBatches = mixed->microBatches;
    chosen.schedule = mixed->schedule;
    chosen.virtualStages = 1;
    return 0;
  }
  log << "loom: --stages auto chose " << best->mesh << " with "
      << best->microBatches << " micro-batch"
      << (best->microBatches == 1 ? "" : "es") << best->describe()
      << (best->fits ? ""
                     : "; none fits the memory limit by the split's "
                       "count: the fastest")
      << "\n";
  chosen = best->config(given);
  return 0;
}

/// ": at its peak ..." (explain::describeArenaPeak), for an error.
static std::string peakClause(const plan::Plan &plan) {
  std::string peak = explain::describeArenaPeak(plan, /*top=*/4);
  return peak.empty() ? peak : ": " + peak;
}

/// Memory per device is a hard limit. The search's estimate of it is
/// additive (parameters, optimizer state, saved activations, kept copies);
/// the plan's static memory plan is exact. When the plan exceeds the
/// limit, the next pipeline shape --stages auto ranked, else a search
/// under a limit lowered by the excess.
std::optional<plan::Plan>
CompileSession::compileWithinMemory(ParallelConfig &config) {
  const int64_t limit =
      options.memoryLimit > 0 ? options.memoryLimit : cluster.memoryCapacity;
  const std::string over = " per device, over the limit of ";
  const std::string advice =
      "\nuse more devices, a smaller batch, or a larger --memory-limit";
  int64_t searchLimit = options.memoryLimit;
  std::optional<plan::Plan> plan;
  size_t shape = 0;
  // --stages auto's submeshes of different sizes, before rankedShapes[0].
  bool mixed = !config.stageMeshes.empty() && config.layerStages.has_value();
  for (int attempt = 0;; ++attempt) {
    std::optional<plan::Plan> previous = std::move(plan);
    int code = 0;
    if (config.stageMeshes.empty()) {
      Attempt one;
      one.parallel = config;
      one.searchLimit = searchLimit;
      plan = buildPlan(one, code);
    } else {
      plan = buildOnStageMeshes(config, searchLimit, code);
    }
    if (!plan && code == kNoPlanUnderLoweredLimit) {
      if (!previous) {
        fail(modelPath() + ": no plan fits the memory limit");
        return std::nullopt;
      }
      // The search's count is below the program's: the last plan is the
      // nearest to the limit there is.
      fail(
          modelPath() + ": the plan needs " +
          sharding::formatBytes(peakBytes(*previous)) + over +
          sharding::formatBytes(limit) + ", and no plan fits a search under " +
          sharding::formatBytes(static_cast<double>(searchLimit)) +
          " (the search counted " +
          sharding::formatBytes(previous->explanation().search_memory_bytes()) +
          " for it)" + peakClause(*previous) + advice);
      return std::nullopt;
    }
    if (!plan)
      return std::nullopt;
    const int64_t peak = peakBytes(*plan);
    if (plan->explanation().mode() != "auto" || limit <= 0 || peak <= limit)
      return plan;
    const size_t nextShape = mixed ? 0 : shape + 1;
    if (nextShape < rankedShapes.size() && rankedShapes[nextShape].fits) {
      // The split's count of memory misses the arena's transients: the
      // next pipeline shape rather than a search under a lowered limit.
      shape = nextShape;
      const StageCandidate &next = rankedShapes[shape];
      log << "loom: the plan of "
          << (mixed ? "--stage-meshes " + config.stageMeshes : config.mesh)
          << " needs " << sharding::formatBytes(static_cast<double>(peak))
          << over << sharding::formatBytes(static_cast<double>(limit))
          << "; --stages auto takes the next shape, " << next.mesh << " with "
          << next.microBatches << " micro-batches" << next.describe() << "\n";
      if (mixed) {
        mixed = false;
        config.stageMeshes = "";
        config.layerStages.reset();
      }
      config = next.config(config);
      earlier.reset();
      searchLimit = options.memoryLimit;
      attempt = -1;
      continue;
    }
    earlier = AutoChoice{plan->explanation().zero_level(),
                         plan->explanation().recompute()};
    if (attempt == 5) {
      fail(modelPath() + ": the plan needs " + sharding::formatBytes(peak) +
           over + sharding::formatBytes(limit) + ", after " +
           std::to_string(attempt + 1) + " searches" + peakClause(*plan) +
           advice);
      return std::nullopt;
    }
    // Lower by the excess (at least), and by 2% more each time. Below a
    // tenth of the limit, the search's estimate is too far from the plan
    // for another search to help.
    double current = static_cast<double>(searchLimit > 0 ? searchLimit : limit);
    double excess = static_cast<double>(peak - limit);
    int64_t lowered =
        static_cast<int64_t>(std::min(current * static_cast<double>(limit) /
                                          static_cast<double>(peak),
                                      current - excess) -
                             0.02 * (attempt + 1) * static_cast<double>(limit));
    if (lowered < limit / 10) {
      fail(modelPath() + ": the plan needs " + sharding::formatBytes(peak) +
           over + sharding::formatBytes(limit) + ", while the search counted " +
           sharding::formatBytes(plan->explanation().search_memory_bytes()) +
           "; the buffers of its partitioned program at its peak are what "
           "the search misses" +
           peakClause(*plan) + advice);
      return std::nullopt;
    }
    log << "loom: the plan needs " << sharding::formatBytes(peak) << over
        << sharding::formatBytes(limit)
        << "; searching again as if the limit were "
        << sharding::formatBytes(lowered) << "\n";
    searchLimit = lowered;
  }
}

std::optional<CompileResult> CompileSession::run() {
  ParallelConfig config = options.parallel;
  if (options.searchStages && chooseStages(config))
    return std::nullopt;
  if (config.microBatches != 1) {
    // The graph is imported for one micro-batch.
    if (!options.training.enabled) {
      fail("--micro-batches needs --train");
      return std::nullopt;
    }
    if (config.microBatches < 1 || !options.model.batch ||
        *options.model.batch % config.microBatches != 0) {
      fail("--micro-batches M needs --batch N with N divisible by M");
      return std::nullopt;
    }
  }
  std::optional<plan::Plan> plan = compileWithinMemory(config);
  if (!plan)
    return std::nullopt;
  finishPlan(*plan, config);
  return CompileResult{std::move(*plan), std::move(config)};
}

} // namespace loom::pipeline
