// Op-count tables for `ptopt show` and the optimize summary.
#pragma once

#include "ir/ir.h"

#include <map>
#include <string>

namespace ptopt::tools {

// call_function targets (with overload) -> count, over all blocks.
std::map<std::string, size_t> countOps(const ir::Graph& g);
// A table of op counts; with `after`, two columns (before / after), changed
// rows marked.
std::string formatOpTable(const std::map<std::string, size_t>& before,
                          const std::map<std::string, size_t>* after = nullptr);

}  // namespace ptopt::tools
