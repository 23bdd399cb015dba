//===- OpRules.cpp - The table of op rules and its entry points -----------===//
//
// The entry points of common/ops/OpRules.h: the helpers every family of
// rules shares (RulesImpl.h), the table of rules by op name, filled from the
// family files, and the collectives' rule, which needs the mesh and so sits
// outside the table.
//
//===----------------------------------------------------------------------===//

#include "common/ops/OpRules.h"
#include "common/ops/RulesImpl.h"

#include <algorithm>
#include <map>
#include <variant>

namespace loom::ops {

bool broadcastShapes(const Shape &a, const Shape &b, Shape &out) {
  size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    r[rank - 1 - i] = da == 1 ? db : da;
  }
  out = std::move(r);
  return true;
}

namespace rules {

std::string checkAxis(int64_t axis, size_t rank) {
  if (inRange(axis, rank))
    return "";
  return "axis " + std::to_string(axis) + " is out of range for rank " +
         std::to_string(rank);
}

std::string expectResult(const TypeRef &r, DType dtype, const Shape &shape) {
  if (r.dtype != dtype || *r.shape != shape)
    return std::string("result is ") + dtypeName(r.dtype) +
           formatShape(*r.shape) + " but the op gives " + dtypeName(dtype) +
           formatShape(shape);
  return "";
}

std::string typeName(DType dtype, const Shape &shape) {
  return dtypeName(dtype) + formatShape(shape);
}

/// "" if `t` is `dtype` with `shape`, else an error naming `what`.
std::string expectType(const char *what, const TypeRef &t, DType dtype,
                       const Shape &shape) {
  if (t.dtype == dtype && *t.shape == shape)
    return "";
  return std::string(what) + " is " + typeName(t.dtype, *t.shape) +
         ", expected " + typeName(dtype, shape);
}

std::string expectFloat(const char *what, const TypeRef &t) {
  if (isFloat(t.dtype))
    return "";
  return std::string(what) + " must be a float tensor, not " +
         dtypeName(t.dtype);
}

/// The gradient `grad` must have the type of the forward result `forward`
/// of element type `dtype`.
std::string expectGrad(const TypeRef &grad, DType dtype, const Shape &forward,
                       const char *of) {
  if (grad.dtype == dtype && *grad.shape == forward)
    return "";
  return "grad is " + typeName(grad.dtype, *grad.shape) + " but " + of +
         " gives " + typeName(dtype, forward);
}

} // namespace rules

