// The one table of how operators treat the memory format of 4-D/5-D tensors,
// read by channels-last (layout/channels_last.h).
//
// Classes:
//   Anchor      every conv form ir::ConvOp recognizes (conv1d..3d,
//               conv_transpose1d..3d, _convolution, convolution); the pass
//               keeps those with a 4-D/5-D weight: the op that makes a
//               region run channels-last (its weight is stored channels-last).
//   Preserving  the output has the layout of the data operands: pointwise
//               unary and binary ops (also broadcasting with per-channel
//               constants), batch_norm, max/avg/adaptive pooling, upsample,
//               pad, cat, to(dtype), clone, hardswish/silu/gelu/sigmoid...,
//               slice and narrow (a strided view with NHWC strides),
//               and reductions over spatial dims with keepdim.
//   Sink        reads any layout and its result does not depend on it:
//               size/dim/numel/dtype/device, reductions over spatial dims
//               without keepdim.
//   Breaker     needs the contiguous (NCHW) layout, or its result would
//               differ in layout in a way later ops can observe: view,
//               flatten, reshape, permute, transpose, matmul/bmm/linear,
//               reductions over channels, contiguous(), every op not in the
//               table, and nodes with nested blocks.
// Permute is a Breaker except one case the pass checks itself (NCHW -> NHWC
// of a channels-last value, see channels_last.h).
#pragma once

#include "ir/ir.h"

#include <string>
#include <vector>

namespace ptopt::layout {

enum class LayoutClass { Anchor, Preserving, Sink, Breaker };

struct OpLayout {
  LayoutClass cls = LayoutClass::Breaker;
  // Preserving: the positions of the data operands, whose layout the output
  // follows (self/input, other, ...; the others are parameters, like
  // batch_norm's weight). Empty for an Anchor: its input is
  // ir::ConvOp::input().
  std::vector<size_t> dataArgs;
  // Preserving: argument 0 is a prim::ListConstruct of the data tensors (cat).
  bool tensorList = false;
  // Writes argument 0 in place (relu_, add_): its output aliases it.
  bool inPlace = false;
  // Breaker: the rule that made it one (for --explain and tests).
  std::string why;
};

// How `n` treats the layout of a region value of rank `rank` (4 or 5).
OpLayout classifyOp(const ir::Node* n, int64_t rank);

const char* layoutClassName(LayoutClass c);

}  // namespace ptopt::layout
