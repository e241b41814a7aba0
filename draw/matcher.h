// The general graph matcher: pairs the nodes of two unrelated graphs (two
// files, for `ptopt dot --diff`; a model before and after a whole pipeline),
// for diff drawings (draw/writer.h writeDotDiff). A pass's own changes need
// no matching: its edit log names the nodes (writeDotChanges).
//
// Node matching (matchNodes) works on two unrelated Graph objects (a graph
// and a clone taken before a pass, or two files), so it cannot use node
// identity. In order, each stage only pairing nodes still unmatched:
//  1. placeholders by position, the top-level output node, get_attr nodes by
//     constant name;
//  2. calls with the same operator and the same first output name, names
//     compared after mapping `_` to `.` (export writes `input.5` as
//     `input_5`);
//  3. calls with the same operator reading the same constants, where a
//     constant name derived by a pass (`conv1.weight.bnfold`) counts as the
//     name it came from (`conv1.weight`), when that pairing is unique;
//  4. propagation forward, in program order: a call whose value arguments
//     all come from matched nodes pairs with the unmatched call of the same
//     operator whose arguments come from their counterparts (ties broken by
//     equal literals, else left unmatched);
//  5. propagation backward, in reverse program order: an unmatched producer
//     of the i-th argument of a matched node pairs with the producer of the
//     i-th argument of its counterpart, when both have the same operator.
// Nodes still unmatched are added (in `after`) or removed (in `before`).
// A matched pair is "changed" when its overload, a literal argument or a
// constant it reads differs, or when a pass recorded a provenance on the
// `after` node that `before` lacks. A node that only reads a different
// producer is not: its new input edge is drawn green and the old one dashed
// grey (edges of `before` that are gone are drawn too).
#pragma once

#include "ir/ir.h"

#include <string>
#include <unordered_map>

namespace ptopt::draw {

// Matching of `after`'s nodes to `before`'s (see the contract above).
struct NodeMatching {
  std::unordered_map<const ir::Node*, const ir::Node*> afterToBefore;
  std::unordered_map<const ir::Node*, const ir::Node*> beforeToAfter;
  const ir::Node* before(const ir::Node* afterNode) const;
  const ir::Node* after(const ir::Node* beforeNode) const;
};
NodeMatching matchNodes(const ir::Graph& before, const ir::Graph& after);

// What changed between two versions of a node (empty: nothing), e.g.
// "weight = conv1.weight.bnfold", "stride [1] → [2]": the overload, the
// number of arguments, literal arguments (an int[N] `[k]` equals `[k, k]`; a
// list built by prim::ListConstruct of literals equals the literal list) and
// the constants read, by argument name. Reading a different producer is not
// a change.
std::string describeChange(const ir::Node& before, const ir::Node& after);
std::string describeChange(const ir::Node& before, const ir::Node& after, const NodeMatching& m);

}  // namespace ptopt::draw
