#include "quant/precision_policy.h"

#include "ir/op_views.h"

#include <cctype>
#include <stdexcept>

namespace ptopt::quant {

const char* opPrecisionName(OpPrecision p) {
  switch (p) {
    case OpPrecision::LowPrecision: return "low-precision";
    case OpPrecision::Fp32: return "fp32";
    case OpPrecision::Follow: return "follow";
    case OpPrecision::Promote: return "promote";
    case OpPrecision::Neutral: return "neutral";
    case OpPrecision::Factory: return "factory";
  }
  return "?";
}

namespace {

// The table. In-place variants (`relu_`) share the class of their operator.
const std::pair<OpPrecision, std::vector<const char*>> kTable[] = {
    // Compute-bound ops that gain most and whose accumulation the kernels do
    // in fp32 internally.
    {OpPrecision::LowPrecision,
     {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_convolution",
      "convolution", "conv_tbc", "linear", "matmul", "mm", "bmm", "mv", "addmm", "addmv", "addbmm", "baddbmm",
      "chain_matmul", "einsum", "prelu", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell",
      "scaled_dot_product_attention", "_native_multi_head_attention"}},
    // Range- or accuracy-sensitive ops: exponentials and logarithms overflow
    // or lose digits, reductions accumulate error, normalizations divide by
    // a variance.
    {OpPrecision::Fp32,
     {"softmax", "log_softmax", "softmin", "layer_norm", "group_norm", "batch_norm", "instance_norm",
      "native_layer_norm", "native_batch_norm", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
      "log_sigmoid", "logit", "pow", "float_power", "rsqrt", "reciprocal", "sqrt", "softplus", "erfinv", "acos",
      "asin", "cosh", "sinh", "tan", "sum", "prod", "cumsum", "cumprod", "mean", "var", "std", "var_mean",
      "std_mean", "norm", "frobenius_norm", "nuclear_norm", "linalg_norm", "linalg_vector_norm",
      "linalg_matrix_norm", "renorm", "dist", "cdist", "pdist", "cosine_similarity", "logsumexp", "mse_loss",
      "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "nll_loss2d", "nll_loss_nd", "cross_entropy_loss",
      "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss",
      "multi_margin_loss", "multilabel_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
      "poisson_nll_loss", "cosine_embedding_loss", "triplet_margin_loss", "upsample_nearest1d",
      "upsample_nearest2d", "upsample_nearest3d", "upsample_linear1d", "upsample_bilinear2d",
      "upsample_bicubic2d", "upsample_trilinear3d", "grid_sampler", "embedding"}},
    // One data input: the result has its precision.
    {OpPrecision::Follow,
     {"relu", "relu6", "hardtanh", "leaky_relu", "gelu", "silu", "sigmoid", "tanh", "hardswish", "hardsigmoid",
      "elu", "selu", "celu", "mish", "neg", "abs", "clamp", "clamp_min", "clamp_max", "dropout",
      "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "max_pool1d", "max_pool2d", "max_pool3d",
      "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
      "adaptive_avg_pool3d", "view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
      "t", "permute", "contiguous", "expand", "expand_as", "repeat", "slice", "select", "narrow",
      "index_select", "gather", "flip", "roll", "pad", "constant_pad_nd", "reflection_pad1d",
      "reflection_pad2d", "replication_pad1d", "replication_pad2d", "pixel_shuffle", "pixel_unshuffle",
      "channel_shuffle", "clone", "detach", "alias", "masked_fill", "fill", "zero", "view_as", "reshape_as",
      "movedim", "swapaxes", "numpy_T", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
      "randn_like", "new_zeros", "new_ones", "new_full", "new_empty", "copy", "index_put", "tril", "triu",
      // a list of pieces: they follow where the list is only unpacked (the pass)
      "split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "chunk", "unsafe_chunk", "unbind",
      "tensor_split"}},
    // Several data inputs of equal standing.
    {OpPrecision::Promote,
     {"add", "sub", "rsub", "mul", "div", "_add_relu", "where", "cat", "concat", "stack", "hstack", "vstack",
      "maximum", "minimum", "addcmul", "addcdiv", "lerp", "fmod", "remainder"}},
    {OpPrecision::Neutral,
     {"size", "dim", "numel", "len", "is_floating_point", "is_contiguous", "prim::device", "prim::layout",
      "__is__", "__isnot__"}},
    {OpPrecision::Factory,
     {"zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "rand", "randn", "eye",
      "scalar_tensor", "tensor"}},
};

std::string qualify(std::string op) {
  // Strip spaces; add the aten namespace to bare names.
  std::string out;
  for (char c : op)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  if (out.find("::") == std::string::npos) out = "aten::" + out;
  return out;
}

// `aten::relu_` -> `aten::relu` (but not `aten::__is__`).
std::string withoutInplaceSuffix(const std::string& op) {
  if (op.size() > 1 && op.back() == '_' && op[op.size() - 2] != '_') return op.substr(0, op.size() - 1);
  return op;
}

}  // namespace

PrecisionPolicy PrecisionPolicy::defaults() {
  PrecisionPolicy p;
  for (const auto& [cls, ops] : kTable)
    for (const char* op : ops) p.table_[qualify(op)] = cls;
  return p;
}

void PrecisionPolicy::set(const std::string& op, OpPrecision p) { table_[qualify(op)] = p; }

std::vector<std::string> PrecisionPolicy::parseOpList(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&](bool last) {
    std::string name;
    for (char c : cur)
      if (!std::isspace(static_cast<unsigned char>(c))) name += c;
    if (name.empty()) {
      if (last && out.empty()) return;  // an empty list
      throw std::invalid_argument("empty operator name in '" + text + "'");
    }
    out.push_back(name);
    cur.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ';') flush(false);
    else cur += c;
  }
  flush(true);
  return out;
}

OpPrecision PrecisionPolicy::classify(const std::string& op) const {
  auto it = table_.find(op);
  if (it == table_.end()) it = table_.find(withoutInplaceSuffix(op));
  return it == table_.end() ? OpPrecision::Fp32 : it->second;
}

bool PrecisionPolicy::knows(const std::string& op) const {
  return table_.count(op) || table_.count(withoutInplaceSuffix(op));
}

OpPrecision PrecisionPolicy::classify(const ir::Node& n) const {
  if (!n.isCall()) return OpPrecision::Fp32;
  const OpPrecision p = classify(n.target());
  // `zeros_like(x, dtype=torch.float32)` creates rather than follows.
  if (p == OpPrecision::Follow) {
    if (ir::OpView::of(const_cast<ir::Node*>(&n)).dtypeArg("dtype")) return OpPrecision::Factory;
  }
  return p;
}

}  // namespace ptopt::quant
