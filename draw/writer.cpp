#include "draw/writer.h"

#include "draw/labels.h"
#include "draw/logged_changes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::draw {

using ir::Arg;
using ir::Block;
using ir::Graph;
using ir::Node;
using ir::Opcode;
using ir::Value;

namespace {

// ------------------------------------------------------------ the writer

struct Item {
  std::string id;
  const Node* node = nullptr;   // the IR node (of `after`, or of `before` when removed)
  const Value* param = nullptr; // or a block parameter
  const Graph* graph = nullptr; // the graph whose constants the node reads
  std::string raw;              // a removed node whose text did not parse: its op
  Status status = Status::Same;
  std::string note;             // provenance / change text (diff mode)
  std::vector<std::string> container;  // block boxes, outermost first ("b3")
  std::vector<std::string> scope;      // module scope segments
};

struct BoxTree {
  std::string key;
  std::string label;
  bool isBlock = false;
  size_t depth = 0;
  std::vector<std::string> lines;  // node statements, in order
  std::vector<std::unique_ptr<BoxTree>> children;
  std::map<std::string, BoxTree*> byKey;
  size_t count = 0;  // node statements here and below

  BoxTree* child(const std::string& k, const std::string& lbl, bool block) {
    auto it = byKey.find(k);
    if (it != byKey.end()) return it->second;
    children.push_back(std::make_unique<BoxTree>());
    BoxTree* c = children.back().get();
    c->key = k;
    c->label = lbl;
    c->isBlock = block;
    c->depth = depth + 1;
    byKey[k] = c;
    return c;
  }
};

class DotWriter {
 public:
  DotWriter(const Graph& g, const DotOptions& o, const Graph* before = nullptr, const NodeMatching* m = nullptr)
      : g_(g), o_(o), before_(before), m_(m) {}
  DotWriter(const Graph& g, const DotOptions& o, const LoggedChanges& changes) : g_(g), o_(o), log_(&changes) {}

  std::string write(DiffCounts* counts) {
    collect();
    if (counts) *counts = diffCounts_;
    chooseDepth();
    return emit();
  }

 private:
  bool diff() const { return before_ != nullptr || log_ != nullptr; }
  // Constants and literal lists are drawn in their users' labels by default.
  bool hidden(const Node* n) const {
    return !o_.showConstants && (n->opcode() == Opcode::GetAttr || isLiteralList(n));
  }

  // ---- collect the items to draw
  void collect() {
    size_t next = 0;
    std::function<void(const Block*, const std::vector<std::string>&)> visit =
        [&](const Block* b, const std::vector<std::string>& container) {
          for (const Node* n : *b) {
            if (!hidden(n)) {
              Item it;
              it.id = "n" + std::to_string(next++);
              it.node = n;
              it.graph = &g_;
              it.container = container;
              it.scope = splitDots(scopeOf(n));
              if (diff()) classify(it);
              ids_[n] = it.id;
              items_.push_back(std::move(it));
            }
            for (size_t i = 0; i < n->blocks().size(); ++i) {
              const Block* nested = n->block(i);
              std::vector<std::string> inner = container;
              const std::string key = "b" + std::to_string(blockKeys_.size());
              blockKeys_[nested] = key;
              blockLabels_[key] = blockLabel(n, i);
              inner.push_back(key);
              for (const auto& p : nested->params()) {
                Item it;
                it.id = "p" + std::to_string(paramIds_.size());
                it.param = p.get();
                it.graph = &g_;
                it.container = inner;
                paramIds_[p.get()] = it.id;
                items_.push_back(std::move(it));
              }
              visit(nested, inner);
            }
          }
        };
    visit(g_.block(), {});
    if (before_) collectRemoved();
    if (log_) collectLogged();
  }

  static std::string blockLabel(const Node* owner, size_t i) {
    const std::string op = shortOp(owner);
    if (op == "If") return i == 0 ? "If: then" : "If: else";
    if (op == "Loop") return "Loop body";
    return op + " block " + std::to_string(i);
  }

