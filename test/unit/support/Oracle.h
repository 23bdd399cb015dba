//===- Oracle.h - Computed elements against expected ones -------*- C++ -*-===//
//
// The unit harnesses' one comparison of computed values with expected ones
// (the kernel tests, the ONNX node tests, the gradient checks): elements as
// doubles, each within a tolerance or exactly, with IEEE's special values
// held to what they are. A NaN is expected as a NaN; an infinity only as
// the same infinity (a bound of atol + rtol * |inf| would take any finite
// value); a NaN or an infinity where a finite value is expected is always a
// mismatch. The result is a value: `ok()`, and a message that counts the
// mismatches and names the worst, for a gtest failure or an error string.
// Plain C++, no gtest: the runtime-only build (the GPU bundle) links it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_SUPPORT_ORACLE_H
#define LOOM_TEST_UNIT_SUPPORT_ORACLE_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::oracle {

/// How far an element may be from its expected value e: |a - e| <= bound(e).
/// Both zero means exact equality (integers, bools, data movement).
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  /// Whether the bound is max(atol, rtol * |e|) rather than numpy's
  /// atol + rtol * |e|.
  bool largerOfTheTwo = false;

  /// Equality.
  static Tolerance exact() { return {}; }
  /// numpy.allclose's (and ONNX's runner's): atol + rtol * |e|.
  static Tolerance allclose(double rtol, double atol) {
    return {atol, rtol, false};
  }
  /// rtol * max(|e|, floor): relative, but never tighter than at |e| = floor.
  static Tolerance relative(double rtol, double floor = 1.0) {
    return {rtol * floor, rtol, true};
  }

  bool isExact() const { return atol == 0 && rtol == 0; }
  /// The largest |a - e| allowed for a finite expected value `e`.
  double bound(double expected) const;
  /// Whether `actual` matches `expected`, special values included.
  bool matches(double actual, double expected) const;
  /// "exact", "1e-07 + 0.001 * |expected|" or "0.01 * max(|expected|, 1)".
  std::string describe() const;
};

/// The outcome of a comparison: ok, or what differs.
class Comparison {
public:
  bool ok() const { return message_.empty(); }
  /// "" when ok; else the first problem: a length or shape that differs, or
  /// the count of mismatching elements, the worst of them (index, got,
  /// expected) and the first, when that is another.
  const std::string &message() const { return message_; }
  /// The mismatching elements (0 when the lengths or shapes differ).
  int64_t mismatches() const { return mismatches_; }
  /// The mismatch farthest from its expected value (a NaN or an infinity
  /// counts as infinitely far; the first of equals), or -1.
  int64_t worstIndex() const { return worstIndex_; }

private:
  friend Comparison compareElements(const std::vector<double> &,
                                    const std::vector<int64_t> &,
                                    const std::vector<double> &,
                                    const std::vector<int64_t> &,
                                    const Tolerance &);
  std::string message_;
  int64_t mismatches_ = 0;
  int64_t worstIndex_ = -1;
};

/// Compares `actual` with `expected`, element by element: their lengths
/// must be equal, then every element must match within `tolerance`.
Comparison compareElements(const std::vector<double> &actual,
                           const std::vector<double> &expected,
                           const Tolerance &tolerance);

/// One value against its expected value (a loss, an inner product): the
/// same rules as an element, so an infinite expectation takes only itself.
inline Comparison compareValue(double actual, double expected,
                               const Tolerance &tolerance) {
  return compareElements(std::vector<double>{actual},
                         std::vector<double>{expected}, tolerance);
}

/// The same for tensors: their shapes must be equal (and each the length
/// of its elements); mismatches are named by flat and row-major index.
Comparison compareElements(const std::vector<double> &actual,
                           const std::vector<int64_t> &actualShape,
                           const std::vector<double> &expected,
                           const std::vector<int64_t> &expectedShape,
                           const Tolerance &tolerance);

} // namespace loom::oracle

#endif // LOOM_TEST_UNIT_SUPPORT_ORACLE_H
