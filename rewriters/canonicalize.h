// canonicalize: (being written) see the issue.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class CanonicalizePass : public Pass {
 public:
  std::string name() const override { return "canonicalize"; }
  std::string description() const override { return "one form per op"; }
  std::string contract() const override { return "not implemented yet"; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
