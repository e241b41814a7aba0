// `ptopt show IN.pt`: the IR text of every method and a table of op counts.
#include "ir/model_format.h"
#include "tools/commands.h"
#include "driver/op_table.h"
#include "session/session.h"

#include "ir/model.h"
#include "ir/text.h"

#include <iostream>

namespace ptopt::tools {

void registerShowOptions(CLI::App& cmd, ShowOptions& o) {
  cmd.add_option("input", o.input, "A TorchScript file or a torch.export .pt2")->required();
  cmd.add_option("--preserve-methods", o.preserveMethods, "Methods besides forward to show")->delimiter(',');
  cmd.add_flag("--ops", o.opsOnly, "Only the op-count table");
  cmd.footer(
      "Examples:\n"
      "  ptopt show model.pt              # the IR text of forward, then op counts\n"
      "  ptopt show --ops model.pt        # only the op-count table\n"
      "Exit codes: 0 success, 2 bad input.");
}

int runShow(const ShowOptions& o) {
  for (const MethodText& m : showModule(ir::loadRunnable(o.input), o.preserveMethods)) {
    if (!o.opsOnly) std::cout << "# method " << m.name << "\n" << m.text << "\n";
    std::cout << "# op counts (" << m.name << ", " << m.nodes << " nodes, " << m.constants << " constants)\n"
              << formatOpTable(m.opCounts);
  }
  return 0;
}

}  // namespace ptopt::tools
