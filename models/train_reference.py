"""Writes a PyTorch training reference (.npy) for the models that export.py gives Loom.

The model is rebuilt with export.py's build_model (same classes, seed and construction
order), so its starting weights are bit-identical to the exported .onnx file's initializers
(pass the same GPT size flags and --weight-seed as the export). A fixed random batch is
drawn from --seed, and N optimizer steps are run on that same batch:

    for step in 1..N:
        opt.zero_grad(); loss = loss_fn(model(*inputs), labels); loss.backward(); opt.step()

so losses[K-1] is the loss of step K, computed by the forward pass *before* step K's update
(the loss `loom run` prints as `loom: step K loss L lr R`).

    /usr/bin/python3 models/train_reference.py --model mlp --optimizer adam --lr 1e-3 \\
        --batch 3 --seed 7 --steps 5 --out /tmp/train_ref

writes into --out:

* `<input>.npy` (`x` for mlp, cnn, lstm, gru and rnn, `input_ids` for gpt) and `labels.npy`: the batch,
  named after the ONNX inputs plus `labels` (what `loom run --data` takes);
* `losses.npy`: float32 [N], the loss of each step;
* `params/<NAME>.npy`: every parameter after the last step, under its PyTorch (= ONNX
  initializer) name, e.g. `params/blocks.0.attn.q.weight.npy`;
* `initial/<NAME>.npy`: every parameter before the first step (to check that a parameter
  moved enough for the comparison to notice a missing update);
* `buffers/<NAME>.npy`: persistent buffers after the last step (the CNN's BatchNorm running
  statistics; unchanged, see below);
* `optimizer_state/<NAME>.<KEY>.npy`: PyTorch's optimizer state after the last step
  (`momentum_buffer`, `exp_avg`, `exp_avg_sq`), for debugging;
* `reference.json`: the configuration, the losses and the per-parameter update sizes;
* with `--ensemble K`: `spread/<NAME>.npy` and `spread_losses.npy`, see below.

Losses:

* `cross_entropy`: `labels` are int64 class ids with the logits' shape minus the last
  dimension (mlp/cnn: [B]; gpt: [B, seq]), uniform over the classes; `--ignored K` sets K of
  them (chosen at random) to --ignore-index. loss = F.cross_entropy(logits.reshape(-1, C),
  labels.reshape(-1), ignore_index=...), the mean over the labels not ignored.
* `mse`: `labels` is a float32 standard-normal tensor with the logits' shape; loss =
  F.mse_loss(logits, labels).

Optimizers are PyTorch 1.13's, non-foreach (foreach=False), constant learning rate:
`sgd` = SGD(lr, momentum=0, weight_decay), `momentum` = SGD(lr, momentum, dampening=0,
nesterov, weight_decay), `adam` = Adam(lr, (beta1, beta2), eps, weight_decay) (L2 added to the
gradient), `adamw` = AdamW(lr, (beta1, beta2), eps, weight_decay) (decoupled decay).

Why the model trains in eval() mode: the exported CNN's BatchNormalization nodes are the
inference form, which normalizes with the stored running mean and variance (export.py
exports the CNN from an eval() model with TrainingMode.PRESERVE). Differentiating that graph,
which is what a compiler given the .onnx file does, gives a BatchNorm with *fixed* statistics:
an affine per-channel function whose weight and bias get gradients and whose running
statistics stay constant. PyTorch's train() mode is a different function: it normalizes with
the batch's own mean and variance (and back-propagates through them) and updates the running
statistics. eval() is therefore what matches the ONNX graph. The models have no dropout, so
for the MLP and the GPT eval() and train() compute the same thing.

--ensemble K measures how well-conditioned the result is: it repeats the training K times,
each time with every starting weight moved one ulp up or down at random, and writes per
parameter element (`spread/<NAME>.npy`) and per step (`spread_losses.npy`) the largest
deviation of those runs from the unperturbed one. A one-ulp change is the size of a rounding
error, and it changes how every later operation rounds, so the spread shows how much a
different but equally accurate float32 implementation may differ. It is ~1e-7 relative almost
everywhere, but large for Adam/AdamW updates of elements whose gradient is around eps
(g / (sqrt(v) + eps) then amplifies gradient rounding) and for the GPT's attention key biases
(their gradient is zero in exact arithmetic, softmax being invariant to q.b_k, so in float32
it is pure rounding noise, which Adam scales up to ~1e-2 lr per step).

--dtype float64 runs the same steps in double precision (the batch and the starting weights
are the same float32 values, widened); comparing a float32 and a float64 run estimates how
much of the float32 result is rounding, i.e. whether a tolerance is achievable at all.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import DEFAULT_SEED, add_model_args, build_model, input_spec, model_config, make_inputs  # noqa: E402

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
LOSSES = ("cross_entropy", "mse")


def make_optimizer(params, optimizer, lr, momentum=0.9, nesterov=False, beta1=0.9,
                   beta2=0.999, eps=1e-8, weight_decay=0.0):
    """The torch.optim optimizer that `loom compile --optimizer ...` must match."""
    if optimizer == "sgd":
        if nesterov:
            raise ValueError("--nesterov needs --optimizer momentum")
        return torch.optim.SGD(params, lr=lr, momentum=0.0, weight_decay=weight_decay,
                               foreach=False)
    if optimizer == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, dampening=0.0,
                               nesterov=nesterov, weight_decay=weight_decay, foreach=False)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(beta1, beta2), eps=eps,
                                weight_decay=weight_decay, amsgrad=False, foreach=False)
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(beta1, beta2), eps=eps,
                                 weight_decay=weight_decay, amsgrad=False, foreach=False)
    raise ValueError(f"unknown optimizer {optimizer!r}")


def make_labels(logits_shape, loss, generator, ignored=0, ignore_index=-100):
    """Random labels for `loss` given the logits' shape (see the module docstring)."""
    if loss == "cross_entropy":
        classes = logits_shape[-1]
        labels = torch.randint(0, classes, tuple(logits_shape[:-1]), generator=generator)
        if ignored:
            flat = labels.view(-1)
            if ignored >= flat.numel():
                raise ValueError(f"--ignored {ignored} leaves no label of {flat.numel()}")
            which = torch.randperm(flat.numel(), generator=generator)[:ignored]
            flat[which] = ignore_index
        return labels
    if loss == "mse":
        if ignored:
            raise ValueError("--ignored needs --loss cross_entropy")
        return torch.randn(tuple(logits_shape), generator=generator, dtype=torch.float32)
    raise ValueError(f"unknown loss {loss!r}")


