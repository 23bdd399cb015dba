#!/usr/bin/python3
"""Writes the ONNX LSTM and GRU models of rnn.test, and checks what loom ran.

    rnn_models.py write OUTDIR
    rnn_models.py check OUTDIR NAME    # OUTDIR/NAME-out/*.npy against the expected

Supported forms (weights are initializers, X the only graph input), each with its
expected outputs (OUTDIR/NAME-expected/*.npy) from PyTorch's nn.LSTM / nn.GRU with the
same weights (gates reordered into ONNX's [i, o, f, c] and [z, r, h]), or, for GRU's
linear_before_reset 0, which PyTorch does not compute, from ONNX's own reference
(onnx.backend.test.case.node.gru.GRU_Helper). A reverse direction is PyTorch run on
the sequence reversed in time.

lstm_bidi          bidirectional, B, initial_h, initial_c; Y, Y_h, Y_c; layout 0; the
                   default activations given (in either case)
lstm_reverse_bf    reverse, B, no initial state; Y, Y_h, Y_c; layout 1
lstm_uniform_lens  forward, sequence_lens a constant equal to the length everywhere
gru_bidi_bf        bidirectional, linear_before_reset 1, B, initial_h; Y, Y_h; layout 1
gru_reverse_lbr0   reverse, linear_before_reset 0, B, initial_h; Y, Y_h; layout 0

Refused (each named in rnn.test with its message):

lstm_peepholes, lstm_clip, lstm_input_forget, gru_activations, lstm_lens (sequence_lens
[4, 2, 4]), gru_hidden_size (attribute 5, R gives 4), lstm_opset1 (LSTM-1).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import oracle  # noqa: E402  (test/oracle.py)

S, B, I, H = 4, 3, 5, 4  # sequence, batch, input size, hidden size


def save(out, name, node, inits, x_shape, outputs, opset=14):
    """Writes the model of one node; outputs: [(name, shape)]."""
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shape) for o, shape in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


def save_expected(out, name, x, **outputs):
    np.save(os.path.join(out, name + "-x.npy"), x.astype(np.float32))
    os.makedirs(os.path.join(out, name + "-expected"), exist_ok=True)
    for k, v in outputs.items():
        np.save(os.path.join(out, name + "-expected", k + ".npy"), np.asarray(v, np.float32))


def onnx_weights(module, order, directions):
    """W, R, B of an ONNX node from a torch module: `order` lists the torch gate blocks
    in ONNX order (LSTM: i f g o -> i o f g = [0, 3, 1, 2]; GRU: r z n -> z r n)."""
    def reorder(t):
        blocks = t.detach().numpy().reshape(len(order), H, *t.shape[1:])
        return np.concatenate([blocks[g] for g in order])
    w, r, b = [], [], []
    for d in range(directions):
        sfx = "_l0" + ("_reverse" if d else "")
        w.append(reorder(getattr(module, "weight_ih" + sfx)))
        r.append(reorder(getattr(module, "weight_hh" + sfx)))
        b.append(np.concatenate([reorder(getattr(module, "bias_ih" + sfx)),
                                 reorder(getattr(module, "bias_hh" + sfx))]))
    return {"W": np.stack(w), "R": np.stack(r), "B": np.stack(b)}


def torch_run(module, x, state, reverse=False):
    """module on x ([S, B, I] or batch-first) with state; reverse runs the sequence
    backwards (x flipped in time and the output flipped back)."""
    import torch
    axis = 1 if module.batch_first else 0
    x = torch.from_numpy(x)
    if reverse:
        x = torch.flip(x, [axis])
    with torch.no_grad():
        y, final = module(x, state)
    if reverse:
        y = torch.flip(y, [axis])
    return y.numpy(), final


def write(out):
    import torch  # not needed by `check`, which runs once per model
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(5)
    torch.manual_seed(5)

    # LSTM, bidirectional, initial states, all outputs, layout 0.
    lstm = torch.nn.LSTM(I, H, bidirectional=True)
    inits = onnx_weights(lstm, [0, 3, 1, 2], 2)
    h0 = rng.standard_normal((2, B, H)).astype(np.float32)
    c0 = rng.standard_normal((2, B, H)).astype(np.float32)
    inits.update(h0=h0, c0=c0)
    x = rng.standard_normal((S, B, I)).astype(np.float32)
    y, (hn, cn) = torch_run(lstm, x, (torch.from_numpy(h0), torch.from_numpy(c0)))
    save(out, "lstm_bidi",
         helper.make_node("LSTM", ["X", "W", "R", "B", "", "h0", "c0"], ["Y", "Y_h", "Y_c"],
                          name="lstm", hidden_size=H, direction="bidirectional",
                          activations=["Sigmoid", "Tanh", "Tanh", "sigmoid", "tanh", "tanh"]),
         inits, [S, B, I], [("Y", [S, 2, B, H]), ("Y_h", [2, B, H]), ("Y_c", [2, B, H])])
    save_expected(out, "lstm_bidi", x, Y=y.reshape(S, B, 2, H).transpose(0, 2, 1, 3),
                  Y_h=hn.numpy(), Y_c=cn.numpy())

    # LSTM, reverse, no initial state, layout 1.
    lstm = torch.nn.LSTM(I, H, batch_first=True)
    inits = onnx_weights(lstm, [0, 3, 1, 2], 1)
    x = rng.standard_normal((B, S, I)).astype(np.float32)
    y, (hn, cn) = torch_run(lstm, x, None, reverse=True)
    save(out, "lstm_reverse_bf",
         helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], name="lstm",
                          hidden_size=H, direction="reverse", layout=1),
         inits, [B, S, I], [("Y", [B, S, 1, H]), ("Y_h", [B, 1, H]), ("Y_c", [B, 1, H])])
    save_expected(out, "lstm_reverse_bf", x, Y=y.reshape(B, S, 1, H),
                  Y_h=hn.numpy().transpose(1, 0, 2), Y_c=cn.numpy().transpose(1, 0, 2))

    # LSTM with sequence_lens a constant equal to S everywhere: the full sequences.
    lstm = torch.nn.LSTM(I, H)
    inits = onnx_weights(lstm, [0, 3, 1, 2], 1)
    inits["lens"] = np.full([B], S, np.int32)
    x = rng.standard_normal((S, B, I)).astype(np.float32)
    y, (hn, cn) = torch_run(lstm, x, None)
    save(out, "lstm_uniform_lens",
         helper.make_node("LSTM", ["X", "W", "R", "B", "lens"], ["", "Y_h"], name="lstm",
                          hidden_size=H),
         inits, [S, B, I], [("Y_h", [1, B, H])])
    save_expected(out, "lstm_uniform_lens", x, Y_h=hn.numpy())

    # GRU, bidirectional, linear_before_reset 1 (PyTorch's GRU), initial_h, layout 1.
    gru = torch.nn.GRU(I, H, bidirectional=True, batch_first=True)
    inits = onnx_weights(gru, [1, 0, 2], 2)
    h0 = rng.standard_normal((2, B, H)).astype(np.float32)
    inits["h0"] = h0.transpose(1, 0, 2).copy()  # layout 1: [B, D, H]
    x = rng.standard_normal((B, S, I)).astype(np.float32)
    y, hn = torch_run(gru, x, torch.from_numpy(h0))
    save(out, "gru_bidi_bf",
         helper.make_node("GRU", ["X", "W", "R", "B", "", "h0"], ["Y", "Y_h"], name="gru",
                          hidden_size=H, direction="bidirectional", linear_before_reset=1,
                          layout=1),
         inits, [B, S, I], [("Y", [B, S, 2, H]), ("Y_h", [B, 2, H])])
    save_expected(out, "gru_bidi_bf", x, Y=y.reshape(B, S, 2, H),
                  Y_h=hn.numpy().transpose(1, 0, 2))

    # GRU, reverse, linear_before_reset 0: ONNX's reference on the reversed sequence.
    from onnx.backend.test.case.node.gru import GRU_Helper
    w = rng.standard_normal((1, 3 * H, I)).astype(np.float32) * 0.5
    r = rng.standard_normal((1, 3 * H, H)).astype(np.float32) * 0.5
    b = rng.standard_normal((1, 6 * H)).astype(np.float32) * 0.5
    h0 = rng.standard_normal((1, B, H)).astype(np.float32)
    x = rng.standard_normal((S, B, I)).astype(np.float32)
    y, yh = GRU_Helper(X=x[::-1].copy(), W=w, R=r, B=b, initial_h=h0).step()
    save(out, "gru_reverse_lbr0",
         helper.make_node("GRU", ["X", "W", "R", "B", "", "h0"], ["Y", "Y_h"], name="gru",
                          hidden_size=H, direction="reverse"),
         {"W": w, "R": r, "B": b, "h0": h0}, [S, B, I], [("Y", [S, 1, B, H]), ("Y_h", [1, B, H])])
    save_expected(out, "gru_reverse_lbr0", x, Y=y[::-1], Y_h=yh)

    # Refused.
    w4 = np.zeros((1, 4 * H, I), np.float32)
    r4 = np.zeros((1, 4 * H, H), np.float32)
    w3, r3 = w4[:, :3 * H], r4[:, :3 * H]
    lstm_inits = {"W": w4, "R": r4}
    save(out, "lstm_peepholes",
         helper.make_node("LSTM", ["X", "W", "R", "", "", "", "", "P"], ["Y"], name="lstm",
                          hidden_size=H),
         dict(lstm_inits, P=np.zeros((1, 3 * H), np.float32)), [S, B, I], [("Y", [S, 1, B, H])])
    save(out, "lstm_clip",
         helper.make_node("LSTM", ["X", "W", "R"], ["Y"], name="lstm", hidden_size=H,
                          clip=3.0),
         lstm_inits, [S, B, I], [("Y", [S, 1, B, H])])
    save(out, "lstm_input_forget",
         helper.make_node("LSTM", ["X", "W", "R"], ["Y"], name="lstm", hidden_size=H,
                          input_forget=1),
         lstm_inits, [S, B, I], [("Y", [S, 1, B, H])])
    save(out, "lstm_lens",
         helper.make_node("LSTM", ["X", "W", "R", "", "lens"], ["Y"], name="lstm",
                          hidden_size=H),
         dict(lstm_inits, lens=np.array([S, 2, S], np.int32)), [S, B, I], [("Y", [S, 1, B, H])])
    save(out, "lstm_opset1",
         helper.make_node("LSTM", ["X", "W", "R"], ["Y"], name="lstm", hidden_size=H),
         lstm_inits, [S, B, I], [("Y", [S, 1, B, H])], opset=6)
    save(out, "gru_activations",
         helper.make_node("GRU", ["X", "W", "R"], ["Y"], name="gru", hidden_size=H,
                          activations=["Relu", "Tanh"]),
         {"W": w3, "R": r3}, [S, B, I], [("Y", [S, 1, B, H])])
    save(out, "gru_hidden_size",
         helper.make_node("GRU", ["X", "W", "R"], ["", "Y_h"], name="gru",
                          hidden_size=H + 1),
         {"W": w3, "R": r3}, [S, B, I], [("Y_h", [1, B, H + 1])])


def check(out, name):
    expected_dir = os.path.join(out, name + "-expected")
    for f in sorted(os.listdir(expected_dir)):
        want = np.load(os.path.join(expected_dir, f))
        got = np.load(os.path.join(out, name + "-out", f))
        result = oracle.assert_close(got, want, rtol=0.0, atol=1e-5, normwise=False,
                                     name=f"{name} {f}")
        print(f"{name} {f[:-4]} {list(got.shape)} max error {result.abs_error:.1e}")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
