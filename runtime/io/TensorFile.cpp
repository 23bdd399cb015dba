//===- TensorFile.cpp - Reading tensors from ONNX and NumPy files ---------===//

#include "runtime/io/TensorFile.h"

#include "runtime/io/FileUtil.h"
#include "runtime/io/Npy.h"

#include "onnx/onnx_pb.h"

#include <climits>
#include <cstring>
#include <limits>

namespace loom::rt {
namespace {

using onnx::TensorProto;

std::string typeName(int type) {
  const std::string &name = onnx::TensorProto_DataType_Name(type);
  if (name.empty())
    return "data type " + std::to_string(type);
  return name;
}

/// How one supported ONNX data type is stored and what it becomes.
struct OnnxTypeInfo {
  DType dtype;            // the runtime's type after reading
  size_t rawSize;         // bytes per element in raw_data
  const char *typedField; // the repeated field holding it when not raw
};

std::optional<OnnxTypeInfo> typeInfo(int type) {
  switch (type) {
  case TensorProto::FLOAT:
    return OnnxTypeInfo{DType::F32, 4, "float_data"};
  case TensorProto::FLOAT16:
    return OnnxTypeInfo{DType::F16, 2, "int32_data"};
  case TensorProto::BFLOAT16:
    return OnnxTypeInfo{DType::BF16, 2, "int32_data"};
  case TensorProto::INT32:
    return OnnxTypeInfo{DType::I32, 4, "int32_data"};
  case TensorProto::INT64:
    return OnnxTypeInfo{DType::I64, 8, "int64_data"};
  case TensorProto::BOOL:
    return OnnxTypeInfo{DType::Bool, 1, "int32_data"};
  case TensorProto::DOUBLE:
    return OnnxTypeInfo{DType::F32, 8, "double_data"};
  default:
    return std::nullopt;
  }
}

/// The number of values in the typed field `field` of `t`.
int typedCount(const TensorProto &t, std::string_view field) {
  if (field == "float_data")
    return t.float_data_size();
  if (field == "int32_data")
    return t.int32_data_size();
  if (field == "int64_data")
    return t.int64_data_size();
  return t.double_data_size();
}

/// The first non-empty typed data field of `t`, or nullptr.
const char *firstTypedField(const TensorProto &t) {
  if (t.float_data_size())
    return "float_data";
  if (t.int32_data_size())
    return "int32_data";
  if (t.int64_data_size())
    return "int64_data";
  if (t.double_data_size())
    return "double_data";
  if (t.string_data_size())
    return "string_data";
  if (t.uint64_data_size())
    return "uint64_data";
  return nullptr;
}

void storeFloat(HostBuffer &out, size_t i, float f) {
  std::memcpy(out.bytes.data() + 4 * i, &f, 4);
}

/// Converts a parsed TensorProto; errors do not name the origin.
std::optional<HostBuffer> convert(const TensorProto &t, std::string &error) {
  if (!t.has_data_type() || t.data_type() == TensorProto::UNDEFINED) {
    error = "the tensor has no data type (is this a serialized "
            "onnx.TensorProto?)";
    return std::nullopt;
  }
  std::optional<OnnxTypeInfo> info = typeInfo(t.data_type());
  if (!info) {
    error = "data type " + typeName(t.data_type()) +
            " is not supported (supported: FLOAT, FLOAT16, BFLOAT16, INT32, "
            "INT64, BOOL, and DOUBLE read as FLOAT)";
    return std::nullopt;
  }
  if (t.data_location() == TensorProto::EXTERNAL) {
    error = "external data is not supported; save the tensor with its data "
            "inline";
    return std::nullopt;
  }
  if (t.has_segment()) {
    error = "segmented tensors are not supported";
    return std::nullopt;
  }

  HostBuffer out;
  out.dtype = info->dtype;
  uint64_t count = 1;
  for (int64_t dim : t.dims()) {
    if (dim < 0) {
      error = "negative dimension " + std::to_string(dim) + " in dims";
      return std::nullopt;
    }
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count) ||
        count >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 8) {
      error = "dims have too many elements";
      return std::nullopt;
    }
    out.shape.push_back(dim);
  }
  std::string shape = formatShape(out.shape);

