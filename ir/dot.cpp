#include "ir/dot.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_set>

namespace ptopt::ir {

namespace {

// ------------------------------------------------------------ small helpers

std::vector<std::string> splitDots(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string joinDots(const std::vector<std::string>& segs, size_t count) {
  std::string out;
  for (size_t i = 0; i < count && i < segs.size(); ++i) out += (i ? "." : "") + segs[i];
  return out;
}

std::string html(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// `aten::conv2d` -> `conv2d`; placeholders and outputs by role.
std::string shortOp(const Node* n) {
  switch (n->opcode()) {
    case Opcode::Placeholder: return "input";
    case Opcode::Output: return n->owningBlock() && n->owningBlock()->owningNode() ? "yield" : "output";
    case Opcode::GetAttr: return "get_attr";
    case Opcode::CallFunction: break;
  }
  const std::string& t = n->target();
  const size_t colon = t.rfind("::");
  return colon == std::string::npos ? t : t.substr(colon + 2);
}

std::string dtypeShort(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "f32";
    case c10::ScalarType::Double: return "f64";
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Short: return "i16";
    case c10::ScalarType::Char: return "i8";
    case c10::ScalarType::Byte: return "u8";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::QInt8: return "qi8";
    case c10::ScalarType::QUInt8: return "qu8";
    default: return c10::toString(t);
  }
}

std::string shapeText(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "×" : "") + std::to_string(shape[i]);
  return out;
}

std::string bytesText(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
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

// The module a constant belongs to: `layer1.0.conv1.weight.bnfold` ->
// `layer1.0.conv1`; anonymous constants (`const.x`) belong to none.
std::string constantModule(const std::string& name) {
  if (name.rfind("const.", 0) == 0) return "";
  static const std::set<std::string> leaves = {"weight", "bias", "running_mean", "running_var",
                                               "num_batches_tracked", "in_proj_weight", "in_proj_bias"};
  const auto segs = splitDots(name);
  for (size_t i = 0; i < segs.size(); ++i)
    if (leaves.count(segs[i])) return joinDots(segs, i);
  return segs.size() > 1 ? joinDots(segs, segs.size() - 1) : "";
}

bool readsConstant(const Arg& a) {
  return a.isValue() && a.value()->node() && a.value()->node()->opcode() == Opcode::GetAttr;
}

// The node's module scope, else the module of the first named constant it reads.
std::string nodeScope(const Node* n) {
  if (!n->scope().empty()) return n->scope();
  for (const Arg& a : n->args())
    if (readsConstant(a)) {
      std::string m = constantModule(a.value()->node()->target());
      if (!m.empty()) return m;
    }
  return "";
}

std::optional<std::vector<int64_t>> constantShape(const Graph& g, const Node* getAttr) {
  const std::string& name = getAttr->target();
  if (g.constants().contains(name)) {
    const c10::IValue& v = g.constants().at(name);
    if (v.isTensor()) return v.toTensor().sizes().vec();
    return std::nullopt;
  }
  return getAttr->output()->meta().shape;
}

// "3" when every element is the same, else "3×1".
std::string compactList(const Literal& l) {
  if (l.is<int64_t>()) return std::to_string(l.as<int64_t>());
  if (l.is<std::string>()) return l.as<std::string>();
  if (!l.is<std::vector<int64_t>>()) return l.str();
  const auto& v = l.as<std::vector<int64_t>>();
  if (v.empty()) return "[]";
  if (std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v[0]; })) return std::to_string(v[0]);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "×" : "") + std::to_string(v[i]);
  return out;
}

bool isAll(const Literal& l, int64_t value) {
  if (l.is<int64_t>()) return l.as<int64_t>() == value;
  if (!l.is<std::vector<int64_t>>()) return false;
  const auto& v = l.as<std::vector<int64_t>>();
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == value; });
}

// `prim::ListConstruct(1, 1)` of literals: drawn inside its users' labels
// like a literal list (imported graphs are full of them until canonicalize).
bool isLiteralList(const Node* n) {
  if (!n->is("prim::ListConstruct") || n->numOutputs() != 1) return false;
  for (const Arg& a : n->args())
    if (!a.isLiteral() || !(a.literal().is<int64_t>() || a.literal().is<double>() || a.literal().is<bool>()))
      return false;
  return true;
}

std::optional<Literal> literalListValue(const Node* list) {
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  for (const Arg& a : list->args()) {
    if (a.literal().is<int64_t>()) ints.push_back(a.literal().as<int64_t>());
    else if (a.literal().is<double>()) doubles.push_back(a.literal().as<double>());
    else return std::nullopt;
  }
  if (!doubles.empty() && !ints.empty()) return std::nullopt;
  if (!doubles.empty()) return Literal(doubles);
  return Literal(ints);
}

// Argument i as a literal: an inline literal, or a literal list node's value.
std::optional<Literal> literalAt(const Node* n, size_t i) {
  if (i >= n->numArgs()) return std::nullopt;
  const Arg& a = n->arg(i);
  if (a.isLiteral()) return a.literal();
  if (a.value()->node() && isLiteralList(a.value()->node())) return literalListValue(a.value()->node());
  return std::nullopt;
}

