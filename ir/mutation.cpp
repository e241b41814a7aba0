#include "ir/mutation.h"

#include "ir/dead_code.h"

#include <functional>
#include <limits>

namespace ptopt::ir {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Schema-less prims that build, take apart or re-type containers: their
// operands and results alias.
bool isContainerPrim(const std::string& t) {
  static const std::set<std::string> prims = {
      "prim::ListConstruct", "prim::ListUnpack",     "prim::TupleConstruct", "prim::TupleUnpack",
      "prim::TupleIndex",    "prim::TupleSlice",     "prim::DictConstruct",  "prim::unchecked_cast",
      "prim::GetAttr",       "prim::ConstantChunk",  "prim::ListSlice"};
  return prims.count(t) != 0;
}

// Schema-less prims that neither alias nor write their operands.
bool isPureScalarPrim(const std::string& t) {
  static const std::set<std::string> prims = {"prim::isinstance", "prim::Uninitialized", "prim::RaiseException",
                                              "prim::EnumName", "prim::EnumValue"};
  return prims.count(t) != 0;
}

// Containers whose elements may be mutated (or may alias something that is):
// values taken out of them can alias anything put into any of them.
bool isContainerOfMutable(const c10::TypePtr& t) {
  switch (t->kind()) {
    case c10::TypeKind::ListType:
      return isMutableType(t->castRaw<c10::ListType>()->getElementType());
    case c10::TypeKind::DictType: {
      const auto* d = t->castRaw<c10::DictType>();
      return isMutableType(d->getKeyType()) || isMutableType(d->getValueType());
    }
    case c10::TypeKind::TupleType:
      for (const auto& e : t->containedTypes())
        if (isMutableType(e)) return true;
      return false;
    case c10::TypeKind::OptionalType:
      return isContainerOfMutable(t->castRaw<c10::OptionalType>()->getElementType());
    case c10::TypeKind::TensorType:
      return false;
    default:
      return isMutableType(t);  // objects, Any, futures, unions
  }
}

// Operators whose schema declares a fresh result although they may return
// their input itself (dropout when not training, type_as to the same dtype).
bool returnsInputDespiteSchema(const std::string& target) {
  return target == "aten::dropout" || target == "aten::feature_dropout" || target == "aten::alpha_dropout" ||
         target == "aten::feature_alpha_dropout" || target == "aten::type_as";
}

bool observesIdentity(const std::string& target) { return target == "aten::__is__" || target == "aten::__isnot__"; }

// In-place operators that change their argument's sizes, strides or storage
// (not only its data): resize_ and set_, as_strided_, the in-place view ops.
bool changesGeometryInPlace(const std::string& target) {
  static const std::set<std::string> ops = {
      "aten::resize_",   "aten::resize_as_",  "aten::_resize_output_", "aten::set_",       "aten::as_strided_",
      "aten::squeeze_",  "aten::unsqueeze_",  "aten::t_",              "aten::transpose_", "aten::swapaxes_",
      "aten::swapdims_", "aten::sparse_resize_", "aten::sparse_resize_and_clear_", "aten::set_data",
      "aten::_coalesced_"};
  return ops.count(target) != 0;
}

// Operators that tell a view from its base (identity in all but name).
bool observesViewness(const std::string& target) { return target == "aten::_is_view" || target == "aten::_base"; }

}  // namespace

// ------------------------------------------------------------ operators

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

bool isMutableType(const c10::TypePtr& t) {
  if (!t) return true;
  switch (t->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::StringType:
    case c10::TypeKind::NoneType:
    case c10::TypeKind::DeviceObjType:
    case c10::TypeKind::NumberType:
    case c10::TypeKind::ComplexType:
      return false;
    case c10::TypeKind::OptionalType:
      return isMutableType(t->castRaw<c10::OptionalType>()->getElementType());
    case c10::TypeKind::TupleType:
      for (const auto& e : t->containedTypes())
        if (isMutableType(e)) return true;
      return false;
    default: {
      // Kinds that not every supported LibTorch has, by name.
      const std::string s = t->str();
      return !(s == "SymInt" || s == "SymFloat" || s == "SymBool" || s == "Layout" || s == "ScalarType" ||
               s == "MemoryFormat");
    }
  }
}

