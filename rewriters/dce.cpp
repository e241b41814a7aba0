#include "rewriters/dce.h"

#include "ir/dead_code.h"

namespace ptopt::rewriters {

std::string DcePass::contract() const {
  return "Removes every node whose outputs are all unused and that has no side effect, in every "
         "block. Side effects: in-place/mutating ops (relu_, add_, append, copy_), raising, "
         "printing, warnings, random number draws (an unused dropout in training mode still "
         "advances the RNG), calls that were not inlined, unknown schema-less operators, and any "
         "of these inside an If/Loop body. Graph inputs and outputs never change. Does not fire "
         "when nothing is dead.";
}

PassResult DcePass::run(ir::Graph& graph, PassContext&) {
  PassResult r;
  const size_t removed = ir::eliminateDeadCode(graph);
  r.changed = removed > 0;
  if (removed) r.count("removed", static_cast<int64_t>(removed));
  return r;
}

}  // namespace ptopt::rewriters
