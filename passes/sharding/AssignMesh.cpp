//===- AssignMesh.cpp - loom-assign-mesh ----------------------------------===//
//
// Puts @main on its device mesh: the named axes of `mesh`, without the
// pipeline axis (each stage runs on the rest), and the ZeRO level.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/ShardingSupport.h"
#include "compiler/analysis/StepCost.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_ASSIGNMESH
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// "NAME=N" pairs, outermost first, into the dialect's mesh attribute;
/// nullopt with `error` set.
std::optional<MeshAttr> parseMesh(MLIRContext *context, StringRef text,
                                  std::string &error) {
  SmallVector<StringRef> parts;
  text.split(parts, ',');
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  for (StringRef part : parts) {
    auto [name, value] = part.trim().split('=');
    int64_t size = 0;
    if (name.empty() || value.empty() || !part.contains('=') ||
        value.getAsInteger(10, size) || size < 1) {
      error =
          "--mesh expects named axes like dp=2,tp=4, got '" + text.str() + "'";
      return std::nullopt;
    }
    for (StringAttr n : names)
      if (n.getValue() == name) {
        error = "--mesh names axis '" + name.str() + "' twice";
        return std::nullopt;
      }
    names.push_back(StringAttr::get(context, name));
    sizes.push_back(size);
  }
  return MeshAttr::get(context, names, sizes);
}

struct AssignMeshPass : public loom::impl::AssignMeshBase<AssignMeshPass> {
  using AssignMeshBase::AssignMeshBase;
  void runOnOperation() override;
};

void AssignMeshPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *context = &getContext();
  auto fail = [&](const Twine &message) {
    module.emitError(message);
    signalPassFailure();
  };
  std::string error;
  std::optional<MeshAttr> meshAttr = parseMesh(context, mesh, error);
  if (!meshAttr)
    return fail(error);
  if (!sharding::toMesh(*meshAttr, error))
    return fail("--mesh: " + error);
  func::FuncOp func = module.lookupSymbol<func::FuncOp>("main");
  if (std::optional<unsigned> pp = meshAttr->getAxisIndex("pp")) {
    if (*pp != 0)
      return fail("--mesh: the pipeline axis pp must come first, got '" + mesh +
                  "'");
    if (!func || !sharding::analyzeStep(func).training)
      return fail("--mesh pp=N pipelines a training step: it needs --train");
    // One device per stage: a one-device submesh.
    SmallVector<StringAttr> names(meshAttr->getAxisNames().drop_front());
    SmallVector<int64_t> sizes(meshAttr->getAxisSizes().drop_front());
    if (names.empty()) {
      names.push_back(StringAttr::get(context, "dp"));
      sizes.push_back(1);
    }
    meshAttr = MeshAttr::get(context, names, sizes);
    if (!sharding::toMesh(*meshAttr, error))
      return fail("--mesh: " + error);
  }
  if (!func)
    return fail("no function @main");
  if (zero < 0 || zero > 3)
    return fail("the ZeRO level must be 0, 1, 2 or 3, got " +
                std::to_string(zero));
  func->setAttr(LoomDialect::kMeshAttrName, *meshAttr);
  if (zero > 0)
    func->setAttr(LoomDialect::kZeroAttrName,
                  OpBuilder(func).getI64IntegerAttr(zero));
}

} // namespace
