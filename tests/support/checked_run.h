// Pass tests run their passes with Instrumentation::checkEditLog on: the pass
// manager re-prints the graph after each pass and checks that the text
// before, rebuilt from the pass's edit log, equals the real text before, and
// that the pass reported `changed` exactly when it logged edits. A pass that
// edits around ir::Rewriter fails the test with a PassError naming it. The
// IR is also linted after every pass (verifyEach).
#pragma once

#include "tests/support/pass_test.h"

#include <map>

namespace ptopt::test {

inline rewriters::Instrumentation checkedInstrumentation() {
  rewriters::Instrumentation inst;
  inst.checkEditLog = true;
  inst.verifyEach = true;
  return inst;
}

inline rewriters::RunReport runChecked(ir::Graph& g, const std::string& pipeline,
                                       rewriters::PassContext* ctx = nullptr) {
  rewriters::PassContext local;
  rewriters::PassManager pm(defaultRegistry(), parsePipelineOrPreset(pipeline), checkedInstrumentation());
  return pm.run(g, ctx ? *ctx : local);
}

inline rewriters::RunReport runChecked(ir::Model& m, const std::string& pipeline,
                                       rewriters::PassContext* ctx = nullptr) {
  rewriters::PassContext local;
  rewriters::PassManager pm(defaultRegistry(), parsePipelineOrPreset(pipeline), checkedInstrumentation());
  return pm.run(m, ctx ? *ctx : local);
}

// Runs one registered pass, configured with `options`, through a PassManager
// with the check on; returns its result (declines land in `ctx`).
inline rewriters::PassResult runPassChecked(ir::Graph& g, const std::string& pass, rewriters::PassContext& ctx,
                                            const std::map<std::string, std::string>& options = {}) {
  std::string text = pass;
  for (const auto& [k, v] : options) {
    const bool bare = !v.empty() && v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                        "0123456789._-") == std::string::npos;
    text += (text == pass ? "{" : ",") + k + "=" + (bare ? v : "\"" + v + "\"");
  }
  if (!options.empty()) text += "}";
  rewriters::PassManager pm(defaultRegistry(), rewriters::parsePipeline(text, defaultRegistry()),
                            checkedInstrumentation());
  return pm.run(g, ctx).executions.at(0).result;
}

// Edits a report's executions logged, over all passes.
inline size_t loggedEdits(const rewriters::RunReport& r) {
  size_t n = 0;
  for (const auto& e : r.executions) n += e.edits;
  return n;
}

}  // namespace ptopt::test
