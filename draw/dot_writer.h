// The DOT writer's machinery, shared by the three drawings of draw/writer.h:
// a graph (DotWriter itself), the difference between two graphs paired by
// the matcher (draw/diff_matched.cpp) and one pass's changes read from its
// edit log (draw/diff_logged.cpp). A diff drawing is a DotWriter that
// answers the hooks below: how each drawn node changed, the nodes and edges
// that are gone, the legend's "before". Internal to draw/.
#pragma once

#include "draw/legend.h"
#include "draw/style.h"
#include "draw/writer.h"
#include "ir/ir.h"

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ptopt::draw::dot {

using ir::Arg;
using ir::Block;
using ir::Graph;
using ir::Node;
using ir::Opcode;
using ir::Value;

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

// edge(from, to, attributes): one DOT edge between drawn ids.
using EdgeWriter = std::function<void(const std::string&, const std::string&, const std::string&)>;

class DotWriter {
 public:
  DotWriter(const Graph& g, const DotOptions& o) : g_(g), o_(o) {}
  virtual ~DotWriter() = default;
  std::string write(DiffCounts* counts);

 protected:
  // ---- what a diff drawing adds (a plain drawing: nothing)
  virtual bool isDiff() const { return false; }
  // The node `n` stood for before (its scope when `n` has none), or null.
  virtual const Node* nodeBefore(const Node* n) const { return nullptr; }
  // Sets `it`'s status (added, changed) and note, and counts it.
  virtual void classify(Item& it) {}
  // Adds the items of the nodes that are gone (after the drawn graph's).
  virtual void collectGone() {}
  // Whether the drawn node `n` reading `v` at argument i is a new edge.
  virtual bool edgeIsNew(const Value* v, const Node* n, size_t i) const { return false; }
  // The edges of the graph before that are gone, drawn with `gone`.
  virtual void writeGoneEdges(const EdgeWriter& edge, const std::string& gone) const {}
  // The legend's "before" column.
  virtual void legendBefore(LegendInput& in) const {}

  // ---- for the diff drawings
  // Constants and literal lists are drawn in their users' labels by default.
  bool hidden(const Node* n) const;
  // One change per line, at most three.
  static void addChangeLines(std::string& note, const std::string& change);
  // The container (block boxes) of a block of the drawn graph.
  std::vector<std::string> containerOf(const Block* b) const;
  // The drawn id of the node (or block parameter) that computes `v`, or ""
  // when it is hidden.
  std::string producerId(const Value* v) const;
  std::string drawnIdOfNode(const Node* n) const;
  std::string drawnIdOfParam(const Value* v) const;
  std::string drawnIdFor(const std::string& itemId) const;

  const Graph& g_;
  const DotOptions& o_;
  std::vector<Item> items_;
  std::unordered_map<const Node*, std::string> ids_;
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

 private:
  // ---- collect the items to draw
  void collect();
  static std::string blockLabel(const Node* owner, size_t i);
  std::string scopeOf(const Node* n) const;
  // ---- depth and size limits
  size_t maxScopeDepth() const;
  // Drawn node count when scopes deeper than `depth` collapse (0: none).
  size_t drawnCount(size_t depth) const;
  static std::string summaryKey(const Item& it, size_t depth);
  void chooseDepth();
  // ---- labels
  std::string relativeScope(const Item& it, const std::vector<std::string>& boxScope) const;
  std::string nodeLabel(const Item& it, const std::vector<std::string>& boxScope) const;
  std::string nodeAttrs(const Item& it) const;
  // ---- emission
  std::string emit();
  // The box path of an item: its block boxes, then its scope prefixes
  // (up to `limit` segments).
  BoxTree* boxFor(BoxTree& root, const Item& it, size_t limit);
  void place(BoxTree& root, const Item& it);
  void placeSummary(BoxTree& root, const Item& it, const std::string& id);
  std::string summaryStatement(const std::string& id, const std::vector<const Item*>& items) const;
  // Counts statements in a box and below (single-node scope boxes dissolve).
  static size_t countBox(BoxTree& b);
  void writeBox(std::string& out, BoxTree& root, int indent, const std::unordered_set<std::string>& omitted);
  std::string statementFor(const std::string& id, const std::vector<std::string>& boxScope) const;
  void writeBoxBody(std::string& out, BoxTree& box, int indent, const std::vector<std::string>& boxScope,
                    const std::unordered_set<std::string>& omitted);
  void writeEdges(std::string& out, const std::unordered_set<std::string>& omitted, bool toMore);
  // A node inside a block that reads nothing drawn (a RaiseException, a
  // loop's parameters) would float to the top of the drawing and stretch its
  // block's box over everything: an invisible edge from the owner's first
  // input keeps it beside its owner. Not a use: drawn with style=invis.
  void anchorBlockSources(std::string& out, const std::unordered_set<std::string>& omitted,
                          const std::unordered_set<std::string>& hasInput) const;
  // ---- legend
  std::string legendText(size_t omitted) const;
};

}  // namespace ptopt::draw::dot
