#include "ir/load_time.h"

#include "ir/interpreter.h"
#include "ir/literal.h"

#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace ptopt::ir {

namespace {

constexpr const char* kHolderClass = "__torch__.ptopt.LoadTimeValues";

// What the holder's generated source may name: `torch` (aten operators)
// and the other operator namespaces its chains call (mkldnn_prepacked).
// torch.jit.save prints those calls as ops.<ns>.<op>, which a load resolves.
struct OperatorNamespaces : torch::jit::Resolver {
  explicit OperatorNamespaces(std::set<std::string> namespaces) : namespaces_(std::move(namespaces)) {}
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name, torch::jit::GraphFunction&,
                                                         const torch::jit::SourceRange&) override {
    if (name == "torch") return std::make_shared<torch::jit::BuiltinModule>("aten");
    if (namespaces_.count(name)) return std::make_shared<torch::jit::BuiltinModule>(name);
    return nullptr;
  }
  std::set<std::string> namespaces_;
};

const at::Tensor* constantTensorOf(const Model& model, const Value* v) {
  const Node* n = v->node();
  if (!n || n->opcode() != Opcode::GetAttr || !model.constants->contains(n->target())) return nullptr;
  const c10::IValue& iv = model.constants->at(n->target());
  if (!iv.isTensor() || iv.toTensor().layout() != c10::kStrided) return nullptr;
  return &iv.toTensor();
}

// The literal as TorchScript source spells it, when it can.
std::optional<std::string> spell(const Literal& l) {
  if (l.isNone()) return std::string("None");
  if (l.is<bool>()) return std::string(l.as<bool>() ? "True" : "False");
  if (l.is<int64_t>()) return std::to_string(l.as<int64_t>());
  if (l.is<double>()) {
    const double d = l.as<double>();
    if (!std::isfinite(d)) return std::nullopt;
    std::string s = fmt::format("{}", d);
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    return s;
  }
  if (l.is<std::string>()) {
    // Plain identifiers only ("none"): nothing to escape.
    const std::string& text = l.as<std::string>();
    for (char c : text)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return std::nullopt;
    return "\"" + text + "\"";
  }
  if (l.is<std::vector<int64_t>>()) {
    std::string s = "[";
    for (int64_t x : l.as<std::vector<int64_t>>()) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
    return s + "]";
  }
  return std::nullopt;
}