// ------------------------------------------------------------ single uses

bool useMayWrite(const Use& u) {
  const Node* user = u.user;
  if (user->opcode() != Opcode::CallFunction) return false;
  if (opaqueMayWriteAll(user)) return true;  // its annotations are not to be trusted
  const c10::FunctionSchema* schema = user->schema();
  if (!schema) {
    static const std::set<std::string> kReadOnly = {"prim::ListConstruct", "prim::TupleConstruct", "prim::If",
                                                    "prim::Loop", "prim::unchecked_cast", "prim::DictConstruct"};
    return kReadOnly.count(user->target()) == 0;
  }
  if (u.argIndex < schema->arguments().size()) {
    const auto& alias = schema->arguments()[u.argIndex].alias_info();
    return alias && alias->isWrite();
  }
  return schema->is_mutable();  // vararg position of a mutable op
}

bool anyUseMayWrite(const Value* v) {
  for (const Use& u : v->uses())
    if (useMayWrite(u)) return true;
  return false;
}

// ------------------------------------------------------------ MutationAnalysis

MutationAnalysis::MutationAnalysis(const Graph& g) {
  // Two partitions of the values in parent_. Slot 2k of value k: the write
  // classes (visitWrites): operands and results an operator ties together,
  // containers with what is put into and taken out of each; what
  // mayBeWritten reads (folding, copying constants, layout). Slot 2k + 1:
  // the merge classes (visit, joinAll): mutable values only, every container
  // of mutable elements in one class (containers_ = 1); what mayBeMutated
  // and mayEscape read. written_ seeds the first, observed_ (writes and
  // identity comparisons the merge rules find) the second.
  parent_ = {0, 1};
  containers_ = 1;

  // The write classes. All values take part (an int an operator ties to a
  // tensor ties what it reaches): the conservative rules the interpreter
  // and the folds have always used.
  auto join = [&](const Value* a, const Value* b) {
    if (!a || !b) return;
    const size_t x = find(id(a)), y = find(id(b));
    if (x != y) parent_[x] = y;
  };
  const Node* graphOutput = g.block()->outputNode();
  std::function<bool(const Node*)> onlyReturned = [&](const Node* m) {
    if (!m->is("prim::TupleConstruct") || m->numOutputs() != 1 || !m->output()->hasUses()) return false;
    for (const Use& u : m->output()->uses())
      if (u.user != graphOutput && !onlyReturned(u.user)) return false;
    return true;
  };
  auto visitWrites = [&](const Node* n) {
    if (!n->isCall()) return;
    std::vector<const Value*> operands;
    for (const Arg& a : n->args())
      if (a.isValue()) operands.push_back(a.value());
    auto joinAllOperands = [&] {
      const Value* first = nullptr;
      for (const Value* v : operands) first ? join(first, v) : void(first = v);
      for (const auto& out : n->outputs()) first ? join(first, out.get()) : void(first = out.get());
    };
    if (n->is("prim::If")) {
      for (const auto& b : n->blocks()) {
        const Node* out = b->outputNode();
        for (size_t i = 0; out && i < n->numOutputs() && i < out->numArgs(); ++i) join(n->output(i), out->argValue(i));
      }
      return;
    }
    if (n->is("prim::Loop")) {
      if (n->blocks().empty()) return;
      const Block* body = n->block(0);
      const Node* out = body->outputNode();
      for (size_t i = 0; i < n->numOutputs(); ++i) {
        const Value* carried = n->output(i);
        if (i + 2 < n->numArgs()) join(carried, n->argValue(i + 2));
        if (i + 1 < body->params().size()) join(carried, body->param(i + 1));
        if (out && i + 1 < out->numArgs()) join(carried, out->argValue(i + 1));
      }
      return;
    }
    if (const c10::FunctionSchema* s = n->schema(); s && !s->is_vararg()) {
      if (s->aliasAnalysis() == c10::AliasAnalysisKind::CONSERVATIVE) {
        joinAllOperands();
        written_.insert(written_.end(), operands.begin(), operands.end());
        return;
      }
      const Value* anchor = nullptr;
      auto tie = [&](const Value* v) { anchor ? join(anchor, v) : void(anchor = v); };
      for (size_t i = 0; i < n->numArgs() && i < s->arguments().size(); ++i) {
        const auto* info = s->arguments()[i].alias_info();
        if (!info || !n->arg(i).isValue()) continue;
        tie(n->arg(i).value());
        if (info->isWrite()) written_.push_back(n->arg(i).value());
      }
      for (size_t i = 0; i < n->numOutputs() && i < s->returns().size(); ++i)
        if (s->returns()[i].alias_info()) tie(n->output(i));
      return;
    }
    if (isContainerPrim(n->target())) {
      // A tuple that only the graph returns is never read inside it: its
      // elements do not alias each other through it.
      if (!onlyReturned(n)) joinAllOperands();
      return;
    }
    if (isPureScalarPrim(n->target())) return;
    // Unknown aliasing: everything may alias and be written.
    joinAllOperands();
    written_.insert(written_.end(), operands.begin(), operands.end());
  };
  g.walk([&](Node* n) {
    visitWrites(n);
    visit(n);
  });
  for (const Value* v : written_) writtenRoots_.insert(find(id(v)));
  for (const Value* v : observed_) observedRoots_.insert(find(id(v) + 1));
  for (const Value* v : reshaped_) reshapedRoots_.insert(find(id(v) + 1));
  for (const Value* v : escaping_) escapingRoots_.insert(find(id(v) + 1));
  g.walk([&](Node* n) {
    if (n->opcode() == Opcode::GetAttr && mayBeWritten(n->output())) writtenConstants_.insert(n->target());
  });
}

