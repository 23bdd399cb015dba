//===- NpyTest.cpp - Tests for the .npy reader and writer -----------------===//

#include "runtime/io/Npy.h"

#include "IoTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace loom::rt;
using loom::rt::testing::runPython;
using loom::rt::testing::TempDir;
using loom::rt::testing::writeBytes;

namespace {

const DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16,
                            DType::I32, DType::I64, DType::Bool};

/// Element `i` of the test pattern for `dtype`; exact in every type (the
/// Python scripts below compute the same formulas).
double patternValue(DType dtype, int64_t i) {
  switch (dtype) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    return static_cast<double>(i) * 0.25 - 3;
  case DType::I32:
    return static_cast<double>(i * 7 - 100);
  case DType::I64:
    return static_cast<double>(i * 3000000000LL - 5);
  case DType::Bool:
    return i % 3 == 0;
  }
  return 0;
}

HostBuffer makePattern(DType dtype, const Shape &shape) {
  HostBuffer b;
  b.dtype = dtype;
  b.shape = shape;
  int64_t n = numElements(shape);
  b.bytes.resize(n * dtypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    double v = patternValue(dtype, i);
    unsigned char *p = b.bytes.data() + i * dtypeSize(dtype);
    switch (dtype) {
    case DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::F16: {
      uint16_t h = floatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::BF16: {
      uint16_t h = floatToBf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::I32: {
      int32_t x = static_cast<int32_t>(i * 7 - 100);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::I64: {
      int64_t x = i * 3000000000LL - 5;
      std::memcpy(p, &x, 8);
      break;
    }
    case DType::Bool:
      *p = v != 0;
      break;
    }
  }
  return b;
}

/// Expects `got` to hold what reading back `written` must give: the same
/// shape and bytes, except that BF16 comes back as F32 with equal values.
void expectReadBack(const HostBuffer &written, const HostBuffer &got) {
  EXPECT_EQ(got.shape, written.shape);
  if (written.dtype != DType::BF16) {
    EXPECT_EQ(got.dtype, written.dtype);
    EXPECT_EQ(got.bytes, written.bytes);
    return;
  }
  ASSERT_EQ(got.dtype, DType::F32);
  int64_t n = numElements(written.shape);
  ASSERT_EQ(got.bytes.size(), static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    float f;
    std::memcpy(&b, written.bytes.data() + 2 * i, 2);
    std::memcpy(&f, got.bytes.data() + 4 * i, 4);
    EXPECT_EQ(f, bf16ToFloat(b)) << "element " << i;
  }
}

/// A .npy file with the given header dict (padded by a newline only) and
/// data bytes, in format version `major`.0.
std::string npyBytes(const std::string &dict, const std::string &data,
                     int major = 1) {
  std::string header = dict + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  size_t lengthBytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < lengthBytes; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string f32Header(const std::string &shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

const Shape kShapes[] = {{}, {5}, {2, 3}, {2, 3, 4}, {2, 1, 3, 2}, {0, 3}};

} // namespace

// Proves that every dtype at ranks 0 to 4 (and an empty tensor) survives
// serializeNpy -> parseNpy and writeNpy -> readNpy unchanged, BF16 coming
// back as F32 with the same values.
TEST(NpyTest, RoundTripEveryDTypeAndRank) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  for (DType dtype : kAllDTypes) {
    for (const Shape &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(shape));
      HostBuffer t = makePattern(dtype, shape);
      std::string error;
      std::optional<std::string> bytes = serializeNpy(t.view(), error);
      ASSERT_TRUE(bytes) << error;
      std::optional<HostBuffer> parsed = parseNpy(*bytes, error);
      ASSERT_TRUE(parsed) << error;
      expectReadBack(t, *parsed);

      std::string path = dir.path("t.npy");
      ASSERT_TRUE(writeNpy(path, t.view(), error)) << error;
      std::optional<HostBuffer> read = readNpy(path, error);
      ASSERT_TRUE(read) << error;
      expectReadBack(t, *read);
    }
  }
}

// Proves that the writer lays out the header as NumPy does: version 1.0,
// the preamble padded with spaces to a multiple of 64 bytes, ending in '\n'.
TEST(NpyTest, HeaderIsAlignedLikeNumpy) {
  HostBuffer t = makePattern(DType::F32, {2, 3});
  std::string error;
  std::optional<std::string> bytes = serializeNpy(t.view(), error);
  ASSERT_TRUE(bytes) << error;
  ASSERT_GE(bytes->size(), 10u);
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t headerLength = static_cast<unsigned char>((*bytes)[8]) |
                        static_cast<unsigned char>((*bytes)[9]) << 8;
  size_t dataOffset = 10 + headerLength;
  EXPECT_EQ(dataOffset % 64, 0u);
  EXPECT_EQ((*bytes)[dataOffset - 1], '\n');
  EXPECT_EQ(bytes->size(), dataOffset + 24);
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(bytes->substr(10, dict.size()), dict);
  EXPECT_EQ(bytes->substr(10 + dict.size(), headerLength - dict.size() - 1),
            std::string(headerLength - dict.size() - 1, ' '));
}

// Proves that booleans are stored as 0 or 1 both ways: a non-zero byte in a
// file reads as 1, and a non-zero byte in a tensor is written as 1.
TEST(NpyTest, BoolsAreNormalized) {
  std::string error;
  std::optional<HostBuffer> b = parseNpy(
      npyBytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
               std::string("\x00\x02\xff", 3)),
      error);
  ASSERT_TRUE(b) << error;
  EXPECT_EQ(b->dtype, DType::Bool);
  EXPECT_EQ(b->bytes, (std::vector<unsigned char>{0, 1, 1}));

  HostBuffer t;
  t.dtype = DType::Bool;
  t.shape = {2};
  t.bytes = {7, 0};
  std::optional<std::string> bytes = serializeNpy(t.view(), error);
  ASSERT_TRUE(bytes) << error;
  EXPECT_EQ(bytes->substr(bytes->size() - 2), std::string("\x01\x00", 2));
}

// Proves that '<f8' is read as F32 rounded to nearest, with out-of-range
// values becoming infinities, and that version 2.0 headers are read.
TEST(NpyTest, F64IsConvertedToF32) {
  double values[] = {1.0 / 3, -2.5, 1e300, -1e300};
  std::string data(reinterpret_cast<const char *>(values), sizeof(values));
  std::string error;
  std::optional<HostBuffer> b = parseNpy(
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }",
               data, 2),
      error);
  ASSERT_TRUE(b) << error;
  ASSERT_EQ(b->dtype, DType::F32);
  ASSERT_EQ(b->shape, Shape{4});
  const float *f = reinterpret_cast<const float *>(b->bytes.data());
  EXPECT_EQ(f[0], static_cast<float>(1.0 / 3));
  EXPECT_EQ(f[1], -2.5f);
  EXPECT_TRUE(std::isinf(f[2]) && f[2] > 0);
  EXPECT_TRUE(std::isinf(f[3]) && f[3] < 0);
}

