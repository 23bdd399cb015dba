//===- OnnxImporter.cpp - ONNX models into the loom dialect ---------------===//
//
// The model-level half of the front end: parse and check the file, bind
// symbolic dimensions, run ONNX shape inference, create the function and its
// arguments, then hand each node to its converter (Convert*.cpp) and check
// what it built against ONNX's inferred shapes.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/OnnxImporter.h"
#include "common/text/InputLimits.h"
#include "compiler/onnx/ExportedParameters.h"
#include "compiler/onnx/ModelChecks.h"
#include "compiler/onnx/NodeContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include <climits>

using namespace mlir;

namespace loom::onnx_import {

/// What the checker should see: `model` itself, or, when it keeps
/// initializers in external files, a copy in which those are typed graph
/// inputs instead. The checker looks for the files relative to the working
/// directory, and a shape-only model has none; the importer reads them,
/// relative to the model, only when it loads weights.
static const onnx::ModelProto &
withoutExternalData(const onnx::ModelProto &model,
                    std::optional<onnx::ModelProto> &copy) {
  const auto &graph = model.graph();
  if (llvm::none_of(graph.initializer(), [](const onnx::TensorProto &t) {
        return t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
      }))
    return model;
  copy = model;
  onnx::GraphProto *g = copy->mutable_graph();
  llvm::StringSet<> inputs;
  for (const auto &in : g->input())
    inputs.insert(in.name());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (const onnx::TensorProto &init : g->initializer()) {
    if (init.data_location() != onnx::TensorProto_DataLocation_EXTERNAL) {
      *kept.Add() = init;
      continue;
    }
    if (inputs.contains(init.name()))
      continue;
    onnx::ValueInfoProto *in = g->add_input();
    in->set_name(init.name());
    auto *tensor = in->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(init.data_type());
    for (int64_t d : init.dims())
      tensor->mutable_shape()->add_dim()->set_dim_value(d);
  }
  g->mutable_initializer()->Swap(&kept);
  return *copy;
}

StringRef statusName(ImportStatus status) {
  switch (status) {
  case ImportStatus::Ok:
    return "ok";
  case ImportStatus::Unsupported:
    return "unsupported";
  case ImportStatus::InvalidModel:
    return "invalid model";
  case ImportStatus::InternalError:
    return "internal error";
  }
  return "unknown";
}

static const llvm::StringMap<Converter> &converterTable() {
  static const llvm::StringMap<Converter> table = [] {
    llvm::StringMap<Converter> t;
    addMathConverters(t);
    addTensorConverters(t);
    addIndexConverters(t);
    addResizeConverters(t);
    addNNConverters(t);
    addRNNConverters(t);
    addEinsumConverters(t);
    addNormConverters(t);
    return t;
  }();
  return table;
}

SmallVector<StringRef> supportedOpTypes() {
  SmallVector<StringRef> names;
  for (const auto &entry : converterTable())
    names.push_back(entry.getKey());
  llvm::sort(names);
  return names;
}

namespace {

/// Frozen initializers up to this many elements are folded constants, so
/// that converters needing known values (a clip bound, an exponent) see
/// them; larger ones are buffers, loaded and checkpointed but not updated.
constexpr int64_t kMaxFrozenFoldElements = int64_t(1) << 16;

/// The newest opset whose operators Loom knows. Older opsets are accepted
/// operator by operator (Converter::oldestVersion).
constexpr int64_t kMaxOpset = 17;

/// An ONNX type with a known element type and static shape.
struct StaticType {
  int32_t elemType = 0;
  SmallVector<int64_t> shape;
};

class Importer {
public:
  Importer(onnx::ModelProto &model, StringRef file,
           const ImportOptions &options, MLIRContext &ctx)
      : model(model), file(file.str()), options(options), ctx(ctx),
        builder(&ctx) {
    baseDir = llvm::sys::path::parent_path(file).str();
  }

