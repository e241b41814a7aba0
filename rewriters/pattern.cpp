#include "rewriters/pattern.h"

#include "ir/dead_code.h"
#include "ir/text.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_set>

namespace ptopt::rewriters {

using ir::Arg;
using ir::Block;
using ir::Node;
using ir::Opcode;
using ir::Value;

// ---------------------------------------------------------------- Match

const Arg& Match::binding(const std::string& name) const {
  auto i = pattern_->wildcardIndex(name);
  if (!i) throw std::out_of_range("pattern has no input %" + name);
  return binding(*i);
}

const ir::Literal* Match::literal(const std::string& name) const {
  const Arg& a = binding(name);
  return a.isLiteral() ? &a.literal() : nullptr;
}

// ---------------------------------------------------------------- Pattern

struct Pattern::State {
  const Block* block = nullptr;
  std::vector<Node*> nodes;                 // per pattern node (matching order)
  std::vector<std::optional<Arg>> wild;     // per wildcard
  std::vector<Value*> values;               // per value defined by a pattern node
};

namespace {
std::invalid_argument badPattern(const std::string& why) {
  return std::invalid_argument("invalid pattern: " + why);
}
std::string nodeText(const Node* n) { return ir::printNode(*n); }
}  // namespace

Pattern::Pattern(std::unique_ptr<ir::Graph> graph) : graph_(std::move(graph)) {
  wildcards_ = graph_->inputs();
  for (size_t i = 0; i < wildcards_.size(); ++i) wildcardIndex_[wildcards_[i]] = i;

  // The operator calls, in program order.
  std::vector<const Node*> calls;
  std::unordered_map<const Node*, size_t> programIndex;
  for (Node* n : *graph_->block()) {
    switch (n->opcode()) {
      case Opcode::Placeholder:
      case Opcode::Output:
        continue;
      case Opcode::GetAttr:
        throw badPattern("get_attr nodes cannot appear in a pattern (bind the constant to a wildcard "
                         "and constrain it instead): " + nodeText(n));
      case Opcode::CallFunction:
        break;
    }
    if (!n->blocks().empty()) throw badPattern("nodes with nested blocks cannot appear in a pattern: " + nodeText(n));
    if (!n->attrs().empty()) throw badPattern("nodes with attributes cannot appear in a pattern: " + nodeText(n));
    programIndex[n] = calls.size();
    calls.push_back(n);
  }
  if (calls.empty()) throw badPattern("it has no operator call");

  const Node* out = graph_->block()->outputNode();
  if (!out || out->numArgs() == 0) throw badPattern("it has no output");
  const Node* anchor = nullptr;
  for (const Arg& a : out->args()) {
    if (a.isLiteral())
      throw badPattern("output " + a.str() + " is a literal; outputs must be produced by pattern nodes");
    if (wildcardIndex_.count(a.value()))
      throw badPattern("output %" + a.value()->name() +
                       " is a pattern input; outputs must be produced by pattern nodes");
    const Node* p = a.value()->node();
    if (!anchor || programIndex.at(p) > programIndex.at(anchor)) anchor = p;
  }
  for (const Value* w : wildcards_)
    if (!w->hasUses()) throw badPattern("input %" + w->name() + " is unused");

  // Every node must contribute to an output (walk users-first).
  std::unordered_set<const Node*> live;
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) {
    bool reaches = false;
    for (const auto& v : (*it)->outputs())
      for (const ir::Use& u : v->uses())
        reaches = reaches || u.user == out || live.count(u.user);
    if (!reaches) throw badPattern("node does not reach an output: " + nodeText(*it));
    live.insert(*it);
  }

