#include "ir/op_views.h"

#include <algorithm>
#include <stdexcept>

namespace ptopt::ir {

namespace {

using Names = std::vector<std::string>;

// Argument names in order, for nodes without a schema (the default overloads).
const Names kConvNames = {"input", "weight", "bias", "stride", "padding", "dilation", "groups"};
const Names kConvTransposeNames = {"input", "weight", "bias", "stride", "padding", "output_padding", "groups",
                                   "dilation"};
const Names kUnifiedConvNames = {"input",   "weight",         "bias",   "stride",    "padding",
                                 "dilation", "transposed",    "output_padding", "groups", "benchmark",
                                 "deterministic", "cudnn_enabled", "allow_tf32"};
const Names kBatchNormNames = {"input",    "weight",   "bias", "running_mean", "running_var",
                               "training", "momentum", "eps",  "cudnn_enabled"};
const Names kLinearNames = {"input", "weight", "bias"};
const Names kDropoutNames = {"input", "p", "train"};
const Names kToDtypeNames = {"self", "dtype", "non_blocking", "copy", "memory_format"};
const Names kTypeAsNames = {"self", "other"};
const Names kContiguousNames = {"self", "memory_format"};
const Names kViewNames = {"self", "size"};
const Names kReshapeNames = {"self", "shape"};
const Names kPermuteNames = {"self", "dims"};
const Names kFlattenNames = {"self", "start_dim", "end_dim"};
const Names kTransposeNames = {"self", "dim0", "dim1"};
const Names kMkldnnConvNames = {"self", "weight", "bias", "padding", "stride", "dilation", "groups"};
const Names kConvPrepackNames = {"W", "B", "stride", "padding", "dilation", "groups", "input_size", "attr"};
const Names kAddNames = {"self", "other", "alpha"};
const Names kCatNames = {"tensors", "dim"};
const Names kHardtanhNames = {"self", "min_val", "max_val"};
const Names kClampNames = {"self", "min", "max"};

bool isOneOf(const std::string& t, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (t == n) return true;
  return false;
}

}  // namespace

std::optional<size_t> OpView::indexOf(const std::string& name) const {
  if (n_->schema()) return n_->argIndex(name);
  if (!names_) return std::nullopt;
  for (size_t i = 0; i < names_->size(); ++i)
    if ((*names_)[i] == name) return i < n_->numArgs() ? std::optional<size_t>(i) : std::nullopt;
  return std::nullopt;
}

size_t OpView::index(const std::string& name) const {
  if (auto i = indexOf(name)) return *i;
  throw std::logic_error(n_->qualifiedTarget() + " has no argument '" + name + "'");
}

const Arg& OpView::arg(const std::string& name) const { return n_->arg(index(name)); }

Value* OpView::value(const std::string& name) const {
  auto i = indexOf(name);
  return i ? n_->arg(*i).value() : nullptr;
}

bool OpView::isNone(const std::string& name) const {
  auto i = indexOf(name);
  return !i || (n_->arg(*i).isLiteral() && n_->arg(*i).literal().isNone());
}

const Literal* OpView::literal(const std::string& name) const {
  auto i = indexOf(name);
  if (!i || !n_->arg(*i).isLiteral()) return nullptr;
  return &n_->arg(*i).literal();
}

std::optional<int64_t> OpView::intArg(const std::string& name) const {
  const Literal* l = literal(name);
  if (!l || !l->is<int64_t>()) return std::nullopt;
  return l->as<int64_t>();
}

std::optional<double> OpView::floatArg(const std::string& name) const {
  const Literal* l = literal(name);
  if (!l) return std::nullopt;
  if (l->is<double>()) return l->as<double>();
  if (l->is<int64_t>()) return static_cast<double>(l->as<int64_t>());
  return std::nullopt;
}

std::optional<bool> OpView::boolArg(const std::string& name) const {
  const Literal* l = literal(name);
  if (!l || !l->is<bool>()) return std::nullopt;
  return l->as<bool>();
}

std::optional<std::vector<int64_t>> OpView::intListArg(const std::string& name) const {
  const Literal* l = literal(name);
  if (!l || !l->is<std::vector<int64_t>>()) return std::nullopt;
  return l->as<std::vector<int64_t>>();
}

std::optional<c10::ScalarType> OpView::dtypeArg(const std::string& name) const {
  const Literal* l = literal(name);
  if (!l || !l->is<c10::ScalarType>()) return std::nullopt;
  return l->as<c10::ScalarType>();
}

std::optional<c10::MemoryFormat> OpView::memoryFormatArg(const std::string& name) const {
  const Literal* l = literal(name);
  if (!l || !l->is<c10::MemoryFormat>()) return std::nullopt;
  return l->as<c10::MemoryFormat>();
}

// ----- ConvOp -----

bool ConvOp::isConv(const Node* n) {
  return n->isCall() && isOneOf(n->target(), {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d",
                                               "aten::conv_transpose2d", "aten::conv_transpose3d",
                                               "aten::_convolution", "aten::convolution"});
}

std::optional<ConvOp> ConvOp::match(Node* n) {
  if (!isConv(n)) return std::nullopt;
  const std::string& t = n->target();
  const bool unified = t == "aten::_convolution" || t == "aten::convolution";
  const bool transposeByName = t.rfind("aten::conv_transpose", 0) == 0;
  ConvOp view(n, unified ? &kUnifiedConvNames : transposeByName ? &kConvTransposeNames : &kConvNames);
  if (unified) {
    auto transposed = view.boolArg("transposed");
    if (!transposed) return std::nullopt;
    view.transposed_ = *transposed;
  } else {
    view.transposed_ = transposeByName;
  }
  auto groups = view.intArg("groups");
  if (!groups || *groups < 1) return std::nullopt;
  view.groups_ = *groups;
  return view;
}

bool ConvOp::isUnified() const { return target() == "aten::_convolution" || target() == "aten::convolution"; }

std::optional<int> ConvOp::spatialDimsFromName() const {
  if (isUnified()) return std::nullopt;
  const char last = target()[target().size() - 2];  // `conv2d` -> '2'
  return last - '0';
}

// ----- the other families -----

std::optional<BatchNormOp> BatchNormOp::match(Node* n) {
  if (!n->is("aten::batch_norm")) return std::nullopt;
  return BatchNormOp(n, &kBatchNormNames);
}

std::optional<LinearOp> LinearOp::match(Node* n) {
  if (!n->is("aten::linear")) return std::nullopt;
  return LinearOp(n, &kLinearNames);
}

std::optional<DropoutOp> DropoutOp::match(Node* n) {
  if (!n->isCall() || !isOneOf(n->target(), {"aten::dropout", "aten::dropout_", "aten::feature_dropout",
                                             "aten::feature_dropout_", "aten::alpha_dropout", "aten::alpha_dropout_",
                                             "aten::feature_alpha_dropout", "aten::feature_alpha_dropout_"}))
    return std::nullopt;
  return DropoutOp(n, &kDropoutNames);
}

std::optional<ToOp> ToOp::match(Node* n) {
  if (n->is("aten::type_as")) return ToOp(n, &kTypeAsNames);
  if (!n->is("aten::to")) return std::nullopt;
  // Without a schema only the dtype overload can be told by position.
  return ToOp(n, n->schema() ? nullptr : &kToDtypeNames);
}

std::optional<LayoutOp> LayoutOp::match(Node* n) {
  if (!n->isCall()) return std::nullopt;
  const std::string& t = n->target();
  const Names* names = t == "aten::contiguous" ? &kContiguousNames
                       : t == "aten::view"     ? &kViewNames
                       : t == "aten::reshape"  ? &kReshapeNames
                       : t == "aten::permute"  ? &kPermuteNames
                       : t == "aten::flatten"  ? &kFlattenNames
                       : t == "aten::transpose" ? &kTransposeNames
                                                : nullptr;
  if (!names) return std::nullopt;
  return LayoutOp(n, names);
}

// ----- the kernels of the lowering passes -----

std::optional<Conv2dKernelOp> Conv2dKernelOp::match(Node* n) {
  if (!n->isCall() || n->numArgs() != 7) return std::nullopt;
  if (n->is("aten::conv2d") && n->overload().empty()) return Conv2dKernelOp(n, &kConvNames);
  if (n->is("aten::mkldnn_convolution")) return Conv2dKernelOp(n, &kMkldnnConvNames);
  return std::nullopt;
}

bool Conv2dKernelOp::hasLiteralGeometry() const {
  return intListArg("stride") && intListArg("padding") && intListArg("dilation") && intArg("groups");
}

std::vector<Arg> Conv2dKernelOp::mkldnnConvolutionArgs(std::optional<Arg> in, std::optional<Arg> w) const {
  return {in ? *in : input(), w ? *w : weight(), bias(), padding(), stride(), dilation(), groups()};
}

std::vector<size_t> Conv2dKernelOp::mkldnnConvolutionOrder() const {
  return {inputIndex(), index("weight"), index("bias"), index("padding"), index("stride"), index("dilation"),
          index("groups")};
}

std::vector<size_t> Conv2dKernelOp::prepackOrder() const {
  return {index("weight"), index("bias"), index("stride"), index("padding"), index("dilation"), index("groups")};
}

std::vector<Arg> Conv2dKernelOp::reorderGeometry() const {
  std::vector<Arg> geometry{padding(), stride(), dilation(), groups()};
  // LibTorch 2.x's reorder also takes the input's size. oneDNN picks the
  // weight's blocking for a shape and the thread count (brgemm convs block
  // the output channels per thread), and without a size it guesses one: a
  // pack that then differs from what the conv wants is reordered again on
  // every call (mobilenet_v2 at 2 threads ran 4x slower so). 1.13 has no
  // such argument.
  static const bool takesInputSize = [] {
    const c10::FunctionSchema* s = findSchema("aten::mkldnn_reorder_conv2d_weight", "");
    return s && s->arguments().size() > 5;
  }();
  const Value* x = input().value();
  const auto& shape = x ? x->meta().shape : std::nullopt;
  if (takesInputSize && shape && shape->size() == 4 &&
      std::all_of(shape->begin(), shape->end(), [](int64_t d) { return d > 0; }))
    geometry.emplace_back(Literal(*shape));
  return geometry;
}

std::optional<ConvPrepackOp> ConvPrepackOp::match(Node* n) {
  if (!n->is("mkldnn_prepacked::conv2d_prepack") || n->numArgs() != kConvPrepackNames.size()) return std::nullopt;
  return ConvPrepackOp(n, &kConvPrepackNames);
}

std::optional<std::string> ConvPrepackOp::attr() const {
  const Literal* l = literal("attr");
  if (!l || !l->is<std::string>()) return std::nullopt;
  return l->as<std::string>();
}

std::optional<AddOp> AddOp::match(Node* n) {
  if (!n->isCall() || !isOneOf(n->target(), {"aten::add", "aten::add_", "aten::_add_relu", "aten::_add_relu_"}))
    return std::nullopt;
  if (!n->overload().empty() && n->overload() != "Tensor") return std::nullopt;
  return AddOp(n, &kAddNames);
}

std::optional<double> AddOp::alpha() const {
  if (!has("alpha")) return 1.0;
  return floatArg("alpha");
}

std::optional<CatOp> CatOp::match(Node* n) {
  if (!n->is("aten::cat")) return std::nullopt;
  return CatOp(n, &kCatNames);
}

std::optional<ClampOp> ClampOp::match(Node* n) {
  if (!n->isCall()) return std::nullopt;
  if (isOneOf(n->target(), {"aten::hardtanh", "aten::hardtanh_"})) return ClampOp(n, &kHardtanhNames);
  if (isOneOf(n->target(), {"aten::clamp", "aten::clamp_"}) && (n->overload().empty() || n->overload() == "Scalar"))
    return ClampOp(n, &kClampNames);
  return std::nullopt;
}

std::optional<std::pair<double, double>> ClampOp::bounds() const {
  const bool hardtanh = target().rfind("aten::hardtanh", 0) == 0;
  const char* lo = hardtanh ? "min_val" : "min";
  const char* hi = hardtanh ? "max_val" : "max";
  auto bound = [&](const char* name, double dflt) -> std::optional<double> {
    if (!has(name)) return hardtanh ? std::optional<double>(dflt) : std::nullopt;
    return floatArg(name);
  };
  auto a = bound(lo, -1.0), b = bound(hi, 1.0);
  if (!a || !b) return std::nullopt;
  return std::make_pair(*a, *b);
}

}  // namespace ptopt::ir
