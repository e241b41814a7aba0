// canonicalize: one form per operator, so later passes match one form.
// The contract is kContract below (`ptopt passes canonicalize` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class CanonicalizePass : public Pass {
 public:
  static constexpr const char* kContract =
      "Rewrites, in this order (counters in brackets): "
      "(1) [list] `prim::ListConstruct` of literals of one kind (ints, floats or bools) becomes an inline "
      "list literal in each user, when every use is a list-typed argument of a schema'd operator that "
      "neither writes nor aliases it (no alias annotation); the ListConstruct is then erased. A list that "
      "anything may keep, write or return (aten::append, sort, TupleConstruct, the block output, generic "
      "`t[]` arguments) stays. "
      "(2) [conv, conv-transpose] `aten::_convolution` (traced models) and `aten::convolution` become "
      "`aten::conv1d/2d/3d` (transposed=False) or `aten::conv_transpose1d/2d/3d` (transposed=True), the rank "
      "taken from the weight's shape metadata when known, else from the stride list. Only when stride, "
      "padding, dilation and output_padding are literal lists of that rank (output_padding all zeros for a "
      "plain convolution) and the flags are literals. Bitwise equal: conv2d calls the same _convolution "
      "kernel with the global cuDNN flags, and on CPU the flags do nothing. On a non-CPU target "
      "`_convolution` is left alone: its flags (benchmark, deterministic, allow_tf32) are fixed in the graph "
      "and choose cuDNN algorithms and TF32, while conv2d would read the global ones. "
      "(3) [linear] `aten::addmm(b, x, aten::t(w), 1, 1)` becomes `aten::linear(x, w, b)` (bitwise: linear "
      "on a 2-D input with a bias is that very addmm). `aten::addmm(b, x, W, 1, 1)` with W a constant 2-D "
      "float tensor [in, out] read as it is (GPT-2's Conv1D) becomes `aten::linear(x, W_t, b)` with W_t a new "
      "contiguous constant `<W>_t` = W^T (the original erased when nothing else reads it): within float "
      "rounding, not bitwise (the GEMM reads the weight in the other order), and from then on a linear that "
      "the precision, int8 and packed-kernel passes take. `aten::add(aten::matmul|mm(x, aten::t(w)), b, 1)` "
      "becomes `aten::linear(x, w, b)` only when metadata proves x is 2-D, b is 1-D of the output width and "
      "all three share a dtype (within 1e-6, not bitwise: addmm adds the bias inside the GEMM). "
      "(3b) [silu] `aten::mul(x, aten::sigmoid(x))`, either order, becomes `aten::silu(x)` (SiLU as "
      "`run_decompositions()` writes it, so the fused-activation and int8 passes see it) when the sigmoid has "
      "no other reader and metadata shows x is a floating-point tensor: within float rounding, not bitwise. "
      "(4) No-ops, replaced by their input: [noop-dropout] `aten::dropout / feature_dropout / alpha_dropout "
      "/ feature_alpha_dropout(x, p, False)` (no metadata needed: these return x); [noop-slice] "
      "`aten::slice(x, dim, 0 or None, None or INT64_MAX, 1)`, the full slices tracing writes for `x[:, :k]`'s "
      "other dimensions, and `aten::slice(x, 1, 0 or None, k, 1)` on a 4-D x where metadata shows k at or past "
      "its channel count, which the weights fix (GhostNet's `out[:, :out_chs]` after a cat of that many "
      "channels; never a batch or sequence length, which vary with the input): a view of all of x with its "
      "sizes, strides and offset, which sees data written in place through either as x does, so replaced "
      "unless it or x may be reshaped in place (resize_, set_, as_strided_, an in-place view op, an out= "
      "argument, an operator of unknown aliasing or outside aten) or compared by identity "
      "(ir::MutationAnalysis::mayBeReshaped), nor when x is quantized; and, only when shape-prop "
      "metadata proves them no-ops (without metadata they do not fire and say so): [noop-view] `aten::view "
      "/ reshape(x, sizes)` with sizes equal to x's shape (one -1 allowed), under the same condition as "
      "noop-slice; [noop-contiguous] `aten::contiguous(x, "
      "torch.contiguous_format)` when x is contiguous; [noop-to] `aten::to(x, ...)` to x's own dtype (and "
      "device), copy=False, no memory-format change. Metadata describes shape-prop's example inputs, so "
      "these removals specialize the graph to those shapes, like every metadata-driven pass. Declines say "
      "why (non-literal arguments, missing metadata, a written list). Does not fire when no op has another "
      "form.";

  std::string name() const override { return "canonicalize"; }
  std::string description() const override { return "one form per op (literal lists, conv, linear, silu, no-op removal)"; }
  std::string contract() const override { return kContract; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