  // The matching plan: breadth-first from the anchor through arguments
  // (backward steps: the producer of a bound value is unique); a node only
  // reachable through a value it shares with matched nodes is found among
  // that value's users (forward step).
  std::unordered_set<const Node*> planned;
  std::unordered_set<const Value*> bound;  // values bound once the planned nodes matched
  auto plan = [&](const Node* n, Step s) {
    s.node = nodes_.size();
    nodes_.push_back(n);
    plan_.push_back(s);
    planned.insert(n);
    for (const Arg& a : n->args())
      if (a.isValue()) bound.insert(a.value());
    for (const auto& v : n->outputs()) bound.insert(v.get());
  };
  plan(anchor, Step{});
  size_t q = 0;
  while (nodes_.size() < calls.size()) {
    if (q < nodes_.size()) {
      for (const Arg& a : nodes_[q]->args()) {
        if (!a.isValue() || wildcardIndex_.count(a.value())) continue;
        const Node* producer = a.value()->node();
        if (!planned.count(producer)) plan(producer, Step{0, false, a.value(), 0});
      }
      ++q;
      continue;
    }
    // No backward step left: take the first node that uses a bound value.
    const Node* next = nullptr;
    Step step;
    for (const Node* n : calls) {
      if (planned.count(n)) continue;
      for (size_t i = 0; i < n->numArgs() && !next; ++i) {
        const Value* v = n->argValue(i);
        if (v && bound.count(v)) {
          next = n;
          step = Step{0, true, v, i};
        }
      }
      if (next) break;
    }
    if (!next) {
      for (const Node* n : calls)
        if (!planned.count(n)) throw badPattern("node is not connected to the anchor through values: " + nodeText(n));
    }
    plan(next, step);
  }

  for (const Node* n : nodes_)
    for (const auto& v : n->outputs()) valueIndex_.emplace(v.get(), valueIndex_.size());
}

std::shared_ptr<const Pattern> Pattern::parse(const std::string& irText, bool requireKnownOperators) {
  ir::ParseOptions opts;
  opts.requireKnownOperators = requireKnownOperators;
  return std::make_shared<const Pattern>(ir::parseGraph(irText, opts));
}

std::optional<size_t> Pattern::wildcardIndex(const std::string& name) const {
  for (size_t i = 0; i < wildcards_.size(); ++i)
    if (wildcards_[i]->name() == name) return i;
  return std::nullopt;
}

bool Pattern::bindWildcard(size_t w, const Arg& a, State& s) const {
  const c10::TypePtr& declared = wildcards_[w]->type();
  const c10::TypePtr actual = a.isValue() ? a.value()->type() : a.literal().type();
  if (!actual || !actual->isSubtypeOf(*declared)) return false;
  std::optional<Arg>& b = s.wild[w];
  if (!b) {
    b = a;
    return true;
  }
  if (b->isValue() != a.isValue()) return false;
  return b->isValue() ? b->value() == a.value() : b->literal() == a.literal();
}

bool Pattern::bindNode(size_t i, Node* t, State& s) const {
  const Node* p = nodes_[i];
  if (t->opcode() != Opcode::CallFunction || t->target() != p->target() || t->overload() != p->overload())
    return false;
  if (t->owningBlock() != s.block || !t->blocks().empty() || !t->attrs().empty()) return false;
  if (t->numArgs() != p->numArgs() || t->numOutputs() != p->numOutputs()) return false;
  for (size_t j = 0; j < s.nodes.size(); ++j)
    if (j != i && s.nodes[j] == t) return false;
  s.nodes[i] = t;
  auto bindValue = [&](const Value* pv, Value* tv) {
    Value*& slot = s.values[valueIndex_.at(pv)];
    if (slot && slot != tv) return false;
    slot = tv;
    return true;
  };
  for (size_t k = 0; k < p->numOutputs(); ++k)
    if (!bindValue(p->output(k), t->output(k))) return false;
  for (size_t a = 0; a < p->numArgs(); ++a) {
    const Arg& pa = p->arg(a);
    const Arg& ta = t->arg(a);
    if (pa.isLiteral()) {
      if (!ta.isLiteral() || ta.literal() != pa.literal()) return false;
      continue;
    }
    if (auto w = wildcardIndex_.find(pa.value()); w != wildcardIndex_.end()) {
      if (!bindWildcard(w->second, ta, s)) return false;
    } else if (!ta.isValue() || !bindValue(pa.value(), ta.value())) {
      return false;
    }
  }
  return true;
}

