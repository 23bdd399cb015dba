//===- HostTensor.cpp - Constant tensors folded during ONNX import --------===//

#include "compiler/onnx/HostTensor.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace loom::onnx_import {

std::optional<DType> toDType(int32_t t) {
  switch (t) {
  case 1:
    return DType::F32;
  case 6:
    return DType::I32;
  case 7:
    return DType::I64;
  case 9:
    return DType::Bool;
  case 10:
    return DType::F16;
  case 16:
    return DType::BF16;
  default:
    return std::nullopt;
  }
}

std::string onnxTypeName(int32_t t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(t));
  return "type " + std::to_string(t);
}

Type toMlirType(DType dtype, MLIRContext *ctx) {
  switch (dtype) {
  case DType::F32:
    return Float32Type::get(ctx);
  case DType::F16:
    return Float16Type::get(ctx);
  case DType::BF16:
    return BFloat16Type::get(ctx);
  case DType::I32:
    return IntegerType::get(ctx, 32);
  case DType::I64:
    return IntegerType::get(ctx, 64);
  case DType::Bool:
    return IntegerType::get(ctx, 1);
  }
  return {};
}

std::optional<DType> fromMlirType(Type type) {
  if (type.isF32())
    return DType::F32;
  if (type.isF16())
    return DType::F16;
  if (type.isBF16())
    return DType::BF16;
  if (type.isInteger(32))
    return DType::I32;
  if (type.isInteger(64))
    return DType::I64;
  if (type.isInteger(1))
    return DType::Bool;
  return std::nullopt;
}

bool isFloat(DType d) {
  return d == DType::F32 || d == DType::F16 || d == DType::BF16;
}

size_t elementSize(DType d) {
  switch (d) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::Bool:
    return 1;
  }
  return 0;
}

std::optional<int64_t> checkedNumElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxElements)
      return std::nullopt;
    if (d != 0 && n > kMaxElements / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

static const llvm::fltSemantics &semantics(DType d) {
  return d == DType::F16 ? APFloat::IEEEhalf() : APFloat::BFloat();
}

/// Appends `v` as `n` little-endian bytes.
static void appendLE(std::string &out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string externalDataPathError(StringRef location, StringRef baseDir) {
  if (location.empty())
    return "an empty location";
  if (llvm::sys::path::is_absolute(location) || location.starts_with("~"))
    return "an absolute path (external data must lie in the model's "
           "directory)";
  for (auto it = llvm::sys::path::begin(location),
            end = llvm::sys::path::end(location);
       it != end; ++it)
    if (*it == "..")
      return "a path with '..' (external data must lie in the model's "
             "directory)";
  // A symbolic link may still lead out.
  SmallString<256> path(baseDir), real, realBase;
  llvm::sys::path::append(path, location);
  if (llvm::sys::fs::real_path(path, real) ||
      llvm::sys::fs::real_path(baseDir.empty() ? "." : baseDir, realBase))
    return "which cannot be read";
  llvm::StringRef r(real), b(realBase);
  if (!r.starts_with(b) || r.size() <= b.size() ||
      !llvm::sys::path::is_separator(r[b.size()]))
    return "which resolves outside the model's directory (to " +
           real.str().str() + ")";
  return "";
}

std::optional<std::string> tensorBytes(const onnx::TensorProto &t, DType dtype,
                                       StringRef baseDir, std::string &error) {
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  std::optional<int64_t> count = checkedNumElements(shape);
  if (!count) {
    error = "has an invalid or too large shape";
    return std::nullopt;
  }
  size_t expected = static_cast<size_t>(*count) * elementSize(dtype);
  std::string bytes;
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    bool numbersOk = true;
    auto number = [&](const std::string &text, int64_t &out) {
      llvm::StringRef s(text);
      unsigned long long v = 0;
      if (s.getAsInteger(10, v) || v > uint64_t(INT64_MAX))
        numbersOk = false;
      else
        out = static_cast<int64_t>(v);
    };
    for (const auto &entry : t.external_data()) {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset")
        number(entry.value(), offset);
      else if (entry.key() == "length")
        number(entry.value(), length);
    }
    if (!numbersOk) {
      error = "has an external-data offset or length that is not a "
              "non-negative integer";
      return std::nullopt;
    }
    // As ONNX's checker requires: the data stays inside the model's
    // directory (a relative path without "..", resolving there).
    std::string why = externalDataPathError(location, baseDir);
    if (!why.empty()) {
      error = "stores its data in external file '" + location + "', " + why;
      return std::nullopt;
    }
    SmallString<256> path(baseDir);
    llvm::sys::path::append(path, location);
    uint64_t size = 0;
    if (llvm::sys::fs::file_size(path, size) ||
        !llvm::sys::fs::is_regular_file(path)) {
      error = "stores its data in external file '" + location +
              "', which cannot be read";
      return std::nullopt;
    }
    if (length < 0)
      length = static_cast<int64_t>(expected);
    if (static_cast<uint64_t>(offset) > size ||
        static_cast<uint64_t>(length) > size - static_cast<uint64_t>(offset)) {
      error = "external data range is outside file '" + location + "'";
      return std::nullopt;
    }
    auto file = llvm::MemoryBuffer::getFileSlice(path, length, offset);
    if (!file) {
      error = "stores its data in external file '" + location +
              "', which cannot be read";
      return std::nullopt;
    }
    bytes.assign((*file)->getBufferStart(), length);
  } else if (t.has_raw_data()) {
    bytes = t.raw_data();
  } else {
    switch (dtype) {
    case DType::F32:
      for (float f : t.float_data()) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        appendLE(bytes, bits, 4);
      }
      break;
    case DType::I64:
      for (int64_t v : t.int64_data())
        appendLE(bytes, static_cast<uint64_t>(v), 8);
      break;
    case DType::I32:
      for (int32_t v : t.int32_data())
        appendLE(bytes, static_cast<uint32_t>(v), 4);
      break;
    case DType::F16:
    case DType::BF16:
      for (int32_t v : t.int32_data())
        appendLE(bytes, static_cast<uint16_t>(v), 2);
      break;
    case DType::Bool:
      for (int32_t v : t.int32_data())
        bytes.push_back(v ? 1 : 0);
      break;
    }
  }
  if (bytes.size() != expected) {
    error = "holds " + std::to_string(bytes.size()) + " bytes of data but " +
            std::to_string(expected) + " are expected";
    return std::nullopt;
  }
  return bytes;
}

