// Helpers for passes that read and create named constants.
#pragma once

#include "ir/ir.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace ptopt::rewriters {

// The tensor behind a get_attr value, if `v` is one.
std::optional<at::Tensor> constantTensor(const ir::Value* v);
// The tensor behind an argument that is a get_attr value (nullopt for None
// literals and non-constants).
std::optional<at::Tensor> constantTensorArg(const ir::Node* n, size_t i);
// True when some use may write `v` in place (ir::anyUseMayWrite: a written
// schema argument, an opaque or unknown schema-less user). Direct uses only:
// for the whole alias picture use ir::MutationAnalysis (ir/mutation.h).
bool isWrittenAnywhere(const ir::Value* v);
// Uses of `v` that read more than its metadata. aten::dim / size / numel,
// prim::device / dtype only look at rank, shape, dtype and device, which a
// fold that replaces `v` by a value of the same shape preserves (the input
// checks TorchScript keeps, e.g. BatchNorm's `_check_input_dim`).
size_t valueUses(const ir::Value* v);

// (Creating and erasing constants are edits: ir::Rewriter::addConstant and
// eraseConstantIfUnused.)
// `conv1.weight` -> `conv1`; names without a dot stay as they are.
std::string modulePrefix(const std::string& constantName);

}  // namespace ptopt::rewriters
