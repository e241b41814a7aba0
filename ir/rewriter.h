// The rewriter: the one way passes edit a graph, and the log of their edits.
//
// Every C++ pass makes its edits through an ir::Rewriter (insert, erase,
// replace, set argument, move, set metadata, rename, constants). Each edit is
// recorded in an EditLog with the pass that made it and the text the node had
// before its first edit. The pass manager reads the log to decide whether a
// pass changed the graph, to print --print-changed's diff without diffing
// whole graphs, and to draw --dot-dir's per-pass diffs (ChangeSet).
//
//   ir::Rewriter rw(graph, ctx.edits, name());
//   ir::Value* y = rw.call(bn, "aten::mul", {x, scale});
//   rw.replace(bn, y);              // uses of bn's output now read y; bn erased
//   PassResult r;
//   r.changed = rw.changed();       // a pass reports changed exactly when it logged edits
//
// Edits made around the rewriter (Node/Value methods called directly) are not
// logged; the pass manager then falls back to a text diff for that pass.
#pragma once

#include "ir/ir.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ptopt::ir {

enum class EditKind {
  Insert,       // a node was inserted (with its nested blocks)
  Erase,        // a node was erased (with its nested blocks)
  Modify,       // a node's arguments, outputs, attributes or parameters changed
  Move,         // a node moved (treated as erase + insert in diffs)
  SetConstant,  // the tensor behind a get_attr changed
};
const char* editKindName(EditKind k);

struct Edit {
  EditKind kind;
  std::string pass;
  // The node edited. After an Erase the pointer dangles (the graph may even
  // reuse the address): compare it, never dereference it.
  const Node* node;
  // The node's text (printNodeTree) before this edit, or for an Insert/Move
  // after it; for a placeholder, the graph's signature line.
  std::string text;
  // For Erase and Move: the node that followed it, where the diff shows the
  // removed lines (nullptr at the end of a block).
  const Node* anchor = nullptr;
  std::string detail;  // e.g. `argument weight`, `uses of %x -> %y`
};

// What a range of edits did, node by node (net of each other: a node both
// inserted and erased in the range is in neither set).
struct ChangeSet {
  std::set<const Node*> added;                     // in the graph, new
  std::map<const Node*, std::string> changed;      // in the graph, edited: text before
  struct Removed {
    std::string text;      // the node's text (with nested blocks) before
    const Node* anchor;    // the node it stood before, or nullptr
  };
  std::vector<Removed> removed;
  bool signatureChanged = false;                   // a placeholder's type or metadata
  std::string signatureBefore;
  bool empty() const { return added.empty() && changed.empty() && removed.empty() && !signatureChanged; }
};

class EditLog {
 public:
  // Texts cost a print per edited node: kept only when someone will read
  // them (--print-changed, --dot-dir, the log self-check).
  bool keepText() const { return keepText_; }
  void setKeepText(bool keep) { keepText_ = keep; }
  void add(Edit e) { edits_.push_back(std::move(e)); }
  const std::vector<Edit>& edits() const { return edits_; }
  size_t size() const { return edits_.size(); }
  void clear() { edits_.clear(); }
  // The net effect of edits [from, size()).
  ChangeSet changesSince(size_t from) const;
  // Per pass, how many edits of each kind (`fold-conv-bn: insert=2 erase=4`).
  std::string summary(size_t from = 0) const;

 private:
  std::vector<Edit> edits_;
  bool keepText_ = false;
};

// A unified diff (`--- before PASS`, `+++ after PASS`, `@@ -a,b +c,d @@`) of
// the graph's text form, built from `changes` and the graph as it is now:
// only lines near a change are printed. Empty when `changes` is empty.
std::string unifiedDiffOfChanges(const Graph& after, const ChangeSet& changes, const std::string& beforeLabel,
                                 const std::string& afterLabel, size_t context = 3);
// Rebuilds the text before from the text after and unifiedDiffOfChanges's
// diff (a self-check for tests: the log must describe the whole change).
std::string applyDiffInReverse(const std::string& after, const std::string& diff);

class Rewriter {
 public:
  // `log` may be null (edits are then only counted).
  Rewriter(Graph& g, EditLog* log, std::string pass);
  Rewriter(Graph& g, EditLog& log, std::string pass) : Rewriter(g, &log, std::move(pass)) {}

  Graph& graph() const { return g_; }
  const std::string& pass() const { return pass_; }
  size_t edits() const { return count_; }
  bool changed() const { return count_ != 0; }

