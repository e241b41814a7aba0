// Subgraph patterns over the ptopt IR and the worklist driver that applies
// them, with torch.fx `subgraph_rewriter` semantics.
//
// A Pattern is a small ir::Graph written in IR text (ir/text.h):
//
//   graph(%x : Tensor, %alpha : Scalar):
//     %a : Tensor = aten::relu(%x)
//     %b : Tensor = aten::add.Tensor(%a, %a, %alpha)
//     output(%b)
//
// Matching rules:
//   * Pattern inputs are wildcards. A wildcard binds to a target Value or to
//     an inline Literal argument, consistently: every use of the same wildcard
//     must see the same Value, or equal Literals. Two different wildcards may
//     bind to the same thing. A wildcard only binds to something whose type is
//     a subtype of its declared type (`Tensor` matches tensors, `Scalar` ints
//     and floats, `Any` anything).
//   * Literals written in the pattern must equal the target's literal exactly
//     (same kind: `1` does not match `1.0`).
//   * Operators match by target and overload; an empty overload in the pattern
//     only matches an empty overload. Argument and output counts must agree.
//     Target nodes with nested blocks or attributes never match.
//   * Matching anchors on the output-producing pattern node that comes last
//     in the pattern and walks backwards through arguments (a pattern node
//     reachable only through a value it shares with matched nodes is looked
//     for among that value's users). Every matched node lies in the anchor's
//     block.
//
// A structural match may still be refused (the driver says why through
// PassContext::decline):
//   * not self-contained: a value defined inside the match that is not a
//     pattern output is used outside it, or a wildcard binds to a value the
//     match itself defines;
//   * it would create a cycle: a pattern output is used, outside the match,
//     before the match's last node (the replacement goes there);
//   * it would reorder effects: a node with side effects (ir::hasSideEffects:
//     an in-place op, a raise, a random draw) lies between the matched nodes,
//     or a matched node with side effects would move past other nodes;
//   * it overlaps a rewrite already applied in the same sweep (first match
//     wins; the next sweep sees the new nodes);
//   * a rule constraint rejected it.
//
// Rewriting (through an ir::Rewriter, so every edit is logged) inserts the
// replacement graph's nodes before the match's last node, with replacement
// inputs bound positionally to what the pattern inputs bound (a literal-bound
// input becomes that literal argument), replaces every use of each pattern
// output with the matching replacement output (which takes over the old
// value's name), then erases the matched nodes, users first. Replacement calls get their schema from ir::findSchema.
#pragma once

#include "ir/ir.h"
#include "rewriters/pass.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ptopt::rewriters {

class Pattern;

// One structural match of a pattern: what each wildcard bound to and which
// target node each pattern node matched.
class Match {
 public:
  const Pattern& pattern() const { return *pattern_; }
  // The target node the pattern's anchor matched.
  ir::Node* anchor() const { return nodes_.at(0); }
  // Target nodes, one per pattern node: nodes()[i] matched
  // pattern().nodes()[i] (index 0 is the anchor).
  const std::vector<ir::Node*>& nodes() const { return nodes_; }
  // What wildcard `i` (the i-th pattern input) bound to.
  const ir::Arg& binding(size_t i) const { return *bindings_.at(i); }
  // By the pattern input's name (without '%'); throws std::out_of_range for
  // a name that is not a pattern input.
  const ir::Arg& binding(const std::string& name) const;
  // The bound Value, or nullptr when the wildcard bound to a literal.
  ir::Value* value(const std::string& name) const { return binding(name).value(); }
  // The bound Literal, or nullptr when the wildcard bound to a Value.
  const ir::Literal* literal(const std::string& name) const;
  // The target values of the pattern outputs, in order.
  const std::vector<ir::Value*>& outputs() const { return outputs_; }

 private:
  friend class Pattern;
  const Pattern* pattern_ = nullptr;
  std::vector<ir::Node*> nodes_;
  std::vector<std::optional<ir::Arg>> bindings_;
  std::vector<ir::Value*> outputs_;
};

class Pattern {
 public:
  // Takes a parsed pattern graph. Throws std::invalid_argument when it cannot
  // serve as a pattern: no operator call, a get_attr or nested block, node
  // attributes, an output that is not produced by a pattern node, an unused
  // input, a node that reaches no output, or nodes not connected to the
  // anchor through values.
  explicit Pattern(std::unique_ptr<ir::Graph> graph);
  // Parses IR text (known operators only unless `requireKnownOperators` is
  // false). Throws ir::ParseError or std::invalid_argument.
  static std::shared_ptr<const Pattern> parse(const std::string& irText, bool requireKnownOperators = true);

