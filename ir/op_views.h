// Op views: typed, named access to the arguments of the operator families
// that passes rewrite, so that no pass reads an argument by its position.
//
// A view wraps one call node. `match(n)` returns a view when `n` is of the
// family, else nullopt; the getters then read arguments by their schema
// names. Positions come from the node's schema when it has one and from the
// family's table otherwise (nodes built by tests without a schema), so that
// `aten::_convolution`'s `groups` (argument 8; argument 6 is `transposed`)
// and `aten::conv2d`'s (argument 6) are read by the same call:
//
//   if (auto conv = ir::ConvOp::match(n))
//     if (auto groups = conv->groups()) ...
//
// Families:
//   ConvOp       aten::conv{1,2,3}d, conv_transpose{1,2,3}d, _convolution, convolution
//   BatchNormOp  aten::batch_norm
//   LinearOp     aten::linear
//   DropoutOp    aten::dropout, feature_dropout, alpha_dropout, feature_alpha_dropout
//                (and their in-place `_` forms)
//   ToOp         aten::to (every overload), aten::type_as
//   LayoutOp     aten::contiguous, view, reshape, permute, flatten, transpose
//   Conv2dKernelOp  aten::conv2d and aten::mkldnn_convolution: the same seven
//                arguments in two orders, read by name and written in either
//                op's order (no pass spells the order)
//   ConvPrepackOp   mkldnn_prepacked::conv2d_prepack
//   AddOp        aten::add / add_ (Tensor overloads, alpha), aten::_add_relu / _add_relu_
//   CatOp        aten::cat
//   ClampOp      aten::hardtanh / hardtanh_ (min_val, max_val), aten::clamp /
//                clamp_ (min, max): the bounds when they are literals
// Any other op: OpView::of(n) gives the same named getters over its schema.
#pragma once

#include "ir/ir.h"

#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace ptopt::ir {

// Named access to any call node's arguments.
class OpView {
 public:
  // A view of any call node; arguments are found through its schema only.
  static OpView of(Node* n) { return OpView(n, nullptr); }

  Node* node() const { return n_; }
  const std::string& target() const { return n_->target(); }

  // Position of argument `name`, or nullopt when the op has no such
  // argument (or the node was built with fewer arguments).
  std::optional<size_t> indexOf(const std::string& name) const;
  // Position of argument `name`; throws std::logic_error when absent.
  size_t index(const std::string& name) const;
  bool has(const std::string& name) const { return indexOf(name).has_value(); }

  // The argument itself; throws std::logic_error when absent.
  const Arg& arg(const std::string& name) const;
  // The argument's Value, or nullptr when it is a literal or absent.
  Value* value(const std::string& name) const;
  // True when the argument is the literal None (or absent).
  bool isNone(const std::string& name) const;

  // Literal arguments of one kind; nullopt when absent, not a literal, or of
  // another kind.
  std::optional<int64_t> intArg(const std::string& name) const;
  std::optional<double> floatArg(const std::string& name) const;  // ints widen
  std::optional<bool> boolArg(const std::string& name) const;
  std::optional<std::vector<int64_t>> intListArg(const std::string& name) const;
  std::optional<c10::ScalarType> dtypeArg(const std::string& name) const;
  std::optional<c10::MemoryFormat> memoryFormatArg(const std::string& name) const;
  const Literal* literal(const std::string& name) const;

 protected:
  // `names`: the family's argument names in order, for nodes without a
  // schema; nullptr to rely on the schema alone.
  OpView(Node* n, const std::vector<std::string>* names) : n_(n), names_(names) {}

  Node* n_;
  const std::vector<std::string>* names_;
};

// Convolutions. `input`, `weight`, `bias` are arguments 0-2 in every form.
class ConvOp : public OpView {
 public:
  // A conv whose `transposed` flag and `groups` are literals (a conv with
  // either computed at run time is left alone by every pass).
  static std::optional<ConvOp> match(Node* n);
  static std::optional<ConvOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  // Any conv form, whatever its arguments.
  static bool isConv(const Node* n);

