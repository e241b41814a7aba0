// oneDNN convs (and linears, below) with their activation fused, tuned-kernels' `fused=`
// (kernels/tuned_kernels.h): a conv as `mkldnn::_convolution_pointwise(x,
// Wp, B, padding, stride, dilation, groups, attr, scalars, algorithm)`, the
// operator LibTorch 2.x registers for oneDNN convs with a post-op (what
// torch.compile's CPU backend calls), with its weight packed into oneDNN's
// blocked layout when the file loads: Wp = `aten::mkldnn_reorder_conv2d_weight(
// aten::to_mkldnn(W), padding, stride, dilation, groups)`, a function of
// constants (ir/load_time.h: the file stores the dense weight). The conv's
// only reader, when it is an activation oneDNN has as a post-op, is fused
// and dropped:
//   relu/relu_ -> "relu"; hardtanh/hardtanh_ with literal bounds (relu6) ->
//   "hardtanh" [min, max]; silu -> "swish"; hardswish -> "hardswish";
//   hardsigmoid -> "hardsigmoid"; sigmoid -> "sigmoid"; tanh -> "tanh";
//   gelu -> "gelu" with its approximation ("none" or "tanh") as algorithm;
//   leaky_relu with a literal slope -> "leaky_relu" [slope].
// A residual add comes first where there is one (ResNet's and
// MobileNetV2's blocks): when the conv's only reader is `add(y, other, 1)`,
// `add(other, y, 1)`, `add_(y, other, 1)` or `_add_relu(_)(y, other, 1)` with
// `other` of the conv result's shape and dtype, channels-last, and the sum's
// only reader is a relu (or the add is _add_relu), the conv becomes
// `mkldnn::_convolution_pointwise.binary(x, other, Wp, B, padding, stride,
// dilation, groups, "add", 1.0, "relu" or None, [], None)`, at the place of
// the last of them, when nothing between the conv and it has side effects
// (counter fused-add; a bottleneck's conv, add and relu ran 2.2x faster in
// one bf16 kernel here).
// Otherwise attr is "none". Activations and convs stay dense tensors: no
// region, no entry or exit reorders, and every other op reads them as it did.
//
// Conditions (fusedIneligible): aten::conv2d with int-list padding and
// literal stride/padding/dilation/groups, a constant 4-D weight of the
// input's dtype, a constant bias or none, an input shape-prop knows as a 4-D
// float32 or bfloat16 CPU tensor in channels-last (with a packed weight
// oneDNN returns channels-last whatever the input's layout, where conv2d
// returns the input's: on a contiguous input a later view would fail);
// and this LibTorch has the operator (2.x; 1.13 has none: declined once,
// with the reason). The pass also declines a conv this CPU's oneDNN cannot
// run in its dtype (oneDnnFormMissing, probed: an AVX2-only CPU has no bf16
// conv); --tune offers it anyway and reports it out. The result reloads in stock PyTorch 2.x built with oneDNN.
// The import raises it back (raiseFusedConvs: aten::conv2d, then the
// activation), so every pass reads a model ptopt wrote.
#pragma once

#include "ir/ir.h"
#include "ir/rewriter.h"
#include "rewriters/pass.h"

#include <set>
#include <string>
#include <vector>

namespace ptopt::kernels {

// The activation oneDNN fuses into conv `conv` as its post-op.
struct FusedPostOp {
  ir::Node* activation = nullptr;  // null: attr "none"
  std::string attr = "none";
  std::vector<double> scalars;
  std::string algorithm;  // gelu's approximation, else ""
};
FusedPostOp fusablePostOp(ir::Node* conv);

// Whether this LibTorch has mkldnn::_convolution_pointwise.
bool hasFusedConvs();

// Why `n` cannot run as a fused oneDNN conv, or "".
std::string fusedIneligible(const ir::Node& n);

// Rewrites the convs named in `names` (`*`: every one); a named conv that
// does not qualify is declined with the reason. Counter: fused.
void packFusedConvs(ir::Graph& graph, rewriters::PassContext& ctx, ir::Rewriter& rw,
                    const std::set<std::string>& names, rewriters::PassResult& r, const std::string& pass);

// The inverse, the raise step import runs on a model ptopt wrote.
void raiseFusedConvs(ir::Graph& g);

// Linears the same way (tuned-kernels' `fused=` names linears too):
// `aten::linear(x, W, b)` becomes `mkldnn::_linear_pointwise(x, Wp, b, attr,
// scalars, algorithm)`, the operator LibTorch 2.x registers for oneDNN's
// linear with a post-op (torch.compile's CPU backend calls it for bf16), with
// Wp = `mkldnn::_reorder_linear_weight(W, batch_size)` packed when the file
// loads (batch_size: the rows shape-prop saw, the product of the input's
// dimensions but the last, a hint for the blocking; other row counts run
// correctly). The linear's only reader, when it is an activation oneDNN has
// as a post-op (the conv list above), is fused and dropped; so is one that
// reads an aten::view or aten::reshape of the linear's result, that view
// being the linear's only reader and the activation the view's (GPT-2's
// Conv1D views its [B*T, N] result back to [B, T, N] before the GELU; an
// elementwise activation commutes with a view, so the view now reads the
// fused result; counter fused-through-view). With no activation, a residual
// add of a contiguous tensor of the linear's shape and dtype (alpha 1)
// becomes `mkldnn::_linear_pointwise.binary(x, other, Wp, b, "add")` at the
// add's place (counter fused-linear-add; 16 in LeViT; a relu after the sum
// stays an op). In bf16 on this
// project's AMX CPU the packed linear ran 1.5-1.65x faster than
// aten::linear on BERT's and ViT's shapes, bitwise equal; in fp32 1.1x
// (bench numbers, not a rule: --tune measures it per linear).
//
// Conditions (fusedLinearIneligible): aten::linear with a constant 2-D CPU
// dense weight not written in place, of the input's dtype (float32 or
// bfloat16), a constant bias or none, an input shape-prop knows on the CPU
// with rank 2 or more whose last dimension is the weight's input features;
// and this LibTorch has both operators (2.x; declined once in 1.13). The
// pass also declines a linear this CPU's oneDNN cannot run in its dtype
// (target::cpuOneDnnLinearRuns, probed: an AVX2-only CPU may have no bf16
// primitive); --tune offers it anyway and reports it out. The
// result reloads in stock PyTorch 2.x built with oneDNN; the import raises it
// back (raiseFusedLinears: aten::linear, then the activation).
bool hasFusedLinears();
std::string fusedLinearIneligible(const ir::Node& n);
void packFusedLinears(ir::Graph& graph, rewriters::PassContext& ctx, ir::Rewriter& rw,
                      const std::set<std::string>& names, rewriters::PassResult& r, const std::string& pass);
void raiseFusedLinears(ir::Graph& g);

// What `fused=` would fuse into conv or linear `n` as its post-op, by the
// rules above (the op's own eligibility is fusedIneligible's and
// fusedLinearIneligible's): an activation (also through GPT-2's view), a
// residual add, or nothing. --tune's whole-model alternatives fuse only the
// ops that absorb one: each removes the post-op's own call, where a plain
// oneDNN op may cost more per call than ATen's route (kernels/kernel_tuning.h).
enum class FusedPostOpKind { None, Activation, ResidualAdd };
FusedPostOpKind fusedPostOpKind(ir::Node* n);

}  // namespace ptopt::kernels
