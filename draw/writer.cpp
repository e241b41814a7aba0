#include "draw/writer.h"

#include "draw/dot_writer.h"

#include "draw/labels.h"

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

namespace dot {

std::string DotWriter::write(DiffCounts* counts) {
  collect();
  if (counts) *counts = diffCounts_;
  chooseDepth();
  return emit();
}

bool DotWriter::hidden(const Node* n) const {
  return !o_.showConstants && (n->opcode() == Opcode::GetAttr || isLiteralList(n));
}

void DotWriter::collect() {
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
            if (isDiff()) classify(it);
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
  if (isDiff()) collectGone();
}

std::string DotWriter::blockLabel(const Node* owner, size_t i) {
  const std::string op = shortOp(owner);
  if (op == "If") return i == 0 ? "If: then" : "If: else";
  if (op == "Loop") return "Loop body";
  return op + " block " + std::to_string(i);
}

std::string DotWriter::scopeOf(const Node* n) const {
  std::string s = nodeScope(n);
  if (s.empty()) {
    if (const Node* b = nodeBefore(n)) s = nodeScope(b);
  }
  return s;
}

void DotWriter::addChangeLines(std::string& note, const std::string& change) {
  size_t lines = 0;
  for (size_t start = 0; !change.empty() && start < change.size() && lines < 3; ++lines) {
    const size_t end = change.find("; ", start);
    note += (note.empty() ? "" : "\n") + change.substr(start, end == std::string::npos ? end : end - start);
    start = end == std::string::npos ? change.size() : end + 2;
  }
}

std::vector<std::string> DotWriter::containerOf(const Block* b) const {
  std::vector<std::string> out;
  for (const Block* blk = b; blk && blk->owningNode(); blk = blk->owningNode()->owningBlock()) {
    auto key = blockKeys_.find(blk);
    if (key != blockKeys_.end()) out.push_back(key->second);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

size_t DotWriter::maxScopeDepth() const {
  size_t d = 0;
  for (const auto& it : items_) d = std::max(d, it.scope.size());
  return d;
}

size_t DotWriter::drawnCount(size_t depth) const {
  std::set<std::string> summaries;
  size_t n = 0;
  for (const auto& it : items_) {
    if (depth && it.scope.size() > depth) summaries.insert(summaryKey(it, depth));
    else ++n;
  }
  return n + summaries.size();
}

std::string DotWriter::summaryKey(const Item& it, size_t depth) {
  std::string k;
  for (const auto& c : it.container) k += c + "/";
  return k + joinDots(it.scope, depth);
}

void DotWriter::chooseDepth() {
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

std::string DotWriter::relativeScope(const Item& it, const std::vector<std::string>& boxScope) const {
  if (it.scope.empty()) return "";
  size_t common = 0;
  while (common < boxScope.size() && common < it.scope.size() && boxScope[common] == it.scope[common]) ++common;
  if (common == it.scope.size()) return "";
  std::vector<std::string> rest(it.scope.begin() + static_cast<long>(common), it.scope.end());
  return joinDots(rest, rest.size());
}

std::string DotWriter::nodeLabel(const Item& it, const std::vector<std::string>& boxScope) const {
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

std::string DotWriter::nodeAttrs(const Item& it) const {
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
  if (isDiff()) {
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

std::string DotWriter::emit() {
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

BoxTree* DotWriter::boxFor(BoxTree& root, const Item& it, size_t limit) {
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

void DotWriter::place(BoxTree& root, const Item& it) {
  BoxTree* box = boxFor(root, it, it.scope.size());
  box->lines.push_back(it.id);  // statements are rendered at write time
  itemById_[it.id] = &it;
}

void DotWriter::placeSummary(BoxTree& root, const Item& it, const std::string& id) {
  BoxTree* box = boxFor(root, it, depth_);
  box->lines.push_back(id);
}

std::string DotWriter::summaryStatement(const std::string& id, const std::vector<const Item*>& items) const {
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
  if (isDiff() && (added || changed || removed)) {
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

size_t DotWriter::countBox(BoxTree& b) {
  b.count = b.lines.size();
  for (auto& c : b.children) b.count += countBox(*c);
  return b.count;
}

void DotWriter::writeBox(std::string& out, BoxTree& root, int indent, const std::unordered_set<std::string>& omitted) {
  countBox(root);
  writeBoxBody(out, root, indent, {}, omitted);
}

std::string DotWriter::statementFor(const std::string& id, const std::vector<std::string>& boxScope) const {
  auto s = summaryLines_.find(id);
  if (s != summaryLines_.end()) return s->second;
  const Item& it = *itemById_.at(id);
  return fmt::format("{} [{} label={}];", id, nodeAttrs(it), nodeLabel(it, boxScope));
}

void DotWriter::writeBoxBody(std::string& out, BoxTree& box, int indent, const std::vector<std::string>& boxScope,
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

std::string DotWriter::producerId(const Value* v) const {
  if (const Node* p = v->node()) return hidden(p) ? "" : drawnIdOfNode(p);
  return drawnIdOfParam(v);
}

std::string DotWriter::drawnIdOfNode(const Node* n) const {
  auto it = ids_.find(n);
  if (it == ids_.end()) return "";
  return drawnIdFor(it->second);
}

std::string DotWriter::drawnIdOfParam(const Value* v) const {
  auto it = paramIds_.find(v);
  return it == paramIds_.end() ? "" : drawnIdFor(it->second);
}

std::string DotWriter::drawnIdFor(const std::string& itemId) const {
  auto it = drawnById_.find(itemId);
  return it == drawnById_.end() ? itemId : it->second;
}

void DotWriter::writeEdges(std::string& out, const std::unordered_set<std::string>& omitted, bool toMore) {
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
      if (isDiff() && edgeIsNew(v, n, i))
        attrs = fmt::format("color=\"{}\" penwidth=1.6", kAddedLine);
      edge(producerId(v), to, attrs);
    }
    for (size_t b = 0; b < n->blocks().size(); ++b)
      if (const Node* yield = n->block(b)->outputNode())
        edge(drawnIdOfNode(yield), to,
             fmt::format("style=dashed color=\"#9b59b6\" label=\"{}\" fontsize=9 fontcolor=\"#6c3483\"",
                         shortOp(n) == "If" ? (b == 0 ? "then" : "else") : shortOp(n) == "Loop" ? "body" : "block"));
  });
  anchorBlockSources(out, omitted, hasInput);
  if (!isDiff()) return;
  // Uses of the graph before that are gone.
  writeGoneEdges(edge, fmt::format("style=dashed color=\"{}\"", kRemovedLine));
}

void DotWriter::anchorBlockSources(std::string& out, const std::unordered_set<std::string>& omitted,
                        const std::unordered_set<std::string>& hasInput) const {
  std::set<std::string> done;
  auto anchor = [&](const Node* owner, const std::string& id) {
    if (id.empty() || hasInput.count(id) || omitted.count(id) || id[0] == 's') return;
    for (size_t i = 0; i < owner->numArgs(); ++i) {
      const Value* v = owner->argValue(i);
      const std::string from = v ? producerId(v) : "";
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

std::string DotWriter::legendText(size_t omitted) const {
  LegendInput in;
  in.title = o_.title;
  in.graph = &g_;
  in.colorBy = o_.colorBy;
  if (isDiff()) legendBefore(in);
  in.counts = diffCounts_;
  in.limitNote = limitNote_;
  in.omitted = omitted;
  in.maxNodes = o_.maxNodes;
  in.notes.insert(in.notes.end(), o_.notes.begin(), o_.notes.end());
  return legendLabel(in);
}

}  // namespace dot

std::string writeDot(const Graph& g, const DotOptions& options) { return dot::DotWriter(g, options).write(nullptr); }

}  // namespace ptopt::draw