  Value* input() const { return value("input"); }
  Value* weight() const { return value("weight"); }
  Value* bias() const { return value("bias"); }  // nullptr when None
  size_t weightIndex() const { return index("weight"); }
  size_t biasIndex() const { return index("bias"); }
  bool transposed() const { return transposed_; }
  int64_t groups() const { return groups_; }
  std::optional<std::vector<int64_t>> stride() const { return intListArg("stride"); }
  std::optional<std::vector<int64_t>> padding() const { return intListArg("padding"); }
  std::optional<std::vector<int64_t>> dilation() const { return intListArg("dilation"); }
  // `aten::_convolution` / `aten::convolution` (the unified forms).
  bool isUnified() const;
  // 1, 2 or 3 from the op's name; nullopt for the unified forms.
  std::optional<int> spatialDimsFromName() const;

 private:
  ConvOp(Node* n, const std::vector<std::string>* names) : OpView(n, names) {}
  bool transposed_ = false;
  int64_t groups_ = 1;
};

// aten::batch_norm(input, weight, bias, running_mean, running_var, training,
//                  momentum, eps, cudnn_enabled)
class BatchNormOp : public OpView {
 public:
  static std::optional<BatchNormOp> match(Node* n);
  static std::optional<BatchNormOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  Value* input() const { return value("input"); }
  Value* weight() const { return value("weight"); }  // nullptr when None (affine=False)
  Value* bias() const { return value("bias"); }
  Value* runningMean() const { return value("running_mean"); }
  Value* runningVar() const { return value("running_var"); }
  std::optional<bool> training() const { return boolArg("training"); }
  std::optional<double> eps() const { return floatArg("eps"); }
  std::optional<double> momentum() const { return floatArg("momentum"); }

 private:
  using OpView::OpView;
};

// aten::linear(input, weight, bias)
class LinearOp : public OpView {
 public:
  static std::optional<LinearOp> match(Node* n);
  static std::optional<LinearOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  Value* input() const { return value("input"); }
  Value* weight() const { return value("weight"); }
  Value* bias() const { return value("bias"); }
  size_t weightIndex() const { return index("weight"); }
  size_t biasIndex() const { return index("bias"); }

 private:
  using OpView::OpView;
};

// aten::dropout(input, p, train) and its relatives.
class DropoutOp : public OpView {
 public:
  static std::optional<DropoutOp> match(Node* n);
  static std::optional<DropoutOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  // The in-place forms (`dropout_(Tensor(a!) self, ...)`) call it `self`.
  Value* input() const { return value(has("input") ? "input" : "self"); }
  std::optional<double> p() const { return floatArg("p"); }
  std::optional<bool> train() const { return boolArg("train"); }
  bool inPlace() const { return !target().empty() && target().back() == '_'; }

 private:
  using OpView::OpView;
};

// aten::to in all its overloads (dtype, device, other, dtype_layout,
// prim_dtype, ...) and aten::type_as. Arguments an overload lacks read as
// absent.
class ToOp : public OpView {
 public:
  static std::optional<ToOp> match(Node* n);
  static std::optional<ToOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  Value* self() const { return value("self"); }
  // The target dtype when it is a literal.
  std::optional<c10::ScalarType> dtype() const { return dtypeArg("dtype"); }
  // `other` of to.other / type_as: the tensor whose dtype (and device) to take.
  Value* other() const { return value("other"); }
  std::optional<c10::MemoryFormat> memoryFormat() const { return memoryFormatArg("memory_format"); }
  bool hasDevice() const { return has("device") && !isNone("device"); }
  std::optional<bool> copy() const { return boolArg("copy"); }

 private:
  using OpView::OpView;
};

// Ops that move or reinterpret elements without computing: contiguous,
// view, reshape, permute, flatten, transpose.
class LayoutOp : public OpView {
 public:
  static std::optional<LayoutOp> match(Node* n);
  static std::optional<LayoutOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  Value* self() const { return value("self"); }
  std::optional<c10::MemoryFormat> memoryFormat() const { return memoryFormatArg("memory_format"); }  // contiguous
  const Arg* size() const { return has("size") ? &arg("size") : has("shape") ? &arg("shape") : nullptr; }  // view / reshape
  std::optional<std::vector<int64_t>> dims() const { return intListArg("dims"); }  // permute
  std::optional<int64_t> startDim() const { return intArg("start_dim"); }            // flatten
  std::optional<int64_t> endDim() const { return intArg("end_dim"); }
  std::optional<int64_t> dim0() const { return intArg("dim0"); }                     // transpose
  std::optional<int64_t> dim1() const { return intArg("dim1"); }

 private:
  using OpView::OpView;
};

