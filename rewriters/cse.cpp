#include "rewriters/cse.h"

#include "ir/dead_code.h"

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

namespace ptopt::rewriters {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Containers whose elements may be mutated (or may alias something that is):
// values taken out of them can alias anything put into any of them.
bool isContainerOfMutable(const c10::TypePtr& t) {
  switch (t->kind()) {
    case c10::TypeKind::ListType:
      return MutationAnalysis::isMutableType(t->castRaw<c10::ListType>()->getElementType());
    case c10::TypeKind::DictType: {
      const auto* d = t->castRaw<c10::DictType>();
      return MutationAnalysis::isMutableType(d->getKeyType()) ||
             MutationAnalysis::isMutableType(d->getValueType());
    }
    case c10::TypeKind::TupleType:
      for (const auto& e : t->containedTypes())
        if (MutationAnalysis::isMutableType(e)) return true;
      return false;
    case c10::TypeKind::OptionalType:
      return isContainerOfMutable(t->castRaw<c10::OptionalType>()->getElementType());
    case c10::TypeKind::TensorType:
      return false;
    default:
      return MutationAnalysis::isMutableType(t);  // objects, Any, futures, unions
  }
}

// Operators whose schema declares a fresh result although they may return
// their input itself (dropout when not training, type_as to the same dtype).
bool returnsInputDespiteSchema(const std::string& target) {
  return target == "aten::dropout" || target == "aten::feature_dropout" ||
         target == "aten::alpha_dropout" || target == "aten::feature_alpha_dropout" ||
         target == "aten::type_as";
}

bool observesIdentity(const std::string& target) {
  return target == "aten::__is__" || target == "aten::__isnot__";
}

bool isMutableValue(const ir::Value* v) { return v && MutationAnalysis::isMutableType(v->type()); }

// ------------------------------------------------------------------ hashing

void combine(size_t& seed, size_t h) { seed ^= h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

size_t doubleBits(double d) {
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  return std::hash<uint64_t>{}(bits);
}

size_t hashLiteral(const ir::Literal& l) {
  size_t seed = l.value().index();
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ir::NoneLiteral>) {
        } else if constexpr (std::is_same_v<T, double>) {
          combine(seed, doubleBits(v));
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double d : v) combine(seed, doubleBits(d));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<std::string>>) {
          for (const auto& e : v) combine(seed, std::hash<std::decay_t<decltype(e)>>{}(e));
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          for (bool e : v) combine(seed, e ? 1 : 2);
        } else if constexpr (std::is_same_v<T, c10::Device>) {
          combine(seed, static_cast<size_t>(v.type()));
          combine(seed, static_cast<size_t>(v.index() + 1));
        } else if constexpr (std::is_enum_v<T>) {
          combine(seed, static_cast<size_t>(v));
        } else {
          combine(seed, std::hash<T>{}(v));
        }
      },
      l.value());
  return seed;
}

// Literal equality, bit for bit for floats (0.0 and -0.0 differ; NaN equals a
// NaN with the same bits): merging must never change a result.
bool identicalLiterals(const ir::Literal& a, const ir::Literal& b) {
  if (a.value().index() != b.value().index()) return false;
  if (a.is<double>()) return std::memcmp(&a.as<double>(), &b.as<double>(), sizeof(double)) == 0;
  if (a.is<std::vector<double>>()) {
    const auto &x = a.as<std::vector<double>>(), &y = b.as<std::vector<double>>();
    return x.size() == y.size() &&
           (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
  }
  return a == b;
}

bool identicalAttrs(const ir::Node* a, const ir::Node* b) {
  const auto &x = a->attrs(), &y = b->attrs();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first || x[i].second.index() != y[i].second.index()) return false;
    if (const auto* lx = std::get_if<ir::Literal>(&x[i].second)) {
      if (!identicalLiterals(*lx, std::get<ir::Literal>(y[i].second))) return false;
    } else {
      const auto &tx = std::get<ir::TypesAttr>(x[i].second), &ty = std::get<ir::TypesAttr>(y[i].second);
      if (tx.isList != ty.isList || tx.types.size() != ty.types.size()) return false;
      for (size_t j = 0; j < tx.types.size(); ++j)
        if (*tx.types[j] != *ty.types[j]) return false;
    }
  }
  return true;
}

struct NodeHash {
  size_t operator()(const ir::Node* n) const {
    size_t seed = static_cast<size_t>(n->opcode());
    combine(seed, std::hash<std::string>{}(n->target()));
    combine(seed, std::hash<std::string>{}(n->overload()));
    for (const ir::Arg& a : n->args())
      combine(seed, a.isValue() ? std::hash<const void*>{}(a.value()) : hashLiteral(a.literal()));
    return seed;
  }
};