  const ir::Graph& graph() const { return *graph_; }
  const ir::Node* anchorNode() const { return nodes_.at(0); }
  // Cheap pre-filter for drivers: a node can only anchor a match when its
  // target equals this (the overload is checked by matchAt).
  const std::string& anchorTarget() const { return anchorNode()->target(); }
  size_t numWildcards() const { return wildcards_.size(); }
  const std::vector<ir::Value*>& wildcards() const { return wildcards_; }
  std::optional<size_t> wildcardIndex(const std::string& name) const;
  size_t numOutputs() const { return graph_->outputs().size(); }
  // Pattern nodes in matching order (index 0 is the anchor).
  const std::vector<const ir::Node*>& nodes() const { return nodes_; }

  // The structural match with `node` as the anchor, if any: operators,
  // literals, consistent wildcards, all within node's block. Does not check
  // self-containment or ordering (see whyNotReplaceable and the driver).
  std::optional<Match> matchAt(ir::Node* node) const;

 private:
  struct State;
  // How the matcher reaches pattern node `node` from what it matched before:
  // as the producer of an already bound pattern value (backward), or among
  // the users of an already bound value at argument `argIndex` (forward).
  struct Step {
    size_t node;
    bool forward = false;
    const ir::Value* via = nullptr;  // the pattern value followed
    size_t argIndex = 0;             // forward: which argument of `node` uses `via`
  };
  bool search(size_t step, State& s) const;
  bool bindNode(size_t i, ir::Node* t, State& s) const;
  bool bindWildcard(size_t w, const ir::Arg& a, State& s) const;

  std::unique_ptr<ir::Graph> graph_;
  std::vector<const ir::Node*> nodes_;
  std::vector<ir::Value*> wildcards_;
  std::unordered_map<const ir::Value*, size_t> wildcardIndex_;
  std::unordered_map<const ir::Value*, size_t> valueIndex_;  // outputs of pattern nodes
  std::vector<Step> plan_;
};

// Why a structural match cannot be replaced in place, or nullopt when it can
// as far as self-containment goes: an interior value (not a pattern output)
// used outside the match, or a wildcard bound to a value the match defines.
std::optional<std::string> whyNotSelfContained(const Match& m);

// Accepts a match (nullopt) or gives the reason to decline it.
using Constraint = std::function<std::optional<std::string>(const Match&)>;

struct RewriteRule {
  std::string name;
  std::shared_ptr<const Pattern> pattern;
  std::shared_ptr<const ir::Graph> replacement;
  std::vector<Constraint> constraints;
};

// Throws std::invalid_argument when `replacement` cannot replace `pattern`:
// input or output counts differ, or it holds get_attr nodes or nested blocks.
void checkReplacement(const Pattern& pattern, const ir::Graph& replacement);

// Parses both graphs (known operators only) and checks them. Throws
// ir::ParseError or std::invalid_argument.
RewriteRule makeRule(std::string name, const std::string& patternText, const std::string& replacementText,
                     std::vector<Constraint> constraints = {});

// Rewrites one match through `rw` (already checked: self-contained and safe
// to move to `insertBefore`, which defaults to the match's last node).
// Returns the inserted nodes.
std::vector<ir::Node*> replaceMatch(ir::Rewriter& rw, const Match& m, const ir::Graph& replacement,
                                    ir::Node* insertBefore = nullptr);

struct RewriteOptions {
  size_t maxIterations = 10;       // sweeps over the graph at most
  PassContext* ctx = nullptr;      // receives the declines of the last sweep
  std::string passName = "rules";  // names the pass in declines
  // Makes (and logs) the edits; when null, an unlogged rewriter of the
  // driver's own does (tests that drive patterns without a pass).
  ir::Rewriter* rewriter = nullptr;
};

struct RewriteStats {
  size_t rewrites = 0;
  std::vector<size_t> perRule;  // in rule order
  size_t sweeps = 0;
  bool hitIterationCap = false;  // the last sweep still changed the graph
};

// The worklist driver. Each sweep walks every node of every block once, in
// program order, filtering on the rules' anchor targets; at each node the
// first rule (in order) whose match passes every check is applied. Sweeps
// repeat until one changes nothing or `maxIterations` ran. A sweep costs time
// linear in the number of nodes (plus the matches' own size). Declines of the
// last sweep are reported to `options.ctx`, so a node declined and later
// rewritten is not reported.
RewriteStats applyRules(ir::Graph& graph, const std::vector<RewriteRule>& rules,
                        const RewriteOptions& options = {});
// One rule; returns the number of rewrites.
size_t applyRule(ir::Graph& graph, const RewriteRule& rule, const RewriteOptions& options = {});

}  // namespace ptopt::rewriters
