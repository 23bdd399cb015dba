//===- ConvertEinsum.cpp - ONNX Einsum as transposes and a matmul ---------===//
//
// Einsum of one or two operands imports as existing loom ops: sums over the
// subscripts only one operand has, transposes, and one batched loom.matmul.
// Its gradient, sharding and kernels are those ops'.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace loom::onnx_import {
namespace {

/// One operand's (or the output's) subscripts: a label per dimension.
/// Letters keep their character; the dimensions an ellipsis stands for get
/// labels from 256 up, aligned to the right across operands, so that they
/// broadcast as numpy's do.
using Labels = SmallVector<int>;

constexpr int kEllipsisLabel = 256;

/// Parses one term against `rank` (-1 for the output, whose ellipsis takes
/// `ellipsisRank` dimensions). Returns failure after recording the error.
FailureOr<Labels> parseEinsumTerm(NodeContext &nc, StringRef term, int64_t rank,
                                  int64_t ellipsisRank) {
  Labels labels;
  size_t dots = term.find("...");
  if (dots != StringRef::npos && term.find("...", dots + 3) != StringRef::npos)
    return nc.invalid("Einsum term '" + term + "' has two ellipses");
  StringRef head = dots == StringRef::npos ? term : term.take_front(dots);
  StringRef tail = dots == StringRef::npos ? "" : term.drop_front(dots + 3);
  int64_t letters = 0;
  for (StringRef part : {head, tail})
    for (char c : part) {
      if (!llvm::isAlpha(c))
        return nc.invalid("Einsum term '" + term + "' has the character '" +
                          Twine(c) + "'; subscripts are letters and '...'");
      ++letters;
    }
  int64_t ellipsis = 0;
  if (rank >= 0) {
    if (dots == StringRef::npos ? letters != rank : letters > rank)
      return nc.invalid("Einsum term '" + term + "' has " + Twine(letters) +
                        " subscripts for an operand of rank " + Twine(rank));
    ellipsis = dots == StringRef::npos ? 0 : rank - letters;
  } else if (dots != StringRef::npos) {
    ellipsis = ellipsisRank;
  }
  for (char c : head)
    labels.push_back(c);
  for (int64_t i = 0; i < ellipsis; ++i)
    labels.push_back(kEllipsisLabel + int(ellipsisRank - ellipsis + i));
  for (char c : tail)
    labels.push_back(c);
  return labels;
}

std::string labelName(int label) {
  if (label < kEllipsisLabel)
    return std::string("'") + char(label) + "'";
  return "'...' dimension " + std::to_string(label - kEllipsisLabel);
}

/// An equation's subscripts: each operand's (after the ellipsis is
/// expanded), the output's, and every subscript's size (the larger where
/// one operand broadcasts a 1).
struct EinsumSpec {
  SmallVector<Labels, 2> in;
  Labels out;
  llvm::DenseMap<int, int64_t> size;