bool Pattern::search(size_t step, State& s) const {
  if (step == plan_.size()) return true;
  const Step& st = plan_[step];
  if (!st.forward) {
    Value* tv = s.values[valueIndex_.at(st.via)];
    if (!tv || !tv->node()) return false;
    return bindNode(st.node, tv->node(), s) && search(step + 1, s);
  }
  Value* tv = nullptr;
  if (auto w = wildcardIndex_.find(st.via); w != wildcardIndex_.end()) {
    if (s.wild[w->second]) tv = s.wild[w->second]->value();  // nullptr for a literal
  } else {
    tv = s.values[valueIndex_.at(st.via)];
  }
  if (!tv) return false;
  const Node* p = nodes_[st.node];
  for (const ir::Use& u : tv->uses()) {
    if (u.argIndex != st.argIndex || u.user->target() != p->target()) continue;
    State trial = s;
    if (bindNode(st.node, u.user, trial) && search(step + 1, trial)) {
      s = std::move(trial);
      return true;
    }
  }
  return false;
}

std::optional<Match> Pattern::matchAt(Node* node) const {
  if (node->opcode() != Opcode::CallFunction || node->target() != anchorTarget() || !node->owningBlock())
    return std::nullopt;
  State s;
  s.block = node->owningBlock();
  s.nodes.assign(nodes_.size(), nullptr);
  s.wild.assign(wildcards_.size(), std::nullopt);
  s.values.assign(valueIndex_.size(), nullptr);
  if (!bindNode(0, node, s) || !search(1, s)) return std::nullopt;
  Match m;
  m.pattern_ = this;
  m.nodes_ = std::move(s.nodes);
  m.bindings_ = std::move(s.wild);
  for (const Arg& a : graph_->block()->outputNode()->args()) m.outputs_.push_back(s.values[valueIndex_.at(a.value())]);
  return m;
}

// ---------------------------------------------------------------- checks

namespace {
bool contains(const std::vector<Node*>& v, const Node* n) { return std::find(v.begin(), v.end(), n) != v.end(); }
}  // namespace

std::optional<std::string> whyNotSelfContained(const Match& m) {
  const auto& nodes = m.nodes();
  const auto& outs = m.outputs();
  for (const Node* t : nodes) {
    for (const auto& v : t->outputs()) {
      if (std::find(outs.begin(), outs.end(), v.get()) != outs.end()) continue;
      for (const ir::Use& u : v->uses())
        if (!contains(nodes, u.user))
          return "not self-contained: interior value %" + v->name() + " (of " + t->qualifiedTarget() +
                 ") is also used by " + describeNode(u.user) + " outside the match";
    }
  }
  const Pattern& p = m.pattern();
  for (size_t i = 0; i < p.numWildcards(); ++i) {
    const Value* v = m.binding(i).value();
    if (v && v->node() && contains(nodes, v->node()))
      return "not self-contained: pattern input %" + p.wildcards()[i]->name() + " binds to %" + v->name() +
             ", which the match itself defines";
  }
  return std::nullopt;
}

void checkReplacement(const Pattern& pattern, const ir::Graph& replacement) {
  const size_t ins = replacement.inputs().size(), outs = replacement.outputs().size();
  if (ins != pattern.numWildcards())
    throw std::invalid_argument("the replacement has " + std::to_string(ins) + " input(s) but the pattern has " +
                                std::to_string(pattern.numWildcards()) +
                                " (replacement inputs are bound to pattern inputs by position)");
  if (outs != pattern.numOutputs())
    throw std::invalid_argument("the replacement has " + std::to_string(outs) + " output(s) but the pattern has " +
                                std::to_string(pattern.numOutputs()));
  for (const Node* n : *replacement.block()) {
    if (n->opcode() == Opcode::GetAttr)
      throw std::invalid_argument("invalid replacement: get_attr nodes are not supported: " + nodeText(n));
    if (!n->blocks().empty())
      throw std::invalid_argument("invalid replacement: nodes with nested blocks are not supported: " + nodeText(n));
  }
}

