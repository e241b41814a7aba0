// cse: common subexpression elimination.
//
// Contract. Two call_function nodes compute the same value when they have the
// same target and overload, the same arguments (the same Values; literals
// equal bit for bit, so 0.0 and -0.0 differ), the same node attributes and the
// same output types, and neither has a side effect (ir::hasSideEffects: in-place
// ops, random draws, raising, printing, unknown operators) nor nested blocks.
// Two get_attr nodes naming the same constant are the same value. The later
// node's outputs are replaced by the earlier node's and the later node is
// erased (counter `eliminated`).
//
// Scoping follows dominance: a node may reuse an equal node earlier in its own
// block or earlier in an enclosing block (a loop body reuses a value computed
// before the loop), never one from a sibling block (the other branch of an If)
// nor from a nested block. One walk in program order with a scoped hash table
// keyed on (target, arguments): linear in the number of nodes, and chains of
// equal nodes collapse in one run.
//
// Mutation safety (conservative, see MutationAnalysis): a node is left alone
// when any of its inputs or outputs may alias a value that an in-place or
// otherwise writing operator mutates anywhere in the graph (two reads of x
// around `x.add_()` stay separate; two `clone(x)` of which one is `relu_`'d
// stay separate), when identity is observed (`aten::__is__`), and two nodes are
// not merged when both results may reach the graph's outputs (the caller would
// receive one object twice). Graph inputs and outputs never change.
#pragma once

#include "rewriters/pass.h"

#include <cstddef>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ptopt::rewriters {

// A conservative may-alias and may-mutate analysis over one graph, shared by
// cse and canonicalize. Values of immutable types (int, float, bool, str,
// None, device, ...) are never mutated and never alias. Other values fall into
// classes (union-find) that over-approximate aliasing:
//  - a schema'd operator puts every argument and output that carries an alias
//    annotation (`Tensor(a)`, `Tensor(a!)`, `t(*)`) in one class; a few
//    operators that return their input despite an unannotated schema
//    (dropout with train=False, type_as) are treated as views too;
//  - a schema-less operator (ListConstruct, TupleUnpack, If, Loop, ...) puts
//    all its mutable arguments, outputs, block parameters and block outputs
//    in one class;
//  - containers of mutable elements (List[Tensor], tuples, dicts, objects)
//    and every annotated value of an operator that touches one share one
//    global class, since elements can be taken out of them anywhere.
// A class is mutated when one of its values is written by an argument marked
// `(a!)`, passed to an unknown effectful operator (prim::CallMethod, ...) or
// compared by identity (aten::__is__). A class escapes when one of its values
// is an output of the top-level block.
class MutationAnalysis {
 public:
  explicit MutationAnalysis(const ir::Graph& g);
  // True when `v` or a value that may alias it may be written (or its
  // identity observed). Always false for immutable types.
  bool mayBeMutated(const ir::Value* v) const;
  // True when `v` or a value that may alias it is a graph output.
  bool mayEscape(const ir::Value* v) const;

  // True for types whose values can be mutated in place (tensors, lists,
  // dicts, objects, tuples holding those).
  static bool isMutableType(const c10::TypePtr& t);

 private:
  size_t id(const ir::Value* v);
  size_t find(size_t i) const;
  void unite(size_t a, size_t b);
  size_t classOf(const ir::Value* v) const;  // npos when v was never seen
  void visit(const ir::Node* n);

  std::unordered_map<const ir::Value*, size_t> ids_;
  mutable std::vector<size_t> parent_;
  std::vector<const ir::Value*> written_, escaping_;
  std::unordered_set<size_t> mutatedRoots_, escapingRoots_;
  size_t containers_;  // the class of containers with mutable elements
};

class CsePass : public Pass {
 public:
  std::string name() const override { return "cse"; }
  std::string description() const override { return "common subexpression elimination (scoped, mutation-safe)"; }
  std::string contract() const override;
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

}  // namespace ptopt::rewriters
