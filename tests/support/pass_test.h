// Helpers for pass tests: run a pipeline on IR text or on a fixture.
#pragma once

#include "ir/text.h"
#include "tests/support/fixtures.h"
#include "tools/api.h"

#include <string>

namespace ptopt::test {

// Runs `pipeline` on a graph and returns the report; declines are collected in ctx.
inline rewriters::RunReport runPipeline(ir::Graph& g, const std::string& pipeline,
                                        rewriters::PassContext* ctx = nullptr) {
  rewriters::PassContext local;
  rewriters::PassManager pm(defaultRegistry(), parsePipelineOrPreset(pipeline));
  return pm.run(g, ctx ? *ctx : local);
}

// Sum of a counter over a report's executions of `pass`.
inline int64_t counter(const rewriters::RunReport& r, const std::string& pass, const std::string& name) {
  int64_t total = 0;
  for (const auto& e : r.executions)
    if (e.pass == pass) total += e.result.counter(name);
  return total;
}

inline size_t countOps(const ir::Graph& g, const std::string& target) {
  size_t n = 0;
  g.walk([&](ir::Node* node) { n += node->isCall() && node->target() == target; });
  return n;
}

}  // namespace ptopt::test