// Conv: "3×3 s2 p1 g32" (kernel from the weight; stride, padding, dilation,
// groups omitted at their defaults).
std::string convKeys(const Graph& g, const Node* n, const std::string& op) {
  size_t stride = 3, padding = 4, dilation = 5, groups = 6, outPad = 0;
  if (op.rfind("conv_transpose", 0) == 0) {
    outPad = 5; groups = 6; dilation = 7;
  } else if (op == "_convolution" || op == "convolution") {
    outPad = 7; groups = 8;
  }
  std::vector<std::string> parts;
  if (n->numArgs() > 1 && n->arg(1).isValue()) {
    const Value* w = n->argValue(1);
    std::optional<std::vector<int64_t>> shape =
        w->node() && w->node()->opcode() == Opcode::GetAttr ? constantShape(g, w->node()) : w->meta().shape;
    if (shape && shape->size() > 2) {
      std::string k;
      for (size_t i = 2; i < shape->size(); ++i) k += (i > 2 ? "×" : "") + std::to_string((*shape)[i]);
      parts.push_back(k);
    }
  }
  auto add = [&](size_t i, const char* prefix, int64_t dflt) {
    const std::optional<Literal> l = literalAt(n, i);
    if (l && !isAll(*l, dflt)) parts.push_back(prefix + compactList(*l));
  };
  add(stride, "s", 1);
  add(padding, "p", 0);
  add(dilation, "d", 1);
  if (outPad) add(outPad, "op", 0);
  add(groups, "g", 1);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

std::string literalShort(const Literal& l) {
  if (l.is<c10::ScalarType>()) return dtypeShort(l.as<c10::ScalarType>());
  if (l.is<c10::MemoryFormat>()) {
    switch (l.as<c10::MemoryFormat>()) {
      case c10::MemoryFormat::ChannelsLast: return "CL";
      case c10::MemoryFormat::ChannelsLast3d: return "CL3d";
      case c10::MemoryFormat::Contiguous: return "contiguous";
      default: return "preserve";
    }
  }
  if (l.is<std::vector<int64_t>>()) return "[" + compactList(l) + "]";
  std::string s = l.str();
  if (s.size() > 18) s = s.substr(0, 16) + "…";
  return s;
}

// The key literal arguments of a node, short.
std::string keyLiterals(const Graph& g, const Node* n) {
  if (!n->isCall()) return "";
  std::string op = shortOp(n);
  if (op.find("conv") != std::string::npos && n->numArgs() >= 7) return convKeys(g, n, op);
  if (op.find("pool") != std::string::npos && op.find("adaptive") == std::string::npos) {
    // max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode)
    std::string out;
    if (const auto k = literalAt(n, 1)) out += "k" + compactList(*k);
    if (const auto s = literalAt(n, 2); s && !(s->is<std::vector<int64_t>>() && s->as<std::vector<int64_t>>().empty()))
      out += " s" + compactList(*s);
    if (const auto p = literalAt(n, 3); p && !isAll(*p, 0)) out += " p" + compactList(*p);
    return out;
  }
  if (op.find("adaptive") != std::string::npos) {
    if (const auto s = literalAt(n, 1)) return "→ " + compactList(*s);
    return "";
  }
  if (op == "to") {
    std::string out;
    for (const Arg& a : n->args())
      if (a.isLiteral() && (a.literal().is<c10::ScalarType>() ||
                            (a.literal().is<c10::MemoryFormat>() &&
                             a.literal().as<c10::MemoryFormat>() != c10::MemoryFormat::Preserve)))
        out += (out.empty() ? "→ " : " ") + literalShort(a.literal());
    return out;
  }
  if (n->is("prim::Loop")) {
    // prim::Loop(max_trip_count, condition, carried...): a `while` loop has
    // INT64_MAX trips, a `for` loop a condition of True.
    const std::optional<Literal> trips = literalAt(n, 0), cond = literalAt(n, 1);
    const bool unbounded = trips && trips->is<int64_t>() && trips->as<int64_t>() == std::numeric_limits<int64_t>::max();
    const bool always = cond && *cond == Literal(true);
    std::string out = unbounded ? "while" : always ? "for" : "for … while";
    if (!unbounded && trips) out += " " + literalShort(*trips) + " trips";
    return out;
  }
  if (op == "batch_norm" || op == "layer_norm" || op == "group_norm" || op == "instance_norm") {
    const c10::FunctionSchema* schema = n->schema();
    std::string out;
    for (size_t i = 0; schema && i < n->numArgs() && i < schema->arguments().size(); ++i) {
      const std::optional<Literal> l = literalAt(n, i);
      if (!l) continue;
      const std::string& name = schema->arguments()[i].name();
      if ((name == "training" || name == "use_input_stats") && *l == Literal(true)) out += " train";
      if (name == "eps" && l->is<double>() && l->as<double>() != 1e-5) out += " eps=" + l->str();
    }
    return out.empty() ? "" : out.substr(1);
  }
  // Otherwise: literals that differ from the schema's default, at most three.
  static const std::set<std::string> skipNames = {"cudnn_enabled", "momentum", "inplace", "non_blocking",
                                                   "copy", "layout", "device", "pin_memory"};
  const c10::FunctionSchema* schema = n->schema();
  std::vector<std::string> parts;
  size_t shown = 0, hidden = 0;
  for (size_t i = 0; i < n->numArgs(); ++i) {
    const std::optional<Literal> l = literalAt(n, i);
    if (!l || l->isNone()) continue;
    std::string name;
    if (schema && i < schema->arguments().size()) {
      const c10::Argument& a = schema->arguments()[i];
      name = a.name();
      if (skipNames.count(name)) continue;
      if (a.default_value() && l->toIValue() == *a.default_value()) continue;
    }
    if (shown == 3) { ++hidden; continue; }
    parts.push_back(name.empty() ? literalShort(*l) : name + "=" + literalShort(*l));
    ++shown;
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  if (hidden) out += fmt::format(" +{}", hidden);
  return out;
}

// ------------------------------------------------------------ colours

enum class Family { Conv, Linear, Norm, Activation, Pool, Elementwise, Convert, Shape, Control, IO, Other };

Family familyOf(const Node* n) {
  if (n->opcode() != Opcode::CallFunction) return Family::IO;
  std::string op = shortOp(n);
  if (op.size() > 1 && op.back() == '_' && op.front() != '_') op.pop_back();
  if (n->target().rfind("prim::", 0) == 0 && (op == "If" || op == "Loop")) return Family::Control;
  if (isCastNode(n) || isLayoutConversion(n)) return Family::Convert;
  if (op.find("conv") != std::string::npos) return Family::Conv;
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

enum class Status { Same, Added, Changed, Removed };

constexpr const char* kAddedFill = "#c8efc8";
constexpr const char* kAddedLine = "#2e8b3a";
constexpr const char* kChangedFill = "#fff0a0";
constexpr const char* kChangedLine = "#b8860b";
constexpr const char* kRemovedLine = "#9a9a9a";

}  // namespace

std::optional<DotColorBy> dotColorByFromName(const std::string& name) {
  if (name == "op") return DotColorBy::Op;
  if (name == "dtype") return DotColorBy::Dtype;
  return std::nullopt;
}

GraphStats graphStats(const Graph& g) {
  GraphStats s;
  std::set<std::string> seen;
  g.walk([&](Node* n) {
    ++s.nodes;
    if (n->isCall()) ++s.opCounts[shortOp(n)];
    if (isCastNode(n)) ++s.casts;
    if (isLayoutConversion(n)) ++s.layoutConversions;
    if (n->opcode() == Opcode::GetAttr && seen.insert(n->target()).second && g.constants().contains(n->target())) {
      const c10::IValue& v = g.constants().at(n->target());
      if (v.isTensor()) s.parameterBytes += v.toTensor().nbytes();
    }
  });
  return s;
}

// ------------------------------------------------------------ matching

const Node* NodeMatching::before(const Node* afterNode) const {
  auto it = afterToBefore.find(afterNode);
  return it == afterToBefore.end() ? nullptr : it->second;
}

const Node* NodeMatching::after(const Node* beforeNode) const {
  auto it = beforeToAfter.find(beforeNode);
  return it == beforeToAfter.end() ? nullptr : it->second;
}

namespace {

class Matcher {
 public:
  Matcher(const Graph& before, const Graph& after) : before_(before), after_(after) {
    before.walk([&](Node* n) { beforeNodes_.push_back(n); });
    after.walk([&](Node* n) { afterNodes_.push_back(n); });
    before.walk([&](Node* n) {
      if (n->opcode() == Opcode::GetAttr) beforeConstants_.insert(n->target());
    });
  }

  NodeMatching run() {
    matchAnchors();
    matchByOutputName();
    matchByConstants();
    for (int round = 0; round < 4; ++round) {
      const size_t matched = m_.afterToBefore.size();
      propagateForward();
      propagateBackward();
      if (m_.afterToBefore.size() == matched) break;
    }
    return std::move(m_);
  }

 private:
  void link(const Node* b, const Node* a) {
    if (m_.beforeToAfter.count(b) || m_.afterToBefore.count(a)) return;
    m_.beforeToAfter[b] = a;
    m_.afterToBefore[a] = b;
    // Nested blocks' output nodes pair with their owners.
    if (a->blocks().size() == b->blocks().size())
      for (size_t i = 0; i < a->blocks().size(); ++i) {
        const Node* ao = a->block(i)->outputNode();
        const Node* bo = b->block(i)->outputNode();
        if (ao && bo) link(bo, ao);
      }
  }

  bool matchedA(const Node* a) const { return m_.afterToBefore.count(a) != 0; }
  bool matchedB(const Node* b) const { return m_.beforeToAfter.count(b) != 0; }

  void matchAnchors() {
    const auto bi = before_.inputs();
    const auto ai = after_.inputs();
    for (size_t i = 0; i < std::min(bi.size(), ai.size()); ++i) link(bi[i]->node(), ai[i]->node());
    if (before_.block()->outputNode() && after_.block()->outputNode())
      link(before_.block()->outputNode(), after_.block()->outputNode());
    std::map<std::string, const Node*> constants;
    for (const Node* b : beforeNodes_)
      if (b->opcode() == Opcode::GetAttr) constants.emplace(b->target(), b);
    for (const Node* a : afterNodes_)
      if (a->opcode() == Opcode::GetAttr) {
        auto it = constants.find(a->target());
        if (it != constants.end()) link(it->second, a);
      }
  }

  static std::string normalizedName(const std::string& s) {
    std::string out = s;
    std::replace(out.begin(), out.end(), '_', '.');
    return out;
  }

  // Pairs the nodes whose key is unique on both sides.
  void matchUnique(const std::function<std::string(const Node*, bool isAfter)>& key) {
    std::map<std::string, std::vector<const Node*>> bk, ak;
    for (const Node* b : beforeNodes_)
      if (b->isCall() && !matchedB(b)) {
        std::string k = key(b, false);
        if (!k.empty()) bk[k].push_back(b);
      }
    for (const Node* a : afterNodes_)
      if (a->isCall() && !matchedA(a)) {
        std::string k = key(a, true);
        if (!k.empty()) ak[k].push_back(a);
      }
    for (const auto& [k, as] : ak) {
      auto it = bk.find(k);
      if (as.size() == 1 && it != bk.end() && it->second.size() == 1) link(it->second[0], as[0]);
    }
  }

  void matchByOutputName() {
    matchUnique([](const Node* n, bool) {
      return n->numOutputs() ? n->target() + "|" + normalizedName(n->output(0)->name()) : std::string();
    });
  }

  // A constant name of `after` as the `before` name it derives from.
  std::string baseConstantName(const std::string& name) const {
    auto segs = splitDots(name);
    for (size_t n = segs.size(); n > 0; --n) {
      std::string prefix = joinDots(segs, n);
      if (beforeConstants_.count(prefix)) return prefix;
    }
    return name;
  }

  void matchByConstants() {
    matchUnique([this](const Node* n, bool isAfter) {
      std::vector<std::string> names;
      for (const Arg& a : n->args())
        if (readsConstant(a)) {
          const std::string& t = a.value()->node()->target();
          if (!isAfter) {
            names.push_back(t);
            continue;
          }
          // A constant a pass created (a folded conv's new bias) has no
          // counterpart: only names derived from `before` identify the node.
          const std::string base = baseConstantName(t);
          if (beforeConstants_.count(base)) names.push_back(base);
        }
      if (names.empty()) return std::string();
      std::sort(names.begin(), names.end());
      std::string k = n->target();
      for (const auto& s : names) k += "|" + s;
      return k;
    });
  }

  // The `before` value standing for `after` value v, or nullptr.
  const Value* counterpart(const Value* v) const {
    if (const Node* p = v->node()) {
      const Node* b = m_.before(p);
      return b && v->index() < b->numOutputs() ? b->output(v->index()) : nullptr;
    }
    const Block* blk = v->paramOf();
    const Node* owner = blk ? blk->owningNode() : nullptr;
    const Node* b = owner ? m_.before(owner) : nullptr;
    if (!b) return nullptr;
    for (size_t i = 0; i < owner->blocks().size(); ++i)
      if (owner->block(i) == blk && i < b->blocks().size() && v->index() < b->block(i)->params().size())
        return b->block(i)->param(v->index());
    return nullptr;
  }

  static std::string argKey(const Node* n, const std::function<const Value*(const Value*)>& map) {
    std::string k = n->target() + "(";
    for (const Arg& a : n->args()) {
      if (!a.isValue()) { k += "_,"; continue; }
      const Value* v = map(a.value());
      if (!v) return "";
      k += fmt::format("{},", static_cast<const void*>(v));
    }
    return k + ")";
  }

  static bool sameLiterals(const Node* a, const Node* b) {
    if (a->numArgs() != b->numArgs()) return false;
    for (size_t i = 0; i < a->numArgs(); ++i)
      if (a->arg(i).isLiteral() != b->arg(i).isLiteral() ||
          (a->arg(i).isLiteral() && a->arg(i).literal() != b->arg(i).literal()))
        return false;
    return true;
  }

  void propagateForward() {
    std::unordered_map<std::string, std::vector<const Node*>> index;
    for (const Node* b : beforeNodes_)
      if (b->isCall() && !matchedB(b)) {
        std::string k = argKey(b, [](const Value* v) { return v; });
        if (!k.empty()) index[k].push_back(b);
      }
    for (const Node* a : afterNodes_) {
      if (!a->isCall() || matchedA(a)) continue;
      std::string k = argKey(a, [this](const Value* v) { return counterpart(v); });
      if (k.empty()) continue;
      auto it = index.find(k);
      if (it == index.end()) continue;
      std::vector<const Node*> free, exact;
      for (const Node* b : it->second)
        if (!matchedB(b)) {
          free.push_back(b);
          if (sameLiterals(a, b)) exact.push_back(b);
        }
      if (free.size() == 1) link(free[0], a);
      else if (exact.size() == 1) link(exact[0], a);
    }
  }

  void propagateBackward() {
    for (auto it = afterNodes_.rbegin(); it != afterNodes_.rend(); ++it) {
      const Node* a = *it;
      const Node* b = m_.before(a);
      if (!b) continue;
      for (size_t i = 0; i < std::min(a->numArgs(), b->numArgs()); ++i) {
        const Value* av = a->argValue(i);
        const Value* bv = b->argValue(i);
        if (!av || !bv || !av->node() || !bv->node()) continue;
        const Node* ap = av->node();
        const Node* bp = bv->node();
        if (ap->isCall() && bp->isCall() && !matchedA(ap) && !matchedB(bp) && ap->target() == bp->target() &&
            av->index() == bv->index())
          link(bp, ap);
      }
    }
  }

  const Graph& before_;
  const Graph& after_;
  std::vector<const Node*> beforeNodes_, afterNodes_;
  std::set<std::string> beforeConstants_;
  NodeMatching m_;
};

}  // namespace

NodeMatching matchNodes(const Graph& before, const Graph& after) { return Matcher(before, after).run(); }

namespace {
// Two literals of argument `a` that mean the same: an int[N] argument takes
// `[k]` for `[k, k, ...]` (canonicalize writes the short form).
bool sameArgument(const Literal& x, const Literal& y, const c10::Argument* a) {
  if (x == y) return true;
  if (!a || !a->N() || !x.is<std::vector<int64_t>>() || !y.is<std::vector<int64_t>>()) return false;
  auto expand = [&](std::vector<int64_t> v) {
    if (v.size() == 1) v.assign(static_cast<size_t>(*a->N()), v[0]);
    return v;
  };
  return expand(x.as<std::vector<int64_t>>()) == expand(y.as<std::vector<int64_t>>());
}

// An argument as a literal: itself, or an int list built by a
// prim::ListConstruct of int literals (the form canonicalize replaces).
std::optional<Literal> asLiteral(const Arg& arg) {
  if (arg.isLiteral()) return arg.literal();
  const Node* list = arg.value() ? arg.value()->node() : nullptr;
  if (!list || !list->is("prim::ListConstruct")) return std::nullopt;
  std::vector<int64_t> ints;
  for (const Arg& e : list->args()) {
    if (!e.isLiteral() || !e.literal().is<int64_t>()) return std::nullopt;
    ints.push_back(e.literal().as<int64_t>());
  }
  return Literal(ints);
}
}  // namespace

std::string describeChange(const Node& before, const Node& after, const NodeMatching& m) {
  std::vector<std::string> parts;
  if (before.overload() != after.overload())
    parts.push_back(fmt::format("overload {} → {}", before.overload().empty() ? "-" : before.overload(),
                                after.overload().empty() ? "-" : after.overload()));
  if (before.numArgs() != after.numArgs())
    parts.push_back(fmt::format("{} → {} arguments", before.numArgs(), after.numArgs()));
  const c10::FunctionSchema* schema = after.schema();
  for (size_t i = 0; i < std::min(before.numArgs(), after.numArgs()); ++i) {
    const Arg& b = before.arg(i);
    const Arg& a = after.arg(i);
    const std::string name = schema && i < schema->arguments().size() ? schema->arguments()[i].name()
                                                                       : "arg " + std::to_string(i);
    const c10::Argument* formal = schema && i < schema->arguments().size() ? &schema->arguments()[i] : nullptr;
    if (const auto bl = asLiteral(b), al = asLiteral(a); bl && al && sameArgument(*bl, *al, formal)) continue;
    if (b.isLiteral() && a.isLiteral()) {
      if (!sameArgument(b.literal(), a.literal(), formal))
        parts.push_back(fmt::format("{} {} → {}", name, literalShort(b.literal()), literalShort(a.literal())));
      continue;
    }
    if (b.isLiteral() != a.isLiteral()) {
      if (a.isLiteral()) parts.push_back(name + " = " + literalShort(a.literal()));
      else if (readsConstant(a)) parts.push_back(fmt::format("{} = {}", name, a.value()->node()->target()));
      else parts.push_back(name + " now a value");
      continue;
    }
    const bool bc = readsConstant(b), ac = readsConstant(a);
    if (ac && (!bc || b.value()->node()->target() != a.value()->node()->target()))
      parts.push_back(fmt::format("{} = {}", name, a.value()->node()->target()));
    else if (bc && !ac)
      parts.push_back(name + " no longer a constant");
  }
  (void)m;
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// ------------------------------------------------------------ the writer

namespace {

struct Item {
  std::string id;
  const Node* node = nullptr;   // the IR node (of `after`, or of `before` when removed)
  const Value* param = nullptr; // or a block parameter
  const Graph* graph = nullptr; // the graph the node belongs to
  Status status = Status::Same;
  std::string note;             // provenance / change text (diff mode)
  std::vector<std::string> container;  // block boxes, outermost first ("b3")
  std::vector<std::string> scope;      // module scope segments
};

struct BoxTree {
  std::string key;
  std::string label;
  bool isBlock = false;
  size_t depth = 0;
  std::vector<std::string> lines;  // node statements, in order
  std::vector<std::unique_ptr<BoxTree>> children;
  std::map<std::string, BoxTree*> byKey;
  size_t count = 0;  // node statements here and below

  BoxTree* child(const std::string& k, const std::string& lbl, bool block) {
    auto it = byKey.find(k);
    if (it != byKey.end()) return it->second;
    children.push_back(std::make_unique<BoxTree>());
    BoxTree* c = children.back().get();
    c->key = k;
    c->label = lbl;
    c->isBlock = block;
    c->depth = depth + 1;
    byKey[k] = c;
    return c;
  }
};

class DotWriter {
 public:
  DotWriter(const Graph& g, const DotOptions& o, const Graph* before = nullptr, const NodeMatching* m = nullptr)
      : g_(g), o_(o), before_(before), m_(m) {}

  std::string write(DiffCounts* counts) {
    collect();
    if (counts) *counts = diffCounts_;
    chooseDepth();
    return emit();
  }

 private:
  bool diff() const { return before_ != nullptr; }
  // Constants and literal lists are drawn in their users' labels by default.
  bool hidden(const Node* n) const {
    return !o_.showConstants && (n->opcode() == Opcode::GetAttr || isLiteralList(n));
  }

  // ---- collect the items to draw
  void collect() {
    size_t next = 0;
    std::function<void(const Block*, const std::vector<std::string>&)> visit =
        [&](const Block* b, const std::vector<std::string>& container) {
          for (const Node* n : *b) {
            if (!hidden(n)) {
              Item it;
              it.id = "n" + std::to_string(next++);
              it.node = n;
              it.graph = &g_;
              it.container = container;
              it.scope = splitDots(scopeOf(n));
              if (diff()) classify(it);
              ids_[n] = it.id;
              items_.push_back(std::move(it));
            }
            for (size_t i = 0; i < n->blocks().size(); ++i) {
              const Block* nested = n->block(i);
              std::vector<std::string> inner = container;
              const std::string key = "b" + std::to_string(blockKeys_.size());
              blockKeys_[nested] = key;
              blockLabels_[key] = blockLabel(n, i);
              inner.push_back(key);
              for (const auto& p : nested->params()) {
                Item it;
                it.id = "p" + std::to_string(paramIds_.size());
                it.param = p.get();
                it.graph = &g_;
                it.container = inner;
                paramIds_[p.get()] = it.id;
                items_.push_back(std::move(it));
              }
              visit(nested, inner);
            }
          }
        };
    visit(g_.block(), {});
    if (diff()) collectRemoved();
  }

  static std::string blockLabel(const Node* owner, size_t i) {
    const std::string op = shortOp(owner);
    if (op == "If") return i == 0 ? "If: then" : "If: else";
    if (op == "Loop") return "Loop body";
    return op + " block " + std::to_string(i);
  }

  std::string scopeOf(const Node* n) const {
    std::string s = nodeScope(n);
    if (s.empty() && diff()) {
      if (const Node* b = m_->before(n)) s = nodeScope(b);
    }
    return s;
  }

  void classify(Item& it) {
    const Node* n = it.node;
    const Node* b = m_->before(n);
    if (!b) {
      it.status = Status::Added;
      it.note = n->provenance();
      ++diffCounts_.added;
      return;
    }
    std::string change = describeChange(*b, *n, *m_);
    const bool newProvenance = !n->provenance().empty() && n->provenance() != b->provenance();
    if (change.empty() && !newProvenance) return;
    it.status = Status::Changed;
    it.note = newProvenance ? n->provenance() : "";
    // One change per line, at most three.
    size_t lines = 0;
    for (size_t start = 0; !change.empty() && start < change.size() && lines < 3; ++lines) {
      const size_t end = change.find("; ", start);
      it.note += (it.note.empty() ? "" : "\n") + change.substr(start, end == std::string::npos ? end : end - start);
      start = end == std::string::npos ? change.size() : end + 2;
    }
    ++diffCounts_.changed;
  }

  // The after-graph container of a before-graph block, when its owner matched.
  std::vector<std::string> containerOfBefore(const Block* b) {
    std::vector<std::string> out;
    std::vector<const Block*> chain;
    for (const Block* blk = b; blk && blk->owningNode(); blk = blk->owningNode()->owningBlock()) chain.push_back(blk);
    std::reverse(chain.begin(), chain.end());
    for (const Block* blk : chain) {
      const Node* owner = blk->owningNode();
      const Node* a = m_->after(owner);
      size_t idx = 0;
      while (idx < owner->blocks().size() && owner->block(idx) != blk) ++idx;
      if (!a || idx >= a->blocks().size()) break;
      out.push_back(blockKeys_.at(a->block(idx)));
    }
    return out;
  }

  void collectRemoved() {
    size_t next = 0;
    before_->walk([&](Node* n) {
      if (m_->after(n) || hidden(n)) return;
      Item it;
      it.id = "r" + std::to_string(next++);
      it.node = n;
      it.graph = before_;
      it.status = Status::Removed;
      it.container = containerOfBefore(n->owningBlock());
      it.scope = splitDots(nodeScope(n));
      removedIds_[n] = it.id;
      items_.push_back(std::move(it));
      ++diffCounts_.removed;
    });
  }

  // ---- depth and size limits
  size_t maxScopeDepth() const {
    size_t d = 0;
    for (const auto& it : items_) d = std::max(d, it.scope.size());
    return d;
  }

  // Drawn node count when scopes deeper than `depth` collapse (0: none).
  size_t drawnCount(size_t depth) const {
    std::set<std::string> summaries;
    size_t n = 0;
    for (const auto& it : items_) {
      if (depth && it.scope.size() > depth) summaries.insert(summaryKey(it, depth));
      else ++n;
    }
    return n + summaries.size();
  }

  static std::string summaryKey(const Item& it, size_t depth) {
    std::string k;
    for (const auto& c : it.container) k += c + "/";
    return k + joinDots(it.scope, depth);
  }

  void chooseDepth() {
    const size_t deepest = maxScopeDepth();
    depth_ = o_.depth >= 1 && static_cast<size_t>(o_.depth) < deepest ? static_cast<size_t>(o_.depth) : 0;
    if (o_.maxNodes == 0 || drawnCount(depth_) <= o_.maxNodes) return;
    for (size_t d = (depth_ ? depth_ : deepest) - (deepest ? 1 : 0); d >= 1; --d) {
      if (drawnCount(d) <= o_.maxNodes) {
        depth_ = d;
        limitNote_ = fmt::format("scopes deeper than {} collapsed to stay under {} nodes (--max-nodes)", d, o_.maxNodes);
        return;
      }
    }
    if (deepest) depth_ = 1;
    truncate_ = true;
  }

  // ---- labels
  std::string relativeScope(const Item& it, const std::vector<std::string>& boxScope) const {
    if (it.scope.empty()) return "";
    size_t common = 0;
    while (common < boxScope.size() && common < it.scope.size() && boxScope[common] == it.scope[common]) ++common;
    if (common == it.scope.size()) return "";
    std::vector<std::string> rest(it.scope.begin() + static_cast<long>(common), it.scope.end());
    return joinDots(rest, rest.size());
  }

  std::string constantsLine(const Item& it) const {
    // Constants read, grouped by shape: "weight, bias 64".
    std::vector<std::pair<std::string, std::string>> groups;  // shape text -> names
    const std::string scope = joinDots(it.scope, it.scope.size());
    for (const Arg& a : it.node->args()) {
      if (!readsConstant(a) || !hidden(a.value()->node())) continue;
      const Node* c = a.value()->node();
      std::string name = c->target();
      const std::string mod = constantModule(name);
      if (!scope.empty() && name.rfind(scope + ".", 0) == 0) name = name.substr(scope.size() + 1);
      else if (!mod.empty() && mod == nodeScope(it.node)) name = name.substr(mod.size() + 1);
      auto shape = constantShape(*it.graph, c);
      const std::string shapeStr = shape ? shapeText(*shape) : "";
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& p) { return p.first == shapeStr; });
      if (g == groups.end()) groups.emplace_back(shapeStr, name);
      else g->second += ", " + name;
    }
    std::string out;
    for (const auto& [shape, names] : groups)
      out += (out.empty() ? "" : "<BR/>") + html(names) + (shape.empty() ? "" : " <I>" + html(shape) + "</I>");
    return out;
  }

  std::string metaLine(const Value* v, size_t users) const {
    const TensorMeta& m = v->meta();
    std::string text;
    if (m.dtype) text += dtypeShort(*m.dtype);
    if (m.shape) text += (text.empty() ? "" : " ") + shapeText(*m.shape);
    if (m.device && !m.device->is_cpu()) text += " " + m.device->str();
    std::string out = text.empty() ? "" : html(text);
    if (m.memoryFormat == c10::MemoryFormat::ChannelsLast || m.memoryFormat == c10::MemoryFormat::ChannelsLast3d)
      out += std::string(out.empty() ? "" : " ") + "<FONT COLOR=\"#8e24aa\"><B>[CL]</B></FONT>";
    if (users > 1) out += std::string(out.empty() ? "" : " · ") + fmt::format("{} users", users);
    return out;
  }

  static size_t userCount(const Node* n) {
    size_t u = 0;
    for (const auto& o : n->outputs()) u += o->uses().size();
    return u;
  }

  std::string nodeLabel(const Item& it, const std::vector<std::string>& boxScope) const {
    std::vector<std::string> rows;
    const char* muted = it.status == Status::Removed ? "#8a8a8a" : "#555555";
    if (it.param) {
      rows.push_back("<I>" + html(it.param->name()) + "</I>");
      const std::string meta = metaLine(it.param, it.param->uses().size());
      if (!meta.empty()) rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT>", muted, meta));
    } else {
      const Node* n = it.node;
      std::string head = "<B>" + html(shortOp(n)) + "</B>";
      if (n->opcode() == Opcode::Placeholder) head = "<B>input</B> " + html(n->output()->name());
      if (n->opcode() == Opcode::GetAttr) head = "<I>" + html(n->target()) + "</I>";
      const std::string where = relativeScope(it, boxScope);
      if (!where.empty() && n->isCall())
        head += fmt::format(" <FONT COLOR=\"{}\">{}</FONT>", muted, html(where));
      rows.push_back(head);
      const std::string keys = keyLiterals(*it.graph, n);
      if (!keys.empty()) rows.push_back("<FONT POINT-SIZE=\"10\">" + html(keys) + "</FONT>");
      const std::string consts = constantsLine(it);
      if (!consts.empty()) rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT>", muted, consts));
      if (n->opcode() == Opcode::GetAttr) {
        auto shape = constantShape(*it.graph, n);
        if (shape) rows.push_back("<FONT POINT-SIZE=\"9\">" + html(shapeText(*shape)) + "</FONT>");
      } else if (n->numOutputs() > 0) {
        std::string meta = metaLine(n->output(0), userCount(n));
        if (n->numOutputs() > 1) meta += fmt::format(" ({} outputs)", n->numOutputs());
        if (!meta.empty()) rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT>", muted, meta));
      }
    }
    if (!it.note.empty()) {
      std::string note;
      for (const auto& line : splitLines(it.note)) note += (note.empty() ? "" : "<BR/>") + html(truncate(line, 60));
      const char* colour = it.status == Status::Added ? "#1e6b28" : "#7a5a00";
      rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\"><I>{}</I></FONT>", colour, note));
    }
    std::string out = "<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"1\">";
    for (const auto& r : rows) out += "<TR><TD>" + r + "</TD></TR>";
    return out + "</TABLE>>";
  }

  static std::vector<std::string> splitLines(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string line;
    while (std::getline(ss, line)) out.push_back(line);
    return out;
  }

  static std::string truncate(const std::string& s, size_t n) {
    return s.size() <= n ? s : s.substr(0, n - 1) + "…";
  }

  std::string nodeAttrs(const Item& it) const {
    std::string shape = "box";
    std::string style = "rounded,filled";
    std::string fill = "#ffffff", line = "#606060", extra;
    if (it.param) {
      shape = "ellipse";
      fill = "#f3f3f3";
      extra = " margin=\"0.05,0.02\"";
    } else {
      const Family fam = familyOf(it.node);
      fill = o_.colorBy == DotColorBy::Dtype ? dtypeFill(outputDtype(it.node)) : familyFill(fam);
      if (it.node->opcode() == Opcode::GetAttr) { shape = "note"; style = "filled"; fill = "#f7f7f7"; line = "#9a9a9a"; }
      if (fam == Family::IO && it.node->opcode() != Opcode::GetAttr) fill = "#dddddd";
      if (fam == Family::Control) style = "rounded,filled,bold";
      if (fam == Family::Convert && o_.colorBy == DotColorBy::Op) { line = "#c0392b"; extra = " penwidth=1.6"; }
    }
    if (diff()) {
      switch (it.status) {
        case Status::Same: fill = "#ffffff"; break;
        case Status::Added: fill = kAddedFill; line = kAddedLine; extra = " penwidth=2"; break;
        case Status::Changed: fill = kChangedFill; line = kChangedLine; extra = " penwidth=2"; break;
        case Status::Removed:
          style = it.node && it.node->opcode() == Opcode::GetAttr ? "dashed" : "rounded,dashed";
          fill = "#ffffff"; line = kRemovedLine; extra = " fontcolor=\"#8a8a8a\"";
          break;
      }
    }
    return fmt::format("shape={} style=\"{}\" fillcolor=\"{}\" color=\"{}\"{}", shape, style, fill, line, extra);
  }

  // ---- emission
  std::string emit() {
    BoxTree root;
    std::map<std::string, std::string> summaryIds;  // summary key -> id
    std::map<std::string, std::vector<const Item*>> summaryItems;
    std::vector<const Item*> order;  // drawn items (non-collapsed), in order
    size_t drawn = 0, omitted = 0;
    std::unordered_set<std::string> omittedIds;

    // Place items into boxes; collapsed ones into summaries.
    for (const auto& it : items_) {
      const bool collapsed = depth_ && it.scope.size() > depth_;
      if (collapsed) {
        const std::string key = summaryKey(it, depth_);
        auto [pos, inserted] = summaryIds.emplace(key, "s" + std::to_string(summaryIds.size()));
        if (inserted) {
          if (truncate_ && drawn >= o_.maxNodes) { omittedIds.insert(pos->second); ++omitted; }
          else ++drawn;
          placeSummary(root, it, pos->second);
        }
        drawnId_[&it] = pos->second;
        summaryItems[pos->second].push_back(&it);
        continue;
      }
      drawnId_[&it] = it.id;
      if (truncate_ && drawn >= o_.maxNodes) {
        omittedIds.insert(it.id);
        ++omitted;
        continue;
      }
      ++drawn;
      order.push_back(&it);
    }
    for (const Item* it : order) place(root, *it);
    // Summary labels need all their items: fill them in now.
    for (auto& [id, items] : summaryItems) summaryLines_[id] = summaryStatement(id, items);

    std::string out;
    out += "digraph ptopt {\n";
    out += "  graph [rankdir=TB nodesep=0.25 ranksep=0.32 fontname=\"Helvetica\" fontsize=11 "
           "compound=true newrank=true labelloc=t labeljust=l";
    if (o_.legend) out += " label=" + legendLabel(omitted);
    out += "];\n";
    out += "  node [fontname=\"Helvetica\" fontsize=11 margin=\"0.08,0.03\" height=0.3];\n";
    out += "  edge [color=\"#555555\" arrowsize=0.6];\n";
    writeBox(out, root, 1, omittedIds);
    if (omitted)
      out += fmt::format("  more [shape=box style=\"dashed\" label=\"… {} more nodes not drawn (--max-nodes {})\"];\n",
                         omitted, o_.maxNodes);
    writeEdges(out, omittedIds, omitted > 0);
    out += "}\n";
    return out;
  }

  // The box path of an item: its block boxes, then its scope prefixes
  // (up to `limit` segments).
  BoxTree* boxFor(BoxTree& root, const Item& it, size_t limit) {
    BoxTree* box = &root;
    std::string blockPath;
    for (const auto& b : it.container) {
      blockPath += b + "/";
      box = box->child(blockPath, blockLabels_.count(b) ? blockLabels_.at(b) : b, true);
    }
    if (!o_.clusters) return box;
    for (size_t i = 1; i <= std::min(limit, it.scope.size()); ++i) {
      const std::string prefix = joinDots(it.scope, i);
      box = box->child(blockPath + "|" + prefix, prefix, false);
    }
    return box;
  }

  void place(BoxTree& root, const Item& it) {
    BoxTree* box = boxFor(root, it, it.scope.size());
    box->lines.push_back(it.id);  // statements are rendered at write time
    itemById_[it.id] = &it;
  }

  void placeSummary(BoxTree& root, const Item& it, const std::string& id) {
    BoxTree* box = boxFor(root, it, depth_);
    box->lines.push_back(id);
  }

  std::string summaryStatement(const std::string& id, const std::vector<const Item*>& items) const {
    const Item& first = *items.front();
    std::map<std::string, size_t> ops;
    size_t added = 0, changed = 0, removed = 0;
    for (const Item* it : items) {
      if (it->node && it->status != Status::Removed) ++ops[shortOp(it->node)];
      added += it->status == Status::Added;
      changed += it->status == Status::Changed;
      removed += it->status == Status::Removed;
    }
    std::vector<std::pair<size_t, std::string>> sorted;
    for (const auto& [op, c] : ops) sorted.emplace_back(c, op);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::string opsText, line;
    for (size_t i = 0; i < sorted.size() && i < 6; ++i) {
      std::string piece = fmt::format("{} ×{}", sorted[i].second, sorted[i].first);
      if (!line.empty() && line.size() + piece.size() > 34) { opsText += html(line) + "<BR/>"; line.clear(); }
      line += (line.empty() ? "" : ", ") + piece;
    }
    if (sorted.size() > 6) line += fmt::format(", +{} kinds", sorted.size() - 6);
    opsText += html(line);
    std::string label = "<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"1\">";
    label += fmt::format("<TR><TD><B>{}</B> <FONT COLOR=\"#555555\">({} nodes)</FONT></TD></TR>",
                         html(joinDots(first.scope, depth_)), items.size());
    label += "<TR><TD><FONT POINT-SIZE=\"9\">" + opsText + "</FONT></TD></TR>";
    std::string fill = "#eef1f5", line2 = "#607080", extra;
    if (diff() && (added || changed || removed)) {
      label += fmt::format("<TR><TD><FONT POINT-SIZE=\"9\" COLOR=\"#7a5a00\">+{} added, ~{} changed, −{} removed</FONT></TD></TR>",
                           added, changed, removed);
      fill = changed || (added && removed) ? kChangedFill : added ? kAddedFill : "#ffffff";
      line2 = changed || (added && removed) ? kChangedLine : added ? kAddedLine : kRemovedLine;
      extra = " penwidth=2";
    }
    label += "</TABLE>>";
    return fmt::format("{} [shape=box3d style=\"filled\" fillcolor=\"{}\" color=\"{}\"{} label={}];", id, fill,
                       line2, extra, label);
  }

  // Counts statements in a box and below (single-node scope boxes dissolve).
  static size_t countBox(BoxTree& b) {
    b.count = b.lines.size();
    for (auto& c : b.children) b.count += countBox(*c);
    return b.count;
  }

  void writeBox(std::string& out, BoxTree& root, int indent, const std::unordered_set<std::string>& omitted) {
    countBox(root);
    writeBoxBody(out, root, indent, {}, omitted);
  }

  std::string statementFor(const std::string& id, const std::vector<std::string>& boxScope) const {
    auto s = summaryLines_.find(id);
    if (s != summaryLines_.end()) return s->second;
    const Item& it = *itemById_.at(id);
    return fmt::format("{} [{} label={}];", id, nodeAttrs(it), nodeLabel(it, boxScope));
  }

  void writeBoxBody(std::string& out, BoxTree& box, int indent, const std::vector<std::string>& boxScope,
                    const std::unordered_set<std::string>& omitted) {
    const std::string pad(static_cast<size_t>(indent) * 2, ' ');
    for (const auto& id : box.lines)
      if (!omitted.count(id)) out += pad + statementFor(id, boxScope) + "\n";
    for (auto& c : box.children) {
      if (c->count == 0) continue;
      const bool dissolve = !c->isBlock && c->count < 2;
      std::vector<std::string> inner = boxScope;
      if (!c->isBlock) inner = splitDots(c->label);
      if (dissolve) {
        writeBoxBody(out, *c, indent, boxScope, omitted);
        continue;
      }
      out += fmt::format("{}subgraph cluster_{} {{\n", pad, clusterCounter_++);
      if (c->isBlock)
        out += fmt::format("{}  label=<<I>{}</I>> style=\"rounded,dashed\" color=\"#9b59b6\" fontcolor=\"#6c3483\" "
                           "fontsize=10 penwidth=1.4;\n", pad, html(c->label));
      else
        out += fmt::format("{}  label=<<B>{}</B>> style=\"rounded,filled\" fillcolor=\"{}\" color=\"#a8b8cc\" "
                           "fontcolor=\"#34495e\" fontsize=10;\n", pad, html(c->label), scopeFill(inner.size()));
      writeBoxBody(out, *c, indent + 1, inner, omitted);
      out += pad + "}\n";
    }
  }

  static const char* scopeFill(size_t depth) {
    static const char* fills[] = {"#f5f8fc", "#eaf0f8", "#e0e9f4", "#d6e2f0"};
    return fills[(depth ? depth - 1 : 0) % 4];
  }

  // ---- edges
  std::string producerId(const Value* v, bool removedSide) const {
    if (const Node* p = v->node()) {
      if (hidden(p)) return "";
      if (removedSide) {
        if (const Node* a = m_->after(p)) return drawnIdOfNode(a);
        auto it = removedIds_.find(p);
        return it == removedIds_.end() ? "" : drawnIdOfRemoved(p);
      }
      return drawnIdOfNode(p);
    }
    if (removedSide) {
      // A block parameter of `before`: its counterpart when the owner matched.
      const Block* blk = v->paramOf();
      const Node* owner = blk ? blk->owningNode() : nullptr;
      const Node* a = owner ? m_->after(owner) : nullptr;
      if (!a) return "";
      for (size_t i = 0; i < owner->blocks().size() && i < a->blocks().size(); ++i)
        if (owner->block(i) == blk && v->index() < a->block(i)->params().size())
          return drawnIdOfParam(a->block(i)->param(v->index()));
      return "";
    }
    return drawnIdOfParam(v);
  }

  std::string drawnIdOfNode(const Node* n) const {
    auto it = ids_.find(n);
    if (it == ids_.end()) return "";
    return drawnIdFor(it->second);
  }
  std::string drawnIdOfRemoved(const Node* n) const { return drawnIdFor(removedIds_.at(n)); }
  std::string drawnIdOfParam(const Value* v) const {
    auto it = paramIds_.find(v);
    return it == paramIds_.end() ? "" : drawnIdFor(it->second);
  }
  std::string drawnIdFor(const std::string& itemId) const {
    auto it = drawnById_.find(itemId);
    return it == drawnById_.end() ? itemId : it->second;
  }

  void writeEdges(std::string& out, const std::unordered_set<std::string>& omitted, bool toMore) {
    for (const auto& [item, id] : drawnId_) drawnById_[item->id] = id;
    std::set<std::string> merged;  // edges touching summaries are drawn once
    std::unordered_set<std::string> hasInput;
    auto edge = [&](const std::string& from, const std::string& to, const std::string& attrs) {
      if (from.empty() || to.empty()) return;
      std::string f = omitted.count(from) ? (toMore ? "more" : "") : from;
      std::string t = omitted.count(to) ? (toMore ? "more" : "") : to;
      if (f.empty() || t.empty() || f == t) return;
      hasInput.insert(t);
      const bool summary = f[0] == 's' || t[0] == 's' || f == "more" || t == "more";
      if (summary && !merged.insert(f + ">" + t + attrs).second) return;
      out += fmt::format("  {} -> {}{};\n", f, t, attrs.empty() ? "" : " [" + attrs + "]");
    };
    // Uses in the drawn graph.
    g_.walk([&](Node* n) {
      if (hidden(n)) return;
      const std::string to = drawnIdOfNode(n);
      for (size_t i = 0; i < n->numArgs(); ++i) {
        const Value* v = n->argValue(i);
        if (!v) continue;
        std::string attrs;
        if (diff() && !edgeExistedBefore(v, n, i)) attrs = fmt::format("color=\"{}\" penwidth=1.6", kAddedLine);
        edge(producerId(v, false), to, attrs);
      }
      for (size_t b = 0; b < n->blocks().size(); ++b)
        if (const Node* yield = n->block(b)->outputNode())
          edge(drawnIdOfNode(yield), to,
               fmt::format("style=dashed color=\"#9b59b6\" label=\"{}\" fontsize=9 fontcolor=\"#6c3483\"",
                           shortOp(n) == "If" ? (b == 0 ? "then" : "else") : shortOp(n) == "Loop" ? "body" : "block"));
    });
    anchorBlockSources(out, omitted, hasInput);
    if (!diff()) return;
    // Uses of `before` that are gone.
    const std::string gone = fmt::format("style=dashed color=\"{}\"", kRemovedLine);
    before_->walk([&](Node* n) {
      if (hidden(n)) return;
      const Node* a = m_->after(n);
      const std::string to = a ? drawnIdOfNode(a) : drawnIdOfRemoved(n);
      for (size_t i = 0; i < n->numArgs(); ++i) {
        const Value* v = n->argValue(i);
        if (!v || (a && edgeStillThere(v, a, i))) continue;
        edge(producerId(v, true), to, gone);
      }
      if (!a)
        for (size_t b = 0; b < n->blocks().size(); ++b)
          if (const Node* yield = n->block(b)->outputNode())
            if (removedIds_.count(yield)) edge(drawnIdOfRemoved(yield), to, gone);
    });
  }

  // A node inside a block that reads nothing drawn (a RaiseException, a
  // loop's parameters) would float to the top of the drawing and stretch its
  // block's box over everything: an invisible edge from the owner's first
  // input keeps it beside its owner. Not a use: drawn with style=invis.
  void anchorBlockSources(std::string& out, const std::unordered_set<std::string>& omitted,
                          const std::unordered_set<std::string>& hasInput) const {
    std::set<std::string> done;
    auto anchor = [&](const Node* owner, const std::string& id) {
      if (id.empty() || hasInput.count(id) || omitted.count(id) || id[0] == 's') return;
      for (size_t i = 0; i < owner->numArgs(); ++i) {
        const Value* v = owner->argValue(i);
        const std::string from = v ? producerId(v, false) : "";
        if (from.empty() || omitted.count(from) || from == id) continue;
        if (done.insert(from + ">" + id).second) out += fmt::format("  {} -> {} [style=invis];\n", from, id);
        return;
      }
    };
    g_.walk([&](Node* n) {
      const Node* owner = n->owningBlock()->owningNode();
      if (!owner || hidden(n)) return;
      anchor(owner, drawnIdOfNode(n));
    });
    g_.walk([&](Node* n) {
      for (const auto& b : n->blocks())
        for (const auto& p : b->params()) anchor(n, drawnIdOfParam(p.get()));
    });
  }

  // Whether after-node `n` reading `v` at argument i was already so in `before`.
  bool edgeExistedBefore(const Value* v, const Node* n, size_t i) const {
    const Node* b = m_->before(n);
    if (!b || i >= b->numArgs() || !b->argValue(i)) return false;
    const Value* bv = b->argValue(i);
    if (v->node() && bv->node()) return m_->before(v->node()) == bv->node() && v->index() == bv->index();
    if (!v->node() && !bv->node()) {
      const Node* owner = v->paramOf() ? v->paramOf()->owningNode() : nullptr;
      const Node* bowner = bv->paramOf() ? bv->paramOf()->owningNode() : nullptr;
      return owner && m_->before(owner) == bowner && v->index() == bv->index();
    }
    return false;
  }

  // Whether before-node edge (v -> n at i) still exists at after-node `a`.
  bool edgeStillThere(const Value* v, const Node* a, size_t i) const {
    if (i >= a->numArgs() || !a->argValue(i)) return false;
    return edgeExistedBefore(a->argValue(i), a, i) && m_->before(a) && m_->before(a)->argValue(i) == v;
  }

  // ---- legend
  std::string legendLabel(size_t omitted) const {
    const GraphStats now = graphStats(g_);
    std::string t = "<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"2\">";
    const std::string title = o_.title.empty() ? "graph" : o_.title;
    t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"14\"><B>" + html(title) + "</B></FONT></TD></TR>";
    if (diff()) {
      const GraphStats was = graphStats(*before_);
      t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\">{}</TD></TR>", diffKey());
      t += "<TR><TD ALIGN=\"LEFT\"><B>op</B></TD><TD ALIGN=\"RIGHT\"><B>before</B></TD><TD ALIGN=\"RIGHT\"><B>after</B></TD>"
           "<TD ALIGN=\"RIGHT\"><B>Δ</B></TD></TR>";
      auto row = [&](const std::string& name, const std::string& b, const std::string& a, const std::string& d,
                     bool highlight) {
        // GraphViz rejects an empty <B></B> (and then drops the whole label).
        auto bold = [&](const std::string& x) { return highlight && !x.empty() ? "<B>" + x + "</B>" : x; };
        t += fmt::format("<TR><TD ALIGN=\"LEFT\">{}</TD><TD ALIGN=\"RIGHT\">{}</TD><TD ALIGN=\"RIGHT\">{}</TD>"
                         "<TD ALIGN=\"RIGHT\">{}</TD></TR>",
                         html(name), b, bold(a), bold(html(d)));
      };
      auto delta = [](long d) { return d == 0 ? std::string("") : d > 0 ? "+" + std::to_string(d) : "−" + std::to_string(-d); };
      std::set<std::string> ops;
      for (const auto& [op, c] : was.opCounts) ops.insert(op);
      for (const auto& [op, c] : now.opCounts) ops.insert(op);
      std::vector<std::tuple<bool, size_t, std::string>> rows;
      for (const auto& op : ops) {
        const size_t b = was.opCounts.count(op) ? was.opCounts.at(op) : 0;
        const size_t a = now.opCounts.count(op) ? now.opCounts.at(op) : 0;
        rows.emplace_back(a == b, std::max(a, b), op);
      }
      std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
        if (std::get<0>(x) != std::get<0>(y)) return !std::get<0>(x);  // changed first
        if (std::get<1>(x) != std::get<1>(y)) return std::get<1>(x) > std::get<1>(y);
        return std::get<2>(x) < std::get<2>(y);
      });
      size_t shown = 0, rest = 0;
      for (const auto& [same, n, op] : rows) {
        if (shown >= 10 && same) { ++rest; continue; }
        const size_t b = was.opCounts.count(op) ? was.opCounts.at(op) : 0;
        const size_t a = now.opCounts.count(op) ? now.opCounts.at(op) : 0;
        row(op, std::to_string(b), std::to_string(a), delta(static_cast<long>(a) - static_cast<long>(b)), !same);
        ++shown;
      }
      if (rest) t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><I>{} more op kinds unchanged</I></TD></TR>", rest);
      auto diffRow = [&](const std::string& name, size_t b, size_t a) {
        row(name, std::to_string(b), std::to_string(a), delta(static_cast<long>(a) - static_cast<long>(b)), a != b);
      };
      diffRow("nodes", was.nodes, now.nodes);
      diffRow("casts", was.casts, now.casts);
      diffRow("layout conversions", was.layoutConversions, now.layoutConversions);
      row("parameter bytes", bytesText(was.parameterBytes), bytesText(now.parameterBytes), "",
          was.parameterBytes != now.parameterBytes);
      t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"10\">{} added, {} changed, {} removed "
                       "nodes</FONT></TD></TR>",
                       diffCounts_.added, diffCounts_.changed, diffCounts_.removed);
    } else {
      t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\">{} nodes · {} parameters · {} casts · {} layout "
                       "conversions</TD></TR>",
                       now.nodes, bytesText(now.parameterBytes), now.casts, now.layoutConversions);
      std::vector<std::pair<size_t, std::string>> sorted;
      for (const auto& [op, c] : now.opCounts) sorted.emplace_back(c, op);
      std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      std::string line, text;
      for (size_t i = 0; i < sorted.size() && i < 12; ++i) {
        std::string piece = fmt::format("{} {}", sorted[i].second, sorted[i].first);
        if (!line.empty() && line.size() + piece.size() > 70) { text += html(line) + "<BR ALIGN=\"LEFT\"/>"; line.clear(); }
        line += (line.empty() ? "" : " · ") + piece;
      }
      if (sorted.size() > 12) line += fmt::format(" · +{} more kinds", sorted.size() - 12);
      text += html(line) + "<BR ALIGN=\"LEFT\"/>";
      t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"10\">" + text + "</FONT></TD></TR>";
      t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\">" + colourKey() + "</TD></TR>";
      if (hasConv()) t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"9\" COLOR=\"#555555\">conv: kernel, "
                           "s stride, p padding, d dilation, g groups · [CL] channels-last</FONT></TD></TR>";
    }
    if (!limitNote_.empty() || omitted)
      t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT COLOR=\"#b03a2e\">{}</FONT></TD></TR>",
                       html(omitted ? fmt::format("{} nodes not drawn (--max-nodes {}); try --depth 1", omitted,
                                                  o_.maxNodes)
                                    : limitNote_));
    return t + "</TABLE>>";
  }

  bool hasConv() const {
    bool found = false;
    g_.walk([&](Node* n) { found = found || familyOf(n) == Family::Conv; });
    return found;
  }

  static std::string swatch(const std::string& fill, const std::string& line, const std::string& text,
                            const std::string& fontColour = "#000000") {
    return fmt::format("<TD BGCOLOR=\"{}\" COLOR=\"{}\" BORDER=\"1\"><FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT></TD>",
                       fill, line, fontColour, html(text));
  }

  std::string colourKey() const {
    std::string cells;
    if (o_.colorBy == DotColorBy::Dtype) {
      std::set<std::string> seen;
      g_.walk([&](Node* n) {
        auto t = outputDtype(n);
        if (t && seen.insert(dtypeShort(*t)).second) cells += swatch(dtypeFill(t), "#606060", dtypeShort(*t));
      });
      if (cells.empty()) cells = "<TD><FONT POINT-SIZE=\"9\">no dtypes known (give --input-shape)</FONT></TD>";
    } else {
      std::set<Family> seen;
      g_.walk([&](Node* n) { if (n->isCall()) seen.insert(familyOf(n)); });
      for (Family f : seen) cells += swatch(familyFill(f), f == Family::Convert ? "#c0392b" : "#606060", familyName(f));
    }
    return "<TABLE BORDER=\"0\" CELLSPACING=\"2\" CELLPADDING=\"2\"><TR>" + cells + "</TR></TABLE>";
  }

  std::string diffKey() const {
    return "<TABLE BORDER=\"0\" CELLSPACING=\"2\" CELLPADDING=\"2\"><TR>" + swatch(kAddedFill, kAddedLine, "added") +
           swatch(kChangedFill, kChangedLine, "changed") + swatch("#ffffff", kRemovedLine, "removed (dashed)", "#8a8a8a") +
           swatch("#ffffff", "#606060", "unchanged") + "</TR></TABLE>";
  }

  const Graph& g_;
  const DotOptions& o_;
  const Graph* before_;
  const NodeMatching* m_;
  std::vector<Item> items_;
  std::unordered_map<const Node*, std::string> ids_, removedIds_;
  std::unordered_map<const Value*, std::string> paramIds_;
  std::unordered_map<const Block*, std::string> blockKeys_;
  std::map<std::string, std::string> blockLabels_;
  std::unordered_map<const Item*, std::string> drawnId_;
  std::unordered_map<std::string, std::string> drawnById_;
  std::map<std::string, const Item*> itemById_;
  std::map<std::string, std::string> summaryLines_;
  DiffCounts diffCounts_;
  size_t depth_ = 0;
  bool truncate_ = false;
  std::string limitNote_;
  size_t clusterCounter_ = 0;
};

}  // namespace

std::string writeDot(const Graph& g, const DotOptions& options) { return DotWriter(g, options).write(nullptr); }

std::string writeDotDiff(const Graph& before, const Graph& after, const DotOptions& options, DiffCounts* counts) {
  const NodeMatching m = matchNodes(before, after);
  return DotWriter(after, options, &before, &m).write(counts);
}

}  // namespace ptopt::ir
