//===- ModelChecks.cpp - Checks before ONNX's shape inference -------------===//

#include "compiler/onnx/ModelChecks.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

namespace loom::onnx_import {

namespace {

using onnx::TensorProto;

/// Bytes per element of `type` in raw_data; 0 for a type without a raw form
/// (STRING, UNDEFINED, a number no type has).
uint64_t rawElementSize(int32_t type) {
  switch (type) {
  case TensorProto::UINT8:
  case TensorProto::INT8:
  case TensorProto::BOOL:
    return 1;
  case TensorProto::UINT16:
  case TensorProto::INT16:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    return 2;
  case TensorProto::FLOAT:
  case TensorProto::INT32:
  case TensorProto::UINT32:
    return 4;
  case TensorProto::INT64:
  case TensorProto::UINT64:
  case TensorProto::DOUBLE:
  case TensorProto::COMPLEX64:
    return 8;
  case TensorProto::COMPLEX128:
    return 16;
  default:
    return 0;
  }
}

/// The values `t` holds in the typed field of its data type, and how many
/// make one element; nullopt for a type without one.
std::optional<std::pair<uint64_t, uint64_t>> typedValues(const TensorProto &t) {
  auto n = [](int size) { return static_cast<uint64_t>(size); };
  switch (t.data_type()) {
  case TensorProto::FLOAT:
    return std::make_pair(n(t.float_data_size()), uint64_t(1));
  case TensorProto::COMPLEX64:
    return std::make_pair(n(t.float_data_size()), uint64_t(2));
  case TensorProto::UINT8:
  case TensorProto::INT8:
  case TensorProto::BOOL:
  case TensorProto::UINT16:
  case TensorProto::INT16:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
  case TensorProto::INT32:
    return std::make_pair(n(t.int32_data_size()), uint64_t(1));
  case TensorProto::INT64:
    return std::make_pair(n(t.int64_data_size()), uint64_t(1));
  case TensorProto::DOUBLE:
    return std::make_pair(n(t.double_data_size()), uint64_t(1));
  case TensorProto::COMPLEX128:
    return std::make_pair(n(t.double_data_size()), uint64_t(2));
  case TensorProto::UINT32:
  case TensorProto::UINT64:
    return std::make_pair(n(t.uint64_data_size()), uint64_t(1));
  case TensorProto::STRING:
    return std::make_pair(n(t.string_data_size()), uint64_t(1));
  default:
    return std::nullopt;
  }
}

std::string typeName(int32_t type) {
  const std::string &name =
      TensorProto::DataType_Name(static_cast<TensorProto::DataType>(type));
  return name.empty() ? "#" + std::to_string(type) : name;
}

/// "" if the data of the constant `t` (`what` in messages) is as large as
/// its dims say, else what is wrong.
std::string checkTensorData(const TensorProto &t, const std::string &what) {
  // External data is read, and its size checked, with the weights.
  if (t.data_location() == TensorProto::EXTERNAL)
    return "";
  uint64_t count = 1;
  for (int64_t d : t.dims())
    if (d < 0 ||
        __builtin_mul_overflow(count, static_cast<uint64_t>(d), &count) ||
        count > (uint64_t(1) << 62))
      return what + " has invalid dims (a negative or too large dimension)";
  if (t.has_raw_data()) {
    uint64_t size = rawElementSize(t.data_type());
    if (size == 0)
      return what + " holds raw_data, which its data type " +
             typeName(t.data_type()) + " has no form of";
    uint64_t have = t.raw_data().size();
    if (have % size != 0 || have / size != count)
      return what + " holds " + std::to_string(have) +
             " bytes of raw_data, but its dims need " + std::to_string(count) +
             " elements of " + std::to_string(size) + " bytes";
    return "";
  }
  std::optional<std::pair<uint64_t, uint64_t>> typed = typedValues(t);
  if (typed && typed->first != count * typed->second)
    return what + " holds " + std::to_string(typed->first) +
           " values, but its dims need " +
           std::to_string(count * typed->second);
  return "";
}

/// Integer attributes (one or a list) ONNX's inference divides by or
/// multiplies together unchecked, with the range they must lie in; `op`
/// null for every op with an attribute of that name.
struct AttributeRange {
  const char *op, *name;
  int64_t min, max;
};
constexpr int64_t kLargest = int64_t(1) << 31;
const AttributeRange kAttributeRanges[] = {
    {"DepthToSpace", "blocksize", 1, 65536},
    {"SpaceToDepth", "blocksize", 1, 65536},
    {nullptr, "strides", 1, kLargest},
    {nullptr, "dilations", 1, kLargest},
    {nullptr, "kernel_shape", 1, kLargest},
    {"Conv", "group", 1, kLargest},
    {"ConvTranspose", "group", 1, kLargest},
};

/// "" if `node`'s attributes lie in their kAttributeRanges, else which not.
std::string checkAttributeRanges(const onnx::NodeProto &node,
                                 const std::string &where) {
  for (const AttributeRange &range : kAttributeRanges) {
    if (range.op && node.op_type() != range.op)
      continue;
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.name() != range.name)
        continue;
      std::vector<int64_t> values(attr.ints().begin(), attr.ints().end());
      if (attr.has_i())
        values.push_back(attr.i());
      for (int64_t v : values)
        if (v < range.min || v > range.max)
          return where + ": attribute '" + attr.name() + "' holds " +
                 std::to_string(v) + "; it must be between " +
                 std::to_string(range.min) + " and " +
                 std::to_string(range.max);
    }
  }
  return "";
}

