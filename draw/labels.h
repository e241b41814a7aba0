// Label text of drawings: what a DOT node says about an IR node.
//
//  - The op's short name (`conv2d`), the module it came from when that is not
//    the enclosing box's, key literals, the constants read, the output's
//    dtype / shape, a `[CL]` badge for channels-last, and the number of users
//    when it is more than one.
//  - Key literals: conv (ir::ConvOp): kernel 3×3 (from the weight's shape),
//    s stride, p padding, d dilation, op output padding, g groups, each left
//    out at its default; pools: k/s/p; adaptive pools: → output size;
//    `aten::to`: → dtype / memory format; prim::Loop: for / while and its
//    trip count; norms: `train` and a non-default eps; otherwise up to three
//    literal arguments that differ from the schema default (by name).
//  - Literal lists (`prim::ListConstruct(1, 1)`, as imported graphs hold
//    them) read as the list they build.
// Arguments are read by their schema names (ir/op_views.h), never by
// position. Everything here returns plain text except where it says HTML
// (GraphViz's HTML-like labels).
#pragma once

#include "ir/ir.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::draw {

// `layer1.0.conv1` <-> {"layer1", "0", "conv1"}.
std::vector<std::string> splitDots(const std::string& s);
std::string joinDots(const std::vector<std::string>& segs, size_t count);

// Escapes &, <, >, " for HTML-like labels.
std::string html(const std::string& s);
std::string truncateText(const std::string& s, size_t n);  // "…" when cut
std::vector<std::string> splitLines(const std::string& s);

// `aten::conv2d` -> `conv2d`; placeholders, outputs ("output", or "yield" in a
// nested block) and constants by role.
std::string shortOp(const ir::Node* n);
std::string dtypeShort(c10::ScalarType t);                 // f32, bf16, i64, ...
std::string shapeText(const std::vector<int64_t>& shape);  // 1×3×224×224, "scalar"
std::string bytesText(size_t bytes);                       // 46.8 MB
// A literal in a few characters (dtypes short, `CL` for channels-last, lists
// compact, long text cut).
std::string literalShort(const ir::Literal& l);

// The module a constant belongs to: `layer1.0.conv1.weight.bnfold` ->
// `layer1.0.conv1`; anonymous constants (`const.x`) belong to none.
std::string constantModule(const std::string& name);
// Whether an argument reads a get_attr's value.
bool readsConstant(const ir::Arg& a);
// The node's module scope, else the module of the first named constant it reads.
std::string nodeScope(const ir::Node* n);
// The shape of the constant a get_attr reads (from `constantsOf`'s table,
// else from the get_attr's metadata).
std::optional<std::vector<int64_t>> constantShape(const ir::Graph& constantsOf, const ir::Node* getAttr);
// A `prim::ListConstruct` of number literals: drawn inside its users' labels.
bool isLiteralList(const ir::Node* n);

// The key literal arguments of a call, short ("3×3 s2 p1", "k3 s2 p1").
// `constantsOf` gives the shapes of constant weights.
std::string keyLiterals(const ir::Graph& constantsOf, const ir::Node* n);

// Output metadata (HTML): "f32 1×64×32×32 [CL] · 2 users".
std::string metaLine(const ir::Value* v, size_t users);
size_t userCount(const ir::Node* n);

// Constants a node reads that are not drawn as nodes of their own, grouped by
// shape (HTML): "weight, bias <I>64</I>". Names are shown relative to
// `scope` (the node's module scope segments). Empty with `showConstants`.
std::string constantsLine(const ir::Graph& constantsOf, const ir::Node* n, const std::vector<std::string>& scope,
                          bool showConstants);

// The rows of a node's label (HTML, one row each): head (op, and `where` —
// its scope relative to the enclosing box — in the `muted` colour), key
// literals, constants, metadata.
std::vector<std::string> nodeLabelRows(const ir::Graph& constantsOf, const ir::Node* n,
                                       const std::vector<std::string>& scope, const std::string& where,
                                       bool showConstants, const char* muted);
// The rows of a block parameter's label (HTML).
std::vector<std::string> paramLabelRows(const ir::Value* param, const char* muted);

}  // namespace ptopt::draw