namespace {

using namespace rules;

/// Built once, on first use: the family files each add their ops.
const RuleTable &table() {
  static const RuleTable rules = [] {
    RuleTable t;
    addTensorRules(t);
    addNNRules(t);
    addTrainRules(t);
    addIndexRules(t);
    addResizeRules(t);
    return t;
  }();
  return rules;
}

/// "" if there are `rule`'s counts of operands and results, else how many
/// there are and should be.
std::string expectCounts(const OpRule &rule, size_t operands, size_t results) {
  if (operands < rule.minOperands || operands > rule.maxOperands) {
    std::string expected = std::to_string(rule.minOperands);
    if (rule.maxOperands == SIZE_MAX)
      expected = "at least " + expected;
    else if (rule.maxOperands != rule.minOperands)
      expected += " to " + std::to_string(rule.maxOperands);
    return "has " + std::to_string(operands) + " operands, expected " +
           expected;
  }
  if (results != rule.numResults)
    return "has " + std::to_string(results) + " results, expected " +
           std::to_string(rule.numResults);
  return "";
}

//===----------------------------------------------------------------------===//
// Collectives (runtime/comm/Collectives.h)
//===----------------------------------------------------------------------===//

/// Reads the integer attribute `name` into `out`, or says why it cannot.
std::string intAttr(const Attrs &a, const char *name, int64_t &out) {
  auto it = a.all().find(name);
  if (it == a.all().end())
    return std::string("needs the integer attribute '") + name + "'";
  const int64_t *value = std::get_if<int64_t>(&it->second);
  if (!value)
    return std::string("attribute '") + name + "' must be an integer";
  out = *value;
  return "";
}

/// "" if `axis` is an index into `mesh`, else why not.
std::string meshAxisInRange(int64_t axis,
                            const std::vector<layout::MeshAxis> &mesh) {
  if (mesh.empty())
    return "a collective needs a mesh, and the plan has none";
  if (axis < 0 || axis >= static_cast<int64_t>(mesh.size()))
    return "mesh axis " + std::to_string(axis) +
           " is out of range (the mesh "
           "has " +
           std::to_string(mesh.size()) + " axes)";
  return "";
}

std::string meshAxisName(int64_t axis,
                         const std::vector<layout::MeshAxis> &mesh) {
  return "'" + mesh[axis].name + "' (size " + std::to_string(mesh[axis].size) +
         ")";
}

bool isSummable(DType dtype) { return dtype != DType::Bool; }

std::string collective(const std::string &op, const Attrs &a,
                       const std::vector<layout::MeshAxis> &mesh,
                       const std::vector<TypeRef> &ops,
                       const std::vector<TypeRef> &res) {
  if (auto e = expectCounts(OpRule{1, 1, 1}, ops.size(), res.size());
      !e.empty())
    return e;
  const Shape &in = *ops[0].shape, &out = *res[0].shape;
  if (res[0].dtype != ops[0].dtype)
    return std::string("result element type ") + dtypeName(res[0].dtype) +
           " differs from the operand's " + dtypeName(ops[0].dtype);
  // The ops that produce or consume partial sums need summable elements.
  bool sums =
      op == "all_reduce" || op == "reduce_scatter" || op == "make_partial";
  if (sums && !isSummable(ops[0].dtype))
    return std::string("cannot sum elements of type ") +
           dtypeName(ops[0].dtype);
  if (op == "all_reduce") {
    auto it = a.all().find("axes");
    const auto *axes = it == a.all().end()
                           ? nullptr
                           : std::get_if<std::vector<int64_t>>(&it->second);
    if (!axes || axes->empty())
      return "needs a non-empty integer list attribute 'axes'";
    for (size_t i = 0; i < axes->size(); ++i) {
      if (auto e = meshAxisInRange((*axes)[i], mesh); !e.empty())
        return e;
      for (size_t j = 0; j < i; ++j)
        if ((*axes)[j] == (*axes)[i])
          return "mesh axis " + meshAxisName((*axes)[i], mesh) +
                 " is listed twice";
    }
    return expectResult(res[0], ops[0].dtype, in);
  }
  int64_t axis = 0;
  if (auto e = intAttr(a, "axis", axis); !e.empty())
    return e;
  if (auto e = meshAxisInRange(axis, mesh); !e.empty())
    return e;
  if (op == "make_partial")
    return expectResult(res[0], ops[0].dtype, in);
  int64_t n = mesh[axis].size, dim = 0;
  if (auto e = intAttr(a, "dim", dim); !e.empty())
    return e;
  if (!inRange(dim, in.size()))
    return "dim " + std::to_string(dim) +
           " is out of range for an operand "
           "of rank " +
           std::to_string(in.size());
  if (out.size() != in.size())
    return "result rank " + std::to_string(out.size()) +
           " differs from the operand's " + std::to_string(in.size());
  Shape expected = in;
  auto divide = [&](int64_t d) -> std::string {
    if (in[d] % n != 0)
      return "dimension " + std::to_string(d) + " of size " +
             std::to_string(in[d]) +
             " is not divisible by the size of mesh "
             "axis " +
             meshAxisName(axis, mesh);
    expected[d] = in[d] / n;
    return "";
  };
  auto multiply = [&](int64_t d) -> std::string {
    if (__builtin_mul_overflow(in[d], n, &expected[d]))
      return "dimension " + std::to_string(d) + " overflows";
    return "";
  };
  std::string e;
  if (op == "reduce_scatter" || op == "local_split") {
    e = divide(dim);
  } else if (op == "all_gather") {
    e = multiply(dim);
  } else if (op == "all_to_all") {
    int64_t toDim = 0;
    if (auto e2 = intAttr(a, "to_dim", toDim); !e2.empty())
      return e2;
    if (!inRange(toDim, in.size()) || toDim == dim)
      return "to_dim " + std::to_string(toDim) +
             " must be a dimension of "
             "the operand other than dim " +
             std::to_string(dim);
    e = divide(toDim);
    if (e.empty())
      e = multiply(dim);
  } else {
    return "unknown collective '" + op + "'";
  }
  if (!e.empty())
    return e;
  if (out != expected)
    return "result is " + typeName(res[0].dtype, out) + " but " + op +
           " over mesh axis " + meshAxisName(axis, mesh) + " gives " +
           typeName(ops[0].dtype, expected);
  return "";
}

} // namespace

