// dce: dead code elimination.
// The contract is kContract below (`ptopt passes dce` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class DcePass : public Pass {
 public:
  static constexpr const char* kContract =
      "Removes every node whose outputs are all unused and that has no side effect, in every block, users "
      "before producers so chains disappear in one run. Side effects (ir/dead_code.h): a mutable schema "
      "(in-place ops such as relu_ and add_, list append, copy_), raising, printing, warnings, random number "
      "draws (an unused dropout in training mode still advances the RNG), calls that were not inlined, "
      "unknown schema-less operators, opaque operators not registered as pure, and any of these inside a "
      "prim::If / prim::Loop body. Placeholders and outputs always stay, so the model's signature never "
      "changes. Does not fire on a graph without dead nodes. Counter: removed.";

  std::string name() const override { return "dce"; }
  std::string description() const override { return "remove nodes whose results are unused and that have no side effects"; }
  std::string contract() const override { return kContract; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
