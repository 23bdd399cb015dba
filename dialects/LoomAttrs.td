//===- LoomAttrs.td - Mesh, layout and strategy attributes --*- tablegen -*-===//

#ifndef LOOM_ATTRS_TD
#define LOOM_ATTRS_TD

include "dialects/LoomDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

class Loom_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Loom_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Loom_MeshAttr : Loom_Attr<"Mesh", "mesh"> {
  let summary = "device matrix: an ordered list of named mesh axes";
  let description = [{
    The device mesh, written `#loom.mesh<dp = 2, tp = 4>`. Ranks are laid out
    row-major over the axes, so the last axis varies fastest (adjacent ranks):
    put tensor parallelism there. A size need not be a power of two.

    Constraints (enforced by the verifier):
      1. there is at least one axis;
      2. every axis name is non-empty;
      3. no axis name appears twice;
      4. every size is at least 1;
      5. the mesh has at most 2^31 devices (the product of the sizes).
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::StringAttr", "axis names">:$axisNames,
    ArrayRefParameter<"int64_t", "axis sizes">:$axisSizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static constexpr int64_t kMaxDevices = int64_t(1) << 31;
    unsigned getNumAxes() const { return getAxisSizes().size(); }
    /// Number of devices: the product of the axis sizes.
    int64_t getNumDevices() const;
    /// The index of the named axis, or std::nullopt if the mesh has none.
    std::optional<unsigned> getAxisIndex(::llvm::StringRef name) const;
  }];
}

def Loom_TensorLayoutAttr : Loom_Attr<"TensorLayout", "layout"> {
  let summary = "how a tensor is split over a mesh";
  let description = [{
    For each tensor dimension, the ordered list of mesh axes it is split over
    (empty: not split), plus the mesh axes over which the local value is a
    partial sum. Axes the layout does not name hold replicas. Written
    `#loom.layout<#loom.mesh<dp = 2, tp = 4>, [[dp], [], [tp]]>`, with
    `, partial = [tp]` when there are partial-sum axes.

    Constraints (enforced by the verifier):
      1. every dimension entry is a list of axis names;
      2. every named axis is an axis of the mesh;
      3. no mesh axis is used more than once, across dimensions and the
         partial-sum list together.
    Where a layout is attached to a tensor, its rank must equal the tensor's
    and every dimension must be divisible by the product of its axes' sizes.
  }];
  let parameters = (ins
    "MeshAttr":$mesh,
    "::mlir::ArrayAttr":$dims,
    "::mlir::ArrayAttr":$partial);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    unsigned getRank() const { return getDims().size(); }
    /// The mesh axes dimension `dim` is split over, outermost first.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxes() const;
    /// The number of shards of dimension `dim`.
    int64_t getSplitCount(unsigned dim) const;
    /// Checks rank and divisibility against a global shape.
    ::llvm::LogicalResult verifyForShape(
        ::llvm::ArrayRef<int64_t> shape,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError) const;
  }];
}

def Loom_StrategyAttr : Loom_Attr<"Strategy", "strategy"> {
  let summary = "MindSpore-style shard strategy: split counts per dimension";
  let description = [{
    Per tensor operand, how many ways each dimension is split, e.g. a matmul's
    `#loom.strategy<[[2, 1], [1, 4]]>`; optionally the outputs' counts after
    `->`: `#loom.strategy<[[2, 4], [4, 1]] -> [[2, 1]]>`.

    Constraints (enforced by the verifier):
      1. there is at least one input entry;
      2. every split count is at least 1.
    Where the strategy is attached to an op, it needs one entry per tensor
    operand, each of that operand's rank; every count must divide its
    dimension, and each entry's product must not exceed the mesh's devices.
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::DenseI64ArrayAttr", "input split counts">:$inputs,
    OptionalArrayRefParameter<"::mlir::DenseI64ArrayAttr",
                              "output split counts">:$outputs);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Enumerated annotations: the values a phase writes and a later one reads.
//===----------------------------------------------------------------------===//

def Loom_ScheduleGPipe : I32EnumAttrCase<"GPipe", 0, "gpipe">;
def Loom_ScheduleOneFOneB : I32EnumAttrCase<"OneFOneB", 1, "1f1b">;
def Loom_ScheduleInterleaved : I32EnumAttrCase<"Interleaved", 2, "interleaved">;
def Loom_PipelineSchedule : I32EnumAttr<"PipelineSchedule",
    "the pipeline schedule of the micro-batches",
    [Loom_ScheduleGPipe, Loom_ScheduleOneFOneB, Loom_ScheduleInterleaved]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}

def Loom_PipelineScheduleAttr
    : EnumAttr<Loom_Dialect, Loom_PipelineSchedule, "schedule"> {
  let summary = "a pipeline schedule: gpipe, 1f1b or interleaved";
  let description = [{
    The `schedule` of a stage function's `loom.pipeline` dictionary, written
    `#loom.schedule<gpipe>`, `#loom.schedule<"1f1b">` (the spelling is not a
    bare keyword, so it is quoted) or `#loom.schedule<interleaved>`. The
    spellings are the ones `loom compile --schedule` takes.
  }];
  let assemblyFormat = ?;
  let hasCustomAssemblyFormat = 1;
}

def Loom_HyperLr : I32EnumAttrCase<"Lr", 0, "lr">;
def Loom_HyperStep : I32EnumAttrCase<"Step", 1, "step">;
def Loom_Hyper : I32EnumAttr<"Hyper",
    "a per-step scalar the runtime sets", [Loom_HyperLr, Loom_HyperStep]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}

def Loom_HyperAttr : EnumAttr<Loom_Dialect, Loom_Hyper, "hyper"> {
  let summary = "a per-step scalar argument: the learning rate or the step";
  let description = [{
    The `loom.hyper` annotation of a scalar argument of a training step,
    written `#loom.hyper<lr>` or `#loom.hyper<step>`; the plan names the
    value by the spelling.
  }];
  let assemblyFormat = ?;
  let hasCustomAssemblyFormat = 1;
}

// The boundaries between the compiler's phases whose annotations
// verifyPhaseContract checks (PhaseContract.h); an enum without an
// attribute, for loom-verify-phase's option.
def Loom_PhaseImported : I32EnumAttrCase<"Imported", 0, "imported">;
def Loom_PhaseTrainingStep
    : I32EnumAttrCase<"TrainingStep", 1, "training-step">;
def Loom_PhaseSharded : I32EnumAttrCase<"Sharded", 2, "sharded">;
def Loom_PhasePartitioned : I32EnumAttrCase<"Partitioned", 3, "partitioned">;
def Loom_PhasePipelined : I32EnumAttrCase<"Pipelined", 4, "pipelined">;
def Loom_Phase : I32EnumAttr<"Phase", "a boundary between compiler phases",
    [Loom_PhaseImported, Loom_PhaseTrainingStep, Loom_PhaseSharded,
     Loom_PhasePartitioned, Loom_PhasePipelined]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}

#endif // LOOM_ATTRS_TD
