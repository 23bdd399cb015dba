//===- LoomCommOps.td - Collectives of per-device programs --*- tablegen -*-===//
//
// The redistribution steps `loom-partition` inserts into a per-device (SPMD)
// program. Operands and results have LOCAL types. Axes are indices into the
// enclosing function's `loom.mesh`; a step's group is the set of devices that
// differ from this one only along its axes, member i being the device at
// coordinate i. Included by LoomOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMM_OPS_TD
#define LOOM_COMM_OPS_TD

class Loom_CollectiveOp<string mnemonic, string what>
    : Loom_Op<mnemonic> {
  let summary = what;
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

// Every collective may carry `predicted_bytes`: the bytes per device the
// layout math (bus-bandwidth factors of the planner's cost) predicts it
// moves; the runtime reports it next to what it measures.
def Loom_PredictedBytes : OptionalAttr<I64Attr>;

def Loom_AllReduceOp : Loom_CollectiveOp<"all_reduce",
    "sum over the devices of a group"> {
  let description = [{
    Every device of the group over `axes` (strictly increasing, at least
    one) receives the sum of the group's inputs; the type is kept.
  }];
  let arguments = (ins Loom_NumericTensor:$input, DenseI64ArrayAttr:$axes,
                       Loom_PredictedBytes:$predicted_bytes);
}

def Loom_ReduceScatterOp : Loom_CollectiveOp<"reduce_scatter",
    "sum over a group, scattered along a dimension"> {
  let description = [{
    The group over `axis` sums its inputs; the device at coordinate c keeps
    chunk c of `dim`, whose size is divided by the axis size.
  }];
  let arguments = (ins Loom_NumericTensor:$input, I64Attr:$axis, I64Attr:$dim,
                       Loom_PredictedBytes:$predicted_bytes);
}

def Loom_AllGatherOp : Loom_CollectiveOp<"all_gather",
    "concatenation over a group along a dimension"> {
  let description = [{
    Every device of the group over `axis` receives the group's inputs
    concatenated along `dim` in coordinate order.
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis, I64Attr:$dim,
                       Loom_PredictedBytes:$predicted_bytes);
}

def Loom_AllToAllOp : Loom_CollectiveOp<"all_to_all",
    "moves a split from one dimension to another"> {
  let description = [{
    The input is cut into as many chunks along `to_dim` as the group over
    `axis` has devices; chunk j goes to the device at coordinate j, and the
    received chunks are concatenated along `dim`. So `dim` grows and
    `to_dim` shrinks by the axis size.
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis, I64Attr:$dim,
                       I64Attr:$to_dim, Loom_PredictedBytes:$predicted_bytes);
}

def Loom_LocalSplitOp : Loom_CollectiveOp<"local_split",
    "keeps this device's chunk of a dimension (no communication)"> {
  let description = [{
    The device at coordinate c of `axis` keeps chunk c of `dim`, whose size
    is divided by the axis size.
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis, I64Attr:$dim,
                       Loom_PredictedBytes:$predicted_bytes);
}

def Loom_MakePartialOp : Loom_CollectiveOp<"make_partial",
    "turns a replica into a partial sum (no communication)"> {
  let description = [{
    The device at coordinate 0 of `axis` keeps its input, the others
    produce zeros, so the group's sum is the input. The type is kept.
  }];
  let arguments = (ins Loom_NumericTensor:$input, I64Attr:$axis,
                       Loom_PredictedBytes:$predicted_bytes);
}

// Between the stages of a pipelined step (each stage a function of its
// own, run by the ranks of its submesh): the rank at the same position of
// stage `peer_stage` receives what this one sends, matched by `tag`. They
// talk to another program, so they are not Pure like the other loom ops.
def Loom_SendOp : Op<Loom_Dialect, "send", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "sends a value to the same rank of another pipeline stage";
  let description = [{
    Buffered: the sender does not wait for the receiver.
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$peer_stage, I64Attr:$tag);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_RecvOp : Op<Loom_Dialect, "recv", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "receives a value from the same rank of another pipeline stage";
  let description = [{
    Waits for the `loom.send` of the same tag from stage `peer_stage`; the
    value has the sent value's type.
  }];
  let arguments = (ins I64Attr:$peer_stage, I64Attr:$tag);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

#endif // LOOM_COMM_OPS_TD
