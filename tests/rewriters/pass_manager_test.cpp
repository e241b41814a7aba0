// PassManager: fixpoint, instrumentation (print-after-all, print-changed,
// time-passes, bisect, verify-each, the edit-log check) and error wrapping.
// The test passes edit through ir::Rewriter like real ones (one on purpose
// does not, to test the check).
#include "ir/op_views.h"
#include "ir/text.h"
#include "rewriters/pass_manager.h"
#include "api/api.h"

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <sstream>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

// Removes one aten::relu per run (so a fixpoint needs several rounds).
class RemoveOneRelu : public Pass {
 public:
  std::string name() const override { return "remove-one-relu"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "removes the first relu"; }
  PassResult run(ir::Graph& g, PassContext& ctx) override {
    PassResult r;
    ir::Rewriter rw(g, ctx.edits, name());
    for (ir::Node* n : g.block()->nodes()) {
      if (!n->is("aten::relu")) continue;
      rw.replace(n, ir::OpView::of(n).value("self"));
      r.count("removed");
      break;
    }
    r.changed = rw.changed();
    return r;
  }
};

// Breaks the IR (a use before its definition) to test --verify-each.
class BreakIR : public Pass {
 public:
  std::string name() const override { return "break-ir"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "moves the last node first"; }
  PassResult run(ir::Graph& g, PassContext& ctx) override {
    ir::Rewriter rw(g, ctx.edits, name());
    Node* last = g.block()->outputNode()->prev();
    rw.moveBefore(last, g.block()->first()->next());
    PassResult r;
    r.changed = rw.changed();
    return r;
  }
  using Node = ir::Node;
};

// Removes one relu like remove-one-relu, but around the rewriter: the edit
// is not logged.
class EditsAroundRewriter : public Pass {
 public:
  std::string name() const override { return "edits-around-rewriter"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "removes the first relu without logging it"; }
  PassResult run(ir::Graph& g, PassContext&) override {
    PassResult r;
    for (ir::Node* n : g.block()->nodes()) {
      if (!n->is("aten::relu")) continue;
      n->output()->replaceAllUsesWith(ir::OpView::of(n).value("self"));
      n->destroy();
      r.changed = true;
      break;
    }
    return r;
  }
};

// Logs one edit but reports that nothing changed.
class ChangedButSaysNot : public Pass {
 public:
  std::string name() const override { return "changed-but-says-not"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "renames the first relu's result, reports unchanged"; }
  PassResult run(ir::Graph& g, PassContext& ctx) override {
    ir::Rewriter rw(g, ctx.edits, name());
    for (ir::Node* n : g.block()->nodes())
      if (n->is("aten::relu")) {
        rw.setName(n->output(), "renamed");
        break;
      }
    return unchanged();
  }
};

class Throws : public Pass {
 public:
  std::string name() const override { return "throws"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "throws"; }
  PassResult run(ir::Graph&, PassContext&) override { throw std::runtime_error("boom"); }
};

// Records the intra-op thread count it runs at; declares (or not) that it
// computes from data.
template <bool FromData>
class SeesThreads : public Pass {
 public:
  explicit SeesThreads(int* seen) : seen_(seen) {}
  std::string name() const override { return FromData ? "sees-threads-from-data" : "sees-threads"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "records at::get_num_threads()"; }
  PassResult run(ir::Graph&, PassContext&) override {
    if (seen_) *seen_ = at::get_num_threads();
    return unchanged();
  }
  PassEffects effects(const PassContext&) const override {
    PassEffects e;
    e.computesFromData = FromData;
    return e;
  }

 private:
  int* seen_;
};

PassRegistry testRegistry() {
  PassRegistry r;
  registerAllPasses(r);
  r.add([] { return std::make_unique<RemoveOneRelu>(); });
  r.add([] { return std::make_unique<BreakIR>(); });
  r.add([] { return std::make_unique<Throws>(); });
  r.add([] { return std::make_unique<EditsAroundRewriter>(); });
  r.add([] { return std::make_unique<ChangedButSaysNot>(); });
  return r;
}