// aten::conv2d(input, weight, bias, stride, padding, dilation, groups) (the
// default overload) and aten::mkldnn_convolution(self, weight, bias,
// padding, stride, dilation, groups), with all seven arguments.
class Conv2dKernelOp : public OpView {
 public:
  static std::optional<Conv2dKernelOp> match(Node* n);
  static std::optional<Conv2dKernelOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  bool isMkldnn() const { return target() == "aten::mkldnn_convolution"; }
  const Arg& input() const { return arg(isMkldnn() ? "self" : "input"); }
  const Arg& weight() const { return arg("weight"); }
  const Arg& bias() const { return arg("bias"); }
  const Arg& stride() const { return arg("stride"); }
  const Arg& padding() const { return arg("padding"); }
  const Arg& dilation() const { return arg("dilation"); }
  const Arg& groups() const { return arg("groups"); }
  // Stride, padding and dilation are int-list literals, groups an int literal.
  bool hasLiteralGeometry() const;
  // This node's argument positions in aten::mkldnn_convolution's order
  // (input, weight, bias, padding, stride, dilation, groups), and in
  // mkldnn_prepacked::conv2d_prepack's (weight, bias, stride, padding,
  // dilation, groups): for callers that hold the arguments as values.
  std::vector<size_t> mkldnnConvolutionOrder() const;
  std::vector<size_t> prepackOrder() const;
  size_t inputIndex() const { return index(isMkldnn() ? "self" : "input"); }
  // The arguments in aten::mkldnn_convolution's order, with `input` and
  // `weight` replaced where given.
  std::vector<Arg> mkldnnConvolutionArgs(std::optional<Arg> input = std::nullopt,
                                         std::optional<Arg> weight = std::nullopt) const;
  // mkldnn_reorder_conv2d_weight(weight, padding, stride, dilation, groups
  // [, input_size])'s arguments after the weight: input_size (the input's
  // shape as seen while optimizing) where the LibTorch takes it (2.x).
  std::vector<Arg> reorderGeometry() const;

 private:
  using OpView::OpView;
};

// mkldnn_prepacked::conv2d_prepack(W, B, stride, padding, dilation, groups,
// input_size, attr).
class ConvPrepackOp : public OpView {
 public:
  static std::optional<ConvPrepackOp> match(Node* n);
  static std::optional<ConvPrepackOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  const Arg& weight() const { return arg("W"); }
  const Arg& bias() const { return arg("B"); }
  const Arg& stride() const { return arg("stride"); }
  const Arg& padding() const { return arg("padding"); }
  const Arg& dilation() const { return arg("dilation"); }
  const Arg& groups() const { return arg("groups"); }
  // The fused post-op ("none", "relu"), when it is a literal.
  std::optional<std::string> attr() const;

 private:
  using OpView::OpView;
};

// aten::add / add_ (Tensor overloads: self, other, alpha) and aten::_add_relu
// / _add_relu_ (the same arguments).
class AddOp : public OpView {
 public:
  static std::optional<AddOp> match(Node* n);
  static std::optional<AddOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  Value* self() const { return value("self"); }
  Value* other() const { return value("other"); }
  // alpha: 1 when absent (the default); nullopt when it is not a literal.
  std::optional<double> alpha() const;
  bool inPlace() const { return !target().empty() && target().back() == '_'; }
  bool fusedRelu() const { return target().rfind("aten::_add_relu", 0) == 0; }

 private:
  using OpView::OpView;
};

// aten::cat(tensors, dim).
class CatOp : public OpView {
 public:
  static std::optional<CatOp> match(Node* n);
  static std::optional<CatOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  Value* tensors() const { return value("tensors"); }
  const Arg& dimArg() const { return arg("dim"); }
  std::optional<int64_t> dim() const { return intArg("dim"); }

 private:
  using OpView::OpView;
};

// aten::hardtanh / hardtanh_ (self, min_val, max_val) and aten::clamp /
// clamp_ (self, min, max; the Scalar overload).
class ClampOp : public OpView {
 public:
  static std::optional<ClampOp> match(Node* n);
  static std::optional<ClampOp> match(const Node* n) { return match(const_cast<Node*>(n)); }
  Value* self() const { return value("self"); }
  // Both bounds as literal numbers (hardtanh's defaults -1, 1 when absent);
  // nullopt when either is computed or None.
  std::optional<std::pair<double, double>> bounds() const;
  bool inPlace() const { return !target().empty() && target().back() == '_'; }

 private:
  using OpView::OpView;
};

}  // namespace ptopt::ir
