// GraphViz DOT drawings of the IR, and of the difference between two graphs.
//
// Pure text: this library knows nothing of the GraphViz libraries
// (tools/render turns the text into SVG/PNG). Labels are draw/labels.h,
// colours draw/style.h, the legend draw/legend.h, node matching
// draw/matcher.h, a pass's edit log read for drawing draw/logged_changes.h. The drawing is a `digraph` laid out top to
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
// The nodes are paired by draw/matcher.h (two unrelated graphs).
//
// Drawings of one pass's changes (writeDotChanges) need no matching: the
// pass's edit log (ir::ChangeSet, ir/rewriter.h) names the nodes it added
// (green) and changed (yellow, with what changed against the node's text
// before, or its new provenance), and keeps the text of the nodes it removed:
// they are drawn from that text, dashed grey with their old label, beside the
// node they stood before, connected to the producers and users whose value
// names still exist. Edges a changed node no longer has are dashed grey, new
// ones green. A changed constant (a get_attr whose tensor was replaced) marks
// the nodes that read it as changed. The legend's "before" column is the
// graph now with the log's changes undone (parameter bytes before are not
// known: "?").
#pragma once

#include "draw/legend.h"
#include "draw/matcher.h"
#include "draw/style.h"
#include "ir/ir.h"
#include "ir/rewriter.h"

#include <cstddef>
#include <string>
#include <vector>

namespace ptopt::draw {

struct DotOptions {
  int depth = -1;          // scope depth shown; deeper scopes collapse (< 1: no limit)
  size_t maxNodes = 500;   // collapse / truncate above this many drawn nodes
  bool showConstants = false;
  DotColorBy colorBy = DotColorBy::Op;
  bool clusters = true;    // boxes for module scopes
  bool legend = true;
  std::string title;       // first legend line (e.g. the file name)
  std::vector<std::string> notes;  // extra legend lines
};

std::string writeDot(const ir::Graph& g, const DotOptions& options = {});

// The difference between two graphs, paired by matchNodes.
std::string writeDotDiff(const ir::Graph& before, const ir::Graph& after, const DotOptions& options = {},
                         DiffCounts* counts = nullptr);

// `graph` after a pass, with the pass's changes from its edit log (see above).
std::string writeDotChanges(const ir::Graph& graph, const ir::ChangeSet& changes, const DotOptions& options = {},
                            DiffCounts* counts = nullptr);

}  // namespace ptopt::draw
