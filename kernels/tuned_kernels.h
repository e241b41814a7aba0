// tuned-kernels: the convolution kernel --tune chose, written into the graph.
// The contract is kContract below (`ptopt passes tuned-kernels` prints it).
#pragma once

#include "ir/rewriter.h"
#include "rewriters/name_list.h"
#include "rewriters/pass.h"
#include "rewriters/registry.h"
#include "target/kernel_probes.h"

#include <ATen/Tensor.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ptopt::kernels {

class TunedKernelsPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Rewrites the convs named in `mkldnn=` (the names of their results, ';'-separated; --tune fills it with the "
      "convs where oneDNN measured faster) from `aten::conv2d(x, w, b, stride, padding, dilation, groups)` to "
      "`aten::mkldnn_convolution(x, w, b, padding, stride, dilation, groups)`: the same convolution (the same "
      "schema in LibTorch 1.13 and 2.x; padding comes before stride), but always through oneDNN, where ATen's "
      "dispatch would pick its own im2col/slow path for some shapes (1x1 convs on small inputs, some thread "
      "counts). The result reloads in stock PyTorch. Preserves the dtype and the memory format (oneDNN returns "
      "the layout of its input, as conv2d does). Fires only for a CPU target, on aten::conv2d (not the "
      "\"same\"/\"valid\" string-padding overload) with literal stride, padding, dilation and groups, a "
      "constant 4-D weight, an input that shape-prop knows to be a 4-D float32 or bfloat16 tensor on the CPU; "
      "a named conv that does not qualify is declined with the reason, and a name that matches nothing is "
      "ignored (another method). Runs after channels-last and cast, which know conv2d but not "
      "mkldnn_convolution. "
      "`prepacked=` names convs (aten::conv2d or aten::mkldnn_convolution, with the same conditions and an input "
      "whose full shape shape-prop knows) that become `mkldnn_prepacked::conv2d_run(x, "
      "mkldnn_prepacked::conv2d_prepack(w, b, stride, padding, dilation, groups, input_size, \"none\"))`: oneDNN "
      "with the weight reordered into its blocked layout once, on dense tensors (any layout; the result has the "
      "input's), so it needs no region and no entry or exit reorders; a relu (or relu_) that is the conv's only "
      "reader becomes the pack's attr \"relu\" (oneDNN's post-op; the relu node goes). The pack is a function of constants, made "
      "when the file loads (ir/load_time.h: the holder's __setstate__ packs the saved dense weight); input_size is "
      "the shape shape-prop saw, a hint for the weight's layout (other shapes run correctly). Declined, once, where "
      "this LibTorch has no mkldnn_prepacked operators. A conv named in both lists is packed. "
      "`prepacked=` also names linears: `aten::linear(x, W, b)` with a constant 2-D weight on an input shape-prop "
      "knows as [N, C], [N, T, C] or [N, H, W, C] (ConvNeXt's MLP) becomes the same prepacked conv with the weight "
      "stored as [O, C, 1, 1], on a channels-last 4-D view of the input's memory (`x.unsqueeze(2).unsqueeze(3)`, "
      "`x.permute(0, 2, 1).unsqueeze(2)`, `x.permute(0, 3, 1, 2)`) and its result viewed back (`flatten(1)`, "
      "`squeeze(2).permute(0, 2, 1)`, `permute(0, 2, 3, 1)`, then `contiguous()`, a no-op where the conv's result "
      "is channels-last, as it is for these views: contiguous, as linear's result): oneDNN's blocked "
      "GEMM where ATen's linear calls the BLAS. Other ranks are declined. The "
      "import reads a packed linear back as the 1x1 conv between the views. `*` in a list names every conv (and, "
      "in `prepacked=`, every linear; each one that does not qualify is declined with the reason). "
      "`xnnpack=` names convs that run on XNNPACK instead (kernels/xnnpack_convs.h): "
      "`prepacked::conv2d_clamp_run(x, ctx)` with the packed context a constant that TorchScript pickles by its "
      "dense weight, a following relu/relu6/hardtanh fused as its clamp; float32 only, where this LibTorch has "
      "XNNPACK (declined, with the reason, where it does not); a conv named there and in another list runs on "
      "XNNPACK; `xnnpack=` also names linears (float32, input of rank 2 or more): `prepacked::linear_clamp_run(x, "
      "ctx)`, a following relu/hardtanh fused the same way. `fused=` names convs that become `mkldnn::_convolution_pointwise(x, Wp, b, ..., attr, scalars, "
      "algorithm)` (kernels/onednn_fused_convs.h): oneDNN with the weight packed when the model loads and the "
      "conv's only reader fused as its post-op when it is relu, hardtanh/relu6, silu, hardswish, hardsigmoid, "
      "sigmoid, tanh, gelu or leaky_relu, or, first, a residual add of a channels-last tensor of its shape (and the "
      "relu after it) as `mkldnn::_convolution_pointwise.binary`, on channels-last dense tensors (LibTorch 2.x; "
      "declined with the reason "
      "in 1.13 or on other inputs); a conv named there and in a list other than xnnpack= is fused. `fused=` also names "
      "linears: `mkldnn::_linear_pointwise(x, mkldnn::_reorder_linear_weight(W, rows), b, attr, scalars, "
      "algorithm)`, oneDNN's linear with its weight packed when the model loads and the same post-ops, on an input "
      "of rank 2 or more (float32 or bfloat16, the weight's dtype; LibTorch 2.x); an activation that reads a "
      "view or reshape of the linear's result (the view its only reader, as GPT-2's Conv1D writes it) is fused "
      "too, the view reading the fused result; with no activation, a residual add of a contiguous tensor of the "
      "linear's shape and dtype (alpha 1; a transformer block's output projection) becomes "
      "`mkldnn::_linear_pointwise.binary(x, other, Wp, b, \"add\")` at the add's place (a relu after the sum stays "
      "an op: that form has no unary post-op). Every list writes a oneDNN conv or linear only in a dtype this "
      "CPU's oneDNN runs in that form (probed once per form and dtype, target/kernel_probes.h: an AVX2-only CPU "
      "has no bf16 conv); otherwise declined with the reason. `skip=` names convs and linears that every list "
      "leaves as they are, `*` included (--tune's fused network at its per-op precision: the ops it kept in "
      "fp32, a squeeze-excite's 1x1 convs on a 1x1 image among them, stay on aten::conv2d, whose per-call cost "
      "is a fraction of oneDNN's there). "
      "Counters: mkldnn, prepacked, prepacked-linear, xnnpack, xnnpack-linear, fused, fused-add, fused-linear, "
      "fused-linear-add, fused-through-view.";

  std::string name() const override { return "tuned-kernels"; }
  std::string description() const override {
    return "--tune's kernel choices: the named convs -> aten::mkldnn_convolution, prepacked oneDNN convs (with a fused "
           "activation: fused=) or XNNPACK; "
           "the named linears -> prepacked 1x1 convs";
  }
  std::string contract() const override { return kContract; }
  std::vector<rewriters::OptionSpec> optionSpecs() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;

 private:
  void packConvs(ir::Graph& graph, rewriters::PassContext& ctx, ir::Rewriter& rw, const std::set<std::string>& names,
                 rewriters::PassResult& r);
  void packLinear(ir::Graph& graph, ir::Rewriter& rw, ir::Node* n, const c10::TypePtr& contextType);
};

