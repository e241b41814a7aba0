// onednn-blocked: run conv regions on oneDNN's own (blocked) tensors, with
// the conv weights reordered once, when the model loads, instead of on every
// call. The contract is kContract below (`ptopt passes onednn-blocked`
// prints it).
#pragma once

#include "rewriters/pass.h"

#include <string>
#include <vector>

namespace ptopt::layout {

class OneDnnBlockedPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Why: aten::conv2d and aten::mkldnn_convolution on dense tensors (NCHW or channels-last) make oneDNN reorder "
      "every weight into its blocked layout on every call (ResNet-50: 100 MB per call in fp32), and convert "
      "activations between dense and blocked around each conv. This pass runs a region of convs on oneDNN "
      "tensors (layout Mkldnn) from its first conv to its last use, and gives each conv its weight already "
      "reordered: `aten::mkldnn_reorder_conv2d_weight(aten::to_mkldnn(W), padding, stride, dilation, groups)`, a "
      "function of constants that the exporter computes when the model loads (ir/export.h: load-time values, a "
      "holder submodule whose __setstate__ reorders the saved dense weights), so the file stores ordinary dense "
      "tensors and reloads in stock PyTorch on any CPU with oneDNN. "
      "Members of a region (top-level block, in program order): eligible convs (aten::conv2d with literal "
      "stride/padding/dilation/groups and the int-list padding overload, or aten::mkldnn_convolution, with a "
      "constant 4-D weight and bias or None, on an input shape-prop knows to be a 4-D float32 or bfloat16 CPU "
      "tensor of the weight's dtype, a dtype this CPU's oneDNN runs such a conv in: probed, "
      "target/kernel_probes.h; an AVX2-only CPU has no bf16 one); and, once their tensor inputs are members, the ops LibTorch computes on "
      "oneDNN tensors: relu/relu_, sigmoid, gelu (none approximation), silu/silu_ (as x * sigmoid(x): no silu "
      "kernel there), add/add_ and mul of two members of the "
      "same shape (alpha 1), _add_relu and _add_relu_ (as add then relu), max_pool2d (dilation 1) and adaptive_avg_pool2d to 1x1 (other sizes need the input divisible by them). An "
      "in-place member must be the only user of the value it writes. A conv whose input is not a member starts "
      "from `aten::to_mkldnn(x)` (one per value); every use of a member's result by a non-member, or by the "
      "graph's outputs, reads `aten::to_dense` of it (one per value, placed after it), so everything outside the "
      "regions sees dense tensors as before. Regions with fewer than `min-convs` convs are not converted (the "
      "entry and exit reorders cost more); with `regions=` only the regions named there (by their first op's result). "
      "Fires only for a CPU target (oneDNN tensors are CPU tensors) on a "
      "LibTorch with these operators; declines name the reason. Numerics are oneDNN's (the same kernels "
      "mkldnn_convolution uses). Whether it pays depends on the machine (much with AVX-512 and bf16, little on "
      "AVX2): --tune decides it with whole-model A/Bs, all regions and then each region in turn, and adds it "
      "before the closing fuse-cudnn; given "
      "explicitly, it converts every region. Counters: regions, convs, entries, exits.";

  std::string name() const override { return "onednn-blocked"; }
  std::string description() const override {
    return "run conv regions on oneDNN tensors with weights reordered once, when the model loads";
  }
  std::string contract() const override { return kContract; }
  std::vector<rewriters::OptionSpec> optionSpecs() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

// The regions the pass converts on `graph` (min-convs applied), in program
// order: each one's id (the name of its first op's result: what regions=
// names) and conv count; for --tune's per-region decisions.
struct BlockedRegion {
  std::string id;
  size_t convs = 0;
};
std::vector<BlockedRegion> oneDnnBlockedRegions(ir::Graph& graph, int64_t minConvs);

// The pass's inverse, the raise step import runs on a model ptopt wrote
// (ir/raise.h): its regions come back dense. Passes know dense tensors only
// (fuse-add-relu would fuse an add_ and relu_ that run on oneDNN tensors into
// an op that has no kernel for them); the convs read W (the import rebuilt
// `mkldnn_reorder_conv2d_weight(to_mkldnn(W))` from the holder's
// __setstate__) and dense activations, as tuned-kernels leaves them, and the
// pass may convert them again. A decomposed silu (x * sigmoid(x)) comes back
// as silu.
void raiseBlockedRegions(ir::Graph& g);

}  // namespace ptopt::layout
