// Specializing a graph to the shapes of given inputs (see specialize.h).
#include "ir/specialize.h"

#include "ir/dead_code.h"
#include "ir/interpreter.h"

#include <fmt/format.h>

#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::ir {

namespace {

bool isMetadataQuery(const Node* n) {
  static const std::set<std::string> kQueries = {
      "aten::size",   "aten::dim",    "aten::numel",     "aten::len",    "prim::dtype",
      "prim::device", "prim::layout", "prim::is_cuda",   "aten::is_floating_point",
      "aten::__is__", "aten::__isnot__"};
  return n->isCall() && kQueries.count(n->target()) != 0;
}

bool takesTensor(const Node* n) {
  for (const Arg& a : n->args()) {
    if (!a.isValue()) continue;
    const c10::TypePtr& t = a.value()->type();
    if (t->kind() == c10::TypeKind::TensorType) return true;
    if (t->kind() == c10::TypeKind::OptionalType && t->containedTypes()[0]->kind() == c10::TypeKind::TensorType)
      return true;
    if (t->kind() == c10::TypeKind::ListType && t->containedTypes()[0]->kind() == c10::TypeKind::TensorType)
      return true;
  }
  return false;
}

class Specializer {
 public:
  Specializer(Graph& g, const std::vector<c10::IValue>& inputs) : g_(g), inputs_(inputs) {}

  Specialization run() {
    for (int round = 0; round < 64; ++round) {
      observe();
      const size_t before = out_.literals + out_.branches;
      replaceByLiterals();
      inlineBranches();
      forwardTuples();
      eliminateDeadCode(g_);
      if (out_.literals + out_.branches == before) break;
    }
    return out_;
  }

 private:
  // The values the top-level nodes produced on the inputs.
  void observe() {
    taken_.clear();
    InterpreterOptions options;
    options.observer = [this](const Value& v, const c10::IValue& iv) {
      if (v.node() && v.node()->owningBlock() == g_.block() && !iv.isTensor()) taken_[&v] = iv;
    };
    Interpreter(g_, options).run(inputs_);
  }

  // Which top-level values are functions of metadata alone, in program order.
  std::unordered_set<const Value*> metadataValues() const {
    std::unordered_set<const Value*> out;
    for (Node* n : *g_.block()) {
      if (!n->isCall() || !n->blocks().empty()) continue;
      bool ok = isMetadataQuery(n);
      if (!ok && !takesTensor(n) && !hasSideEffects(n)) {
        ok = true;
        for (const Arg& a : n->args())
          if (a.isValue() && !out.count(a.value())) ok = false;
      }
      if (ok)
        for (const auto& o : n->outputs()) out.insert(o.get());
    }
    return out;
  }

  void replaceByLiterals() {
    const auto metadata = metadataValues();
    for (Node* n : *g_.block()) {
      if (!n->isCall() || !n->blocks().empty()) continue;
      for (const auto& o : n->outputs()) {
        if (!metadata.count(o.get()) || !o->hasUses()) continue;
        auto it = taken_.find(o.get());
        if (it == taken_.end()) continue;
        std::optional<Literal> literal = Literal::fromIValue(it->second, o->type());
        if (!literal) continue;
        // Every use becomes the literal (Node::setArg keeps use lists).
        const std::vector<Use> uses = o->uses();
        for (const Use& u : uses) u.user->setArg(u.argIndex, *literal);
        ++out_.literals;
      }
    }
  }

  // prim::TupleUnpack of a prim::TupleConstruct: its results are the
  // construct's arguments (a NamedTuple built only to be taken apart).
  void forwardTuples() {
    for (Node* n : *g_.block()) {
      if (!n->is("prim::TupleUnpack") || n->numArgs() != 1 || !n->argValue(0)) continue;
      Node* p = n->argValue(0)->node();
      if (!p || !p->is("prim::TupleConstruct") || p->numArgs() != n->numOutputs()) continue;
      for (size_t i = 0; i < n->numOutputs(); ++i) {
        Value* o = n->output(i);
        if (!o->hasUses()) continue;
        const Arg& a = p->arg(i);
        if (a.isValue()) {
          o->replaceAllUsesWith(a.value());
        } else {
          const std::vector<Use> uses = o->uses();
          for (const Use& u : uses) u.user->setArg(u.argIndex, a.literal());
        }
        ++out_.literals;
      }
    }
  }

  void inlineBranches() {
    std::vector<Node*> ifs;
    for (Node* n : *g_.block())
      if (n->is("prim::If") && n->arg(0).isLiteral() && n->arg(0).literal().is<bool>()) ifs.push_back(n);
    for (Node* n : ifs) {
      const bool cond = n->arg(0).literal().as<bool>();
      Block* taken = n->block(cond ? 0 : 1);
      std::vector<Node*> body;
      for (Node* inner : *taken)
        if (inner->opcode() != Opcode::Output) body.push_back(inner);
      for (Node* inner : body) inner->moveBefore(n);
      Node* out = taken->outputNode();
      std::vector<Arg> resultArgs = out->args();
      for (size_t i = 0; i < n->numOutputs(); ++i) {
        const Arg& r = resultArgs.at(i);
        Value* o = n->output(i);
        if (r.isValue()) {
          o->replaceAllUsesWith(r.value());
        } else {
          const std::vector<Use> uses = o->uses();
          for (const Use& u : uses) u.user->setArg(u.argIndex, r.literal());
        }
      }
      out_.notes.push_back(fmt::format("{}: took the {} branch of an `if` on the inputs' shapes or types{}",
                                       n->sourceLocation().empty() ? std::string("a prim::If") : n->sourceLocation(),
                                       cond ? "true" : "false",
                                       n->scope().empty() ? "" : " (in " + n->scope() + ")"));
      out->removeAllArgs();
      n->destroy();
      ++out_.branches;
    }
  }

  Graph& g_;
  const std::vector<c10::IValue>& inputs_;
  std::unordered_map<const Value*, c10::IValue> taken_;
  Specialization out_;
};

}  // namespace

Specialization specializeToInputs(Graph& graph, const std::vector<c10::IValue>& inputs) {
  return Specializer(graph, inputs).run();
}

}  // namespace ptopt::ir