  ImportResult run();

private:
  ImportResult error(ImportStatus status, const Twine &message) {
    ImportResult r;
    r.status = status;
    r.message = (file + ": " + message).str();
    return r;
  }
  std::optional<ImportResult> bindInputs();
  std::optional<ImportResult> inferShapes();
  std::optional<ImportResult> createArguments(func::FuncOp func);
  std::optional<ImportResult> convertNode(const onnx::NodeProto &node,
                                          int index);
  std::optional<ImportResult> checkOutputs(const onnx::NodeProto &node,
                                           StringRef where);
  std::string nodeLabel(const onnx::NodeProto &node, int index) const {
    std::string name = node.name().empty()
                           ? node.op_type() + "_" + std::to_string(index)
                           : node.name();
    return "node '" + name + "' (" + node.op_type() + ", opset " +
           std::to_string(opset) + ")";
  }
  std::string takeDiagnostics() {
    std::string s;
    std::swap(s, diagnostics);
    return s;
  }

  onnx::ModelProto &model;
  std::string file, baseDir;
  const ImportOptions &options;
  MLIRContext &ctx;
  OpBuilder builder;
  int64_t opset = 0;
  std::string diagnostics;
  /// What the import changed in the model (restoreExportedParameters).
  std::vector<std::string> notes;

