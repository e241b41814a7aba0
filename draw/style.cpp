#include "draw/style.h"

#include "draw/labels.h"
#include "ir/op_views.h"

#include <set>

namespace ptopt::draw {

using ir::Arg;
using ir::Node;

std::optional<DotColorBy> dotColorByFromName(const std::string& name) {
  if (name == "op") return DotColorBy::Op;
  if (name == "dtype") return DotColorBy::Dtype;
  return std::nullopt;
}

bool isCastNode(const Node* n) {
  if (!n->isCall()) return false;
  const std::string op = shortOp(n);
  if (op == "type_as" || op == "half" || op == "float" || op == "bfloat16" || op == "double") return true;
  if (op != "to") return false;
  for (const Arg& a : n->args())
    if (a.isLiteral() && a.literal().is<c10::ScalarType>()) return true;
  return false;
}

bool isLayoutConversion(const Node* n) {
  if (!n->isCall()) return false;
  const std::string op = shortOp(n);
  if (op == "contiguous") return true;
  if (op != "to") return false;
  for (const Arg& a : n->args())
    if (a.isLiteral() && a.literal().is<c10::MemoryFormat>() &&
        a.literal().as<c10::MemoryFormat>() != c10::MemoryFormat::Preserve)
      return true;
  return false;
}

Family familyOf(const Node* n) {
  if (n->opcode() != ir::Opcode::CallFunction) return Family::IO;
  std::string op = shortOp(n);
  if (op.size() > 1 && op.back() == '_' && op.front() != '_') op.pop_back();
  if (n->target().rfind("prim::", 0) == 0 && (op == "If" || op == "Loop")) return Family::Control;
  if (isCastNode(n) || isLayoutConversion(n)) return Family::Convert;
  // ConvOp's forms, and by name the convs of other libraries and fusions
  // (cudnn_convolution, quantized::conv2d, _convolution_relu...).
  if (ir::ConvOp::isConv(n) || op.find("conv") != std::string::npos) return Family::Conv;
  static const std::set<std::string> linear = {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum",
                                               "embedding", "scaled_dot_product_attention"};
  if (linear.count(op)) return Family::Linear;
  if (op.find("norm") != std::string::npos) return Family::Norm;
  static const std::set<std::string> act = {"relu", "relu6", "hardtanh", "gelu", "silu", "sigmoid", "tanh",
                                            "hardswish", "hardsigmoid", "leaky_relu", "elu", "softmax",
                                            "log_softmax", "_add_relu", "mish", "softplus", "prelu"};
  if (act.count(op)) return Family::Activation;
  if (op.find("pool") != std::string::npos) return Family::Pool;
  static const std::set<std::string> elementwise = {"add", "sub", "mul", "div", "rsub", "pow", "sqrt",
                                                    "rsqrt", "exp", "log", "neg", "clamp", "where",
                                                    "mean", "sum", "abs", "maximum", "minimum", "reciprocal"};
  if (elementwise.count(op)) return Family::Elementwise;
  static const std::set<std::string> shape = {
      "view", "reshape", "flatten", "size", "cat", "stack", "transpose", "permute", "squeeze", "unsqueeze",
      "select", "slice", "__getitem__", "ListConstruct", "TupleConstruct", "ListUnpack", "TupleUnpack",
      "NumToTensor", "Int", "Float", "len", "dim", "expand", "chunk", "split", "t", "numel",
      "TupleIndex", "unbind", "dropout", "feature_dropout", "clone", "detach", "__isnot__", "__is__",
      "unchecked_cast", "gt", "lt", "eq", "ne", "ge", "le"};
  if (shape.count(op)) return Family::Shape;
  return Family::Other;
}

const char* familyFill(Family f) {
  switch (f) {
    case Family::Conv: return "#cfe0f5";
    case Family::Linear: return "#e3d5ee";
    case Family::Norm: return "#fde2c4";
    case Family::Activation: return "#d3ecd1";
    case Family::Pool: return "#f6d0d0";
    case Family::Elementwise: return "#fbf1c7";
    case Family::Convert: return "#ffc9c9";
    case Family::Shape: return "#ededed";
    case Family::Control: return "#eadcf5";
    case Family::IO: return "#dddddd";
    case Family::Other: return "#ffffff";
  }
  return "#ffffff";
}

const char* familyName(Family f) {
  switch (f) {
    case Family::Conv: return "conv";
    case Family::Linear: return "linear/matmul";
    case Family::Norm: return "norm";
    case Family::Activation: return "activation";
    case Family::Pool: return "pooling";
    case Family::Elementwise: return "elementwise";
    case Family::Convert: return "cast/layout";
    case Family::Shape: return "shape/list";
    case Family::Control: return "control flow";
    case Family::IO: return "input/output";
    case Family::Other: return "other";
  }
  return "other";
}

const char* dtypeFill(std::optional<c10::ScalarType> t) {
  if (!t) return "#ffffff";
  switch (*t) {
    case c10::ScalarType::Float: return "#cfe0f5";
    case c10::ScalarType::Double: return "#a9c6ee";
    case c10::ScalarType::Half: return "#fde2c4";
    case c10::ScalarType::BFloat16: return "#d3ecd1";
    case c10::ScalarType::Long:
    case c10::ScalarType::Int:
    case c10::ScalarType::Short: return "#e3e3e3";
    case c10::ScalarType::Char:
    case c10::ScalarType::Byte:
    case c10::ScalarType::QInt8:
    case c10::ScalarType::QUInt8: return "#f6d0d0";
    case c10::ScalarType::Bool: return "#eadcf5";
    default: return "#ffffff";
  }
}

std::optional<c10::ScalarType> outputDtype(const Node* n) {
  for (const auto& o : n->outputs())
    if (o->meta().dtype) return o->meta().dtype;
  return std::nullopt;
}

const char* scopeFill(size_t depth) {
  static const char* fills[] = {"#f5f8fc", "#eaf0f8", "#e0e9f4", "#d6e2f0"};
  return fills[(depth ? depth - 1 : 0) % 4];
}

}  // namespace ptopt::draw
