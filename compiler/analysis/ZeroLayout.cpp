//===- ZeroLayout.cpp - The layouts optimizer sharding gives updates ------===//

#include "compiler/analysis/ZeroLayout.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;

namespace loom::sharding {

std::optional<layout::TensorLayout>
zeroLayout(const layout::TensorLayout &update, ArrayRef<int> axes,
           ArrayRef<int64_t> shape, const layout::Mesh &mesh) {
  if (axes.empty())
    return std::nullopt;
  int64_t ways = 1;
  for (int a : axes)
    ways *= mesh.axisSize(a);
  for (int d = 0; d < update.rank(); ++d) {
    int64_t local = shape[d] / update.splitCount(mesh, d);
    if (local % ways != 0)
      continue;
    layout::TensorLayout l = update;
    for (int a : axes)
      l.appendSplit(d, a);
    return l;
  }
  return std::nullopt;
}

std::optional<ZeroPadding> zeroPadding(const layout::TensorLayout &update,
                                       ArrayRef<int> axes,
                                       ArrayRef<int64_t> shape,
                                       const layout::Mesh &mesh) {
  if (axes.empty())
    return std::nullopt;
  int64_t ways = 1;
  for (int a : axes)
    ways *= mesh.axisSize(a);
  int64_t elements = 1;
  for (int64_t n : shape)
    elements *= n;
  std::optional<ZeroPadding> best;
  int64_t fewest = 0;
  for (int d = 0; d < update.rank(); ++d) {
    if (update.splitCount(mesh, d) != 1 || shape[d] == 0)
      continue;
    int64_t extent = (shape[d] + ways - 1) / ways * ways;
    int64_t added = elements / shape[d] * (extent - shape[d]);
    if (!best || added < fewest) {
      best = ZeroPadding{d, extent};
      fewest = added;
    }
  }
  return best;
}

std::vector<int> gradientAxes(const OpLayouts &layouts, unsigned operand) {
  std::vector<int> used;
  auto add = [&](const layout::TensorLayout &l) {
    for (const std::vector<int> &dim : l.dimAxes())
      used.insert(used.end(), dim.begin(), dim.end());
    used.insert(used.end(), l.partialAxes().begin(), l.partialAxes().end());
  };
  for (const layout::TensorLayout &l : layouts.operands)
    add(l);
  for (const layout::TensorLayout &l : layouts.results)
    add(l);
  llvm::sort(used);
  used.erase(std::unique(used.begin(), used.end()), used.end());
  const layout::TensorLayout &own = layouts.operands[operand];
  llvm::erase_if(used, [&](int a) { return !own.isUnused(a); });
  return used;
}

int zeroLevel(func::FuncOp func) {
  auto level = func->getAttrOfType<IntegerAttr>(LoomDialect::kZeroAttrName);
  return level ? static_cast<int>(level.getInt()) : 0;
}

} // namespace loom::sharding
