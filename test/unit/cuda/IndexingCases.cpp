//===- IndexingCases.cpp - Conformance cases of Indexing.cu ---------------===//
//
// gather_elements, scatter_elements, cumsum, top_k, reduce_prod and
// reduce_prod_grad against the CPU backend.
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/KernelConformance.h"

#include <algorithm>
#include <numeric>

namespace loom::rt::conformance {
namespace {

/// Indices of `shape` along `axis` into a dimension of `size`, negative
/// ones included; with `distinct`, no two indices of one line along the
/// axis are equal (so that a scatter without accumulation is determined).
HostBuffer elementIndices(DType dtype, const Shape &shape, int64_t axis,
                          int64_t size, bool distinct, std::mt19937 &rng) {
  HostBuffer idx = integers(dtype, shape, rng, -size, size - 1);
  if (!distinct)
    return idx;
  int64_t outer = 1, inner = 1, n = shape[axis];
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d < axis)
      outer *= shape[d];
    else if (d > axis)
      inner *= shape[d];
  std::vector<int64_t> perm(size);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t j = 0; j < n; ++j) {
        int64_t v = perm[j] - (rng() % 2 ? size : 0);
        setElement(idx, (o * n + j) * inner + i, static_cast<double>(v));
      }
    }
  return idx;
}

struct ElementGeometry {
  const char *name;
  Shape data;
  int64_t axis;
  DType indexType;
  Shape indices;
};

const std::vector<ElementGeometry> kElementGeometries = {
    {"axis1_i64", {3, 6, 4}, 1, DType::I64, {3, 4, 2}},
    {"axis0_i32", {5, 3}, 0, DType::I32, {4, 3}},
    {"last_axis_i64", {2, 3, 7}, 2, DType::I64, {2, 2, 5}},
};

void addElementCases(std::vector<CaseSpec> &cases) {
  for (const ElementGeometry &g : kElementGeometries) {
    for (DType dtype : {DType::F32, DType::F16, DType::I32})
      addCase(cases, "gather_elements", g.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axis", g.axis);
        c.inputs = {uniform(dtype, g.data, rng, -8, 8),
                    elementIndices(g.indexType, g.indices, g.axis,
                                   g.data[g.axis], false, rng)};
        c.outputs = {{dtype, g.indices}};
        c.tolerance = exact();
        return c;
      });
    // Without accumulation: distinct indices per line, so one update per
    // position and an exact result.
    for (DType dtype : {DType::F32, DType::BF16, DType::I64})
      addCase(cases, "scatter_elements", std::string("set_") + g.name, dtype,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs.set("axis", g.axis);
                c.inputs = {uniform(dtype, g.data, rng, -8, 8),
                            elementIndices(g.indexType, g.indices, g.axis,
                                           g.data[g.axis], true, rng),
                            uniform(dtype, g.indices, rng, -8, 8)};
                c.outputs = {{dtype, g.data}};
                c.tolerance = exact();
                return c;
              });
    // Accumulation over repeated indices: f32 sums in another order, i32
    // exactly.
    for (DType dtype : {DType::F32, DType::I32})
      addCase(cases, "scatter_elements", std::string("add_") + g.name, dtype,
              [=](std::mt19937 &rng) {
                Case c;
                c.attrs.set("axis", g.axis);
                c.attrs.set("accumulate", true);
                c.inputs = {uniform(dtype, g.data, rng, -8, 8),
                            elementIndices(g.indexType, g.indices, g.axis,
                                           g.data[g.axis], false, rng),
                            uniform(dtype, g.indices, rng, -8, 8)};
                c.outputs = {{dtype, g.data}};
                c.reduction = g.indices[g.axis] + 1;
                return c;
              });
  }
}

