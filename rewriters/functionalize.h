// functionalize: in-place operators to their out-of-place forms, where provably
// safe.
// The contract is kContract below (`ptopt passes functionalize` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class FunctionalizePass : public Pass {
 public:
  static constexpr const char* kContract =
      "Rewrites `%y = aten::NAME_[.overload](%x, args...)` to `%y = aten::NAME[.overload](%x, args...)` for "
      "the element-wise operators of a fixed table (relu_, add_, sub_, mul_, div_, hardtanh_, clamp_, "
      "sigmoid_, tanh_, hardswish_, silu_, leaky_relu_, gelu_, ...) whose out-of-place schema exists with the "
      "same overload and arguments. After the in-place op, x and y are the same tensor, so later uses of x "
      "are first redirected to y; the new node then replaces the in-place one (same result name) and x is no "
      "longer mutated. Results are bitwise equal: both forms run the same kernel. It fires only when the "
      "mutation is invisible to everything else: (1) x is a fresh result of a schema'd operator that returns "
      "new memory (not a graph input, not a get_attr constant, not a block parameter, not a view or alias "
      "such as view/reshape/contiguous/select, nor the result of a schema-less op like ListUnpack or If); "
      "(2) x is defined in the same block as the in-place op (a loop body mutating an outer value mutates it "
      "once per iteration); (3) every other use of x before the in-place op only reads it (a schema argument "
      "without alias annotation), so no alias of x can be read after; (4) the out-of-place result keeps x's "
      "dtype: guaranteed when every other argument is a scalar (an in-place op that succeeds never "
      "promotes), and for tensor operands (add_.Tensor, mul_.Tensor, ...) only when metadata proves x and "
      "the operands have the same dtype (run shape-prop first). Anything else is declined with the reason. "
      "Counter: functionalized.";

  std::string name() const override { return "functionalize"; }
  std::string description() const override { return "in-place ops to out-of-place where provably safe"; }
  std::string contract() const override { return kContract; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
