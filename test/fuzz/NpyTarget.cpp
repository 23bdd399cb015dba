//===- NpyTarget.cpp - Fuzzing the .npy readers ---------------------------===//
//
// .npy files of every element type and version, mutated byte by byte or
// rebuilt from a mutated header (element type, order, shape, version,
// header length, data size), read both from memory (parseNpy) and from a
// file (readNpy, which reads the header and the data separately): the two
// must agree on every input, in what they accept and what they return.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "runtime/io/Npy.h"

#include <fstream>

namespace loom::fuzz {

namespace {

/// A .npy file: magic, version, header length (2 bytes in version 1, 4 in
/// later ones, little-endian), the header text and the data.
std::string npyFile(unsigned major, const std::string &header,
                    const std::string &data, int64_t lengthDelta = 0) {
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  uint64_t length =
      static_cast<uint64_t>(static_cast<int64_t>(header.size()) + lengthDelta);
  for (unsigned b = 0; b < (major == 1 ? 2u : 4u); ++b)
    out.push_back(static_cast<char>((length >> (8 * b)) & 0xff));
  return out + header + data;
}

std::string dict(const std::string &descr, const std::string &fortran,
                 const std::string &shape) {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran +
         ", 'shape': " + shape + ", }\n";
}

const std::vector<std::string> kDescrs = {
    "<f4", "<f2", "<i4", "<i8", "|b1", "<f8",  ">f4", "|u1",
    "<u4", "<c8", "O",   "<U3", "",    "<f4'", "f4",  "<f16"};
const std::vector<std::string> kShapes = {
    "()",
    "(0,)",
    "(3,)",
    "(2, 3)",
    "(2, 0, 3)",
    "(-1,)",
    "(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
    "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)",
    "(9223372036854775807,)",
    "(9223372036854775808,)",
    "(4294967296, 4294967296)",
    "(3037000500, 3037000500)",
    "(65536, 65536, 65536)",
    "(2, 3",
    "[2, 3]",
    "(2,,3)",
    "(2 3)",
    "(1e3,)",
    "(0x10,)",
    "(+2,)"};

size_t elementSize(const std::string &descr) {
  if (descr.size() < 3)
    return 1;
  char width = descr.back();
  return width >= '1' && width <= '8' ? static_cast<size_t>(width - '0') : 1;
}

/// The number of elements of a well-formed small shape text, else 6.
uint64_t elementsOf(const std::string &shape) {
  static const std::vector<std::pair<std::string, uint64_t>> kKnown = {
      {"()", 1}, {"(0,)", 0}, {"(3,)", 3}, {"(2, 3)", 6}, {"(2, 0, 3)", 0}};
  for (const auto &[text, n] : kKnown)
    if (text == shape)
      return n;
  return 6;
}

/// A file rebuilt from drawn parts: most are valid, each part sometimes
/// not.
std::string structured(Rng &rng) {
  // The first six element types are the ones Loom reads.
  std::string descr = kDescrs[rng.below(rng.chance(70) ? 6 : kDescrs.size())];
  std::string shape = rng.pick(kShapes);
  std::string fortran = rng.chance(85)
                            ? "False"
                            : std::vector<std::string>{"True", "1", "None",
                                                       "false"}[rng.below(4)];
  std::string header = dict(descr, fortran, shape);
  switch (rng.below(8)) {
  case 0: // keys in another order, or one missing, or one more
    header = rng.chance(50)
                 ? "{'shape': " + shape + ", 'descr': '" + descr +
                       "', 'fortran_order': " + fortran + "}"
                 : "{'descr': '" + descr + "', 'shape': " + shape + "}";
    break;
  case 1:
    header.insert(1, "'extra': 1, ");
    break;
  case 2:
    header.insert(1, "'descr': '<i8', ");
    break;
  default:
    break;
  }
  // NumPy pads the header with spaces so that the data is aligned.
  while (rng.chance(70) && (10 + header.size()) % 64)
    header.insert(header.size() - 1, " ");
  uint64_t bytes = elementsOf(shape) * elementSize(descr);
  std::string data(bytes, '\x3f');
  if (rng.chance(20))
    data.resize(rng.below(bytes + 9));
  for (char &c : data)
    if (rng.chance(10))
      c = static_cast<char>(rng.next());
  unsigned major =
      rng.chance(70)
          ? 1
          : 2 + static_cast<unsigned>(rng.below(rng.chance(90) ? 2 : 10));
  int64_t delta = rng.chance(85) ? 0 : static_cast<int64_t>(rng.below(9)) - 4;
  if (rng.chance(3))
    delta = 0xffffffff;
  return npyFile(major, header, data, delta);
}

class NpyTarget : public Target {
public:
  explicit NpyTarget(const Config &config)
      : path(config.workDir + "/fuzz.npy") {}

