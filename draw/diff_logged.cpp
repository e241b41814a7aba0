// writeDotChanges (draw/writer.h): one pass's changes drawn from its edit
// log (draw/logged_changes.h), no matching needed.
#include "draw/dot_writer.h"
#include "draw/labels.h"
#include "draw/logged_changes.h"

#include <fmt/format.h>

#include <algorithm>

namespace ptopt::draw {

namespace dot {
namespace {

class LoggedDiffWriter : public DotWriter {
 public:
  LoggedDiffWriter(const Graph& g, const DotOptions& o, const LoggedChanges& log) : DotWriter(g, o), log_(log) {}

 private:
  bool isDiff() const override { return true; }
  const Node* nodeBefore(const Node* n) const override { return log_.oldNode(n); }
  void classify(Item& it) override { classifyLogged(it); }
  void collectGone() override { collectLogged(); }
  bool edgeIsNew(const Value* v, const Node* n, size_t) const override { return loggedEdgeIsNew(v, n); }
  void writeGoneEdges(const EdgeWriter& edge, const std::string& gone) const override {
    writeLoggedGoneEdges(edge, gone);
  }
  void legendBefore(LegendInput& in) const override {
    in.before = loggedStatsBefore();
    in.beforeBytesKnown = false;
    if (log_.signatureChanged()) in.notes.push_back("the graph's inputs changed (type or metadata)");
  }

  // ---- the edit log's view (writeDotChanges)
  void classifyLogged(Item& it) {
    const Node* n = it.node;
    if (log_.added(n)) {
      it.status = Status::Added;
      it.note = n->provenance();
      ++diffCounts_.added;
      return;
    }
    if (!log_.changed(n)) return;
    it.status = Status::Changed;
    it.note = n->provenance();
    const Node* old = log_.oldNode(n);
    const std::string change = old ? describeChange(*old, *n) : "";
    addChangeLines(it.note, change);
    if (it.note.empty()) it.note = inputsChanged(n) ? "inputs changed" : "edited";
    ++diffCounts_.changed;
  }

  // Whether a changed node reads other values than before.
  bool inputsChanged(const Node* n) const {
    const std::vector<std::string>* old = log_.oldInputs(n);
    if (!old) return false;
    std::vector<std::string> now;
    for (const Arg& a : n->args())
      if (a.isValue()) now.push_back(a.value()->name());
    return now != *old;
  }

  void collectLogged() {
    // A changed constant (or literal list) drawn inside its users' labels:
    // its users changed.
    std::unordered_map<const Node*, Item*> byNode;
    for (Item& it : items_)
      if (it.node) byNode[it.node] = &it;
    g_.walk([&](Node* n) {
      if (!hidden(n) || !log_.changed(n)) return;
      const std::string what = n->opcode() == Opcode::GetAttr ? n->target() + " updated" : "input list changed";
      for (const auto& o : n->outputs())
        for (const auto& use : o->uses()) {
          auto it = byNode.find(use.user);
          if (it == byNode.end() || it->second->status != Status::Same) continue;
          it->second->status = Status::Changed;
          it->second->note = what;
          ++diffCounts_.changed;
        }
    });
    size_t next = 0;
    for (const LoggedChanges::Removed& r : log_.removed) {
      const bool drawn = r.node ? !hidden(r.node) : !r.firstLine.empty();
      const std::string id = drawn ? "r" + std::to_string(next++) : "";
      for (const std::string& d : r.names.defs) removedProducers_.emplace(d, id);
      if (!drawn) continue;
      Item it;
      it.id = id;
      it.node = r.node;
      it.raw = r.node ? "" : opOfLine(r.firstLine);
      it.graph = &g_;
      it.status = Status::Removed;
      it.container = r.anchor ? containerOf(r.anchor->owningBlock()) : std::vector<std::string>{};
      it.scope = r.node ? splitDots(nodeScope(r.node)) : std::vector<std::string>{};
      loggedRemoved_.emplace_back(id, &r);
      items_.push_back(std::move(it));
      ++diffCounts_.removed;
    }
  }

  // The drawn producer of the value a node read before the pass, by name:
  // a removed node, else a live value that existed before; "" when hidden
  // or gone.
  std::string producerBefore(const std::string& name) const {
    auto r = removedProducers_.find(name);
    if (r != removedProducers_.end()) return r->second.empty() ? "" : drawnIdFor(r->second);
    const Value* v = log_.valueBefore(name);
    return v ? producerId(v) : "";
  }

  // Whether drawn-graph node `n` reading `v` is an edge the pass made.
  bool loggedEdgeIsNew(const Value* v, const Node* n) const {
    if (log_.added(n) || (v->node() && log_.added(v->node()))) return true;
    const std::vector<std::string>* old = log_.oldInputs(n);
    return old && std::find(old->begin(), old->end(), v->name()) == old->end();
  }

  // Edges of the graph before that are gone: into removed nodes, and the
  // inputs changed nodes no longer read.
  void writeLoggedGoneEdges(const EdgeWriter& edge,
                            const std::string& gone) const {
    for (const auto& [id, r] : loggedRemoved_)
      for (const std::string& name : r->names.refs) edge(producerBefore(name), drawnIdFor(id), gone);
    g_.walk([&](Node* n) {
      const std::vector<std::string>* old = log_.oldInputs(n);
      if (!old || hidden(n)) return;
      std::set<std::string> now;
      for (const Arg& a : n->args())
        if (a.isValue() && !(a.value()->node() && log_.added(a.value()->node()))) now.insert(a.value()->name());
      for (const std::string& name : *old)
        if (!now.count(name)) edge(producerBefore(name), drawnIdOfNode(n), gone);
    });
  }

  // The legend's "before": the graph now with the log's changes undone.
  GraphStats loggedStatsBefore() const {
    GraphStats s = graphStats(g_);
    auto count = [&](const Node* n, int sign) {
      auto bump = [&](size_t& x) { x = sign > 0 ? x + 1 : (x ? x - 1 : 0); };
      bump(s.nodes);
      if (n->isCall()) {
        const std::string op = shortOp(n);
        if (sign > 0) ++s.opCounts[op];
        else if (auto it = s.opCounts.find(op); it != s.opCounts.end() && --it->second == 0) s.opCounts.erase(it);
      }
      if (isCastNode(n)) bump(s.casts);
      if (isLayoutConversion(n)) bump(s.layoutConversions);
    };
    g_.walk([&](Node* n) {
      if (log_.added(n)) {
        count(n, -1);
      } else if (const Node* old = log_.oldNode(n)) {
        count(n, -1);
        count(old, +1);
      }
    });
    for (const LoggedChanges::Removed& r : log_.removed) {
      if (!r.node) {
        ++s.nodes;
        if (!r.firstLine.empty()) ++s.opCounts[opOfLine(r.firstLine)];
        continue;
      }
      for (const Node* n : r.tree) count(n, +1);
    }
    return s;
  }

  const LoggedChanges& log_;
  std::map<std::string, std::string> removedProducers_;  // value name -> removed item id ("" hidden)
  std::vector<std::pair<std::string, const LoggedChanges::Removed*>> loggedRemoved_;
};

}  // namespace
}  // namespace dot

std::string writeDotChanges(const Graph& graph, const ir::ChangeSet& changes, const DotOptions& options,
                            DiffCounts* counts) {
  const LoggedChanges log(graph, changes);
  return dot::LoggedDiffWriter(graph, options, log).write(counts);
}

}  // namespace ptopt::draw
