// Matching elementwise arithmetic written out in ops (fuse-gelu,
// fuse-hardswish): scalar operands as literals or 0-dim constant tensors,
// `t op c` with c near a wanted value.
#pragma once

#include "ir/ir.h"

#include <optional>
#include <string>
#include <vector>

namespace ptopt::fusion {

// A number literal, or a 0-dim constant tensor (tracing turns `0.5 * x`
// into mul.Tensor with one): its value.
std::optional<double> scalarValue(const ir::Arg& a);

// |value - wanted| within `relative` of |wanted| (float32 roundings of a
// constant pass at the default).
bool near(double value, double wanted, double relative = 1e-6);

// `n` is a call of `target` (Tensor or Scalar overload) without blocks.
bool isElementwiseOp(const ir::Node* n, const char* target);

// alpha of add(self, other, alpha) is the literal 1 (or defaulted).
bool unitAlpha(const ir::Node* add);

// `op(t, c)` or `op(c, t)` (for div only `t / c`) with the scalar c near
// `wanted` (an add's alpha 1): the tensor operand t, or null.
ir::Value* tensorTimesScalar(const ir::Node* n, const char* op, double wanted);

// The node computing `v`, or null.
inline const ir::Node* producer(const ir::Value* v) { return v ? v->node() : nullptr; }

// Why an elementwise pattern on `x` ending at `result` cannot become one
// op, or "": an interior node's value has another user or lies in another
// block, or x is not known to be a floating-point tensor of rank 1 or more
// (a 0-dim x could be widened by a 0-dim float64 constant).
std::string patternIneligible(const std::vector<ir::Node*>& interior, const ir::Node* result, const ir::Value* x);

}  // namespace ptopt::fusion