  std::vector<Seed> seeds(const Config &) override {
    std::vector<Seed> out;
    const rt::DType kTypes[] = {rt::DType::F32,  rt::DType::F16,
                                rt::DType::BF16, rt::DType::I32,
                                rt::DType::I64,  rt::DType::Bool};
    const rt::Shape kSeedShapes[] = {{}, {0}, {3}, {2, 3}, {1, 2, 1, 2}};
    std::vector<unsigned char> data(64, 1);
    for (rt::DType dtype : kTypes)
      for (const rt::Shape &shape : kSeedShapes) {
        std::string error;
        std::optional<std::string> bytes =
            rt::serializeNpy({dtype, shape, data.data()}, error);
        if (bytes)
          out.push_back({"seed", *bytes});
      }
    // What NumPy writes that Loom does not: version 2 and 3 headers, f8,
    // Fortran order.
    out.push_back(
        {"v2", npyFile(2, dict("<f4", "False", "(2,)"), std::string(8, 0))});
    out.push_back(
        {"v3", npyFile(3, dict("<i8", "False", "()"), std::string(8, 0))});
    out.push_back(
        {"f8", npyFile(1, dict("<f8", "False", "(2,)"), std::string(16, 0))});
    out.push_back({"fortran", npyFile(1, dict("<f4", "True", "(2, 2)"),
                                      std::string(16, 0))});
    return out;
  }

  std::vector<std::string> stages() const override {
    return {"preamble", "header"};
  }

  std::string mutate(const std::vector<Seed> &corpus, Rng &rng) override {
    if (rng.chance(35))
      return structured(rng);
    std::string out = rng.pick(corpus).bytes;
    // Mostly in the preamble and header, where the parsing is.
    if (rng.chance(60) && out.size() > 128) {
      std::string head = out.substr(0, 128), tail = out.substr(128);
      mutateBytesStacked(head, rng, rng.pick(corpus).bytes);
      return head + tail;
    }
    mutateBytesStacked(out, rng, rng.pick(corpus).bytes);
    return out;
  }

  Outcome run(const std::string &input) override {
    Outcome o;
    std::string error, fileError;
    std::optional<rt::HostBuffer> parsed = rt::parseNpy(input, error, path);
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(input.data(), static_cast<std::streamsize>(input.size()));
    }
    std::optional<rt::HostBuffer> read = rt::readNpy(path, fileError);
    if (parsed.has_value() != read.has_value())
      o.violation = std::string("parseNpy ") +
                    (parsed ? "accepts" : "refuses") + " what readNpy " +
                    (read ? "accepts" : "refuses") + " (" + error + fileError +
                    ")";
    else if (parsed &&
             (parsed->dtype != read->dtype || parsed->shape != read->shape ||
              parsed->bytes != read->bytes))
      o.violation = "parseNpy and readNpy return different tensors";
    if (parsed) {
      o.accepted = true;
      uint64_t count = 1;
      for (int64_t d : parsed->shape)
        count *= static_cast<uint64_t>(d);
      if (parsed->bytes.size() != count * rt::dtypeSize(parsed->dtype))
        o.violation = "the tensor's bytes do not match its shape";
      return o;
    }
    o.message = error;
    o.stage = error.find("magic") != std::string::npos ||
                      error.find("version") != std::string::npos ||
                      error.find("truncated") != std::string::npos
                  ? "preamble"
                  : "header";
    if (error.rfind(path + ": ", 0) != 0 ||
        (!read && fileError.rfind(path + ": ", 0) != 0))
      o.violation = "the message does not start with the file's name";
    return o;
  }

private:
  std::string path;
};

} // namespace

std::unique_ptr<Target> makeNpyTarget(const Config &config) {
  return std::make_unique<NpyTarget>(config);
}

} // namespace loom::fuzz