  const char *typed = firstTypedField(t);
  if (t.has_raw_data()) {
    if (typed) {
      error = std::string("the tensor has both raw_data and ") + typed;
      return std::nullopt;
    }
    const std::string &raw = t.raw_data();
    if (raw.size() != count * info->rawSize) {
      error = "raw_data has " + std::to_string(raw.size()) +
              " bytes but dims " + shape + " of " + typeName(t.data_type()) +
              " need " + std::to_string(count * info->rawSize);
      return std::nullopt;
    }
    out.bytes.resize(count * dtypeSize(info->dtype));
    if (t.data_type() == TensorProto::DOUBLE) {
      for (size_t i = 0; i < count; ++i) {
        double d;
        std::memcpy(&d, raw.data() + 8 * i, 8);
        storeFloat(out, i, static_cast<float>(d));
      }
    } else if (t.data_type() == TensorProto::BOOL) {
      for (size_t i = 0; i < count; ++i)
        out.bytes[i] = raw[i] != 0;
    } else if (count) {
      std::memcpy(out.bytes.data(), raw.data(), raw.size());
    }
    return out;
  }

  if (typed && std::strcmp(typed, info->typedField) != 0) {
    error = std::string("a ") + typeName(t.data_type()) +
            " tensor must hold its values in raw_data or " + info->typedField +
            ", not " + typed;
    return std::nullopt;
  }
  uint64_t have = static_cast<uint64_t>(typedCount(t, info->typedField));
  if (have != count) {
    error = std::string(info->typedField) + " has " + std::to_string(have) +
            " values but dims " + shape + " need " + std::to_string(count);
    return std::nullopt;
  }
  out.bytes.resize(count * dtypeSize(info->dtype));
  for (size_t i = 0; i < count; ++i) {
    int n = static_cast<int>(i);
    switch (t.data_type()) {
    case TensorProto::FLOAT:
      storeFloat(out, i, t.float_data(n));
      break;
    case TensorProto::DOUBLE:
      storeFloat(out, i, static_cast<float>(t.double_data(n)));
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: {
      int32_t v = t.int32_data(n);
      if (v < 0 || v > 0xffff) {
        error = "int32_data[" + std::to_string(i) + "] = " + std::to_string(v) +
                " is not a 16-bit pattern";
        return std::nullopt;
      }
      uint16_t bits = static_cast<uint16_t>(v);
      std::memcpy(out.bytes.data() + 2 * i, &bits, 2);
      break;
    }
    case TensorProto::INT32: {
      int32_t v = t.int32_data(n);
      std::memcpy(out.bytes.data() + 4 * i, &v, 4);
      break;
    }
    case TensorProto::INT64: {
      int64_t v = t.int64_data(n);
      std::memcpy(out.bytes.data() + 8 * i, &v, 8);
      break;
    }
    case TensorProto::BOOL:
      out.bytes[i] = t.int32_data(n) != 0;
      break;
    default:
      break;
    }
  }
  return out;
}

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         std::string_view(s).substr(s.size() - suffix.size()) == suffix;
}

} // namespace

std::optional<HostBuffer> parseOnnxTensor(std::string_view bytes,
                                          std::string &error, std::string *name,
                                          const std::string &origin) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    error = origin + ": too large for a serialized TensorProto (2 GiB at "
                     "most; larger tensors need external data)";
    return std::nullopt;
  }
  TensorProto tensor;
  if (!tensor.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    error = origin + ": not a serialized onnx.TensorProto (protobuf parsing "
                     "failed)";
    return std::nullopt;
  }
  std::optional<HostBuffer> out = convert(tensor, error);
  if (!out) {
    error = origin + ": " +
            (tensor.name().empty() ? "" : "tensor '" + tensor.name() + "': ") +
            error;
    return std::nullopt;
  }
  if (name)
    *name = tensor.name();
  return out;
}

std::optional<HostBuffer> readOnnxTensorFile(const std::string &path,
                                             std::string &error,
                                             std::string *name) {
  std::string bytes;
  if (!readWholeFile(path, bytes, error)) {
    error = path + ": " + error;
    return std::nullopt;
  }
  return parseOnnxTensor(bytes, error, name, path);
}

std::optional<HostBuffer>
readTensorFile(const std::string &path, std::string &error, std::string *name) {
  if (endsWith(path, ".npy")) {
    std::optional<HostBuffer> out = readNpy(path, error);
    if (out && name)
      name->clear();
    return out;
  }
  if (endsWith(path, ".pb"))
    return readOnnxTensorFile(path, error, name);
  error = path + ": unknown tensor file extension (expected .npy or .pb)";
  return std::nullopt;
}

} // namespace loom::rt
