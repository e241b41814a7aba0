// const-fold: evaluates nodes whose inputs are all constant, with the real operators.
// The contract is kContract below (`ptopt passes const-fold` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class ConstFoldPass : public Pass {
 public:
  static constexpr const char* kContract =
      "Matches call_function nodes whose value arguments are all constants (get_attr values, or results this "
      "run already evaluated) and whose other arguments are literals, in every block, in program order (so "
      "chains fold in one run). Each is evaluated once with the real operator through ir::Interpreter, so "
      "dtype promotion, broadcasting and rounding are exactly eager PyTorch's. Tensor results become new "
      "named constants (`<first constant input>.folded`, made unique) read by a get_attr placed with the "
      "other get_attrs at the top of the graph; results that are literals (ints, floats, bools, strings, "
      "lists of those, dtypes, devices, None) are written into their users' arguments. The folded node, and "
      "inputs that only it used, are removed. Results that are neither (a tuple, a list of tensors) stay as "
      "they are but still feed later folds (`aten::cat` of a `prim::ListConstruct` of constants folds). "
      "Existing constants are never modified: a result that shares storage with a constant is copied. Does "
      "not fire on: nodes with side effects (in-place or otherwise mutating ops, random draws, raising, "
      "printing, unknown operators: ir::hasSideEffects), opaque operators, nodes reading a constant that the "
      "graph writes in place anywhere (through any alias, ir::MutationAnalysis) or whose result is written "
      "in place, nodes owning nested blocks, ops returning uninitialized memory (aten::empty...), dead nodes "
      "(dce's job), nodes whose evaluation fails (left to run time: they may sit in a branch that never "
      "runs), results that are not strided tensors (oneDNN tensors: the export computes those when the model "
      "loads, ir/load_time.h), and tensor results over `max-bytes` bytes (counted as skipped-large). Each refusal of a node "
      "with all-constant inputs is explained (--explain). Runs at one intra-op thread (computesFromData), so a "
      "folded constant does not depend on the thread count. Counters: folded, skipped-large.";
  static constexpr int64_t kDefaultMaxBytes = 16 << 20;

  std::string name() const override { return "const-fold"; }
  std::string description() const override {
    return "evaluate nodes whose inputs are all constant with the real operators";
  }
  std::string contract() const override { return kContract; }
  std::vector<OptionSpec> optionSpecs() const override;
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
  PassEffects effects(const PassContext&) const override {
    PassEffects e;
    e.computesFromData = true;
    return e;
  }
};

}  // namespace ptopt::rewriters
