// cse: common subexpression elimination (scoped by dominance, mutation-safe).
// The contract is kContract below (`ptopt passes cse` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class CsePass : public Pass {
 public:
  static constexpr const char* kContract =
      "Two call_function nodes compute the same value when they have the same target and overload, the same "
      "arguments (the same Values; literals equal bit for bit, so 0.0 and -0.0 differ), the same node "
      "attributes and the same output types, and neither has a side effect (ir::hasSideEffects: in-place "
      "ops, random draws, raising, printing, unknown operators) nor nested blocks; opaque operators are "
      "never merged. Two get_attr nodes naming the same constant are the same value. The later node's "
      "outputs are replaced by the earlier node's and the later node is erased. Scoping follows dominance: "
      "a node may reuse an equal node earlier in its own block or earlier in an enclosing block (a loop body "
      "reuses a value computed before the loop), never one from a sibling block (the other branch of an If) "
      "nor from a nested block. One walk in program order with a scoped hash table keyed on (target, "
      "arguments): linear in the number of nodes, and chains of equal nodes collapse in one run. Mutation "
      "safety (conservative, ir::MutationAnalysis): a node is left alone when any of its inputs or outputs "
      "may alias a value that an in-place or otherwise writing operator mutates anywhere in the graph (two "
      "reads of x around `x.add_()` stay separate; two `clone(x)` of which one is `relu_`'d stay separate) "
      "or that is compared by identity (`aten::__is__`), and two nodes are not merged when both results may "
      "reach the graph's outputs (the caller would receive one object twice). Graph inputs and outputs never "
      "change. Does not fire when no two nodes are equal. Counter: eliminated.";

  std::string name() const override { return "cse"; }
  std::string description() const override { return "common subexpression elimination (scoped, mutation-safe)"; }
  std::string contract() const override { return kContract; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
