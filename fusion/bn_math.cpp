#include "fusion/bn_math.h"

#include "fusion/conv.h"
#include "rewriters/constants.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <optional>

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

namespace {

// weight * scale, one factor per output channel, computed in float64 a
// bounded chunk of dim-0 rows at a time (2 MB of float64, reused) and written
// in the weight's dtype and memory format: a 1 GB weight never exists whole
// in float64, and no chunk allocates. `scaleOfRows(r, n)` gives the factors
// of rows [r, r+n), shaped to broadcast against them; a chunk never spans
// two of its `rowsPerScale` blocks. Elementwise, so the result is bitwise
// what the whole-tensor product gives.
template <typename ScaleOfRows>
at::Tensor scaleInChunks(const at::Tensor& weight, int64_t rowsPerScale, ScaleOfRows scaleOfRows) {
  const c10::MemoryFormat format = weight.suggest_memory_format();
  at::Tensor out = at::empty(weight.sizes(), weight.options().memory_format(format));
  const int64_t rows = weight.dim() ? weight.size(0) : 0;
  if (rows == 0 || weight.numel() == 0) return out;
  const int64_t perRow = weight.numel() / rows;
  const int64_t chunk = std::min(rowsPerScale, std::max<int64_t>(1, (int64_t{1} << 18) / perRow));
  std::vector<int64_t> bufferShape = weight.sizes().vec();
  bufferShape[0] = chunk;
  at::Tensor buffer = at::empty(bufferShape, weight.options().dtype(at::kDouble).memory_format(format));
  for (int64_t r = 0; r < rows;) {
    const int64_t n = std::min({chunk, rows - r, rowsPerScale - r % rowsPerScale});
    at::Tensor part = buffer.narrow(0, 0, n);
    part.copy_(weight.narrow(0, r, n));
    part.mul_(scaleOfRows(r, n));
    out.narrow(0, r, n).copy_(part);
    r += n;
  }
  return out;
}

// The common case in one pass over the bytes: a row-major float32 weight,
// viewed as [rows, mid, inner], where element (r, j, i) takes the factor
// scale[(r / rowsPerBlock) * mid + j]. Each element is widened to float64,
// multiplied and rounded back: what scaleInChunks computes, element by
// element, so bitwise the same, without the buffer's two extra passes.
// nullopt for other dtypes and layouts.
std::optional<at::Tensor> scaleRowMajorFloat(const at::Tensor& weight, const at::Tensor& scale, int64_t rowsPerBlock,
                                             int64_t mid) {
  if (weight.scalar_type() != at::kFloat || weight.dim() < 2 || weight.numel() == 0 || !weight.is_contiguous() ||
      weight.suggest_memory_format() != c10::MemoryFormat::Contiguous)
    return std::nullopt;
  const at::Tensor factors = scale.to(at::kDouble).contiguous();
  at::Tensor out = at::empty(weight.sizes(), weight.options());
  const int64_t rows = weight.size(0), inner = weight.numel() / rows / mid;
  const float* in = weight.data_ptr<float>();
  float* result = out.data_ptr<float>();
  const double* factor = factors.data_ptr<double>();
  at::parallel_for(0, rows, std::max<int64_t>(1, (int64_t{1} << 16) / (mid * inner)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t j = 0; j < mid; ++j) {
        const double k = factor[(r / rowsPerBlock) * mid + j];
        const int64_t base = (r * mid + j) * inner;
        for (int64_t i = 0; i < inner; ++i) result[base + i] = static_cast<float>(static_cast<double>(in[base + i]) * k);
      }
  });
  return out;
}

// Scale along dim 0 (conv and linear weights: output channels first).
at::Tensor scaleRows(const at::Tensor& weight, const at::Tensor& scale) {
  if (auto fast = scaleRowMajorFloat(weight, scale, 1, 1)) return *fast;
  std::vector<int64_t> shape(static_cast<size_t>(weight.dim()), 1);
  const int64_t rows = weight.dim() ? weight.size(0) : 0;
  return scaleInChunks(weight, std::max<int64_t>(rows, 1), [&](int64_t r, int64_t n) {
    shape[0] = n;
    return scale.narrow(0, r, n).reshape(shape);
  });
}

}  // namespace

at::Tensor foldWeight(const at::Tensor& weight, const at::Tensor& scale, bool transposed, int64_t groups) {
  if (!transposed) return scaleRows(weight, scale);
  // A transposed conv's weight is [Cin, Cout/g, k...]: rows of group g
  // (Cin/g of them) take the factors of output channels g*Cout/g ... along
  // dim 1.
  const int64_t inPerGroup = weight.size(0) / groups, outPerGroup = weight.size(1);
  if (auto fast = scaleRowMajorFloat(weight, scale, inPerGroup, outPerGroup)) return *fast;
  std::vector<int64_t> shape(static_cast<size_t>(weight.dim()), 1);
  shape[1] = outPerGroup;
  return scaleInChunks(weight, inPerGroup, [&](int64_t r, int64_t) {
    return scale.narrow(0, (r / inPerGroup) * outPerGroup, outPerGroup).reshape(shape);
  });
}

at::Tensor foldBias(const std::optional<at::Tensor>& bias, const BatchNormParams& bn, const at::ScalarType dtype) {
  at::Tensor b = bias ? bias->to(at::kDouble) : at::zeros_like(bn.mean, at::TensorOptions().dtype(at::kDouble));
  at::Tensor folded = (b - bn.mean.to(at::kDouble)) * bn.scale();
  if (bn.beta) folded = folded + bn.beta->to(at::kDouble);
  return folded.to(dtype);
}

void foldBatchNormInto(ir::Rewriter& rw, const ir::OpView& producer, const ir::BatchNormOp& bn,
                       const BatchNormParams& params, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       ir::Value* result) {
  ir::Node* node = producer.node();
  at::Tensor newWeight;
  if (auto conv = ir::ConvOp::match(node)) {
    newWeight = foldWeight(weight, params.scale(), conv->transposed(), conv->groups());
  } else {
    // A linear weight is [out, in]: out features on dim 0, like a conv's.
    newWeight = scaleRows(weight, params.scale());
  }
  const at::Tensor newBias = foldBias(bias, params, weight.scalar_type());
  setWeightAndBias(rw, producer, newWeight, newBias, ".bnfold");
  noteFold(rw, node, bn.node());
  replaceBatchNorm(rw, bn, result ? result : node->output());
}

}  // namespace ptopt::fusion
