#include "rewriters/dce.h"

#include "ir/dead_code.h"

namespace ptopt::rewriters {

PassResult DcePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  const size_t removed = ir::eliminateDeadCode(rw);
  r.changed = rw.changed();
  if (removed) r.count("removed", static_cast<int64_t>(removed));
  return r;
}

}  // namespace ptopt::rewriters
