// Recognizes convolution nodes in their TorchScript forms.
//   aten::conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)
//   aten::conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
//   aten::_convolution / aten::convolution(input, weight, bias, stride, padding, dilation,
//                                          transposed, output_padding, groups, ...)
// In all of them the weight is argument 1 and the bias argument 2.
#pragma once

#include "ir/ir.h"

#include <optional>

namespace ptopt::fusion {

struct ConvInfo {
  bool transposed = false;
  int64_t groups = 1;
  static constexpr size_t kWeight = 1, kBias = 2;
};

// nullopt when `n` is not a conv, or its groups / transposed flag are not literals.
std::optional<ConvInfo> asConv(const ir::Node* n);

}  // namespace ptopt::fusion
