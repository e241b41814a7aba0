// rules: rewrite rules from a rule file (user-written patterns, no rebuild).
// The contract is kContract below (`ptopt passes rules` prints it).
//
// Rule file format (see also examples/rules/README.md):
//
//   # Comments run from '#' to the end of the line.
//   rule hardtanh-to-relu6                # 'rule NAME' starts at column 1
//     pattern                             # sections are indented
//       graph(%x : Tensor, %lo : Scalar): # IR text (ir/text.h), indented
//         %y : Tensor = aten::hardtanh(%x, %lo, 6.0)   # under its keyword
//         output(%y)
//     replacement
//       graph(%x : Tensor, %lo : Scalar):
//         %y : Tensor = aten::relu6(%x)
//         output(%y)
//     where %lo in {0, 0.0}               # optional constraints, any number
//
// NAME is made of letters, digits, '-', '_' and '.', unique in the file.
// Each rule has exactly one `pattern` and one `replacement` section; the
// graph under each is indented more than its keyword, its body two spaces
// more than `graph(`, as in the IR text form (indent with spaces). Replacement
// inputs correspond to pattern inputs by position. `where` clauses name
// pattern inputs:
//   where %w in {lit, ...}       bound to a literal equal to one of these
//   where %w not in {lit, ...}   anything but one of these literals
//   where %w is literal | value | constant (a get_attr value)
// Literals are IR literals (`1`, `0.0`, `None`, `[1, 1]`, `torch.float32`),
// compared exactly (`1` is not `1.0`). Errors (syntax, IR parse errors, input
// or output count mismatch, unknown wildcards) name the file, line and column
// with a caret under the offending text.
#pragma once

#include "rewriters/pass.h"
#include "rewriters/pattern.h"
#include "rewriters/text_error.h"

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt::rewriters {

// An error in a rule file: `source:line:column: message`, the line and a caret
// (one class with PipelineError: rewriters/text_error.h).
using RuleFileError = TextError;

// Parses rule file text; `source` names it in errors. Throws RuleFileError.
std::vector<RewriteRule> parseRules(const std::string& text, const std::string& source = "rules");
// Reads and parses a rule file. Throws RuleFileError (std::runtime_error when
// the file cannot be read).
std::vector<RewriteRule> loadRuleFile(const std::string& path);

// Rule texts held in memory (Python's rules=...), handed to the rules pass
// on the context's side data (ctx.inputs): `rules{text=NAME}` applies the
// text named NAME, with no file in between.
struct RuleTexts {
  std::map<std::string, std::string> byName;  // "rules", "rules[1]", ...
};

class RulesPass : public Pass {
 public:
  static constexpr const char* kContract =
      "Applies every rule of the rule file given by `file` (or of the in-memory rule text named by `text`, "
      "rewriters::RuleTexts on the context's side data) with the pattern driver (rewriters/pattern.h: "
      "torch.fx subgraph_rewriter semantics: pattern inputs are wildcards bound consistently to values or "
      "literals, literals and operator overloads must match exactly), all rules in one worklist, sweeping the "
      "graph until nothing changes or `max-iter` sweeps ran. At a node, the first rule of the file that "
      "matches and passes its checks wins. A match is refused, and the refusal explained (--explain), when "
      "it is not self-contained (an interior value is used outside it), when the replacement would create a "
      "cycle or reorder a side effect, or when a `where` clause rejects it. Nested blocks are searched; a "
      "match never spans blocks. Preserves whatever the rules preserve: ptopt does not prove a rule correct, "
      "so check rules with `ptopt verify`. Does not fire when no rule matches. Counters: one per rule that "
      "fired, named after it (`hardtanh-to-relu6=35`). The parsed file is cached per path (a text per name) in "
      "the pass instance.";

  std::string name() const override { return "rules"; }
  std::string description() const override { return "apply rewrite rules from a rule file"; }
  std::string contract() const override { return kContract; }
  std::vector<OptionSpec> optionSpecs() const override {
    return {{"file", OptionKind::String, "", "rule file to apply (see examples/rules/README.md)", {}, {}, {}},
            {"text", OptionKind::String, "", "in-memory rule text to apply, by its name (the C++/Python API's rules)",
             {}, {}, {}},
            {"max-iter", OptionKind::Int, "10", "sweeps over the graph at most", {}, 1.0, 1000.0}};
  }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;

 private:
  std::map<std::string, std::shared_ptr<const std::vector<RewriteRule>>> cache_;
};

}  // namespace ptopt::rewriters
