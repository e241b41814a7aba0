#include "fusion/bn_math.h"

#include "rewriters/constants.h"

namespace ptopt::fusion {

using rewriters::constantTensorArg;

at::Tensor BatchNormParams::scale() const {
  at::Tensor s = (var.to(at::kDouble) + eps).rsqrt();
  return gamma ? s * gamma->to(at::kDouble) : s;
}

at::Tensor BatchNormParams::shift() const {
  at::Tensor s = -mean.to(at::kDouble) * scale();
  return beta ? s + beta->to(at::kDouble) : s;
}

std::optional<BatchNormParams> BatchNormParams::read(const ir::Node* bn, std::string& why) {
  if (!bn->is("aten::batch_norm") || bn->numArgs() < 9) { why = "not aten::batch_norm"; return std::nullopt; }
  const ir::Arg& training = bn->arg(5);
  if (!training.isLiteral() || !training.literal().is<bool>() || training.literal().as<bool>()) {
    why = "the BatchNorm is in training mode (run bn-inference first)";
    return std::nullopt;
  }
  BatchNormParams p;
  auto mean = constantTensorArg(bn, 3), var = constantTensorArg(bn, 4);
  if (!mean || !var) { why = "the running statistics are not constants"; return std::nullopt; }
  p.mean = *mean;
  p.var = *var;
  for (size_t i : {1u, 2u}) {
    const ir::Arg& a = bn->arg(i);
    if (a.isLiteral() && a.literal().isNone()) continue;
    auto t = constantTensorArg(bn, i);
    if (!t) { why = i == 1 ? "the BatchNorm weight is not a constant" : "the BatchNorm bias is not a constant"; return std::nullopt; }
    (i == 1 ? p.gamma : p.beta) = *t;
  }
  const ir::Arg& eps = bn->arg(7);
  if (!eps.isLiteral() || !eps.literal().is<double>()) { why = "eps is not a literal"; return std::nullopt; }
  p.eps = eps.literal().as<double>();
  if (p.mean.dim() != 1 || p.var.numel() != p.mean.numel() ||
      (p.gamma && p.gamma->numel() != p.mean.numel()) || (p.beta && p.beta->numel() != p.mean.numel())) {
    why = "the BatchNorm parameters have inconsistent shapes";
    return std::nullopt;
  }
  return p;
}

std::vector<ir::Node*> batchNorms(const ir::Graph& g) {
  std::vector<ir::Node*> out;
  g.walk([&](ir::Node* n) {
    if (n->is("aten::batch_norm")) out.push_back(n);
  });
  return out;
}

void replaceBatchNorm(ir::Node* bn, ir::Value* by) {
  std::vector<ir::Value*> params;
  for (size_t i = 1; i <= 4; ++i) params.push_back(bn->argValue(i));
  bn->output()->replaceAllUsesWith(by);
  bn->destroy();
  for (ir::Value* v : params) rewriters::eraseConstantIfUnused(v);
}

at::Tensor foldWeight(const at::Tensor& weight, const at::Tensor& scale, bool transposed, int64_t groups) {
  const at::Tensor w = weight.to(at::kDouble);
  std::vector<int64_t> ones(static_cast<size_t>(w.dim() - 2), 1);
  at::Tensor folded;
  if (!transposed) {
    std::vector<int64_t> shape = {scale.numel(), 1};
    shape.insert(shape.end(), ones.begin(), ones.end());
    folded = w * scale.reshape(shape);
  } else {
    // [Cin, Cout/g, k...] -> [g, Cin/g, Cout/g, k...]; scale -> [g, 1, Cout/g, 1...]
    std::vector<int64_t> grouped = {groups, w.size(0) / groups, w.size(1)};
    for (int64_t d = 2; d < w.dim(); ++d) grouped.push_back(w.size(d));
    std::vector<int64_t> scaleShape = {groups, 1, w.size(1)};
    scaleShape.insert(scaleShape.end(), ones.begin(), ones.end());
    folded = (w.reshape(grouped) * scale.reshape(scaleShape)).reshape(w.sizes());
  }
  return folded.to(weight.scalar_type()).contiguous(weight.suggest_memory_format());
}

at::Tensor foldBias(const std::optional<at::Tensor>& bias, const BatchNormParams& bn, const at::ScalarType dtype) {
  at::Tensor b = bias ? bias->to(at::kDouble) : at::zeros_like(bn.mean, at::TensorOptions().dtype(at::kDouble));
  at::Tensor folded = (b - bn.mean.to(at::kDouble)) * bn.scale();
  if (bn.beta) folded = folded + bn.beta->to(at::kDouble);
  return folded.to(dtype);
}

}  // namespace ptopt::fusion
