// Fusion pass tests run their passes with Instrumentation::checkEditLog: the
// pass manager re-prints the graph after each pass and checks that the text
// before, rebuilt from the pass's edit log, equals the real text before, and
// that the pass reported `changed` exactly when it logged edits. A pass that
// edits around ir::Rewriter fails the test with a PassError.
#pragma once

#include "tests/support/pass_test.h"

namespace ptopt::test {

inline rewriters::Instrumentation editLogChecked() {
  rewriters::Instrumentation inst;
  inst.checkEditLog = true;
  return inst;
}

// test::runPipeline with the edit-log check on (only for pipelines of
// passes that edit through ir::Rewriter).
inline rewriters::RunReport runChecked(ir::Graph& g, const std::string& pipeline,
                                       rewriters::PassContext* ctx = nullptr) {
  rewriters::PassContext local;
  rewriters::PassManager pm(defaultRegistry(), parsePipelineOrPreset(pipeline), editLogChecked());
  return pm.run(g, ctx ? *ctx : local);
}

// Edits a report's executions logged, over all passes.
inline size_t loggedEdits(const rewriters::RunReport& r) {
  size_t n = 0;
  for (const auto& e : r.executions) n += e.edits;
  return n;
}

}  // namespace ptopt::test
