#include "rewriters/const_fold.h"

#include "ir/dead_code.h"
#include "ir/interpreter.h"
#include "ir/mutation.h"
#include "ir/model.h"
#include "ir/text.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::rewriters {

namespace {

// Ops whose result is uninitialized memory: folding would bake garbage in.
bool returnsUninitialized(const std::string& target) {
  static const std::set<std::string> ops = {"aten::empty", "aten::empty_like", "aten::empty_strided",
                                            "aten::new_empty", "aten::new_empty_strided",
                                            "prim::Uninitialized"};
  return ops.count(target) != 0;
}

// Why ir::hasSideEffects holds, in words for --explain.
std::string sideEffectReason(const ir::Node* n) {
  if (n->schema() && n->schema()->is_mutable()) return "it writes its arguments in place";
  for (const char* r : {"rand", "dropout", "bernoulli", "normal", "multinomial", "uniform"})
    if (n->target().find(r) != std::string::npos) return "it draws random numbers";
  if (!n->schema()) return "it is an operator without a schema that may have side effects";
  return "it has side effects (raises, prints, warns or draws random numbers)";
}

// The first constant name a value derives from (for naming folded results).
std::string sourceConstantName(const ir::Node* n, int depth = 0) {
  if (depth > 16) return "";
  for (const ir::Arg& a : n->args()) {
    const ir::Value* v = a.value();
    if (!v || !v->node()) continue;
    if (v->node()->opcode() == ir::Opcode::GetAttr) return v->node()->target();
    if (std::string s = sourceConstantName(v->node(), depth + 1); !s.empty()) return s;
  }
  return "";
}

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// `w.folded` and `w.folded.2` name their source `w`, so refolding a folded
// constant gives `w.folded.1`, not `w.folded.folded`.
std::string foldedName(std::string base) {
  if (base.empty()) return "const.folded";
  const auto pos = base.rfind(".folded");
  if (pos != std::string::npos) {
    const std::string tail = base.substr(pos + 7);
    const bool numbered = tail.size() > 1 && tail[0] == '.' &&
                          tail.find_first_not_of("0123456789", 1) == std::string::npos;
    if (tail.empty() || numbered) base.resize(pos);
  }
  return base + ".folded";
}

// Every tensor inside an argument (lists, tuples and dicts included).
void collectTensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) collectTensors(e, out);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) collectTensors(e, out);
  } else if (v.isGenericDict()) {
    for (const auto& entry : v.toGenericDict()) collectTensors(entry.value(), out);
  }
}

class Folder {
 public:
  Folder(ir::Graph& g, PassContext& ctx, const std::string& pass, int64_t maxBytes)
      : g_(g), ctx_(ctx), pass_(pass), maxBytes_(maxBytes), mutation_(g), rw_(g, ctx.edits, pass) {}

  PassResult run() {
    std::vector<ir::Node*> order;
    g_.walk([&](ir::Node* n) { order.push_back(n); });
    for (ir::Node* n : order) {
      if (destroyed_.count(n)) continue;
      if (n->opcode() == ir::Opcode::GetAttr) {
        if (g_.constants().contains(n->target())) known_[n->output()] = g_.constants().at(n->target());
        continue;
      }
      if (n->isCall()) visit(n);
    }
    for (ir::Node* n : kept_) {
      if (destroyed_.count(n)) continue;
      for (const auto& out : n->outputs())
        if (out->hasUses()) {
          ctx_.decline(pass_, n, "its result (" + ir::printType(out->type()) +
                                     ") is neither a tensor nor a literal, so it cannot be stored");
          break;
        }
    }
    if (folded_) result_.count("folded", folded_);
    result_.changed = rw_.changed();
    return result_;
  }

 private:
  void decline(const ir::Node* n, const std::string& why) { ctx_.decline(pass_, n, why); }