// Proves that files NumPy writes (every supported dtype, versions 1.0, 2.0
// and 3.0, a 0-d and an empty array) read with the right dtype, shape and
// values, and that the NumPy files we reject (Fortran order, big-endian,
// object, structured, unsupported dtype) give an error naming the file and
// the problem.
TEST(NpyTest, ReadsFilesWrittenByNumpy) {
  LOOM_REQUIRE_NUMPY();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  ASSERT_EQ(runPython(dir, R"PY(
import numpy as np
from numpy.lib import format as fmt
np.save('f4.npy', (np.arange(24, dtype=np.float32) * 0.25 - 3).reshape(2, 3, 4))
np.save('f2.npy', (np.arange(6) * 0.25 - 3).astype(np.float16).reshape(3, 2))
np.save('i4.npy', np.arange(10, dtype=np.int32) * 7 - 100)
np.save('i8.npy', (np.arange(4, dtype=np.int64) * 3000000000 - 5).reshape(2, 2))
np.save('b1.npy', np.arange(6).reshape(2, 1, 3) % 3 == 0)
np.save('f8.npy', np.arange(5, dtype=np.float64) / 3)
np.save('scalar.npy', np.array(2.5, dtype=np.float32))
np.save('empty.npy', np.zeros((0, 3), dtype=np.int64))
a = (np.arange(24, dtype=np.float32) * 0.25 - 3).reshape(2, 3, 4)
for v in (2, 3):
    with open('v%d.npy' % v, 'wb') as f:
        fmt.write_array(f, a, version=(v, 0))
np.save('fortran.npy', np.arange(6, dtype=np.float32).reshape(2, 3).T)
np.save('bigendian.npy', np.arange(3, dtype='>f4'))
np.save('object.npy', np.array([1, 'a'], dtype=object), allow_pickle=True)
np.save('structured.npy', np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')]))
np.save('uint8.npy', np.arange(3, dtype=np.uint8))
)PY"),
            0);

  for (const char *name : {"f4", "v2", "v3"}) {
    std::string error;
    std::optional<HostBuffer> b =
        readNpy(dir.path(name + std::string(".npy")), error);
    ASSERT_TRUE(b) << error;
    expectReadBack(makePattern(DType::F32, {2, 3, 4}), *b);
  }
  struct Case {
    const char *file;
    DType dtype;
    Shape shape;
  } cases[] = {{"f2", DType::F16, {3, 2}},
               {"i4", DType::I32, {10}},
               {"i8", DType::I64, {2, 2}},
               {"b1", DType::Bool, {2, 1, 3}},
               {"empty", DType::I64, {0, 3}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.file);
    std::string error;
    std::optional<HostBuffer> b =
        readNpy(dir.path(c.file + std::string(".npy")), error);
    ASSERT_TRUE(b) << error;
    expectReadBack(makePattern(c.dtype, c.shape), *b);
  }

  std::string error;
  std::optional<HostBuffer> f8 = readNpy(dir.path("f8.npy"), error);
  ASSERT_TRUE(f8) << error;
  ASSERT_EQ(f8->dtype, DType::F32);
  ASSERT_EQ(f8->shape, Shape{5});
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(reinterpret_cast<const float *>(f8->bytes.data())[i],
              static_cast<float>(i / 3.0));

  std::optional<HostBuffer> scalar = readNpy(dir.path("scalar.npy"), error);
  ASSERT_TRUE(scalar) << error;
  EXPECT_EQ(scalar->dtype, DType::F32);
  EXPECT_TRUE(scalar->shape.empty());
  ASSERT_EQ(scalar->bytes.size(), 4u);
  EXPECT_EQ(*reinterpret_cast<const float *>(scalar->bytes.data()), 2.5f);

  struct Bad {
    const char *file;
    const char *message;
  } bad[] = {{"fortran.npy", "Fortran-order"},
             {"bigendian.npy", "big-endian element type '>f4'"},
             {"object.npy", "object arrays"},
             {"structured.npy", "structured arrays"},
             {"uint8.npy", "element type '|u1' is not supported"}};
  for (const Bad &b : bad) {
    std::string path = dir.path(b.file);
    EXPECT_FALSE(readNpy(path, error)) << b.file;
    EXPECT_NE(error.find(path + ": "), std::string::npos) << error;
    EXPECT_NE(error.find(b.message), std::string::npos) << error;
  }
}

// Proves that NumPy loads the files writeNpy writes with the same values,
// dtype and shape for every dtype (BF16 as float32), including 0-d and empty
// arrays, without warnings, and that the files are byte for byte what
// np.save writes for the same array.
TEST(NpyTest, NumpyReadsWrittenFiles) {
  LOOM_REQUIRE_NUMPY();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  for (DType dtype : kAllDTypes) {
    std::string error;
    HostBuffer t = makePattern(dtype, {2, 3, 4});
    ASSERT_TRUE(writeNpy(dir.path(std::string(dtypeName(dtype)) + ".npy"),
                         t.view(), error))
        << error;
  }
  HostBuffer scalar = makePattern(DType::F32, {});
  HostBuffer empty = makePattern(DType::I32, {3, 0});
  std::string error;
  ASSERT_TRUE(writeNpy(dir.path("scalar.npy"), scalar.view(), error)) << error;
  ASSERT_TRUE(writeNpy(dir.path("empty.npy"), empty.view(), error)) << error;

  EXPECT_EQ(runPython(dir, R"PY(
import io
import sys
import numpy as np
i = np.arange(24).reshape(2, 3, 4)
expected = {
    'f32': (i * 0.25 - 3).astype(np.float32),
    'f16': (i * 0.25 - 3).astype(np.float16),
    'bf16': (i * 0.25 - 3).astype(np.float32),
    'i32': (i * 7 - 100).astype(np.int32),
    'i64': (i * 3000000000 - 5).astype(np.int64),
    'bool': i % 3 == 0,
    'scalar': np.array(-3, dtype=np.float32),
    'empty': np.zeros((3, 0), dtype=np.int32),
}
ok = True
for name, want in expected.items():
    got = np.load(name + '.npy', allow_pickle=False)
    if got.dtype != want.dtype or got.shape != want.shape or \
            not np.array_equal(got, want) or not got.flags.c_contiguous:
        print('mismatch in', name, got.dtype, got.shape, got, file=sys.stderr)
        ok = False
    saved = io.BytesIO()
    np.save(saved, want)
    with open(name + '.npy', 'rb') as f:
        if f.read() != saved.getvalue():
            print('bytes differ from np.save in', name, file=sys.stderr)
            ok = False
sys.exit(0 if ok else 1)
)PY"),
            0);
}

// Proves that each malformed or unsupported .npy input gives an error that
// names the source and the problem, both from memory and from a file.
TEST(NpyTest, MalformedInputsGiveClearErrors) {
  std::string f32x2x3(24, '\0');
  struct Case {
    std::string bytes;
    const char *message;
  } cases[] = {
      {"", "not a .npy file"},
      {"PK\x03\x04 a zip file", "not a .npy file"},
      {"\x93NUMPY", "ends inside the version"},
      {"\x93NUMPY\x04", "ends inside the version"},
      {std::string("\x93NUMPY\x04\x00\x10\x00", 10),
       "unsupported .npy version 4.0"},
      {std::string("\x93NUMPY\x01\x01\x10\x00", 10),
       "unsupported .npy version 1.1"},
      {std::string("\x93NUMPY\x01\x00\x10", 9),
       "ends inside the header length"},
      {std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11),
       "ends inside the header length"},
      {std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17),
       "ends inside the header"},
      {npyBytes(f32Header("(2, 3)"), f32x2x3.substr(0, 20)),
       "truncated: the header's shape (2, 3) of '<f4' needs 24 data bytes "
       "but the file has 20"},
      {npyBytes(f32Header("(2, 3)"), f32x2x3 + "xx"),
       "needs 24 data bytes but the file has 26"},
      {npyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                f32x2x3),
       "Fortran-order"},
      {npyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
                f32x2x3),
       "big-endian element type '>f4'"},
      {npyBytes("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
                f32x2x3),
       "object arrays"},
      {npyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, "
                "'shape': (2,), }",
                "12345678"),
       "structured arrays"},
      {npyBytes("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }",
                "1234"),
       "element type '<u2' is not supported"},
      {npyBytes("{'descr': '<f4', 'fortran_order': False}", ""),
       "lacks the key 'shape'"},
      {npyBytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                "'shape': (), }",
                "1234"),
       "'descr' appears twice"},
      {npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), "
                "'extra': 1}",
                "1234"),
       "unexpected key 'extra'"},
      {npyBytes(f32Header("(2, -3)"), ""), "negative dimension"},
      {npyBytes(f32Header("(9223372036854775807, 2)"), ""),
       "has too many elements"},
      {npyBytes(f32Header("(4611686018427387904,)"), ""),
       "has too many elements"},
      {npyBytes(f32Header("(99999999999999999999,)"), ""), "too large"},
      {npyBytes(f32Header("(2, 3"), ""), "expected a dimension in 'shape'"},
      {npyBytes(f32Header("(2 3)"), ""), "expected ')'"},
      {npyBytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (), }",
                "1234"),
       "must be True or False"},
      {npyBytes("{'descr' '<f4', 'fortran_order': False, 'shape': (), }",
                "1234"),
       "expected ':'"},
      {npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), } x",
                "1234"),
       "unexpected text after the header dict"},
      {npyBytes("{'descr': 'a\\'b', 'fortran_order': False, 'shape': (), }",
                "1234"),
       "escape sequences"},
      {npyBytes("", ""), "expected '{'"},
  };
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  for (const Case &c : cases) {
    SCOPED_TRACE(c.message);
    std::string error;
    EXPECT_FALSE(parseNpy(c.bytes, error, "input.npy"));
    EXPECT_EQ(error.rfind("input.npy: ", 0), 0u) << error;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;

    std::string path = dir.path("bad.npy");
    writeBytes(path, c.bytes);
    error.clear();
    EXPECT_FALSE(readNpy(path, error));
    EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << error;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
}