RewriteRule makeRule(std::string name, const std::string& patternText, const std::string& replacementText,
                     std::vector<Constraint> constraints) {
  RewriteRule r;
  r.name = std::move(name);
  r.pattern = Pattern::parse(patternText);
  r.replacement = ir::parseGraph(replacementText);
  checkReplacement(*r.pattern, *r.replacement);
  r.constraints = std::move(constraints);
  return r;
}

// ---------------------------------------------------------------- rewriting

std::vector<Node*> replaceMatch(ir::Rewriter& rw, const Match& m, const ir::Graph& replacement, Node* insertBefore) {
  const auto& matched = m.nodes();
  Node* at = insertBefore;
  if (!at) {
    for (Node* n : *m.anchor()->owningBlock())
      if (contains(matched, n)) at = n;
  }
  ir::Graph& g = at->graph();

  std::unordered_map<const Value*, Arg> map;
  const auto ins = replacement.inputs();
  for (size_t i = 0; i < ins.size(); ++i) map.emplace(ins[i], m.binding(i));
  auto mapped = [&](const Arg& a) { return a.isValue() ? map.at(a.value()) : a; };

  std::vector<Node*> fresh;
  std::unordered_set<const Value*> freshValues;
  for (const Node* rn : *replacement.block()) {
    if (rn->opcode() != Opcode::CallFunction) continue;
    std::vector<Arg> args;
    for (const Arg& a : rn->args()) args.push_back(mapped(a));
    std::vector<c10::TypePtr> types;
    for (const auto& v : rn->outputs()) types.push_back(v->type());
    Node* n = g.createCall(rn->qualifiedTarget(), std::move(args), std::move(types));
    for (const auto& [k, v] : rn->attrs()) n->setAttr(k, v);
    n->setScope(at->scope());
    rw.insert(n, at);
    for (size_t k = 0; k < rn->numOutputs(); ++k) {
      map.emplace(rn->output(k), Arg(n->output(k)));
      freshValues.insert(n->output(k));
    }
    fresh.push_back(n);
  }

  // Uses of the pattern outputs move to the replacement outputs; a fresh
  // replacement value takes over the replaced value's name.
  std::vector<std::pair<Value*, std::string>> renames;
  const auto& routs = replacement.block()->outputNode()->args();
  for (size_t j = 0; j < routs.size(); ++j) {
    Value* old = m.outputs()[j];
    const Arg nr = mapped(routs[j]);
    if (nr.isValue()) {
      Value* nv = nr.value();
      if (nv == old) continue;
      if (freshValues.erase(nv)) renames.emplace_back(nv, old->name());
      rw.replaceAllUsesWith(old, nv);
    } else {
      const std::vector<ir::Use> uses = old->uses();
      for (const ir::Use& u : uses) rw.setArg(u.user, u.argIndex, nr.literal());
    }
  }

  // Users first: repeatedly destroy a matched node whose outputs are unused.
  std::vector<Node*> left(matched.begin(), matched.end());
  while (!left.empty()) {
    bool progress = false;
    for (size_t i = left.size(); i-- > 0;) {
      Node* n = left[i];
      bool used = false;
      for (const auto& v : n->outputs()) used = used || v->hasUses();
      if (used) continue;
      rw.erase(n);
      left.erase(left.begin() + static_cast<std::ptrdiff_t>(i));
      progress = true;
    }
    if (!progress)
      throw std::logic_error("replaceMatch: the match is not self-contained: " + describeNode(left.front()) +
                             " is still used");
  }
  for (auto& [v, name] : renames) rw.setName(v, name);
  return fresh;
}

// ---------------------------------------------------------------- driver

