// Runs a pipeline over a model's graphs, with the debugging instruments of
// LLVM/XLA pass managers: print the IR after every pass or only the changes
// (as a unified diff), time passes, stop after N pass executions (bisect a
// bad result), lint the IR before and after every pass.
#pragma once

#include "ir/model.h"
#include "rewriters/pipeline.h"

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace ptopt::rewriters {

struct PassExecution;

struct Instrumentation {
  bool printAfterAll = false;
  bool printChanged = false;
  bool timePasses = false;  // the table is in the report; the CLI prints it
  bool verifyEach = false;
  // Checks after every pass that its edit log describes the whole change
  // (the IR text before, rebuilt from the log's diff, equals the text
  // printed before the pass) and that it reported `changed` exactly when it
  // logged edits; a PassError names a pass that edits around ir::Rewriter.
  // On with --verify-each and in the tests.
  bool checkEditLog = false;
  // Fill PassExecution::changes (for drawings).
  bool wantChanges = false;
  long bisectLimit = -1;  // < 0: run everything
  std::ostream* out = nullptr;  // instrumentation output (default std::cerr)
  // Called before each pass execution (progress display).
  std::function<void(const std::string& pass, size_t execution)> onPassStart;
  // Called after each pass execution that ran (numerics checks with
  // --verify-each, drawings with --dot-dir). May throw to stop the run.
  std::function<void(const PassExecution& exec, const ir::Graph& graph)> onPassEnd;
};

struct PassExecution {
  size_t index = 0;  // 1-based, over the whole run
  std::string pass;
  std::string method;
  bool ran = false;
  bool changed = false;
  double ms = 0;
  PassResult result;
  size_t edits = 0;  // edits the pass logged
  // What the pass did, node by node; only with Instrumentation::wantChanges
  // or printChanged.
  std::shared_ptr<const ir::ChangeSet> changes;
};

// One run of a fixpoint{...}(...) group on one method.
struct FixpointRun {
  std::string passes;  // the group's children, "fold-conv-bn,fold-linear-bn"
  std::string method;
  int rounds = 0;      // rounds that ran, the last one included (it changed nothing when converged)
  int maxIterations = 0;
  bool converged = false;  // false: stopped by the cap while still changing the graph
};

struct RunReport {
  std::vector<PassExecution> executions;
  std::vector<FixpointRun> fixpoints;
  bool changed() const;
  // pass | runs | changed | time | share, in first-execution order.
  std::string timingTable() const;
  // Counters summed per pass: "fold-conv-bn: folded=20", then the rounds of
  // every fixpoint that changed something:
  // "fixpoint(fold-conv-bn,...): 3 rounds (converged)".
  std::string countersSummary() const;
};

class PassManager {
 public:
  PassManager(const PassRegistry& registry, const Pipeline& pipeline, Instrumentation inst = {});
  ~PassManager();
  RunReport run(ir::Model& model, PassContext& ctx);
  RunReport run(ir::Graph& graph, PassContext& ctx, const std::string& method = "forward");
  const Pipeline& pipeline() const { return pipeline_; }

 private:
  struct Step;
  static std::string stepNames(const std::vector<Step>& steps);
  static std::vector<Step> buildSteps(const std::vector<PipelineElement>& elements,
                                      const PassRegistry& registry);
  bool runSteps(const std::vector<Step>& steps, ir::Graph& g, PassContext& ctx, const std::string& method,
                RunReport& report);
  bool runPass(Pass& pass, ir::Graph& g, PassContext& ctx, const std::string& method, RunReport& report);
  static void checkEditLog(const PassExecution& exec, const ir::Graph& g, const std::string& before);

  Pipeline pipeline_;
  Instrumentation inst_;
  std::vector<Step> steps_;
  size_t executions_ = 0;
};

}  // namespace ptopt::rewriters