  /// Graph inputs given a value (ImportOptions::inputValues), now
  /// initializers that are always constants.
  llvm::StringSet<> valueInputs;
  /// Graph inputs (not initializers) with their bound static shapes.
  SmallVector<std::pair<std::string, StaticType>> inputs;
  /// What ONNX shape inference knows about each value.
  llvm::StringMap<StaticType> inferred;
  llvm::StringMap<OnnxValue> values;
  std::unique_ptr<ConstantPool> constants;
  /// Buffer arguments the graph gives new values (NodeContext::updateInput).
  SmallVector<std::pair<BlockArgument, Value>> stateUpdates;
};

} // namespace

std::optional<ImportResult> Importer::bindInputs() {
  // Inputs given a value become initializers, before anything reads them.
  if (!options.inputValues.empty()) {
    onnx::GraphProto *graph = model.mutable_graph();
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
    for (const auto &given : options.inputValues) {
      StringRef name = given.getKey();
      auto input = llvm::find_if(
          *graph->mutable_input(),
          [&](const onnx::ValueInfoProto &in) { return in.name() == name; });
      if (input == graph->mutable_input()->end() ||
          llvm::any_of(graph->initializer(), [&](const onnx::TensorProto &t) {
            return t.name() == name;
          }))
        return error(ImportStatus::InvalidModel,
                     "a value is given for '" + name +
                         "', which is not a graph input");
      onnx::TensorProto value;
      if (!value.ParseFromString(given.getValue()))
        return error(ImportStatus::InvalidModel,
                     "the value given for input '" + name +
                         "' is not a serialized ONNX tensor");
      value.set_name(name.str());
      const auto &declared = input->type().tensor_type();
      bool rankDiffers = declared.has_shape() &&
                         declared.shape().dim_size() != value.dims_size();
      bool dimDiffers = false;
      for (int d = 0; !rankDiffers && declared.has_shape() &&
                      d < declared.shape().dim_size();
           ++d)
        dimDiffers |= declared.shape().dim(d).has_dim_value() &&
                      declared.shape().dim(d).dim_value() != value.dims(d);
      if (value.data_type() != declared.elem_type() || rankDiffers ||
          dimDiffers)
        return error(ImportStatus::InvalidModel,
                     "the value given for input '" + name + "' is " +
                         onnxTypeName(value.data_type()) + " " +
                         formatShape(SmallVector<int64_t>(value.dims().begin(),
                                                          value.dims().end())) +
                         ", which the input's declared type does not admit");
      *graph->add_initializer() = std::move(value);
      valueInputs.insert(name);
    }
    for (const onnx::ValueInfoProto &in : graph->input())
      if (!valueInputs.contains(in.name()))
        *kept.Add() = in;
    graph->mutable_input()->Swap(&kept);
  }
  llvm::StringSet<> initializers, inputNames, dimNames;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  // A binding that names nothing is a typo the user should hear about.
  for (const auto &input : model.graph().input()) {
    if (initializers.contains(input.name()))
      continue;
    inputNames.insert(input.name());
    if (input.type().has_tensor_type())
      for (const auto &dim : input.type().tensor_type().shape().dim())
        if (dim.has_dim_param())
          dimNames.insert(dim.dim_param());
  }
  for (const auto &given : options.inputShapes)
    if (!inputNames.contains(given.getKey()))
      return error(ImportStatus::InvalidModel,
                   "--input-shape names '" + given.getKey() +
                       "', which is not a graph input");
  for (const auto &dim : options.dims)
    if (!dimNames.contains(dim.getKey()))
      return error(ImportStatus::InvalidModel,
                   "--dim names '" + dim.getKey() +
                       "', which is not a symbolic dimension of any graph "
                       "input");
  for (auto &input : *model.mutable_graph()->mutable_input()) {
    if (initializers.contains(input.name()))
      continue;
    const std::string &name = input.name();
    if (!input.type().has_tensor_type())
      return error(ImportStatus::Unsupported,
                   "graph input '" + name +
                       "' is not a tensor; Loom imports tensor inputs only");
    auto *tensorType = input.mutable_type()->mutable_tensor_type();
    StaticType st;
    st.elemType = tensorType->elem_type();
    if (!toDType(st.elemType))
      return error(ImportStatus::Unsupported,
                   "graph input '" + name + "' has element type " +
                       onnxTypeName(st.elemType) +
                       "; Loom supports FLOAT, FLOAT16, BFLOAT16, INT32, "
                       "INT64 and BOOL");
    auto given = options.inputShapes.find(name);
    if (given != options.inputShapes.end()) {
      if (tensorType->has_shape() && tensorType->shape().dim_size() !=
                                         static_cast<int>(given->second.size()))
        return error(ImportStatus::InvalidModel,
                     "--input-shape gives " + Twine(given->second.size()) +
                         " dimensions for input '" + name +
                         "', which has rank " +
                         Twine(tensorType->shape().dim_size()));
      st.shape = given->second;
    } else if (!tensorType->has_shape()) {
      return error(ImportStatus::Unsupported,
                   "graph input '" + name +
                       "' has no shape; give it with --input-shape " + name +
                       "=D0xD1x...");
    } else {
      for (int d = 0; d < tensorType->shape().dim_size(); ++d) {
        const auto &dim = tensorType->shape().dim(d);
        if (dim.has_dim_value()) {
          st.shape.push_back(dim.dim_value());
          continue;
        }
        std::string param = dim.has_dim_param() ? dim.dim_param() : "";
        auto bound = options.dims.find(param);
        if (!param.empty() && bound != options.dims.end())
          st.shape.push_back(bound->second);
        else if (d == 0 && options.batch)
          st.shape.push_back(*options.batch);
        else
          return error(ImportStatus::Unsupported,
                       "graph input '" + name + "' dimension " + Twine(d) +
                           " is symbolic" +
                           (param.empty() ? "" : " ('" + param + "')") +
                           "; bind it with " + (d == 0 ? "--batch N, " : "") +
                           (param.empty() ? "" : "--dim " + param + "=N, ") +
                           "or --input-shape " + name + "=D0xD1x...");
      }
    }
    if (!checkedNumElements(st.shape))
      return error(ImportStatus::InvalidModel, "graph input '" + name +
                                                   "' has an invalid shape " +
                                                   formatShape(st.shape));
    // Write the bound shape back so that ONNX shape inference sees it.
    auto *shape = tensorType->mutable_shape();
    shape->clear_dim();
    for (int64_t d : st.shape)
      shape->add_dim()->set_dim_value(d);
    inputs.emplace_back(name, std::move(st));
  }
  return std::nullopt;
}

static std::optional<StaticType> staticTypeOf(const onnx::TypeProto &type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape())
    return std::nullopt;
  StaticType st;
  st.elemType = type.tensor_type().elem_type();
  for (const auto &dim : type.tensor_type().shape().dim()) {
    if (!dim.has_dim_value())
      return std::nullopt;
    st.shape.push_back(dim.dim_value());
  }
  return st;
}

