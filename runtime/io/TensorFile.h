//===- TensorFile.h - Reading tensors from ONNX and NumPy files -*- C++ -*-===//
//
// Host tensors from serialized onnx::TensorProto files (the input_N.pb and
// output_N.pb files of the ONNX backend test data) and, by extension, from
// .npy files. The header has no protobuf or ONNX dependency.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_TENSORFILE_H
#define LOOM_RUNTIME_IO_TENSORFILE_H

#include "runtime/Tensor.h"

#include <optional>
#include <string>
#include <string_view>

namespace loom::rt {

/// Reads a serialized onnx::TensorProto from `path`. Supported data types:
/// FLOAT, FLOAT16, BFLOAT16, INT32, INT64 and BOOL, held either in raw_data
/// (little-endian) or in the typed field ONNX assigns them (float_data;
/// int32_data for FLOAT16, BFLOAT16, BOOL and INT32, the 16-bit types as
/// their bit patterns; int64_data), plus DOUBLE (raw_data or double_data),
/// converted to F32. Other data types, external data, segments and data
/// whose size disagrees with the dims return std::nullopt and set `error` to
/// a message naming the file and the problem. When `name` is given it
/// receives the tensor's name.
std::optional<HostBuffer> readOnnxTensorFile(const std::string &path,
                                             std::string &error,
                                             std::string *name = nullptr);

/// Parses the bytes of a serialized onnx::TensorProto held in memory, with
/// the same rules as readOnnxTensorFile. `origin` names the source in error
/// messages.
std::optional<HostBuffer>
parseOnnxTensor(std::string_view bytes, std::string &error,
                std::string *name = nullptr,
                const std::string &origin = "<memory>");

/// Reads a tensor file by its extension: ".npy" with readNpy, ".pb" with
/// readOnnxTensorFile. Any other extension is an error. For .npy files,
/// which carry no tensor name, `name` (when given) is set to "".
std::optional<HostBuffer> readTensorFile(const std::string &path,
                                         std::string &error,
                                         std::string *name = nullptr);

} // namespace loom::rt

#endif // LOOM_RUNTIME_IO_TENSORFILE_H
