//===- OnnxTargets.cpp - Fuzzing the ONNX importer and TensorProto readers ===//
//
// The ONNX importer (importOnnxBytes) fed mutated models: the bundled ones
// and one-node models of ONNX's backend tests, whose non-first inputs become
// initializers so that shapes and axes are known and the import goes past
// the checker into the converters. The TensorProto readers (the
// runtime's parseOnnxTensor for `--inputs`, the importer's tensorBytes for
// initializers) fed mutated tensors of every data type.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "compiler/Registration.h"
#include "compiler/onnx/HostTensor.h"
#include "compiler/onnx/OnnxImporter.h"
#include "runtime/io/TensorFile.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <onnx/onnx_pb.h>

namespace loom::fuzz {

namespace {

/// One-node models of ONNX's backend tests (converters of every kind:
/// elementwise, shape arithmetic, convolutions, normalizations, recurrent
/// layers, control flow Loom refuses).
const char *const kNodeTests[] = {
    "test_add_bcast",
    "test_matmul_3d",
    "test_gemm_all_attributes",
    "test_relu",
    "test_reshape_reordered_all_dims",
    "test_reshape_negative_dim",
    "test_transpose_all_permutations_2",
    "test_softmax_axis_1",
    "test_conv_with_strides_padding",
    "test_maxpool_2d_pads",
    "test_averagepool_2d_strides",
    "test_concat_2d_axis_1",
    "test_slice_negative_axes",
    "test_gather_1",
    "test_gather_elements_0",
    "test_expand_dim_changed",
    "test_reduce_mean_keepdims_example",
    "test_reduce_sum_keepdims_example",
    "test_layer_normalization_3d_axis1_epsilon",
    "test_cast_FLOAT_to_FLOAT16",
    "test_squeeze_negative_axes",
    "test_unsqueeze_two_axes",
    "test_split_variable_parts_2d",
    "test_batchnorm_epsilon",
    "test_einsum_batch_matmul",
    "test_lstm_defaults",
    "test_gru_with_initial_bias",
    "test_rnn_seq_length",
    "test_resize_upsample_scales_nearest",
    "test_tile",
    "test_range_int32_type_negative_delta",
    "test_constant",
    "test_constantofshape_int_zeros",
    "test_shape_start_1",
    "test_cumsum_2d_axis_1",
    "test_argmax_keepdims_example",
    "test_dropout_default",
    "test_clip_splitbounds",
    "test_flatten_negative_axis1",
    "test_pow_bcast_array",
    "test_equal_bcast",
    "test_not_2d",
    "test_instancenorm_example",
    "test_convtranspose_pads",
    "test_depthtospace_crd_mode",
    "test_onehot_with_axis",
    "test_scatter_elements_with_axis",
    "test_hardmax_axis_1",
    "test_sum_example",
    "test_gathernd_example_int32",
    "test_globalaveragepool",
    "test_prelu_broadcast",
    "test_if",
    "test_loop11",
};

/// The bundled models.
const char *const kModels[] = {
    "mlp.onnx", "upsampler.onnx", "rnn.onnx", "gru.onnx",   "lstm.onnx",
    "cnn.onnx", "encoder.onnx",   "gpt.onnx", "llama.onnx", "gpt_opset14.onnx"};

/// The node test in `dir` as one model: inputs after the first become
/// initializers holding their data.
std::string selfContainedNodeModel(const std::string &dir) {
  onnx::ModelProto model;
  if (!model.ParseFromString(readFileOrEmpty(dir + "/model.onnx")))
    return "";
  onnx::GraphProto *graph = model.mutable_graph();
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (int i = 0; i < graph->input_size(); ++i) {
    std::string data = readFileOrEmpty(dir + "/test_data_set_0/input_" +
                                       std::to_string(i) + ".pb");
    onnx::TensorProto value;
    if (i == 0 || data.empty() || !value.ParseFromString(data)) {
      *kept.Add() = graph->input(i);
      continue;
    }
    value.set_name(graph->input(i).name());
    *graph->add_initializer() = value;
  }
  graph->mutable_input()->Swap(&kept);
  return model.SerializeAsString();
}

class OnnxTarget : public Target {
public:
  explicit OnnxTarget(const Config &config)
      : name(config.workDir + "/fuzz.onnx") {
    registerLoomDialects(registry);
    options.batch = 2;
  }