// Proves that unreadable paths and unwritable tensors or paths give errors
// naming the file, not crashes.
TEST(NpyTest, FileSystemAndViewErrors) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string error;
  std::string missing = dir.path("missing.npy");
  EXPECT_FALSE(readNpy(missing, error));
  EXPECT_EQ(error, missing + ": cannot open: No such file or directory");
  EXPECT_FALSE(readNpy(dir.str(), error));
  EXPECT_EQ(error, dir.str() + ": cannot open: it is a directory");

  HostBuffer t = makePattern(DType::F32, {2});
  std::string noDir = dir.path("no/such/dir.npy");
  EXPECT_FALSE(writeNpy(noDir, t.view(), error));
  EXPECT_EQ(error.rfind(noDir + ": cannot open for writing", 0), 0u) << error;

  TensorView negative{DType::F32, {2, -1}, t.bytes.data()};
  EXPECT_FALSE(writeNpy(dir.path("x.npy"), negative, error));
  EXPECT_NE(error.find("negative dimension"), std::string::npos) << error;
  EXPECT_FALSE(serializeNpy(negative, error));

  TensorView noData{DType::F32, {2}, nullptr};
  EXPECT_FALSE(writeNpy(dir.path("x.npy"), noData, error));
  EXPECT_NE(error.find("has no data"), std::string::npos) << error;

  TensorView huge{DType::F32, {INT64_MAX, 4}, t.bytes.data()};
  EXPECT_FALSE(serializeNpy(huge, error));
  EXPECT_NE(error.find("too many elements"), std::string::npos) << error;

  TensorView emptyNoData{DType::I64, {0, 5}, nullptr};
  std::optional<std::string> bytes = serializeNpy(emptyNoData, error);
  ASSERT_TRUE(bytes) << error;
  std::optional<HostBuffer> back = parseNpy(*bytes, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->shape, (Shape{0, 5}));
}

