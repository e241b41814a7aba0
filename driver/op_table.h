// Op-count tables for `ptopt show` and the optimize summary.
#pragma once

#include "ir/ir.h"
#include "ir/model.h"

#include <map>
#include <string>

namespace ptopt::driver {

// call_function targets (with overload) -> count, over all blocks.
std::map<std::string, size_t> countOps(const ir::Graph& g);
// A table of op counts; with `after`, two columns (before / after), changed
// rows marked.
// `colour`: changed rows in ANSI yellow (for a terminal).
std::string formatOpTable(const std::map<std::string, size_t>& before,
                          const std::map<std::string, size_t>* after = nullptr, bool colour = false);

}  // namespace ptopt::driver

namespace ptopt::driver {

// Bytes of the constant tensors the model's methods use (each counted once).
size_t parameterBytes(const ir::Model& model);

}  // namespace ptopt::driver