bool qualifies(const Model& model, const Node& n, const std::set<const Node*>& hoisted) {
  if (!isLoadTimeOperator(n) || n.owningBlock() != n.graph().block()) return false;
  for (const Arg& a : n.args()) {
    if (a.isLiteral()) {
      if (!spell(a.literal())) return false;
    } else if (!constantTensorOf(model, a.value()) && !(a.value()->node() && hoisted.count(a.value()->node()))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool isLoadTimeOperatorName(const std::string& qualified) {
  return qualified == "aten::to_mkldnn" || qualified == "aten::mkldnn_reorder_conv2d_weight" ||
         qualified == "mkldnn_prepacked::conv2d_prepack" || qualified == "prepacked::conv2d_clamp_prepack" ||
         qualified == "prepacked::linear_clamp_prepack" || qualified == "mkldnn::_reorder_linear_weight" ||
         qualified == "onednn::qconv_prepack" || qualified == "onednn::qlinear_prepack";
}

bool isLoadTimeOperator(const Node& n) {
  return n.isCall() && n.numOutputs() == 1 && n.blocks().empty() && isLoadTimeOperatorName(n.target());
}

bool hasLoadTimeNodes(const Model& model) {
  for (const auto& [name, graph] : model.methods)
    for (const Node* n : *graph->block())
      if (qualifies(model, *n, {})) return true;
  return false;
}

LoadTimeValues hoistLoadTimeValues(Model& model) {
  LoadTimeValues out;
  std::map<std::string, size_t> stateIndex;  // constant name -> s<i>
  std::string body;                          // __setstate__'s computations
  size_t temps = 0;
  for (auto& [method, graph] : model.methods) {
    std::set<const Node*> hoisted;
    std::vector<Node*> chain;
    std::unordered_map<const Value*, std::string> expr;
    std::unordered_map<const Value*, c10::IValue> computed;
    for (Node* n : *graph->block()) {
      if (!qualifies(model, *n, hoisted)) continue;
      std::vector<std::string> args;
      std::vector<c10::IValue> values;
      for (const Arg& a : n->args()) {
        if (a.isLiteral()) {
          args.push_back(*spell(a.literal()));
          values.push_back(a.literal().toIValue());
        } else if (const at::Tensor* t = constantTensorOf(model, a.value())) {
          const std::string& name = a.value()->node()->target();
          auto [it, added] = stateIndex.emplace(name, out.state.size());
          if (added) out.state.push_back(*t);
          args.push_back(fmt::format("self.s{}", it->second));
          values.push_back(*t);
        } else {
          args.push_back(expr.at(a.value()));
          values.push_back(computed.at(a.value()));
        }
      }
      const std::string temp = fmt::format("t{}", temps++);
      // aten::op is torch.op in the source; another namespace's op is <ns>.op,
      // which the holder's resolver knows (attachLoadTimeValues).
      const size_t sep = n->target().find("::");
      const std::string ns = n->target().substr(0, sep), op = n->target().substr(sep + 2);
      const std::string callee = (ns == "aten" ? "torch" : ns) + "." + op;
      if (ns != "aten") out.namespaces.insert(ns);
      body += fmt::format("    {} = {}({})\n", temp, callee, fmt::join(args, ", "));
      computed[n->output()] = Interpreter::evaluateNode(*n, values).at(0);
      expr[n->output()] = temp;
      hoisted.insert(n);
      chain.push_back(n);
    }
    // Each result an ordinary node reads becomes a read of the holder's v<i>.
    for (Node* n : chain) {
      Value* v = n->output();
      bool readOutside = false;
      for (const Use& u : v->uses()) readOutside = readOutside || !hoisted.count(u.user);
      if (!readOutside) continue;
      const size_t i = out.values.size();
      out.values.push_back(computed.at(v));
      body += fmt::format("    self.v{} = {}\n", i, expr.at(v));
      Node* get = graph->createGetAttr(fmt::format("{}.v{}", kLoadTimeModule, i), v->type());
      get->output()->meta() = v->meta();
      get->insertBefore(n);
      std::vector<Use> outside;
      for (const Use& u : v->uses())
        if (!hoisted.count(u.user)) outside.push_back(u);
      for (const Use& u : outside) u.user->setArg(u.argIndex, get->output());
    }
    // The chains and the constant reads only they used go.
    std::vector<Value*> reads;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      for (const Arg& a : (*it)->args())
        if (a.isValue() && a.value()->node() && a.value()->node()->opcode() == Opcode::GetAttr) reads.push_back(a.value());
      (*it)->destroy();
    }
    for (Value* r : reads)
      if (r->node() && !r->hasUses()) r->node()->destroy();
  }
  if (out.values.empty()) return out;
  std::vector<std::string> types(out.state.size(), "Tensor"), fields;
  types.push_back("bool");
  for (size_t i = 0; i < out.state.size(); ++i) fields.push_back(fmt::format("self.s{}", i));
  fields.push_back("self.training");
  std::string restore;
  for (size_t i = 0; i < out.state.size(); ++i) restore += fmt::format("    self.s{} = state[{}]\n", i, i);
  restore += fmt::format("    self.training = state[{}]\n", out.state.size());
  const std::string tuple = fmt::format("Tuple[{}]", fmt::join(types, ", "));
  out.source = fmt::format(
      "def __getstate__(self) -> {0}:\n"
      "    return ({1})\n"
      "\n"
      "def __setstate__(self, state: {0}) -> None:\n"
      "{2}{3}",
      tuple, fmt::join(fields, ", "), restore, body);
  return out;
}

void attachLoadTimeValues(torch::jit::Module& root, const std::shared_ptr<torch::jit::CompilationUnit>& cu,
                          const LoadTimeValues& values) {
  torch::jit::Module holder(c10::QualifiedName(kHolderClass), cu, /*shouldMangle=*/true);
  holder.register_attribute("training", c10::BoolType::get(), false);
  for (size_t i = 0; i < values.state.size(); ++i)
    holder.register_attribute(fmt::format("s{}", i), c10::TensorType::get(), values.state[i]);
  for (size_t i = 0; i < values.values.size(); ++i) {
    const c10::IValue& v = values.values[i];  // a oneDNN tensor, or a packed-conv object
    holder.register_attribute(fmt::format("v{}", i), v.isTensor() ? c10::TensorType::get() : v.type(), v);
  }
  holder.define(values.source, std::make_shared<OperatorNamespaces>(values.namespaces));
  root.register_module(kLoadTimeModule, holder);
}

bool repackLoadTimeValues(torch::jit::Module& root) {
  bool any = false;
  for (torch::jit::Module m : root.modules()) {
    if (!m.hasattr(kLoadTimeModule)) continue;
    const c10::IValue holderValue = m.attr(kLoadTimeModule);
    if (!holderValue.isObject()) continue;
    torch::jit::Module holder(holderValue.toObject());
    if (!holder.find_method("__getstate__") || !holder.find_method("__setstate__")) continue;
    holder.run_method("__setstate__", holder.run_method("__getstate__"));
    any = true;
  }
  return any;
}

}  // namespace ptopt::ir