std::optional<ImportResult> Importer::inferShapes() {
  // A node ONNX's inference refuses is an error naming it; with inputs
  // bound by flags, those are the likely cause.
  auto refused = [&](const std::string &what) {
    return error(ImportStatus::InvalidModel,
                 kShapeInferenceRejects + what +
                     (inputs.empty() ? ""
                                     : " (check the input shapes bound by "
                                       "--batch, --dim or --input-shape)"));
  };
  // ONNX's inference trusts what it reads; a damaged model must not reach
  // it.
  if (std::string bad = checkBeforeShapeInference(model); !bad.empty())
    return StringRef(bad).starts_with(kShapeInferenceRejects)
               ? refused(bad.substr(StringRef(kShapeInferenceRejects).size()))
               : error(ImportStatus::InvalidModel, bad);
  // First strictly and without data propagation: a node whose shapes do
  // not agree (a sequence longer than the position table, bound by
  // --input-shape) is an error naming it. ONNX's data propagation goes on
  // past such a node and crashes on the next Shape op.
  if (std::string what = inferShapesStrictly(model); !what.empty())
    return refused(what);
  try {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type=*/false, /*error_mode=*/0,
                                    /*data_prop=*/true));
  } catch (const std::exception &e) {
    return error(ImportStatus::InvalidModel,
                 Twine("ONNX shape inference rejects the model: ") + e.what());
  }
  const onnx::GraphProto &graph = model.graph();
  for (const auto *list : {&graph.value_info(), &graph.output()})
    for (const auto &info : *list)
      if (auto st = staticTypeOf(info.type()))
        inferred[info.name()] = std::move(*st);
  return std::nullopt;
}

/// A blob key for a parameter: resource keys must be identifiers.
static std::string blobKey(StringRef name) {
  std::string key = "param_";
  for (char c : name)
    key.push_back(llvm::isAlnum(c) ? c : '_');
  return key;
}

std::optional<ImportResult> Importer::createArguments(func::FuncOp func) {
  const onnx::GraphProto &graph = model.graph();
  Block *body = func.addEntryBlock();
  SmallVector<Type> argTypes;
  // Argument attributes are set once the function type has every argument.
  SmallVector<NamedAttrList> argAttrs;
  for (auto &[name, st] : inputs) {
    auto type = RankedTensorType::get(st.shape,
                                      toMlirType(*toDType(st.elemType), &ctx));
    BlockArgument arg = body->addArgument(type, func.getLoc());
    argTypes.push_back(type);
    argAttrs.emplace_back().append(LoomDialect::kInputAttrName,
                                   builder.getStringAttr(name));
    values.insert_or_assign(name, OnnxValue(Value(arg)));
  }

  // Which initializers the graph uses, which are batch-norm statistics, and
  // which are frozen.
  llvm::StringSet<> used, buffers, frozen;
  for (const auto &node : graph.node()) {
    for (const auto &in : node.input())
      used.insert(in);
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        buffers.insert(node.input(i));
  }
  for (const auto &out : graph.output())
    used.insert(out.name());
  // Frozen initializers (--freeze) are never trained: constants when small
  // (below), else buffers.
  for (const std::string &text : options.freeze) {
    llvm::Expected<llvm::GlobPattern> pattern = llvm::GlobPattern::create(text);
    if (!pattern)
      return error(ImportStatus::InvalidModel,
                   "--freeze pattern '" + text + "' is not a glob pattern: " +
                       llvm::toString(pattern.takeError()));
    bool matched = false;
    std::string floats;
    for (const auto &init : graph.initializer()) {
      std::optional<DType> dtype = toDType(init.data_type());
      if (!dtype || !isFloat(*dtype))
        continue;
      if (floats.size() < 200)
        floats += (floats.empty() ? "" : ", ") + init.name();
      if (pattern->match(init.name())) {
        matched = true;
        buffers.insert(init.name());
        frozen.insert(init.name());
      }
    }
    if (!matched)
      return error(ImportStatus::InvalidModel,
                   "--freeze pattern '" + text +
                       "' matches no floating-point initializer; the "
                       "model's are: " +
                       (floats.empty() ? std::string("none") : floats) +
                       (floats.size() >= 200 ? ", ..." : ""));
  }
  if (graph.sparse_initializer_size() > 0)
    return error(ImportStatus::Unsupported,
                 "sparse initializers are not supported");

  for (const auto &init : graph.initializer()) {
    const std::string &name = init.name();
    if (!used.contains(name))
      continue;
    std::optional<DType> dtype = toDType(init.data_type());
    if (!dtype)
      return error(ImportStatus::Unsupported,
                   "initializer '" + name + "' has element type " +
                       onnxTypeName(init.data_type()) +
                       "; Loom supports FLOAT, FLOAT16, BFLOAT16, INT32, "
                       "INT64 and BOOL");
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    std::optional<int64_t> count = checkedNumElements(shape);
    if (!count)
      return error(ImportStatus::InvalidModel,
                   "initializer '" + name + "' has an invalid shape");
    // State: every floating-point tensor, scalars included (a learned
    // temperature or a PReLU slope is one element); trained unless it is a
    // buffer (batch-norm statistics, --freeze). Integer and bool tensors
    // are constants the importer may fold.
    // A small frozen tensor folds, when its data is at hand (a shape-only
    // import does not read external data: it stays a buffer there).
    bool foldFrozen =
        frozen.contains(name) && *count <= kMaxFrozenFoldElements &&
        (options.withWeights ||
         init.data_location() != onnx::TensorProto_DataLocation_EXTERNAL);
    bool isState = isFloat(*dtype) && *count > 0 &&
                   !valueInputs.contains(name) && !foldFrozen;
    // Without weights (shapes only, e.g. `loom simulate`), the data of
    // state is never read: its external files need not exist.
    bool withData =
        options.withWeights || (options.withBuffers && buffers.contains(name));
    std::optional<std::string> bytes;
    if (!isState || withData) {
      std::string why;
      bytes = tensorBytes(init, *dtype, baseDir, why);
      if (!bytes)
        return error(ImportStatus::InvalidModel,
                     "initializer '" + name + "' " + why);
    }
    if (!isState) {
      if (*count > kMaxFoldElements)
        return error(ImportStatus::Unsupported,
                     "initializer '" + name +
                         "' is a constant too large to "
                         "fold");
      values.insert_or_assign(
          name, OnnxValue(HostTensor::fromBytes(*dtype, shape, *bytes)));
      continue;
    }
    auto type = RankedTensorType::get(shape, toMlirType(*dtype, &ctx));
    BlockArgument arg = body->addArgument(type, func.getLoc());
    argTypes.push_back(type);
    NamedAttrList &attrs = argAttrs.emplace_back();
    attrs.append(buffers.contains(name) ? LoomDialect::kBufferAttrName
                                        : LoomDialect::kParamAttrName,
                 builder.getStringAttr(name));
    if (withData) {
      AsmResourceBlob blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
          ArrayRef<char>(bytes->data(), bytes->size()), alignof(uint64_t));
      attrs.append(
          LoomDialect::kInitAttrName,
          DenseResourceElementsAttr::get(type, blobKey(name), std::move(blob)));
    }
    values.insert_or_assign(name, OnnxValue(Value(arg)));
  }
  func.setFunctionType(FunctionType::get(&ctx, argTypes, {}));
  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    func.setArgAttrs(i, attrs.getDictionary(&ctx));
  return std::nullopt;
}