struct NodeEqual {
  bool operator()(const ir::Node* a, const ir::Node* b) const {
    if (a->opcode() != b->opcode() || a->target() != b->target()) return false;
    if (a->opcode() == ir::Opcode::GetAttr) return true;
    if (a->overload() != b->overload() || a->numArgs() != b->numArgs() ||
        a->numOutputs() != b->numOutputs())
      return false;
    for (size_t i = 0; i < a->numArgs(); ++i) {
      const ir::Arg &x = a->arg(i), &y = b->arg(i);
      if (x.isValue() != y.isValue()) return false;
      if (x.isValue() ? x.value() != y.value() : !identicalLiterals(x.literal(), y.literal())) return false;
    }
    for (size_t i = 0; i < a->numOutputs(); ++i)
      if (*a->output(i)->type() != *b->output(i)->type()) return false;
    return identicalAttrs(a, b);
  }
};

}  // namespace

// ------------------------------------------------------------------ MutationAnalysis

bool MutationAnalysis::isMutableType(const c10::TypePtr& t) {
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
      return !(s == "SymInt" || s == "SymFloat" || s == "SymBool" || s == "Layout" ||
               s == "ScalarType" || s == "MemoryFormat");
    }
  }
}

MutationAnalysis::MutationAnalysis(const ir::Graph& g) {
  containers_ = 0;
  parent_.push_back(0);
  g.walk([&](ir::Node* n) { visit(n); });
  for (const ir::Value* v : written_) mutatedRoots_.insert(find(id(v)));
  for (const ir::Value* v : escaping_) escapingRoots_.insert(find(id(v)));
}

size_t MutationAnalysis::id(const ir::Value* v) {
  auto [it, inserted] = ids_.emplace(v, parent_.size());
  if (inserted) parent_.push_back(parent_.size());
  return it->second;
}

size_t MutationAnalysis::find(size_t i) const {
  size_t root = i;
  while (parent_[root] != root) root = parent_[root];
  while (parent_[i] != root) {
    size_t next = parent_[i];
    parent_[i] = root;
    i = next;
  }
  return root;
}

void MutationAnalysis::unite(size_t a, size_t b) {
  a = find(a);
  b = find(b);
  if (a == b) return;
  // Keep the container class's root stable for readability; either is fine.
  if (a == containers_) std::swap(a, b);
  parent_[a] = b;
}

size_t MutationAnalysis::classOf(const ir::Value* v) const {
  auto it = ids_.find(v);
  return it == ids_.end() ? kNone : find(it->second);
}

void MutationAnalysis::visit(const ir::Node* n) {
  if (n->opcode() == ir::Opcode::Output) {
    if (n->owningBlock() == n->graph().block())
      for (const ir::Arg& a : n->args())
        if (isMutableValue(a.value())) escaping_.push_back(a.value());
    return;
  }
  if (n->opcode() != ir::Opcode::CallFunction) return;

  std::vector<const ir::Value*> group;
  bool touchesContainer = false;
  auto add = [&](const ir::Value* v) {
    group.push_back(v);
    touchesContainer = touchesContainer || isContainerOfMutable(v->type());
  };

  // An opaque operator registered without trusted alias annotations is
  // handled like a schema-less one: it may alias and write every argument.
  if (const c10::FunctionSchema* schema = n->schema(); schema && !ir::opaqueMayWriteAll(n)) {
    const auto& formals = schema->arguments();
    for (size_t i = 0; i < n->numArgs(); ++i) {
      const ir::Value* v = n->argValue(i);
      if (!isMutableValue(v)) continue;
      // Arguments past the schema's (varargs) are treated as annotated.
      const c10::AliasInfo* info = i < formals.size() ? formals[i].alias_info() : nullptr;
      if (!info && i < formals.size() && !isContainerOfMutable(v->type())) continue;
      add(v);
      if (info && info->isWrite()) written_.push_back(v);
    }
    const auto& returns = schema->returns();
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      const ir::Value* v = n->output(i);
      if (!isMutableValue(v)) continue;
      const c10::AliasInfo* info = i < returns.size() ? returns[i].alias_info() : nullptr;
      if (!info && i < returns.size() && !isContainerOfMutable(v->type())) continue;
      add(v);
    }
    if (returnsInputDespiteSchema(n->target()) && n->numArgs() && n->numOutputs() &&
        isMutableValue(n->argValue(0)) && isMutableValue(n->output()))
      unite(id(n->argValue(0)), id(n->output()));
    if (observesIdentity(n->target()))
      for (const ir::Arg& a : n->args())
        if (isMutableValue(a.value())) written_.push_back(a.value());
  } else {
    for (const ir::Arg& a : n->args())
      if (isMutableValue(a.value())) add(a.value());
    for (const auto& out : n->outputs())
      if (isMutableValue(out.get())) add(out.get());
    for (const auto& b : n->blocks()) {
      for (const auto& p : b->params())
        if (isMutableValue(p.get())) add(p.get());
      for (const ir::Value* v : b->outputValues())
        if (isMutableValue(v)) add(v);
    }
    // An unknown or effectful schema-less operator may write what it is given.
    if (n->blocks().empty() && ir::hasSideEffects(n))
      for (const ir::Arg& a : n->args())
        if (isMutableValue(a.value())) written_.push_back(a.value());
  }

  for (size_t i = 1; i < group.size(); ++i) unite(id(group[0]), id(group[i]));
  if (touchesContainer && !group.empty()) unite(id(group[0]), containers_);
}

