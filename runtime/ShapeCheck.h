//===- ShapeCheck.h - Validate one plan instruction's shapes ----*- C++ -*-===//
//
// The runtime trusts no plan: before a kernel runs, the validator checks that
// each instruction's operand and result types are what the op's rule gives,
// so that a corrupt or mismatched plan is an error, never an out-of-bounds
// access. The rules are the loom dialect's (dialects/LoomOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SHAPECHECK_H
#define LOOM_RUNTIME_SHAPECHECK_H

#include "common/layout/Mesh.h"
#include "runtime/Kernel.h"
#include "runtime/Tensor.h"

#include <string>
#include <vector>

namespace loom::rt {

struct TypeRef {
  DType dtype;
  const Shape *shape;
};

/// Returns "" if `op` with these attributes maps `operands` to `results`,
/// else what is wrong.
std::string checkInstruction(const std::string &op, const Attrs &attrs,
                             const std::vector<TypeRef> &operands,
                             const std::vector<TypeRef> &results);

/// Returns "" if the collective `op` (all_reduce, reduce_scatter, all_gather,
/// all_to_all, local_split, make_partial; runtime/comm/Collectives.h) with
/// these attributes maps `operands` to `results` on a mesh with `meshAxes`
/// (empty: the plan has no mesh), else what is wrong: the mesh axis indices
/// are in range and distinct, `dim` and `to_dim` are dimensions of the
/// operand, the split dimension divides by the group size, the result's
/// dimension is the operand's times or divided by it, every other dimension
/// and the element type are the operand's, and sums are over summable types.
/// Takes the axes rather than a layout::Mesh so that it needs no library.
std::string checkCollective(const std::string &op, const Attrs &attrs,
                            const std::vector<layout::MeshAxis> &meshAxes,
                            const std::vector<TypeRef> &operands,
                            const std::vector<TypeRef> &results);

/// The numpy broadcast of two shapes; false if they do not broadcast.
bool broadcastShapes(const Shape &a, const Shape &b, Shape &out);

} // namespace loom::rt

#endif // LOOM_RUNTIME_SHAPECHECK_H