// Proves that no truncation and no random corruption of a valid file makes
// the parser crash (ASan/UBSan check the memory accesses): every truncated
// prefix is an error, and every corrupted input either is an error naming
// the source or parses to a self-consistent tensor.
TEST(NpyTest, FuzzTruncatedAndCorruptedHeaders) {
  std::string error;
  std::vector<std::string> seeds;
  for (DType dtype : kAllDTypes) {
    HostBuffer t = makePattern(dtype, {2, 3});
    std::optional<std::string> bytes = serializeNpy(t.view(), error);
    ASSERT_TRUE(bytes) << error;
    seeds.push_back(*bytes);
  }
  seeds.push_back(npyBytes(f32Header("(3,)"), std::string(12, '\1'), 3));
  seeds.push_back(npyBytes("{'descr':'<f8','fortran_order':False,'shape':()}",
                           std::string(8, '\2'), 2));

  for (const std::string &seed : seeds) {
    for (size_t length = 0; length < seed.size(); ++length) {
      EXPECT_FALSE(parseNpy(seed.substr(0, length), error, "cut.npy"))
          << "prefix of length " << length;
      EXPECT_EQ(error.rfind("cut.npy: ", 0), 0u) << error;
    }
  }

  const char interesting[] = "{}()[],:' \"\n0123456789-LTrueFalse<>|=f4i8b1O";
  std::mt19937 rng(20240607);
  int accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 30000; ++iteration) {
    std::string bytes = seeds[rng() % seeds.size()];
    // Mostly corrupt the preamble and header (the first 64 bytes), where the
    // parser's decisions are made.
    size_t span = rng() % 4 ? std::min<size_t>(64, bytes.size()) : bytes.size();
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % span;
      switch (rng() % 4) {
      case 0:
        bytes[at] = static_cast<char>(bytes[at] ^ (1u << (rng() % 8)));
        break;
      case 1:
        bytes[at] = interesting[rng() % (sizeof(interesting) - 1)];
        break;
      case 2:
        bytes.erase(at, 1);
        break;
      default:
        bytes.insert(at, 1, interesting[rng() % (sizeof(interesting) - 1)]);
        break;
      }
      if (bytes.empty())
        break;
      span = std::min(span, bytes.size());
    }
    error.clear();
    std::optional<HostBuffer> b = parseNpy(bytes, error, "fuzz.npy");
    if (b) {
      ++accepted;
      EXPECT_EQ(b->bytes.size(), static_cast<size_t>(numElements(b->shape)) *
                                     dtypeSize(b->dtype));
    } else {
      ++rejected;
      EXPECT_EQ(error.rfind("fuzz.npy: ", 0), 0u) << error;
      EXPECT_GT(error.size(), std::string("fuzz.npy: ").size());
    }
  }
  // Both outcomes occur, so the loop exercises more than one path.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}
