#include "draw/labels.h"

#include "ir/op_views.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

namespace ptopt::draw {

using ir::Arg;
using ir::Literal;
using ir::Node;
using ir::Opcode;

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

std::string truncateText(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "…"; }

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

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

std::string nodeScope(const Node* n) {
  if (!n->scope().empty()) return n->scope();
  for (const Arg& a : n->args())
    if (readsConstant(a)) {
      std::string m = constantModule(a.value()->node()->target());
      if (!m.empty()) return m;
    }
  return "";
}

std::optional<std::vector<int64_t>> constantShape(const ir::Graph& g, const Node* getAttr) {
  const std::string& name = getAttr->target();
  if (g.constants().contains(name)) {
    const c10::IValue& v = g.constants().at(name);
    if (v.isTensor()) return v.toTensor().sizes().vec();
    return std::nullopt;
  }
  return getAttr->output()->meta().shape;
}

bool isLiteralList(const Node* n) {
  if (!n->is("prim::ListConstruct") || n->numOutputs() != 1) return false;
  for (const Arg& a : n->args())
    if (!a.isLiteral() || !(a.literal().is<int64_t>() || a.literal().is<double>() || a.literal().is<bool>()))
      return false;
  return true;
}

namespace {

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

// An argument as a literal: an inline literal, or a literal list node's value.
std::optional<Literal> literalOf(const Arg& a) {
  if (a.isLiteral()) return a.literal();
  if (a.value()->node() && isLiteralList(a.value()->node())) return literalListValue(a.value()->node());
  return std::nullopt;
}

// Argument `name` (by the op's schema or family table) as a literal.
std::optional<Literal> literalNamed(const ir::OpView& view, const std::string& name) {
  const std::optional<size_t> i = view.indexOf(name);
  if (!i || *i >= view.node()->numArgs()) return std::nullopt;
  return literalOf(view.node()->arg(*i));
}

// prim::Loop has no schema: its arguments are (max_trip_count, condition,
// carried values...).
constexpr size_t kLoopMaxTripCount = 0;
constexpr size_t kLoopCondition = 1;

std::optional<Literal> loopArgument(const Node* loop, size_t which) {
  return which < loop->numArgs() ? literalOf(loop->arg(which)) : std::nullopt;
}

// Conv: "3×3 s2 p1 g32" (kernel from the weight; stride, padding, dilation,
// output padding and groups left out at their defaults).
std::string convKeys(const ir::Graph& g, const Node* n) {
  Node* node = const_cast<Node*>(n);
  const std::optional<ir::ConvOp> conv = ir::ConvOp::match(node);
  const ir::OpView view = conv ? static_cast<const ir::OpView&>(*conv) : ir::OpView::of(node);
  std::vector<std::string> parts;
  if (const ir::Value* w = view.has("weight") ? view.value("weight") : nullptr) {
    std::optional<std::vector<int64_t>> shape =
        w->node() && w->node()->opcode() == Opcode::GetAttr ? constantShape(g, w->node()) : w->meta().shape;
    if (shape && shape->size() > 2) {
      std::string k;
      for (size_t i = 2; i < shape->size(); ++i) k += (i > 2 ? "×" : "") + std::to_string((*shape)[i]);
      parts.push_back(k);
    }
  }
  auto add = [&](const char* name, const char* prefix, int64_t dflt) {
    const std::optional<Literal> l = literalNamed(view, name);
    if (l && !isAll(*l, dflt)) parts.push_back(prefix + compactList(*l));
  };
  add("stride", "s", 1);
  add("padding", "p", 0);
  add("dilation", "d", 1);
  add("output_padding", "op", 0);
  add("groups", "g", 1);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

}  // namespace

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

std::string keyLiterals(const ir::Graph& g, const Node* n) {
  if (!n->isCall()) return "";
  const std::string op = shortOp(n);
  if (ir::ConvOp::isConv(n)) return convKeys(g, n);
  const ir::OpView view = ir::OpView::of(const_cast<Node*>(n));
  if (op.find("pool") != std::string::npos && op.find("adaptive") == std::string::npos) {
    // max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode)
    std::string out;
    if (const auto k = literalNamed(view, "kernel_size")) out += "k" + compactList(*k);
    if (const auto s = literalNamed(view, "stride");
        s && !(s->is<std::vector<int64_t>>() && s->as<std::vector<int64_t>>().empty()))
      out += " s" + compactList(*s);
    if (const auto p = literalNamed(view, "padding"); p && !isAll(*p, 0)) out += " p" + compactList(*p);
    return out;
  }
  if (op.find("adaptive") != std::string::npos) {
    if (const auto s = literalNamed(view, "output_size")) return "→ " + compactList(*s);
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
    // A `while` loop has INT64_MAX trips, a `for` loop a condition of True.
    const std::optional<Literal> trips = loopArgument(n, kLoopMaxTripCount);
    const std::optional<Literal> cond = loopArgument(n, kLoopCondition);
    const bool unbounded = trips && trips->is<int64_t>() && trips->as<int64_t>() == std::numeric_limits<int64_t>::max();
    const bool always = cond && *cond == Literal(true);
    std::string out = unbounded ? "while" : always ? "for" : "for … while";
    if (!unbounded && trips) out += " " + literalShort(*trips) + " trips";
    return out;
  }
  const c10::FunctionSchema* schema = n->schema();
  if (op == "batch_norm" || op == "layer_norm" || op == "group_norm" || op == "instance_norm") {
    std::string out;
    for (size_t i = 0; schema && i < n->numArgs() && i < schema->arguments().size(); ++i) {
      const std::optional<Literal> l = literalOf(n->arg(i));
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
  std::vector<std::string> parts;
  size_t shown = 0, hidden = 0;
  for (size_t i = 0; i < n->numArgs(); ++i) {
    const std::optional<Literal> l = literalOf(n->arg(i));
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

std::string metaLine(const ir::Value* v, size_t users) {
  const ir::TensorMeta& m = v->meta();
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

size_t userCount(const Node* n) {
  size_t u = 0;
  for (const auto& o : n->outputs()) u += o->uses().size();
  return u;
}

std::string constantsLine(const ir::Graph& constantsOf, const Node* n, const std::vector<std::string>& scopeSegs,
                          bool showConstants) {
  if (showConstants) return "";
  // Constants read, grouped by shape: "weight, bias 64".
  std::vector<std::pair<std::string, std::string>> groups;  // shape text -> names
  const std::string scope = joinDots(scopeSegs, scopeSegs.size());
  for (const Arg& a : n->args()) {
    if (!readsConstant(a)) continue;
    const Node* c = a.value()->node();
    std::string name = c->target();
    const std::string mod = constantModule(name);
    if (!scope.empty() && name.rfind(scope + ".", 0) == 0) name = name.substr(scope.size() + 1);
    else if (!mod.empty() && mod == nodeScope(n)) name = name.substr(mod.size() + 1);
    auto shape = constantShape(constantsOf, c);
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

std::vector<std::string> nodeLabelRows(const ir::Graph& constantsOf, const Node* n,
                                       const std::vector<std::string>& scope, const std::string& where,
                                       bool showConstants, const char* muted) {
  std::vector<std::string> rows;
  std::string head = "<B>" + html(shortOp(n)) + "</B>";
  if (n->opcode() == Opcode::Placeholder) head = "<B>input</B> " + html(n->output()->name());
  if (n->opcode() == Opcode::GetAttr) head = "<I>" + html(n->target()) + "</I>";
  if (!where.empty() && n->isCall()) head += fmt::format(" <FONT COLOR=\"{}\">{}</FONT>", muted, html(where));
  rows.push_back(head);
  const std::string keys = keyLiterals(constantsOf, n);
  if (!keys.empty()) rows.push_back("<FONT POINT-SIZE=\"10\">" + html(keys) + "</FONT>");
  const std::string consts = constantsLine(constantsOf, n, scope, showConstants);
  if (!consts.empty()) rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT>", muted, consts));
  if (n->opcode() == Opcode::GetAttr) {
    auto shape = constantShape(constantsOf, n);
    if (shape) rows.push_back("<FONT POINT-SIZE=\"9\">" + html(shapeText(*shape)) + "</FONT>");
  } else if (n->numOutputs() > 0) {
    std::string meta = metaLine(n->output(0), userCount(n));
    if (n->numOutputs() > 1) meta += fmt::format(" ({} outputs)", n->numOutputs());
    if (!meta.empty()) rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT>", muted, meta));
  }
  return rows;
}

std::vector<std::string> paramLabelRows(const ir::Value* param, const char* muted) {
  std::vector<std::string> rows{"<I>" + html(param->name()) + "</I>"};
  const std::string meta = metaLine(param, param->uses().size());
  if (!meta.empty()) rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT>", muted, meta));
  return rows;
}

}  // namespace ptopt::draw