int64_t HostTensor::numElements() const {
  return isFloat() ? static_cast<int64_t>(floats.size())
                   : static_cast<int64_t>(ints.size());
}

HostTensor HostTensor::ofInts(DType dtype, ArrayRef<int64_t> shape,
                              std::vector<int64_t> values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.ints = std::move(values);
  return t;
}

HostTensor HostTensor::ofFloats(DType dtype, ArrayRef<int64_t> shape,
                                std::vector<double> values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.floats = std::move(values);
  return t;
}

static uint64_t readLE(const char *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

HostTensor HostTensor::fromBytes(DType dtype, ArrayRef<int64_t> shape,
                                 StringRef bytes) {
  size_t size = elementSize(dtype), n = bytes.size() / size;
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  for (size_t i = 0; i < n; ++i) {
    uint64_t raw = readLE(bytes.data() + i * size, size);
    switch (dtype) {
    case DType::F32: {
      float f;
      uint32_t bits = static_cast<uint32_t>(raw);
      std::memcpy(&f, &bits, 4);
      t.floats.push_back(f);
      break;
    }
    case DType::F16:
    case DType::BF16:
      t.floats.push_back(
          APFloat(semantics(dtype), APInt(16, raw)).convertToFloat());
      break;
    case DType::I32:
      t.ints.push_back(static_cast<int32_t>(raw));
      break;
    case DType::I64:
      t.ints.push_back(static_cast<int64_t>(raw));
      break;
    case DType::Bool:
      t.ints.push_back(raw != 0);
      break;
    }
  }
  return t;
}

/// Rounds `v` to what the element type can hold.
static double roundToType(double v, DType d) {
  if (d == DType::F32)
    return static_cast<float>(v);
  if (d == DType::F16 || d == DType::BF16) {
    APFloat f(v);
    bool lost;
    f.convert(semantics(d), APFloat::rmNearestTiesToEven, &lost);
    return f.convertToDouble();
  }
  return v;
}

static int64_t wrapToType(int64_t v, DType d) {
  if (d == DType::I32)
    return static_cast<int32_t>(static_cast<uint32_t>(v));
  if (d == DType::Bool)
    return v != 0;
  return v;
}

HostTensor HostTensor::castTo(DType to) const {
  HostTensor r;
  r.dtype = to;
  r.shape = shape;
  int64_t n = numElements();
  if (onnx_import::isFloat(to))
    r.floats.reserve(n);
  else
    r.ints.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    if (onnx_import::isFloat(to)) {
      r.floats.push_back(roundToType(asDouble(i), to));
    } else if (to == DType::Bool) {
      r.ints.push_back(asDouble(i) != 0);
    } else if (isFloat()) {
      double v = floats[i];
      // Out-of-range and NaN conversions are undefined in C++; saturate.
      if (std::isnan(v))
        r.ints.push_back(0);
      else if (v >= 9.2e18)
        r.ints.push_back(INT64_MAX);
      else if (v <= -9.2e18)
        r.ints.push_back(INT64_MIN);
      else
        r.ints.push_back(wrapToType(static_cast<int64_t>(v), to));
    } else {
      r.ints.push_back(wrapToType(ints[i], to));
    }
  }
  return r;
}

HostTensor HostTensor::reshaped(ArrayRef<int64_t> newShape) const {
  HostTensor r = *this;
  r.shape.assign(newShape.begin(), newShape.end());
  return r;
}