  bool inOutput(int label) const { return llvm::is_contained(out, label); }
};

/// Reads the node's equation against its operands' ranks.
FailureOr<EinsumSpec> parseEinsum(NodeContext &nc) {
  auto equation = nc.attrString("equation", "");
  if (failed(equation))
    return failure();
  std::string eq;
  for (char c : *equation)
    if (c != ' ')
      eq += c;
  int operands = nc.node.input_size();
  if (operands < 1 || operands > 2)
    return nc.unsupported("Einsum of " + Twine(operands) +
                          " operands; Loom imports one or two (write a chain "
                          "of two-operand Einsums)");
  for (int i = 0; i < operands; ++i)
    if (!nc.type(i).getElementType().isFloat())
      return nc.unsupported("Einsum of integer operands; Loom imports "
                            "floating-point ones");
  StringRef equationRef(eq);
  auto [lhsTerms, outTerm] = equationRef.split("->");
  bool explicitOutput = equationRef.contains("->");
  SmallVector<StringRef> terms;
  lhsTerms.split(terms, ',');
  if (int(terms.size()) != operands)
    return nc.invalid("Einsum equation '" + *equation + "' has " +
                      Twine(terms.size()) + " terms for " + Twine(operands) +
                      " operands");

  // Subscripts of the operands, and of the ellipsis (right-aligned).
  int64_t ellipsisRank = 0;
  for (int i = 0; i < operands; ++i) {
    size_t letters =
        llvm::count_if(terms[i], [](char c) { return llvm::isAlpha(c); });
    if (terms[i].contains("..."))
      ellipsisRank = std::max<int64_t>(ellipsisRank, nc.rank(i) - letters);
  }
  EinsumSpec spec;
  SmallVector<Labels, 2> &in = spec.in;
  llvm::DenseMap<int, int64_t> &size = spec.size;
  for (int i = 0; i < operands; ++i) {
    auto labels = parseEinsumTerm(nc, terms[i], nc.rank(i), ellipsisRank);
    if (failed(labels))
      return failure();
    for (auto [d, label] : llvm::enumerate(*labels)) {
      if (llvm::count(*labels, label) > 1)
        return nc.unsupported(
            "Einsum term '" + terms[i] + "' repeats the subscript " +
            labelName(label) +
            " (a diagonal); Loom imports subscripts that appear once per "
            "operand");
      int64_t n = nc.shape(i)[d];
      auto [it, inserted] = size.try_emplace(label, n);
      if (!inserted && it->second != n) {
        if (it->second != 1 && n != 1)
          return nc.invalid("Einsum subscript " + labelName(label) +
                            " has sizes " + Twine(it->second) + " and " +
                            Twine(n));
        it->second = std::max(it->second, n);
      }
    }
    in.push_back(std::move(*labels));
  }
  Labels &out = spec.out;
  if (explicitOutput) {
    auto labels = parseEinsumTerm(nc, outTerm, -1, ellipsisRank);
    if (failed(labels))
      return failure();
    out = std::move(*labels);
  } else {
    // Implicit output: the ellipsis, then the letters that appear once, in
    // alphabetical order.
    for (int64_t i = 0; i < ellipsisRank; ++i)
      out.push_back(kEllipsisLabel + int(i));
    for (int c = 'A'; c <= 'z'; ++c) {
      int count = 0;
      for (const Labels &l : in)
        count += llvm::count(l, c);
      if (count == 1)
        out.push_back(c);
    }
  }
  for (int label : out) {
    if (llvm::count(out, label) > 1)
      return nc.invalid("Einsum output '" + outTerm + "' repeats " +
                        labelName(label));
    if (!size.count(label))
      return nc.invalid("Einsum output subscript " + labelName(label) +
                        " is in no operand");
  }

  return spec;
}

/// The operands with the subscripts that only one of them has, and the
/// output has not, summed away (their labels dropped from `spec.in`).
FailureOr<SmallVector<Value, 2>> sumLoneSubscripts(NodeContext &nc,
                                                   EinsumSpec &spec) {
  int operands = static_cast<int>(spec.in.size());
  SmallVector<Labels, 2> &in = spec.in;
  SmallVector<Value, 2> values;
  for (int i = 0; i < operands; ++i) {
    Value v = nc.value(i);
    SmallVector<int64_t> axes;
    Labels kept;
    for (auto [d, label] : llvm::enumerate(in[i])) {
      bool elsewhere = operands == 2 && llvm::is_contained(in[1 - i], label);
      if (!spec.inOutput(label) && !elsewhere)
        axes.push_back(d);
      else
        kept.push_back(label);
    }
    if (!axes.empty()) {
      auto sum = nc.create<ReduceSumOp>(
          v, nc.builder.getDenseI64ArrayAttr(axes), UnitAttr());
      if (failed(sum))
        return failure();
      v = *sum;
      in[i] = kept;
    }
    values.push_back(v);
  }

  return values;
}

/// `v`, whose dimensions carry the subscripts `from`, transposed to `to`.
FailureOr<Value> transposeTo(NodeContext &nc, Value v, const Labels &from,
                             const Labels &to) {
  SmallVector<int64_t> perm;
  for (int label : to)
    perm.push_back(llvm::find(from, label) - from.begin());
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return v;
  return nc.create<TransposeOp>(v, nc.builder.getDenseI64ArrayAttr(perm));
}

/// Two operands as one matmul: [batch..., free..., contracted] x
/// [batch..., contracted, free...] reshaped to [batch..., M, K] x
/// [batch..., K, N], then back to the subscripts' shape and order.
FailureOr<Value> contract(NodeContext &nc, EinsumSpec &spec,
                          ArrayRef<Value> values) {
  SmallVector<Labels, 2> &in = spec.in;
  llvm::DenseMap<int, int64_t> &size = spec.size;
  auto transpose = [&](Value v, const Labels &from, const Labels &to) {
    return transposeTo(nc, v, from, to);
  };
  Labels batch, freeA, freeB, contracted;
  for (int label : in[0]) {
    bool inB = llvm::is_contained(in[1], label);
    if (inB && spec.inOutput(label))
      batch.push_back(label);
    else if (inB)
      contracted.push_back(label);
    else
      freeA.push_back(label);
  }
  for (int label : in[1])
    if (!llvm::is_contained(in[0], label))
      freeB.push_back(label);
  auto dimOf = [&](int i, int label) {
    return cast<RankedTensorType>(values[i].getType())
        .getShape()[llvm::find(in[i], label) - in[i].begin()];
  };
  for (int label : contracted)
    if (dimOf(0, label) != dimOf(1, label))
      return nc.unsupported("Einsum contracts " + labelName(label) +
                            " of sizes " + Twine(dimOf(0, label)) + " and " +
                            Twine(dimOf(1, label)) +
                            "; Loom contracts subscripts of equal sizes");
  int64_t m = 1, n = 1, k = 1;
  for (int label : freeA)
    m *= size[label];
  for (int label : freeB)
    n *= size[label];
  for (int label : contracted)
    k *= size[label];

  Labels orderA = batch, orderB = batch;
  orderA.append(freeA);
  orderA.append(contracted);
  orderB.append(contracted);
  orderB.append(freeB);
  auto a = transpose(values[0], in[0], orderA);
  auto b = transpose(values[1], in[1], orderB);
  if (failed(a) || failed(b))
    return failure();
  SmallVector<int64_t> shapeA, shapeB, shapeOut;
  for (int label : batch) {
    shapeA.push_back(dimOf(0, label));
    shapeB.push_back(dimOf(1, label));
    shapeOut.push_back(size[label]);
  }
  shapeA.append({m, k});
  shapeB.append({k, n});
  auto lhs = nc.reshape(*a, shapeA);
  auto rhs = nc.reshape(*b, shapeB);
  if (failed(lhs) || failed(rhs))
    return failure();
  auto product = nc.create<MatmulOp>(*lhs, *rhs, UnitAttr(), UnitAttr());
  if (failed(product))
    return failure();
  Labels produced = batch;
  for (int label : freeA) {
    produced.push_back(label);
    shapeOut.push_back(size[label]);
  }
  for (int label : freeB) {
    produced.push_back(label);
    shapeOut.push_back(size[label]);
  }
  auto unflat = nc.reshape(*product, shapeOut);
  if (failed(unflat))
    return failure();
  return transpose(*unflat, produced, spec.out);
}

/// Einsum (12) of one or two operands, as transposes, sums and one batched
/// matmul: each operand's labels are split into batch (in both operands and
/// the output), free (in one operand and the output) and contracted (in
/// both, not in the output); a label in one operand only and not in the
/// output is summed first. A label repeated within one operand (a
/// diagonal) is refused.
LogicalResult convertEinsum(NodeContext &nc) {
  auto spec = parseEinsum(nc);
  if (failed(spec))
    return failure();
  auto values = sumLoneSubscripts(nc, *spec);
  if (failed(values))
    return failure();
  auto result = values->size() == 1
                    ? transposeTo(nc, (*values)[0], spec->in[0], spec->out)
                    : contract(nc, *spec, *values);
  if (failed(result))
    return failure();
  nc.setOutput(0, *result);
  return success();
}

} // namespace

void addEinsumConverters(llvm::StringMap<Converter> &t) {
  t["Einsum"] = {12, convertEinsum};
}

} // namespace loom::onnx_import