  std::string scopeOf(const Node* n) const {
    std::string s = nodeScope(n);
    if (s.empty() && before_) {
      if (const Node* b = m_->before(n)) s = nodeScope(b);
    }
    if (s.empty() && log_) {
      if (const Node* b = log_->oldNode(n)) s = nodeScope(b);
    }
    return s;
  }

  void classify(Item& it) {
    if (log_) return classifyLogged(it);
    const Node* n = it.node;
    const Node* b = m_->before(n);
    if (!b) {
      it.status = Status::Added;
      it.note = n->provenance();
      ++diffCounts_.added;
      return;
    }
    std::string change = describeChange(*b, *n, *m_);
    const bool newProvenance = !n->provenance().empty() && n->provenance() != b->provenance();
    if (change.empty() && !newProvenance) return;
    it.status = Status::Changed;
    it.note = newProvenance ? n->provenance() : "";
    addChangeLines(it.note, change);
    ++diffCounts_.changed;
  }

  // One change per line, at most three.
  static void addChangeLines(std::string& note, const std::string& change) {
    size_t lines = 0;
    for (size_t start = 0; !change.empty() && start < change.size() && lines < 3; ++lines) {
      const size_t end = change.find("; ", start);
      note += (note.empty() ? "" : "\n") + change.substr(start, end == std::string::npos ? end : end - start);
      start = end == std::string::npos ? change.size() : end + 2;
    }
  }

  // ---- the edit log's view (writeDotChanges)
  void classifyLogged(Item& it) {
    const Node* n = it.node;
    if (log_->added(n)) {
      it.status = Status::Added;
      it.note = n->provenance();
      ++diffCounts_.added;
      return;
    }
    if (!log_->changed(n)) return;
    it.status = Status::Changed;
    it.note = n->provenance();
    const Node* old = log_->oldNode(n);
    const std::string change = old ? describeChange(*old, *n) : "";
    addChangeLines(it.note, change);
    if (it.note.empty()) it.note = inputsChanged(n) ? "inputs changed" : "edited";
    ++diffCounts_.changed;
  }

  // Whether a changed node reads other values than before.
  bool inputsChanged(const Node* n) const {
    const std::vector<std::string>* old = log_->oldInputs(n);
    if (!old) return false;
    std::vector<std::string> now;
    for (const Arg& a : n->args())
      if (a.isValue()) now.push_back(a.value()->name());
    return now != *old;
  }

