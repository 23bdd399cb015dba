//===- OpTypes.h - The vocabulary of op rules -------------------*- C++ -*-===//
//
// The vocabulary in which a loom op's rule is written once
// (common/ops/OpRules.h) and read by the dialect's type inference, the plan
// emitter's and the runtime's validation: element types numbered as in
// plan.proto, static shapes, and attributes by their dialect names. No MLIR
// or LLVM here.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_OPTYPES_H
#define LOOM_COMMON_OPS_OPTYPES_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::ops {

/// Element types, numbered as in plan.proto.
enum class DType : int {
  F32 = 1,
  F16 = 2,
  BF16 = 3,
  I32 = 4,
  I64 = 5,
  Bool = 6, // one byte per element, 0 or 1
};

size_t dtypeSize(DType dtype);
const char *dtypeName(DType dtype);
bool isFloat(DType dtype);

using Shape = std::vector<int64_t>;

int64_t numElements(const Shape &shape);
std::string formatShape(const Shape &shape);

/// An operand's or result's type, by reference to a shape held elsewhere.
struct TypeRef {
  DType dtype;
  const Shape *shape;
};

/// A type a rule infers.
struct TensorType {
  DType dtype;
  Shape shape;
};

/// An attribute value: integer, float, string, bool or integer list.
using AttrValue =
    std::variant<int64_t, double, std::string, bool, std::vector<int64_t>>;

/// An op's attributes by their dialect names; unit attributes are bools
/// (absent means false).
class Attrs {
public:
  void set(std::string name, AttrValue value) {
    values[std::move(name)] = std::move(value);
  }
  bool has(std::string_view name) const {
    return values.find(std::string(name)) != values.end();
  }
  /// Typed accessors; a missing attribute gives the default.
  int64_t getInt(std::string_view name, int64_t dflt = 0) const;
  double getFloat(std::string_view name, double dflt = 0) const;
  bool getBool(std::string_view name) const;
  std::vector<int64_t> getInts(std::string_view name) const;
  std::string getString(std::string_view name) const;
  const std::map<std::string, AttrValue> &all() const { return values; }

private:
  std::map<std::string, AttrValue> values;
};

} // namespace loom::ops

#endif // LOOM_COMMON_OPS_OPTYPES_H
