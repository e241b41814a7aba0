// const-fold: (being written) see the issue.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class ConstFoldPass : public Pass {
 public:
  std::string name() const override { return "const-fold"; }
  std::string description() const override { return "evaluate nodes whose inputs are all constant"; }
  std::string contract() const override { return "not implemented yet"; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
