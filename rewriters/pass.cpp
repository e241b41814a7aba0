#include "rewriters/pass.h"

#include "ir/literal.h"

#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)

namespace ptopt::rewriters {

std::string validateOption(const OptionSpec& spec, const std::string& value) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("option '" + spec.name + "': " + why);
  };
  switch (spec.kind) {
    case OptionKind::Bool:
      if (value == "true" || value == "1" || value == "on") return "true";
      if (value == "false" || value == "0" || value == "off") return "false";
      throw bad("expected true or false, got '" + value + "'");
    case OptionKind::Int: {
      char* end = nullptr;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end) throw bad("expected an integer, got '" + value + "'");
      if (spec.min && v < *spec.min) throw bad(fmt::format("must be at least {}", *spec.min));
      if (spec.max && v > *spec.max) throw bad(fmt::format("must be at most {}", *spec.max));
      return std::to_string(v);
    }
    case OptionKind::Float: {
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || std::isnan(v)) throw bad("expected a number, got '" + value + "'");
      if (spec.min && v < *spec.min) throw bad(fmt::format("must be at least {}", *spec.min));
      if (spec.max && v > *spec.max) throw bad(fmt::format("must be at most {}", *spec.max));
      return ir::formatDouble(v);
    }
    case OptionKind::Enum:
      for (const auto& c : spec.choices)
        if (c == value) return value;
      throw bad(fmt::format("expected one of {}, got '{}'", fmt::join(spec.choices, "|"), value));
    case OptionKind::String:
      return value;
  }
  return value;
}

bool OptionValues::getBool(const std::string& name) const { return values_.at(name) == "true"; }
int64_t OptionValues::getInt(const std::string& name) const { return std::stoll(values_.at(name)); }
double OptionValues::getFloat(const std::string& name) const { return std::stod(values_.at(name)); }
const std::string& OptionValues::getString(const std::string& name) const { return values_.at(name); }

void PassResult::count(const std::string& name, int64_t n) {
  for (auto& [k, v] : counters)
    if (k == name) { v += n; return; }
  counters.emplace_back(name, n);
}

int64_t PassResult::counter(const std::string& name) const {
  for (const auto& [k, v] : counters)
    if (k == name) return v;
  return 0;
}

std::string PassResult::countersText() const {
  std::string out;
  for (const auto& [k, v] : counters) out += (out.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return out;
}

std::string describeNode(const ir::Node* n) {
  std::string s = n->opcode() == ir::Opcode::CallFunction ? n->qualifiedTarget() : ir::opcodeName(n->opcode());
  if (n->numOutputs()) s = "%" + n->output()->name() + " = " + s;
  if (!n->scope().empty()) s += " (in " + n->scope() + ")";
  if (!n->sourceLocation().empty()) s += " at " + n->sourceLocation();
  return s;
}

bool PassContext::declineOnce(const std::string& pass, const ir::Node* node, const std::string& why) {
  std::string line = pass + ": not rewriting " + describeNode(node) + ": " + why;
  if (!declineSet_.insert(line).second) return false;
  if (explain) *explain << line << "\n";
  declines_.push_back(std::move(line));
  return true;
}

void PassContext::warn(const std::string& pass, const std::string& text) {
  warnings_.push_back(pass + ": " + text);
  if (onWarning) onWarning(warnings_.back());
}

PassContext PassContext::forTrial() const {
  PassContext trial;
  trial.exampleInputs = exampleInputs;
  trial.targetDevice = targetDevice;
  trial.preferBf16 = preferBf16;
  trial.assumedIsa = assumedIsa;
  trial.tensorValuesOnly = tensorValuesOnly;
  trial.inputs = inputs;
  return trial;
}

void Pass::configure(const std::map<std::string, std::string>& given) {
  const auto specs = optionSpecs();
  std::map<std::string, std::string> values;
  for (const auto& s : specs) values[s.name] = s.defaultValue;
  for (const auto& [k, v] : given) {
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == k) spec = &s;
    if (!spec) {
      std::string known;
      for (const auto& s : specs) known += (known.empty() ? "" : ", ") + s.name;
      throw std::invalid_argument("pass '" + name() + "' has no option '" + k + "'" +
                                  (known.empty() ? " (it takes none)" : " (options: " + known + ")"));
    }
    values[k] = validateOption(*spec, v);
  }
  options_ = OptionValues(std::move(values));
}

}  // namespace ptopt::rewriters