size_t MutationAnalysis::id(const Value* v) {
  auto [it, inserted] = ids_.emplace(v, parent_.size());
  if (inserted) {
    parent_.push_back(parent_.size());
    parent_.push_back(parent_.size());
  }
  return it->second;
}

size_t MutationAnalysis::find(size_t i) const {
  size_t root = i;
  while (parent_[root] != root) root = parent_[root];
  while (parent_[i] != root) {  // path compression
    const size_t next = parent_[i];
    parent_[i] = root;
    i = next;
  }
  return root;
}

// Unites the merge classes of ids `a` and `b` (`b` == containers_: the class
// of all containers).
void MutationAnalysis::unite(size_t a, size_t b) {
  size_t x = find(a + 1), y = find(b == containers_ ? containers_ : b + 1);
  if (x != y) parent_[x] = y;
}

size_t MutationAnalysis::classOf(const Value* v) const {
  auto it = ids_.find(v);
  return it == ids_.end() ? kNone : find(it->second);
}

// The merge classes of `n`'s values; writes found here (and identity
// comparisons) count for the merge questions only (observed_). `write`:
// every mutable operand, result, block parameter and block output of `n` in
// one class, and with `write` every mutable operand written.
void MutationAnalysis::joinAll(const Node* n, bool write) {
  std::vector<const Value*> group;
  bool touchesContainer = false;
  auto add = [&](const Value* v) {
    if (!isMutableValue(v)) return;
    group.push_back(v);
    touchesContainer = touchesContainer || isContainerOfMutable(v->type());
  };
  for (const Arg& a : n->args()) add(a.value());
  for (const auto& out : n->outputs()) add(out.get());
  for (const auto& b : n->blocks()) {
    for (const auto& p : b->params()) add(p.get());
    for (const Value* v : b->outputValues()) add(v);
  }
  for (size_t i = 1; i < group.size(); ++i) unite(id(group[0]), id(group[i]));
  if (touchesContainer && !group.empty()) unite(id(group[0]), containers_);
  if (write)
    for (const Arg& a : n->args())
      if (isMutableValue(a.value())) {
        observed_.push_back(a.value());
        reshaped_.push_back(a.value());
      }
}