def loss_fn(logits, labels, loss, ignore_index=-100):
    if loss == "cross_entropy":
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=ignore_index)
    return F.mse_loss(logits, labels)


def perturb_one_ulp(model, generator):
    """Moves every parameter element one ulp up or down (at random) in its own dtype."""
    with torch.no_grad():
        for p in model.parameters():
            up = torch.rand(p.shape, generator=generator) < 0.5
            inf = torch.tensor(float("inf"), dtype=p.dtype)
            p.copy_(torch.where(up, torch.nextafter(p, inf), torch.nextafter(p, -inf)))


def run_steps(model, inputs, labels, optimizer, lr, steps, loss, ignore_index, **hyper):
    """N steps of zero_grad / forward / loss / backward / opt.step on one batch.

    Returns (losses, optimizer); losses[K-1] is the loss step K computed before its update.
    """
    params = dict(model.named_parameters())  # de-duplicated: a tied head appears once
    opt = make_optimizer(list(params.values()), optimizer, lr, **hyper)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        value = loss_fn(model(*inputs), labels, loss, ignore_index)
        if not torch.isfinite(value):
            raise RuntimeError(f"loss is {value.item()} at step {len(losses) + 1}")
        value.backward()
        opt.step()
        losses.append(value.item())
    return losses, opt


def train_reference(name, optimizer, lr, batch, steps, seed=0, weight_seed=DEFAULT_SEED,
                    loss="cross_entropy", momentum=0.9, nesterov=False, beta1=0.9,
                    beta2=0.999, eps=1e-8, weight_decay=0.0, ignore_index=-100, ignored=0,
                    dtype="float32", ensemble=0, **gpt_kwargs):
    """Runs the reference training. Returns a dict with everything main() writes.

    The batch (inputs, then labels) comes from a generator seeded with `seed`, independent
    of the weights, which come from `weight_seed` exactly as in export.py. With `ensemble`
    K > 0, the same training is repeated K times from starting weights moved by one ulp
    (see the module docstring) and "spread" / "spread_losses" hold, per parameter element and
    per step, the largest deviation of those runs from the unperturbed one.
    """
    if dtype not in ("float32", "float64"):
        raise ValueError(f"unknown dtype {dtype!r}")
    hyper = dict(momentum=momentum, nesterov=nesterov, beta1=beta1, beta2=beta2, eps=eps,
                 weight_decay=weight_decay)

    def fresh_model():
        model = build_model(name, seed=weight_seed, **gpt_kwargs)  # eval(): see docstring
        assert not model.training
        return model.double() if dtype == "float64" else model

    model = build_model(name, seed=weight_seed, **gpt_kwargs)
    generator = torch.Generator().manual_seed(seed)
    inputs = make_inputs(name, model, batch, generator)  # float32 / int64
    with torch.no_grad():
        logits_shape = tuple(model(*inputs).shape)
    labels = make_labels(logits_shape, loss, generator, ignored, ignore_index)

    # Saved batch: the float32/int64 arrays loom gets. A float64 run widens the same values.
    input_names = [n for n, _, _ in input_spec(name, model)]
    batch_arrays = {n: t.numpy().copy() for n, t in zip(input_names, inputs)}
    batch_arrays["labels"] = labels.numpy().copy()
    if dtype == "float64":
        inputs = [t.double() if t.is_floating_point() else t for t in inputs]
        labels = labels.double() if labels.is_floating_point() else labels

    result = train_steps(fresh_model, inputs, labels, optimizer, lr, steps, loss,
                         ignore_index, ensemble=ensemble, perturb_seed=1_000_003 + seed,
                         **hyper)
    result["batch"] = batch_arrays
    result["input_names"] = input_names
    return result


