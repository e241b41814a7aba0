// rules: (being written) see the issue.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class RulesPass : public Pass {
 public:
  std::string name() const override { return "rules"; }
  std::string description() const override { return "apply rewrite rules from a rule file"; }
  std::string contract() const override { return "not implemented yet"; }
  std::vector<OptionSpec> optionSpecs() const override {
    return {{"file", OptionKind::String, "", "rule file to apply", {}, {}, {}}};
  }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