  std::vector<Seed> seeds(const Config &config) override {
    std::vector<Seed> out;
    for (const char *model : kModels)
      out.push_back(
          {model, readFileOrEmpty(config.sourceDir + "/models/" + model)});
    for (const char *test : kNodeTests) {
      std::string bytes = selfContainedNodeModel(
          std::string(LOOM_ONNX_NODE_TEST_DIR) + "/" + test);
      if (!bytes.empty())
        out.push_back({test, bytes});
    }
    return out;
  }

  std::vector<std::string> stages() const override {
    return {"protobuf", "checker", "import", "internal"};
  }

  std::string mutate(const std::vector<Seed> &corpus, Rng &rng) override {
    return mutateProtoBytes(rng.pick(corpus).bytes, onnx::ModelProto(), rng,
                            rng.pick(corpus).bytes);
  }

  Outcome run(const std::string &input) override {
    // One context for many inputs: a new one per input costs more than
    // most imports. Renewed now and then, as it keeps every attribute
    // (weights included) it ever made.
    if (!context || ++uses > 64) {
      context.reset();
      context = std::make_unique<mlir::MLIRContext>(
          registry, mlir::MLIRContext::Threading::DISABLED);
      uses = 0;
    }
    onnx_import::ImportResult r =
        onnx_import::importOnnxBytes(input, name, options, *context);
    Outcome o;
    o.accepted = r.ok();
    if (o.accepted)
      return o;
    o.message = r.message;
    o.stage =
        r.status == onnx_import::ImportStatus::InternalError ? "internal"
        : o.message.find("the protobuf does not parse") != std::string::npos
            ? "protobuf"
        : o.message.find("the ONNX checker rejects") != std::string::npos
            ? "checker"
            : "import";
    if (o.message.rfind(name + ": ", 0) != 0)
      o.violation = "the message does not start with the file's name";
    return o;
  }

private:
  std::string name;
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> context;
  int uses = 0;
  onnx_import::ImportOptions options;
};

//===----------------------------------------------------------------------===//
// TensorProto
//===----------------------------------------------------------------------===//

/// Tensors of every data type the readers take (and DOUBLE, and one they
/// refuse), in raw_data and in the typed fields.
std::vector<Seed> synthesizedTensors() {
  std::vector<Seed> out;
  auto add = [&](const std::string &name, onnx::TensorProto t) {
    t.set_name(name);
    out.push_back({name, t.SerializeAsString()});
  };
  const std::pair<int, int> kTypes[] = {
      {onnx::TensorProto::FLOAT, 4},    {onnx::TensorProto::FLOAT16, 2},
      {onnx::TensorProto::BFLOAT16, 2}, {onnx::TensorProto::INT32, 4},
      {onnx::TensorProto::INT64, 8},    {onnx::TensorProto::BOOL, 1},
      {onnx::TensorProto::DOUBLE, 8},   {onnx::TensorProto::UINT8, 1}};
  for (auto [type, size] : kTypes) {
    onnx::TensorProto raw;
    raw.set_data_type(type);
    raw.add_dims(2);
    raw.add_dims(3);
    raw.set_raw_data(std::string(6 * size, '\x01'));
    add("raw" + std::to_string(type), raw);
    onnx::TensorProto typed;
    typed.set_data_type(type);
    typed.add_dims(3);
    for (int i = 0; i < 3; ++i) {
      if (type == onnx::TensorProto::FLOAT)
        typed.add_float_data(1.5f * i);
      else if (type == onnx::TensorProto::INT64)
        typed.add_int64_data(i - 1);
      else if (type == onnx::TensorProto::DOUBLE)
        typed.add_double_data(0.25 * i);
      else
        typed.add_int32_data(i);
    }
    add("typed" + std::to_string(type), typed);
  }
  onnx::TensorProto scalar;
  scalar.set_data_type(onnx::TensorProto::INT64);
  scalar.add_int64_data(7);
  add("scalar", scalar);
  onnx::TensorProto empty;
  empty.set_data_type(onnx::TensorProto::FLOAT);
  empty.add_dims(0);
  empty.add_dims(4);
  add("empty", empty);
  onnx::TensorProto external = scalar;
  external.clear_int64_data();
  external.set_data_location(onnx::TensorProto::EXTERNAL);
  auto *entry = external.add_external_data();
  entry->set_key("location");
  entry->set_value("weights.bin");
  add("external", external);
  return out;
}

class TensorProtoTarget : public Target {
public:
  explicit TensorProtoTarget(const Config &config)
      : origin(config.workDir + "/fuzz.pb"), baseDir(config.workDir) {}