  std::optional<std::string> refusal(const ir::Node* n) const {
    if (!n->blocks().empty()) return std::string("it owns nested blocks");
    if (ir::isOpaque(n))
      return "it calls opaque operator " + n->qualifiedTarget() +
             ": ptopt never evaluates operators it does not know (they may keep state or have side effects)";
    if (ir::hasSideEffects(n)) return sideEffectReason(n);
    if (returnsUninitialized(n->target())) return std::string("its result is uninitialized memory");
    for (const ir::Arg& a : n->args()) {
      const ir::Value* v = a.value();
      if (v && mutation_.mayBeWritten(v)) {
        const bool isConstant = v->node() && v->node()->opcode() == ir::Opcode::GetAttr;
        return isConstant ? "constant '" + v->node()->target() + "' is written in place elsewhere in the graph"
                          : "its input %" + v->name() + " is written in place elsewhere in the graph";
      }
    }
    for (const auto& out : n->outputs())
      if (mutation_.mayBeWritten(out.get())) return "its result %" + out->name() + " is written in place";
    return std::nullopt;
  }

  void visit(ir::Node* n) {
    std::vector<c10::IValue> args;
    for (const ir::Arg& a : n->args()) {
      if (a.isLiteral()) {
        args.push_back(a.literal().toIValue());
        continue;
      }
      auto it = known_.find(a.value());
      if (it == known_.end()) return;  // not all-constant: nothing to say
      args.push_back(it->second);
    }
    bool used = false;
    for (const auto& out : n->outputs()) used = used || out->hasUses();
    if (!used) return;  // dead (or no results): dce's business
    if (auto why = refusal(n)) return decline(n, *why);

    std::vector<c10::IValue> results;
    try {
      results = ir::Interpreter::evaluateNode(*n, args);
    } catch (const std::exception& e) {
      return decline(n, "evaluating it failed (left to run time): " + firstLine(ir::torchErrorMessage(e)));
    }

    // All results must be storable; tensors count against max-bytes.
    int64_t bytes = 0;
    bool storable = true;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!n->output(i)->hasUses()) continue;
      if (results[i].isTensor() && results[i].toTensor().layout() != c10::kStrided) {
        std::ostringstream layout;
        layout << results[i].toTensor().layout();
        return decline(n, "its result is a " + layout.str() +
                              " tensor, which a TorchScript file cannot store (the export computes such "
                              "values when the model loads: ir/load_time.h)");
      }
      if (results[i].isTensor()) {
        const at::Tensor& t = results[i].toTensor();
        bytes += static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
      } else if (!ir::Literal::fromIValue(results[i], returnType(n, i))) {
        storable = false;
      }
    }
    if (bytes > maxBytes_) {
      result_.count("skipped-large");
      return decline(n, fmt::format("its result takes {} bytes, over max-bytes={}", bytes, maxBytes_));
    }
    if (!storable) {
      // Keep the node, but let later nodes fold through its value.
      for (size_t i = 0; i < results.size(); ++i) known_[n->output(i)] = results[i];
      kept_.push_back(n);
      return;
    }
    for (size_t i = 0; i < results.size(); ++i) {
      ir::Value* out = n->output(i);
      if (!out->hasUses()) continue;
      if (results[i].isTensor()) replaceWithConstant(n, out, results[i].toTensor(), args);
      else replaceWithLiteral(out, results[i], returnType(n, i));
    }
    std::vector<ir::Value*> inputs;
    for (const ir::Arg& a : n->args())
      if (a.isValue()) inputs.push_back(a.value());
    destroy(n);
    removeUnusedProducers(inputs);
    ++folded_;
  }

  static c10::TypePtr returnType(const ir::Node* n, size_t i) {
    if (const auto* s = n->schema(); s && i < s->returns().size()) return s->returns()[i].real_type();
    return n->output(i)->type();
  }

  void replaceWithConstant(const ir::Node* n, ir::Value* out, at::Tensor t, const std::vector<c10::IValue>& args) {
    // Never share storage with an existing constant (or keep a large buffer
    // alive for a small view): copy.
    bool copy = t.storage().nbytes() > static_cast<size_t>(t.numel()) * t.element_size();
    std::vector<at::Tensor> inputs;
    for (const auto& a : args) collectTensors(a, inputs);
    for (const at::Tensor& in : inputs) copy = copy || t.is_alias_of(in);
    t = copy ? t.detach().clone(at::MemoryFormat::Preserve) : t.detach();
    const std::string name = rw_.storeConstant(foldedName(sourceConstantName(n)), t);
    created_.insert(name);
    ir::Node* getAttr = g_.createGetAttr(name, c10::TensorType::get());
    getAttr->output()->meta() = out->meta();  // lint: detached (its insert is the edit)
    insertInPrologue(getAttr);
    known_[getAttr->output()] = t;
    rw_.replaceAllUsesWith(out, getAttr->output());
  }

  void replaceWithLiteral(ir::Value* out, const c10::IValue& iv, const c10::TypePtr& hint) {
    const ir::Literal generic = *ir::Literal::fromIValue(iv, hint);
    const std::vector<ir::Use> uses = out->uses();
    for (const ir::Use& u : uses) {
      std::optional<ir::Literal> lit;
      if (const auto* s = u.user->schema(); s && u.argIndex < s->arguments().size())
        lit = ir::Literal::fromIValue(iv, s->arguments()[u.argIndex].real_type());
      rw_.setArg(u.user, u.argIndex, lit ? *lit : generic);
    }
  }

  // Appends to the graph's prologue (its placeholders and get_attr nodes).
  // The end is found once per run, not per constant: a deep model's
  // prologue holds thousands of get_attr nodes.
  void insertInPrologue(ir::Node* getAttr) {
    if (!prologueKnown_) {
      prologueTail_ = nullptr;
      for (ir::Node* n : *g_.block()) {
        if (n->opcode() != ir::Opcode::Placeholder && n->opcode() != ir::Opcode::GetAttr) break;
        prologueTail_ = n;
      }
      prologueKnown_ = true;
    }
    if (prologueTail_) rw_.insertAfter(getAttr, prologueTail_);
    else rw_.insert(getAttr, g_.block()->first());
    prologueTail_ = getAttr;
  }

  void destroy(ir::Node* n) {
    if (n == prologueTail_) prologueKnown_ = false;
    destroyed_.insert(n);
    rw_.erase(n);
  }

  // Removes get_attr nodes and kept evaluated nodes that folding left unused.
  void removeUnusedProducers(std::vector<ir::Value*> values) {
    while (!values.empty()) {
      ir::Value* v = values.back();
      values.pop_back();
      ir::Node* d = v->node();
      if (!d || destroyed_.count(d) || !known_.count(v)) continue;
      bool used = false;
      for (const auto& out : d->outputs()) used = used || out->hasUses();
      if (used) continue;
      if (d->opcode() != ir::Opcode::GetAttr && ir::hasSideEffects(d)) continue;
      for (const ir::Arg& a : d->args())
        if (a.isValue()) values.push_back(a.value());
      for (const auto& out : d->outputs()) known_.erase(out.get());
      // An intermediate constant of this run that a later fold consumed (the
      // table is not part of the graph's text: only the get_attr's erase is
      // an edit).
      if (d->opcode() == ir::Opcode::GetAttr && created_.count(d->target())) {
        rw_.dropConstant(d->target());
        created_.erase(d->target());
      }
      destroy(d);
    }
  }

  ir::Graph& g_;
  PassContext& ctx_;
  const std::string& pass_;
  int64_t maxBytes_;
  ir::MutationAnalysis mutation_;
  ir::Rewriter rw_;
  std::unordered_map<const ir::Value*, c10::IValue> known_;
  std::unordered_set<const ir::Node*> destroyed_;
  std::vector<ir::Node*> kept_;
  std::set<std::string> created_;  // constants this run added
  int64_t folded_ = 0;
  PassResult result_;
  ir::Node* prologueTail_ = nullptr;
  bool prologueKnown_ = false;
};

}  // namespace

std::vector<OptionSpec> ConstFoldPass::optionSpecs() const {
  OptionSpec maxBytes;
  maxBytes.name = "max-bytes";
  maxBytes.kind = OptionKind::Int;
  maxBytes.defaultValue = std::to_string(kDefaultMaxBytes);
  maxBytes.help = "largest tensor result (in bytes) that is folded into a new constant";
  maxBytes.min = 0;
  return {maxBytes};
}

PassResult ConstFoldPass::run(ir::Graph& graph, PassContext& ctx) {
  const int64_t maxBytes = options().has("max-bytes") ? options().getInt("max-bytes") : kDefaultMaxBytes;
  const std::string pass = name();
  return Folder(graph, ctx, pass, maxBytes).run();
}

}  // namespace ptopt::rewriters
