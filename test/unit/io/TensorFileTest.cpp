//===- TensorFileTest.cpp - Tests for the ONNX TensorProto reader ---------===//

#include "runtime/io/TensorFile.h"
#include "runtime/io/Npy.h"

#include "IoTestUtil.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

using namespace loom::rt;
using loom::rt::testing::TempDir;
using loom::rt::testing::writeBytes;
using onnx::TensorProto;

namespace {

const std::string kNodeDir = LOOM_ONNX_NODE_TEST_DIR;

std::string dataFile(const std::string &test, const std::string &file) {
  return kNodeDir + "/" + test + "/test_data_set_0/" + file;
}

/// Reads an ONNX test data file, failing the test (not crashing) when it
/// cannot be read.
HostBuffer readOrFail(const std::string &test, const std::string &file,
                      std::string *name = nullptr) {
  std::string error;
  std::optional<HostBuffer> b =
      readOnnxTensorFile(dataFile(test, file), error, name);
  EXPECT_TRUE(b) << error;
  return b ? *b : HostBuffer{};
}

template <typename T> std::vector<T> values(const HostBuffer &b) {
  std::vector<T> out(b.bytes.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), b.bytes.data(), out.size() * sizeof(T));
  return out;
}

/// Parses `t` serialized, failing the test on an error.
HostBuffer roundTrip(const TensorProto &t, std::string *name = nullptr) {
  std::string error;
  std::optional<HostBuffer> b =
      parseOnnxTensor(t.SerializeAsString(), error, name);
  EXPECT_TRUE(b) << error;
  return b ? *b : HostBuffer{};
}

/// The error parsing `t` serialized gives, or "" if it parses.
std::string errorFor(const TensorProto &t) {
  std::string error;
  if (parseOnnxTensor(t.SerializeAsString(), error, nullptr, "t.pb"))
    return "";
  return error;
}

bool sameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

} // namespace

// Proves that FLOAT raw_data from the ONNX backend test data reads with its
// name, shape and values: test_add's x + y equals its expected sum exactly.
TEST(TensorFileTest, ReadsOnnxAddTestData) {
  std::string name;
  HostBuffer x = readOrFail("test_add", "input_0.pb", &name);
  EXPECT_EQ(name, "x");
  HostBuffer y = readOrFail("test_add", "input_1.pb");
  HostBuffer sum = readOrFail("test_add", "output_0.pb", &name);
  EXPECT_EQ(name, "sum");
  for (const HostBuffer *b : {&x, &y, &sum}) {
    EXPECT_EQ(b->dtype, DType::F32);
    EXPECT_EQ(b->shape, (Shape{3, 4, 5}));
  }
  std::vector<float> xs = values<float>(x), ys = values<float>(y),
                     sums = values<float>(sum);
  ASSERT_EQ(xs.size(), 60u);
  ASSERT_EQ(ys.size(), 60u);
  ASSERT_EQ(sums.size(), 60u);
  for (size_t i = 0; i < 60; ++i)
    EXPECT_EQ(xs[i] + ys[i], sums[i]) << "element " << i;
}

// Proves that FLOAT16, DOUBLE, BOOL and INT64 raw_data from the ONNX test
// data read correctly, checked against the files' own expected outputs (Cast,
// And and ArgMax results). This ONNX release stores its BFLOAT16 Cast data
// as UINT16, so BFLOAT16 raw_data is covered by ReadsRawBfloat16 instead.
TEST(TensorFileTest, ReadsOtherOnnxDataTypes) {
  HostBuffer half = readOrFail("test_cast_FLOAT16_to_FLOAT", "input_0.pb");
  HostBuffer halfOut = readOrFail("test_cast_FLOAT16_to_FLOAT", "output_0.pb");
  ASSERT_EQ(half.dtype, DType::F16);
  EXPECT_EQ(half.shape, (Shape{3, 4}));
  std::vector<uint16_t> hs = values<uint16_t>(half);
  std::vector<float> hf = values<float>(halfOut);
  ASSERT_EQ(hs.size(), hf.size());
  for (size_t i = 0; i < hs.size(); ++i)
    EXPECT_TRUE(sameFloat(halfToFloat(hs[i]), hf[i])) << "element " << i;

  // DOUBLE is converted to F32 as Cast(to=FLOAT) does.
  HostBuffer dbl = readOrFail("test_cast_DOUBLE_to_FLOAT", "input_0.pb");
  HostBuffer dblOut = readOrFail("test_cast_DOUBLE_to_FLOAT", "output_0.pb");
  ASSERT_EQ(dbl.dtype, DType::F32);
  EXPECT_EQ(dbl.shape, (Shape{3, 4}));
  std::vector<float> ds = values<float>(dbl), df = values<float>(dblOut);
  ASSERT_EQ(ds.size(), df.size());
  for (size_t i = 0; i < ds.size(); ++i)
    EXPECT_TRUE(sameFloat(ds[i], df[i])) << "element " << i;

  HostBuffer a = readOrFail("test_and2d", "input_0.pb");
  HostBuffer b = readOrFail("test_and2d", "input_1.pb");
  HostBuffer both = readOrFail("test_and2d", "output_0.pb");
  ASSERT_EQ(a.dtype, DType::Bool);
  EXPECT_EQ(a.shape, (Shape{3, 4}));
  ASSERT_EQ(a.bytes.size(), 12u);
  ASSERT_EQ(both.bytes.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_LE(a.bytes[i], 1);
    EXPECT_EQ(both.bytes[i], a.bytes[i] && b.bytes[i]) << "element " << i;
  }

  HostBuffer argmax =
      readOrFail("test_argmax_default_axis_example", "output_0.pb");
  EXPECT_EQ(argmax.dtype, DType::I64);
  EXPECT_EQ(argmax.shape, (Shape{1, 2}));
  EXPECT_EQ(values<int64_t>(argmax), (std::vector<int64_t>{1, 1}));
}

