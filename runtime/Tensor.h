//===- Tensor.h - Element types, shapes and tensor views --------*- C++ -*-===//
//
// The runtime's view of a tensor: an element type, a static shape and a
// pointer to dense row-major data it does not own. No MLIR or LLVM here.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_TENSOR_H
#define LOOM_RUNTIME_TENSOR_H

#include "common/ops/OpTypes.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::rt {

using ops::DType;
using ops::dtypeName;
using ops::dtypeSize;
using ops::formatShape;
using ops::isFloat;
using ops::numElements;
using ops::Shape;

/// A non-owning view of dense row-major data.
struct TensorView {
  DType dtype = DType::F32;
  Shape shape;
  void *data = nullptr;

  int64_t numElements() const { return rt::numElements(shape); }
  size_t bytes() const { return numElements() * dtypeSize(dtype); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// An owning host tensor (inputs, outputs, parameters read from files).
struct HostBuffer {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<unsigned char> bytes;

  TensorView view() { return {dtype, shape, bytes.data()}; }
};

/// Calls f(T{}) with an unsigned integer type of `dtype`'s element size,
/// for kernels that only move elements (any backend).
template <typename F> void dispatchBySize(DType dtype, F &&f) {
  switch (dtypeSize(dtype)) {
  case 1:
    f(uint8_t{});
    break;
  case 2:
    f(uint16_t{});
    break;
  case 4:
    f(uint32_t{});
    break;
  default:
    f(uint64_t{});
    break;
  }
}

/// IEEE half and bfloat16 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

/// The storage of `value` as one element of `dtype` (floats rounded, integers
/// truncated toward zero, bool non-zero), in the low bytes of the result:
/// what a kernel that fills by element size writes.
uint64_t elementBits(DType dtype, double value);

} // namespace loom::rt

#endif // LOOM_RUNTIME_TENSOR_H
