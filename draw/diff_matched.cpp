// writeDotDiff (draw/writer.h): the `after` graph drawn with the nodes of
// `before` that are gone, each node paired with its counterpart by the
// matcher (draw/matcher.h).
#include "draw/dot_writer.h"
#include "draw/labels.h"
#include "draw/matcher.h"

#include <fmt/format.h>

namespace ptopt::draw {

namespace dot {
namespace {

class MatchedDiffWriter : public DotWriter {
 public:
  MatchedDiffWriter(const Graph& before, const Graph& after, const DotOptions& o, const NodeMatching& m)
      : DotWriter(after, o), before_(before), m_(m) {}

 private:
  bool isDiff() const override { return true; }
  const Node* nodeBefore(const Node* n) const override { return m_.before(n); }

  void classify(Item& it) override {
    const Node* n = it.node;
    const Node* b = m_.before(n);
    if (!b) {
      it.status = Status::Added;
      it.note = n->provenance();
      ++diffCounts_.added;
      return;
    }
    std::string change = describeChange(*b, *n, m_);
    const bool newProvenance = !n->provenance().empty() && n->provenance() != b->provenance();
    if (change.empty() && !newProvenance) return;
    it.status = Status::Changed;
    it.note = newProvenance ? n->provenance() : "";
    addChangeLines(it.note, change);
    ++diffCounts_.changed;
  }

  void collectGone() override { collectRemoved(); }

  bool edgeIsNew(const Value* v, const Node* n, size_t i) const override { return !edgeExistedBefore(v, n, i); }

  void writeGoneEdges(const EdgeWriter& edge, const std::string& gone) const override {
    before_.walk([&](Node* n) {
      if (hidden(n)) return;
      const Node* a = m_.after(n);
      const std::string to = a ? drawnIdOfNode(a) : drawnIdOfRemoved(n);
      for (size_t i = 0; i < n->numArgs(); ++i) {
        const Value* v = n->argValue(i);
        if (!v || (a && edgeStillThere(v, a, i))) continue;
        edge(producerBefore(v), to, gone);
      }
      if (!a)
        for (size_t b = 0; b < n->blocks().size(); ++b)
          if (const Node* yield = n->block(b)->outputNode())
            if (removedIds_.count(yield)) edge(drawnIdOfRemoved(yield), to, gone);
    });
  }

  void legendBefore(LegendInput& in) const override { in.before = graphStats(before_); }

  // The drawn id of what computed `v` (a value of `before`): its counterpart
  // in `after`, else its removed node; a block parameter's counterpart when
  // the owner matched.
  std::string producerBefore(const Value* v) const {
    if (const Node* p = v->node()) {
      if (hidden(p)) return "";
      if (const Node* a = m_.after(p)) return drawnIdOfNode(a);
      auto it = removedIds_.find(p);
      return it == removedIds_.end() ? "" : drawnIdOfRemoved(p);
    }
    const Block* blk = v->paramOf();
    const Node* owner = blk ? blk->owningNode() : nullptr;
    const Node* a = owner ? m_.after(owner) : nullptr;
    if (!a) return "";
    for (size_t i = 0; i < owner->blocks().size() && i < a->blocks().size(); ++i)
      if (owner->block(i) == blk && v->index() < a->block(i)->params().size())
        return drawnIdOfParam(a->block(i)->param(v->index()));
    return "";
  }

  std::string drawnIdOfRemoved(const Node* n) const { return drawnIdFor(removedIds_.at(n)); }

  // The after-graph container of a before-graph block, when its owner matched.
  std::vector<std::string> containerOfBefore(const Block* b) {
    std::vector<std::string> out;
    std::vector<const Block*> chain;
    for (const Block* blk = b; blk && blk->owningNode(); blk = blk->owningNode()->owningBlock()) chain.push_back(blk);
    std::reverse(chain.begin(), chain.end());
    for (const Block* blk : chain) {
      const Node* owner = blk->owningNode();
      const Node* a = m_.after(owner);
      size_t idx = 0;
      while (idx < owner->blocks().size() && owner->block(idx) != blk) ++idx;
      if (!a || idx >= a->blocks().size()) break;
      out.push_back(blockKeys_.at(a->block(idx)));
    }
    return out;
  }

  void collectRemoved() {
    size_t next = 0;
    before_.walk([&](Node* n) {
      if (m_.after(n) || hidden(n)) return;
      Item it;
      it.id = "r" + std::to_string(next++);
      it.node = n;
      it.graph = &before_;
      it.status = Status::Removed;
      it.container = containerOfBefore(n->owningBlock());
      it.scope = splitDots(nodeScope(n));
      removedIds_[n] = it.id;
      items_.push_back(std::move(it));
      ++diffCounts_.removed;
    });
  }

  // Whether after-node `n` reading `v` at argument i was already so in `before`.
  bool edgeExistedBefore(const Value* v, const Node* n, size_t i) const {
    const Node* b = m_.before(n);
    if (!b || i >= b->numArgs() || !b->argValue(i)) return false;
    const Value* bv = b->argValue(i);
    if (v->node() && bv->node()) return m_.before(v->node()) == bv->node() && v->index() == bv->index();
    if (!v->node() && !bv->node()) {
      const Node* owner = v->paramOf() ? v->paramOf()->owningNode() : nullptr;
      const Node* bowner = bv->paramOf() ? bv->paramOf()->owningNode() : nullptr;
      return owner && m_.before(owner) == bowner && v->index() == bv->index();
    }
    return false;
  }

  // Whether before-node edge (v -> n at i) still exists at after-node `a`.
  bool edgeStillThere(const Value* v, const Node* a, size_t i) const {
    if (i >= a->numArgs() || !a->argValue(i)) return false;
    return edgeExistedBefore(a->argValue(i), a, i) && m_.before(a) && m_.before(a)->argValue(i) == v;
  }

  const Graph& before_;
  const NodeMatching& m_;
  std::unordered_map<const Node*, std::string> removedIds_;
};

}  // namespace
}  // namespace dot

std::string writeDotDiff(const Graph& before, const Graph& after, const DotOptions& options, DiffCounts* counts) {
  const NodeMatching m = matchNodes(before, after);
  return dot::MatchedDiffWriter(before, after, options, m).write(counts);
}

}  // namespace ptopt::draw