void addScanCases(std::vector<CaseSpec> &cases) {
  struct Scan {
    const char *name;
    Shape shape;
    int64_t axis;
    bool exclusive, reverse;
  };
  for (const Scan &s : std::vector<Scan>{
           {"axis1", {4, 37, 3}, 1, false, false},
           {"axis0_exclusive", {9, 5}, 0, true, false},
           {"last_reverse", {3, 2, 40}, 2, false, true},
           {"axis1_exclusive_reverse", {2, 17, 6}, 1, true, true}})
    for (DType dtype :
         {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
      addCase(cases, "cumsum", s.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axis", s.axis);
        c.attrs.set("exclusive", s.exclusive);
        c.attrs.set("reverse", s.reverse);
        c.inputs = {uniform(dtype, s.shape, rng, -4, 4)};
        c.outputs = {{dtype, s.shape}};
        c.reduction = s.shape[s.axis];
        return c;
      });

  // top_k on values with frequent ties: both backends order them by index.
  struct Top {
    const char *name;
    Shape shape;
    int64_t axis, k;
    bool smallest;
  };
  for (const Top &t :
       std::vector<Top>{{"largest_last", {5, 33}, 1, 4, false},
                        {"smallest_axis0", {12, 3, 2}, 0, 12, true},
                        {"middle_k1", {2, 9, 5}, 1, 1, false},
                        {"k0", {3, 4}, 1, 0, false}}) {
    Shape out = t.shape;
    out[t.axis] = t.k;
    for (DType dtype : {DType::F32, DType::F16, DType::I32, DType::I64})
      addCase(cases, "top_k", t.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axis", t.axis);
        c.attrs.set("k", t.k);
        c.attrs.set("smallest", t.smallest);
        c.inputs = {levels(dtype, t.shape, rng, -3, 1, 7)};
        c.outputs = {{dtype, out}, {DType::I64, out}};
        c.tolerance = exact();
        return c;
      });
  }
}

void addProductCases(std::vector<CaseSpec> &cases) {
  struct Prod {
    const char *name;
    Shape shape;
    std::vector<int64_t> axes;
    bool keep;
    Shape out;
  };
  for (const Prod &p :
       std::vector<Prod>{{"axis1", {4, 9, 3}, {1}, false, {4, 3}},
                         {"axes0_2_keep", {5, 3, 6}, {0, 2}, true, {1, 3, 1}},
                         {"all", {3, 4}, {0, 1}, false, {}}}) {
    int64_t count = 1;
    for (int64_t a : p.axes)
      count *= p.shape[a];
    for (DType dtype : {DType::F32, DType::F16, DType::I32})
      addCase(cases, "reduce_prod", p.name, dtype, [=](std::mt19937 &rng) {
        Case c;
        c.attrs.set("axes", p.axes);
        c.attrs.set("keep_dims", p.keep);
        c.inputs = {dtype == DType::I32
                        ? integers(dtype, p.shape, rng, -3, 3)
                        : awayFromZero(dtype, p.shape, rng, 0.8, 1.25)};
        c.outputs = {{dtype, p.out}};
        c.reduction = count;
        return c;
      });
    // Gradients with zeros: none, one or several per reduction.
    addCase(cases, "reduce_prod_grad", p.name, DType::F32,
            [=](std::mt19937 &rng) {
              Case c;
              c.attrs.set("axes", p.axes);
              c.attrs.set("keep_dims", p.keep);
              HostBuffer x = awayFromZero(DType::F32, p.shape, rng, 0.8, 1.25);
              int64_t n = 1;
              for (int64_t s : p.shape)
                n *= s;
              for (int64_t i = 0; i < n; ++i)
                if (rng() % 9 == 0)
                  setElement(x, i, 0);
              c.inputs = {x, uniform(DType::F32, p.out, rng)};
              c.outputs = {{DType::F32, p.shape}};
              c.reduction = count;
              return c;
            });
  }
}

} // namespace

void addIndexingCases(std::vector<CaseSpec> &cases) {
  addElementCases(cases);
  addScanCases(cases);
  addProductCases(cases);
}

} // namespace loom::rt::conformance
