// The legend of a drawing (the graph's label, at the top) and its statistics.
//
//  - A drawing of one graph: the title, node count, parameter bytes (distinct
//    constant tensors read), casts and layout conversions (draw/style.h),
//    the twelve most frequent ops with their counts, the colour key (op
//    families, or the dtypes seen with --color-by dtype) and, when there is a
//    conv, how to read its key literals.
//  - A diff drawing: the title, the added/changed/removed key, a table of op
//    counts before → after with the changed kinds first (at most ten
//    unchanged kinds, then "N more op kinds unchanged"), nodes, casts,
//    layout conversions and parameter bytes before → after, and the numbers
//    of added, changed and removed nodes.
//  - Last, in red, when the drawing had to collapse scopes or leave nodes out
//    (--max-nodes), and any notes of the caller.
#pragma once

#include "draw/style.h"
#include "ir/ir.h"

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::draw {

struct DiffCounts {
  size_t added = 0, removed = 0, changed = 0;
};

// Legend statistics, exposed for tests and the CLI.
struct GraphStats {
  std::map<std::string, size_t> opCounts;  // short op name -> count (calls only)
  size_t nodes = 0;
  size_t casts = 0;
  size_t layoutConversions = 0;
  size_t parameterBytes = 0;  // distinct constant tensors read by the graph
};
GraphStats graphStats(const ir::Graph& g);

struct LegendInput {
  std::string title;                 // first line (default "graph")
  const ir::Graph* graph = nullptr;  // the graph drawn (`after` in a diff)
  DotColorBy colorBy = DotColorBy::Op;
  // Diff drawings: statistics of the graph before, and what changed.
  std::optional<GraphStats> before;
  bool beforeBytesKnown = true;      // false: the before column shows "?"
  DiffCounts counts;
  std::string limitNote;             // scopes collapsed to fit --max-nodes
  size_t omitted = 0;                // nodes not drawn at all
  size_t maxNodes = 0;
  std::vector<std::string> notes;    // extra lines (plain text)
};

// The legend as a GraphViz HTML-like label (`<<TABLE ...>>`).
std::string legendLabel(const LegendInput& in);

// One cell of a colour key (HTML).
std::string swatch(const std::string& fill, const std::string& line, const std::string& text,
                   const std::string& fontColour = "#000000");

}  // namespace ptopt::draw
