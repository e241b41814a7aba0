// `ptopt passes [NAME]`: every registered pass with its options and contract.
#include "tools/commands.h"

#include <iostream>

namespace ptopt::tools {

void registerPassesOptions(CLI::App& cmd, PassesOptions& o) {
  cmd.add_option("name", o.name, "Show one pass");
}

int runPasses(const PassesOptions& o) {
  std::cout << "no passes are registered yet\n";
  return o.name.empty() ? 0 : 2;
}

}  // namespace ptopt::tools
