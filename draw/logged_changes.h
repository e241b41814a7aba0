// A pass's changes as drawings need them: the pass's edit log
// (ir::ChangeSet, ir/rewriter.h) read against the graph after the pass.
// Removed nodes exist only as text in the log, and changed nodes' text
// before: both are parsed back into small scratch graphs (the values they
// read declared as in the live graph), so that the writer labels them like
// live nodes; a text that does not parse is drawn by its op name alone. The
// log's node pointers are only compared with the graph's live nodes, never
// followed (an erased node's address may dangle, or be reused).
#pragma once

#include "ir/ir.h"
#include "ir/rewriter.h"

#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace ptopt::draw {

// The value names a line of the IR text form defines (`%y : Tensor = ...`,
// block parameters) and reads (arguments), in order. Strings are skipped.
struct LineNames {
  std::vector<std::string> defs, refs;
};
LineNames namesOfLine(const std::string& line);
// `  %y : Tensor = aten::relu(%x)` -> `relu`.
std::string opOfLine(const std::string& line);

// The changes of one pass, against the graph after it (both must outlive this).
class LoggedChanges {
 public:
  struct Removed {
    const ir::Node* node = nullptr;     // in a scratch graph; nullptr when the text did not parse
    std::string firstLine;
    LineNames names;                    // of the first line
    const ir::Node* anchor = nullptr;   // the live node it stood before, or nullptr
    std::vector<const ir::Node*> tree;  // the node and its nested nodes (scratch)
  };

  LoggedChanges(const ir::Graph& g, const ir::ChangeSet& cs);

  bool added(const ir::Node* n) const { return cs_.added.count(n) != 0 && live_.count(n) != 0; }
  bool changed(const ir::Node* n) const { return old_.count(n) != 0; }
  // A changed node as it was (scratch), or nullptr.
  const ir::Node* oldNode(const ir::Node* n) const {
    auto it = old_.find(n);
    return it == old_.end() ? nullptr : it->second.node;
  }
  // The value names a changed node read before the pass.
  const std::vector<std::string>* oldInputs(const ir::Node* n) const {
    auto it = old_.find(n);
    return it == old_.end() ? nullptr : &it->second.names.refs;
  }
  // The live value with this name that existed before the pass (not made by
  // an added node), or nullptr.
  const ir::Value* valueBefore(const std::string& name) const {
    auto it = names_.find(name);
    if (it == names_.end()) return nullptr;
    const ir::Value* v = it->second;
    if (v->node() && added(v->node())) return nullptr;
    return v;
  }
  bool signatureChanged() const { return cs_.signatureChanged; }

  std::vector<Removed> removed;  // in the log's order

 private:
  struct Old {
    const ir::Node* node = nullptr;
    LineNames names;
  };

  // Parses node lines (one node, with its nested blocks) into a scratch
  // graph: the values they read become placeholders typed as in the live
  // graph, or get_attrs when they are constants; returns the node.
  const ir::Node* parse(const std::vector<std::string>& lines);

  const ir::Graph& g_;
  const ir::ChangeSet& cs_;
  std::unordered_set<const ir::Node*> live_;
  std::map<std::string, const ir::Value*> names_;
  std::map<std::string, std::string> removedGetAttrs_;
  std::map<const ir::Node*, Old> old_;
  std::vector<std::unique_ptr<ir::Graph>> scratch_;
};

}  // namespace ptopt::draw
