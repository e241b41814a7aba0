// shape-prop: records dtype, shape, memory format and device on tensor values.
// The contract is kContract below (`ptopt passes shape-prop` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class ShapePropPass : public Pass {
 public:
  static constexpr const char* kContract =
      "Runs the graph with ir::Interpreter on PassContext::exampleInputs (the CLI builds them from "
      "--input-shape) and stores, on every value that holds a tensor (graph inputs, get_attr constants, node "
      "results, block parameters), its dtype, shape, device and memory format: contiguous_format when "
      "contiguous, channels_last / channels_last_3d when the strides are those and not plain contiguous, "
      "unset for other strides; an undefined tensor (an output ATen did not compute) gets none. Metadata "
      "describes these example inputs: it is cleared and recomputed on every run, never kept stale. Values "
      "inside a loop get the last iteration's; values in a branch or loop body that did not run get none. "
      "The graph's structure and the constant table never change (constants the graph writes in place are "
      "copied first). Declines, changing nothing, when there are no example inputs or their number does not "
      "match the graph's inputs. A failure to run (an input of the wrong shape) is an error naming the node. "
      "Reports a change when any value's metadata differs from before. Counters: annotated.";

  std::string name() const override { return "shape-prop"; }
  std::string description() const override {
    return "record dtype/shape/memory-format/device of tensors by running the example inputs";
  }
  std::string contract() const override { return kContract; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