/// What is known of the values of a graph before inference: the ranks of
/// initializers and of declared values, and the first dimensions of the
/// declared ones.
struct Known {
  std::unordered_map<std::string, int> ranks;
  std::unordered_map<std::string, int64_t> firstDims;
};

/// "" if the weight of a convolution has a rank ONNX's inference can
/// read: at least 3, and the input's when both are known.
std::string checkConvolutionRanks(const onnx::NodeProto &node,
                                  const std::string &where,
                                  const Known &known) {
  if ((node.op_type() != "Conv" && node.op_type() != "ConvTranspose") ||
      node.input_size() < 2)
    return "";
  auto x = known.ranks.find(node.input(0)), w = known.ranks.find(node.input(1));
  if (w == known.ranks.end())
    return "";
  bool xKnown = x != known.ranks.end();
  if (w->second < 3 || (xKnown && x->second != w->second))
    return where + ": its weight '" + node.input(1) + "' has rank " +
           std::to_string(w->second) +
           "; it must have at least 3 (C x M x k1 ...) and the input's" +
           (xKnown ? " (" + std::to_string(x->second) + ")" : "");
  return "";
}

/// "" if no shape operand of `node` is declared longer than a shape may be.
std::string checkShapeOperand(const onnx::NodeProto &node,
                              const std::string &where, const Known &known) {
  int i = node.op_type() == "ConstantOfShape"                         ? 0
          : node.op_type() == "Reshape" || node.op_type() == "Expand" ? 1
                                                                      : -1;
  if (i < 0 || i >= node.input_size())
    return "";
  auto length = known.firstDims.find(node.input(i));
  if (length == known.firstDims.end() ||
      length->second <= kMaxShapeOperandLength)
    return "";
  return where + ": its shape operand '" + node.input(i) +
         "' is declared with " + std::to_string(length->second) +
         " elements; a shape has at most " +
         std::to_string(kMaxShapeOperandLength) + " dimensions";
}

std::string nodeLabel(const onnx::NodeProto &node, int index) {
  return "node '" +
         (node.name().empty() ? node.op_type() + "_" + std::to_string(index)
                              : node.name()) +
         "' (" + node.op_type() + ")";
}

/// "" if the constant tensors of `node`'s attributes hold their data.
/// Subgraphs are checked with the constants of the graph in scope.
std::string checkGraph(const onnx::GraphProto &graph, Known known);

std::string checkAttributes(const onnx::NodeProto &node,
                            const std::string &where, const Known &known) {
  for (const onnx::AttributeProto &attr : node.attribute()) {
    std::string what = where + " attribute '" + attr.name() + "'";
    if (attr.has_t())
      if (std::string e = checkTensorData(attr.t(), what); !e.empty())
        return e;
    for (const TensorProto &t : attr.tensors())
      if (std::string e = checkTensorData(t, what); !e.empty())
        return e;
    if (attr.has_g())
      if (std::string e = checkGraph(attr.g(), known); !e.empty())
        return e;
    for (const onnx::GraphProto &sub : attr.graphs())
      if (std::string e = checkGraph(sub, known); !e.empty())
        return e;
  }
  return "";
}

