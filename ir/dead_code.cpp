#include "ir/dead_code.h"

#include <set>
#include <unordered_set>
#include <string>

namespace ptopt::ir {

namespace {

bool isPureSchemaless(const std::string& target) {
  static const std::set<std::string> pure = {
      "prim::ListConstruct", "prim::ListUnpack", "prim::TupleConstruct", "prim::TupleUnpack",
      "prim::TupleIndex", "prim::TupleSlice", "prim::DictConstruct", "prim::unchecked_cast",
      "prim::Uninitialized", "prim::isinstance", "prim::Constant", "prim::If", "prim::Loop",
      "prim::GetAttr", "prim::ConstantChunk", "prim::BroadcastSizes", "prim::EnumName",
      "prim::EnumValue"};
  return pure.count(target) != 0;
}

bool isEffectful(const std::string& target) {
  static const std::set<std::string> effectful = {
      "prim::RaiseException", "prim::Print", "aten::warn", "prim::SetAttr", "prim::Enter",
      "prim::Exit", "prim::fork", "aten::wait", "prim::PythonOp", "prim::IgnoredPythonOp",
      "prim::CallMethod", "prim::CallFunction", "aten::manual_seed", "aten::seed"};
  return effectful.count(target) != 0;
}

// Ops that draw from the global random number generator.
bool drawsRandomNumbers(const std::string& target) {
  static const char* kRandom[] = {"rand", "dropout", "bernoulli", "normal", "multinomial",
                                  "uniform", "exponential", "cauchy", "log_normal", "geometric",
                                  "poisson", "random", "rrelu", "fused_dropout"};
  for (const char* r : kRandom)
    if (target.find(r) != std::string::npos) return true;
  return false;
}

// `user`, or a node it is nested in, is in `gone`.
bool insideGone(const Node* user, const std::unordered_set<const Node*>& gone) {
  for (const Node* m = user; m; m = m->owningBlock() ? m->owningBlock()->owningNode() : nullptr)
    if (gone.count(m)) return true;
  return false;
}

// No output is read (by a node outside `gone`) and no side effects.
bool isDead(const Node* n, const std::unordered_set<const Node*>& gone) {
  if (n->opcode() == Opcode::Output || n->opcode() == Opcode::Placeholder) return false;
  for (const auto& out : n->outputs())
    for (const Use& u : out->uses())
      if (!insideGone(u.user, gone)) return false;
  return !hasSideEffects(n);
}

// How many nodes of `b` the node-by-node walk below would remove, without
// removing them (`gone` collects them).
size_t countDead(const Block& b, std::unordered_set<const Node*>& gone) {
  size_t count = 0;
  for (const Node* n = b.last(); n; n = n->prev()) {
    for (const auto& nested : n->blocks()) count += countDead(*nested, gone);
    if (isDead(n, gone)) {
      gone.insert(n);
      ++count;
    }
  }
  return count;
}

size_t eliminateInBlock(Block& b, Rewriter& rw) {
  static const std::unordered_set<const Node*> kNoneGone;
  size_t removed = 0;
  for (Node* n = b.last(); n;) {
    Node* prev = n->prev();
    if (!n->blocks().empty() && isDead(n, kNoneGone)) {
      // A dead If/Loop goes in one erase with its blocks (so the edit log
      // holds its whole text); its dead nested nodes count as removed too.
      std::unordered_set<const Node*> gone;
      for (const auto& nested : n->blocks()) removed += countDead(*nested, gone);
      removed += 1;
      rw.erase(n);
    } else {
      for (const auto& nested : n->blocks()) removed += eliminateInBlock(*nested, rw);
      if (isDead(n, kNoneGone)) {
        removed += 1;
        rw.erase(n);
      }
    }
    n = prev;
  }
  return removed;
}

}  // namespace

bool hasSideEffects(const Node* n) {
  if (n->opcode() != Opcode::CallFunction) return n->opcode() == Opcode::Output;
  const std::string& t = n->target();
  if (isOpaque(n))
    return !(n->schema() && n->schema()->aliasAnalysis() == c10::AliasAnalysisKind::PURE_FUNCTION &&
             !n->schema()->is_mutable());
  if (isEffectful(t) || drawsRandomNumbers(t)) return true;
  // A read of module state (no object argument): it must stay where it is
  // relative to the prim::SetAttr that writes the same attribute.
  if (t == "prim::GetAttr" && n->numArgs() == 0) return true;
  if (const auto* schema = n->schema()) {
    if (schema->is_mutable()) return true;
  } else if (!isPureSchemaless(t)) {
    return true;  // unknown operator: keep it
  }
  for (const auto& b : n->blocks())
    for (const Node* inner : *b)
      if (inner->opcode() != Opcode::Output && hasSideEffects(inner)) return true;
  return false;
}

size_t eliminateDeadCode(Rewriter& rw) { return eliminateInBlock(*rw.graph().block(), rw); }

size_t eliminateDeadCode(Graph& g) {
  Rewriter rw(g, nullptr, "import");
  return eliminateDeadCode(rw);
}

}  // namespace ptopt::ir
