// Runs a pipeline with Instrumentation::checkEditLog on: each pass must make
// every edit through ir::Rewriter and report `changed` exactly when it logged
// edits, or the PassManager throws a PassError naming it.
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

}  // namespace ptopt::test
