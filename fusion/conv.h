// Helpers shared by the passes that fold constants into a conv or linear:
// give it a new weight and bias, and note the fold for drawings. Convs are
// recognized by ir::ConvOp (ir/op_views.h), linears by ir::LinearOp.
#pragma once

#include "ir/op_views.h"
#include "ir/rewriter.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace ptopt::fusion {

// Gives `producer` (a conv or linear view) a new constant weight and/or
// bias, named after the old ones plus `suffix` (`conv1.weight.bnfold`;
// `conv1.bias.bnfold` when it had no bias), and erases the old constants
// nobody reads any more. Never mutates a tensor.
void setWeightAndBias(ir::Rewriter& rw, const ir::OpView& producer, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, const std::string& suffix);

// Records on `into` that `absorbed` was folded into it, for drawings
// (`ptopt dot --diff`): `conv1 ← fold(conv1, bn1)`; a second fold extends the
// list (`conv1 ← fold(conv1, bn1, mul)`). Call before `absorbed` is erased.
void noteFold(ir::Rewriter& rw, ir::Node* into, const ir::Node* absorbed);

}  // namespace ptopt::fusion
