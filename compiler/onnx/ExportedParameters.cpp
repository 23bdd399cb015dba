//===- ExportedParameters.cpp - Parameters as the model had them ----------===//

#include "compiler/onnx/ExportedParameters.h"
#include "compiler/onnx/HostTensor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <onnx/onnx_pb.h>
#include <optional>

using namespace llvm;

namespace loom::onnx_import {

bool isParameterName(StringRef name) {
  if (name.empty() || !(isAlpha(name.front()) || name.front() == '_'))
    return false;
  bool segmentEmpty = false;
  for (char c : name) {
    if (c == '.') {
      if (segmentEmpty)
        return false;
      segmentEmpty = true;
    } else if (isAlnum(c) || c == '_') {
      segmentEmpty = false;
    } else {
      return false;
    }
  }
  return !segmentEmpty;
}

namespace {

/// How a folded tensor is made from its parameter.
enum class ViewKind { Copy, Reshape, Transpose, Cast, LeadingRows };

struct View {
  std::string parameter;
  ViewKind kind = ViewKind::Copy;
  /// Transpose: the permutation; LeadingRows: the number of rows.
  SmallVector<int64_t> perm;
  int64_t rows = 0;
};

/// An initializer's element type, shape and (lazily) bytes.
struct Tensor {
  const onnx::TensorProto *proto = nullptr;
  DType dtype = DType::F32;
  SmallVector<int64_t> shape;
  int64_t count = 0;
  std::optional<std::optional<std::string>> bytes;
};

class Restorer {
public:
  Restorer(onnx::GraphProto &graph, StringRef baseDir,
           std::vector<std::string> &notes)
      : graph(graph), baseDir(baseDir.str()), notes(notes) {}

  void splitSharedValues();
  std::string restoreFoldedViews();

private:
  const std::string *bytesOf(Tensor &t);
  std::optional<View> match(Tensor &folded, Tensor &param,
                            const std::string &paramName);
  bool isTranspose(Tensor &folded, Tensor &param, ArrayRef<int64_t> perm);
  void replace(const std::string &folded, const Tensor &shape, const View &v);
  std::string addShapeConstant(const std::string &base,
                               ArrayRef<int64_t> values);
  std::string uniqueName(const std::string &base);