/// Checks `graph` and, recursively, its subgraphs; `known` holds what the
/// enclosing graphs make known.
std::string checkGraph(const onnx::GraphProto &graph, Known known) {
  for (const TensorProto &t : graph.initializer()) {
    if (std::string e = checkTensorData(t, "initializer '" + t.name() + "'");
        !e.empty())
      return e;
    known.ranks[t.name()] = t.dims_size();
  }
  for (const auto *list :
       {&graph.input(), &graph.value_info(), &graph.output()})
    for (const onnx::ValueInfoProto &info : *list) {
      const auto &type = info.type().tensor_type();
      if (!type.has_shape())
        continue;
      known.ranks.emplace(info.name(), type.shape().dim_size());
      if (type.shape().dim_size() > 0)
        known.firstDims[info.name()] = type.shape().dim(0).dim_value();
    }
  for (int k = 0; k < graph.node_size(); ++k) {
    const onnx::NodeProto &node = graph.node(k);
    std::string where = nodeLabel(node, k);
    if (std::string e = checkAttributes(node, where, known); !e.empty())
      return e;
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      continue;
    if (std::string e = checkAttributeRanges(node, where); !e.empty())
      return e;
    for (auto check : {checkConvolutionRanks, checkShapeOperand})
      if (std::string e = check(node, where, known); !e.empty())
        return e;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// LayerNormalization's axis
//===----------------------------------------------------------------------===//

/// The LayerNormalization axis of `node` (-1 when not given).
int64_t layerNormAxis(const onnx::NodeProto &node) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == "axis")
      return attr.i();
  return -1;
}

bool hasLayerNorm(const onnx::GraphProto &graph) {
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() == "LayerNormalization")
      return true;
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_g() && hasLayerNorm(attr.g()))
        return true;
      for (const onnx::GraphProto &sub : attr.graphs())
        if (hasLayerNorm(sub))
          return true;
    }
  }
  return false;
}

/// Turns the LayerNormalizations of `graph` and its subgraphs into
/// Identity of their input, for an inference that must not crash on them:
/// their result has the input's shape (their statistics go untyped).
void neutralizeLayerNorms(onnx::GraphProto &graph) {
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() == "LayerNormalization" && node.input_size() > 0 &&
        node.output_size() > 0) {
      node.set_op_type("Identity");
      node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
      node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
      node.clear_attribute();
      continue;
    }
    for (onnx::AttributeProto &attr : *node.mutable_attribute()) {
      if (attr.has_g())
        neutralizeLayerNorms(*attr.mutable_g());
      for (onnx::GraphProto &sub : *attr.mutable_graphs())
        neutralizeLayerNorms(sub);
    }
  }
}

/// A copy of `model` to find ranks with: LayerNormalizations neutralized,
/// no declared intermediate or output types (the statistics' would not
/// match), and initializers of more than 4096 elements (weights, not
/// shapes) given as typed graph inputs instead of copied.
onnx::ModelProto rankCopy(const onnx::ModelProto &model) {
  onnx::ModelProto copy;
  copy.set_ir_version(model.ir_version());
  *copy.mutable_opset_import() = model.opset_import();
  const onnx::GraphProto &from = model.graph();
  onnx::GraphProto &to = *copy.mutable_graph();
  *to.mutable_node() = from.node();
  *to.mutable_input() = from.input();
  for (const onnx::ValueInfoProto &output : from.output())
    to.add_output()->set_name(output.name());
  std::unordered_map<std::string, bool> isInput;
  for (const onnx::ValueInfoProto &input : from.input())
    isInput[input.name()] = true;
  for (const TensorProto &t : from.initializer()) {
    uint64_t count = 1;
    for (int64_t d : t.dims())
      count = d > 0 && count <= 4096 ? count * static_cast<uint64_t>(d) : 0;
    if (count <= 4096 && t.data_location() != TensorProto::EXTERNAL) {
      *to.add_initializer() = t;
      continue;
    }
    if (isInput.count(t.name()))
      continue;
    auto *type = to.add_input();
    type->set_name(t.name());
    auto *tensor = type->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(t.data_type());
    for (int64_t d : t.dims())
      tensor->mutable_shape()->add_dim()->set_dim_value(d);
  }
  neutralizeLayerNorms(to);
  return copy;
}

