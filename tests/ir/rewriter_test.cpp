// ir::Rewriter and its edit log: every edit is logged with its pass, the
// log's net ChangeSet is right, and the unified diff built from the log
// rebuilds the text before exactly (applyDiffInReverse), also for erase
// chains, moves, nested blocks and signature changes.
#include "ir/rewriter.h"
#include "ir/text.h"

#include <catch2/catch.hpp>

using namespace ptopt::ir;

namespace {

const char* kRewriterGraph =
    "graph(%x : Tensor, %n : int, %c : bool):\n"
    "  %a : Tensor = aten::relu(%x)\n"
    "  %b : Tensor = aten::sigmoid(%a)\n"
    "  %c2 : Tensor = aten::tanh(%b)\n"
    "  %r : Tensor = prim::If(%c)\n"
    "    block0():\n"
    "      %r1 : Tensor = aten::relu(%c2)\n"
    "      %r2 : Tensor = aten::neg(%r1)\n"
    "      output(%r2)\n"
    "    block1():\n"
    "      output(%c2)\n"
    "  %d : Tensor = aten::add.Tensor(%r, %a, 1)\n"
    "  %e : Tensor = aten::mul.Tensor(%d, %d)\n"
    "  output(%e)\n";

Node* byOutput(Graph& g, const std::string& name) { return g.findValue(name)->node(); }

// Runs `edit` with a logging rewriter; checks the diff rebuilds the text before.
std::string editAndCheck(Graph& g, const std::function<void(Rewriter&)>& edit) {
  EditLog log;
  log.setKeepText(true);
  const std::string before = printGraph(g);
  Rewriter rw(g, log, "test-pass");
  edit(rw);
  const std::string after = printGraph(g);
  const ChangeSet cs = log.changesSince(0);
  const std::string diff = unifiedDiffOfChanges(g, cs, "before", "after");
  INFO("before:\n" << before << "after:\n" << after << "diff:\n" << diff);
  CHECK(rw.changed());
  for (const Edit& e : log.edits()) CHECK(e.pass == "test-pass");
  CHECK(applyDiffInReverse(after, diff) == before);
  return diff;
}

}  // namespace

TEST_CASE("rewriter: replace logs the users and the erase, the diff reads like a text diff") {
  auto g = parseGraph(kRewriterGraph);
  const std::string diff = editAndCheck(*g, [&](Rewriter& rw) {
    rw.replace(byOutput(*g, "b"), g->findValue("a"));  // sigmoid gone, tanh reads %a
  });
  CHECK_THAT(diff, Catch::Contains("-  %b : Tensor = aten::sigmoid(%a)"));
  CHECK_THAT(diff, Catch::Contains("-  %c2 : Tensor = aten::tanh(%b)"));
  CHECK_THAT(diff, Catch::Contains("+  %c2 : Tensor = aten::tanh(%a)"));
  CHECK_THAT(diff, Catch::Contains("@@ -1,"));
}

TEST_CASE("rewriter: erasing a chain back to front keeps the removed lines in order") {
  auto g = parseGraph(kRewriterGraph);
  editAndCheck(*g, [&](Rewriter& rw) {
    Node* e = byOutput(*g, "e");
    Node* d = byOutput(*g, "d");
    rw.replaceAllUsesWith(e->output(), g->findValue("x"));
    rw.erase(e);
    rw.erase(d);  // its anchor (e) was erased first
    rw.erase(byOutput(*g, "r"));
  });
  auto g2 = parseGraph(kRewriterGraph);
  editAndCheck(*g2, [&](Rewriter& rw) {
    // front to back: a middle node, then the one before it
    rw.replace(byOutput(*g2, "c2"), g2->findValue("b"));
    rw.replace(byOutput(*g2, "b"), g2->findValue("a"));
  });
}

TEST_CASE("rewriter: inserts, moves, nested blocks and the signature") {
  auto g = parseGraph(kRewriterGraph);
  const std::string diff = editAndCheck(*g, [&](Rewriter& rw) {
    Node* r2 = byOutput(*g, "r2");
    Value* y = rw.call(r2, "aten::abs", {g->findValue("r1")});
    rw.setArg(r2, 0, y);
    rw.moveBefore(byOutput(*g, "c2"), byOutput(*g, "b"));  // tanh reads %b: only the text order matters here
    TensorMeta m;
    m.dtype = c10::kFloat;
    rw.setMeta(g->findValue("x"), m);
    rw.setName(g->findValue("a"), "relu_out");
  });
  CHECK_THAT(diff, Catch::Contains("+      %"));  // the new abs, nested
  CHECK_THAT(diff, Catch::Contains("-graph(%x : Tensor, %n : int, %c : bool):"));
  CHECK_THAT(diff, Catch::Contains("+graph(%x : Tensor{float32}, %n : int, %c : bool):"));
}

TEST_CASE("rewriter: an inserted-then-erased node leaves no trace, constants are logged") {
  auto g = parseGraph(kRewriterGraph);
  EditLog log;
  log.setKeepText(true);
  Rewriter rw(*g, log, "p");
  Value* t = rw.call(byOutput(*g, "e"), "aten::abs", {g->findValue("e")});
  rw.erase(t->node());
  CHECK(log.changesSince(0).empty());
  CHECK(rw.changed());  // it still edited the graph (and said so)
  Value* k = rw.addConstant("k", at::ones({2}), byOutput(*g, "a"));
  CHECK(g->constants().contains(k->node()->target()));
  const std::string name = k->node()->target();
  rw.eraseConstantIfUnused(k);
  CHECK(g->findValue(name) == nullptr);
  CHECK(g->constants().contains(name));  // other methods may read it
  CHECK_THAT(log.summary(), Catch::Contains("p: erase=2 insert=2"));
}

TEST_CASE("rewriter: without keepText the log records edits but no texts") {
  auto g = parseGraph(kRewriterGraph);
  EditLog log;
  Rewriter rw(*g, log, "p");
  rw.replace(byOutput(*g, "b"), g->findValue("a"));
  REQUIRE(log.size() == 2);
  for (const Edit& e : log.edits()) CHECK(e.text.empty());
}