// Proves that BFLOAT16 and INT32 raw_data read as their bit patterns, with
// the shape and name from the proto.
TEST(TensorFileTest, ReadsRawBfloat16AndInt32) {
  TensorProto bf;
  bf.set_name("bf");
  bf.set_data_type(TensorProto::BFLOAT16);
  bf.add_dims(1);
  bf.add_dims(3);
  uint16_t bits[] = {floatToBf16(1.5f), floatToBf16(-3.0f),
                     floatToBf16(65536.0f)};
  bf.set_raw_data(std::string(reinterpret_cast<char *>(bits), sizeof(bits)));
  std::string name;
  HostBuffer b = roundTrip(bf, &name);
  EXPECT_EQ(name, "bf");
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(b.shape, (Shape{1, 3}));
  EXPECT_EQ(values<uint16_t>(b),
            (std::vector<uint16_t>{0x3fc0, 0xc040, 0x4780}));

  TensorProto i32;
  i32.set_data_type(TensorProto::INT32);
  i32.add_dims(2);
  int32_t ints[] = {-1, 123456789};
  i32.set_raw_data(std::string(reinterpret_cast<char *>(ints), sizeof(ints)));
  HostBuffer ib = roundTrip(i32);
  EXPECT_EQ(ib.dtype, DType::I32);
  EXPECT_EQ(values<int32_t>(ib), (std::vector<int32_t>{-1, 123456789}));
}

// Proves that ONNX data types the runtime does not hold give an error naming
// the file, the tensor and the type.
TEST(TensorFileTest, UnsupportedOnnxTypesAreNamed) {
  struct Case {
    const char *test, *file, *type;
  } cases[] = {{"test_cast_FLOAT_to_STRING", "output_0.pb", "STRING"},
               {"test_cast_BFLOAT16_to_FLOAT", "input_0.pb", "UINT16"}};
  for (const Case &c : cases) {
    std::string path = dataFile(c.test, c.file), error;
    EXPECT_FALSE(readOnnxTensorFile(path, error));
    EXPECT_EQ(error.rfind(path + ": tensor '", 0), 0u) << error;
    EXPECT_NE(
        error.find(std::string("data type ") + c.type + " is not supported"),
        std::string::npos)
        << error;
  }
}