std::optional<ImportResult> Importer::checkOutputs(const onnx::NodeProto &node,
                                                   StringRef where) {
  for (const std::string &out : node.output()) {
    if (out.empty())
      continue;
    auto it = values.find(out);
    if (it == values.end())
      return error(ImportStatus::InternalError,
                   where + ": Loom produced no value for output '" + out + "'");
    RankedTensorType type =
        std::holds_alternative<Value>(it->second)
            ? cast<RankedTensorType>(std::get<Value>(it->second).getType())
            : std::get<HostTensor>(it->second).getType(&ctx);
    if (!checkedNumElements(type.getShape()))
      return error(ImportStatus::InvalidModel,
                   where + ": output '" + out + "' would have shape " +
                       formatShape(type.getShape()) + ", which is too large");
    auto onnxType = inferred.find(out);
    if (onnxType == inferred.end())
      continue;
    const StaticType &expect = onnxType->second;
    std::optional<DType> dtype = fromMlirType(type.getElementType());
    bool typeDiffers = expect.elemType != 0 && dtype &&
                       static_cast<int32_t>(*dtype) != expect.elemType;
    if (type.getShape() != ArrayRef<int64_t>(expect.shape) || typeDiffers)
      return error(ImportStatus::InternalError,
                   where + ": Loom gives output '" + out + "' shape " +
                       formatShape(type.getShape()) + " of " +
                       (dtype ? onnxTypeName(static_cast<int32_t>(*dtype))
                              : std::string("?")) +
                       " but ONNX shape inference gives " +
                       formatShape(expect.shape) + " of " +
                       onnxTypeName(expect.elemType));
  }
  return std::nullopt;
}