void MutationAnalysis::visit(const Node* n) {
  if (n->opcode() == Opcode::Output) {
    if (n->owningBlock() == n->graph().block())
      for (const Arg& a : n->args())
        if (isMutableValue(a.value())) escaping_.push_back(a.value());
    return;
  }
  if (n->opcode() != Opcode::CallFunction) return;

  // An opaque operator registered without trusted alias annotations, and a
  // schema-less one, may alias everything it touches; it writes what it is
  // given when it has side effects.
  const c10::FunctionSchema* schema = n->schema();
  if (!schema || opaqueMayWriteAll(n)) return joinAll(n, n->blocks().empty() && hasSideEffects(n));

  std::vector<const Value*> group;
  bool touchesContainer = false;
  auto add = [&](const Value* v) {
    group.push_back(v);
    touchesContainer = touchesContainer || isContainerOfMutable(v->type());
  };
  const auto& formals = schema->arguments();
  for (size_t i = 0; i < n->numArgs(); ++i) {
    const Value* v = n->arg(i).value();
    if (!isMutableValue(v)) continue;
    // Arguments past the schema's (varargs) are treated as annotated.
    const c10::AliasInfo* info = i < formals.size() ? formals[i].alias_info() : nullptr;
    if (!info && i < formals.size() && !isContainerOfMutable(v->type())) continue;
    add(v);
    if (info && info->isWrite()) {
      observed_.push_back(v);
      // An out= argument is resized when its sizes differ; an operator
      // outside aten is not known to write data only.
      if (changesGeometryInPlace(n->target()) || (i < formals.size() && formals[i].is_out()) ||
          n->target().rfind("aten::", 0) != 0)
        reshaped_.push_back(v);
    }
  }
  const auto& returns = schema->returns();
  for (size_t i = 0; i < n->numOutputs(); ++i) {
    const Value* v = n->output(i);
    if (!isMutableValue(v)) continue;
    const c10::AliasInfo* info = i < returns.size() ? returns[i].alias_info() : nullptr;
    if (!info && i < returns.size() && !isContainerOfMutable(v->type())) continue;
    add(v);
  }
  for (size_t i = 1; i < group.size(); ++i) unite(id(group[0]), id(group[i]));
  if (touchesContainer && !group.empty()) unite(id(group[0]), containers_);
  if (returnsInputDespiteSchema(n->target()) && n->numArgs() && n->numOutputs() && isMutableValue(n->arg(0).value()) &&
      isMutableValue(n->output()))
    unite(id(n->arg(0).value()), id(n->output()));
  if (observesIdentity(n->target()))
    for (const Arg& a : n->args())
      if (isMutableValue(a.value())) {
        observed_.push_back(a.value());
        reshaped_.push_back(a.value());
      }
  if (observesViewness(n->target()))
    for (const Arg& a : n->args())
      if (isMutableValue(a.value())) reshaped_.push_back(a.value());
}

bool MutationAnalysis::mayBeWritten(const Value* v) const {
  const size_t c = classOf(v);
  return c != kNone && writtenRoots_.count(c) != 0;
}

bool MutationAnalysis::mayBeMutated(const Value* v) const {
  if (!isMutableValue(v)) return false;
  auto it = ids_.find(v);
  return it != ids_.end() && observedRoots_.count(find(it->second + 1)) != 0;
}

bool MutationAnalysis::mayBeReshaped(const Value* v) const {
  if (!isMutableValue(v)) return false;
  auto it = ids_.find(v);
  return it != ids_.end() && reshapedRoots_.count(find(it->second + 1)) != 0;
}

bool MutationAnalysis::mayEscape(const Value* v) const {
  if (!isMutableValue(v)) return false;
  auto it = ids_.find(v);
  return it != ids_.end() && escapingRoots_.count(find(it->second + 1)) != 0;
}

}  // namespace ptopt::ir
