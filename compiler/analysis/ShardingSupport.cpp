//===- ShardingSupport.cpp - Sharding rules meet the layout algebra -------===//

#include "compiler/analysis/ShardingSupport.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace loom::sharding {

std::optional<layout::Mesh> toMesh(MeshAttr mesh, std::string &error) {
  std::vector<layout::MeshAxis> axes;
  for (auto [name, size] :
       llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
    axes.push_back({name.getValue().str(), size});
  return layout::Mesh::create(std::move(axes), error);
}

FailureOr<std::pair<MeshAttr, layout::Mesh>> meshOf(Operation *func,
                                                     StringRef pass) {
  auto attr = func->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName);
  if (!attr)
    return func->emitError() << pass << " needs a `loom.mesh` on the function";
  std::string error;
  std::optional<layout::Mesh> mesh = toMesh(attr, error);
  if (!mesh)
    return func->emitError() << "invalid mesh: " << error;
  return std::make_pair(attr, std::move(*mesh));
}

layout::TensorLayout toLayout(TensorLayoutAttr attr, MeshAttr mesh) {
  std::vector<std::vector<int>> dims;
  for (unsigned d = 0; d < attr.getRank(); ++d) {
    std::vector<int> axes;
    for (StringRef a : attr.getDimAxes(d))
      axes.push_back(static_cast<int>(*mesh.getAxisIndex(a)));
    dims.push_back(std::move(axes));
  }
  std::vector<int> partial;
  for (StringRef a : attr.getPartialAxes())
    partial.push_back(static_cast<int>(*mesh.getAxisIndex(a)));
  return layout::TensorLayout::of(std::move(dims), std::move(partial));
}

TensorLayoutAttr toAttr(MeshAttr mesh, const layout::TensorLayout &layout) {
  MLIRContext *ctx = mesh.getContext();
  auto names = [&](const std::vector<int> &axes) {
    SmallVector<Attribute> list;
    for (int a : axes)
      list.push_back(mesh.getAxisNames()[a]);
    return ArrayAttr::get(ctx, list);
  };
  SmallVector<Attribute> dims;
  for (const std::vector<int> &axes : layout.dimAxes())
    dims.push_back(names(axes));
  return TensorLayoutAttr::get(ctx, mesh, ArrayAttr::get(ctx, dims),
                               names(layout.partialAxes()));
}

int64_t elementBytes(Type type) {
  Type element = cast<ShapedType>(type).getElementType();
  return std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
}

std::string describeOp(Operation *op) {
  std::string s = "'" + op->getName().getStringRef().str() + "'";
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    s += " (ONNX node '" + name.getName().str() + "')";
  return s;
}

bool isMove(Operation *op) {
  return isa_and_nonnull<CastOp, TransposeOp, ReshapeOp>(op);
}

Value moveSource(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (!isMove(op))
      break;
    v = op->getOperand(0);
  }
  return v;
}

std::optional<layout::RedistributionPlan>
PlannerCache::plan(RankedTensorType global, const layout::TensorLayout &from,
                   const layout::TensorLayout &to, std::string &error) {
  std::vector<int64_t> shape(global.getShape().begin(),
                             global.getShape().end());
  int64_t bytes = elementBytes(global);
  auto key = std::make_pair(shape, bytes);
  auto it = planners.find(key);
  if (it == planners.end())
    it = planners.emplace(key, layout::Planner(mesh, shape, bytes)).first;
  return it->second.plan(from, to, error);
}

RankedTensorType localType(RankedTensorType global, const layout::Mesh &mesh,
                           const layout::TensorLayout &layout) {
  std::vector<int64_t> shape(global.getShape().begin(),
                             global.getShape().end());
  return RankedTensorType::get(layout.localShape(mesh, shape),
                               global.getElementType());
}

