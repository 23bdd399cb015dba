//===- Oracle.cpp - Computed elements against expected ones ---------------===//

#include "test/unit/support/Oracle.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

namespace loom::oracle {
namespace {

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// "element 7" or, with a shape of rank > 1, "element 7 [1, 3]".
std::string formatIndex(int64_t index, const std::vector<int64_t> &shape) {
  std::string s = "element " + std::to_string(index);
  if (shape.size() < 2)
    return s;
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = index % shape[d];
    index /= shape[d];
  }
  return s + " " + formatShape(idx);
}

/// How far `actual` is from `expected`: infinite when either is a NaN or an
/// infinity and they differ.
double distance(double actual, double expected) {
  double d = std::fabs(actual - expected);
  return std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
}

} // namespace

double Tolerance::bound(double expected) const {
  double relative = rtol * std::fabs(expected);
  return largerOfTheTwo ? std::max(atol, relative) : atol + relative;
}

bool Tolerance::matches(double actual, double expected) const {
  if (std::isnan(expected) || std::isnan(actual))
    return std::isnan(expected) && std::isnan(actual);
  if (isExact() || std::isinf(expected) || std::isinf(actual))
    return actual == expected;
  return std::fabs(actual - expected) <= bound(expected);
}

std::string Tolerance::describe() const {
  if (isExact())
    return "exact";
  std::ostringstream os;
  if (largerOfTheTwo)
    os << "max(" << atol << ", " << rtol << " * |expected|)";
  else
    os << atol << " + " << rtol << " * |expected|";
  return os.str();
}

Comparison compareElements(const std::vector<double> &actual,
                           const std::vector<double> &expected,
                           const Tolerance &tolerance) {
  return compareElements(actual, {static_cast<int64_t>(actual.size())},
                         expected, {static_cast<int64_t>(expected.size())},
                         tolerance);
}

Comparison compareElements(const std::vector<double> &actual,
                           const std::vector<int64_t> &actualShape,
                           const std::vector<double> &expected,
                           const std::vector<int64_t> &expectedShape,
                           const Tolerance &tolerance) {
  Comparison result;
  if (actualShape != expectedShape) {
    result.message_ = actualShape.size() == 1 && expectedShape.size() == 1
                          ? std::to_string(actualShape[0]) +
                                " elements, expected " +
                                std::to_string(expectedShape[0])
                          : "shape " + formatShape(actualShape) +
                                ", expected " + formatShape(expectedShape);
    return result;
  }
  size_t n = static_cast<size_t>(product(expectedShape));
  if (actual.size() != n || expected.size() != n) {
    result.message_ = actual.size() != n
                          ? std::to_string(actual.size()) +
                                " elements, expected " + std::to_string(n) +
                                " (shape " + formatShape(expectedShape) + ")"
                          : "the expected values are " +
                                std::to_string(expected.size()) +
                                " elements, not the " + std::to_string(n) +
                                " of shape " + formatShape(expectedShape);
    return result;
  }
  int64_t first = -1;
  double worst = -1;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (tolerance.matches(actual[i], expected[i]))
      continue;
    if (result.mismatches_++ == 0)
      first = static_cast<int64_t>(i);
    double d = distance(actual[i], expected[i]);
    if (d > worst) {
      worst = d;
      result.worstIndex_ = static_cast<int64_t>(i);
    }
  }
  if (result.mismatches_ == 0)
    return result;
  std::ostringstream os;
  os << std::setprecision(tolerance.isExact() ? 17 : 9);
  auto element = [&](int64_t i) {
    os << formatIndex(i, expectedShape) << ": got " << actual[i]
       << ", expected " << expected[i];
  };
  os << result.mismatches_ << " of " << actual.size() << " elements differ ("
     << tolerance.describe() << "); the worst is ";
  element(result.worstIndex_);
  if (first != result.worstIndex_) {
    os << "; the first ";
    element(first);
  }
  result.message_ = os.str();
  return result;
}

} // namespace loom::oracle