// Proves that values held in the typed fields (float_data; int32_data for
// FLOAT16, BFLOAT16, BOOL and INT32; int64_data; double_data) and a 0-d
// tensor read as the corresponding runtime dtype and bytes.
TEST(TensorFileTest, ReadsTypedFields) {
  TensorProto f;
  f.set_name("weights");
  f.set_data_type(TensorProto::FLOAT);
  f.add_dims(2);
  f.add_dims(2);
  for (float v : {1.5f, -2.0f, 0.25f, 1e30f})
    f.add_float_data(v);
  std::string name;
  HostBuffer fb = roundTrip(f, &name);
  EXPECT_EQ(name, "weights");
  EXPECT_EQ(fb.dtype, DType::F32);
  EXPECT_EQ(fb.shape, (Shape{2, 2}));
  EXPECT_EQ(values<float>(fb), (std::vector<float>{1.5f, -2.0f, 0.25f, 1e30f}));

  TensorProto h;
  h.set_data_type(TensorProto::FLOAT16);
  h.add_dims(3);
  for (float v : {1.5f, -65504.0f, 0.0f})
    h.add_int32_data(floatToHalf(v));
  HostBuffer hb = roundTrip(h);
  EXPECT_EQ(hb.dtype, DType::F16);
  EXPECT_EQ(values<uint16_t>(hb),
            (std::vector<uint16_t>{0x3e00, 0xfbff, 0x0000}));

  TensorProto bf;
  bf.set_data_type(TensorProto::BFLOAT16);
  bf.add_dims(2);
  bf.add_int32_data(floatToBf16(1.5f));
  bf.add_int32_data(floatToBf16(-3.0f));
  HostBuffer bfb = roundTrip(bf);
  EXPECT_EQ(bfb.dtype, DType::BF16);
  EXPECT_EQ(values<uint16_t>(bfb), (std::vector<uint16_t>{0x3fc0, 0xc040}));

  TensorProto i32;
  i32.set_data_type(TensorProto::INT32);
  i32.add_dims(1);
  i32.add_dims(3);
  for (int32_t v : {-7, 0, 2147483647})
    i32.add_int32_data(v);
  HostBuffer i32b = roundTrip(i32);
  EXPECT_EQ(i32b.dtype, DType::I32);
  EXPECT_EQ(i32b.shape, (Shape{1, 3}));
  EXPECT_EQ(values<int32_t>(i32b), (std::vector<int32_t>{-7, 0, 2147483647}));

  TensorProto i64;
  i64.set_data_type(TensorProto::INT64);
  i64.add_dims(2);
  i64.add_int64_data(-5000000000LL);
  i64.add_int64_data(INT64_MAX);
  HostBuffer i64b = roundTrip(i64);
  EXPECT_EQ(i64b.dtype, DType::I64);
  EXPECT_EQ(values<int64_t>(i64b),
            (std::vector<int64_t>{-5000000000LL, INT64_MAX}));

  TensorProto b;
  b.set_data_type(TensorProto::BOOL);
  b.add_dims(3);
  for (int32_t v : {0, 1, 2})
    b.add_int32_data(v);
  HostBuffer bb = roundTrip(b);
  EXPECT_EQ(bb.dtype, DType::Bool);
  EXPECT_EQ(bb.bytes, (std::vector<unsigned char>{0, 1, 1}));

  TensorProto d; // a 0-d DOUBLE
  d.set_data_type(TensorProto::DOUBLE);
  d.add_double_data(1.0 / 3);
  HostBuffer db = roundTrip(d);
  EXPECT_EQ(db.dtype, DType::F32);
  EXPECT_TRUE(db.shape.empty());
  EXPECT_EQ(values<float>(db),
            (std::vector<float>{static_cast<float>(1.0 / 3)}));

  TensorProto draw; // DOUBLE in raw_data
  draw.set_data_type(TensorProto::DOUBLE);
  draw.add_dims(2);
  double raw[] = {-0.5, 1e300};
  draw.set_raw_data(std::string(reinterpret_cast<char *>(raw), sizeof(raw)));
  std::vector<float> drawValues = values<float>(roundTrip(draw));
  ASSERT_EQ(drawValues.size(), 2u);
  EXPECT_EQ(drawValues[0], -0.5f);
  EXPECT_TRUE(std::isinf(drawValues[1]));

  TensorProto empty; // zero elements, no data at all
  empty.set_data_type(TensorProto::INT64);
  empty.add_dims(0);
  empty.add_dims(4);
  HostBuffer eb = roundTrip(empty);
  EXPECT_EQ(eb.shape, (Shape{0, 4}));
  EXPECT_TRUE(eb.bytes.empty());
}

