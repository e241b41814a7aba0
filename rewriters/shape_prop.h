// shape-prop: (being written) see the issue.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class ShapePropPass : public Pass {
 public:
  std::string name() const override { return "shape-prop"; }
  std::string description() const override { return "fill dtype/shape/memory-format/device metadata"; }
  std::string contract() const override { return "not implemented yet"; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