// Why an op with weight `w` on an input shape-prop saw as `m` (its shape
// checked by the caller) cannot run on oneDNN (dtype float32 or bfloat16,
// the weight's; on the CPU), or "".
std::string onednnDtypeIneligible(const ir::TensorMeta& m, const at::Tensor& w);

// Why this CPU's oneDNN cannot run conv `n` (aten::conv2d, aten::linear as
// a 1x1 conv, or aten::mkldnn_convolution, eligible otherwise) in `form` in
// its input's dtype (probed: target/kernel_probes.h), or "". The passes ask
// it before they write a oneDNN kernel; --tune offers the candidate anyway
// and reports it out on this machine, with oneDNN's own error.
std::string oneDnnFormMissing(const ir::Node& n, target::OneDnnConv form);

// Why `n` cannot become aten::mkldnn_convolution, or "" when it can.
std::string mkldnnIneligible(const ir::Node& n);
// Why `n` (aten::conv2d or aten::mkldnn_convolution) cannot run prepacked, or "".
std::string prepackIneligible(const ir::Node& n);
// The views that make a linear's input of rank 2, 3 or 4 (its channels
// last) a 4-D channels-last conv input on the same memory, and the conv's
// result back into linear's: one list for the pass and its benchmark.
struct LinearView {
  enum class Kind { Permute, Unsqueeze, Squeeze, Flatten, Contiguous } kind;
  std::vector<int64_t> dims;  // permute's order, else the one dim (flatten: the start)
};
std::vector<LinearView> linearInputViews(size_t rank);
std::vector<LinearView> linearOutputViews(size_t rank);
at::Tensor applyViews(at::Tensor t, const std::vector<LinearView>& views);

// Why linear `n` cannot have its weight packed when the model loads, or "":
// aten::linear with all its arguments, a constant 2-D dense CPU weight not
// written in place, a constant bias or None, an input shape-prop knows with
// rank 2 or more (at most maxRank) whose last dimension is the weight's
// input features, and onednnDtypeIneligible's dtypes. Shared by the packed
// 1x1 conv (rank 4 at most) and oneDNN's own linear (any rank).
std::string packedLinearIneligible(const ir::Node& n, std::optional<size_t> maxRank);
// Why `n` (aten::linear) cannot run as a prepacked 1x1 conv, or "".
std::string linearPrepackIneligible(const ir::Node& n);
// The pass's inverse, the raise step import runs on a model ptopt wrote
// (ir/raise.h): `conv2d_run(x, conv2d_prepack(W, B, stride, padding,
// dilation, groups, input_size, "none"))`, the packed object made when the
// file loads, is aten::conv2d again, which every pass knows; tuned-kernels
// may pack it again.
void raisePrepackedConvs(ir::Graph& g);
// Whether this LibTorch has mkldnn_prepacked::conv2d_prepack and conv2d_run.
bool hasPrepackedConvs();

// "a;b;c" -> {a, b, c}, and back (rewriters/name_list.h).
using rewriters::joinNameList;
using rewriters::parseNameList;

}  // namespace ptopt::kernels