// Proves that malformed TensorProtos give an error naming the source and the
// problem: wrong value counts, conflicting or wrong fields, external data,
// bad dims, no type, unsupported types and bytes that are not a protobuf.
TEST(TensorFileTest, MalformedTensorsGiveClearErrors) {
  auto floats = [](std::vector<int64_t> dims, int count) {
    TensorProto t;
    t.set_name("w");
    t.set_data_type(TensorProto::FLOAT);
    for (int64_t d : dims)
      t.add_dims(d);
    for (int i = 0; i < count; ++i)
      t.add_float_data(static_cast<float>(i));
    return t;
  };
  TensorProto tooFew = floats({2, 3}, 5);
  EXPECT_EQ(errorFor(tooFew),
            "t.pb: tensor 'w': float_data has 5 values but dims [2, 3] need 6");

  TensorProto rawShort = floats({2, 3}, 0);
  rawShort.set_raw_data(std::string(20, '\0'));
  EXPECT_EQ(errorFor(rawShort), "t.pb: tensor 'w': raw_data has 20 bytes but "
                                "dims [2, 3] of FLOAT need 24");

  TensorProto both = floats({1}, 1);
  both.set_raw_data(std::string(4, '\0'));
  EXPECT_EQ(errorFor(both),
            "t.pb: tensor 'w': the tensor has both raw_data and float_data");

  TensorProto wrongField = floats({2}, 0);
  wrongField.add_int32_data(1);
  wrongField.add_int32_data(2);
  EXPECT_EQ(errorFor(wrongField),
            "t.pb: tensor 'w': a FLOAT tensor must hold its values in "
            "raw_data or float_data, not int32_data");

  TensorProto external = floats({1}, 1);
  external.set_data_location(TensorProto::EXTERNAL);
  EXPECT_NE(errorFor(external).find("external data is not supported"),
            std::string::npos);

  TensorProto negative = floats({2, -1}, 0);
  EXPECT_NE(errorFor(negative).find("negative dimension -1"),
            std::string::npos);

  TensorProto overflow = floats({INT64_MAX, INT64_MAX}, 0);
  EXPECT_NE(errorFor(overflow).find("too many elements"), std::string::npos);

  TensorProto noType;
  noType.add_dims(1);
  EXPECT_NE(errorFor(noType).find("has no data type"), std::string::npos);

  TensorProto uint8 = floats({1}, 0);
  uint8.set_data_type(TensorProto::UINT8);
  uint8.set_raw_data("x");
  EXPECT_NE(errorFor(uint8).find("data type UINT8 is not supported"),
            std::string::npos);

  TensorProto badHalf;
  badHalf.set_data_type(TensorProto::FLOAT16);
  badHalf.add_int32_data(70000);
  EXPECT_NE(errorFor(badHalf).find("int32_data[0] = 70000 is not a 16-bit"),
            std::string::npos);

  std::string error;
  EXPECT_FALSE(parseOnnxTensor("\xff\xff\xff", error, nullptr, "junk.pb"));
  EXPECT_EQ(error, "junk.pb: not a serialized onnx.TensorProto (protobuf "
                   "parsing failed)");
}

// Proves that readTensorFile picks the reader by extension (.npy and .pb),
// sets the name for both, and rejects other extensions and missing files
// with errors naming the path.
TEST(TensorFileTest, ReadTensorFileDispatchesOnExtension) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string error, name = "stale";
  std::optional<HostBuffer> pb =
      readTensorFile(dataFile("test_add", "input_1.pb"), error, &name);
  ASSERT_TRUE(pb) << error;
  EXPECT_EQ(name, "y");
  EXPECT_EQ(pb->shape, (Shape{3, 4, 5}));

  std::string npy = dir.path("y.npy");
  ASSERT_TRUE(writeNpy(npy, pb->view(), error)) << error;
  std::optional<HostBuffer> back = readTensorFile(npy, error, &name);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(name, "");
  EXPECT_EQ(back->bytes, pb->bytes);

  TensorProto t;
  t.set_name("ones");
  t.set_data_type(TensorProto::INT32);
  t.add_dims(2);
  t.add_int32_data(1);
  t.add_int32_data(1);
  std::string file = dir.path("ones.pb");
  writeBytes(file, t.SerializeAsString());
  std::optional<HostBuffer> ones = readTensorFile(file, error, &name);
  ASSERT_TRUE(ones) << error;
  EXPECT_EQ(name, "ones");
  EXPECT_EQ(values<int32_t>(*ones), (std::vector<int32_t>{1, 1}));

  std::string txt = dir.path("x.txt");
  EXPECT_FALSE(readTensorFile(txt, error));
  EXPECT_EQ(error, txt + ": unknown tensor file extension (expected .npy or "
                         ".pb)");
  std::string missing = dir.path("missing.pb");
  EXPECT_FALSE(readTensorFile(missing, error));
  EXPECT_EQ(error, missing + ": cannot open: No such file or directory");
}

// Proves that truncated and bit-flipped TensorProto bytes never crash the
// reader: each either is an error naming the source or a self-consistent
// tensor.
TEST(TensorFileTest, FuzzCorruptedTensorProtos) {
  std::string seed;
  {
    std::ifstream in(dataFile("test_add", "input_0.pb"), std::ios::binary);
    seed.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_FALSE(seed.empty());
  std::mt19937 rng(7);
  int accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 5000; ++iteration) {
    std::string bytes = seed;
    if (iteration % 5 == 0) {
      bytes.resize(rng() % bytes.size());
    } else {
      for (int e = 0; e < 3; ++e) {
        // Mostly corrupt the first 32 bytes: the tag, dims, type and name.
        size_t at = rng() % (rng() % 2 ? 32 : bytes.size());
        bytes[at] = static_cast<char>(bytes[at] ^ (1u << (rng() % 8)));
      }
    }
    std::string error;
    std::optional<HostBuffer> b =
        parseOnnxTensor(bytes, error, nullptr, "fuzz.pb");
    if (b) {
      ++accepted;
      EXPECT_EQ(b->bytes.size(), static_cast<size_t>(numElements(b->shape)) *
                                     dtypeSize(b->dtype));
    } else {
      ++rejected;
      EXPECT_EQ(error.rfind("fuzz.pb: ", 0), 0u) << error;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}
