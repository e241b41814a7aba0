// fuse-cudnn: conv + add + relu and conv + relu as cuDNN's fused kernels,
// for CUDA targets only.
// The contract is kContract below (`ptopt passes fuse-cudnn` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FuseCudnnPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "When PassContext::targetDevice is \"cuda\": `relu(add(conv2d(x, w, b, ...), z, alpha))` (also relu_, add_, "
      "and the aten::_add_relu / _add_relu_ that fuse-add-relu makes of the pair) becomes "
      "`aten::cudnn_convolution_add_relu(x, w, z, alpha, b, stride, padding, dilation, groups)`, and "
      "`relu(conv2d(x, w, b, ...))` (or relu_) becomes `aten::cudnn_convolution_relu(x, w, b, stride, padding, "
      "dilation, groups)`. cuDNN computes relu(conv(x, w) + alpha * z + b) in one kernel. The add commutes only "
      "with alpha = 1: add(z, conv, alpha) needs alpha = 1. An in-place add must write the conv's result (nobody "
      "else sees it), never the residual. Fires only on aten::conv2d, or a traced model's 2-D "
      "aten::_convolution / aten::convolution that is not transposed, has a zero output_padding and whose "
      "fixed cuDNN flags the fused kernel (which reads the global ones) agrees with (cudnn_enabled=True, "
      "deterministic=False, allow_tf32=True), with literal stride, padding (not "
      "\"same\"/\"valid\" strings), dilation and groups, a constant 4-D weight, a conv result with no other user, "
      "both nodes in one block, and a residual whose shape and dtype shape-prop knows to equal the conv's (cuDNN "
      "does not broadcast z). Weights that are contiguous in neither NCHW nor NHWC are stored contiguous (cuDNN "
      "would copy them on every call; new constant `<weight>_contig`); one-element int lists are expanded to "
      "two. On any other target, or a LibTorch without these ops, it changes nothing and says why once. Runs "
      "last in the presets: after channels-last (so it fuses whatever layout the convs ended up in; cuDNN's "
      "fused kernels take NHWC) and after cast (it keeps the convs' dtypes). The exported model records that it "
      "needs CUDA (ir/export: `ptopt_requires_cuda`). Counters: add-relu, relu, weights.";

  std::string name() const override { return "fuse-cudnn"; }
  std::string description() const override {
    return "CUDA targets: conv+add+relu / conv+relu -> cuDNN fused kernels";
  }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
  rewriters::PassEffects effects(const rewriters::PassContext&) const override {
    rewriters::PassEffects e;
    e.needsDevice = "cuda";
    return e;
  }
};

}  // namespace ptopt::fusion