std::unique_ptr<ir::Graph> threeRelus() {
  return ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %b : Tensor = aten::relu(%a)\n"
      "  %c : Tensor = aten::relu(%b)\n"
      "  output(%c)\n");
}

}  // namespace

TEST_CASE("fixpoint repeats until nothing changes or max-iter") {
  auto reg = testRegistry();
  auto g = threeRelus();
  PassContext ctx;
  PassManager pm(reg, parsePipeline("fixpoint{max-iter=10}(remove-one-relu)", reg));
  RunReport report = pm.run(*g, ctx);
  CHECK(report.executions.size() == 4);  // three changes, then one quiet round
  CHECK(g->str().find("relu") == std::string::npos);

  auto g2 = threeRelus();
  PassManager capped(reg, parsePipeline("fixpoint{max-iter=2}(remove-one-relu)", reg));
  CHECK(capped.run(*g2, ctx).executions.size() == 2);
  CHECK(g2->str().find("relu") != std::string::npos);
}

TEST_CASE("print-changed prints a unified diff only for passes that changed something") {
  auto reg = testRegistry();
  auto g = threeRelus();
  std::ostringstream out;
  Instrumentation inst;
  inst.printChanged = true;
  inst.out = &out;
  PassContext ctx;
  PassManager(reg, parsePipeline("dce,remove-one-relu", reg), inst).run(*g, ctx);
  const std::string text = out.str();
  CHECK(text.find("dce") == std::string::npos);
  CHECK_THAT(text, Catch::Contains("remove-one-relu changed method forward (execution 2) removed=1"));
  CHECK_THAT(text, Catch::Contains("--- before remove-one-relu"));
  CHECK_THAT(text, Catch::Contains("-  %a : Tensor = aten::relu(%x)"));
  CHECK_THAT(text, Catch::Contains("+  %b : Tensor = aten::relu(%x)"));
  CHECK_THAT(text, Catch::Contains("@@ -1,5 +1,4 @@"));
}

TEST_CASE("print-after-all prints the IR after every pass") {
  auto reg = testRegistry();
  auto g = threeRelus();
  std::ostringstream out;
  Instrumentation inst;
  inst.printAfterAll = true;
  inst.out = &out;
  PassContext ctx;
  PassManager(reg, parsePipeline("dce,remove-one-relu", reg), inst).run(*g, ctx);
  CHECK_THAT(out.str(), Catch::Contains("IR after dce (execution 1, method forward)"));
  CHECK_THAT(out.str(), Catch::Contains("IR after remove-one-relu (execution 2, method forward)"));
}

TEST_CASE("bisect-limit runs only the first N executions and says so") {
  auto reg = testRegistry();
  auto g = threeRelus();
  std::ostringstream out;
  Instrumentation inst;
  inst.bisectLimit = 2;
  inst.out = &out;
  PassContext ctx;
  RunReport report = PassManager(reg, parsePipeline("fixpoint{max-iter=10}(remove-one-relu)", reg), inst).run(*g, ctx);
  CHECK_THAT(out.str(), Catch::Contains("BISECT: running pass (1) remove-one-relu on method forward"));
  CHECK_THAT(out.str(), Catch::Contains("BISECT: running pass (2) remove-one-relu"));
  CHECK_THAT(out.str(), Catch::Contains("BISECT: NOT running pass (3) remove-one-relu"));
  // One relu left: exactly two executions ran.
  size_t relus = 0;
  g->walk([&](ir::Node* n) { relus += n->is("aten::relu"); });
  CHECK(relus == 1);
}

TEST_CASE("time-passes gives a table with runs time and share") {
  auto reg = testRegistry();
  auto g = threeRelus();
  PassContext ctx;
  RunReport report = PassManager(reg, parsePipeline("fixpoint{max-iter=10}(remove-one-relu,dce)", reg)).run(*g, ctx);
  const std::string table = report.timingTable();
  CHECK_THAT(table, Catch::Contains("remove-one-relu"));
  CHECK_THAT(table, Catch::Contains("share"));
  CHECK_THAT(table, Catch::Contains("total"));
  CHECK_THAT(report.countersSummary(), Catch::Contains("remove-one-relu: removed=3"));
}

