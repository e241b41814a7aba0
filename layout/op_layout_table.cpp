#include "layout/op_layout_table.h"

#include "ir/op_views.h"

#include <unordered_map>

namespace ptopt::layout {

namespace {

// How a table entry is evaluated for one node.
enum class Rule {
  Unary,       // Preserving on argument 0
  Binary,      // Preserving on arguments 0 and 1 (broadcasting allowed)
  Ternary,     // Preserving on arguments 0, 1, 2 (where)
  Cat,         // Preserving on the elements of the list in argument 0
  Format,      // Preserving when the memory_format argument is None or preserve_format
  Reduction,   // named arguments `dim` and `keepdim`
  Metadata,    // Sink
  Breaker,     // named breaker
};

struct Entry {
  Rule rule;
  const char* why = "";  // breakers
};

// Every operator the pass knows, by target, convolutions aside (the
// anchors, recognized by ir::ConvOp). In-place variants (a trailing `_`)
// share their out-of-place entry; see classifyOp.
const std::unordered_map<std::string, Entry>& table() {
  static const std::unordered_map<std::string, Entry> t = [] {
    std::unordered_map<std::string, Entry> m;
    for (const char* unary :
         {"aten::relu", "aten::relu6", "aten::hardtanh", "aten::sigmoid", "aten::tanh", "aten::silu", "aten::gelu",
          "aten::hardswish", "aten::hardsigmoid", "aten::leaky_relu", "aten::elu", "aten::selu", "aten::celu",
          "aten::mish", "aten::softplus", "aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::neg",
          "aten::abs", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt", "aten::reciprocal", "aten::erf",
          "aten::sin", "aten::cos", "aten::square", "aten::dropout", "aten::feature_dropout",
          "aten::alpha_dropout", "aten::batch_norm", "aten::max_pool2d", "aten::max_pool3d",
          "aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices", "aten::avg_pool2d",
          "aten::avg_pool3d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
          "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d", "aten::upsample_nearest2d",
          "aten::upsample_bilinear2d", "aten::upsample_bicubic2d", "aten::upsample_nearest3d",
          "aten::upsample_trilinear3d", "aten::constant_pad_nd", "aten::pad", "aten::reflection_pad2d",
          "aten::replication_pad2d", "aten::replication_pad3d", "aten::type_as",
          // A slice or narrow of an NHWC tensor is a view with NHWC strides: a
          // channel prefix that is free in NCHW costs one copy where a conv
          // reads it, as the conversion back to NCHW and forth would, twice.
          "aten::slice", "aten::narrow"})
      m[unary] = {Rule::Unary};
    for (const char* binary : {"aten::add", "aten::sub", "aten::mul", "aten::div", "aten::rsub", "aten::_add_relu",
                               "aten::maximum", "aten::minimum", "aten::pow"})
      m[binary] = {Rule::Binary};
    m["aten::where"] = {Rule::Ternary};
    m["aten::cat"] = {Rule::Cat};
    m["aten::to"] = {Rule::Format};
    m["aten::clone"] = {Rule::Format};
    for (const char* red : {"aten::mean", "aten::sum", "aten::amax", "aten::amin"}) m[red] = {Rule::Reduction};
    for (const char* meta : {"aten::size", "aten::dim", "aten::numel", "prim::dtype", "prim::device", "prim::layout",
                             "aten::is_floating_point"})
      m[meta] = {Rule::Metadata};
    const std::pair<const char*, const char*> breakers[] = {
        {"aten::view", "view needs strides it can reinterpret"},
        {"aten::view_as", "view needs strides it can reinterpret"},
        {"aten::reshape", "reshape's result layout follows the input's strides"},
        {"aten::reshape_as", "reshape's result layout follows the input's strides"},
        {"aten::flatten", "flatten merges dimensions in NCHW order"},
        {"aten::unflatten", "unflatten splits dimensions in NCHW order"},
        {"aten::permute", "permute reorders dimensions"},
        {"aten::transpose", "transpose reorders dimensions"},
        {"aten::t", "t reorders dimensions"},
        {"aten::matmul", "matmul/bmm/linear on 4-D"},
        {"aten::bmm", "matmul/bmm/linear on 4-D"},
        {"aten::mm", "matmul/bmm/linear on 4-D"},
        {"aten::linear", "matmul/bmm/linear on 4-D"},
        {"aten::contiguous", "contiguous() asks for the NCHW layout"},
        {"aten::is_contiguous", "is_contiguous() observes the strides"},
        {"aten::stride", "stride() observes the strides"},
        {"aten::as_strided", "as_strided reads raw strides"},
        {"aten::squeeze", "squeeze changes the rank"},
        {"aten::unsqueeze", "unsqueeze changes the rank"},
        {"aten::select", "indexing makes a strided view"},
        {"aten::layer_norm", "layer_norm normalizes the innermost NCHW dimensions"},
        {"aten::group_norm", "group_norm has no channels-last kernel here"},
        {"aten::softmax", "softmax over a dimension (not in the layout table)"},
    };
    for (const auto& [target, why] : breakers) m[target] = {Rule::Breaker, why};
    return m;
  }();
  return t;
}

bool isNoneOrPreserve(const ir::Node* n, const char* argName) {
  const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(n));
  if (!op.has(argName)) return true;  // absent: defaults to preserve
  const ir::Literal* l = op.literal(argName);
  if (!l) return false;
  return l->isNone() || (l->is<c10::MemoryFormat>() && l->as<c10::MemoryFormat>() == c10::MemoryFormat::Preserve);
}

// mean/sum/amax/amin(self, dim, keepdim, ...): named access, by the schema
// or, for a node built without one, by these positions.
class ReductionView : public ir::OpView {
 public:
  explicit ReductionView(const ir::Node* n) : OpView(const_cast<ir::Node*>(n), &kNames) {}

