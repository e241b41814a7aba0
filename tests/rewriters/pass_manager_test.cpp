// PassManager: fixpoint, instrumentation (print-after-all, print-changed,
// time-passes, bisect, verify-each) and error wrapping.
#include "ir/text.h"
#include "rewriters/pass_manager.h"
#include "tools/api.h"

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
  PassResult run(ir::Graph& g, PassContext&) override {
    PassResult r;
    for (ir::Node* n : g.block()->nodes()) {
      if (!n->is("aten::relu")) continue;
      n->output()->replaceAllUsesWith(n->argValue(0));
      n->destroy();
      r.changed = true;
      r.count("removed");
      break;
    }
    return r;
  }
};

// Breaks the IR (a use before its definition) to test --verify-each.
class BreakIR : public Pass {
 public:
  std::string name() const override { return "break-ir"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "moves the last node first"; }
  PassResult run(ir::Graph& g, PassContext&) override {
    Node* last = g.block()->outputNode()->prev();
    last->moveBefore(g.block()->first()->next());
    PassResult r;
    r.changed = true;
    return r;
  }
  using Node = ir::Node;
};

class Throws : public Pass {
 public:
  std::string name() const override { return "throws"; }
  std::string description() const override { return "test pass"; }
  std::string contract() const override { return "throws"; }
  PassResult run(ir::Graph&, PassContext&) override { throw std::runtime_error("boom"); }
};

PassRegistry testRegistry() {
  PassRegistry r;
  registerAllPasses(r);
  r.add([] { return std::make_unique<RemoveOneRelu>(); });
  r.add([] { return std::make_unique<BreakIR>(); });
  r.add([] { return std::make_unique<Throws>(); });
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
