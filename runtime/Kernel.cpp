//===- Kernel.cpp - Kernel attribute access -------------------------------===//

#include "runtime/Kernel.h"

namespace loom::rt {

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

} // namespace loom::rt