TEST_CASE("verify-each names the pass that broke the IR") {
  auto reg = testRegistry();
  auto g = threeRelus();
  Instrumentation inst;
  inst.verifyEach = true;
  PassContext ctx;
  PassManager pm(reg, parsePipeline("dce,break-ir", reg), inst);
  CHECK_THROWS_WITH(pm.run(*g, ctx), Catch::Contains("IR lint failed after pass 'break-ir' (execution 2"));
}

TEST_CASE("an exception inside a pass is reported with the pass name") {
  auto reg = testRegistry();
  auto g = threeRelus();
  PassContext ctx;
  PassManager pm(reg, parsePipeline("dce,throws", reg));
  CHECK_THROWS_AS(pm.run(*g, ctx), PassError);
  CHECK_THROWS_WITH(pm.run(*g, ctx), Catch::Contains("pass 'throws' failed on method 'forward'") &&
                                         Catch::Contains("boom"));
}

TEST_CASE("print-changed prints the diff from the edit log, which rebuilds the graph before") {
  auto reg = testRegistry();
  auto g = threeRelus();
  const std::string before = g->str();
  std::ostringstream out;
  Instrumentation inst;
  inst.printChanged = true;
  inst.checkEditLog = true;
  inst.out = &out;
  PassContext ctx;
  RunReport report = PassManager(reg, parsePipeline("remove-one-relu", reg), inst).run(*g, ctx);
  REQUIRE(report.executions.size() == 1);
  const PassExecution& e = report.executions[0];
  CHECK(e.edits == 2);  // %b reads %x now; %a erased
  REQUIRE(e.changes);
  const std::string diff = ir::unifiedDiffOfChanges(*g, *e.changes, "before", "after");
  CHECK(ir::applyDiffInReverse(g->str(), diff) == before);
  CHECK_THAT(ctx.edits.summary(), Catch::Contains("remove-one-relu: erase=1 modify=1"));
}

TEST_CASE("checkEditLog names a pass that edits around the Rewriter") {
  auto reg = testRegistry();
  Instrumentation inst;
  inst.checkEditLog = true;
  PassContext ctx;
  {
    auto g = threeRelus();
    PassManager pm(reg, parsePipeline("remove-one-relu,edits-around-rewriter", reg), inst);
    CHECK_THROWS_AS(pm.run(*g, ctx), PassError);
  }
  {
    auto g = threeRelus();
    PassManager pm(reg, parsePipeline("remove-one-relu,edits-around-rewriter", reg), inst);
    CHECK_THROWS_WITH(pm.run(*g, ctx), Catch::Contains("pass 'edits-around-rewriter' (execution 2") &&
                                           Catch::Contains("logged 0 edits"));
  }
  {
    auto g = threeRelus();
    PassManager pm(reg, parsePipeline("changed-but-says-not", reg), inst);
    CHECK_THROWS_WITH(pm.run(*g, ctx), Catch::Contains("pass 'changed-but-says-not'") &&
                                           Catch::Contains("reported changed=false but logged"));
  }
  // Without the check the same passes run.
  auto g = threeRelus();
  PassManager unchecked(reg, parsePipeline("edits-around-rewriter", reg));
  CHECK(unchecked.run(*g, ctx).changed());
}

TEST_CASE("a pass that computes from data runs at one intra-op thread, and the count is restored") {
  int fromData = 0, plain = 0;
  PassRegistry r;
  r.add([&] { return std::make_unique<SeesThreads<true>>(&fromData); });
  r.add([&] { return std::make_unique<SeesThreads<false>>(&plain); });
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  auto g = threeRelus();
  PassContext ctx;
  PassManager(r, parsePipeline("sees-threads-from-data,sees-threads", r)).run(*g, ctx, "forward");
  CHECK(fromData == 1);
  CHECK(plain == 2);
  CHECK(at::get_num_threads() == 2);
  at::set_num_threads(before);
}
