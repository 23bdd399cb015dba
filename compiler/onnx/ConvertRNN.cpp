//===- ConvertRNN.cpp - ONNX RNN, LSTM and GRU, unrolled over the sequence ===//
//
// RNN, LSTM and GRU import as their recurrence unrolled over the (static)
// sequence length into existing loom ops, so that their gradients, sharding
// rules and kernels are those ops': one matmul projects the input of every
// time step and direction at once (with the biases that do not depend on
// the state folded in), then each step is a matmul with the recurrent weight
// and elementwise gate arithmetic on slices. The outputs Y, Y_h and Y_c are
// concatenations of the steps' states.
//
// Gate orders (ONNX): LSTM's W, R and B hold [i, o, f, c]; GRU's [z, r, h];
// RNN's one gate.
//   RNN:  H = f(x W' + h R' + Wb + Rb), f Tanh (default) or Relu
//   LSTM: i, o, f = sigmoid(x W' + h R' + Wb + Rb), c~ = tanh(...),
//         C = f * C_prev + i * c~, H = o * tanh(C)
//   GRU:  z, r = sigmoid(x W' + h R' + Wb + Rb),
//         h~ = tanh(x Wh' + (r * h) Rh' + Rbh + Wbh)       linear_before_reset
//         0 h~ = tanh(x Wh' + r * (h Rh' + Rbh) + Wbh) linear_before_reset 1 H
//         = (1 - z) * h~ + z * h
// A state that is not given starts at zero: the first step then skips the
// products with it.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace loom::onnx_import {
namespace {

enum class Cell { RNN, LSTM, GRU };

/// The longest sequence unrolled: each step is a dozen ops.
constexpr int64_t kMaxUnrolledSteps = 4096;

/// Creates ops through a NodeContext and remembers the first failure: after
/// it every call creates nothing and returns a null Value, so that a
/// converter builds a whole expression and checks `ok()` once.
class OpChain {
public:
  explicit OpChain(NodeContext &nc) : nc(nc) {}

  bool ok() const { return !failedOnce; }

  Value add(Value a, Value b) { return make<AddOp>(a, b); }
  Value sub(Value a, Value b) { return make<SubOp>(a, b); }
  Value mul(Value a, Value b) { return make<MulOp>(a, b); }
  Value sigmoid(Value a) { return make<SigmoidOp>(a); }
  Value tanh(Value a) { return make<TanhOp>(a); }
  Value relu(Value a) { return make<ReluOp>(a); }
  /// a b^T.
  Value matmulT(Value a, Value b) {
    return make<MatmulOp>(a, b, UnitAttr(), nc.builder.getUnitAttr());
  }
  /// The block of `v` at `starts` of extent `sizes`.
  Value slice(Value v, ArrayRef<int64_t> starts, ArrayRef<int64_t> sizes) {
    SmallVector<int64_t> strides(starts.size(), 1);
    return make<SliceOp>(v, nc.builder.getDenseI64ArrayAttr(starts),
                         nc.builder.getDenseI64ArrayAttr(sizes),
                         nc.builder.getDenseI64ArrayAttr(strides));
  }
  /// Columns [start, start + size) of a matrix [rows, N].
  Value columns(Value v, int64_t start, int64_t size) {
    if (failedOnce)
      return Value();
    int64_t rows = cast<RankedTensorType>(v.getType()).getDimSize(0);
    return slice(v, {0, start}, {rows, size});
  }
  Value concat(ArrayRef<Value> inputs, int64_t axis) {
    if (inputs.size() == 1)
      return inputs.front();
    return make<ConcatOp>(inputs, nc.builder.getI64IntegerAttr(axis));
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    if (failedOnce)
      return Value();
    FailureOr<Value> r = nc.reshape(v, shape);
    failedOnce = failed(r);
    return failedOnce ? Value() : *r;
  }

private:
  template <typename OpTy, typename... Args> Value make(Args &&...args) {
    if (failedOnce)
      return Value();
    FailureOr<Value> r = nc.create<OpTy>(std::forward<Args>(args)...);
    failedOnce = failed(r);
    return failedOnce ? Value() : *r;
  }

