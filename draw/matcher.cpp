#include "draw/matcher.h"

#include "draw/labels.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace ptopt::draw {

using ir::Arg;
using ir::Block;
using ir::Graph;
using ir::Literal;
using ir::Node;
using ir::Opcode;
using ir::Value;


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

std::string describeChange(const Node& before, const Node& after, const NodeMatching&) {
  return describeChange(before, after);
}

std::string describeChange(const Node& before, const Node& after) {
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
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace ptopt::draw
