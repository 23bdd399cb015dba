//===- RedistributionCosts.h - Remembered redistribution seconds -*- C++
//-*-===//
//
// The seconds the strategy search charges for moving a tensor from one
// layout to another: the cheapest plan of collectives (layout::Planner),
// costed by the profile's alpha-beta model. One loom-auto-sharding runs
// several searches on one mesh and profile (its ZeRO and recompute trials,
// then the final search), and they ask for the same redistributions; the
// pass shares one of these between them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SHARDING_REDISTRIBUTIONCOSTS_H
#define LOOM_PASSES_SHARDING_REDISTRIBUTIONCOSTS_H

#include "compiler/analysis/ShardingSupport.h"
#include "compiler/analysis/StepCost.h"

#include <map>
#include <tuple>

namespace loom::sharding {

class RedistributionCosts {
public:
  RedistributionCosts(layout::Mesh mesh, cost::HardwareProfile profile);
  RedistributionCosts(const RedistributionCosts &) = delete;
  RedistributionCosts &operator=(const RedistributionCosts &) = delete;

  /// Seconds to redistribute a tensor of `type` from `from` to `to`; 1e30
  /// when no plan does it.
  double seconds(mlir::RankedTensorType type, const layout::TensorLayout &from,
                 const layout::TensorLayout &to);

  const layout::Mesh &mesh() const { return mesh_; }
  const cost::HardwareProfile &profile() const { return profile_; }

private:
  double stepSeconds(const layout::TensorLayout &before,
                     const layout::TensorLayout &after,
                     const layout::Step &step,
                     const std::vector<int64_t> &shape, int64_t elementBytes);

  layout::Mesh mesh_;
  cost::HardwareProfile profile_;
  PlannerCache planners;
  GroupCache groups;
  std::map<std::tuple<const void *, layout::TensorLayout, layout::TensorLayout>,
           double>
      known;
};

} // namespace loom::sharding

#endif // LOOM_PASSES_SHARDING_REDISTRIBUTIONCOSTS_H