  NodeContext &nc;
  bool failedOnce = false;
};

/// What the node says, checked: sizes, direction, layout, which optional
/// inputs are given.
struct Recurrence {
  Cell cell;
  int64_t gates;      // 4 (LSTM), 3 (GRU) or 1 (RNN)
  int64_t hidden;     // H
  int64_t directions; // 1 or 2
  bool reverseOnly;   // direction "reverse"
  int64_t seq, batch, inputSize;
  bool batchFirst; // layout 1: X [B, S, I], Y [B, S, D, H], Y_h [B, D, H]
  bool linearBeforeReset = false;
  /// RNN: whether direction d's activation is Relu (else Tanh).
  SmallVector<bool, 2> relu;
};

std::string joined(ArrayRef<std::string> words) {
  std::string s;
  for (const std::string &w : words)
    s += (s.empty() ? "" : ", ") + w;
  return s;
}

/// Reads and checks the attributes and input shapes; refuses what Loom does
/// not implement, naming the attribute or input and what is supported.
FailureOr<Recurrence> readRecurrence(NodeContext &nc, Cell cell) {
  StringRef op = cell == Cell::LSTM  ? "LSTM"
                 : cell == Cell::GRU ? "GRU"
                                     : "RNN";
  Recurrence r;
  r.cell = cell;
  r.gates = cell == Cell::LSTM ? 4 : cell == Cell::GRU ? 3 : 1;

  auto direction = nc.attrString("direction", "forward");
  auto hiddenAttr = nc.attrInt("hidden_size", -1);
  auto layout = nc.attrInt("layout", 0);
  if (failed(direction) || failed(hiddenAttr) || failed(layout))
    return failure();
  if (*direction != "forward" && *direction != "reverse" &&
      *direction != "bidirectional")
    return nc.invalid("attribute 'direction' is '" + *direction +
                      "'; ONNX allows forward, reverse and bidirectional");
  r.directions = *direction == "bidirectional" ? 2 : 1;
  r.reverseOnly = *direction == "reverse";
  // `layout` exists from version 14; older versions are sequence-first.
  if (nc.version < 14 && nc.attr("layout"))
    return nc.invalid("attribute 'layout' needs " + op + " version 14");
  if (*layout != 0 && *layout != 1)
    return nc.invalid("attribute 'layout' is " + Twine(*layout) +
                      "; ONNX allows 0 and 1");
  r.batchFirst = *layout == 1;

  // Activations other than the defaults, and cell clipping. RNN also takes
  // Relu (PyTorch's nn.RNN(nonlinearity='relu')), direction by direction.
  std::vector<std::string> defaults =
      cell == Cell::LSTM  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : cell == Cell::GRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                          : std::vector<std::string>{"Tanh"};
  r.relu.assign(r.directions, false);
  if (const onnx::AttributeProto *a = nc.attr("activations")) {
    std::vector<std::string> given(a->strings().begin(), a->strings().end());
    bool isDefault = static_cast<int64_t>(given.size()) ==
                     r.directions * static_cast<int64_t>(defaults.size());
    for (size_t i = 0; isDefault && i < given.size(); ++i) {
      bool relu =
          cell == Cell::RNN && StringRef(given[i]).equals_insensitive("Relu");
      if (relu)
        r.relu[i] = true;
      isDefault = relu || StringRef(given[i]).equals_insensitive(
                              defaults[i % defaults.size()]);
    }
    if (!isDefault)
      return nc.unsupported(
          "attribute 'activations' [" + joined(given) +
          "] is not supported; Loom imports " + op +
          (cell == Cell::RNN
               ? " with Tanh or Relu"
               : " with its default activations (" + joined(defaults) + ")") +
          (r.directions == 2 ? ", for each direction" : ""));
  }
  // activation_alpha and activation_beta parameterise activations that take
  // them; Sigmoid and Tanh take none, so they are ignored, as in ONNX.
  if (nc.attr("clip"))
    return nc.unsupported("attribute 'clip' (cell clipping) is not "
                          "supported; Loom imports " +
                          op + " without clip");
  if (cell == Cell::LSTM) {
    auto inputForget = nc.attrInt("input_forget", 0);
    if (failed(inputForget))
      return failure();
    if (*inputForget != 0)
      return nc.unsupported(
          "attribute 'input_forget' = " + Twine(*inputForget) +
          " (coupled input and forget gates) is not "
          "supported; Loom imports LSTM with input_forget 0");
    if (nc.hasInput(7))
      return nc.unsupported("the peephole weights P (input '" +
                            nc.node.input(7) +
                            "') are not supported; Loom imports LSTM "
                            "without peepholes");
  } else {
    auto lbr = nc.attrInt("linear_before_reset", 0);
    if (failed(lbr))
      return failure();
    if (*lbr != 0 && *lbr != 1)
      return nc.invalid("attribute 'linear_before_reset' is " + Twine(*lbr) +
                        "; ONNX allows 0 and 1");
    r.linearBeforeReset = *lbr == 1;
  }

  // Shapes: X [S, B, I] (layout 0) or [B, S, I]; W [D, G*H, I];
  // R [D, G*H, H]; B [D, 2*G*H]; initial_h and initial_c [D, B, H] or
  // [B, D, H].
  if (nc.rank(0) != 3 || nc.rank(1) != 3 || nc.rank(2) != 3)
    return nc.invalid(
        "X, W and R must have rank 3, not " + formatShape(nc.shape(0)) + ", " +
        formatShape(nc.shape(1)) + " and " + formatShape(nc.shape(2)));
  ArrayRef<int64_t> x = nc.shape(0), w = nc.shape(1), rec = nc.shape(2);
  r.seq = r.batchFirst ? x[1] : x[0];
  r.batch = r.batchFirst ? x[0] : x[1];
  r.inputSize = x[2];
  r.hidden = rec[2];
  if (*hiddenAttr != -1 && *hiddenAttr != r.hidden)
    return nc.invalid("attribute 'hidden_size' is " + Twine(*hiddenAttr) +
                      " but R " + formatShape(rec) + " gives " +
                      Twine(r.hidden));
  int64_t gh = r.gates * r.hidden;
  SmallVector<int64_t> wantW{r.directions, gh, r.inputSize},
      wantR{r.directions, gh, r.hidden};
  if (w != ArrayRef<int64_t>(wantW) || rec != ArrayRef<int64_t>(wantR))
    return nc.invalid("W " + formatShape(w) + " and R " + formatShape(rec) +
                      " must be " + formatShape(wantW) + " and " +
                      formatShape(wantR) + " for " + Twine(r.directions) +
                      " direction(s), hidden_size " + Twine(r.hidden) +
                      " and X " + formatShape(x));
  if (r.seq < 1)
    return nc.invalid("the sequence is empty: X " + formatShape(x));
  if (nc.hasInput(3)) {
    SmallVector<int64_t> wantB{r.directions, 2 * gh};
    if (nc.shape(3) != ArrayRef<int64_t>(wantB))
      return nc.invalid("B " + formatShape(nc.shape(3)) + " must be " +
                        formatShape(wantB));
  }
  SmallVector<int64_t> wantState =
      r.batchFirst ? SmallVector<int64_t>{r.batch, r.directions, r.hidden}
                   : SmallVector<int64_t>{r.directions, r.batch, r.hidden};
  for (int i : {5, 6})
    if (nc.hasInput(i) && (i == 5 || cell == Cell::LSTM) &&
        nc.shape(i) != ArrayRef<int64_t>(wantState))
      return nc.invalid(Twine(i == 5 ? "initial_h " : "initial_c ") +
                        formatShape(nc.shape(i)) + " must be " +
                        formatShape(wantState));

  // sequence_lens: every sequence must run the whole length.
  if (nc.hasInput(4)) {
    auto lengths = nc.constantInts(4, "the sequence lengths");
    if (failed(lengths))
      return failure();
    for (int64_t length : *lengths)
      if (length != r.seq) {
        std::string given;
        for (int64_t l : *lengths)
          given += (given.empty() ? "" : ", ") + std::to_string(l);
        return nc.unsupported(
            "the sequence lengths (input '" + nc.node.input(4) + "') [" +
            given + "] are not all the sequence length " + Twine(r.seq) +
            "; Loom imports " + op +
            " over sequences of the full length only (pad them, or give "
            "no sequence_lens)");
      }
  }
  return r;
}

/// The input projection of every step and direction: X W' (+ the biases
/// that do not depend on the state), as [S, B, D*G*H] or [B, S, D*G*H].
Value projectInput(NodeContext &nc, OpChain &ops, const Recurrence &r) {
  int64_t gh = r.gates * r.hidden, rows = r.seq * r.batch;
  Value x = ops.reshape(nc.value(0), {rows, r.inputSize});
  Value w = ops.reshape(nc.value(1), {r.directions * gh, r.inputSize});
  Value projected = ops.matmulT(x, w);
  if (nc.hasInput(3)) {
    Value b = nc.value(3);
    Value wb = ops.slice(b, {0, 0}, {r.directions, gh});
    Value rb = ops.slice(b, {0, gh}, {r.directions, gh});
    if (r.cell == Cell::GRU && r.linearBeforeReset) {
      // Rbh is added to h R' inside r * (...): keep it out of the input's.
      std::vector<double> keep(gh, 0.0);
      std::fill(keep.begin(), keep.begin() + 2 * r.hidden, 1.0);
      HostTensor mask = HostTensor::ofFloats(
          *fromMlirType(nc.type(3).getElementType()), {gh}, std::move(keep));
      rb = ops.mul(rb, nc.constantValue(mask));
    }
    Value bias = ops.reshape(ops.add(wb, rb), {r.directions * gh});
    projected = ops.add(projected, bias);
  }
  SmallVector<int64_t> shape =
      r.batchFirst ? SmallVector<int64_t>{r.batch, r.seq, r.directions * gh}
                   : SmallVector<int64_t>{r.seq, r.batch, r.directions * gh};
  return ops.reshape(projected, shape);
}

/// The state input `i` (initial_h or initial_c) of direction `d` as [B, H],
/// or a null Value (zero) when it is not given.
Value initialState(NodeContext &nc, OpChain &ops, const Recurrence &r, int i,
                   int64_t d) {
  if (!nc.hasInput(i))
    return Value();
  Value s = r.batchFirst
                ? ops.slice(nc.value(i), {0, d, 0}, {r.batch, 1, r.hidden})
                : ops.slice(nc.value(i), {d, 0, 0}, {1, r.batch, r.hidden});
  return ops.reshape(s, {r.batch, r.hidden});
}

/// One direction's pass: the state after each time step (in time order),
/// and the final hidden and cell states.
struct Pass {
  SmallVector<Value> states;
  Value lastH, lastC;
};

Pass runDirection(NodeContext &nc, OpChain &ops, const Recurrence &r,
                  Value projected, int64_t d, bool reverse) {
  int64_t h = r.hidden, gh = r.gates * h, b = r.batch;
  // Recurrent weights of this direction, [G*H, H] (GRU with
  // linear_before_reset 0: [2H, H] for z and r, [H, H] for h).
  Value recurrent, recurrentZR, recurrentH, biasRH;
  if (r.cell != Cell::GRU || r.linearBeforeReset) {
    recurrent =
        ops.reshape(ops.slice(nc.value(2), {d, 0, 0}, {1, gh, h}), {gh, h});
  } else {
    recurrentZR = ops.reshape(ops.slice(nc.value(2), {d, 0, 0}, {1, 2 * h, h}),
                              {2 * h, h});
    recurrentH =
        ops.reshape(ops.slice(nc.value(2), {d, 2 * h, 0}, {1, h, h}), {h, h});
  }
  if (r.cell == Cell::GRU && r.linearBeforeReset && nc.hasInput(3))
    biasRH = ops.reshape(ops.slice(nc.value(3), {d, gh + 2 * h}, {1, h}), {h});

  Pass pass;
  pass.states.resize(r.seq);
  Value hPrev = initialState(nc, ops, r, 5, d);
  Value cPrev = r.cell == Cell::LSTM ? initialState(nc, ops, r, 6, d) : Value();
  for (int64_t k = 0; k < r.seq && ops.ok(); ++k) {
    int64_t t = reverse ? r.seq - 1 - k : k;
    Value xt = r.batchFirst ? ops.slice(projected, {0, t, d * gh}, {b, 1, gh})
                            : ops.slice(projected, {t, 0, d * gh}, {1, b, gh});
    xt = ops.reshape(xt, {b, gh});
    Value hNext;
    if (r.cell == Cell::RNN) {
      Value pre = hPrev ? ops.add(xt, ops.matmulT(hPrev, recurrent)) : xt;
      hNext = r.relu[d] ? ops.relu(pre) : ops.tanh(pre);
    } else if (r.cell == Cell::LSTM) {
      Value pre = hPrev ? ops.add(xt, ops.matmulT(hPrev, recurrent)) : xt;
      Value iof = ops.sigmoid(ops.columns(pre, 0, 3 * h));
      Value in = ops.columns(iof, 0, h), out = ops.columns(iof, h, h),
            forget = ops.columns(iof, 2 * h, h);
      Value candidate = ops.tanh(ops.columns(pre, 3 * h, h));
      Value c = ops.mul(in, candidate);
      if (cPrev)
        c = ops.add(ops.mul(forget, cPrev), c);
      hNext = ops.mul(out, ops.tanh(c));
      cPrev = c;
    } else {
      Value xzr = ops.columns(xt, 0, 2 * h), xh = ops.columns(xt, 2 * h, h);
      Value zr, hCandidate;
      if (r.linearBeforeReset) {
        Value hr = hPrev ? ops.matmulT(hPrev, recurrent) : Value();
        zr = ops.sigmoid(hr ? ops.add(xzr, ops.columns(hr, 0, 2 * h)) : xzr);
        Value reset = ops.columns(zr, h, h);
        Value hh = hr ? ops.columns(hr, 2 * h, h) : Value();
        if (biasRH)
          hh = hh ? ops.add(hh, biasRH) : biasRH;
        hCandidate = ops.tanh(hh ? ops.add(xh, ops.mul(reset, hh)) : xh);
      } else {
        zr = ops.sigmoid(hPrev ? ops.add(xzr, ops.matmulT(hPrev, recurrentZR))
                               : xzr);
        Value reset = ops.columns(zr, h, h);
        hCandidate = ops.tanh(
            hPrev ? ops.add(xh, ops.matmulT(ops.mul(reset, hPrev), recurrentH))
                  : xh);
      }
      Value update = ops.columns(zr, 0, h);
      // (1 - z) h~ + z h_prev = h~ + z (h_prev - h~).
      hNext = hPrev ? ops.add(hCandidate,
                              ops.mul(update, ops.sub(hPrev, hCandidate)))
                    : ops.sub(hCandidate, ops.mul(update, hCandidate));
    }
    pass.states[t] = hNext;
    hPrev = hNext;
  }
  pass.lastH = hPrev;
  pass.lastC = cPrev;
  return pass;
}

LogicalResult convertRecurrence(NodeContext &nc, Cell cell) {
  FailureOr<Recurrence> read = readRecurrence(nc, cell);
  if (failed(read))
    return failure();
  const Recurrence &r = *read;
  if (r.seq > kMaxUnrolledSteps)
    return nc.unsupported("the sequence has " + Twine(r.seq) + " steps (X " +
                          formatShape(nc.shape(0)) +
                          "); Loom unrolls RNN, LSTM and GRU over their "
                          "sequence and takes at most " +
                          Twine(kMaxUnrolledSteps) + " steps");
  OpChain ops(nc);
  Value projected = projectInput(nc, ops, r);
  SmallVector<Pass> passes;
  for (int64_t d = 0; d < r.directions && ops.ok(); ++d)
    passes.push_back(
        runDirection(nc, ops, r, projected, d, r.reverseOnly || d == 1));
  if (!ops.ok())
    return failure();

  int64_t b = r.batch, h = r.hidden;
  // Y: [S, D, B, H] (layout 0) or [B, S, D, H]: the steps stacked along
  // the sequence axis, then the directions.
  if (nc.hasOutput(0)) {
    SmallVector<int64_t> step = r.batchFirst ? SmallVector<int64_t>{b, 1, 1, h}
                                             : SmallVector<int64_t>{1, 1, b, h};
    SmallVector<Value> perDirection;
    for (const Pass &pass : passes) {
      SmallVector<Value> steps;
      for (Value s : pass.states)
        steps.push_back(ops.reshape(s, step));
      perDirection.push_back(ops.concat(steps, r.batchFirst ? 1 : 0));
    }
    nc.setOutput(0, ops.concat(perDirection, r.batchFirst ? 2 : 1));
  }
  // Y_h and Y_c: [D, B, H] (layout 0) or [B, D, H].
  SmallVector<int64_t> last = r.batchFirst ? SmallVector<int64_t>{b, 1, h}
                                           : SmallVector<int64_t>{1, b, h};
  auto finals = [&](Value Pass::*member) {
    SmallVector<Value> values;
    for (const Pass &pass : passes)
      values.push_back(ops.reshape(pass.*member, last));
    return ops.concat(values, r.batchFirst ? 1 : 0);
  };
  if (nc.hasOutput(1))
    nc.setOutput(1, finals(&Pass::lastH));
  if (cell == Cell::LSTM && nc.hasOutput(2))
    nc.setOutput(2, finals(&Pass::lastC));
  return success(ops.ok());
}

LogicalResult convertRNN(NodeContext &nc) {
  return convertRecurrence(nc, Cell::RNN);
}

LogicalResult convertLSTM(NodeContext &nc) {
  return convertRecurrence(nc, Cell::LSTM);
}

LogicalResult convertGRU(NodeContext &nc) {
  return convertRecurrence(nc, Cell::GRU);
}

} // namespace

void addRNNConverters(llvm::StringMap<Converter> &t) {
  // 1 has `output_sequence` and fixed output arity; 7 is the form read
  // here; 14 adds `layout`.
  t["RNN"] = {7, convertRNN};
  t["LSTM"] = {7, convertLSTM};
  t["GRU"] = {7, convertGRU};
}

} // namespace loom::onnx_import