namespace {

/// The first factor of a dimension that can hold axes (size above 1), or
/// -1 when none can.
int leadingFactor(const ShardingRule &rule, ArrayRef<int> factors) {
  for (int f : factors)
    if (rule.factors[f].size > 1)
      return f;
  return -1;
}

/// Layout of a tensor whose dimensions are `dims`, under `axes`.
layout::TensorLayout tensorLayout(const DimFactors &dims,
                                  const FactorAxes &axes) {
  std::vector<std::vector<int>> out;
  for (const auto &factors : dims) {
    std::vector<int> list;
    for (int f : factors)
      list.insert(list.end(), axes[f].begin(), axes[f].end());
    out.push_back(std::move(list));
  }
  return layout::TensorLayout::of(std::move(out));
}

/// "operand 1 dimension 0" for the first tensor dimension made of `f`.
std::string whereIs(const ShardingRule &rule, int f) {
  for (size_t i = 0; i < rule.operands.size(); ++i)
    for (size_t d = 0; d < rule.operands[i].size(); ++d)
      if (llvm::is_contained(rule.operands[i][d], f))
        return "operand " + std::to_string(i) + " dimension " +
               std::to_string(d);
  for (size_t i = 0; i < rule.results.size(); ++i)
    for (size_t d = 0; d < rule.results[i].size(); ++d)
      if (llvm::is_contained(rule.results[i][d], f))
        return "result " + std::to_string(i) + " dimension " +
               std::to_string(d);
  return "factor " + std::to_string(f);
}

bool induce(const ShardingRule &rule, const DimFactors &dims,
            const layout::TensorLayout &layout, FactorAxes &into) {
  if (static_cast<size_t>(layout.rank()) != dims.size())
    return false;
  // Mesh axes already given to a factor (a handful: a plain vector).
  std::vector<int> used;
  for (const auto &axes : into)
    used.insert(used.end(), axes.begin(), axes.end());
  bool ok = true;
  for (size_t d = 0; d < dims.size(); ++d) {
    const std::vector<int> &axes = layout.dimAxes(static_cast<int>(d));
    if (axes.empty())
      continue;
    int f = leadingFactor(rule, dims[d]);
    if (f < 0 || rule.factors[f].kind == FactorKind::Blocked) {
      ok = false;
      continue;
    }
    if (!into[f].empty() ||
        llvm::any_of(axes, [&](int a) { return llvm::is_contained(used, a); }))
      continue;
    into[f].assign(axes.begin(), axes.end());
    used.insert(used.end(), axes.begin(), axes.end());
  }
  return ok;
}

} // namespace

