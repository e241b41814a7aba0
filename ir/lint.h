// Structural verifier for the IR ("lint").
//
// Checks, over every block: each argument value is defined before its use in
// the same block or an enclosing one (so block values never leak out of their
// scope); every use list entry points at a live node whose argument really is
// that value, and every value argument is in its value's use list; no value
// name is defined twice; placeholders only open the top-level block; each
// block ends with exactly one output node; get_attr names exist in the
// constant table; the data dependencies of each block are acyclic (Boost.Graph
// topological sort over the IR).
#pragma once

#include "ir/ir.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt::ir {

struct LintIssue {
  std::string message;
};

// Every problem found, in program order; empty when the graph is sound.
std::vector<LintIssue> lint(const Graph& g);

class LintError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Throws LintError listing every problem (prefixed by `context`).
void lintOrThrow(const Graph& g, const std::string& context = "");

}  // namespace ptopt::ir