  onnx::GraphProto &graph;
  std::string baseDir;
  std::vector<std::string> &notes;
  /// Nodes to insert before the graph's own, in order.
  std::vector<onnx::NodeProto> prologue;
  StringSet<> names;
};

/// Every value name the graph uses, so that new ones do not collide.
StringSet<> valueNames(const onnx::GraphProto &graph) {
  StringSet<> names;
  for (const auto &t : graph.initializer())
    names.insert(t.name());
  for (const auto &v : graph.input())
    names.insert(v.name());
  for (const auto &n : graph.node()) {
    for (const auto &s : n.input())
      names.insert(s);
    for (const auto &s : n.output())
      names.insert(s);
    names.insert(n.name());
  }
  return names;
}

std::string formatDims(ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (auto [i, d] : enumerate(dims))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

void Restorer::splitSharedValues() {
  StringMap<int> initializers;
  for (auto [i, t] : enumerate(graph.initializer()))
    initializers[t.name()] = static_cast<int>(i);
  StringSet<> outputs;
  for (const auto &o : graph.output())
    outputs.insert(o.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    bool shared = node.op_type() == "Identity" &&
                  (node.domain().empty() || node.domain() == "ai.onnx") &&
                  node.input_size() == 1 && node.output_size() == 1;
    auto source = shared ? initializers.find(node.input(0))
                         : initializers.end();
    const std::string &name = shared ? node.output(0) : node.name();
    if (source == initializers.end() || !isParameterName(name) ||
        initializers.count(name) || outputs.contains(name)) {
      *kept.Add() = std::move(node);
      continue;
    }
    const onnx::TensorProto &from = graph.initializer(source->second);
    std::optional<DType> dtype = toDType(from.data_type());
    if (!dtype || !isFloat(*dtype)) {
      *kept.Add() = std::move(node);
      continue;
    }
    onnx::TensorProto copy = from;
    copy.set_name(name);
    *graph.add_initializer() = std::move(copy);
    initializers[name] = graph.initializer_size() - 1;
    notes.push_back("'" + name + "' was exported as an Identity of '" +
                    from.name() +
                    "' (the export stores equal values once): it is a "
                    "parameter of its own, initialized from that value");
  }
  graph.mutable_node()->Swap(&kept);
}

const std::string *Restorer::bytesOf(Tensor &t) {
  if (!t.bytes) {
    std::string why;
    t.bytes = tensorBytes(*t.proto, t.dtype, baseDir, why);
  }
  return *t.bytes ? &**t.bytes : nullptr;
}

bool Restorer::isTranspose(Tensor &folded, Tensor &param,
                           ArrayRef<int64_t> perm) {
  const std::string *f = bytesOf(folded), *p = bytesOf(param);
  if (!f || !p)
    return false;
  const size_t size = elementSize(param.dtype);
  SmallVector<int64_t> pStrides = stridesOf(param.shape);
  const size_t rank = folded.shape.size();
  // Walk the folded tensor in row-major order; `offset` follows the
  // parameter's element at the same index under the permutation.
  SmallVector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < folded.count; ++i) {
    if (std::memcmp(f->data() + i * size, p->data() + offset * size, size))
      return false;
    for (size_t d = rank; d-- > 0;) {
      offset += pStrides[perm[d]];
      if (++index[d] < folded.shape[d])
        break;
      offset -= pStrides[perm[d]] * folded.shape[d];
      index[d] = 0;
    }
  }
  return true;
}

std::optional<View> Restorer::match(Tensor &folded, Tensor &param,
                                    const std::string &paramName) {
  View v;
  v.parameter = paramName;
  if (folded.dtype != param.dtype) {
    if (folded.shape != param.shape)
      return std::nullopt;
    const std::string *f = bytesOf(folded), *p = bytesOf(param);
    if (!f || !p)
      return std::nullopt;
    HostTensor cast = HostTensor::fromBytes(param.dtype, param.shape, *p)
                          .castTo(folded.dtype);
    HostTensor have = HostTensor::fromBytes(folded.dtype, folded.shape, *f);
    if (cast.floats != have.floats)
      return std::nullopt;
    v.kind = ViewKind::Cast;
    return v;
  }
  if (folded.count == param.count) {
    const std::string *f = bytesOf(folded), *p = bytesOf(param);
    if (!f || !p)
      return std::nullopt;
    if (*f == *p) {
      v.kind = folded.shape == param.shape ? ViewKind::Copy : ViewKind::Reshape;
      return v;
    }
    const size_t rank = param.shape.size();
    if (rank < 2 || rank > 6 || folded.shape.size() != rank)
      return std::nullopt;
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    while (std::next_permutation(perm.begin(), perm.end())) {
      bool shapes = all_of(seq<size_t>(0, rank), [&](size_t i) {
        return folded.shape[i] == param.shape[perm[i]];
      });
      if (shapes && isTranspose(folded, param, perm)) {
        v.kind = ViewKind::Transpose;
        v.perm = perm;
        return v;
      }
    }
    return std::nullopt;
  }
  // The leading rows of dimension 0: an embedding looked up at 0..T-1.
  if (param.shape.empty() || param.shape[0] == 0 || folded.count == 0 ||
      folded.count > param.count)
    return std::nullopt;
  const int64_t row = param.count / param.shape[0];
  if (row == 0 || folded.count % row)
    return std::nullopt;
  const std::string *f = bytesOf(folded), *p = bytesOf(param);
  if (!f || !p || p->compare(0, f->size(), *f) != 0)
    return std::nullopt;
  v.kind = ViewKind::LeadingRows;
  v.rows = folded.count / row;
  return v;
}

std::string Restorer::uniqueName(const std::string &base) {
  std::string name = base;
  for (int i = 1; names.contains(name); ++i)
    name = base + "_" + std::to_string(i);
  names.insert(name);
  return name;
}

std::string Restorer::addShapeConstant(const std::string &base,
                                       ArrayRef<int64_t> values) {
  onnx::TensorProto &t = *graph.add_initializer();
  t.set_name(uniqueName(base));
  t.set_data_type(onnx::TensorProto_DataType_INT64);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values)
    t.add_int64_data(v);
  return t.name();
}

void Restorer::replace(const std::string &folded, const Tensor &shape,
                       const View &v) {
  auto node = [&](StringRef op, std::vector<std::string> inputs,
                  const std::string &output) -> onnx::NodeProto & {
    onnx::NodeProto &n = prologue.emplace_back();
    n.set_op_type(op.str());
    n.set_name(uniqueName(folded + "/" + op.str()));
    for (std::string &in : inputs)
      n.add_input(std::move(in));
    n.add_output(output);
    return n;
  };
  auto reshape = [&](const std::string &from) {
    node("Reshape", {from, addShapeConstant(folded + "/shape", shape.shape)},
         folded);
  };
  std::string what;
  switch (v.kind) {
  case ViewKind::Copy:
    node("Identity", {v.parameter}, folded);
    what = "a copy";
    break;
  case ViewKind::Reshape:
    reshape(v.parameter);
    what = "a reshape to " + formatDims(shape.shape);
    break;
  case ViewKind::Transpose: {
    onnx::AttributeProto &perm = *node("Transpose", {v.parameter}, folded)
                                      .add_attribute();
    perm.set_name("perm");
    perm.set_type(onnx::AttributeProto_AttributeType_INTS);
    for (int64_t p : v.perm)
      perm.add_ints(p);
    what = "the transpose (perm " + formatDims(v.perm) + ")";
    break;
  }
  case ViewKind::Cast: {
    onnx::AttributeProto &to =
        *node("Cast", {v.parameter}, folded).add_attribute();
    to.set_name("to");
    to.set_type(onnx::AttributeProto_AttributeType_INT);
    to.set_i(static_cast<int64_t>(shape.dtype));
    what = "a cast to " + onnxTypeName(static_cast<int32_t>(shape.dtype));
    break;
  }
  case ViewKind::LeadingRows: {
    std::string rows = uniqueName(folded + "/rows");
    node("Slice",
         {v.parameter, addShapeConstant(folded + "/starts", {0}),
          addShapeConstant(folded + "/ends", {v.rows}),
          addShapeConstant(folded + "/axes", {0})},
         rows);
    reshape(rows);
    what = "rows 0 to " + std::to_string(v.rows - 1);
    break;
  }
  }
  notes.push_back("'" + folded + "' is " + what + " of parameter '" +
                  v.parameter +
                  "', folded by the export: it is computed from the "
                  "parameter, so that training updates it");
}

std::string Restorer::restoreFoldedViews() {
  names = valueNames(graph);
  StringSet<> statistics, used;
  for (const auto &node : graph.node()) {
    for (const auto &in : node.input())
      used.insert(in);
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        statistics.insert(node.input(i));
  }
  // Tensors by name; parameters in the graph's order.
  StringMap<Tensor> tensors;
  std::vector<std::string> params, folded;
  for (const onnx::TensorProto &t : graph.initializer()) {
    std::optional<DType> dtype = toDType(t.data_type());
    if (!dtype || !isFloat(*dtype))
      continue;
    Tensor tensor;
    tensor.proto = &t;
    tensor.dtype = *dtype;
    tensor.shape.assign(t.dims().begin(), t.dims().end());
    std::optional<int64_t> count = checkedNumElements(tensor.shape);
    if (!count || *count == 0)
      continue;
    tensor.count = *count;
    tensors[t.name()] = std::move(tensor);
    if (isParameterName(t.name())) {
      if (!statistics.contains(t.name()))
        params.push_back(t.name());
    } else if (used.contains(t.name())) {
      folded.push_back(t.name());
    }
  }
  StringSet<> replaced;
  struct Replacement {
    std::string folded;
    View view;
  };
  std::vector<Replacement> replacements;
  for (const std::string &name : folded) {
    Tensor &f = tensors[name];
    std::vector<View> views;
    for (const std::string &p : params)
      if (std::optional<View> v = match(f, tensors[p], p))
        views.push_back(std::move(*v));
    if (views.empty())
      continue;
    const std::string *bytes = bytesOf(f);
    const size_t size = elementSize(f.dtype);
    bool uniform = bytes && all_of(seq<int64_t>(1, f.count), [&](int64_t i) {
                     return !std::memcmp(bytes->data(), bytes->data() + i * size,
                                         size);
                   });
    std::string list;
    for (const View &v : views)
      list += (list.empty() ? "'" : ", '") + v.parameter + "'";
    list += "'";
    if (uniform) {
      notes.push_back("'" + name + "' equals a folded view of " + list +
                      ", but its elements are all equal, which proves "
                      "nothing: it stays a constant (export with "
                      "do_constant_folding=False if it is a parameter)");
      continue;
    }
    if (views.size() > 1)
      return "initializer '" + name + "' is, bit for bit, a folded view of " +
             std::to_string(views.size()) + " parameters (" + list +
             "), so Loom cannot tell which one training should update "
             "through it; export the model with do_constant_folding=False";
    replacements.push_back({name, std::move(views.front())});
  }
  for (const Replacement &r : replacements)
    replace(r.folded, tensors[r.folded], r.view);
  // The tensors point into the initializer list: edit it only now.
  for (const Replacement &r : replacements)
    replaced.insert(r.folded);
  if (replaced.empty())
    return "";
  google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
  for (onnx::TensorProto &t : *graph.mutable_initializer())
    if (!replaced.contains(t.name()))
      *inits.Add() = std::move(t);
  graph.mutable_initializer()->Swap(&inits);
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
  for (onnx::ValueInfoProto &in : *graph.mutable_input())
    if (!replaced.contains(in.name()))
      *inputs.Add() = std::move(in);
  graph.mutable_input()->Swap(&inputs);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (onnx::NodeProto &n : prologue)
    *nodes.Add() = std::move(n);
  for (onnx::NodeProto &n : *graph.mutable_node())
    *nodes.Add() = std::move(n);
  graph.mutable_node()->Swap(&nodes);
  return "";
}

} // namespace

std::string restoreExportedParameters(onnx::GraphProto &graph,
                                      StringRef baseDir,
                                      std::vector<std::string> &notes) {
  Restorer restorer(graph, baseDir, notes);
  restorer.splitSharedValues();
  return restorer.restoreFoldedViews();
}

} // namespace loom::onnx_import
