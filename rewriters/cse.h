// cse: (being written) see the issue.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class CsePass : public Pass {
 public:
  std::string name() const override { return "cse"; }
  std::string description() const override { return "common subexpression elimination"; }
  std::string contract() const override { return "not implemented yet"; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
