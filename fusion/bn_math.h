// BatchNorm parameters, the algebra of folding them into a preceding conv or
// linear, and the fold itself (foldBatchNormInto, shared by fold-conv-bn and
// fold-linear-bn). Computed with ATen in float64, cast back to the weight's
// dtype (so folding an fp32 model loses no more than one rounding).
#pragma once

#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "rewriters/pass.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::fusion {

// An inference-mode aten::batch_norm whose statistics and affine parameters
// are constants. `why` says what is missing when read() returns nullopt.
struct BatchNormParams {
  at::Tensor mean, var;
  std::optional<at::Tensor> gamma, beta;  // absent without affine parameters
  double eps = 1e-5;
  int64_t channels() const { return mean.numel(); }
  // gamma / sqrt(var + eps), in float64.
  at::Tensor scale() const;
  // beta - mean * scale, in float64 (the shift when there is no bias).
  at::Tensor shift() const;

  static std::optional<BatchNormParams> read(const ir::Node* bn, std::string& why);
};

// Every aten::batch_norm node, in program order.
std::vector<ir::Node*> batchNorms(const ir::Graph& g);
// Replaces the BatchNorm's result by `by`, erases the node and the constants
// only it read.
void replaceBatchNorm(ir::Rewriter& rw, const ir::BatchNormOp& bn, ir::Value* by);

// Folds BN into conv weights. Regular convs keep output channels on weight
// dim 0: W' = W * scale[o]. Transposed convs keep them on dim 1, per group:
// the weight is [Cin, Cout/groups, k...] and output channel
// o = g * (Cout/groups) + j lives at W[g * (Cin/groups) + i, j, ...].
at::Tensor foldWeight(const at::Tensor& weight, const at::Tensor& scale, bool transposed, int64_t groups);
// b' = (b - mean) * scale + beta; a missing conv bias counts as zero.
at::Tensor foldBias(const std::optional<at::Tensor>& bias, const BatchNormParams& bn, const at::ScalarType dtype);

// The end of fold-conv-bn and fold-linear-bn, once the match is checked:
// `producer` (a conv or a linear whose output only `bn` reads, with constant
// `weight` and constant or absent `bias`) gets the folded weight (foldWeight
// for a conv; W * s[:, None] for a linear's [out, in]) and the folded bias
// (foldBias) as new constants `<name>.bnfold`; the BatchNorm's uses read the
// producer's output (or `result`, a view of it such as LeViT's flatten, when
// given), the BatchNorm and the constants only it read are erased, and the
// producer's provenance notes the fold.
void foldBatchNormInto(ir::Rewriter& rw, const ir::OpView& producer, const ir::BatchNormOp& bn,
                       const BatchNormParams& params, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       ir::Value* result = nullptr);

}  // namespace ptopt::fusion