namespace {

// What one sweep knows about node order. Positions are per block, taken at
// the start of the sweep; a replacement node gets the position of the node
// it was inserted before (that node is destroyed by the same rewrite, and
// replacement nodes never join a match in the same sweep, so comparisons
// between a match's nodes and anything else stay exact).
class Sweep {
 public:
  explicit Sweep(const ir::Graph& g) { number(*g.block()); }

  int64_t pos(const Node* n) const {
    auto it = pos_.find(n);
    return it == pos_.end() ? -1 : it->second;
  }
  bool claimed(const Node* n) const { return claimed_.count(n) != 0; }
  bool destroyed(const Node* n) const { return destroyed_.count(n) != 0; }

  // Why moving every matched node to `last` would change behaviour, if it
  // would.
  std::optional<std::string> whyNotMovable(const Match& m, Node* first, Node* last) {
    const auto& nodes = m.nodes();
    const Block* b = last->owningBlock();
    for (const Node* t : nodes)
      if (claimed(t)) return std::string("overlaps a rewrite already applied in this sweep (first match wins)");
    const Pattern& p = m.pattern();
    for (size_t i = 0; i < p.numWildcards(); ++i) {
      const Value* v = m.binding(i).value();
      if (v && v->node() && v->node()->owningBlock() == b && pos(v->node()) >= pos(last))
        return "would create a cycle: pattern input %" + p.wildcards()[i]->name() + " binds to %" + v->name() +
               ", defined after the match's last node " + describeNode(last);
    }
    for (const Value* o : m.outputs()) {
      for (const ir::Use& u : o->uses()) {
        if (contains(nodes, u.user)) continue;
        const Node* a = u.user->ancestorIn(b);
        if (!a || pos(a) < pos(last))
          return "would create a cycle: output %" + o->name() + " is used by " + describeNode(u.user) +
                 " before the match's last node " + describeNode(last) + ", where the replacement goes";
      }
    }
    if (first == last) return std::nullopt;
    const int64_t lo = pos(first), hi = pos(last);
    const bool insertedBetween = anyIn(inserted_, b, lo, hi);
    const bool contiguous = hi - lo + 1 == static_cast<int64_t>(nodes.size()) && !insertedBetween;
    if (contiguous) return std::nullopt;
    for (const Node* t : nodes)
      if (t != last && ir::hasSideEffects(t))
        return "matched node " + describeNode(t) + " has side effects and would move past other nodes to " +
               describeNode(last);
    computeEffects(b);
    // Matched nodes other than the last are pure here, so this counts the
    // unmatched nodes with side effects between first and last.
    if (effectsBefore_.at(last) - effectsBefore_.at(first) > 0 || anyIn(effectsInserted_, b, lo, hi))
      return "a node with side effects (an in-place op, a raise, a random draw) lies between the matched "
             "nodes; the replacement at " + describeNode(last) + " would reorder it";
    return std::nullopt;
  }

  // Bookkeeping after a rewrite: `matched` are gone (dangling pointers, used
  // as keys only), `fresh` were inserted where `lastPos` was.
  void rewrote(const std::vector<Node*>& matched, const std::vector<Node*>& fresh, const Block* b,
               int64_t lastPos) {
    for (const Node* t : matched) {
      pos_.erase(t);
      effectsBefore_.erase(t);
      destroyed_.insert(t);
    }
    bool effects = false;
    for (const Node* n : fresh) {
      destroyed_.erase(n);  // a fresh node may reuse a destroyed node's address
      pos_[n] = lastPos;
      claimed_.insert(n);
      effects = effects || ir::hasSideEffects(n);
    }
    inserted_[b].insert(lastPos);
    if (effects) effectsInserted_[b].insert(lastPos);
  }

 private:
  void number(const Block& b) {
    int64_t i = 0;
    for (Node* n : b) {
      pos_[n] = i++;
      for (const auto& nested : n->blocks()) number(*nested);
    }
  }
  void computeEffects(const Block* b) {
    if (!effectsDone_.insert(b).second) return;
    int64_t count = 0;
    for (Node* n : *b) {
      effectsBefore_[n] = count;
      if (ir::hasSideEffects(n)) ++count;
    }
  }
  static bool anyIn(const std::unordered_map<const Block*, std::set<int64_t>>& m, const Block* b, int64_t lo,
                    int64_t hi) {
    auto it = m.find(b);
    if (it == m.end()) return false;
    auto p = it->second.upper_bound(lo);
    return p != it->second.end() && *p < hi;
  }