  std::vector<Seed> seeds(const Config &) override {
    std::vector<Seed> out = synthesizedTensors();
    // The backend tests' data: tensors as ONNX's own tools write them.
    for (const char *test : kNodeTests)
      for (const char *file : {"input_0.pb", "input_1.pb", "output_0.pb"}) {
        std::string path = std::string(LOOM_ONNX_NODE_TEST_DIR) + "/" + test +
                           "/test_data_set_0/" + file;
        std::string bytes = readFileOrEmpty(path);
        if (!bytes.empty())
          out.push_back({path, bytes});
      }
    return out;
  }

  std::vector<std::string> stages() const override {
    return {"protobuf", "convert"};
  }

  std::string mutate(const std::vector<Seed> &corpus, Rng &rng) override {
    return mutateProtoBytes(rng.pick(corpus).bytes, onnx::TensorProto(), rng,
                            rng.pick(corpus).bytes);
  }

  Outcome run(const std::string &input) override {
    Outcome o;
    std::string error, name;
    std::optional<rt::HostBuffer> t =
        rt::parseOnnxTensor(input, error, &name, origin);
    checkImporterReader(input, o);
    if (t) {
      o.accepted = true;
      uint64_t count = 1;
      for (int64_t d : t->shape)
        count *= static_cast<uint64_t>(d);
      if (t->bytes.size() != count * rt::dtypeSize(t->dtype))
        o.violation = "the tensor's bytes do not match its shape";
      return o;
    }
    o.message = error;
    o.stage = error.find("protobuf parsing failed") != std::string::npos
                  ? "protobuf"
                  : "convert";
    if (error.rfind(origin + ": ", 0) != 0)
      o.violation = "the message does not start with the file's name";
    return o;
  }

private:
  /// The importer's reader of initializers, on the same bytes: its element
  /// bytes must be as many as the dims say, or an error.
  void checkImporterReader(const std::string &input, Outcome &o) {
    onnx::TensorProto t;
    if (!t.ParseFromString(input))
      return;
    std::optional<onnx_import::DType> dtype =
        onnx_import::toDType(t.data_type());
    if (!dtype)
      return;
    std::string error;
    std::optional<std::string> bytes =
        onnx_import::tensorBytes(t, *dtype, baseDir, error);
    if (!bytes) {
      if (error.empty())
        o.violation = "tensorBytes failed without a message";
      return;
    }
    llvm::SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
    std::optional<int64_t> count = onnx_import::checkedNumElements(shape);
    if (!count || bytes->size() != static_cast<size_t>(*count) *
                                       onnx_import::elementSize(*dtype))
      o.violation = "tensorBytes returned bytes that do not match the dims";
    else if (*count <= onnx_import::kMaxFoldElements)
      (void)onnx_import::HostTensor::fromBytes(*dtype, shape, *bytes);
  }

  std::string origin, baseDir;
};

} // namespace

std::unique_ptr<Target> makeOnnxTarget(const Config &config) {
  return std::make_unique<OnnxTarget>(config);
}

std::unique_ptr<Target> makeTensorProtoTarget(const Config &config) {
  return std::make_unique<TensorProtoTarget>(config);
}

} // namespace loom::fuzz