 private:
  static inline const std::vector<std::string> kNames = {"self", "dim", "keepdim"};
};

OpLayout breaker(std::string why) {
  OpLayout o;
  o.why = std::move(why);
  return o;
}

OpLayout preserving(std::vector<size_t> dataArgs) {
  OpLayout o;
  o.cls = LayoutClass::Preserving;
  o.dataArgs = std::move(dataArgs);
  return o;
}

OpLayout reduction(const ir::Node* n, int64_t rank) {
  const ReductionView op(n);
  const auto dimsArg = op.intListArg("dim");
  const auto keepdim = op.boolArg("keepdim");
  if (!dimsArg || !keepdim) return breaker("a reduction whose dims or keepdim are not literals");
  const std::vector<int64_t>& dims = *dimsArg;
  if (dims.empty()) return breaker("a reduction over every dimension includes the channels");
  for (int64_t d : dims) {
    const int64_t dim = d < 0 ? d + rank : d;
    if (dim <= 1) return breaker("a reduction over the batch or channel dimension");
  }
  if (*keepdim) return preserving({0});
  OpLayout o;
  o.cls = LayoutClass::Sink;  // fewer dims: the result is a fresh contiguous tensor
  return o;
}

}  // namespace

OpLayout classifyOp(const ir::Node* n, int64_t rank) {
  if (!n->blocks().empty()) return breaker("control flow: conversions stay at the block boundary");
  if (n->opcode() == ir::Opcode::Output) return breaker("a block output");
  if (!n->isCall()) return breaker("not an operator");
  // Every conv form anchors, conv1d/conv_transpose1d too, so that the pass
  // can say why it declines them (3-D tensors have no channels-last format).
  if (ir::ConvOp::isConv(n)) {
    OpLayout o;
    o.cls = LayoutClass::Anchor;  // its input: ir::ConvOp::input()
    return o;
  }
  std::string target = n->target();
  bool inPlace = false;
  auto it = table().find(target);
  if (it == table().end() && target.size() > 1 && target.back() == '_') {
    target.pop_back();
    it = table().find(target);
    inPlace = true;
  }
  if (it == table().end()) return breaker("not in the layout table (" + n->qualifiedTarget() + ")");
  const Entry& e = it->second;
  OpLayout o;
  switch (e.rule) {
    case Rule::Unary: o = preserving({0}); break;
    case Rule::Binary: o = preserving({0, 1}); break;
    case Rule::Ternary: o = preserving({0, 1, 2}); break;
    case Rule::Cat:
      o = preserving({0});
      o.tensorList = true;
      break;
    case Rule::Format:
      if (!isNoneOrPreserve(n, "memory_format")) return breaker("an explicit memory_format");
      o = preserving({0});
      break;
    case Rule::Reduction: o = reduction(n, rank); break;
    case Rule::Metadata: o.cls = LayoutClass::Sink; return o;
    case Rule::Breaker: return breaker(e.why);
  }
  if (inPlace) {
    if (o.cls != LayoutClass::Preserving) return breaker("an in-place op outside the table");
    o.inPlace = true;
  }
  return o;
}

const char* layoutClassName(LayoutClass c) {
  switch (c) {
    case LayoutClass::Anchor: return "anchor";
    case LayoutClass::Preserving: return "preserving";
    case LayoutClass::Sink: return "sink";
    case LayoutClass::Breaker: return "breaker";
  }
  return "?";
}

}  // namespace ptopt::layout
