//===- StrategyFile.h - User strategies as JSON ------------------*- C++
//-*-===//
//
// The strategy file of `loom compile --strategy` and `--save-strategy`:
//
//   {
//     "mesh": "dp=2,tp=2",                       (optional: checked)
//     "strategies": [
//       {"node": "/fc1/MatMul", "strategy": [[1, 1], [1, "tp"]]},
//       {"pattern": "/h.*/mlp/*", "op": "matmul", "strategy": [[2, 1], [1,
//       2]]},
//       {"op": "conv2d", "strategy": [["dp", 1, 1, 1], [1, 1, 1, 1]]},
//       {"node": "/fc1/MatMul", "op": "matmul", "index": 1, "strategy": ...},
//       {"node": "/h.0/Add", "op": "add", "index": 3, "strategy": ...,
//        "partial": "tp"},
//       {"pattern": "/h.*/attn/*", "recompute": true},
//       {"pattern": "/h.[4-7]/*", "stage": 1}
//     ]
//   }
//
// A strategy gives, per operand, one entry per dimension: a split count
// (1 = not split; counts map to mesh axes outermost first) or the mesh
// axes by name ("tp", or "dp*tp" for several, outermost first). An entry
// selects ops by ONNX node name, by a glob pattern over node names, or by
// loom op name (with or without `loom.`), and may combine them. Within a
// node it applies to the op at `index` among the node's ops of that kind
// (in program order), or else to the first whose operands fit the
// strategy: the forward op, since gradients come after it. Node entries
// override pattern entries, which override op entries. `partial` (saved
// files only need it) keeps a linear op's operands and result partial sums
// over the named axes. `"recompute": true` marks every forward op of the
// entry's nodes for recompute in the backward pass (see Recompute.h).
// `"stage": s` runs the entry's nodes on pipeline stage s (with pp=P in the
// mesh; see Pipeline.h); nodes without a stage join their inputs' latest.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SHARDING_STRATEGYFILE_H
#define LOOM_PASSES_SHARDING_STRATEGYFILE_H

#include "compiler/analysis/ShardingSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace loom::sharding {

struct StrategyEntry {
  std::string node, pattern, op;
  std::optional<int64_t> index;
  StrategySpec spec;
  /// For linear ops (add, sub): mesh axes over which the operands and the
  /// result stay partial sums.
  std::vector<std::string> partial;
  /// Recompute the forward ops of the entry's nodes in the backward pass
  /// (an entry may carry only this, without a strategy).
  bool recompute = false;
  /// The pipeline stage of the entry's nodes' forward ops.
  std::optional<int64_t> stage;
  /// 1-based position in the file, for messages.
  size_t ordinal = 0;
};

struct StrategyFile {
  std::string mesh;
  std::vector<StrategyEntry> entries;
};

/// Parses the JSON text of `fileName`; errors say where and what.
std::optional<StrategyFile> parseStrategyFile(llvm::StringRef text,
                                              llvm::StringRef fileName,
                                              std::string &error);

/// Sets `loom.sharding` on the ops the entries select. Fails with an error
/// naming the file, the entry, the ONNX node, the op and the rule broken.
bool applyStrategies(mlir::func::FuncOp func, const StrategyFile &file,
                     llvm::StringRef fileName,
                     const layout::Mesh &mesh, std::string &error);

/// After loom-propagate-sharding: every op that has an ONNX node name, with
/// its operands' layouts by axis name, keyed by node, op and index, so that
/// loading the file back reproduces the same sharding.
std::string writeStrategyFile(mlir::func::FuncOp func,
                              const layout::Mesh &mesh);

/// `dp=2,tp=4` for a mesh.
std::string meshSpec(const layout::Mesh &mesh);

} // namespace loom::sharding

#endif // LOOM_PASSES_SHARDING_STRATEGYFILE_H
