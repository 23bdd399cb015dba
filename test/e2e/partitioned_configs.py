"""The configurations compare_partitioned.py checks: per model, a name, a mesh, a
strategy file's entries (or None) and compile flags. Megatron's layouts per model
(MEGATRON), the LLaMA decoder's from models/llama_megatron.json, the vocabulary-parallel
LM head, the fixed lists (fixed_configs) and padded ZeRO (padded_configs)."""
import json
import os

MEGATRON = {
    # Column split of the first matmul of each pair, row split of the second.
    "mlp": lambda dp: [
        {"node": "/fc1/Gemm", "op": "matmul", "strategy": [[dp, 1], ["tp", 1]]},
        {"node": "/fc2/Gemm", "op": "matmul", "strategy": [[dp, "tp"], [1, "tp"]]},
    ],
    "gpt6": lambda dp: MEGATRON["gpt"](dp),
    "gpt": lambda dp: [
        {"pattern": "/blocks.*/attn/[qkv]/MatMul", "strategy": [[dp, 1, 1], [1, "tp"]]},
        {"pattern": "/blocks.*/attn/proj/MatMul", "strategy": [[dp, 1, "tp"], ["tp", 1]]},
        {"pattern": "/blocks.*/mlp/fc/MatMul", "strategy": [[dp, 1, 1], [1, "tp"]]},
        {"pattern": "/blocks.*/mlp/proj/MatMul", "strategy": [[dp, 1, "tp"], ["tp", 1]]},
    ],
    "cnn": lambda dp: [
        {"node": "/layer1/conv1/Conv", "strategy": [[dp, 1, 1, 1], ["tp", 1, 1, 1]]},
        {"node": "/layer1/conv2/Conv", "strategy": [[dp, "tp", 1, 1], [1, "tp", 1, 1]]},
    ],
}



