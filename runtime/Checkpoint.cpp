//===- Checkpoint.cpp - Save and restore training state -------------------===//

#include "runtime/Checkpoint.h"

#include "runtime/comm/Communicator.h"

#include <filesystem>
#include <map>
#include <set>

namespace loom::rt {

namespace {

/// Sums `failed` over every rank of `exec`'s world (a barrier besides):
/// whether any rank failed, or an error from the communicator.
std::string anyFailed(const Executor &exec, bool &failed) {
  Communicator *comm = exec.communicator();
  if (!comm || exec.numRanks() <= 1)
    return "";
  RankGroup world(exec.numRanks());
  for (int64_t r = 0; r < exec.numRanks(); ++r)
    world[r] = r;
  int32_t flag = failed ? 1 : 0;
  // A flag in host memory: through the host side of a device communicator.
  std::string e =
      comm->hostCommunicator().allReduceSum(world, DType::I32, &flag, 1);
  failed = flag != 0;
  return e;
}

/// The tensors this rank saves: its stage's, each name from the first stage
/// that holds it (a tensor several stages hold is written once), whose
/// block this rank's copy is.
std::vector<const StateInfo *> savedHere(const Executor &exec) {
  std::map<std::string, int32_t> firstStage;
  for (const StateInfo &s : exec.state())
    firstStage.emplace(s.name, s.stage);
  std::vector<const StateInfo *> mine;
  for (const StateInfo &s : exec.state())
    if (s.stage == exec.stage() && firstStage[s.name] == s.stage)
      mine.push_back(&s);
  return mine;
}

/// Reads this rank's block of every tensor of its stage from `ckpt`,
/// checking the manifest against the plan first.
bool readCheckpointState(
    const Executor &exec, const CheckpointManifest &ckpt,
    std::vector<std::pair<const StateInfo *, HostBuffer>> &loaded,
    std::string &error) {
  std::set<std::string> planNames;
  for (const StateInfo &s : exec.state())
    planNames.insert(s.name);
  if (std::string e = checkForeignState(ckpt, planNames, nullptr); !e.empty()) {
    error = e;
    return false;
  }
  for (const StateInfo &s : exec.state()) {
    std::optional<CheckpointEntry> entry;
    if (std::string e =
            findState(ckpt, s.name, s.kind, s.dtype, s.shape, entry);
        !e.empty()) {
      error = e;
      return false;
    }
    std::optional<Executor::StateBlock> block = exec.stateBlock(s);
    if (!block)
      continue; // another stage's
    std::optional<HostBuffer> data =
        readCheckpointBlock(ckpt, *entry, block->offsets, block->shape, error);
    if (!data)
      return false;
    loaded.emplace_back(&s, std::move(*data));
  }
  return true;
}

} // namespace

const char *stateKindName(int kind) {
  switch (kind) {
  case plan::Value::PARAMETER:
    return "parameter";
  case plan::Value::BUFFER:
    return "buffer";
  default:
    return "optimizer_state";
  }
}

std::string checkForeignState(const CheckpointManifest &ckpt,
                              const std::set<std::string> &planNames,
                              std::vector<std::string> *dropped) {
  for (const CheckpointEntry &e : ckpt.tensors) {
    if (planNames.count(e.name))
      continue;
    if (e.kind != "optimizer_state")
      return ckpt.dir + "/manifest.json: the " + e.kind + " '" + e.name +
             "' is not in the plan: a checkpoint of another model";
    if (dropped)
      dropped->push_back(e.name);
  }
  return "";
}

std::string findState(const CheckpointManifest &ckpt, const std::string &name,
                      int kind, DType dtype, const Shape &shape,
                      std::optional<CheckpointEntry> &entry) {
  std::string manifest = ckpt.dir + "/manifest.json";
  entry = ckpt.entryOf(name, dtype, shape);
  if (!entry)
    return manifest + ": has no " + std::string(stateKindName(kind)) + " '" +
           name + "', which the plan needs";
  std::string where = manifest + ": '" + name + "'";
  // BF16 tensors are saved as f32 files: either reads the other.
  if (storedDType(entry->dtype) != storedDType(dtypeName(dtype)))
    return where + " has element type " + entry->dtype + " but the plan's " +
           dtypeName(dtype);
  if (entry->shape != shape)
    return where + " has shape " + formatShape(entry->shape) +
           " but the plan's is " + formatShape(shape);
  return "";
}

bool saveCheckpoint(const Executor &exec, const std::string &root,
                    std::string &error, int64_t keepLast,
                    std::string *savedDir) {
  // Rank 0 prepares and commits; every rank writes its own blocks. A
  // rank's first failure is kept by its writer, and every rank takes part
  // in each agreement whatever happened, so that none waits for another.
  bool committer = exec.rank() == 0;
  CheckpointWriter out;
  std::string mine; // a failure of this rank's outside the writer
  auto agree = [&](const char *what) {
    bool failed = out.failed() || !mine.empty();
    if (std::string e = anyFailed(exec, failed); !e.empty()) {
      error = root + ": " + e;
      failed = true;
    } else if (failed) {
      error = !mine.empty()  ? mine
              : out.failed() ? out.error()
                             : root + ": another rank could not " + what +
                                   " (its error names the file)";
    }
    if (failed && committer)
      out.abandon();
    return !failed;
  };
  if (committer)
    out.prepare(root, exec.stepsTaken());
  if (!agree("prepare the checkpoint"))
    return false;
  out.join(root, exec.stepsTaken(), exec.rank());
  for (const StateInfo *s : savedHere(exec)) {
    std::optional<Executor::StateBlock> where = exec.stateBlock(*s);
    // A partial sum's block is summed over its ranks first, a collective
    // every rank of the stage takes part in whatever happened before.
    if (!where->saves && !where->partial)
      continue;
    HostBuffer block;
    std::string e;
    if (!exec.readStateBlock(*s, block, e) && mine.empty())
      mine = root + ": " + e;
    if (!where->saves || out.failed() || !mine.empty())
      continue;
    // A block of padding alone has no file.
    if (numElements(block.shape) > 0 || numElements(s->shape) == 0)
      out.addShard(s->name, stateKindName(s->kind), s->shape, where->offsets,
                   block.view());
  }
  out.finish();
  if (!agree("write its shards"))
    return false;
  std::string stepDir;
  if (committer)
    stepDir = out.commitRanks(keepLast, exec.numRanks());
  if (!agree("commit the checkpoint"))
    return false;
  if (savedDir)
    *savedDir = committer ? stepDir
                          : (std::filesystem::path(root) /
                             checkpointStepName(exec.stepsTaken()))
                                .string();
  return true;
}

bool loadCheckpoint(Executor &exec, const std::string &path,
                    std::string &error) {
  std::optional<CheckpointManifest> ckpt = openCheckpoint(path, error);
  bool failed = !ckpt;
  std::vector<std::pair<const StateInfo *, HostBuffer>> loaded;
  if (ckpt && !readCheckpointState(exec, *ckpt, loaded, error))
    failed = true;
  // Every rank reads only its blocks: they agree before any sets them, so
  // that a bad file one rank reads leaves every rank unchanged.
  bool anyRank = failed;
  if (std::string e = anyFailed(exec, anyRank); !e.empty()) {
    error = path + ": " + e;
    return false;
  }
  if (anyRank) {
    if (!failed)
      error = path + ": another rank could not read its part of the "
                     "checkpoint (its error names the file)";
    return false;
  }
  for (auto &[s, data] : loaded)
    if (!exec.setStateBlock(*s, data.view(), error))
      return false;
  exec.setStepsTaken(ckpt->step);
  return true;
}

} // namespace loom::rt
