#include "rewriters/remove_dropout.h"

#include "ir/op_views.h"

namespace ptopt::rewriters {

bool isDropout(const ir::Node* n) {
  auto dropout = ir::DropoutOp::match(n);
  return dropout && dropout->input();
}

PassResult RemoveDropoutPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  std::vector<ir::Node*> dropouts;
  graph.walk([&](ir::Node* n) {
    if (isDropout(n)) dropouts.push_back(n);
  });
  for (ir::Node* n : dropouts) {
    rw.replace(n, ir::DropoutOp::match(n)->input());
    r.count("removed");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::rewriters