std::optional<OpLayouts> deriveLayouts(const ShardingRule &rule,
                                       const FactorAxes &axes,
                                       const layout::Mesh &mesh,
                                       std::string &error) {
  size_t numFactors = rule.factors.size();
  bool partialThrough = rule.linear && axes.size() == numFactors + 1;
  if (axes.size() != numFactors && !partialThrough) {
    error = "the assignment has " + std::to_string(axes.size()) +
            " factors, the rule " + std::to_string(numFactors);
    return std::nullopt;
  }
  std::vector<int> owner(mesh.numAxes(), -1);
  OpLayouts out;
  for (size_t f = 0; f < numFactors; ++f) {
    if (axes[f].empty())
      continue;
    const ShardingFactor &factor = rule.factors[f];
    std::vector<int> list(axes[f].begin(), axes[f].end());
    for (int a : list) {
      if (a < 0 || a >= mesh.numAxes()) {
        error = "mesh axis " + std::to_string(a) + " does not exist";
        return std::nullopt;
      }
      if (owner[a] >= 0) {
        error = "mesh axis '" + mesh.axisName(a) + "' splits both " +
                whereIs(rule, owner[a]) + " and " +
                whereIs(rule, static_cast<int>(f)) +
                ", which are independent; an axis can split one of them";
        return std::nullopt;
      }
      owner[a] = static_cast<int>(f);
    }
    int64_t count = mesh.groupSize(list);
    if (factor.kind == FactorKind::Blocked) {
      error = whereIs(rule, static_cast<int>(f)) +
              " cannot be split: the op needs it whole";
      return std::nullopt;
    }
    if (factor.size % count != 0) {
      error = whereIs(rule, static_cast<int>(f)) + " has " +
              std::to_string(factor.size) + " elements, which " +
              mesh.axisListToString(list) + " (" + std::to_string(count) +
              " ways) does not divide";
      return std::nullopt;
    }
    if (factor.meanScaled)
      out.meanDivisor *= count;
  }
  // Only the leading factor of a merged dimension may be split, so that
  // every shard is one contiguous block of it.
  auto checkDims = [&](const DimFactors &dims, StringRef what,
                       size_t index) -> bool {
    for (size_t d = 0; d < dims.size(); ++d) {
      int lead = leadingFactor(rule, dims[d]);
      for (int f : dims[d])
        if (f != lead && !axes[f].empty()) {
          error = what.str() + " " + std::to_string(index) + " dimension " +
                  std::to_string(d) +
                  " merges several factors and only its outermost may be "
                  "split";
          return false;
        }
    }
    return true;
  };
  // Partial sums passed through a linear op: on every operand and result.
  std::vector<int> through;
  if (partialThrough) {
    for (int a : axes.back()) {
      if (a < 0 || a >= mesh.numAxes() || owner[a] >= 0 ||
          llvm::is_contained(through, a)) {
        error = "partial axis " + std::to_string(a) +
                " is not a free axis of the mesh";
        return std::nullopt;
      }
      through.push_back(a);
    }
  }
  for (size_t i = 0; i < rule.operands.size(); ++i) {
    if (!checkDims(rule.operands[i], "operand", i))
      return std::nullopt;
    out.operands.push_back(tensorLayout(rule.operands[i], axes));
    for (int a : through)
      out.operands.back().addPartial(a);
  }
  for (size_t i = 0; i < rule.results.size(); ++i) {
    if (!checkDims(rule.results[i], "result", i))
      return std::nullopt;
    layout::TensorLayout l = tensorLayout(rule.results[i], axes);
    for (int a : through)
      l.addPartial(a);
    for (size_t f = 0; f < numFactors; ++f) {
      if (axes[f].empty())
        continue;
      bool present = llvm::any_of(rule.results[i], [&](const auto &dim) {
        return llvm::is_contained(dim, static_cast<int>(f));
      });
      if (present)
        continue;
      if (rule.factors[f].kind != FactorKind::Reduction) {
        error = whereIs(rule, static_cast<int>(f)) +
                " cannot be split: result " + std::to_string(i) +
                " does not index it and is not a sum over it";
        return std::nullopt;
      }
      for (int a : axes[f])
        l.addPartial(a);
    }
    out.results.push_back(std::move(l));
  }
  return out;
}

std::optional<OpLayouts> layoutsOf(Operation *op, const layout::Mesh &mesh,
                                   std::string &error) {
  auto iface = dyn_cast<ShardingOpInterface>(op);
  auto attr = op->getAttrOfType<ArrayAttr>(LoomDialect::kShardingAttrName);
  if (!iface || !attr) {
    error = "has no `loom.sharding`";
    return std::nullopt;
  }
  ShardingRule rule = iface.getShardingRule();
  std::optional<FactorAxes> axes = factorsFromAttr(attr, mesh, error);
  if (!axes)
    return std::nullopt;
  return deriveLayouts(rule, *axes, mesh, error);
}

bool induceFromOperand(const ShardingRule &rule, unsigned index,
                       const layout::TensorLayout &layout, FactorAxes &into) {
  return induce(rule, rule.operands[index], layout, into);
}

bool induceFromResult(const ShardingRule &rule, unsigned index,
                      const layout::TensorLayout &layout, FactorAxes &into) {
  return induce(rule, rule.results[index], layout, into);
}

