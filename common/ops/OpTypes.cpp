//===- OpTypes.cpp - Element types, shapes and attributes of op rules -----===//

#include "common/ops/OpTypes.h"

namespace loom::ops {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string formatShape(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t Attrs::getInt(std::string_view name, int64_t dflt) const {
  auto it = values.find(std::string(name));
  if (it == values.end())
    return dflt;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return *i;
  if (auto *b = std::get_if<bool>(&it->second))
    return *b;
  return dflt;
}

double Attrs::getFloat(std::string_view name, double dflt) const {
  auto it = values.find(std::string(name));
  if (it == values.end())
    return dflt;
  if (auto *f = std::get_if<double>(&it->second))
    return *f;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return static_cast<double>(*i);
  return dflt;
}

bool Attrs::getBool(std::string_view name) const {
  auto it = values.find(std::string(name));
  if (it == values.end())
    return false;
  if (auto *b = std::get_if<bool>(&it->second))
    return *b;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return *i != 0;
  return false;
}

std::vector<int64_t> Attrs::getInts(std::string_view name) const {
  auto it = values.find(std::string(name));
  if (it == values.end())
    return {};
  if (auto *v = std::get_if<std::vector<int64_t>>(&it->second))
    return *v;
  return {};
}

std::string Attrs::getString(std::string_view name) const {
  auto it = values.find(std::string(name));
  if (it == values.end())
    return {};
  if (auto *s = std::get_if<std::string>(&it->second))
    return *s;
  return {};
}

} // namespace loom::ops
