// XNNPACK convs, tuned-kernels' `xnnpack=` (kernels/tuned_kernels.h): a conv
// as `prepacked::conv2d_clamp_run(x, prepacked::conv2d_clamp_prepack(W, B,
// stride, padding, dilation, groups, min, max))`, the context a function of
// constants made when the file loads (ir/load_time.h: the file stores the
// dense weight, so it reloads in stock PyTorch built with XNNPACK), and the
// conv's only reader, when it is relu/relu_ (min 0) or hardtanh/hardtanh_
// with literal bounds (relu6), fused into the clamp and dropped.
// XNNPACK picks its own kernels (not ATen's or oneDNN's, whatever their ISA
// caps say), on the thread pool LibTorch sizes with torch.set_num_threads.
//
// Conditions (xnnpackIneligible): aten::conv2d with int-list padding and
// literal stride/padding/dilation/groups, a constant 4-D float32 CPU weight
// not written in place, a constant bias or none, an input shape-prop knows
// as a 4-D float32 CPU tensor; and this LibTorch's XNNPACK runs here
// (target::xnnpackConvRuns: Debian's 1.13 has it, PyPI's x86 wheels do not).
// Linears the same way: `aten::linear(x, W, b)` with a constant 2-D float32
// weight on an input shape-prop knows as a float32 CPU tensor of rank 2 or
// more becomes `prepacked::linear_clamp_run(x, prepacked::linear_clamp_prepack(
// W, B, min, max))` (XNNPACK's GEMM over the last dim, any leading dims), a
// following relu/hardtanh fused the same way (xnnpackLinearIneligible).
// The import raises them back (raiseXnnpackConvs: aten::conv2d or
// aten::linear, then relu or hardtanh for the clamp), so every pass reads a
// model ptopt wrote.
#pragma once

#include "ir/ir.h"
#include "ir/rewriter.h"
#include "rewriters/pass.h"

#include <ATen/core/ivalue.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ptopt::kernels {

// The activation XNNPACK fuses into conv `conv` as its clamp, or none.
struct FusedClamp {
  ir::Node* activation = nullptr;  // null: no clamp
  std::optional<double> min, max;
};
FusedClamp fusableClamp(ir::Node* conv);

// Why `n` cannot run as an XNNPACK conv, or "".
std::string xnnpackIneligible(const ir::Node& n);
// Why linear `n` cannot run as an XNNPACK linear, or "".
std::string xnnpackLinearIneligible(const ir::Node& n);

// The XNNPACK context of conv or linear `n` (eligible) with `clamp`, made now.
c10::IValue xnnpackContext(const ir::Node& n, const FusedClamp& clamp);

// Rewrites the convs and linears named in `names` (`*`: every one); a named
// op that does not qualify is declined with the reason. Counters: xnnpack,
// xnnpack-linear.
void packXnnpackConvs(ir::Graph& graph, rewriters::PassContext& ctx, ir::Rewriter& rw,
                      const std::set<std::string>& names, rewriters::PassResult& r, const std::string& pass);

// The inverse, the raise step import runs on a model ptopt wrote.
void raiseXnnpackConvs(ir::Graph& g);

}  // namespace ptopt::kernels