  // The container (block boxes) of a block of the drawn graph.
  std::vector<std::string> containerOf(const Block* b) const {
    std::vector<std::string> out;
    for (const Block* blk = b; blk && blk->owningNode(); blk = blk->owningNode()->owningBlock()) {
      auto key = blockKeys_.find(blk);
      if (key != blockKeys_.end()) out.push_back(key->second);
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

  void collectLogged() {
    // A changed constant (or literal list) drawn inside its users' labels:
    // its users changed.
    std::unordered_map<const Node*, Item*> byNode;
    for (Item& it : items_)
      if (it.node) byNode[it.node] = &it;
    g_.walk([&](Node* n) {
      if (!hidden(n) || !log_->changed(n)) return;
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
    for (const LoggedChanges::Removed& r : log_->removed) {
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
    const Value* v = log_->valueBefore(name);
    return v ? producerId(v, false) : "";
  }

  // Whether drawn-graph node `n` reading `v` is an edge the pass made.
  bool loggedEdgeIsNew(const Value* v, const Node* n) const {
    if (log_->added(n) || (v->node() && log_->added(v->node()))) return true;
    const std::vector<std::string>* old = log_->oldInputs(n);
    return old && std::find(old->begin(), old->end(), v->name()) == old->end();
  }

  // Edges of the graph before that are gone: into removed nodes, and the
  // inputs changed nodes no longer read.
  void writeLoggedGoneEdges(const std::function<void(const std::string&, const std::string&, const std::string&)>& edge,
                            const std::string& gone) const {
    for (const auto& [id, r] : loggedRemoved_)
      for (const std::string& name : r->names.refs) edge(producerBefore(name), drawnIdFor(id), gone);
    g_.walk([&](Node* n) {
      const std::vector<std::string>* old = log_->oldInputs(n);
      if (!old || hidden(n)) return;
      std::set<std::string> now;
      for (const Arg& a : n->args())
        if (a.isValue() && !(a.value()->node() && log_->added(a.value()->node()))) now.insert(a.value()->name());
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
      if (log_->added(n)) {
        count(n, -1);
      } else if (const Node* old = log_->oldNode(n)) {
        count(n, -1);
        count(old, +1);
      }
    });
    for (const LoggedChanges::Removed& r : log_->removed) {
      if (!r.node) {
        ++s.nodes;
        if (!r.firstLine.empty()) ++s.opCounts[opOfLine(r.firstLine)];
        continue;
      }
      for (const Node* n : r.tree) count(n, +1);
    }
    return s;
  }

  // The after-graph container of a before-graph block, when its owner matched.
  std::vector<std::string> containerOfBefore(const Block* b) {
    std::vector<std::string> out;
    std::vector<const Block*> chain;
    for (const Block* blk = b; blk && blk->owningNode(); blk = blk->owningNode()->owningBlock()) chain.push_back(blk);
    std::reverse(chain.begin(), chain.end());
    for (const Block* blk : chain) {
      const Node* owner = blk->owningNode();
      const Node* a = m_->after(owner);
      size_t idx = 0;
      while (idx < owner->blocks().size() && owner->block(idx) != blk) ++idx;
      if (!a || idx >= a->blocks().size()) break;
      out.push_back(blockKeys_.at(a->block(idx)));
    }
    return out;
  }

  void collectRemoved() {
    size_t next = 0;
    before_->walk([&](Node* n) {
      if (m_->after(n) || hidden(n)) return;
      Item it;
      it.id = "r" + std::to_string(next++);
      it.node = n;
      it.graph = before_;
      it.status = Status::Removed;
      it.container = containerOfBefore(n->owningBlock());
      it.scope = splitDots(nodeScope(n));
      removedIds_[n] = it.id;
      items_.push_back(std::move(it));
      ++diffCounts_.removed;
    });
  }

  // ---- depth and size limits
  size_t maxScopeDepth() const {
    size_t d = 0;
    for (const auto& it : items_) d = std::max(d, it.scope.size());
    return d;
  }

  // Drawn node count when scopes deeper than `depth` collapse (0: none).
  size_t drawnCount(size_t depth) const {
    std::set<std::string> summaries;
    size_t n = 0;
    for (const auto& it : items_) {
      if (depth && it.scope.size() > depth) summaries.insert(summaryKey(it, depth));
      else ++n;
    }
    return n + summaries.size();
  }

  static std::string summaryKey(const Item& it, size_t depth) {
    std::string k;
    for (const auto& c : it.container) k += c + "/";
    return k + joinDots(it.scope, depth);
  }

  void chooseDepth() {
    const size_t deepest = maxScopeDepth();
    depth_ = o_.depth >= 1 && static_cast<size_t>(o_.depth) < deepest ? static_cast<size_t>(o_.depth) : 0;
    if (o_.maxNodes == 0 || drawnCount(depth_) <= o_.maxNodes) return;
    for (size_t d = (depth_ ? depth_ : deepest) - (deepest ? 1 : 0); d >= 1; --d) {
      if (drawnCount(d) <= o_.maxNodes) {
        depth_ = d;
        limitNote_ = fmt::format("scopes deeper than {} collapsed to stay under {} nodes (--max-nodes)", d, o_.maxNodes);
        return;
      }
    }
    if (deepest) depth_ = 1;
    truncate_ = true;
  }

  // ---- labels
  std::string relativeScope(const Item& it, const std::vector<std::string>& boxScope) const {
    if (it.scope.empty()) return "";
    size_t common = 0;
    while (common < boxScope.size() && common < it.scope.size() && boxScope[common] == it.scope[common]) ++common;
    if (common == it.scope.size()) return "";
    std::vector<std::string> rest(it.scope.begin() + static_cast<long>(common), it.scope.end());
    return joinDots(rest, rest.size());
  }

  std::string nodeLabel(const Item& it, const std::vector<std::string>& boxScope) const {
    std::vector<std::string> rows;
    const char* muted = it.status == Status::Removed ? kRemovedText : "#555555";
    if (it.param) {
      rows = paramLabelRows(it.param, muted);
    } else if (!it.node) {
      rows.push_back("<B>" + html(it.raw) + "</B>");
    } else {
      rows = nodeLabelRows(*it.graph, it.node, it.scope, relativeScope(it, boxScope), o_.showConstants, muted);
    }
    if (!it.note.empty()) {
      std::string note;
      for (const auto& line : splitLines(it.note)) note += (note.empty() ? "" : "<BR/>") + html(truncateText(line, 60));
      const char* colour = it.status == Status::Added ? "#1e6b28" : "#7a5a00";
      rows.push_back(fmt::format("<FONT POINT-SIZE=\"9\" COLOR=\"{}\"><I>{}</I></FONT>", colour, note));
    }
    std::string out = "<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"1\">";
    for (const auto& r : rows) out += "<TR><TD>" + r + "</TD></TR>";
    return out + "</TABLE>>";
  }

  std::string nodeAttrs(const Item& it) const {
    std::string shape = "box";
    std::string style = "rounded,filled";
    std::string fill = "#ffffff", line = "#606060", extra;
    if (it.param) {
      shape = "ellipse";
      fill = "#f3f3f3";
      extra = " margin=\"0.05,0.02\"";
    } else if (it.node) {
      const Family fam = familyOf(it.node);
      fill = o_.colorBy == DotColorBy::Dtype ? dtypeFill(outputDtype(it.node)) : familyFill(fam);
      if (it.node->opcode() == Opcode::GetAttr) { shape = "note"; style = "filled"; fill = "#f7f7f7"; line = "#9a9a9a"; }
      if (fam == Family::IO && it.node->opcode() != Opcode::GetAttr) fill = "#dddddd";
      if (fam == Family::Control) style = "rounded,filled,bold";
      if (fam == Family::Convert && o_.colorBy == DotColorBy::Op) { line = "#c0392b"; extra = " penwidth=1.6"; }
    }
    if (diff()) {
      switch (it.status) {
        case Status::Same: fill = "#ffffff"; break;
        case Status::Added: fill = kAddedFill; line = kAddedLine; extra = " penwidth=2"; break;
        case Status::Changed: fill = kChangedFill; line = kChangedLine; extra = " penwidth=2"; break;
        case Status::Removed:
          style = it.node && it.node->opcode() == Opcode::GetAttr ? "dashed" : "rounded,dashed";
          fill = "#ffffff"; line = kRemovedLine; extra = " fontcolor=\"#8a8a8a\"";
          break;
      }
    }
    return fmt::format("shape={} style=\"{}\" fillcolor=\"{}\" color=\"{}\"{}", shape, style, fill, line, extra);
  }

  // ---- emission
  std::string emit() {
    BoxTree root;
    std::map<std::string, std::string> summaryIds;  // summary key -> id
    std::map<std::string, std::vector<const Item*>> summaryItems;
    std::vector<const Item*> order;  // drawn items (non-collapsed), in order
    size_t drawn = 0, omitted = 0;
    std::unordered_set<std::string> omittedIds;

    // Place items into boxes; collapsed ones into summaries.
    for (const auto& it : items_) {
      const bool collapsed = depth_ && it.scope.size() > depth_;
      if (collapsed) {
        const std::string key = summaryKey(it, depth_);
        auto [pos, inserted] = summaryIds.emplace(key, "s" + std::to_string(summaryIds.size()));
        if (inserted) {
          if (truncate_ && drawn >= o_.maxNodes) { omittedIds.insert(pos->second); ++omitted; }
          else ++drawn;
          placeSummary(root, it, pos->second);
        }
        drawnId_[&it] = pos->second;
        summaryItems[pos->second].push_back(&it);
        continue;
      }
      drawnId_[&it] = it.id;
      if (truncate_ && drawn >= o_.maxNodes) {
        omittedIds.insert(it.id);
        ++omitted;
        continue;
      }
      ++drawn;
      order.push_back(&it);
    }
    for (const Item* it : order) place(root, *it);
    // Summary labels need all their items: fill them in now.
    for (auto& [id, items] : summaryItems) summaryLines_[id] = summaryStatement(id, items);

    std::string out;
    out += "digraph ptopt {\n";
    out += "  graph [rankdir=TB nodesep=0.25 ranksep=0.32 fontname=\"Helvetica\" fontsize=11 "
           "compound=true newrank=true labelloc=t labeljust=l";
    if (o_.legend) out += " label=" + legendText(omitted);
    out += "];\n";
    out += "  node [fontname=\"Helvetica\" fontsize=11 margin=\"0.08,0.03\" height=0.3];\n";
    out += "  edge [color=\"#555555\" arrowsize=0.6];\n";
    writeBox(out, root, 1, omittedIds);
    if (omitted)
      out += fmt::format("  more [shape=box style=\"dashed\" label=\"… {} more nodes not drawn (--max-nodes {})\"];\n",
                         omitted, o_.maxNodes);
    writeEdges(out, omittedIds, omitted > 0);
    out += "}\n";
    return out;
  }

  // The box path of an item: its block boxes, then its scope prefixes
  // (up to `limit` segments).
  BoxTree* boxFor(BoxTree& root, const Item& it, size_t limit) {
    BoxTree* box = &root;
    std::string blockPath;
    for (const auto& b : it.container) {
      blockPath += b + "/";
      box = box->child(blockPath, blockLabels_.count(b) ? blockLabels_.at(b) : b, true);
    }
    if (!o_.clusters) return box;
    for (size_t i = 1; i <= std::min(limit, it.scope.size()); ++i) {
      const std::string prefix = joinDots(it.scope, i);
      box = box->child(blockPath + "|" + prefix, prefix, false);
    }
    return box;
  }

  void place(BoxTree& root, const Item& it) {
    BoxTree* box = boxFor(root, it, it.scope.size());
    box->lines.push_back(it.id);  // statements are rendered at write time
    itemById_[it.id] = &it;
  }

  void placeSummary(BoxTree& root, const Item& it, const std::string& id) {
    BoxTree* box = boxFor(root, it, depth_);
    box->lines.push_back(id);
  }

  std::string summaryStatement(const std::string& id, const std::vector<const Item*>& items) const {
    const Item& first = *items.front();
    std::map<std::string, size_t> ops;
    size_t added = 0, changed = 0, removed = 0;
    for (const Item* it : items) {
      if (it->node && it->status != Status::Removed) ++ops[shortOp(it->node)];
      added += it->status == Status::Added;
      changed += it->status == Status::Changed;
      removed += it->status == Status::Removed;
    }
    std::vector<std::pair<size_t, std::string>> sorted;
    for (const auto& [op, c] : ops) sorted.emplace_back(c, op);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::string opsText, line;
    for (size_t i = 0; i < sorted.size() && i < 6; ++i) {
      std::string piece = fmt::format("{} ×{}", sorted[i].second, sorted[i].first);
      if (!line.empty() && line.size() + piece.size() > 34) { opsText += html(line) + "<BR/>"; line.clear(); }
      line += (line.empty() ? "" : ", ") + piece;
    }
    if (sorted.size() > 6) line += fmt::format(", +{} kinds", sorted.size() - 6);
    opsText += html(line);
    std::string label = "<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"1\">";
    label += fmt::format("<TR><TD><B>{}</B> <FONT COLOR=\"#555555\">({} nodes)</FONT></TD></TR>",
                         html(joinDots(first.scope, depth_)), items.size());
    label += "<TR><TD><FONT POINT-SIZE=\"9\">" + opsText + "</FONT></TD></TR>";
    std::string fill = "#eef1f5", line2 = "#607080", extra;
    if (diff() && (added || changed || removed)) {
      label += fmt::format("<TR><TD><FONT POINT-SIZE=\"9\" COLOR=\"#7a5a00\">+{} added, ~{} changed, −{} removed</FONT></TD></TR>",
                           added, changed, removed);
      fill = changed || (added && removed) ? kChangedFill : added ? kAddedFill : "#ffffff";
      line2 = changed || (added && removed) ? kChangedLine : added ? kAddedLine : kRemovedLine;
      extra = " penwidth=2";
    }
    label += "</TABLE>>";
    return fmt::format("{} [shape=box3d style=\"filled\" fillcolor=\"{}\" color=\"{}\"{} label={}];", id, fill,
                       line2, extra, label);
  }

  // Counts statements in a box and below (single-node scope boxes dissolve).
  static size_t countBox(BoxTree& b) {
    b.count = b.lines.size();
    for (auto& c : b.children) b.count += countBox(*c);
    return b.count;
  }

  void writeBox(std::string& out, BoxTree& root, int indent, const std::unordered_set<std::string>& omitted) {
    countBox(root);
    writeBoxBody(out, root, indent, {}, omitted);
  }

  std::string statementFor(const std::string& id, const std::vector<std::string>& boxScope) const {
    auto s = summaryLines_.find(id);
    if (s != summaryLines_.end()) return s->second;
    const Item& it = *itemById_.at(id);
    return fmt::format("{} [{} label={}];", id, nodeAttrs(it), nodeLabel(it, boxScope));
  }

  void writeBoxBody(std::string& out, BoxTree& box, int indent, const std::vector<std::string>& boxScope,
                    const std::unordered_set<std::string>& omitted) {
    const std::string pad(static_cast<size_t>(indent) * 2, ' ');
    for (const auto& id : box.lines)
      if (!omitted.count(id)) out += pad + statementFor(id, boxScope) + "\n";
    for (auto& c : box.children) {
      if (c->count == 0) continue;
      const bool dissolve = !c->isBlock && c->count < 2;
      std::vector<std::string> inner = boxScope;
      if (!c->isBlock) inner = splitDots(c->label);
      if (dissolve) {
        writeBoxBody(out, *c, indent, boxScope, omitted);
        continue;
      }
      out += fmt::format("{}subgraph cluster_{} {{\n", pad, clusterCounter_++);
      if (c->isBlock)
        out += fmt::format("{}  label=<<I>{}</I>> style=\"rounded,dashed\" color=\"#9b59b6\" fontcolor=\"#6c3483\" "
                           "fontsize=10 penwidth=1.4;\n", pad, html(c->label));
      else
        out += fmt::format("{}  label=<<B>{}</B>> style=\"rounded,filled\" fillcolor=\"{}\" color=\"#a8b8cc\" "
                           "fontcolor=\"#34495e\" fontsize=10;\n", pad, html(c->label), scopeFill(inner.size()));
      writeBoxBody(out, *c, indent + 1, inner, omitted);
      out += pad + "}\n";
    }
  }

  // ---- edges
  std::string producerId(const Value* v, bool removedSide) const {
    if (const Node* p = v->node()) {
      if (hidden(p)) return "";
      if (removedSide) {
        if (const Node* a = m_->after(p)) return drawnIdOfNode(a);
        auto it = removedIds_.find(p);
        return it == removedIds_.end() ? "" : drawnIdOfRemoved(p);
      }
      return drawnIdOfNode(p);
    }
    if (removedSide) {
      // A block parameter of `before`: its counterpart when the owner matched.
      const Block* blk = v->paramOf();
      const Node* owner = blk ? blk->owningNode() : nullptr;
      const Node* a = owner ? m_->after(owner) : nullptr;
      if (!a) return "";
      for (size_t i = 0; i < owner->blocks().size() && i < a->blocks().size(); ++i)
        if (owner->block(i) == blk && v->index() < a->block(i)->params().size())
          return drawnIdOfParam(a->block(i)->param(v->index()));
      return "";
    }
    return drawnIdOfParam(v);
  }

  std::string drawnIdOfNode(const Node* n) const {
    auto it = ids_.find(n);
    if (it == ids_.end()) return "";
    return drawnIdFor(it->second);
  }
  std::string drawnIdOfRemoved(const Node* n) const { return drawnIdFor(removedIds_.at(n)); }
  std::string drawnIdOfParam(const Value* v) const {
    auto it = paramIds_.find(v);
    return it == paramIds_.end() ? "" : drawnIdFor(it->second);
  }
  std::string drawnIdFor(const std::string& itemId) const {
    auto it = drawnById_.find(itemId);
    return it == drawnById_.end() ? itemId : it->second;
  }

  void writeEdges(std::string& out, const std::unordered_set<std::string>& omitted, bool toMore) {
    for (const auto& [item, id] : drawnId_) drawnById_[item->id] = id;
    std::set<std::string> merged;  // edges touching summaries are drawn once
    std::unordered_set<std::string> hasInput;
    auto edge = [&](const std::string& from, const std::string& to, const std::string& attrs) {
      if (from.empty() || to.empty()) return;
      std::string f = omitted.count(from) ? (toMore ? "more" : "") : from;
      std::string t = omitted.count(to) ? (toMore ? "more" : "") : to;
      if (f.empty() || t.empty() || f == t) return;
      hasInput.insert(t);
      const bool summary = f[0] == 's' || t[0] == 's' || f == "more" || t == "more";
      if (summary && !merged.insert(f + ">" + t + attrs).second) return;
      out += fmt::format("  {} -> {}{};\n", f, t, attrs.empty() ? "" : " [" + attrs + "]");
    };
    // Uses in the drawn graph.
    g_.walk([&](Node* n) {
      if (hidden(n)) return;
      const std::string to = drawnIdOfNode(n);
      for (size_t i = 0; i < n->numArgs(); ++i) {
        const Value* v = n->argValue(i);
        if (!v) continue;
        std::string attrs;
        if (diff() && (log_ ? loggedEdgeIsNew(v, n) : !edgeExistedBefore(v, n, i)))
          attrs = fmt::format("color=\"{}\" penwidth=1.6", kAddedLine);
        edge(producerId(v, false), to, attrs);
      }
      for (size_t b = 0; b < n->blocks().size(); ++b)
        if (const Node* yield = n->block(b)->outputNode())
          edge(drawnIdOfNode(yield), to,
               fmt::format("style=dashed color=\"#9b59b6\" label=\"{}\" fontsize=9 fontcolor=\"#6c3483\"",
                           shortOp(n) == "If" ? (b == 0 ? "then" : "else") : shortOp(n) == "Loop" ? "body" : "block"));
    });
    anchorBlockSources(out, omitted, hasInput);
    if (!diff()) return;
    // Uses of `before` that are gone.
    const std::string gone = fmt::format("style=dashed color=\"{}\"", kRemovedLine);
    if (log_) return writeLoggedGoneEdges(edge, gone);
    before_->walk([&](Node* n) {
      if (hidden(n)) return;
      const Node* a = m_->after(n);
      const std::string to = a ? drawnIdOfNode(a) : drawnIdOfRemoved(n);
      for (size_t i = 0; i < n->numArgs(); ++i) {
        const Value* v = n->argValue(i);
        if (!v || (a && edgeStillThere(v, a, i))) continue;
        edge(producerId(v, true), to, gone);
      }
      if (!a)
        for (size_t b = 0; b < n->blocks().size(); ++b)
          if (const Node* yield = n->block(b)->outputNode())
            if (removedIds_.count(yield)) edge(drawnIdOfRemoved(yield), to, gone);
    });
  }

  // A node inside a block that reads nothing drawn (a RaiseException, a
  // loop's parameters) would float to the top of the drawing and stretch its
  // block's box over everything: an invisible edge from the owner's first
  // input keeps it beside its owner. Not a use: drawn with style=invis.
  void anchorBlockSources(std::string& out, const std::unordered_set<std::string>& omitted,
                          const std::unordered_set<std::string>& hasInput) const {
    std::set<std::string> done;
    auto anchor = [&](const Node* owner, const std::string& id) {
      if (id.empty() || hasInput.count(id) || omitted.count(id) || id[0] == 's') return;
      for (size_t i = 0; i < owner->numArgs(); ++i) {
        const Value* v = owner->argValue(i);
        const std::string from = v ? producerId(v, false) : "";
        if (from.empty() || omitted.count(from) || from == id) continue;
        if (done.insert(from + ">" + id).second) out += fmt::format("  {} -> {} [style=invis];\n", from, id);
        return;
      }
    };
    g_.walk([&](Node* n) {
      const Node* owner = n->owningBlock()->owningNode();
      if (!owner || hidden(n)) return;
      anchor(owner, drawnIdOfNode(n));
    });
    g_.walk([&](Node* n) {
      for (const auto& b : n->blocks())
        for (const auto& p : b->params()) anchor(n, drawnIdOfParam(p.get()));
    });
  }

  // Whether after-node `n` reading `v` at argument i was already so in `before`.
  bool edgeExistedBefore(const Value* v, const Node* n, size_t i) const {
    const Node* b = m_->before(n);
    if (!b || i >= b->numArgs() || !b->argValue(i)) return false;
    const Value* bv = b->argValue(i);
    if (v->node() && bv->node()) return m_->before(v->node()) == bv->node() && v->index() == bv->index();
    if (!v->node() && !bv->node()) {
      const Node* owner = v->paramOf() ? v->paramOf()->owningNode() : nullptr;
      const Node* bowner = bv->paramOf() ? bv->paramOf()->owningNode() : nullptr;
      return owner && m_->before(owner) == bowner && v->index() == bv->index();
    }
    return false;
  }

  // Whether before-node edge (v -> n at i) still exists at after-node `a`.
  bool edgeStillThere(const Value* v, const Node* a, size_t i) const {
    if (i >= a->numArgs() || !a->argValue(i)) return false;
    return edgeExistedBefore(a->argValue(i), a, i) && m_->before(a) && m_->before(a)->argValue(i) == v;
  }

  // ---- legend
  std::string legendText(size_t omitted) const {
    LegendInput in;
    in.title = o_.title;
    in.graph = &g_;
    in.colorBy = o_.colorBy;
    if (before_) in.before = graphStats(*before_);
    if (log_) {
      in.before = loggedStatsBefore();
      in.beforeBytesKnown = false;
      if (log_->signatureChanged()) in.notes.push_back("the graph's inputs changed (type or metadata)");
    }
    in.counts = diffCounts_;
    in.limitNote = limitNote_;
    in.omitted = omitted;
    in.maxNodes = o_.maxNodes;
    in.notes.insert(in.notes.end(), o_.notes.begin(), o_.notes.end());
    return legendLabel(in);
  }

  const Graph& g_;
  const DotOptions& o_;
  const Graph* before_ = nullptr;
  const NodeMatching* m_ = nullptr;
  const LoggedChanges* log_ = nullptr;
  std::map<std::string, std::string> removedProducers_;  // value name -> removed item id ("" hidden)
  std::vector<std::pair<std::string, const LoggedChanges::Removed*>> loggedRemoved_;
  std::vector<Item> items_;
  std::unordered_map<const Node*, std::string> ids_, removedIds_;
  std::unordered_map<const Value*, std::string> paramIds_;
  std::unordered_map<const Block*, std::string> blockKeys_;
  std::map<std::string, std::string> blockLabels_;
  std::unordered_map<const Item*, std::string> drawnId_;
  std::unordered_map<std::string, std::string> drawnById_;
  std::map<std::string, const Item*> itemById_;
  std::map<std::string, std::string> summaryLines_;
  DiffCounts diffCounts_;
  size_t depth_ = 0;
  bool truncate_ = false;
  std::string limitNote_;
  size_t clusterCounter_ = 0;
};

}  // namespace

std::string writeDot(const Graph& g, const DotOptions& options) { return DotWriter(g, options).write(nullptr); }

std::string writeDotDiff(const Graph& before, const Graph& after, const DotOptions& options, DiffCounts* counts) {
  const NodeMatching m = matchNodes(before, after);
  return DotWriter(after, options, &before, &m).write(counts);
}

std::string writeDotChanges(const Graph& graph, const ir::ChangeSet& changes, const DotOptions& options,
                            DiffCounts* counts) {
  const LoggedChanges log(graph, changes);
  return DotWriter(graph, options, log).write(counts);
}

}  // namespace ptopt::draw
