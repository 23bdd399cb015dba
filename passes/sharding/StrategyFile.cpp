//===- StrategyFile.cpp - User strategies as JSON -------------------------===//

#include "passes/sharding/StrategyFile.h"
#include "common/text/InputLimits.h"
#include "compiler/analysis/StepCost.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"

#include <map>

using namespace mlir;

namespace loom::sharding {

namespace {

std::string opName(Operation *op) { return op->getName().stripDialect().str(); }

/// One operand dimension: a count, or axis names joined by '*'.
bool parseDim(const llvm::json::Value &v, DimSpec &out, std::string &error) {
  if (std::optional<int64_t> count = v.getAsInteger()) {
    out.count = *count;
    if (*count < 1) {
      error = "split count " + std::to_string(*count) + " must be at least 1";
      return false;
    }
    return true;
  }
  if (std::optional<StringRef> s = v.getAsString()) {
    SmallVector<StringRef> parts;
    s->split(parts, '*');
    for (StringRef p : parts) {
      p = p.trim();
      if (p.empty()) {
        error = "axis list '" + s->str() + "' has an empty name";
        return false;
      }
      out.axes.push_back(p.str());
    }
    return true;
  }
  error = "a dimension's entry must be a split count or mesh axis names "
          "(e.g. 2 or \"tp\" or \"dp*tp\")";
  return false;
}

} // namespace

std::string meshSpec(const layout::Mesh &mesh) {
  std::string s;
  for (const layout::MeshAxis &a : mesh.axes())
    s += (s.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return s;
}

std::optional<StrategyFile>
parseStrategyFile(StringRef text, StringRef fileName, std::string &error) {
  if (std::string deep =
          limits::jsonNestingError(std::string_view(text.data(), text.size()));
      !deep.empty()) {
    error = fileName.str() + ": not a strategy file: " + deep;
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed) {
    error = fileName.str() +
            ": not valid JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root) {
    error = fileName.str() + ": expected an object with a \"strategies\" array";
    return std::nullopt;
  }
  StrategyFile file;
  for (const auto &kv : *root) {
    StringRef key = kv.first;
    if (key != "mesh" && key != "strategies" && key != "version") {
      error = fileName.str() + ": unknown key \"" + key.str() +
              "\" (expected \"mesh\", \"strategies\")";
      return std::nullopt;
    }
  }
  if (const llvm::json::Value *mesh = root->get("mesh")) {
    std::optional<StringRef> s = mesh->getAsString();
    if (!s) {
      error = fileName.str() + ": \"mesh\" must be a string like \"dp=2,tp=4\"";
      return std::nullopt;
    }
    file.mesh = s->str();
  }
  const llvm::json::Array *list = root->getArray("strategies");
  if (!list) {
    error = fileName.str() + ": expected a \"strategies\" array";
    return std::nullopt;
  }
  for (size_t k = 0; k < list->size(); ++k) {
    std::string where =
        fileName.str() + ": strategy entry " + std::to_string(k + 1);
    const llvm::json::Object *e = (*list)[k].getAsObject();
    if (!e) {
      error = where + ": expected an object";
      return std::nullopt;
    }
    StrategyEntry entry;
    entry.ordinal = k + 1;
    for (const auto &kv : *e) {
      StringRef key = kv.first;
      if (key == "node" || key == "pattern" || key == "op") {
        std::optional<StringRef> s = kv.second.getAsString();
        if (!s || s->empty()) {
          error = where + ": \"" + key.str() + "\" must be a non-empty string";
          return std::nullopt;
        }
        (key == "node"      ? entry.node
         : key == "pattern" ? entry.pattern
                            : entry.op) = s->str();
      } else if (key == "partial") {
        DimSpec axes;
        std::string why;
        std::optional<StringRef> text = kv.second.getAsString();
        if (!text || !parseDim(kv.second, axes, why) || axes.axes.empty()) {
          error = where + ": \"partial\" must name mesh axes, e.g. \"tp\"";
          return std::nullopt;
        }
        entry.partial = axes.axes;
      } else if (key == "recompute") {
        std::optional<bool> b = kv.second.getAsBoolean();
        if (!b) {
          error = where + ": \"recompute\" must be true or false";
          return std::nullopt;
        }
        entry.recompute = *b;
      } else if (key == "stage") {
        std::optional<int64_t> stage = kv.second.getAsInteger();
        if (!stage || *stage < 0) {
          error = where + ": \"stage\" must be a non-negative integer";
          return std::nullopt;
        }
        entry.stage = *stage;
      } else if (key == "index") {
        std::optional<int64_t> i = kv.second.getAsInteger();
        if (!i || *i < 0) {
          error = where + ": \"index\" must be a non-negative integer";
          return std::nullopt;
        }
        entry.index = *i;
      } else if (key == "strategy") {
        const llvm::json::Array *operands = kv.second.getAsArray();
        if (!operands || operands->empty()) {
          error = where +
                  ": \"strategy\" must be a non-empty array with one array "
                  "of split counts per operand, e.g. [[2, 1], [1, 4]]";
          return std::nullopt;
        }
        for (size_t i = 0; i < operands->size(); ++i) {
          const llvm::json::Array *dims = (*operands)[i].getAsArray();
          if (!dims) {
            error = where + ": operand " + std::to_string(i) +
                    " of \"strategy\" must be an array (one entry per "
                    "dimension)";
            return std::nullopt;
          }
          entry.spec.emplace_back();
          for (size_t d = 0; d < dims->size(); ++d) {
            DimSpec dim;
            std::string why;
            if (!parseDim((*dims)[d], dim, why)) {
              error = where + ": operand " + std::to_string(i) + " dimension " +
                      std::to_string(d) + ": " + why;
              return std::nullopt;
            }
            entry.spec.back().push_back(std::move(dim));
          }
        }
      } else {
        error = where + ": unknown key \"" + key.str() +
                "\" (expected node, pattern, op, index, strategy, partial, "
                "recompute, stage)";
        return std::nullopt;
      }
    }
    if (entry.spec.empty() && !entry.recompute && !entry.stage) {
      error = where + ": missing \"strategy\" (or \"recompute\": true, or "
                      "\"stage\")";
      return std::nullopt;
    }
    if (entry.node.empty() && entry.pattern.empty() && entry.op.empty()) {
      error = where + ": say which ops it is for with \"node\", \"pattern\" "
                      "or \"op\"";
      return std::nullopt;
    }
    if (!entry.node.empty() && !entry.pattern.empty()) {
      error = where + ": give \"node\" or \"pattern\", not both";
      return std::nullopt;
    }
    if (StringRef(entry.op).starts_with("loom."))
      entry.op = entry.op.substr(5);
    file.entries.push_back(std::move(entry));
  }
  return file;
}

namespace {

/// A function's sharding ops by ONNX node, and the nodes in program order.
struct NodeOps {
  llvm::StringMap<SmallVector<Operation *>> byNode;
  std::vector<std::string> order;
};

NodeOps opsByNode(func::FuncOp func) {
  NodeOps ops;
  for (Operation &op : func.getBody().front().without_terminator()) {
    std::string node = nodeName(&op);
    if (node.empty() || !isa<ShardingOpInterface>(op))
      continue;
    auto &list = ops.byNode[node];
    if (list.empty())
      ops.order.push_back(node);
    list.push_back(&op);
  }
  return ops;
}

/// Whether `spec` gives an entry of the right rank for each of the first
/// operands of `op`.
bool operandsFit(Operation *op, const StrategySpec &spec) {
  if (spec.size() > op->getNumOperands())
    return false;
  for (size_t i = 0; i < spec.size(); ++i)
    if (cast<RankedTensorType>(op->getOperand(i).getType()).getRank() !=
        static_cast<int64_t>(spec[i].size()))
      return false;
  return true;
}

/// `matmul(2-d, 2-d), add(...)`: a node's ops with their operands' ranks,
/// for the error that says no op of the node fits.
std::string describeNode(ArrayRef<Operation *> ops) {
  std::string s;
  for (Operation *op : ops) {
    s += (s.empty() ? "" : ", ") + opName(op) + "(";
    for (size_t i = 0; i < op->getNumOperands(); ++i)
      s += (i ? ", " : "") +
           std::to_string(
               cast<RankedTensorType>(op->getOperand(i).getType()).getRank()) +
           "-d";
    s += ")";
  }
  return s;
}

/// The nodes an entry of `kind` (0 op, 1 pattern, 2 node) selects.
bool selectNodes(const StrategyEntry &e, int kind, const NodeOps &ops,
                 const std::string &where, std::vector<std::string> &nodes,
                 std::string &error) {
  if (kind == 2) {
    if (!ops.byNode.count(e.node)) {
      error = where + ": the model has no ONNX node named '" + e.node + "'";
      return false;
    }
    nodes.push_back(e.node);
  } else if (kind == 1) {
    llvm::Expected<llvm::GlobPattern> glob =
        llvm::GlobPattern::create(e.pattern);
    if (!glob) {
      error = where + ": invalid pattern '" + e.pattern +
              "': " + llvm::toString(glob.takeError());
      return false;
    }
    for (const std::string &n : ops.order)
      if (glob->match(n))
        nodes.push_back(n);
    if (nodes.empty()) {
      error = where + ": the pattern '" + e.pattern +
              "' matches no ONNX node of the model";
      return false;
    }
  } else {
    nodes = ops.order;
  }
  return true;
}

/// Sets `value` as `attrName` on every forward op of the entry's nodes (of
/// its kind, if it names one; never the loss when `skipLoss`). `key` is
/// the entry's field, for the error when nothing is marked.
bool markForwardOps(func::FuncOp func, const StrategyEntry &e,
                    const std::vector<std::string> &nodes, NodeOps &ops,
                    StringRef attrName, Attribute value, bool skipLoss,
                    StringRef key, const std::string &where,
                    std::string &error) {
  StepShape step = analyzeStep(func);
  int marked = 0;
  for (const std::string &n : nodes)
    for (Operation *op : ops.byNode[n])
      if (step.forward.contains(op) && !(skipLoss && op == step.loss) &&
          (e.op.empty() || opName(op) == e.op)) {
        op->setAttr(attrName, value);
        ++marked;
      }
  if (!step.training || marked == 0) {
    error = where + ": \"" + key.str() + "\" " +
            (step.training ? "matches no forward op"
                           : "needs a training step (--train)");
    return false;
  }
  return true;
}

/// The op of `ops` the entry applies to: the one at its index, or else the
/// first whose operands fit its strategy; null if none.
Operation *findTarget(ArrayRef<Operation *> ops, const StrategyEntry &e) {
  if (e.index)
    return *e.index < static_cast<int64_t>(ops.size()) ? ops[*e.index]
                                                       : nullptr;
  for (Operation *op : ops)
    if (operandsFit(op, e.spec))
      return op;
  return nullptr;
}

/// The factor axes of the entry's strategy (and partial axes) on `target`,
/// or nullopt with `why`.
std::optional<FactorAxes> entryFactors(Operation *target,
                                       const ShardingRule &rule,
                                       const StrategyEntry &e,
                                       const layout::Mesh &mesh,
                                       std::string &why) {
  SmallVector<RankedTensorType> types;
  for (Value v : target->getOperands())
    types.push_back(cast<RankedTensorType>(v.getType()));
  std::optional<FactorAxes> axes =
      strategyToFactors(rule, types, e.spec, mesh, why);
  if (!axes || e.partial.empty())
    return axes;
  if (!rule.linear) {
    why = "only linear ops (add, sub) can keep partial sums";
    return std::nullopt;
  }
  axes->emplace_back();
  for (const std::string &name : e.partial) {
    std::optional<int> a = mesh.axisIndex(name);
    if (!a) {
      why = "unknown mesh axis '" + name + "' in \"partial\"";
      return std::nullopt;
    }
    axes->back().push_back(*a);
  }
  return axes;
}

/// Sets the entry's strategy as `loom.sharding` on its op in each of
/// `nodes`; a node entry must find its op, and some op must take it.
bool applySpec(func::FuncOp func, const StrategyEntry &e, int kind,
               const std::vector<std::string> &nodes, NodeOps &nodeOps,
               const layout::Mesh &mesh, const std::string &where,
               std::string &error) {
  int applied = 0;
  for (const std::string &n : nodes) {
    SmallVector<Operation *> ops;
    for (Operation *op : nodeOps.byNode[n])
      if (e.op.empty() || opName(op) == e.op)
        ops.push_back(op);
    Operation *target = findTarget(ops, e);
    if (!target) {
      if (kind == 2) {
        error = where + ": node '" + n + "' has no " +
                (e.op.empty() ? "op" : "'" + e.op + "' op") +
                (e.index ? " at index " + std::to_string(*e.index)
                         : " whose operands fit the strategy " +
                               strategyToString(e.spec)) +
                "; its ops are " + describeNode(nodeOps.byNode[n]);
        return false;
      }
      continue;
    }
    std::string why;
    ShardingRule rule = cast<ShardingOpInterface>(target).getShardingRule();
    std::optional<FactorAxes> axes = entryFactors(target, rule, e, mesh, why);
    std::optional<OpLayouts> layouts =
        axes ? deriveLayouts(rule, *axes, mesh, why) : std::nullopt;
    if (!layouts) {
      error = where + " (node '" + n + "', op 'loom." + opName(target) +
              "', strategy " + strategyToString(e.spec) + "): " + why;
      return false;
    }
    target->setAttr(LoomDialect::kShardingAttrName,
                    factorsToAttr(func.getContext(), *axes, mesh));
    ++applied;
  }
  if (!applied) {
    error = where + ": no op " + (e.op.empty() ? "" : "'" + e.op + "' ") +
            "of the model fits the strategy " + strategyToString(e.spec);
    return false;
  }
  return true;
}

} // namespace

bool applyStrategies(func::FuncOp func, const StrategyFile &file,
                     StringRef fileName, const layout::Mesh &mesh,
                     std::string &error) {
  if (!file.mesh.empty() && file.mesh != meshSpec(mesh)) {
    error = fileName.str() + ": written for the mesh " + file.mesh +
            ", but compiling for " + meshSpec(mesh);
    return false;
  }
  NodeOps ops = opsByNode(func);
  MLIRContext *ctx = func.getContext();

  // Op entries, then patterns, then nodes: later assignments win.
  for (int pass = 0; pass < 3; ++pass) {
    for (const StrategyEntry &e : file.entries) {
      int kind = !e.node.empty() ? 2 : !e.pattern.empty() ? 1 : 0;
      if (kind != pass)
        continue;
      std::string where =
          fileName.str() + ": strategy entry " + std::to_string(e.ordinal);
      std::vector<std::string> nodes;
      if (!selectNodes(e, kind, ops, where, nodes, error))
        return false;
      if (e.stage) {
        auto stage = IntegerAttr::get(IntegerType::get(ctx, 64), *e.stage);
        if (!markForwardOps(func, e, nodes, ops, LoomDialect::kStageAttrName,
                            stage, /*skipLoss=*/false, "stage", where, error))
          return false;
        if (e.spec.empty() && !e.recompute)
          continue;
      }
      if (e.recompute) {
        if (!markForwardOps(func, e, nodes, ops,
                            LoomDialect::kRecomputeAttrName, UnitAttr::get(ctx),
                            /*skipLoss=*/true, "recompute", where, error))
          return false;
        if (e.spec.empty())
          continue;
      }
      if (!applySpec(func, e, kind, nodes, ops, mesh, where, error))
        return false;
    }
  }
  return true;
}

std::string writeStrategyFile(func::FuncOp func, const layout::Mesh &mesh) {
  llvm::json::Array list;
  std::map<std::pair<std::string, std::string>, int64_t> seen;
  for (Operation &op : func.getBody().front().without_terminator()) {
    std::string node = nodeName(&op);
    auto iface = dyn_cast<ShardingOpInterface>(op);
    auto attr = op.getAttrOfType<ArrayAttr>(LoomDialect::kShardingAttrName);
    if (node.empty() || !iface || !attr || op.getNumOperands() == 0)
      continue;
    int64_t index = seen[{node, opName(&op)}]++;
    std::string error;
    std::optional<FactorAxes> axes = factorsFromAttr(attr, mesh, error);
    std::optional<OpLayouts> layouts =
        axes ? deriveLayouts(iface.getShardingRule(), *axes, mesh, error)
             : std::nullopt;
    if (!layouts)
      continue;
    llvm::json::Array operands;
    for (const auto &dims : layoutsToStrategy(*layouts, mesh)) {
      llvm::json::Array entry;
      for (const DimSpec &d : dims) {
        if (d.axes.empty()) {
          entry.push_back(int64_t(1));
          continue;
        }
        std::string s;
        for (const std::string &a : d.axes)
          s += (s.empty() ? "" : "*") + a;
        entry.push_back(s);
      }
      operands.push_back(std::move(entry));
    }
    llvm::json::Object entry{{"node", node},
                             {"op", opName(&op)},
                             {"index", index},
                             {"strategy", std::move(operands)}};
    if (axes->size() > iface.getShardingRule().factors.size()) {
      std::string partial;
      for (int a : axes->back())
        partial += (partial.empty() ? "" : "*") + mesh.axisName(a);
      entry["partial"] = partial;
    }
    list.push_back(std::move(entry));
  }
  // One entry per line, so that files diff well.
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "{\n  \"mesh\": " << llvm::json::Value(meshSpec(mesh))
     << ",\n  \"strategies\": [";
  for (size_t i = 0; i < list.size(); ++i)
    os << (i ? ",\n    " : "\n    ") << list[i];
  os << "\n  ]\n}\n";
  return out;
}

} // namespace loom::sharding