/// "" if every LayerNormalization of `original` has an input of rank at
/// least 1 and an axis within that rank, where inference found the rank in
/// `inferred` (the rank copy; its nodes are `original`'s, in order).
/// `ranks` holds the ranks of the enclosing graphs' values.
std::string checkLayerNormAxes(const onnx::GraphProto &original,
                               const onnx::GraphProto &inferred,
                               std::unordered_map<std::string, int> ranks) {
  for (const TensorProto &t : inferred.initializer())
    ranks[t.name()] = t.dims_size();
  for (const auto *list :
       {&inferred.input(), &inferred.value_info(), &inferred.output()})
    for (const onnx::ValueInfoProto &info : *list)
      if (info.type().tensor_type().has_shape())
        ranks[info.name()] = info.type().tensor_type().shape().dim_size();
  for (int k = 0; k < original.node_size() && k < inferred.node_size(); ++k) {
    const onnx::NodeProto &node = original.node(k);
    auto rank = node.input_size() > 0 ? ranks.find(node.input(0)) : ranks.end();
    if (node.op_type() == "LayerNormalization" && rank != ranks.end()) {
      int64_t axis = layerNormAxis(node), r = rank->second;
      if (r == 0 || axis < -r || axis >= r)
        return nodeLabel(node, k) + ": attribute 'axis' is " +
               std::to_string(axis) + ", but its input '" + node.input(0) +
               "' has rank " + std::to_string(r) +
               (r == 0 ? " (it must have at least 1)" : "");
    }
    // Subgraphs, matched by attribute name.
    for (const onnx::AttributeProto &attr : node.attribute())
      for (const onnx::AttributeProto &mirror : inferred.node(k).attribute()) {
        if (mirror.name() != attr.name())
          continue;
        if (attr.has_g() && mirror.has_g())
          if (std::string e = checkLayerNormAxes(attr.g(), mirror.g(), ranks);
              !e.empty())
            return e;
        for (int g = 0; g < std::min(attr.graphs_size(), mirror.graphs_size());
             ++g)
          if (std::string e =
                  checkLayerNormAxes(attr.graphs(g), mirror.graphs(g), ranks);
              !e.empty())
            return e;
      }
  }
  return "";
}

} // namespace

std::string inferShapesStrictly(onnx::ModelProto &model) {
  try {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type=*/false, /*error_mode=*/1,
                                    /*data_prop=*/false));
  } catch (const std::exception &e) {
    // The first node's error; the ones after it follow from it.
    std::string what = e.what();
    if (size_t at = what.find("(op_type:"); at != std::string::npos)
      what = what.substr(at);
    return what.substr(0, what.find('\n'));
  }
  return "";
}

std::string checkBeforeShapeInference(const onnx::ModelProto &model) {
  if (std::string e = checkGraph(model.graph(), Known()); !e.empty())
    return e;
  // ONNX's LayerNormalization inference reads its input's dimensions up to
  // the axis unchecked: the axis is checked against the input's rank,
  // which an inference of a copy without LayerNormalizations finds.
  if (!hasLayerNorm(model.graph()))
    return "";
  onnx::ModelProto copy = rankCopy(model);
  // Leniently: a node the copy cannot type (one that reads a
  // LayerNormalization's statistics, untyped there) leaves the ranks after
  // it unknown and their axes to the strict inference that follows, which
  // runs once every axis with a known rank is checked.
  try {
    onnx::shape_inference::InferShapes(
        copy, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type=*/false, /*error_mode=*/0,
                                    /*data_prop=*/false));
  } catch (const std::exception &) {
  }
  return checkLayerNormAxes(model.graph(), copy.graph(), {});
}

} // namespace loom::onnx_import
