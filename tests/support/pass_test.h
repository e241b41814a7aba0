// Helpers for pass tests: run a pipeline on IR text or on a fixture.
#pragma once

#include "ir/text.h"
#include "tests/support/fixtures.h"
#include "api/api.h"

#include <string>

namespace ptopt::test {

// A graph parsed from IR text, with the constant table its get_attr nodes read.
struct ParsedGraph {
  std::unique_ptr<ir::Graph> graph;
  std::shared_ptr<ir::ConstantTable> constants;
};
inline ParsedGraph parseWithConstants(const std::string& text,
                                      const std::vector<std::pair<std::string, at::Tensor>>& constants) {
  ParsedGraph p;
  p.constants = std::make_shared<ir::ConstantTable>();
  for (const auto& [name, value] : constants) p.constants->set(name, value);
  ir::ParseOptions opts;
  opts.constants = p.constants;
  p.graph = ir::parseGraph(text, opts);
  return p;
}

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

// Whether some decline recorded on `ctx` contains `text`.
inline bool declinedWith(const rewriters::PassContext& ctx, const std::string& text) {
  for (const auto& d : ctx.declines())
    if (d.find(text) != std::string::npos) return true;
  return false;
}
// Every decline recorded on `ctx`, a line each (for failure messages).
inline std::string allDeclines(const rewriters::PassContext& ctx) {
  std::string all;
  for (const auto& d : ctx.declines()) all += d + "\n";
  return all;
}

// A pass run with its context, for tests that look at declines.
struct PassRun {
  rewriters::PassResult result;
  rewriters::PassContext ctx;
  bool declined(const std::string& text) const { return declinedWith(ctx, text); }
};

// Exports `g` as a module's forward and runs it on `inputs`; runGraphOn:
// one tensor in, one tensor out.
inline c10::IValue runGraph(const ir::Graph& g, const std::vector<c10::IValue>& inputs) {
  ir::Model model;
  model.constants = g.sharedConstants();
  model.methods.emplace_back("forward", ir::cloneGraph(g));
  torch::jit::Module m = ir::exportModel(model);
  torch::NoGradGuard noGrad;
  return m.forward(inputs);
}
inline at::Tensor runGraphOn(const ir::Graph& g, const at::Tensor& x) { return runGraph(g, {x}).toTensor(); }

inline size_t countOps(const ir::Graph& g, const std::string& target) {
  size_t n = 0;
  g.walk([&](ir::Node* node) { n += node->isCall() && node->target() == target; });
  return n;
}

}  // namespace ptopt::test