  // ----- creating nodes -----
  // Inserts a call before `before` (or at the end of `block`); returns it.
  Node* insertCall(Node* before, const std::string& qualifiedTarget, std::vector<Arg> args,
                   std::vector<c10::TypePtr> outputTypes);
  Node* appendCall(Block* block, const std::string& qualifiedTarget, std::vector<Arg> args,
                   std::vector<c10::TypePtr> outputTypes);
  // insertCall with one output; returns the output.
  Value* call(Node* before, const std::string& qualifiedTarget, std::vector<Arg> args,
              c10::TypePtr outputType = c10::TensorType::get());
  // A call that takes the place of `like`: inserted before it, with its
  // scope, `provenance` (default: this pass) and, on its one output,
  // `like`'s output metadata, all set before the logged insert. `like`
  // stays for the caller to replace.
  Value* createLike(Node* like, const std::string& qualifiedTarget, std::vector<Arg> args,
                    const std::string& provenance = "", c10::TypePtr outputType = c10::TensorType::get());
  // Inserts a detached node made with graph().createNode / createCall.
  Node* insert(Node* detached, Node* before);
  Node* insertAfter(Node* detached, Node* after);
  Node* append(Node* detached, Block* block);
  // Registers `t` as a new constant named after `base` (`base`, `base.1`,
  // ...) and inserts its get_attr before `before`; returns the value.
  Value* addConstant(const std::string& base, const at::Tensor& t, Node* before);
  // The same for any constant value of `type` (packed weights, RNN cell
  // parameters: script objects).
  Value* addConstant(const std::string& base, const c10::IValue& value, c10::TypePtr type, Node* before);
  // A get_attr for an existing constant, inserted before `before`.
  Value* getAttr(const std::string& name, c10::TypePtr type, Node* before);
  // The constant table's writes belong to the rewriter, so that no pass
  // touches the table directly. storeConstant: a new entry named after
  // `base` holding `value`, for a get_attr the caller creates (its metadata
  // set first) and inserts through this rewriter: that insert is the logged
  // edit. dropConstant: the entry of a constant this pass made, once the
  // get_attr reading it was erased through this rewriter.
  std::string storeConstant(const std::string& base, const c10::IValue& value);
  void dropConstant(const std::string& name);

  // ----- editing -----
  void setArg(Node* n, size_t i, Arg a);
  void addArg(Node* n, Arg a);
  void removeArg(Node* n, size_t i);
  void setArgs(Node* n, std::vector<Arg> args);
  void setAttr(Node* n, const std::string& name, AttrValue v);
  // Every use of `from` reads `to` instead (each user is logged as modified).
  void replaceAllUsesWith(Value* from, Value* to);
  void replaceUsesIf(Value* from, Value* to, const std::function<bool(const Use&)>& pred);
  // Uses of `old`'s single output read `with`; `old` is erased.
  void replace(Node* old, Value* with);
  // Erases `n` (its outputs must be unused).
  void erase(Node* n);
  // Erases the get_attr behind `v` when nothing uses it (the constant stays
  // in the table: other methods may read it; export skips unread ones).
  void eraseConstantIfUnused(Value* v);
  // Replaces the tensor behind constant `name` (read by get_attr `n`).
  void setConstant(Node* getAttr, const at::Tensor& t);
  void moveBefore(Node* n, Node* before);
  void moveAfter(Node* n, Node* after);
  void setMeta(Value* v, const TensorMeta& m);
  void setType(Value* v, c10::TypePtr t);
  void setName(Value* v, const std::string& name);
  Value* addOutput(Node* n, c10::TypePtr type, const std::string& name = "");
  void eraseOutput(Node* n, size_t i);
  Value* addParam(Block* b, c10::TypePtr type, const std::string& name = "");
  void eraseParam(Block* b, size_t i);
  Block* addBlock(Node* n);
  // Provenance is debug information for drawings; not an edit of the graph.
  void setProvenance(Node* n, std::string p) { n->setProvenance(std::move(p)); }
  // Logs an edit made outside the rewriter (call before making it).
  void noteModify(Node* n, const std::string& detail);

 private:
  void logInsert(Node* n, const std::string& detail);
  void logModify(Node* n, const std::string& detail);  // before the edit
  void logErase(Node* n);                              // before the edit
  Node* nodeOf(Value* v) const;  // defining node, or the node owning the block v is a parameter of

  Graph& g_;
  EditLog* log_;
  std::string pass_;
  size_t count_ = 0;
  std::set<const Node*> touched_;  // nodes whose text before is already logged
};

// Printing pieces shared by the text form and the edit diffs.
// `%x : Tensor{float32, [1, 3]}`
std::string printValueDecl(const Value& v);
// The graph's signature line, `graph(%x : Tensor, ...):`.
std::string printSignature(const Graph& g);
// The lines a node prints in the text form: its own line, then for each
// nested block its header and (when `nested`) its nodes; `indent` spaces.
std::vector<std::string> printNodeLines(const Node& n, int indent, bool nested);
// The indent of `n`'s line in the text form (2 at the top level).
int textIndent(const Node& n);

}  // namespace ptopt::ir
