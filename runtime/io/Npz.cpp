//===- Npz.cpp - Writing NumPy .npz archives ------------------------------===//

#include "runtime/io/Npz.h"
#include "runtime/io/Npy.h"

#include <cstdio>
#include <cstdint>
#include <limits>

#include <zlib.h>

namespace loom::rt {
namespace {

void put16(std::string &out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>((v >> 8) & 0xff));
}

void put32(std::string &out, uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

/// The fields local and central headers share, from "version needed" to the
/// name's length: stored (no compression), no flags, 1980-01-01 00:00.
void commonFields(std::string &out, uint32_t crc, uint32_t size,
                  size_t nameSize) {
  put16(out, 20);     // version needed: 2.0
  put16(out, 0);      // flags
  put16(out, 0);      // method: stored
  put16(out, 0);      // time
  put16(out, 0x21);   // date: 1980-01-01
  put32(out, crc);
  put32(out, size);   // compressed size
  put32(out, size);   // uncompressed size
  put16(out, static_cast<uint32_t>(nameSize));
  put16(out, 0);      // extra field length
}

} // namespace

bool writeNpz(const std::string &path,
              const std::vector<std::pair<std::string, TensorView>> &arrays,
              std::string &error) {
  constexpr uint64_t kLimit = std::numeric_limits<uint32_t>::max();
  std::string archive, directory;
  for (const auto &[name, view] : arrays) {
    std::string member = name + ".npy";
    std::optional<std::string> npy = serializeNpy(view, error);
    if (!npy) {
      error = path + ": array '" + name + "': " + error;
      return false;
    }
    if (npy->size() >= kLimit || archive.size() >= kLimit ||
        member.size() > 0xffff || arrays.size() > 0xffff) {
      error = path + ": the archive passes zip's 4 GiB or 65535-entry limits "
                     "at array '" + name + "'";
      return false;
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32_z(crc32_z(0L, Z_NULL, 0),
                reinterpret_cast<const Bytef *>(npy->data()), npy->size()));
    const uint32_t size = static_cast<uint32_t>(npy->size());
    const uint32_t offset = static_cast<uint32_t>(archive.size());
    put32(archive, 0x04034b50);
    commonFields(archive, crc, size, member.size());
    archive += member;
    archive += *npy;
    put32(directory, 0x02014b50);
    put16(directory, 20); // version made by
    commonFields(directory, crc, size, member.size());
    put16(directory, 0);  // comment length
    put16(directory, 0);  // disk number
    put16(directory, 0);  // internal attributes
    put32(directory, 0);  // external attributes
    put32(directory, offset);
    directory += member;
  }
  if (archive.size() + directory.size() >= kLimit) {
    error = path + ": the archive passes zip's 4 GiB limit";
    return false;
  }
  const uint32_t directoryOffset = static_cast<uint32_t>(archive.size());
  archive += directory;
  put32(archive, 0x06054b50);
  put16(archive, 0); // this disk
  put16(archive, 0); // the directory's disk
  put16(archive, static_cast<uint32_t>(arrays.size()));
  put16(archive, static_cast<uint32_t>(arrays.size()));
  put32(archive, static_cast<uint32_t>(directory.size()));
  put32(archive, directoryOffset);
  put16(archive, 0); // comment length

  const std::string temporary = path + ".tmp";
  FILE *f = std::fopen(temporary.c_str(), "wb");
  bool ok = f && std::fwrite(archive.data(), 1, archive.size(), f) ==
                     archive.size();
  ok = (f && std::fclose(f) == 0) && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}

} // namespace loom::rt