RankedTensorType HostTensor::getType(MLIRContext *ctx) const {
  return RankedTensorType::get(shape, toMlirType(dtype, ctx));
}

DenseElementsAttr HostTensor::toAttr(MLIRContext *ctx) const {
  RankedTensorType type = getType(ctx);
  int64_t n = numElements();
  if (dtype == DType::Bool) {
    SmallVector<bool> values(ints.begin(), ints.end());
    return DenseElementsAttr::get(type, values);
  }
  if (dtype == DType::I32 || dtype == DType::I64) {
    SmallVector<APInt> values;
    unsigned width = dtype == DType::I32 ? 32 : 64;
    for (int64_t i = 0; i < n; ++i)
      values.push_back(APInt(width, static_cast<uint64_t>(ints[i]),
                             /*isSigned=*/true, /*implicitTrunc=*/true));
    return DenseElementsAttr::get(type, values);
  }
  SmallVector<APFloat> values;
  for (int64_t i = 0; i < n; ++i) {
    APFloat f(floats[i]);
    bool lost;
    f.convert(cast<FloatType>(type.getElementType()).getFloatSemantics(),
              APFloat::rmNearestTiesToEven, &lost);
    values.push_back(f);
  }
  return DenseElementsAttr::get(type, values);
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Builds a tensor of `shape` whose element at multi-index `idx` is the
/// source element at the flat index `source(idx)`.
template <typename Fn>
static HostTensor gatherElements(const HostTensor &src, ArrayRef<int64_t> shape,
                                 Fn source) {
  HostTensor r;
  r.dtype = src.dtype;
  r.shape.assign(shape.begin(), shape.end());
  int64_t n = *checkedNumElements(shape);
  if (src.isFloat())
    r.floats.reserve(n);
  else
    r.ints.reserve(n);
  SmallVector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t s = source(ArrayRef<int64_t>(idx));
    if (src.isFloat())
      r.floats.push_back(src.floats[s]);
    else
      r.ints.push_back(src.ints[s]);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return r;
}

HostTensor hostBroadcast(const HostTensor &t, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides = stridesOf(t.shape);
  size_t offset = shape.size() - t.shape.size();
  return gatherElements(t, shape, [&](ArrayRef<int64_t> idx) {
    int64_t s = 0;
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (t.shape[d] != 1)
        s += idx[d + offset] * strides[d];
    return s;
  });
}

HostTensor hostTranspose(const HostTensor &t, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> strides = stridesOf(t.shape), shape;
  for (int64_t p : perm)
    shape.push_back(t.shape[p]);
  return gatherElements(t, shape, [&](ArrayRef<int64_t> idx) {
    int64_t s = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      s += idx[d] * strides[perm[d]];
    return s;
  });
}

HostTensor hostGather(const HostTensor &data, const HostTensor &indices,
                      int64_t axis) {
  SmallVector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  llvm::append_range(shape, indices.shape);
  shape.append(data.shape.begin() + axis + 1, data.shape.end());
  SmallVector<int64_t> strides = stridesOf(data.shape);
  SmallVector<int64_t> indexStrides = stridesOf(indices.shape);
  size_t k = indices.shape.size();
  int64_t dim = data.shape[axis];
  return gatherElements(data, shape, [&](ArrayRef<int64_t> idx) {
    int64_t flatIndex = 0;
    for (size_t j = 0; j < k; ++j)
      flatIndex += idx[axis + j] * indexStrides[j];
    int64_t i = indices.ints[flatIndex];
    if (i < 0)
      i += dim;
    int64_t s = i * strides[axis];
    for (int64_t d = 0; d < axis; ++d)
      s += idx[d] * strides[d];
    for (size_t d = axis + 1; d < data.shape.size(); ++d)
      s += idx[d - 1 + k] * strides[d];
    return s;
  });
}

HostTensor hostConcat(ArrayRef<const HostTensor *> inputs, int64_t axis) {
  HostTensor r;
  r.dtype = inputs.front()->dtype;
  r.shape = inputs.front()->shape;
  r.shape[axis] = 0;
  for (const HostTensor *t : inputs)
    r.shape[axis] += t->shape[axis];
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= r.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *t : inputs) {
      int64_t inner = 1;
      for (size_t d = axis; d < t->shape.size(); ++d)
        inner *= t->shape[d];
      for (int64_t i = 0; i < inner; ++i) {
        if (t->isFloat())
          r.floats.push_back(t->floats[o * inner + i]);
        else
          r.ints.push_back(t->ints[o * inner + i]);
      }
    }
  return r;
}

HostTensor hostSlice(const HostTensor &t, ArrayRef<int64_t> starts,
                     ArrayRef<int64_t> sizes, ArrayRef<int64_t> steps) {
  SmallVector<int64_t> strides = stridesOf(t.shape);
  return gatherElements(t, sizes, [&](ArrayRef<int64_t> idx) {
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      s += (starts[d] + idx[d] * steps[d]) * strides[d];
    return s;
  });
}

} // namespace loom::onnx_import