  std::unordered_map<const Node*, int64_t> pos_;
  std::unordered_map<const Node*, int64_t> effectsBefore_;
  std::unordered_set<const Block*> effectsDone_;
  std::unordered_set<const Node*> claimed_, destroyed_;
  std::unordered_map<const Block*, std::set<int64_t>> inserted_, effectsInserted_;
};

}  // namespace

RewriteStats applyRules(ir::Graph& graph, const std::vector<RewriteRule>& rules, const RewriteOptions& options) {
  ir::Rewriter unlogged(graph, nullptr, options.passName);
  ir::Rewriter& rw = options.rewriter ? *options.rewriter : unlogged;
  RewriteStats stats;
  stats.perRule.assign(rules.size(), 0);
  std::unordered_map<std::string, std::vector<size_t>> byTarget;
  for (size_t r = 0; r < rules.size(); ++r) byTarget[rules[r].pattern->anchorTarget()].push_back(r);

  std::vector<std::pair<Node*, std::string>> declines;
  while (stats.sweeps < options.maxIterations) {
    ++stats.sweeps;
    declines.clear();
    Sweep sweep(graph);
    std::vector<std::pair<Node*, const std::vector<size_t>*>> work;
    graph.walk([&](Node* n) {
      if (n->opcode() != Opcode::CallFunction) return;
      auto it = byTarget.find(n->target());
      if (it != byTarget.end()) work.emplace_back(n, &it->second);
    });

    size_t changes = 0;
    for (auto& [n, candidates] : work) {
      if (sweep.destroyed(n) || sweep.claimed(n)) continue;
      for (size_t r : *candidates) {
        const RewriteRule& rule = rules[r];
        std::optional<Match> m = rule.pattern->matchAt(n);
        if (!m) continue;
        Node* first = nullptr;
        Node* last = nullptr;
        for (Node* t : m->nodes()) {
          if (!first || sweep.pos(t) < sweep.pos(first)) first = t;
          if (!last || sweep.pos(t) > sweep.pos(last)) last = t;
        }
        std::optional<std::string> why = whyNotSelfContained(*m);
        if (!why) why = sweep.whyNotMovable(*m, first, last);
        for (size_t c = 0; !why && c < rule.constraints.size(); ++c) why = rule.constraints[c](*m);
        if (why) {
          declines.emplace_back(n, "rule '" + rule.name + "': " + *why);
          continue;
        }
        const Block* b = last->owningBlock();
        const int64_t lastPos = sweep.pos(last);
        const std::vector<Node*> matched = m->nodes();
        std::vector<Node*> fresh = replaceMatch(rw, *m, *rule.replacement, last);
        sweep.rewrote(matched, fresh, b, lastPos);
        ++stats.perRule[r];
        ++changes;
        break;  // the anchor is gone
      }
    }
    stats.rewrites += changes;
    if (changes == 0) break;
    stats.hitIterationCap = stats.sweeps == options.maxIterations;
    if (stats.hitIterationCap) {
      // Keep the declines whose node is still there (a node declined early in
      // the sweep may have been rewritten later in it).
      std::vector<std::pair<Node*, std::string>> live;
      for (auto& d : declines)
        if (!sweep.destroyed(d.first) && !sweep.claimed(d.first)) live.push_back(std::move(d));
      declines.swap(live);
    }
  }
  if (options.ctx)
    for (const auto& [n, why] : declines) options.ctx->decline(options.passName, n, why);
  return stats;
}

size_t applyRule(ir::Graph& graph, const RewriteRule& rule, const RewriteOptions& options) {
  return applyRules(graph, {rule}, options).rewrites;
}

}  // namespace ptopt::rewriters