bool MutationAnalysis::mayBeMutated(const ir::Value* v) const {
  if (!isMutableValue(v)) return false;
  const size_t c = classOf(v);
  return c != kNone && mutatedRoots_.count(c) != 0;
}

bool MutationAnalysis::mayEscape(const ir::Value* v) const {
  if (!isMutableValue(v)) return false;
  const size_t c = classOf(v);
  return c != kNone && escapingRoots_.count(c) != 0;
}

// ------------------------------------------------------------------ the pass

std::string CsePass::contract() const {
  return "Merges call_function nodes with the same target and overload, the same argument Values, "
         "bitwise-equal literals, equal attributes and output types, that have no side effects and "
         "no nested blocks; and get_attr nodes naming the same constant. A node reuses an equal "
         "node earlier in its block or in an enclosing block (dominance), never one from a sibling "
         "or nested block. Linear: one walk with a scoped hash table. Mutation-safe: a node is not "
         "touched when an input or output may alias a value written in place anywhere (or compared "
         "by identity), and two results that both reach the graph outputs are not merged. Does not "
         "fire when no two nodes are equal. Counter: eliminated.";
}

PassResult CsePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult result;
  const MutationAnalysis mutation(graph);

  auto isPureCall = [](const ir::Node* n) {
    return n->isCall() && n->blocks().empty() && n->numOutputs() > 0 && !ir::hasSideEffects(n);
  };
  auto touchesMutation = [&](const ir::Node* n) {
    for (const auto& out : n->outputs())
      if (mutation.mayBeMutated(out.get())) return true;
    for (const ir::Arg& a : n->args())
      if (mutation.mayBeMutated(a.value())) return true;
    return false;
  };

  // `available` holds the candidates that dominate the current node. Pure
  // nodes left alone because of mutation go to `blocked`, only so that a
  // second equal one can say why it was kept.
  std::unordered_set<ir::Node*, NodeHash, NodeEqual> available, blocked;
  int64_t eliminated = 0;

  std::function<void(ir::Block*)> processBlock = [&](ir::Block* block) {
    std::vector<ir::Node*> addedAvailable, addedBlocked;
    for (ir::Node* n = block->first(); n;) {
      ir::Node* next = n->next();
      for (const auto& nested : n->blocks()) processBlock(nested.get());

      const bool getAttr = n->opcode() == ir::Opcode::GetAttr;
      // Opaque operators (torchvision::nms, custom ops) are never merged:
      // ptopt cannot know that two calls give the same result.
      const bool opaque = ir::isOpaque(n) && n->blocks().empty() && n->numOutputs() > 0;
      if (!getAttr && !opaque && !isPureCall(n)) { n = next; continue; }

      std::string keepReason;
      if (opaque)
        keepReason = "it calls opaque operator " + n->qualifiedTarget() +
                     ", which ptopt does not know to be free of side effects";
      else if (touchesMutation(n))
        keepReason = "an input or result may be mutated in place (or compared by identity)";
      if (!keepReason.empty()) {
        auto it = blocked.find(n);
        if (it != blocked.end())
          ctx.decline(name(), n, "equal to " + describeNode(*it) + " but " + keepReason);
        else if (blocked.insert(n).second)
          addedBlocked.push_back(n);
        n = next;
        continue;
      }

      auto it = available.find(n);
      if (it == available.end()) {
        available.insert(n);
        addedAvailable.push_back(n);
        n = next;
        continue;
      }
      ir::Node* rep = *it;
      bool bothEscape = false;
      for (size_t i = 0; i < n->numOutputs(); ++i)
        bothEscape = bothEscape || (mutation.mayEscape(rep->output(i)) && mutation.mayEscape(n->output(i)));
      if (bothEscape) {
        ctx.decline(name(), n, "equal to " + describeNode(rep) +
                                   " but both results reach the graph outputs (the caller would get one object twice)");
        n = next;
        continue;
      }
      for (size_t i = 0; i < n->numOutputs(); ++i) {
        ir::Value* keep = rep->output(i);
        if (keep->meta().empty()) keep->meta() = n->output(i)->meta();
        n->output(i)->replaceAllUsesWith(keep);
      }
      n->destroy();
      ++eliminated;
      n = next;
    }
    // Leaving the scope: its nodes no longer dominate what follows.
    for (ir::Node* n : addedAvailable) available.erase(n);
    for (ir::Node* n : addedBlocked) blocked.erase(n);
  };
  processBlock(graph.block());

  result.changed = eliminated > 0;
  if (eliminated) result.count("eliminated", eliminated);
  return result;
}

}  // namespace ptopt::rewriters
