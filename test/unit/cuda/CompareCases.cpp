//===- CompareCases.cpp - Cases of comparisons, logic, max, min, trilu ----===//
//
// The kernels of runtime/cuda/Compare.cu. Operands are drawn from a few
// levels so that ties are frequent: equal and the ordering comparisons are
// then tested on both sides of every boundary, max and min on the ties
// their gradients split.
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

namespace loom::rt::conformance {
namespace {

struct BinaryShapes {
  const char *name;
  Shape lhs, rhs, out;
};

const std::vector<BinaryShapes> &binaryShapes() {
  static const std::vector<BinaryShapes> shapes = {
      {"same", {3, 4, 5}, {3, 4, 5}, {3, 4, 5}},
      {"bcast", {4, 1}, {3, 1, 5}, {3, 4, 5}},
      {"scalar", {2, 3, 4}, {}, {2, 3, 4}},
  };
  return shapes;
}

/// Few distinct values, so that equal operands are common.
HostBuffer tied(DType dtype, const Shape &shape, std::mt19937 &rng) {
  if (dtype == DType::Bool)
    return integers(dtype, shape, rng, 0, 1);
  return levels(dtype, shape, rng, -1.5, 0.5, 6);
}

void addBinary(std::vector<CaseSpec> &cases, const std::string &op,
               const std::vector<DType> &dtypes, bool boolResult) {
  for (DType dtype : dtypes)
    for (const BinaryShapes &s : binaryShapes()) {
      if (dtype != DType::F32 && std::string(s.name) != "bcast")
        continue;
      addCase(cases, op, s.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.inputs = {tied(dtype, s.lhs, rng), tied(dtype, s.rhs, rng)};
        c.outputs = {{boolResult ? DType::Bool : dtype, s.out}};
        c.tolerance = exact();
        return c;
      });
    }
}

} // namespace

void addCompareCases(std::vector<CaseSpec> &cases) {
  const std::vector<DType> numbers = {DType::F32, DType::F16, DType::BF16,
                                      DType::I32, DType::I64};
  std::vector<DType> equalTypes = numbers;
  equalTypes.push_back(DType::Bool);
  addBinary(cases, "equal", equalTypes, true);
  for (const char *op : {"less", "less_equal", "greater", "greater_equal"})
    addBinary(cases, op, numbers, true);
  for (const char *op : {"and", "or", "xor"})
    addBinary(cases, op, {DType::Bool}, true);
  for (const char *op : {"max", "min"})
    addBinary(cases, op, numbers, false);
  // NaN propagates from either side.
  for (const char *op : {"max", "min"})
    addCase(cases, op, "nan", DType::F32, [](std::mt19937 &rng) {
      Case c;
      c.inputs = {tied(DType::F32, {4, 6}, rng), tied(DType::F32, {4, 6}, rng)};
      setElement(c.inputs[0], 3, NAN);
      setElement(c.inputs[1], 7, NAN);
      c.outputs = {{DType::F32, {4, 6}}};
      c.tolerance = exact();
      return c;
    });
  addCase(cases, "not", "", DType::Bool, [](std::mt19937 &rng) {
    Case c;
    c.inputs = {integers(DType::Bool, {3, 7}, rng, 0, 1)};
    c.outputs = {{DType::Bool, {3, 7}}};
    c.tolerance = exact();
    return c;
  });
  struct Trilu {
    const char *name;
    Shape shape;
    bool upper;
    int64_t k;
  };
  const std::vector<Trilu> trilus = {
      {"upper", {2, 5, 7}, true, 0},   {"lower", {2, 5, 7}, false, 0},
      {"upper_k", {3, 6, 4}, true, 2}, {"lower_neg_k", {6, 4}, false, -2},
      {"tall_k", {7, 3}, true, -9},
  };
  for (DType dtype : {DType::F32, DType::F16, DType::I64, DType::Bool})
    for (const Trilu &t : trilus) {
      if (dtype != DType::F32 && std::string(t.name) != "upper_k")
        continue;
      addCase(cases, "trilu", t.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("upper", t.upper);
        c.attrs.set("k", t.k);
        c.inputs = {dtype == DType::Bool
                        ? integers(dtype, t.shape, rng, 0, 1)
                        : integers(dtype, t.shape, rng, -50, 50)};
        c.outputs = {{dtype, t.shape}};
        c.tolerance = exact();
        return c;
      });
    }
}

} // namespace loom::rt::conformance
