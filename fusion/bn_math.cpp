#include "fusion/bn_math.h"

#include "fusion/conv.h"
#include "rewriters/constants.h"

#include <algorithm>

namespace ptopt::fusion {

using rewriters::constantTensor;

at::Tensor BatchNormParams::scale() const {
  at::Tensor s = (var.to(at::kDouble) + eps).rsqrt();
  return gamma ? s * gamma->to(at::kDouble) : s;
}

at::Tensor BatchNormParams::shift() const {
  at::Tensor s = -mean.to(at::kDouble) * scale();
  return beta ? s + beta->to(at::kDouble) : s;
}

std::optional<BatchNormParams> BatchNormParams::read(const ir::Node* node, std::string& why) {
  auto bn = ir::BatchNormOp::match(node);
  if (!bn || !bn->has("cudnn_enabled")) { why = "not aten::batch_norm"; return std::nullopt; }
  const auto training = bn->training();
  if (!training || *training) {
    why = "the BatchNorm is in training mode (run bn-inference first)";
    return std::nullopt;
  }
  BatchNormParams p;
  auto mean = constantTensor(bn->runningMean()), var = constantTensor(bn->runningVar());
  if (!mean || !var) { why = "the running statistics are not constants"; return std::nullopt; }
  p.mean = *mean;
  p.var = *var;
  // gamma and beta: None without affine parameters, else constants.
  for (const char* name : {"weight", "bias"}) {
    if (bn->isNone(name)) continue;
    auto t = constantTensor(bn->value(name));
    const bool isWeight = std::string(name) == "weight";
    if (!t) { why = isWeight ? "the BatchNorm weight is not a constant" : "the BatchNorm bias is not a constant"; return std::nullopt; }
    (isWeight ? p.gamma : p.beta) = *t;
  }
  const ir::Literal* eps = bn->literal("eps");
  if (!eps || !eps->is<double>()) { why = "eps is not a literal"; return std::nullopt; }
  p.eps = eps->as<double>();
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

void replaceBatchNorm(ir::Rewriter& rw, const ir::BatchNormOp& bn, ir::Value* by) {
  std::vector<ir::Value*> params;
  for (ir::Value* v : {bn.weight(), bn.bias(), bn.runningMean(), bn.runningVar()})
    if (v && std::find(params.begin(), params.end(), v) == params.end()) params.push_back(v);  // one constant may fill two
  rw.replace(bn.node(), by);
  for (ir::Value* v : params) rw.eraseConstantIfUnused(v);
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

void foldBatchNormInto(ir::Rewriter& rw, const ir::OpView& producer, const ir::BatchNormOp& bn,
                       const BatchNormParams& params, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  ir::Node* node = producer.node();
  at::Tensor newWeight;
  if (auto conv = ir::ConvOp::match(node)) {
    newWeight = foldWeight(weight, params.scale(), conv->transposed(), conv->groups());
  } else {
    // A linear weight is [out, in]: out features on dim 0, like a conv's.
    newWeight = (weight.to(at::kDouble) * params.scale().unsqueeze(1)).to(weight.scalar_type());
  }
  const at::Tensor newBias = foldBias(bias, params, weight.scalar_type());
  setWeightAndBias(rw, producer, newWeight, newBias, ".bnfold");
  noteFold(rw, node, bn.node());
  replaceBatchNorm(rw, bn, node->output());
}

}  // namespace ptopt::fusion
