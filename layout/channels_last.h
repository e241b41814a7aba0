// channels-last: run conv regions in NHWC (channels_last / channels_last_3d)
// end to end, with as few layout conversions as possible.
// The contract is kContract below (`ptopt passes channels-last` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::layout {

class ChannelsLastPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Runs conv regions of the top-level block in channels-last (channels_last_3d for 5-D) end to end, with as "
      "few layout conversions as possible. "
      "Anchors: the convs ir::ConvOp recognizes (conv2d/conv3d, conv_transpose2d/3d, _convolution/convolution) "
      "whose transposed flag and groups are literals and whose weight is a 4-D or 5-D constant nobody writes, of "
      "a kind the target device actually computes in channels-last (target/capabilities.h: on a CPU target probed "
      "once with a tiny conv, LibTorch 1.13 does so for conv2d only, so conv3d and transposed convs decline there, "
      "whatever the ISA; on a CUDA target every kind, as cuDNN does, probed on the GPU when there is one and never "
      "on the CPU). "
      "The analysis (one forward walk in program order, op classes from layout/op_layout_table.h) marks a value "
      "channels-last when an anchor produces it, or a layout-preserving op (pointwise, batch_norm, pooling, "
      "upsample, pad, cat, to(dtype), clone, keepdim spatial reductions) whose data operands are channels-last, "
      "broadcast-safe (literals, scalars, tensors of lower rank, constants with spatial size 1) or convertible (a "
      "same-rank tensor: it gets one entry conversion); an operand of unknown rank keeps the op out. A permute "
      "NCHW -> NHWC of a channels-last value whose users all produce fresh contiguous results (layer_norm, "
      "linear, matmul, a permute back) stays a free view; a permute NHWC -> NCHW starts a region through a "
      "conversion that costs nothing when its input is NHWC-contiguous (ConvNeXt blocks). "
      "Rewrite: each anchor's weight is replaced by a channels-last copy, a new constant <name>_nhwc (the old one "
      "may be shared with another method; torch.jit.save keeps strides, so the saved buffer is channels-last; a "
      "weight also read by a conv outside the regions stays as it is); one "
      "aten::contiguous(x, memory_format=channels_last) per value entering a region (an anchor whose input rank "
      "is unknown converts internally instead, as ATen's conv does for a channels-last weight); one "
      "aten::contiguous(x) per channels-last value that a breaker reads (view, flatten, reshape, permute, "
      "transpose, matmul/linear, reductions over channels, unknown ops, control-flow nodes: conversions stay at "
      "the block boundary), shared by all its breaker users, placed before the first; and, with "
      "keep-output-layout=true (the default), before graph outputs, so outputs keep the contiguous format. A view "
      "of a region value therefore always gets contiguous() first. Values that may be written in place (through "
      "any alias) and that a breaker reads are converted right after their definition instead, so aliasing and "
      "in-place writes stay exact. Adjacent conversions collapse (contiguous(contiguous(x, A), B) -> "
      "contiguous(x, B); a repeated format is dropped). "
      "mode=on converts every anchor; mode=off does nothing; mode=auto (default) decides per region (connected "
      "channels-last nodes) and declines regions with fewer than 2 convs, with only small convs (<= 16 input and "
      "output channels), with tiny outputs (largest conv output <= 8x8, when shape-prop metadata is present), or "
      "where grouped convs with several channels per group carry over half of the conv work. Metadata of "
      "rewritten values gets the new memory format. "
      "Regions are named by the result of their first conv in program order (`%x0_1.1`; a region that splits "
      "after another was dropped keeps the name its first conv's region had), the same on every run of the same "
      "pipeline on the same model. regions=<names, ';'-separated> (default: empty, every region) converts only the "
      "regions so named, in any mode (mode=auto still declines a listed region that does not pay); every other "
      "region is declined by selection, and a name that is no region's is declined on the graph's outputs (it "
      "may be another method's). --tune fills it with the regions measured faster in channels-last; "
      "layout::channelsLastRegions lists the regions as mode=on finds them. "
      "Counters: convs, weights, entries, exits, pinned, cancelled, regions (declined-regions in auto mode, "
      "unselected-regions with regions=); --explain names each converted region and why the others were not.";

  std::string name() const override { return "channels-last"; }
  std::string description() const override {
    return "run conv regions in channels-last (NHWC) with few layout conversions";
  }
  std::string contract() const override { return kContract; }
  std::vector<rewriters::OptionSpec> optionSpecs() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
  rewriters::PassEffects effects(const rewriters::PassContext&) const override {
    rewriters::PassEffects e;
    e.changesLayout = true;
    e.everywhere = {{"mode", "on"}, {"regions", ""}};  // every conv region
    return e;
  }
};

// A conv region as channels-last{mode=on} finds it, before any regions=
// selection (--tune decides per region).
struct ChannelsLastRegion {
  std::string id;                      // what regions= names it by: the result name of its first conv
  std::vector<const ir::Node*> nodes;  // the nodes it computes in channels-last, in program order
  std::vector<const ir::Node*> convs;  // its convs, in program order
  std::string autoDecline;             // why mode=auto declines it; "" when mode=auto converts it
};

// "region %<id> (<n> convs, from <module>)": how messages name a region. The
// id is an IR value name, which says little in a model without debug names
// (`%9.2`); the first conv's module scope (`features.0.0`), when the source
// had it, says where the region starts.
std::string regionLabel(const std::string& id, size_t convs, const ir::Node* firstConv);

// The regions of `graph`'s top-level block, in program order of their first
// conv; changes nothing (`ctx` gives the target device; declines are not
// recorded).
std::vector<ChannelsLastRegion> channelsLastRegions(ir::Graph& graph, const rewriters::PassContext& ctx);

}  // namespace ptopt::layout
