//===- KernelTestUtil.cpp - Tensors, runners and checks for kernel tests --===//

#include "test/unit/kernels/KernelTestUtil.h"
#include "test/unit/kernels/TrainTestUtil.h"

#include "runtime/cpu/CpuContext.h"
#include "test/unit/support/Oracle.h"

#include <algorithm>
#include <cstring>

namespace loom::rt::test {

double defaultTolerance(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 1e-5;
  case DType::F16:
    return 1e-3;
  case DType::BF16:
    return 1e-2;
  default:
    return 0;
  }
}

HostBuffer makeTensor(DType dtype, Shape shape,
                      const std::vector<double> &vals) {
  HostBuffer t{dtype, std::move(shape), {}};
  int64_t n = numElements(t.shape);
  EXPECT_EQ(static_cast<int64_t>(vals.size()), n) << "test tensor size";
  t.bytes.resize(n * dtypeSize(dtype));
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(vals.size()); ++i) {
    double v = vals[i];
    unsigned char *p = t.bytes.data() + i * dtypeSize(dtype);
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
      uint16_t b = floatToBf16(static_cast<float>(v));
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::I32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::I64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DType::Bool:
      *p = v != 0;
      break;
    }
  }
  return t;
}

HostBuffer randomTensor(DType dtype, Shape shape, std::mt19937 &rng, double lo,
                        double hi) {
  int64_t n = numElements(shape);
  std::vector<double> vals(n);
  if (isFloat(dtype)) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (double &v : vals)
      v = dist(rng);
  } else if (dtype == DType::Bool) {
    std::uniform_int_distribution<int> dist(0, 1);
    for (double &v : vals)
      v = dist(rng);
  } else {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo),
                                                static_cast<int64_t>(hi));
    for (double &v : vals)
      v = static_cast<double>(dist(rng));
  }
  return makeTensor(dtype, std::move(shape), vals);
}

std::vector<double> values(const HostBuffer &t) {
  int64_t n = numElements(t.shape);
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char *p = t.bytes.data() + i * dtypeSize(t.dtype);
    switch (t.dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      out[i] = f;
      break;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      out[i] = t.dtype == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
      break;
    }
    case DType::I32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      out[i] = x;
      break;
    }
    case DType::I64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      out[i] = static_cast<double>(x);
      break;
    }
    case DType::Bool:
      out[i] = *p;
      break;
    }
  }
  return out;
}

std::vector<int64_t> unravel(int64_t index, const Shape &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = index % shape[d];
    index /= shape[d];
  }
  return idx;
}

int64_t broadcastOffset(const std::vector<int64_t> &outIdx, const Shape &in) {
  size_t lead = outIdx.size() - in.size();
  int64_t offset = 0;
  for (size_t d = 0; d < in.size(); ++d)
    offset = offset * in[d] + (in[d] == 1 ? 0 : outIdx[lead + d]);
  return offset;
}

Shape broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

void expectClose(const HostBuffer &got, const std::vector<double> &ref,
                 double tol, double floor) {
  oracle::Comparison r =
      oracle::compareElements(values(got), got.shape, ref, got.shape,
                              oracle::Tolerance::relative(tol, floor));
  EXPECT_TRUE(r.ok()) << r.message() << " (" << dtypeName(got.dtype) << ")";
}

void expectEqual(const HostBuffer &got, const std::vector<double> &ref) {
  oracle::Comparison r = oracle::compareElements(
      values(got), got.shape, ref, got.shape, oracle::Tolerance::exact());
  EXPECT_TRUE(r.ok()) << r.message() << " (" << dtypeName(got.dtype) << ")";
}

void KernelTest::SetUp() {
  backend = createCpuBackend();
  cpu::getCpuContext(*backend)->useOneDnn = GetParam();
}

OpResult KernelTest::run(const std::string &op, const Attrs &attrs,
                         std::vector<HostBuffer> inputs, DType outType,
                         Shape outShape) {
  OpResult result;
  int64_t count = numElements(outShape);
  result.out =
      makeTensor(outType, std::move(outShape), std::vector<double>(count, 0.0));
  const KernelFn *kernel = backend->findKernel(op);
  if (!kernel) {
    result.error = "no kernel for " + op;
    return result;
  }
  KernelArgs args{op, attrs, {}, {result.out.view()}};
  for (HostBuffer &in : inputs)
    args.inputs.push_back(in.view());
  result.error = runWithRuleScratch(*kernel, args);
  return result;
}

HostBuffer KernelTest::runOk(const std::string &op, const Attrs &attrs,
                             std::vector<HostBuffer> inputs, DType outType,
                             Shape outShape) {
  OpResult result =
      run(op, attrs, std::move(inputs), outType, std::move(outShape));
  EXPECT_EQ(result.error, "") << "op " << op;
  return std::move(result.out);
}

std::string pathName(const ::testing::TestParamInfo<bool> &info) {
  return info.param ? "OneDnn" : "Plain";
}

std::vector<int64_t> padIndices(const std::string &mode, int64_t size,
                                int64_t low, int64_t high) {
  std::vector<int64_t> idx;
  for (int64_t k = low; k >= 1; --k)
    idx.push_back(mode == "constant" ? -1 : mode == "edge" ? 0 : k);
  for (int64_t j = 0; j < size; ++j)
    idx.push_back(j);
  for (int64_t k = 1; k <= high; ++k)
    idx.push_back(mode == "constant" ? -1
                  : mode == "edge"   ? size - 1
                                     : size - 1 - k);
  return idx;
}

} // namespace loom::rt::test