def train_steps(fresh_model, inputs, labels, optimizer, lr, steps, loss="cross_entropy",
                ignore_index=-100, ensemble=0, perturb_seed=1_000_003, **hyper):
    """Trains fresh_model() for `steps` steps on one batch (run_steps) and, with `ensemble`
    K > 0, K more times from starting weights moved by one ulp (see the module docstring).

    fresh_model() must return the same model (weights, dtype, mode) at every call; inputs
    and labels must be in its dtype. Returns a dict: "losses" (array, the model's float
    type), "params" and "initial" (after the last step and before the first, by parameter
    name), "buffers" (persistent buffers after the last step), "optimizer_state", and with
    `ensemble` "spread" and "spread_losses" (the largest deviation from the unperturbed run,
    per parameter element and per step).
    """
    model = fresh_model()
    params = dict(model.named_parameters())
    initial = {n: p.detach().clone() for n, p in params.items()}
    losses, opt = run_steps(model, inputs, labels, optimizer, lr, steps, loss, ignore_index,
                            **hyper)
    final = {n: p.detach().numpy().copy() for n, p in params.items()}

    spread = {n: np.zeros(a.shape, a.dtype) for n, a in final.items()}
    spread_losses = np.zeros(steps)
    perturb_generator = torch.Generator().manual_seed(perturb_seed)
    for _ in range(ensemble):
        member = fresh_model()
        perturb_one_ulp(member, perturb_generator)
        member_losses, _ = run_steps(member, inputs, labels, optimizer, lr, steps, loss,
                                     ignore_index, **hyper)
        spread_losses = np.maximum(spread_losses, np.abs(np.subtract(member_losses, losses)))
        for n, p in member.named_parameters():
            spread[n] = np.maximum(spread[n], np.abs(p.detach().numpy() - final[n]))

    names_by_param = {id(p): n for n, p in params.items()}
    optimizer_state = {}
    for p, state in opt.state.items():
        for key, value in state.items():
            if torch.is_tensor(value) and value.dim() > 0:
                optimizer_state[f"{names_by_param[id(p)]}.{key}"] = value.detach().numpy().copy()

    buffers = {n: t.detach().numpy().copy() for n, t in model.state_dict().items()
               if n not in params and not n.endswith("num_batches_tracked")
               and not any(t.data_ptr() == p.data_ptr() for p in params.values())}
    float_type = np.float64 if next(iter(params.values())).dtype == torch.float64 \
        else np.float32
    result = {
        "losses": np.array(losses, dtype=float_type),
        "params": final,
        "initial": {n: p.numpy().copy() for n, p in initial.items()},
        "buffers": buffers,
        "optimizer_state": optimizer_state,
    }
    if ensemble:
        result["spread"] = spread
        result["spread_losses"] = spread_losses.astype(float_type)
    return result


def update_sizes(result):
    """Per parameter: max |after - before| and max |after|."""
    sizes = {}
    for n, after in result["params"].items():
        before = result["initial"][n]
        sizes[n] = {
            "max_abs_update": float(np.max(np.abs(after.astype(np.float64) - before))),
            "max_abs": float(np.max(np.abs(after))),
        }
    return sizes


