// GraphViz DOT drawings of the IR, and of the difference between two graphs.
//
// Pure text: this file knows nothing of the GraphViz libraries (tools/render
// turns the text into SVG/PNG). The drawing is a `digraph` laid out top to
// bottom:
//  - One DOT node per IR node: placeholders (house shapes), calls (rounded
//    boxes), block outputs and the graph output. get_attr constants are not
//    nodes by default: each constant is folded into the label of the nodes
//    that read it (name relative to the node's scope, and shape); with
//    `showConstants` they are small grey notes of their own. Block
//    parameters (a loop's counter and carried values) are small ellipses
//    inside their block.
//  - Node labels: the op's short name (`conv2d`), the module it came from
//    when that is not the enclosing box's, key literals (conv: kernel 3×3,
//    s stride, p padding, d dilation, g groups; pools: k/s/p; otherwise the
//    literal arguments that differ from the schema default), the constants
//    read, the output's dtype / shape and a `CL` badge for channels-last
//    when shape propagation recorded them, and the number of users when it
//    is more than one.
//  - Fill colour by op family (conv, linear, norm, activation, pooling,
//    elementwise, shape, cast/layout conversion) or, with ColorBy::Dtype, by
//    the output dtype.
//  - One edge per use of a value (a node reading the same value twice gets
//    two edges); edges from hidden constants are not drawn. Each nested
//    block's output node gets one dashed edge to the prim::If / prim::Loop
//    that owns it, which is drawn after (below) its blocks, as the point
//    where they join. So, with constants hidden:
//       DOT nodes = IR nodes - get_attr nodes + block parameters
//       DOT edges = value uses not reading a get_attr + nested blocks
//                   (+ invisible layout edges)
//    and with constants shown, every IR node and every use is drawn.
//    Literal lists (`prim::ListConstruct(1, 1)`, as imported graphs hold
//    them) count as constants: shown inside their users' labels (`s2 p1`).
//    A node in a block that reads nothing drawn (a RaiseException, a loop's
//    parameters) gets one invisible (`style=invis`) edge from the owner's
//    first drawn input, only to keep it next to its owner in the layout.
//  - Clusters by module scope: the node's TorchScript scope (`layer1.0`),
//    else the module prefix of the constants it reads (`layer1.0.conv1`
//    from `layer1.0.conv1.weight`). A scope gets a box when it holds two or
//    more nodes. Nested blocks are boxes of their own ("If then", "Loop
//    body").
//  - `depth` N collapses every scope deeper than N segments into one box per
//    N-segment prefix (`layer1` with its op counts); edges between collapsed
//    boxes are merged. When the drawing would have more than `maxNodes`
//    nodes the depth is lowered until it fits, and if even depth 1 does not
//    fit, only the first maxNodes nodes are drawn plus one "… N more" node;
//    the legend says which happened.
//  - A legend (the graph's label, at the top): node count, op counts, number
//    of casts (aten::to etc. with a dtype) and layout conversions
//    (contiguous, aten::to with a memory_format), parameter bytes.
//
// Diff drawings (writeDotDiff) draw the `after` graph plus the nodes of
// `before` that are gone: removed nodes dashed grey, added nodes green,
// changed nodes yellow (different arguments, constants or literals), each
// with its provenance when a pass recorded one (Node::provenance(), e.g.
// `conv1 ← fold(conv1, bn1)`). The legend shows op counts before → after.
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

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace ptopt::ir {

enum class DotColorBy { Op, Dtype };

struct DotOptions {
  int depth = -1;          // scope depth shown; deeper scopes collapse (< 1: no limit)
  size_t maxNodes = 500;   // collapse / truncate above this many drawn nodes
  bool showConstants = false;
  DotColorBy colorBy = DotColorBy::Op;
  bool clusters = true;    // boxes for module scopes
  bool legend = true;
  std::string title;       // first legend line (e.g. the file name)
};

// Parses "op" / "dtype"; nullopt otherwise.
std::optional<DotColorBy> dotColorByFromName(const std::string& name);

std::string writeDot(const Graph& g, const DotOptions& options = {});

// Matching of `after`'s nodes to `before`'s (see the contract above).
struct NodeMatching {
  std::unordered_map<const Node*, const Node*> afterToBefore;
  std::unordered_map<const Node*, const Node*> beforeToAfter;
  const Node* before(const Node* afterNode) const;
  const Node* after(const Node* beforeNode) const;
};
NodeMatching matchNodes(const Graph& before, const Graph& after);

// What changed for a matched pair (empty: nothing), e.g. "weight
// conv1.weight → conv1.weight.bnfold".
std::string describeChange(const Node& before, const Node& after, const NodeMatching& m);

struct DiffCounts {
  size_t added = 0, removed = 0, changed = 0;
};
std::string writeDotDiff(const Graph& before, const Graph& after, const DotOptions& options = {},
                         DiffCounts* counts = nullptr);

// Legend statistics, exposed for tests and the CLI.
struct GraphStats {
  std::map<std::string, size_t> opCounts;  // short op name -> count (calls only)
  size_t nodes = 0;
  size_t casts = 0;
  size_t layoutConversions = 0;
  size_t parameterBytes = 0;  // distinct constant tensors read by the graph
};
GraphStats graphStats(const Graph& g);

}  // namespace ptopt::ir
