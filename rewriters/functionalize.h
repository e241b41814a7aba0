// functionalize: (being written) see the issue.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class FunctionalizePass : public Pass {
 public:
  std::string name() const override { return "functionalize"; }
  std::string description() const override { return "in-place ops to out-of-place where provably safe"; }
  std::string contract() const override { return "not implemented yet"; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
