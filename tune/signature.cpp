#include "tune/signature.h"

#include "ir/literal.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <unordered_map>

namespace ptopt::tune {

namespace {

std::string formatName(std::optional<c10::MemoryFormat> f) {
  if (!f) return "?";
  switch (*f) {
    case c10::MemoryFormat::Contiguous: return "cf";
    case c10::MemoryFormat::ChannelsLast: return "cl";
    case c10::MemoryFormat::ChannelsLast3d: return "cl3d";
    default: return "?";
  }
}

std::optional<c10::MemoryFormat> formatOf(const at::Tensor& t) {
  if (t.is_contiguous()) return c10::MemoryFormat::Contiguous;
  if (t.dim() == 4 && t.is_contiguous(c10::MemoryFormat::ChannelsLast)) return c10::MemoryFormat::ChannelsLast;
  if (t.dim() == 5 && t.is_contiguous(c10::MemoryFormat::ChannelsLast3d)) return c10::MemoryFormat::ChannelsLast3d;
  return std::nullopt;
}

std::string tensorText(c10::ScalarType dtype, const std::vector<int64_t>& shape, std::optional<c10::MemoryFormat> f) {
  return fmt::format("{}[{}]:{}", ir::dtypeName(dtype), fmt::join(shape, ","), formatName(f));
}

}  // namespace

std::optional<std::string> tensorSignature(const ir::Value& v) {
  if (auto t = rewriters::constantTensor(&v))
    return "const " + tensorText(t->scalar_type(), t->sizes().vec(), formatOf(*t));
  const ir::TensorMeta& m = const_cast<ir::Value&>(v).meta();
  if (!m.dtype || !m.shape) return std::nullopt;
  return tensorText(*m.dtype, *m.shape, m.memoryFormat);
}

std::optional<std::string> opSignature(const ir::Node& n, std::string& why) {
  std::string s = n.target() + (n.overload().empty() ? "" : "." + n.overload()) + "(";
  for (size_t i = 0; i < n.numArgs(); ++i) {
    if (i) s += ", ";
    const ir::Arg& a = n.arg(i);
    if (a.isLiteral()) {
      s += a.literal().str();
      continue;
    }
    const ir::Value* v = a.value();
    if (!v->isTensor()) {
      why = "argument " + std::to_string(i) + " is not a tensor or a literal";
      return std::nullopt;
    }
    auto t = tensorSignature(*v);
    if (!t) {
      why = "the dtype or shape of %" + v->name() + " is unknown (run shape-prop with --input-shape)";
      return std::nullopt;
    }
    s += *t;
  }
  return s + ")";
}

std::optional<std::string> regionSignature(const std::vector<const ir::Node*>& nodes, std::string& why) {
  std::unordered_map<const ir::Node*, size_t> index;
  for (const ir::Node* n : nodes) index.emplace(n, index.size());
  std::function<std::optional<std::string>(const ir::Value*)> valueText = [&](const ir::Value* v) -> std::optional<std::string> {
    const ir::Node* producer = v->node();
    if (producer && index.count(producer)) {
      std::string s = "$" + std::to_string(index.at(producer));
      if (producer->numOutputs() > 1)
        for (size_t i = 0; i < producer->numOutputs(); ++i)
          if (producer->output(i) == v) s += "." + std::to_string(i);
      return s;
    }
    if (producer && (producer->is("prim::ListConstruct") || producer->is("prim::TupleConstruct"))) {
      std::string s = "[";
      for (size_t i = 0; i < producer->numArgs(); ++i) {
        const ir::Arg& a = producer->arg(i);
        if (i) s += ", ";
        if (a.isLiteral()) {
          s += a.literal().str();
          continue;
        }
        auto e = valueText(a.value());
        if (!e) return std::nullopt;
        s += *e;
      }
      return s + "]";
    }
    if (v->isTensor()) {
      auto t = tensorSignature(*v);
      if (!t) why = "the dtype or shape of %" + v->name() + " is unknown (run shape-prop with --input-shape)";
      return t;
    }
    return std::string("?");  // a scalar computed at run time: its value is not part of the key
  };
  std::string s;
  for (const ir::Node* n : nodes) {
    s += n->target() + (n->overload().empty() ? "" : "." + n->overload()) + "(";
    for (size_t i = 0; i < n->numArgs(); ++i) {
      if (i) s += ", ";
      const ir::Arg& a = n->arg(i);
      if (a.isLiteral()) {
        s += a.literal().str();
        continue;
      }
      auto t = valueText(a.value());
      if (!t) return std::nullopt;
      s += *t;
    }
    s += ")";
    bool exits = false;
    for (size_t i = 0; i < n->numOutputs(); ++i)
      for (const ir::Use& u : n->output(i)->uses()) exits = exits || !index.count(u.user);
    s += exits ? "!;" : ";";
  }
  return s;
}

std::optional<std::vector<c10::IValue>> benchArguments(const ir::Node& n, c10::Device device, std::string& why) {
  std::vector<c10::IValue> args;
  at::manual_seed(0);
  for (size_t i = 0; i < n.numArgs(); ++i) {
    const ir::Arg& a = n.arg(i);
    if (a.isLiteral()) {
      args.push_back(a.literal().toIValue());
      continue;
    }
    const ir::Value* v = a.value();
    if (auto t = rewriters::constantTensor(v)) {
      args.emplace_back(t->to(device));
      continue;
    }
    const ir::TensorMeta& m = const_cast<ir::Value*>(v)->meta();
    if (!v->isTensor() || !m.dtype || !m.shape) {
      why = "the dtype or shape of %" + v->name() + " is unknown (run shape-prop with --input-shape)";
      return std::nullopt;
    }
    at::Tensor t = at::randn(*m.shape, at::TensorOptions().dtype(at::kFloat).device(device)).to(*m.dtype);
    if (m.memoryFormat && *m.memoryFormat != c10::MemoryFormat::Contiguous) t = t.contiguous(*m.memoryFormat);
    args.emplace_back(t);
  }
  return args;
}

std::string digest(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

std::string inputsSignature(const std::vector<c10::IValue>& inputs) {
  std::string s;
  for (const c10::IValue& v : inputs) {
    if (!s.empty()) s += ",";
    if (v.isTensor()) s += fmt::format("{}[{}]", ir::dtypeName(v.toTensor().scalar_type()), fmt::join(v.toTensor().sizes().vec(), "x"));
    else s += v.tagKind();
  }
  return s;
}

}  // namespace ptopt::tune
