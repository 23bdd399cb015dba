//===- Kernel.cpp - Kernel attribute access -------------------------------===//

#include "runtime/Kernel.h"

#include <limits>

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

std::string checkArity(std::string_view backend, std::string_view op,
                       const KernelArgs &args, int minInputs, int maxInputs,
                       int outputs) {
  int inputs = static_cast<int>(args.inputs.size());
  if (inputs >= minInputs && inputs <= maxInputs &&
      args.outputs.size() == static_cast<size_t>(outputs))
    return "";
  std::string expected = std::to_string(minInputs);
  if (maxInputs == std::numeric_limits<int>::max())
    expected = "at least " + expected;
  else if (maxInputs != minInputs)
    expected += " to " + std::to_string(maxInputs);
  return std::string(backend) + " kernel '" + std::string(op) + "' expects " +
         expected + " inputs and " + std::to_string(outputs) +
         (outputs == 1 ? " output" : " outputs") + ", got " +
         std::to_string(inputs) + " and " + std::to_string(args.outputs.size());
}

} // namespace loom::rt
