// `ptopt passes [NAME]`: every registered pass with its options and contract.
#include "api/api.h"
#include "tools/commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)
#include <iostream>

namespace ptopt::tools {

namespace {

const char* kindName(rewriters::OptionKind k) {
  switch (k) {
    case rewriters::OptionKind::Bool: return "bool";
    case rewriters::OptionKind::Int: return "int";
    case rewriters::OptionKind::Float: return "float";
    case rewriters::OptionKind::String: return "string";
    case rewriters::OptionKind::Enum: return "enum";
  }
  return "?";
}

// Wraps prose at 78 columns with an indent.
std::string wrap(const std::string& text, size_t indent) {
  std::string out, line;
  const std::string pad(indent, ' ');
  std::istringstream words(text);
  std::string w;
  while (words >> w) {
    if (!line.empty() && line.size() + 1 + w.size() > 78 - indent) {
      out += pad + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) out += pad + line + "\n";
  return out;
}

void printPass(const rewriters::PassInfo& p, bool full) {
  std::cout << fmt::format("{:<16} {}\n", p.name, p.description);
  for (const auto& o : p.options) {
    std::string type = kindName(o.kind);
    if (o.kind == rewriters::OptionKind::Enum) type = fmt::format("{}", fmt::join(o.choices, "|"));
    std::cout << fmt::format("    {}={} ({}, default {}){}\n", o.name, type, kindName(o.kind),
                             o.defaultValue.empty() ? "\"\"" : o.defaultValue, o.help.empty() ? "" : ": " + o.help);
  }
  if (full) std::cout << wrap(p.contract, 4);
}

}  // namespace

void registerPassesOptions(CLI::App& cmd, PassesOptions& o) {
  cmd.add_option("name", o.name, "Show one pass");
  cmd.footer(
      "Examples:\n"
      "  ptopt passes                     # every pass: description and options\n"
      "  ptopt passes fold-conv-bn        # one pass with its full contract\n"
      "Exit codes: 0 success, 2 unknown pass (with the nearest name).");
}

int runPasses(const PassesOptions& o) {
  const auto& registry = defaultRegistry();
  if (!o.name.empty()) {
    const auto* info = registry.find(o.name);
    if (!info) {
      const std::string hint = registry.suggest(o.name);
      throw UsageError("unknown pass '" + o.name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
    printPass(*info, true);
    return 0;
  }
  for (const auto* info : registry.all()) {
    printPass(*info, true);
    std::cout << "\n";
  }
  std::cout << "fixpoint{max-iter=N}(...)  repeat the nested passes until none changes the graph (at most N rounds)\n\n"
            << "presets:\n";
  for (int level = 0; level <= 3; ++level)
    std::cout << fmt::format("  -O{}  {}\n", level, rewriters::presetPipeline(level).empty() ? "(empty)" : rewriters::presetPipeline(level));
  return 0;
}

}  // namespace ptopt::tools