def llama_megatron(dp, tp=2, kv_heads=2):
    """models/llama_megatron.json with dp (an axis name, or 1 without one): q, k, v, gate
    and up column-parallel, o and down row-parallel. The file splits the KV heads over tp;
    where tp does not divide the model's KV heads they stay replicated."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "models", "llama_megatron.json")
    with open(path) as f:
        entries = json.load(f)["strategies"]
    result = []
    for e in entries:
        strategy = [[dp if d == "dp" else d for d in operand] for operand in e["strategy"]]
        if e["pattern"].endswith("[kv]/MatMul") and kv_heads % tp != 0:
            strategy[1] = [1, 1]
        result.append(dict(e, strategy=strategy))
    return result


MEGATRON["llama"] = llama_megatron


def vocab_parallel(entries, dp):
    """Megatron's vocabulary-parallel LM head: its output columns (the vocabulary) split
    over tp, and the cross-entropy kept split (no gather of the logits)."""
    return entries + [{"node": "/lm_head/MatMul", "strategy": [[dp, 1, 1], [1, "tp"]]}]

# The encoder classifier: its feed-forward pairs (torch's attention runs on [seq, batch, d]
# with q, k and v from one fused projection; the search splits that).
MEGATRON["encoder"] = lambda dp: [
    {"pattern": "/encoder/layers.*/linear1/MatMul", "strategy": [[dp, 1, 1], [1, "tp"]]},
    {"pattern": "/encoder/layers.*/linear2/MatMul", "strategy": [[dp, 1, "tp"], ["tp", 1]]},
]


# The LLaMA and encoder configurations --reduced keeps (under the sanitizers, where each
# takes 5x as long): one of each kind, tensor parallel, the search and the pipeline.
LLAMA_REDUCED = ("megatron dp=2,tp=2", "auto dp=2,tp=2", "pipeline pp=2 1f1b m=4")


def padded_configs(model):
    """ZeRO over 3 data-parallel ranks (a --batch divisible by 3): no dimension of the
    bundled models divides by 3, so optimizer sharding pads every parameter and its
    optimizer state with zeros (the forward reads the leading block, the gradient is
    padded where it is made); alone, with Megatron tp, recompute and a pipeline."""
    adamw = ["--optimizer", "adamw", "--eps", "1e-3"]
    return [
        ("padded zero1 adamw dp=3", "dp=3", None, adamw + ["--zero", "1"]),
        ("padded zero2 sgd dp=3", "dp=3", None, ["--optimizer", "sgd", "--zero", "2"]),
        ("padded zero3 adamw dp=3", "dp=3", None, adamw + ["--zero", "3"]),
        ("padded zero3 momentum dp=3,tp=2", "dp=3,tp=2", MEGATRON[model]("dp"),
         ["--optimizer", "momentum", "--zero", "3"]),
        ("padded zero3 recompute layers dp=3", "dp=3", None,
         adamw + ["--zero", "3", "--recompute", "layers"]),
        ("padded pipeline pp=2,dp=3 zero3 1f1b m=2", "pp=2,dp=3", None,
         ["--optimizer", "sgd", "--zero", "3", "--schedule", "1f1b", "--micro-batches", "2"]),
    ]


def fixed_configs(model, reduced=False):
    if model == "llama" and reduced:
        return [c for c in fixed_configs(model) if c[0] in LLAMA_REDUCED]
    if model == "llama":
        # Megatron from models/llama_megatron.json: KV heads split over tp=2 (2 KV heads),
        # replicated on tp=4; the search; 1F1B pipelines, alone and with Megatron.
        adamw = ["--optimizer", "adamw", "--eps", "1e-3"]
        return [
            ("megatron tp=2", "tp=2", llama_megatron(1), ["--optimizer", "sgd"]),
            ("megatron tp=4 kv replicated", "tp=4", llama_megatron(1, tp=4),
             ["--optimizer", "sgd"]),
            ("megatron dp=2,tp=2", "dp=2,tp=2", llama_megatron("dp"), ["--optimizer", "sgd"]),
            ("adamw dp=2,tp=2", "dp=2,tp=2", llama_megatron("dp"), adamw),
            ("vocab-parallel megatron dp=2,tp=2", "dp=2,tp=2",
             vocab_parallel(llama_megatron("dp"), "dp"), ["--optimizer", "sgd"]),
            ("auto dp=2,tp=2", "dp=2,tp=2", None, ["--optimizer", "sgd", "--mode", "auto"]),
            # With ample memory the search splits nothing; 3.5 MB (37% of that plan) makes
            # it split the heads and the batch and shard parameters (ZeRO-3).
            ("auto dp=2,tp=2 memory 3.5 MB", "dp=2,tp=2", None,
             ["--optimizer", "sgd", "--mode", "auto", "--memory-limit", "3500000"]),
            ("pipeline pp=2 1f1b m=4", "pp=2", None,
             ["--optimizer", "sgd", "--schedule", "1f1b", "--micro-batches", "4"]),
            ("pipeline pp=2,tp=2 megatron 1f1b m=2", "pp=2,tp=2", llama_megatron(1),
             ["--optimizer", "sgd", "--schedule", "1f1b", "--micro-batches", "2"]),
        ]
    if model == "encoder":
        # The nn.TransformerEncoder classifier with its boolean padding mask: data
        # parallel, Megatron feed-forwards with dp (SGD and AdamW), the search, and 1F1B
        # pipelines alone and with Megatron.
        adamw = ["--optimizer", "adamw", "--eps", "1e-3"]
        configs = [
            ("data dp=2", "dp=2", None, ["--optimizer", "sgd"]),
            ("megatron dp=2,tp=2", "dp=2,tp=2", MEGATRON[model]("dp"), ["--optimizer", "sgd"]),
            ("adamw dp=2,tp=2", "dp=2,tp=2", MEGATRON[model]("dp"), adamw),
            ("auto dp=2,tp=2", "dp=2,tp=2", None, ["--optimizer", "sgd", "--mode", "auto"]),
            # With ample memory the search splits nothing (677 KiB per device); 400 KB
            # makes it split activations and shard parameters (ZeRO-3).
            ("auto dp=2,tp=2 memory 400 KB", "dp=2,tp=2", None,
             ["--optimizer", "sgd", "--mode", "auto", "--memory-limit", "400000"]),
            ("pipeline pp=2 1f1b m=4", "pp=2", None,
             ["--optimizer", "sgd", "--schedule", "1f1b", "--micro-batches", "4"]),
            ("pipeline pp=2,tp=2 megatron 1f1b m=2", "pp=2,tp=2", MEGATRON[model](1),
             ["--optimizer", "sgd", "--schedule", "1f1b", "--micro-batches", "2"]),
        ]
        if reduced:
            return [c for c in configs if c[0] in LLAMA_REDUCED]
        return configs
    if model == "gptv":
        # Under 20 MB (the unconstrained plan needs 43 MiB) the search splits the LM
        # head and the loss over the vocabulary.
        return [("auto vocab-parallel dp=2,tp=2 memory 20 MB", "dp=2,tp=2", None,
                 ["--optimizer", "sgd", "--mode", "auto", "--memory-limit", "20000000"])]
    if model == "gpt6":
        # Interleaved 1F1B on 4 stages (8 chunks of the 9 layers), with dp, with
        # Megatron tp, with ZeRO and recompute.
        def mb(m):
            return ["--micro-batches", str(m), "--schedule", "interleaved"]
        return [
            ("pipeline pp=4 interleaved v=2 m=4", "pp=4", None, ["--optimizer", "sgd"] + mb(4)),
            ("pipeline pp=4 interleaved v=2 m=8 momentum", "pp=4", None,
             ["--optimizer", "momentum"] + mb(8)),
            ("pipeline pp=4,dp=2 interleaved v=2 m=4 momentum", "pp=4,dp=2", None,
             ["--optimizer", "momentum"] + mb(4)),
            ("pipeline pp=4,tp=2 megatron interleaved adamw m=4", "pp=4,tp=2",
             MEGATRON[model](1), ["--optimizer", "adamw", "--eps", "1e-3"] + mb(4)),
            ("pipeline pp=4,dp=2 interleaved zero3 recompute layers m=4", "pp=4,dp=2", None,
             ["--optimizer", "sgd", "--zero", "3", "--recompute", "layers"] + mb(4)),
            ("pipeline pp=4,dp=2 interleaved zero1 adamw auto m=4", "pp=4,dp=2", None,
             ["--optimizer", "adamw", "--eps", "1e-3", "--zero", "1", "--mode", "auto"]
             + mb(4)),
        ]
    configs = []
    for n in (2, 4, 8):
        configs.append((f"data dp={n}", f"dp={n}", None, ["--optimizer", "sgd"]))
    for n in (2, 4):
        configs.append((f"megatron tp={n}", f"tp={n}", MEGATRON[model](1), ["--optimizer", "sgd"]))
    configs.append(("megatron dp=2,tp=2", "dp=2,tp=2", MEGATRON[model]("dp"), ["--optimizer", "sgd"]))
    configs.append(("megatron dp=2,tp=4", "dp=2,tp=4", MEGATRON[model]("dp"), ["--optimizer", "sgd"]))
    if model == "gpt":
        # The LM head split over the vocabulary, the loss kept split.
        configs.append(("vocab-parallel megatron tp=2", "tp=2",
                        vocab_parallel(MEGATRON[model](1), 1), ["--optimizer", "sgd"]))
        configs.append(("vocab-parallel megatron tp=4", "tp=4",
                        vocab_parallel(MEGATRON[model](1), 1), ["--optimizer", "sgd"]))
        configs.append(("vocab-parallel megatron dp=2,tp=2", "dp=2,tp=2",
                        vocab_parallel(MEGATRON[model]("dp"), "dp"), ["--optimizer", "sgd"]))
        configs.append(("vocab-parallel adamw dp=2,tp=2", "dp=2,tp=2",
                        vocab_parallel(MEGATRON[model]("dp"), "dp"),
                        ["--optimizer", "adamw", "--eps", "1e-3"]))
        configs.append(("vocab-parallel pipeline pp=2,tp=2 1f1b m=2", "pp=2,tp=2",
                        vocab_parallel(MEGATRON[model](1), 1),
                        ["--optimizer", "sgd", "--schedule", "1f1b", "--micro-batches", "2"]))
    configs.append(("momentum dp=2,tp=2", "dp=2,tp=2", MEGATRON[model]("dp"),
                    ["--optimizer", "momentum"]))
    # Adam turns a gradient that is rounding noise into an update of size lr; a large
    # epsilon keeps such elements' updates small, so the comparison sees the update rule.
    configs.append(("adamw dp=2,tp=2", "dp=2,tp=2", MEGATRON[model]("dp"),
                    ["--optimizer", "adamw", "--eps", "1e-3"]))
    # Optimizer sharding (ZeRO) over the data-parallel axes, alone and with tp.
    configs.append(("zero1 adamw dp=4", "dp=4", None,
                    ["--optimizer", "adamw", "--eps", "1e-3", "--zero", "1"]))
    configs.append(("zero2 sgd dp=8", "dp=8", None, ["--optimizer", "sgd", "--zero", "2"]))
    configs.append(("zero2 momentum dp=2,tp=2", "dp=2,tp=2", MEGATRON[model]("dp"),
                    ["--optimizer", "momentum", "--zero", "2"]))
    configs.append(("zero3 sgd dp=2,tp=4", "dp=2,tp=4", MEGATRON[model]("dp"),
                    ["--optimizer", "sgd", "--zero", "3"]))
    configs.append(("zero3 adamw dp=4", "dp=4", None,
                    ["--optimizer", "adamw", "--eps", "1e-3", "--zero", "3"]))
    # Recompute of every layer (for the MLP: each Gemm's matmul, recomputed for its
    # bias add's backward).
    configs.append(("recompute layers dp=2,tp=2", "dp=2,tp=2", MEGATRON[model]("dp"),
                    ["--optimizer", "momentum", "--recompute", "layers"]))
    configs.append(("recompute layers zero3 dp=4", "dp=4", None,
                    ["--optimizer", "adamw", "--eps", "1e-3", "--zero", "3",
                     "--recompute", "layers"]))
    if model == "gpt":
        configs.append(("recompute attention (strategy file) dp=2,tp=2", "dp=2,tp=2",
                        MEGATRON[model]("dp") + [{"pattern": "/blocks.*/attn/*",
                                                  "recompute": True}],
                        ["--optimizer", "sgd"]))
    # Pipeline stages (pp first in the mesh) over micro-batches, under GPipe and
    # 1F1B, alone and with dp, tp, ZeRO 1-3 and recompute; and micro-batches on a
    # mesh without stages (gradient accumulation). The single-device run takes the
    # whole batch in one step: the micro-batches' mean gradient is the batch's.
    def mb(m):
        return ["--micro-batches", str(m)]
    configs.append(("accumulate dp=2 m=4", "dp=2", None, ["--optimizer", "sgd"] + mb(4)))
    configs.append(("pipeline pp=2 gpipe m=4", "pp=2", None,
                    ["--optimizer", "sgd", "--schedule", "gpipe"] + mb(4)))
    configs.append(("pipeline pp=2,dp=2 1f1b m=4 momentum", "pp=2,dp=2", None,
                    ["--optimizer", "momentum"] + mb(4)))
    # Stages on submeshes of their own (--stage-meshes): each stage compiled
    # on its own submesh, values moving block by block between stages of
    # different sizes and layouts (the GPT's below).
    if model == "mlp":
        configs.append(("stage meshes dp=2/dp=1 1f1b m=2", "dp=2/dp=1", None,
                        ["--optimizer", "sgd"] + mb(2)))
    if model == "cnn":
        # --stages auto choosing stages on submeshes of different sizes (2, 1
        # and 1 ranks): under this limit its split over mixed submeshes is
        # predicted faster than every equal-stage shape.
        configs.append(("stage meshes by --stages auto dp=4", "dp=4", None,
                        ["--optimizer", "sgd", "--mode", "auto", "--stages", "auto",
                         "--memory-limit", "1000000"]))
        # Under a slightly lower limit the mix's plan does not fit, and the
        # fastest equal-stage shape is compiled instead.
        configs.append(("stage meshes by --stages auto over the limit dp=4", "dp=4", None,
                        ["--optimizer", "sgd", "--mode", "auto", "--stages", "auto",
                         "--memory-limit", "700000"]))
    if model == "gpt":
        adamw = ["--optimizer", "adamw", "--eps", "1e-3"]
        configs += [
            ("pipeline pp=4,dp=2 1f1b m=4", "pp=4,dp=2", None, ["--optimizer", "sgd"] + mb(4)),
            ("pipeline pp=4 gpipe m=8", "pp=4", None,
             ["--optimizer", "sgd", "--schedule", "gpipe"] + mb(8)),
            ("pipeline pp=4,tp=2 megatron 1f1b m=4", "pp=4,tp=2", MEGATRON[model](1),
             ["--optimizer", "sgd"] + mb(4)),
            ("pipeline pp=4,dp=2 zero2 gpipe m=4", "pp=4,dp=2", None,
             ["--optimizer", "sgd", "--zero", "2", "--schedule", "gpipe"] + mb(4)),
            ("pipeline pp=2,tp=2 megatron 1f1b m=2", "pp=2,tp=2", MEGATRON[model](1),
             ["--optimizer", "sgd"] + mb(2)),
            ("pipeline pp=2,dp=2,tp=2 megatron adamw 1f1b m=4", "pp=2,dp=2,tp=2",
             MEGATRON[model]("dp"), adamw + mb(4)),
            ("pipeline pp=2,dp=2,tp=2 megatron gpipe m=2", "pp=2,dp=2,tp=2",
             MEGATRON[model]("dp"), ["--optimizer", "sgd", "--schedule", "gpipe"] + mb(2)),
            ("pipeline pp=2,dp=2 zero1 adamw m=2", "pp=2,dp=2", None,
             adamw + ["--zero", "1"] + mb(2)),
            ("pipeline pp=2,dp=2 zero2 sgd gpipe m=4", "pp=2,dp=2", None,
             ["--optimizer", "sgd", "--zero", "2", "--schedule", "gpipe"] + mb(4)),
            ("pipeline pp=2,dp=2,tp=2 zero3 sgd m=2", "pp=2,dp=2,tp=2", MEGATRON[model]("dp"),
             ["--optimizer", "sgd", "--zero", "3"] + mb(2)),
            ("pipeline pp=2,dp=2 recompute layers 1f1b m=4", "pp=2,dp=2", None,
             ["--optimizer", "momentum", "--recompute", "layers"] + mb(4)),
            ("pipeline pp=4 recompute layers gpipe m=4", "pp=4", None,
             ["--optimizer", "sgd", "--recompute", "layers", "--schedule", "gpipe"] + mb(4)),
            # Interleaved 1F1B: the GPT's 5 layers in 4 chunks, chunks 0 and 2
            # on stage 0, 1 and 3 on stage 1 (the micro-batches in groups of 2).
            ("pipeline pp=2 interleaved v=2 m=4", "pp=2", None,
             ["--optimizer", "sgd", "--schedule", "interleaved"] + mb(4)),
            ("pipeline pp=2,dp=2,tp=2 megatron interleaved adamw m=2", "pp=2,dp=2,tp=2",
             MEGATRON[model]("dp"), adamw + ["--schedule", "interleaved"] + mb(2)),
            ("pipeline pp=2,dp=2 interleaved zero3 recompute layers m=4", "pp=2,dp=2", None,
             ["--optimizer", "momentum", "--schedule", "interleaved", "--zero", "3",
              "--recompute", "layers"] + mb(4)),
            ("pipeline pp=2,dp=2 interleaved zero2 auto m=4", "pp=2,dp=2", None,
             ["--optimizer", "sgd", "--schedule", "interleaved", "--zero", "2",
              "--mode", "auto"] + mb(4)),
            # Stage boundaries, layouts, ZeRO and recompute by --mode auto; and
            # the pipeline shape too, under a memory limit one stage does not fit.
            ("pipeline pp=2,dp=2 auto m=4", "pp=2,dp=2", None,
             ["--optimizer", "sgd", "--mode", "auto"] + mb(4)),
            # Stages on submeshes of different sizes and shapes: data
            # parallelism on 4 ranks, then on 2; Megatron's layouts on 4 and
            # 8 ranks; the search on each of three stages of 2, 4 and 1
            # ranks. (Megatron on dp=2,tp=2/dp=1,tp=2:
            # test/lit/Runtime/train-stage-meshes.test.)
            ("stage meshes dp=4/dp=2 1f1b m=2", "dp=4/dp=2", None,
             ["--optimizer", "sgd"] + mb(2)),
            # The residual stream kept a partial sum over tp across the stage
            # boundary: stage 0 reduces it before sending, stage 1 makes it
            # partial again for the add that takes it so.
            ("stage meshes dp=2,tp=2/dp=1,tp=4 partial residual m=2", "dp=2,tp=2/dp=1,tp=4",
             MEGATRON[model]("dp") + [
                 {"pattern": "/blocks.*/*/proj/Add", "strategy": [[1], ["dp", 1, 1]],
                  "partial": "tp"},
                 {"node": "/blocks.0/Add_1", "strategy": [["dp", 1, 1], ["dp", 1, 1]],
                  "partial": "tp"},
                 {"node": "/blocks.1/Add", "strategy": [["dp", 1, 1], ["dp", 1, 1]],
                  "partial": "tp"}],
             ["--optimizer", "momentum"] + mb(2)),
            ("stage meshes tp=2/dp=2,tp=2/dp=1 auto gpipe m=4", "tp=2/dp=2,tp=2/dp=1", None,
             ["--optimizer", "sgd", "--mode", "auto", "--schedule", "gpipe"] + mb(4)),
            ("pipeline --stages auto dp=4", "dp=4", None,
             ["--optimizer", "sgd", "--mode", "auto", "--stages", "auto",
              "--memory-limit", "4000000"]),
        ]
    return configs
