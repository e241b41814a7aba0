// Recognizes convolution nodes in their TorchScript forms.
//   aten::conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)
//   aten::conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
//   aten::_convolution / aten::convolution(input, weight, bias, stride, padding, dilation,
//                                          transposed, output_padding, groups, ...)
// In all of them the weight is argument 1 and the bias argument 2.
#pragma once

#include "ir/ir.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace ptopt::fusion {

struct ConvInfo {
  bool transposed = false;
  int64_t groups = 1;
  static constexpr size_t kWeight = 1, kBias = 2;
};

// nullopt when `n` is not a conv, or its groups / transposed flag are not literals.
std::optional<ConvInfo> asConv(const ir::Node* n);

// Gives `producer` (a conv or linear: weight at argument 1, bias at 2) a new
// constant weight and/or bias, named after the old ones plus `suffix`
// (`conv1.weight.bnfold`; `conv1.bias.bnfold` when it had no bias), and
// erases the old constants nobody reads any more. Never mutates a tensor.
void setWeightAndBias(ir::Graph& g, ir::Node* producer, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, const std::string& suffix);

// Records on `into` that `absorbed` was folded into it, for drawings
// (`ptopt dot --diff`): `conv1 ← fold(conv1, bn1)`; a second fold extends the
// list (`conv1 ← fold(conv1, bn1, mul)`). Call before `absorbed` is erased.
void noteFold(ir::Node* into, const ir::Node* absorbed);

}  // namespace ptopt::fusion