ArrayAttr factorsToAttr(MLIRContext *ctx, const FactorAxes &axes,
                        const layout::Mesh &mesh) {
  Builder b(ctx);
  SmallVector<Attribute> list;
  for (const auto &f : axes) {
    SmallVector<Attribute> names;
    for (int a : f)
      names.push_back(b.getStringAttr(mesh.axisName(a)));
    list.push_back(b.getArrayAttr(names));
  }
  return b.getArrayAttr(list);
}

std::optional<FactorAxes> factorsFromAttr(ArrayAttr attr,
                                          const layout::Mesh &mesh,
                                          std::string &error) {
  FactorAxes axes;
  for (Attribute f : attr) {
    auto list = dyn_cast<ArrayAttr>(f);
    if (!list) {
      error = "each factor must be an array of axis names";
      return std::nullopt;
    }
    axes.emplace_back();
    for (Attribute a : list) {
      auto name = dyn_cast<StringAttr>(a);
      std::optional<int> index =
          name ? mesh.axisIndex(name.getValue().str()) : std::nullopt;
      if (!index) {
        error = "unknown mesh axis " +
                (name ? "'" + name.getValue().str() + "'" : "entry") +
                " (the mesh is " + mesh.toString() + ")";
        return std::nullopt;
      }
      axes.back().push_back(*index);
    }
  }
  return axes;
}

std::optional<FactorAxes>
strategyToFactors(const ShardingRule &rule,
                  ArrayRef<RankedTensorType> operandTypes,
                  const StrategySpec &spec, const layout::Mesh &mesh,
                  std::string &error) {
  if (spec.size() > rule.operands.size()) {
    error = "the strategy has " + std::to_string(spec.size()) +
            " entries but the op has " + std::to_string(rule.operands.size()) +
            " operands";
    return std::nullopt;
  }
  FactorAxes axes(rule.factors.size());
  std::vector<bool> used(mesh.numAxes(), false);
  for (size_t i = 0; i < spec.size(); ++i) {
    RankedTensorType type = operandTypes[i];
    if (spec[i].size() != static_cast<size_t>(type.getRank())) {
      error = "operand " + std::to_string(i) + " has rank " +
              std::to_string(type.getRank()) + " but its strategy entry has " +
              std::to_string(spec[i].size()) + " counts";
      return std::nullopt;
    }
    for (size_t d = 0; d < spec[i].size(); ++d) {
      const DimSpec &dim = spec[i][d];
      std::string where = "operand " + std::to_string(i) + " dimension " +
                          std::to_string(d) + " (size " +
                          std::to_string(type.getDimSize(d)) + ")";
      // Resolve the dimension's axes.
      std::vector<int> list;
      if (!dim.axes.empty()) {
        for (const std::string &name : dim.axes) {
          std::optional<int> a = mesh.axisIndex(name);
          if (!a) {
            error = where + ": unknown mesh axis '" + name + "' (the mesh is " +
                    mesh.toString() + ")";
            return std::nullopt;
          }
          list.push_back(*a);
        }
      } else if (dim.count < 1) {
        error = where + ": split count " + std::to_string(dim.count) +
                " must be at least 1";
        return std::nullopt;
      } else if (dim.count == 1) {
        continue;
      }
      int f = leadingFactor(rule, rule.operands[i][d]);
      int64_t count =
          dim.axes.empty() ? dim.count : mesh.groupSize(list);
      if (type.getDimSize(d) % count != 0) {
        error = where + ": the count " + std::to_string(count) +
                " does not divide it";
        return std::nullopt;
      }
      if (f < 0) {
        error = where + " cannot be split by this op";
        return std::nullopt;
      }
      if (!axes[f].empty()) {
        int64_t have = mesh.groupSize(
            std::vector<int>(axes[f].begin(), axes[f].end()));
        if (have != count ||
            (!dim.axes.empty() &&
             std::vector<int>(axes[f].begin(), axes[f].end()) != list)) {
          error = where + " is split " + std::to_string(count) +
                  " ways, but it is the same index as " + whereIs(rule, f) +
                  ", split " + std::to_string(have) + " ways";
          return std::nullopt;
        }
        continue;
      }
      if (dim.axes.empty()) {
        // The next unused axes, outermost first, that multiply to count.
        int start = 0;
        for (; start < mesh.numAxes(); ++start) {
          if (used[start])
            continue;
          int64_t product = 1;
          list.clear();
          for (int a = start; a < mesh.numAxes() && !used[a] &&
                              product < count;
               ++a) {
            product *= mesh.axisSize(a);
            list.push_back(a);
          }
          if (product == count)
            break;
        }
        if (start == mesh.numAxes()) {
          std::vector<int> free;
          for (int a = 0; a < mesh.numAxes(); ++a)
            if (!used[a])
              free.push_back(a);
          error = where + ": the count " + std::to_string(count) +
                  " is not a product of consecutive unused mesh axes " +
                  mesh.axisListToString(free) + " of " + mesh.toString();
          return std::nullopt;
        }
      }
      for (int a : list) {
        if (used[a]) {
          error = where + ": mesh axis '" + mesh.axisName(a) +
                  "' already splits another dimension of this op";
          return std::nullopt;
        }
        used[a] = true;
      }
      axes[f].assign(list.begin(), list.end());
    }
  }
  return axes;
}