def write(result, out, config):
    os.makedirs(out, exist_ok=True)
    for name, array in result["batch"].items():
        np.save(os.path.join(out, f"{name}.npy"), array)
    np.save(os.path.join(out, "losses.npy"), result["losses"])
    if "spread_losses" in result:
        np.save(os.path.join(out, "spread_losses.npy"), result["spread_losses"])
    for sub in ("params", "initial", "buffers", "optimizer_state", "spread"):
        if sub not in result:
            continue
        os.makedirs(os.path.join(out, sub), exist_ok=True)
        for name, array in result[sub].items():
            np.save(os.path.join(out, sub, f"{name}.npy"), array)
    summary = dict(config)
    summary["input_names"] = result["input_names"]
    summary["losses"] = [float(v) for v in result["losses"]]
    summary["params"] = {n: {"shape": list(a.shape), **s}
                         for (n, a), s in zip(result["params"].items(),
                                              update_sizes(result).values())}
    summary["buffers"] = {n: list(a.shape) for n, a in result["buffers"].items()}
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(summary, f, indent=1)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Run N PyTorch training steps on a model exported by export.py and "
                    "write the batch, the losses and the final parameters (.npy), as a "
                    "reference for `loom compile --train` + `loom run --steps N`.")
    add_model_args(parser)
    parser.add_argument("--optimizer", choices=OPTIMIZERS, required=True)
    parser.add_argument("--lr", type=float, required=True, help="constant learning rate")
    parser.add_argument("--momentum", type=float, default=0.9,
                        help="--optimizer momentum only (default: %(default)s)")
    parser.add_argument("--nesterov", action="store_true", help="--optimizer momentum only")
    parser.add_argument("--beta1", type=float, default=0.9, help="adam/adamw (default: %(default)s)")
    parser.add_argument("--beta2", type=float, default=0.999, help="adam/adamw (default: %(default)s)")
    parser.add_argument("--eps", type=float, default=1e-8, help="adam/adamw (default: %(default)s)")
    parser.add_argument("--weight-decay", type=float, default=0.0,
                        help="L2 (sgd, momentum, adam) or decoupled (adamw) weight decay "
                             "(default: %(default)s; note torch's AdamW defaults to 0.01, "
                             "this script does not)")
    parser.add_argument("--loss", choices=LOSSES, default="cross_entropy")
    parser.add_argument("--ignore-index", type=int, default=-100,
                        help="cross_entropy: label value that is ignored (default: %(default)s)")
    parser.add_argument("--ignored", type=int, default=0,
                        help="cross_entropy: set this many random labels to --ignore-index "
                             "(default: %(default)s)")
    parser.add_argument("--batch", type=int, default=3, help="batch size (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=5, help="training steps (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the batch (inputs and labels), independent of the "
                             "weights (default: %(default)s)")
    parser.add_argument("--weight-seed", type=int, default=DEFAULT_SEED,
                        help="model seed; must equal the --seed given to export.py "
                             "(default: %(default)s)")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="precision of the PyTorch run (default: %(default)s)")
    parser.add_argument("--ensemble", type=int, default=0, metavar="K",
                        help="also run K trainings from starting weights moved by one ulp and "
                             "write their largest deviations (spread/, spread_losses.npy; "
                             "default: %(default)s)")
    parser.add_argument("--out", required=True, help="directory to write into")
    args = parser.parse_args(argv)
    if args.model is None:
        parser.error("--model is required")
    if args.nesterov and args.optimizer != "momentum":
        parser.error("--nesterov needs --optimizer momentum")
    if args.steps < 1:
        parser.error("--steps must be at least 1")

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    kwargs = model_config(args)
    config = dict(model=args.model, optimizer=args.optimizer, lr=args.lr,
                  momentum=args.momentum if args.optimizer == "momentum" else 0.0,
                  nesterov=args.nesterov, beta1=args.beta1, beta2=args.beta2, eps=args.eps,
                  weight_decay=args.weight_decay, loss=args.loss,
                  ignore_index=args.ignore_index, ignored=args.ignored, batch=args.batch,
                  steps=args.steps, seed=args.seed, weight_seed=args.weight_seed,
                  dtype=args.dtype, ensemble=args.ensemble, gpt=kwargs or None,
                  torch=torch.__version__)
    result = train_reference(args.model, args.optimizer, args.lr, args.batch, args.steps,
                             seed=args.seed, weight_seed=args.weight_seed, loss=args.loss,
                             momentum=args.momentum, nesterov=args.nesterov,
                             beta1=args.beta1, beta2=args.beta2, eps=args.eps,
                             weight_decay=args.weight_decay, ignore_index=args.ignore_index,
                             ignored=args.ignored, dtype=args.dtype,
                             ensemble=args.ensemble, **kwargs)
    write(result, args.out, config)
    for k, value in enumerate(result["losses"], 1):
        print(f"step {k} loss {value:.9g}")
    print(f"wrote {args.out}: {', '.join(n + '.npy' for n in result['batch'])}, losses.npy, "
          f"{len(result['params'])} parameters, {len(result['buffers'])} buffers, "
          f"{len(result['optimizer_state'])} optimizer state tensors")


if __name__ == "__main__":
    main()
