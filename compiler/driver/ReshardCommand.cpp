//===- ReshardCommand.cpp - `loom reshard`: a checkpoint for another plan -===//
//
// Rewrites a checkpoint offline as the blocks a run of another plan of the
// same model saves (another mesh, strategy or stage split), or with no plan
// as whole tensors. Resuming needs no reshard (every rank reads the blocks
// its shards overlap from any checkpoint); resharding gives each rank of
// the new plan exactly one file per tensor to read, and whole tensors give
// tools that read .npy files the model's weights as they are.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Commands.h"

#include "runtime/CheckpointReshard.h"
#include "runtime/Executor.h"

#include "llvm/Support/raw_ostream.h"

#include <filesystem>

using namespace llvm;

namespace loom::driver {
namespace {

cl::SubCommand reshardCmd("reshard",
                          "Rewrite a checkpoint for another plan of the same "
                          "model, or as whole tensors");
cl::opt<std::string> checkpointPath(
    cl::Positional, cl::Required,
    cl::desc("<CKPT: a loom run --save DIR (its latest) or a step directory>"),
    cl::sub(reshardCmd), cl::cat(loomCategory()));
cl::opt<std::string>
    toPlan("to",
           cl::desc("The plan whose ranks' blocks to write (default: whole "
                    "tensors, one file each)"),
           cl::value_desc("PLAN"), cl::sub(reshardCmd),
           cl::cat(loomCategory()));
cl::opt<std::string> outputRoot(
    "o", cl::desc("The checkpoint root to write (as loom run --save DIR)"),
    cl::value_desc("DIR"), cl::Required, cl::sub(reshardCmd),
    cl::cat(loomCategory()));

/// Whether `a` and `b` name one directory (either may not exist yet).
bool sameDirectory(const std::string &a, const std::string &b) {
  std::error_code ec;
  return std::filesystem::weakly_canonical(a, ec) ==
         std::filesystem::weakly_canonical(b, ec);
}

int runReshard() {
  std::string error;
  std::optional<plan::Plan> plan;
  if (!toPlan.empty() && !(plan = rt::readPlanFile(toPlan, error)))
    return reportError(error);
  std::filesystem::path input(checkpointPath.getValue());
  if (sameDirectory(checkpointPath, outputRoot) ||
      sameDirectory(input.parent_path().string(), outputRoot))
    return reportError("-o " + outputRoot +
                       " is the checkpoint being read; write to another "
                       "directory");
  rt::ReshardSummary summary;
  if (!rt::reshardCheckpoint(checkpointPath, plan ? &*plan : nullptr,
                             outputRoot, summary, error))
    return reportError(error);
  outs() << "loom: wrote " << summary.tensors << " tensors in " << summary.files
         << " files (step " << summary.step << ") to " << summary.dir
         << (plan ? " as the plan's ranks save them" : " as whole tensors")
         << "\n";
  if (!summary.dropped.empty())
    outs() << "loom: left out " << summary.dropped.size()
           << " optimizer states the plan has not (another optimizer), e.g. '"
           << summary.dropped.front() << "'\n";
  return 0;
}

} // namespace

std::optional<int> runReshardCommand() {
  if (reshardCmd)
    return runReshard();
  return std::nullopt;
}

} // namespace loom::driver
