// fuse-int8-activations: an int8 conv and the activation after it as one
// oneDNN kernel (onednn::qconv2d_pointwise with a post-op).
// The contract is kContract below (`ptopt passes fuse-int8-activations` prints it).
#pragma once

#include "rewriters/pass.h"

#include <optional>
#include <string>

namespace ptopt::quant {

class FuseInt8ActivationsPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Runs after quantize. PyTorch's quantized convs and linears fuse relu only: the quantize pass writes a conv "
      "followed by silu (EfficientNet's, MobileNetV3's hardswish), or a linear followed by gelu (BERT's, ViT's, "
      "GPT-2's MLP), as `quantized::conv2d(qx, packed, s, z)` / `quantized::linear`, `dequantize`, the "
      "activation in float, and `quantize_per_tensor` where an int8 op reads it: two extra passes over the "
      "tensor and one rounding more. This pass rewrites each such chain, `quantized::conv2d` or "
      "`quantized::linear` whose only reader is `aten::dequantize` whose only reader is `aten::silu`/`silu_` or "
      "`aten::hardswish`/`hardswish_` (the post-ops oneDNN's int8 kernels have: \"swish\", \"hardswish\"), or "
      "for a linear also `aten::gelu` (\"gelu\", its erf or tanh form), into oneDNN's "
      "`onednn::qconv2d_pointwise(X, x_scale, x_zero_point, Wp, w_scales, w_zero_points, bias, stride, padding, "
      "dilation, groups, output_scale, output_zero_point, output_dtype, attr, [], None)` or "
      "`onednn::qlinear_pointwise(X, x_scale, x_zero_point, Wp, w_scales, w_zero_points, bias, output_scale, "
      "output_zero_point, output_dtype, post_op, [], algorithm)`, the kernels torch.compile's x86 int8 "
      "lowering calls, on plain uint8 tensors: "
      "X is the op's input as uint8 (`aten::int_repr(qx)`, or the uint8 result of an op this pass rewrote, "
      "without a conversion), x_scale and x_zero_point its quantization, read from the op that made it "
      "(quantize_per_tensor, a quantized op's output parameters, a pass-through op's input; an op whose input "
      "quantization cannot be read is declined); Wp is `onednn::qconv_prepack` of the conv's int8 weight "
      "(unpacked from its packed parameters: per-channel or per-tensor symmetric qint8, not transposed), one per "
      "weight and input quantization, or `onednn::qlinear_prepack` of the linear's, one per weight, made "
      "when the file loads (ir/load_time.h: the file stores the int8 weight and its scales). The result: when "
      "every reader of the activation is `quantize_per_tensor` to "
      "quint8 with the same literal parameters, the op writes uint8 in those parameters and "
      "`aten::_make_per_tensor_quantized_tensor` gives the quantized tensor other int8 ops read (an op this "
      "pass rewrites reads the uint8 directly); otherwise it writes float32 (output_dtype float), the "
      "activation's result. Computed as oneDNN does it: the int32 sum scaled to float, the bias and the "
      "activation in float, then rounded once, where the chain rounded twice; the output is verified as any "
      "other. `convs=` names the convs and linears (their results' names, ';'-separated; `*`, the default, "
      "every one). `plain=` (default none) also moves int8 convs without such a chain (`quantized::conv2d`, "
      "`quantized::conv2d_relu`) to `onednn::qconv2d_pointwise` (attr \"none\" or \"relu\"), uint8 in and out "
      "alike: PyTorch's x86 engine runs some convs on a slow generic path on some CPUs (FBGEMM's depthwise "
      "convs whose channel count is not a multiple of 8, GhostNet's, took 20-50x oneDNN's time on an AVX2 "
      "CPU), and where it does, --tune's timing finds it. "
      "Not in `--quantize int8`'s pipeline: --tune offers it where the pipeline quantizes and keeps it when the "
      "whole model measures faster with it (quant/fuse_int8_activations_tuning.h); name it to have it anyway. "
      "Declined, once, with the reason: where this LibTorch has no "
      "onednn::qconv2d_pointwise (1.13) or this CPU's oneDNN does not run it (probed with a tiny conv, "
      "target/kernel_probes.h); for a .pt2 OUT (it holds no packed oneDNN weight); for a target other than the "
      "CPU. The result reloads in stock PyTorch 2.x. Counters: fused (conv chains rewritten), fused-linear "
      "(linear chains rewritten), onednn-conv (plain convs moved), int8-chained (ops reading another "
      "rewritten op's uint8 directly), float-out (ops writing float32).";

  std::string name() const override { return "fuse-int8-activations"; }
  std::string description() const override {
    return "int8 conv + silu/hardswish, linear + gelu/silu/hardswish -> onednn::qconv2d_pointwise / "
           "qlinear_pointwise with the activation fused (LibTorch 2.x)";
  }
  std::string contract() const override { return kContract; }
  std::vector<rewriters::OptionSpec> optionSpecs() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

// The activation the pass would fuse into `conv` (a quantized::conv2d or
// quantized::linear): "swish", "hardswish" or (a linear's) "gelu", or
// nullopt when `conv` is not the head of such a chain (op -> dequantize ->
// activation, each the only reader).
std::optional<std::string> int8ActivationChain(const ir::Node& conv);

// Whether `conv` is an int8 conv the pass moves with `plain=` (a
// quantized::conv2d or conv2d_relu heading no chain), and whether it is
// depthwise (one input channel per group), read from its packed weight in
// `graph`'s constants.
bool int8PlainConv(const ir::Node& conv);
bool int8DepthwiseConv(const ir::Graph& graph, const ir::Node& conv);

// Why the pass cannot run here at all (LibTorch, CPU, output format), or "".
std::string fuseInt8ActivationsMissing(const rewriters::PassContext& ctx);

}  // namespace ptopt::quant
