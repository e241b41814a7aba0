#include "ir/dead_code.h"

#include <set>
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

size_t eliminateInBlock(Block& b) {
  size_t removed = 0;
  for (Node* n = b.last(); n;) {
    Node* prev = n->prev();
    for (const auto& nested : n->blocks()) removed += eliminateInBlock(*nested);
    bool used = n->opcode() == Opcode::Output || n->opcode() == Opcode::Placeholder;
    for (const auto& out : n->outputs()) used = used || out->hasUses();
    if (!used && !hasSideEffects(n)) {
      removed += 1;
      n->destroy();
    }
    n = prev;
  }
  return removed;
}

}  // namespace

bool isOpaque(const Node* n) {
  if (!n->isCall()) return false;
  const std::string& t = n->target();
  return t.rfind("aten::", 0) != 0 && t.rfind("prim::", 0) != 0;
}

bool opaqueMayWriteAll(const Node* n) {
  if (!isOpaque(n)) return false;
  if (!n->schema()) return true;
  const auto kind = n->schema()->aliasAnalysis();
  return kind != c10::AliasAnalysisKind::FROM_SCHEMA && kind != c10::AliasAnalysisKind::PURE_FUNCTION;
}

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

size_t eliminateDeadCode(Graph& g) { return eliminateInBlock(*g.block()); }

}  // namespace ptopt::ir