std::string checkCollective(const std::string &op, const Attrs &attrs,
                            const std::vector<layout::MeshAxis> &meshAxes,
                            const std::vector<TypeRef> &operands,
                            const std::vector<TypeRef> &results) {
  if (auto e = checkAttrs(op, attrs); !e.empty())
    return e;
  return collective(op, attrs, meshAxes, operands, results);
}

namespace {

using Schemas = std::map<std::string, std::vector<AttrSpec>, std::less<>>;

const Schemas &schemas() {
  static const Schemas table = {
#include "common/ops/OpSchema.inc"
  };
  return table;
}

/// "integer" for "needs the integer attribute 'axis'".
const char *kindNoun(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "integer";
  case AttrKind::Float:
    return "float";
  case AttrKind::Bool:
    return "bool";
  case AttrKind::Ints:
    return "integer list";
  case AttrKind::String:
    return "string";
  }
  return "?";
}

/// "an integer" for "attribute 'axis' must be an integer".
std::string withArticle(const char *noun) {
  return std::string(std::string_view("aeiou").find(noun[0]) ==
                             std::string_view::npos
                         ? "a "
                         : "an ") +
         noun;
}

bool hasKind(const AttrValue &value, AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return std::holds_alternative<int64_t>(value);
  case AttrKind::Float:
    // A float attribute whose value is whole may arrive as either.
    return std::holds_alternative<double>(value) ||
           std::holds_alternative<int64_t>(value);
  case AttrKind::Bool:
    return std::holds_alternative<bool>(value);
  case AttrKind::Ints:
    return std::holds_alternative<std::vector<int64_t>>(value);
  case AttrKind::String:
    return std::holds_alternative<std::string>(value);
  }
  return false;
}

} // namespace

const std::vector<AttrSpec> *findAttrSchema(std::string_view op) {
  auto it = schemas().find(op);
  return it == schemas().end() ? nullptr : &it->second;
}

std::string checkAttrs(std::string_view op, const Attrs &attrs) {
  const std::vector<AttrSpec> *schema = findAttrSchema(op);
  if (!schema)
    return "";
  for (const AttrSpec &spec : *schema) {
    auto it = attrs.all().find(spec.name);
    if (it == attrs.all().end()) {
      if (!spec.optional)
        return std::string("needs the ") + kindNoun(spec.kind) +
               " attribute '" + spec.name + "'";
      continue;
    }
    if (!hasKind(it->second, spec.kind))
      return std::string("attribute '") + spec.name + "' must be " +
             withArticle(kindNoun(spec.kind));
  }
  for (const auto &[name, value] : attrs.all()) {
    bool known = false;
    for (const AttrSpec &spec : *schema)
      known = known || name == spec.name;
    if (!known)
      return "has an unknown attribute '" + name + "'";
  }
  return "";
}

const OpRule *findOpRule(std::string_view op) {
  auto it = table().find(op);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> opsWithRules() {
  std::vector<std::string> names;
  for (const auto &entry : table())
    names.push_back(entry.first);
  return names;
}

std::string inferResultTypes(std::string_view op, const Attrs &attrs,
                             const std::vector<TypeRef> &operands,
                             std::vector<TensorType> &results) {
  const OpRule *rule = findOpRule(op);
  if (!rule)
    return "unknown op '" + std::string(op) + "'";
  if (!rule->infer)
    return "the result type of '" + std::string(op) + "' is not inferred";
  if (auto e = expectCounts(*rule, operands.size(), rule->numResults);
      !e.empty())
    return e;
  results.clear();
  return rule->infer(attrs, operands, results);
}

std::string checkOp(std::string_view op, const Attrs &attrs,
                    const std::vector<TypeRef> &operands,
                    const std::vector<TypeRef> &results) {
  const OpRule *rule = findOpRule(op);
  if (!rule)
    return "unknown op '" + std::string(op) + "'";
  if (auto e = checkAttrs(op, attrs); !e.empty())
    return e;
  if (auto e = expectCounts(*rule, operands.size(), results.size()); !e.empty())
    return e;
  if (rule->check)
    return rule->check(attrs, operands, results);
  std::vector<TensorType> inferred;
  if (auto e = rule->infer(attrs, operands, inferred); !e.empty())
    return e;
  for (size_t i = 0; i < results.size(); ++i)
    if (auto e = expectResult(results[i], inferred[i].dtype, inferred[i].shape);
        !e.empty())
      return results.size() == 1 ? e
                                 : "result #" + std::to_string(i) + ": " + e;
  return "";
}

} // namespace loom::ops
