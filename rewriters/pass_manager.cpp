#include "rewriters/pass_manager.h"

#include "ir/lint.h"
#include "ir/text.h"
#include "rewriters/diff.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <optional>
#include <fmt/format.h>
#include <iostream>
#include <map>

namespace ptopt::rewriters {

namespace {

// LibTorch's intra-op thread count set to one for a scope, and restored
// (PassEffects::computesFromData).
class OneIntraOpThread {
 public:
  OneIntraOpThread() : previous_(at::get_num_threads()) {
    if (previous_ != 1) at::set_num_threads(1);
  }
  ~OneIntraOpThread() {
    if (previous_ != 1) at::set_num_threads(previous_);
  }
  OneIntraOpThread(const OneIntraOpThread&) = delete;
  OneIntraOpThread& operator=(const OneIntraOpThread&) = delete;

 private:
  int previous_;
};

}  // namespace

struct PassManager::Step {
  std::unique_ptr<Pass> pass;  // or a fixpoint:
  int maxIterations = 0;
  std::vector<Step> children;
};


PassManager::PassManager(const PassRegistry& registry, const Pipeline& pipeline, Instrumentation inst)
    : pipeline_(pipeline), inst_(std::move(inst)) {
  steps_ = buildSteps(pipeline.elements, registry);
}

PassManager::~PassManager() = default;

RunReport PassManager::run(ir::Model& model, PassContext& ctx) {
  RunReport report;
  for (auto& [name, graph] : model.methods) {
    RunReport r = run(*graph, ctx, name);
    report.executions.insert(report.executions.end(), r.executions.begin(), r.executions.end());
    report.fixpoints.insert(report.fixpoints.end(), r.fixpoints.begin(), r.fixpoints.end());
  }
  return report;
}

RunReport PassManager::run(ir::Graph& graph, PassContext& ctx, const std::string& method) {
  RunReport report;
  if (inst_.verifyEach) ir::lintOrThrow(graph, "IR lint failed before the first pass (method " + method + ")");
  runSteps(steps_, graph, ctx, method, report);
  return report;
}

bool PassManager::runSteps(const std::vector<Step>& steps, ir::Graph& g, PassContext& ctx,
                           const std::string& method, RunReport& report) {
  bool changed = false;
  for (const Step& step : steps) {
    if (step.pass) {
      changed |= runPass(*step.pass, g, ctx, method, report);
      continue;
    }
    // fixpoint: repeat until a round changes nothing or the cap is reached.
    FixpointRun fp{stepNames(step.children), method, 0, step.maxIterations, false};
    for (int round = 0; round < step.maxIterations; ++round) {
      ++fp.rounds;
      if (!runSteps(step.children, g, ctx, method, report)) {
        fp.converged = true;
        break;
      }
      changed = true;
    }
    report.fixpoints.push_back(std::move(fp));
  }
  return changed;
}

bool PassManager::runPass(Pass& pass, ir::Graph& g, PassContext& ctx, const std::string& method,
                          RunReport& report) {
  std::ostream& out = inst_.out ? *inst_.out : std::cerr;
  PassExecution exec;
  exec.index = ++executions_;
  exec.pass = pass.name();
  exec.method = method;
  if (inst_.bisectLimit >= 0) {
    const bool run = static_cast<long>(exec.index) <= inst_.bisectLimit;
    out << fmt::format("BISECT: {} pass ({}) {} on method {}\n", run ? "running" : "NOT running",
                       exec.index, exec.pass, method);
    if (!run) {
      report.executions.push_back(exec);
      return false;
    }
  }
  if (inst_.onPassStart) inst_.onPassStart(exec.pass, exec.index);
  const bool wantChanges = inst_.printChanged || inst_.wantChanges || inst_.checkEditLog;
  if (wantChanges) ctx.edits.setKeepText(true);
  const size_t firstEdit = ctx.edits.size();
  const std::string before = inst_.checkEditLog ? ir::printGraph(g) : "";
  const auto start = std::chrono::steady_clock::now();
  try {
    std::optional<OneIntraOpThread> deterministic;
    if (pass.effects(ctx).computesFromData) deterministic.emplace();
    exec.result = pass.run(g, ctx);
  } catch (const PassError&) {
    throw;
  } catch (const std::exception& e) {
    throw PassError(fmt::format("pass '{}' failed on method '{}' (execution {}): {}", exec.pass, method,
                                exec.index, ir::torchErrorMessage(e)));
  }
  exec.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  exec.ran = true;
  exec.changed = exec.result.changed;
  exec.edits = ctx.edits.size() - firstEdit;
  if (wantChanges) exec.changes = std::make_shared<ir::ChangeSet>(ctx.edits.changesSince(firstEdit));
  if (inst_.verifyEach)
    ir::lintOrThrow(g, fmt::format("IR lint failed after pass '{}' (execution {}, method {})", exec.pass,
                                   exec.index, method));
  if (inst_.checkEditLog) checkEditLog(exec, g, before);
  if (inst_.printAfterAll)
    out << fmt::format("// ----- IR after {} (execution {}, method {}) -----\n{}", exec.pass, exec.index,
                       method, ir::printGraph(g));
  if (inst_.printChanged && exec.changed) {
    const std::string diff =
        exec.edits == 0 ? "(the pass edited the graph without logging its edits: no diff)\n"
                        : ir::unifiedDiffOfChanges(g, *exec.changes, "before " + exec.pass, "after " + exec.pass);
    out << fmt::format("// ----- {} changed method {} (execution {}) {} -----\n{}", exec.pass, method,
                       exec.index, exec.result.countersText(), diff);
  }
  report.executions.push_back(exec);
  if (inst_.onPassEnd) inst_.onPassEnd(exec, g);
  return exec.changed;
}

void PassManager::checkEditLog(const PassExecution& exec, const ir::Graph& g, const std::string& before) {
  const std::string after = ir::printGraph(g);
  const std::string where = fmt::format("pass '{}' (execution {}, method {})", exec.pass, exec.index, exec.method);
  if (exec.changed != (exec.edits != 0))
    throw PassError(fmt::format("{} reported changed={} but logged {} edits: passes edit through ir::Rewriter and "
                                "report rw.changed()",
                                where, exec.changed, exec.edits));
  if (after == before && exec.edits == 0) return;
  const std::string diff = ir::unifiedDiffOfChanges(g, *exec.changes, "before", "after");
  const std::string rebuilt = ir::applyDiffInReverse(after, diff);
  if (rebuilt != before)
    throw PassError(fmt::format("{} changed the graph in ways its edit log does not describe (an edit made around "
                                "ir::Rewriter?)\n{}",
                                where, unifiedDiff(before, rebuilt, "the graph before the pass",
                                                   "as rebuilt from the edit log")));
}

std::string PassManager::stepNames(const std::vector<Step>& steps) {
  std::string out;
  for (const Step& s : steps)
    out += (out.empty() ? "" : ",") + (s.pass ? s.pass->name() : "fixpoint(" + stepNames(s.children) + ")");
  return out;
}

std::vector<PassManager::Step> PassManager::buildSteps(const std::vector<PipelineElement>& elements,
                                                      const PassRegistry& registry) {
  std::vector<PassManager::Step> steps;
  for (const auto& e : elements) {
    PassManager::Step step;
    if (e.isFixpoint()) {
      step.maxIterations = kDefaultFixpointIterations;
      for (const auto& [k, v] : e.options)
        if (k == "max-iter") step.maxIterations = std::stoi(v);
      step.children = buildSteps(e.children, registry);
    } else {
      std::map<std::string, std::string> options(e.options.begin(), e.options.end());
      step.pass = registry.create(e.name, options);
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

bool RunReport::changed() const {
  for (const auto& e : executions)
    if (e.changed) return true;
  return false;
}

std::string RunReport::timingTable() const {
  struct Row { size_t runs = 0, changed = 0; double ms = 0; };
  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  double total = 0;
  for (const auto& e : executions) {
    if (!e.ran) continue;
    if (!rows.count(e.pass)) order.push_back(e.pass);
    Row& r = rows[e.pass];
    ++r.runs;
    r.changed += e.changed;
    r.ms += e.ms;
    total += e.ms;
  }
  size_t width = 4;
  for (const auto& n : order) width = std::max(width, n.size());
  std::string out = fmt::format("  {:<{}}  {:>5}  {:>7}  {:>10}  {:>6}\n", "pass", width, "runs", "changed", "time", "share");
  for (const auto& n : order) {
    const Row& r = rows[n];
    out += fmt::format("  {:<{}}  {:>5}  {:>7}  {:>8.2f}ms  {:>5.1f}%\n", n, width, r.runs, r.changed, r.ms,
                       total > 0 ? 100 * r.ms / total : 0.0);
  }
  out += fmt::format("  {:<{}}  {:>5}  {:>7}  {:>8.2f}ms  {:>5.1f}%\n", "total", width, executions.size(), "", total, 100.0);
  return out;
}

std::string RunReport::countersSummary() const {
  std::vector<std::string> order;
  std::map<std::string, PassResult> sums;
  for (const auto& e : executions) {
    if (!e.ran) continue;
    if (!sums.count(e.pass)) order.push_back(e.pass);
    for (const auto& [k, v] : e.result.counters) sums[e.pass].count(k, v);
  }
  std::string out;
  for (const auto& n : order)
    if (!sums[n].counters.empty()) out += "  " + n + ": " + sums[n].countersText() + "\n";
  // The rounds of each fixpoint group, the most any method needed.
  std::vector<std::string> groups;
  std::map<std::string, FixpointRun> most;
  for (const auto& f : fixpoints) {
    if (!most.count(f.passes)) groups.push_back(f.passes);
    FixpointRun& m = most[f.passes];
    if (f.rounds > m.rounds || (f.rounds == m.rounds && !f.converged)) m = f;
  }
  for (const auto& g : groups) {
    const FixpointRun& f = most[g];
    if (f.rounds <= 1 && f.converged) continue;  // nothing changed: the first round was the last
    out += fmt::format("  fixpoint({}): {} rounds{}\n", g, f.rounds,
                       f.converged ? "" : fmt::format(" (stopped at max-iter={} while still changing)", f.maxIterations));
  }
  return out;
}

}  // namespace ptopt::rewriters
