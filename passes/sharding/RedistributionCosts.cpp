//===- RedistributionCosts.cpp - Remembered redistribution seconds --------===//

#include "passes/sharding/RedistributionCosts.h"

using namespace mlir;
using namespace loom;
using namespace loom::sharding;

RedistributionCosts::RedistributionCosts(layout::Mesh mesh,
                                         cost::HardwareProfile profile)
    : mesh_(std::move(mesh)), profile_(std::move(profile)), planners(mesh_),
      groups(mesh_) {}

double RedistributionCosts::stepSeconds(const layout::TensorLayout &before,
                                        const layout::TensorLayout &after,
                                        const layout::Step &s,
                                        const std::vector<int64_t> &shape,
                                        int64_t elementBytes) {
  double in = static_cast<double>(before.localNumElements(mesh_, shape)) *
              static_cast<double>(elementBytes);
  double out = static_cast<double>(after.localNumElements(mesh_, shape)) *
               static_cast<double>(elementBytes);
  std::vector<int> axes(s.axes.begin(), s.axes.end());
  switch (s.kind) {
  case layout::StepKind::AllReduce:
    return cost::collectiveSeconds(profile_, cost::CollectiveKind::AllReduce,
                                   in, groups.group(axes));
  case layout::StepKind::ReduceScatter:
    return cost::collectiveSeconds(
        profile_, cost::CollectiveKind::ReduceScatter, in, groups.group(axes));
  case layout::StepKind::AllGather:
    return cost::collectiveSeconds(profile_, cost::CollectiveKind::AllGather,
                                   out, groups.group(axes));
  case layout::StepKind::AllToAll:
    return cost::collectiveSeconds(profile_, cost::CollectiveKind::AllToAll, in,
                                   groups.group(axes));
  case layout::StepKind::LocalSplit:
  case layout::StepKind::MakePartial:
    return 0;
  }
  return 0;
}

double RedistributionCosts::seconds(RankedTensorType type,
                                    const layout::TensorLayout &from,
                                    const layout::TensorLayout &to) {
  if (from == to)
    return 0;
  auto key = std::make_tuple(type.getAsOpaquePointer(), from, to);
  if (auto it = known.find(key); it != known.end())
    return it->second;
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  int64_t bytes = elementBytes(type);
  std::string error;
  double total = 1e30;
  if (std::optional<layout::RedistributionPlan> plan =
          planners.plan(type, from, to, error)) {
    total = 0;
    layout::TensorLayout current = from;
    for (const layout::Step &s : plan->steps) {
      std::optional<layout::TensorLayout> next =
          layout::applyStep(mesh_, current, s, shape, error);
      if (!next) {
        total = 1e30;
        break;
      }
      total += stepSeconds(current, *next, s, shape, bytes);
      current = *next;
    }
  }
  known.emplace(key, total);
  return total;
}