StrategySpec layoutsToStrategy(const OpLayouts &layouts,
                               const layout::Mesh &mesh) {
  StrategySpec spec;
  for (const layout::TensorLayout &l : layouts.operands) {
    std::vector<DimSpec> dims;
    for (const std::vector<int> &axes : l.dimAxes()) {
      DimSpec d;
      for (int a : axes)
        d.axes.push_back(mesh.axisName(a));
      d.count = mesh.groupSize(axes);
      dims.push_back(std::move(d));
    }
    spec.push_back(std::move(dims));
  }
  return spec;
}

std::string strategyToString(const StrategySpec &spec) {
  std::string s = "[";
  for (size_t i = 0; i < spec.size(); ++i) {
    s += i ? ", [" : "[";
    for (size_t d = 0; d < spec[i].size(); ++d) {
      if (d)
        s += ", ";
      const DimSpec &dim = spec[i][d];
      if (dim.axes.empty()) {
        s += std::to_string(dim.count);
        continue;
      }
      for (size_t k = 0; k < dim.axes.size(); ++k)
        s += (k ? "*" : "") + dim.axes[k];
    }
    s += "]";
  }
  return s + "]";
}

FailureOr<std::optional<FactorAxes>>
fixedAssignment(Operation *op, const ShardingRule &rule,
                const layout::Mesh &mesh) {
  std::string error;
  // A fixed assignment: loom.sharding, or a loom.strategy's counts.
  std::optional<FactorAxes> fixed;
  if (auto attr = op->getAttrOfType<ArrayAttr>(LoomDialect::kShardingAttrName)) {
    fixed = factorsFromAttr(attr, mesh, error);
    if (!fixed) {
      op->emitError() << "sharding of " << describeOp(op) << ": " << error;
      return failure();
    }
  } else if (auto strategy =
                 op->getAttrOfType<StrategyAttr>(LoomDialect::kStrategyAttrName)) {
    StrategySpec spec;
    for (DenseI64ArrayAttr counts : strategy.getInputs()) {
      spec.emplace_back();
      for (int64_t c : counts.asArrayRef())
        spec.back().push_back({c, {}});
    }
    SmallVector<RankedTensorType> types;
    for (Value v : op->getOperands())
      types.push_back(cast<RankedTensorType>(v.getType()));
    fixed = strategyToFactors(rule, types, spec, mesh, error);
    if (!fixed) {
      op->emitError() << "strategy " << strategy << " of " << describeOp(op)
                      << ": " << error;
      return failure();
    }
  }
  return fixed;
}

} // namespace loom::sharding
