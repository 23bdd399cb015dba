//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// The data half of the format and the public entry points; the preamble and
// header are in NpyHeader.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Npy.h"

#include "runtime/io/FileUtil.h"
#include "runtime/io/NpyHeader.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the .npy reader and writer assume a little-endian host");

namespace loom::rt {
namespace {

/// Turns the raw file data for `layout` into the runtime's element type.
void convertData(const npy::Layout &layout, const unsigned char *data,
                 HostBuffer &out) {
  const npy::ElemInfo &info = npy::infoOf(layout.elem);
  out.dtype = info.dtype;
  out.shape = layout.shape;
  size_t count = static_cast<size_t>(layout.dataBytes / info.size);
  out.bytes.resize(count * dtypeSize(info.dtype));
  if (layout.elem == npy::Elem::F8) {
    for (size_t i = 0; i < count; ++i) {
      double d;
      std::memcpy(&d, data + 8 * i, 8);
      float f = static_cast<float>(d);
      std::memcpy(out.bytes.data() + 4 * i, &f, 4);
    }
  } else if (layout.elem == npy::Elem::B1) {
    for (size_t i = 0; i < count; ++i)
      out.bytes[i] = data[i] != 0;
  } else if (count) {
    std::memcpy(out.bytes.data(), data, out.bytes.size());
  }
}

/// Checks that `t` describes a tensor that can be written and returns its
/// element count.
std::optional<uint64_t> checkView(const TensorView &t, std::string &error) {
  if (dtypeSize(t.dtype) == 0) {
    error = "unknown element type " + std::to_string(static_cast<int>(t.dtype));
    return std::nullopt;
  }
  uint64_t count = 1;
  for (int64_t dim : t.shape) {
    if (dim < 0) {
      error = "shape " + formatShape(t.shape) + " has a negative dimension";
      return std::nullopt;
    }
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count) ||
        count >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 8) {
      error = "shape " + formatShape(t.shape) + " has too many elements";
      return std::nullopt;
    }
  }
  if (count && !t.data) {
    error = "the tensor of shape " + formatShape(t.shape) + " has no data";
    return std::nullopt;
  }
  return count;
}

/// Passes the file data for `t` to `sink` in one or more pieces, converting
/// BF16 to f32 and normalizing booleans to 0 or 1. Stops at the first piece
/// `sink` rejects and returns false.
bool emitData(const TensorView &t, uint64_t count,
              const std::function<bool(const void *, size_t)> &sink) {
  constexpr size_t kChunk = 1 << 14;
  const auto *src = static_cast<const unsigned char *>(t.data);
  if (t.dtype == DType::BF16) {
    std::vector<float> chunk;
    for (uint64_t begin = 0; begin < count; begin += kChunk) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, count - begin));
      chunk.resize(n);
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * (begin + i), 2);
        chunk[i] = bf16ToFloat(b);
      }
      if (!sink(chunk.data(), n * 4))
        return false;
    }
    return true;
  }
  if (t.dtype == DType::Bool) {
    std::vector<unsigned char> chunk;
    for (uint64_t begin = 0; begin < count; begin += kChunk) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, count - begin));
      chunk.resize(n);
      for (size_t i = 0; i < n; ++i)
        chunk[i] = src[begin + i] != 0;
      if (!sink(chunk.data(), n))
        return false;
    }
    return true;
  }
  if (count == 0)
    return true;
  return sink(src, static_cast<size_t>(count * dtypeSize(t.dtype)));
}

/// The error for a file of `size` bytes whose header says the data starts
/// at `offset`, beyond its end.
std::string headerTruncated(uint64_t size, size_t offset) {
  return "truncated: the file ends inside the header (" + std::to_string(size) +
         " of " + std::to_string(offset) + " header bytes)";
}

} // namespace

std::optional<HostBuffer> parseNpy(std::string_view bytes, std::string &error,
                                   const std::string &origin) {
  std::optional<size_t> offset = npy::dataOffsetOf(bytes, error);
  if (offset && *offset > bytes.size()) {
    error = headerTruncated(bytes.size(), *offset);
    offset.reset();
  }
  std::optional<npy::Layout> layout;
  if (offset)
    layout = npy::parseLayout(bytes.substr(0, *offset), bytes.size() - *offset,
                              error);
  if (!layout) {
    error = origin + ": " + error;
    return std::nullopt;
  }
  HostBuffer out;
  convertData(*layout,
              reinterpret_cast<const unsigned char *>(bytes.data()) +
                  layout->dataOffset,
              out);
  return out;
}

std::optional<HostBuffer> readNpy(const std::string &path, std::string &error) {
  auto failed = [&](const std::string &message) -> std::optional<HostBuffer> {
    error = path + ": " + message;
    return std::nullopt;
  };
  std::string openError;
  InputFile file(path, openError);
  if (!file.ok())
    return failed(openError);
  uint64_t size = file.size();

  std::string head;
  if (!file.read(head, std::min<uint64_t>(size, npy::kMaxPreamble), openError))
    return failed(openError);
  std::optional<size_t> offset = npy::dataOffsetOf(head, error);
  if (!offset)
    return failed(error);
  if (*offset > size)
    return failed(headerTruncated(size, *offset));
  // A version 1.0 header length under 2 puts the data inside the preamble
  // just read: those bytes are the data's first.
  std::string early;
  if (*offset < head.size()) {
    early = head.substr(*offset);
    head.resize(*offset);
  } else {
    std::string rest;
    if (!file.read(rest, *offset - head.size(), openError))
      return failed(openError);
    head += rest;
  }
  std::optional<npy::Layout> layout =
      npy::parseLayout(head, size - *offset, error);
  if (!layout)
    return failed(error);

  std::vector<unsigned char> data(static_cast<size_t>(layout->dataBytes));
  size_t fromHead = std::min(early.size(), data.size());
  if (fromHead)
    std::memcpy(data.data(), early.data(), fromHead);
  if (!file.read(data.data() + fromHead, data.size() - fromHead, openError))
    return failed(openError);
  HostBuffer out;
  if (layout->elem == npy::Elem::F8 || layout->elem == npy::Elem::B1) {
    convertData(*layout, data.data(), out);
  } else { // already in the runtime's layout: keep the buffer
    out.dtype = npy::infoOf(layout->elem).dtype;
    out.shape = layout->shape;
    out.bytes = std::move(data);
  }
  return out;
}

std::optional<std::string> serializeNpy(const TensorView &t,
                                        std::string &error) {
  std::optional<uint64_t> count = checkView(t, error);
  if (!count)
    return std::nullopt;
  std::string out = npy::formatHeader(t);
  emitData(t, *count, [&](const void *data, size_t size) {
    out.append(static_cast<const char *>(data), size);
    return true;
  });
  return out;
}

bool writeNpy(const std::string &path, const TensorView &t,
              std::string &error) {
  std::optional<uint64_t> count = checkView(t, error);
  if (!count) {
    error = path + ": cannot write: " + error;
    return false;
  }
  std::string writeError;
  OutputFile file(path, writeError);
  std::string header = npy::formatHeader(t);
  if (!file.ok() || !file.write(header.data(), header.size(), writeError) ||
      !emitData(t, *count,
                [&](const void *data, size_t size) {
                  return file.write(data, size, writeError);
                }) ||
      !file.close(writeError)) {
    error = path + ": " + writeError;
    return false;
  }
  return true;
}

} // namespace loom::rt