std::optional<ImportResult> Importer::convertNode(const onnx::NodeProto &node,
                                                  int index) {
  std::string where = nodeLabel(node, index);
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return error(ImportStatus::Unsupported,
                 where + ": operators of domain '" + node.domain() +
                     "' are not supported; Loom imports the default ONNX "
                     "domain");
  for (const std::string &in : node.input())
    if (!in.empty() && !values.count(in))
      return error(ImportStatus::InvalidModel,
                   where + ": input '" + in +
                       "' is not produced by an earlier node, an "
                       "initializer or a graph input (is the graph "
                       "topologically sorted?)");
  const auto &table = converterTable();
  auto converter = table.find(node.op_type());
  if (converter == table.end()) {
    std::string list;
    for (StringRef op : supportedOpTypes())
      list += (list.empty() ? "" : ", ") + op.str();
    return error(ImportStatus::Unsupported,
                 where + ": operator " + node.op_type() +
                     " is not supported. Loom imports: " + list);
  }
  std::string locName = node.name().empty()
                            ? node.op_type() + "_" + std::to_string(index)
                            : node.name();
  Location loc = NameLoc::get(builder.getStringAttr(locName),
                              FileLineColLoc::get(&ctx, file, 0, 0));
  // The operator's version at this opset, and whether Loom imports it.
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset));
  if (!schema)
    return error(ImportStatus::InvalidModel,
                 where + ": ONNX opset " + Twine(opset) + " has no operator " +
                     node.op_type());
  // An empty input name omits an optional input; converters read the
  // others without asking.
  for (int i = 0; i < node.input_size(); ++i)
    if (node.input(i).empty() &&
        (static_cast<size_t>(i) >= schema->inputs().size() ||
         schema->inputs()[i].GetOption() != onnx::OpSchema::Optional))
      return error(ImportStatus::InvalidModel,
                   where + ": input " + Twine(i) +
                       " is empty, but it is not an optional input of " +
                       node.op_type());
  int64_t version = schema->SinceVersion();
  int64_t oldest = converter->second.oldestVersion;
  if (version < oldest)
    return error(ImportStatus::Unsupported,
                 where + ": opset " + Twine(opset) + " gives " +
                     node.op_type() + " version " + Twine(version) +
                     "; Loom imports " + node.op_type() + " from version " +
                     Twine(oldest) +
                     ". Re-export the model with "
                     "opset_version between " +
                     Twine(oldest) + " and " + Twine(kMaxOpset));
  NodeContext nc(node, opset, version, builder, loc, values, *constants,
                 [this] { return takeDiagnostics(); });
  nc.options = &options;
  nc.producer = model.producer_name();
  nc.stateUpdates = &stateUpdates;
  if (failed(converter->second.convert(nc))) {
    NodeError err = nc.error.value_or(NodeError{
        ImportStatus::InternalError,
        "the converter failed without saying why: " + takeDiagnostics()});
    return error(err.status, where + ": " + err.message);
  }
  return checkOutputs(node, where);
}

