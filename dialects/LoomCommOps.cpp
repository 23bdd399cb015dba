//===- LoomCommOps.cpp - Verifiers of the collectives ---------------------===//

#include "dialects/LoomDialect.h"

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The mesh of the nearest enclosing op that has `loom.mesh`.
MeshAttr enclosingMesh(Operation *op) {
  for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
    if (auto mesh = p->getAttrOfType<MeshAttr>(LoomDialect::kMeshAttrName))
      return mesh;
  return {};
}

/// Checks `axis` against the mesh and returns its size (0 on failure).
int64_t axisSize(Operation *op, MeshAttr mesh, int64_t axis) {
  if (!mesh) {
    op->emitOpError("must be inside a function with a `loom.mesh`");
    return 0;
  }
  if (axis < 0 || axis >= static_cast<int64_t>(mesh.getNumAxes())) {
    op->emitOpError("mesh axis ")
        << axis << " is out of range for " << mesh << "";
    return 0;
  }
  return mesh.getAxisSizes()[axis];
}

/// Same element type and rank; every dimension equal except `dim`, which
/// must be `in * mul / div`.
LogicalResult checkShapes(Operation *op, int64_t dim, int64_t mul, int64_t div,
                          int64_t toDim = -1) {
  RankedTensorType in = typeOf(op->getOperand(0)),
                   out = typeOf(op->getResult(0));
  if (in.getElementType() != out.getElementType() ||
      in.getRank() != out.getRank())
    return op->emitOpError("result ")
           << out << " must have the input's element type and rank (" << in
           << ")";
  for (int64_t d : {dim, toDim})
    if (d != -1 && (d < 0 || d >= in.getRank()))
      return op->emitOpError("dimension ")
             << d << " is out of range for rank " << in.getRank();
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t expected = in.getDimSize(d);
    if (d == dim) {
      if (expected * mul % div != 0)
        return op->emitOpError("dimension ")
               << d << " of size " << expected << " does not divide by " << div;
      expected = expected * mul / div;
    }
    if (d == toDim) {
      if (expected % mul != 0)
        return op->emitOpError("dimension ")
               << d << " of size " << expected << " does not divide by " << mul;
      expected /= mul;
    }
    if (out.getDimSize(d) != expected)
      return op->emitOpError("result dimension ")
             << d << " is " << out.getDimSize(d) << ", expected " << expected;
  }
  return success();
}

} // namespace

LogicalResult AllReduceOp::verify() {
  MeshAttr mesh = enclosingMesh(*this);
  ArrayRef<int64_t> axes = getAxes();
  if (axes.empty())
    return emitOpError("needs at least one axis");
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!axisSize(*this, mesh, axes[i]))
      return failure();
    if (i && axes[i] <= axes[i - 1])
      return emitOpError("axes must be strictly increasing");
  }
  if (getInput().getType() != getResult().getType())
    return emitOpError("result must have the input's type");
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  int64_t n = axisSize(*this, enclosingMesh(*this), getAxis());
  return n ? checkShapes(*this, getDim(), 1, n) : failure();
}

LogicalResult AllGatherOp::verify() {
  int64_t n = axisSize(*this, enclosingMesh(*this), getAxis());
  return n ? checkShapes(*this, getDim(), n, 1) : failure();
}

LogicalResult AllToAllOp::verify() {
  int64_t n = axisSize(*this, enclosingMesh(*this), getAxis());
  if (!n)
    return failure();
  if (getDim() == getToDim())
    return emitOpError("dim and to_dim must differ");
  return checkShapes(*this, getDim(), n, 1, getToDim());
}

LogicalResult LocalSplitOp::verify() {
  int64_t n = axisSize(*this, enclosingMesh(*this), getAxis());
  return n ? checkShapes(*this, getDim(), 1, n) : failure();
}

LogicalResult MakePartialOp::verify() {
  if (!axisSize(*this, enclosingMesh(*this), getAxis()))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError("result must have the input's type");
  return success();
}

bool loom::isCollective(Operation *op) {
  return isa<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp,
             LocalSplitOp, MakePartialOp>(op);
}