ImportResult Importer::run() {
  std::string otherDomains;
  for (const auto &entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
    else
      otherDomains +=
          (otherDomains.empty() ? "'" : ", '") + entry.domain() + "'";
  }
  if (opset == 0 && !otherDomains.empty())
    return error(ImportStatus::Unsupported,
                 "the model uses only the operator domains " + otherDomains +
                     "; Loom imports the default ONNX domain");
  if (opset == 0)
    return error(ImportStatus::InvalidModel,
                 "the model imports no version of the default ONNX opset");
  if (opset > kMaxOpset)
    return error(ImportStatus::Unsupported,
                 "the model uses ONNX opset " + Twine(opset) +
                     "; Loom imports opsets up to " + Twine(kMaxOpset) +
                     ". Re-export it with opset_version " + Twine(kMaxOpset));
  if (!model.has_graph())
    return error(ImportStatus::InvalidModel, "the model has no graph");
  try {
    // External data is read (and its files checked) with the weights.
    std::optional<onnx::ModelProto> copy;
    onnx::checker::check_model(withoutExternalData(model, copy));
  } catch (const std::exception &e) {
    return error(ImportStatus::InvalidModel,
                 Twine("the ONNX checker rejects the model: ") + e.what());
  }
  if (std::string err = restoreExportedParameters(*model.mutable_graph(),
                                                  baseDir, notes);
      !err.empty())
    return error(ImportStatus::InvalidModel, err);
  if (auto err = bindInputs())
    return std::move(*err);
  if (auto err = inferShapes())
    return std::move(*err);

  // Collect verifier and inference messages instead of printing them.
  ScopedDiagnosticHandler handler(&ctx, [this](Diagnostic &diag) {
    if (!diagnostics.empty())
      diagnostics += "; ";
    diagnostics += diag.str();
    return success();
  });

  Location fileLoc = FileLineColLoc::get(&ctx, file, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  (*module)->setAttr("loom.source", builder.getStringAttr(file));
  (*module)->setAttr("loom.opset", builder.getI64IntegerAttr(opset));
  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "main",
                                   FunctionType::get(&ctx, {}, {}));
  if (auto err = createArguments(func))
    return std::move(*err);

  builder.setInsertionPointToEnd(&func.getBody().front());
  constants = std::make_unique<ConstantPool>(&func.getBody().front());
  const onnx::GraphProto &graph = model.graph();
  for (int i = 0; i < graph.node_size(); ++i)
    if (auto err = convertNode(graph.node(i), i))
      return std::move(*err);

  // Results: the graph outputs.
  SmallVector<Value> results;
  for (const auto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end())
      return error(ImportStatus::InvalidModel,
                   "graph output '" + out.name() +
                       "' is not produced by any node");
    if (auto *known = std::get_if<HostTensor>(&it->second)) {
      results.push_back(constants->get(builder, fileLoc, known->toAttr(&ctx)));
    } else {
      results.push_back(std::get<Value>(it->second));
    }
  }
  // Then the new values of buffers (training-mode batch normalization's
  // running statistics), each marked with the argument it updates.
  for (auto &[arg, v] : stateUpdates)
    results.push_back(v);
  func::ReturnOp::create(builder, fileLoc, results);
  func.setFunctionType(FunctionType::get(&ctx, func.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  for (auto [i, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, LoomDialect::kOutputAttrName,
                       builder.getStringAttr(out.name()));
  for (auto [i, update] : llvm::enumerate(stateUpdates))
    func.setResultAttr(graph.output_size() + i, LoomDialect::kUpdatesAttrName,
                       builder.getI64IntegerAttr(update.first.getArgNumber()));

  if (failed(mlir::verify(*module)))
    return error(ImportStatus::InternalError,
                 "the imported module does not verify: " + takeDiagnostics());
  ImportResult result;
  result.module = std::move(module);
  result.notes = std::move(notes);
  return result;
}

ImportResult importOnnxBytes(StringRef bytes, StringRef name,
                             const ImportOptions &options,
                             MLIRContext &context) {
  context.loadDialect<LoomDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    ImportResult r;
    r.status = ImportStatus::InvalidModel;
    r.message = (name + ": not a valid ONNX model (the protobuf does not "
                        "parse; is the file truncated or corrupt?)")
                    .str();
    return r;
  }
  Importer importer(model, name, options, context);
  return importer.run();
}

ImportResult importOnnxFile(StringRef path, const ImportOptions &options,
                            MLIRContext &context) {
  // A regular file of a bounded size: a device such as /dev/zero never
  // ends, and protobuf reads no message over 2 GiB.
  uint64_t size = 0;
  if (llvm::sys::fs::exists(path) &&
      (!llvm::sys::fs::is_regular_file(path) ||
       llvm::sys::fs::file_size(path, size) || size > limits::kMaxModelBytes)) {
    ImportResult r;
    r.status = ImportStatus::InvalidModel;
    r.message = (path + ": " +
                 (size > limits::kMaxModelBytes
                      ? "larger than 2 GiB, the most a protobuf holds (store "
                        "the weights as external data)"
                      : "not a regular file"))
                    .str();
    return r;
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    ImportResult r;
    r.status = ImportStatus::InvalidModel;
    r.message =
        (path + ": cannot read the file: " + buffer.getError().message()).str();
    return r;
  }
  return importOnnxBytes((*buffer)->getBuffer(), path, options, context);
}

} // namespace loom::onnx_import
