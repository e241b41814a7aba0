// pattern matching and the rewrite driver: wildcards, literals,
// self-containment, overlap, cycles, side effects, nested blocks.
#include "ir/lint.h"
#include "ir/text.h"
#include "rewriters/pattern.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

const char* kDoubleRelu =
    "graph(%x : Tensor):\n"
    "  %a : Tensor = aten::relu(%x)\n"
    "  %b : Tensor = aten::relu(%a)\n"
    "  output(%b)\n";
const char* kSingleRelu =
    "graph(%x : Tensor):\n"
    "  %a : Tensor = aten::relu(%x)\n"
    "  output(%a)\n";
const char* kTanh =
    "graph(%x : Tensor):\n"
    "  %a : Tensor = aten::tanh(%x)\n"
    "  output(%a)\n";

size_t rewrite(ir::Graph& g, const RewriteRule& rule, PassContext* ctx = nullptr, size_t maxIterations = 10) {
  RewriteOptions opts;
  opts.ctx = ctx;
  opts.maxIterations = maxIterations;
  const size_t n = applyRule(g, rule, opts);
  ir::lintOrThrow(g, "after rewriting");
  return n;
}

}  // namespace

TEST_CASE("pattern rewrites a relu chain and keeps the output name") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %r2 : Tensor = aten::relu(%r1)\n"
      "  %t : Tensor = aten::tanh(%r2)\n"
      "  output(%t)\n");
  RewriteRule rule = makeRule("double-relu", kDoubleRelu, kSingleRelu);
  CHECK(rewrite(*g, rule) == 1);
  test::checkIR(g->str(), R"(
    # CHECK: %r2 : Tensor = aten::relu(%x)
    # CHECK-NOT: aten::relu
    # CHECK: aten::tanh(%r2)
  )");
}

TEST_CASE("pattern wildcards bind consistently") {
  auto g = ir::parseGraph(
      "graph(%a : Tensor, %b : Tensor):\n"
      "  %sq : Tensor = aten::mul.Tensor(%a, %a)\n"
      "  %ab : Tensor = aten::mul.Tensor(%a, %b)\n"
      "  %s : Tensor = aten::add.Tensor(%sq, %ab, 1)\n"
      "  output(%s)\n");
  RewriteRule square = makeRule("square",
                                "graph(%x : Tensor):\n"
                                "  %y : Tensor = aten::mul.Tensor(%x, %x)\n"
                                "  output(%y)\n",
                                "graph(%x : Tensor):\n"
                                "  %y : Tensor = aten::square(%x)\n"
                                "  output(%y)\n");
  CHECK(rewrite(*g, square) == 1);
  test::checkIR(g->str(), R"(
    # CHECK: %sq : Tensor = aten::square(%a)
    # CHECK: aten::mul.Tensor(%a, %b)
  )");

  SECTION("two wildcards may bind the same value") {
    auto h = ir::parseGraph(
        "graph(%a : Tensor):\n"
        "  %sq : Tensor = aten::mul.Tensor(%a, %a)\n"
        "  output(%sq)\n");
    RewriteRule swap = makeRule("swap",
                                "graph(%x : Tensor, %y : Tensor):\n"
                                "  %z : Tensor = aten::mul.Tensor(%x, %y)\n"
                                "  output(%z)\n",
                                "graph(%x : Tensor, %y : Tensor):\n"
                                "  %z : Tensor = aten::div.Tensor(%y, %x)\n"
                                "  output(%z)\n");
    CHECK(rewrite(*h, swap) == 1);
    test::checkIR(h->str(), "# CHECK: aten::div.Tensor(%a, %a)");
  }
}

TEST_CASE("pattern literals must be equal while literal wildcards bind any literal") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %h1 : Tensor = aten::hardtanh(%x, 0.0, 6.0)\n"
      "  %h2 : Tensor = aten::hardtanh(%h1, -1.0, 1.0)\n"
      "  %h3 : Tensor = aten::hardtanh(%h2, 0, 6)\n"
      "  %h4 : Tensor = aten::hardtanh(%h3, 2.0, 2.0)\n"
      "  output(%h4)\n");

  SECTION("literals written in the pattern") {
    RewriteRule rule = makeRule("relu6",
                                "graph(%x : Tensor):\n"
                                "  %y : Tensor = aten::hardtanh(%x, 0.0, 6.0)\n"
                                "  output(%y)\n",
                                "graph(%x : Tensor):\n"
                                "  %y : Tensor = aten::relu6(%x)\n"
                                "  output(%y)\n");
    CHECK(rewrite(*g, rule) == 1);  // not (-1.0, 1.0), and 0 is not 0.0
    test::checkIR(g->str(), R"(
      # CHECK: %h1 : Tensor = aten::relu6(%x)
      # CHECK: aten::hardtanh(%h1, -1.0, 1.0)
      # CHECK: aten::hardtanh(%h2, 0, 6)
    )");
  }

  SECTION("one literal wildcard used twice binds equal literals only") {
    RewriteRule rule = makeRule("fill",
                                "graph(%x : Tensor, %k : float):\n"
                                "  %y : Tensor = aten::hardtanh(%x, %k, %k)\n"
                                "  output(%y)\n",
                                "graph(%x : Tensor, %k : float):\n"
                                "  %y : Tensor = aten::full_like(%x, %k, None, None, None, None, None)\n"
                                "  output(%y)\n");
    CHECK(rewrite(*g, rule) == 1);
    // The bound literal becomes the replacement's argument.
    test::checkIR(g->str(), R"(
      # CHECK: aten::hardtanh(%x, 0.0, 6.0)
      # CHECK: %h4 : Tensor = aten::full_like(%h3, 2.0, None, None, None, None, None)
    )");
  }

  SECTION("a wildcard binds only literals of its type") {
    RewriteRule rule = makeRule("int-bounds",
                                "graph(%x : Tensor, %lo : int, %hi : int):\n"
                                "  %y : Tensor = aten::hardtanh(%x, %lo, %hi)\n"
                                "  output(%y)\n",
                                "graph(%x : Tensor, %lo : int, %hi : int):\n"
                                "  %y : Tensor = aten::clamp(%x, %lo, %hi)\n"
                                "  output(%y)\n");
    CHECK(rewrite(*g, rule) == 1);
    test::checkIR(g->str(), R"(
      # CHECK: %h3 : Tensor = aten::clamp(%h2, 0, 6)
      # CHECK-NOT: aten::clamp
    )");
  }
}

TEST_CASE("pattern operators match by overload") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %a : Tensor = aten::add.Tensor(%x, %y, 1)\n"
      "  %b : Tensor = aten::add.Scalar(%a, 2, 1)\n"
      "  output(%b)\n");
  RewriteRule rule = makeRule("add-to-sub",
                              "graph(%x : Tensor, %y : Tensor, %alpha : Scalar):\n"
                              "  %z : Tensor = aten::add.Tensor(%x, %y, %alpha)\n"
                              "  output(%z)\n",
                              "graph(%x : Tensor, %y : Tensor, %alpha : Scalar):\n"
                              "  %z : Tensor = aten::sub.Tensor(%x, %y, %alpha)\n"
                              "  output(%z)\n");
  CHECK(rewrite(*g, rule) == 1);
  test::checkIR(g->str(), R"(
    # CHECK: aten::sub.Tensor(%x, %y, 1)
    # CHECK: aten::add.Scalar
  )");
  // The replacement call got its schema.
  bool found = false;
  g->walk([&](ir::Node* n) {
    if (n->target() == "aten::sub") found = n->schema() != nullptr;
  });
  CHECK(found);
}

TEST_CASE("DoesNotRewriteWhenInteriorValueIsUsedOutsideTheMatch") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %r2 : Tensor = aten::relu(%r1)\n"
      "  %s : Tensor = aten::sigmoid(%r1)\n"
      "  output(%r2, %s)\n");
  const std::string before = g->str();
  PassContext ctx;
  CHECK(rewrite(*g, makeRule("double-relu", kDoubleRelu, kSingleRelu), &ctx) == 0);
  CHECK(g->str() == before);
  CHECK(test::declinedWith(ctx, "not self-contained: interior value %r1"));
  CHECK(test::declinedWith(ctx, "aten::sigmoid"));
}

TEST_CASE("pattern overlap: the first match wins") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %r2 : Tensor = aten::relu(%r1)\n"
      "  %r3 : Tensor = aten::relu(%r2)\n"
      "  output(%r3)\n");
  // {r1, r2} and {r2, r3} overlap; the match met first in program order wins.
  CHECK(rewrite(*g, makeRule("relu-relu-to-tanh", kDoubleRelu, kTanh)) == 1);
  test::checkIR(g->str(), R"(
    # CHECK: %r2 : Tensor = aten::tanh(%x)
    # CHECK-NEXT: %r3 : Tensor = aten::relu(%r2)
  )");
}

TEST_CASE("pattern driver sweeps until nothing changes within the iteration cap") {
  const char* chain =
      "graph(%x : Tensor):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %r2 : Tensor = aten::relu(%r1)\n"
      "  %r3 : Tensor = aten::relu(%r2)\n"
      "  %r4 : Tensor = aten::relu(%r3)\n"
      "  output(%r4)\n";
  RewriteRule rule = makeRule("double-relu", kDoubleRelu, kSingleRelu);

  SECTION("to a fixpoint") {
    auto g = ir::parseGraph(chain);
    PassContext ctx;
    RewriteOptions opts;
    opts.ctx = &ctx;
    RewriteStats s = applyRules(*g, {rule}, opts);
    // Sweep 1: {r1,r2} and {r3,r4} (the replacement of the first is not
    // matched again in the same sweep); sweep 2: the two new relus; sweep 3
    // finds nothing.
    CHECK(s.rewrites == 3);
    CHECK(s.sweeps == 3);
    CHECK_FALSE(s.hitIterationCap);
    CHECK(ctx.declines().empty());  // only the last sweep's declines are reported
    test::checkIR(g->str(), R"(
      # CHECK: %r4 : Tensor = aten::relu(%x)
      # CHECK-NOT: aten::relu
    )");
  }

  SECTION("stopped by the cap") {
    auto g = ir::parseGraph(chain);
    RewriteOptions opts;
    opts.maxIterations = 1;
    RewriteStats s = applyRules(*g, {rule}, opts);
    CHECK(s.rewrites == 2);
    CHECK(s.hitIterationCap);
    test::checkIR(g->str(), R"(
      # CHECK: aten::relu(%x)
      # CHECK-NEXT: aten::relu
      # CHECK-NOT: aten::relu
    )");
  }
}

TEST_CASE("pattern driver never creates a cycle") {
  // Two outputs, joined through %x: the relu is found among %x's users.
  RewriteRule rule = makeRule("relu-and-add",
                              "graph(%x : Tensor, %y : Tensor):\n"
                              "  %a : Tensor = aten::relu(%x)\n"
                              "  %b : Tensor = aten::add.Tensor(%x, %y, 1)\n"
                              "  output(%a, %b)\n",
                              "graph(%x : Tensor, %y : Tensor):\n"
                              "  %a : Tensor = aten::relu6(%x)\n"
                              "  %b : Tensor = aten::sub.Tensor(%x, %y, 1)\n"
                              "  output(%a, %b)\n");

  SECTION("DoesNotRewriteWhenAnOutputFeedsTheMatch") {
    // %y binds to %t, computed from the first output %a: the replacement,
    // placed at the add, would have %t use a value defined after it.
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %a : Tensor = aten::relu(%x)\n"
        "  %t : Tensor = aten::neg(%a)\n"
        "  %b : Tensor = aten::add.Tensor(%x, %t, 1)\n"
        "  output(%b)\n");
    const std::string before = g->str();
    PassContext ctx;
    CHECK(rewrite(*g, rule, &ctx) == 0);
    CHECK(g->str() == before);
    CHECK(test::declinedWith(ctx, "would create a cycle: output %a is used by %t = aten::neg"));
  }

  SECTION("rewrites when the outputs are used after the match") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor, %y : Tensor):\n"
        "  %a : Tensor = aten::relu(%x)\n"
        "  %b : Tensor = aten::add.Tensor(%x, %y, 1)\n"
        "  %t : Tensor = aten::neg(%a)\n"
        "  output(%t, %b)\n");
    CHECK(rewrite(*g, rule) == 1);
    test::checkIR(g->str(), R"(
      # CHECK: %a : Tensor = aten::relu6(%x)
      # CHECK-NEXT: %b : Tensor = aten::sub.Tensor(%x, %y, 1)
      # CHECK-NEXT: aten::neg(%a)
    )");
  }
}

TEST_CASE("DoesNotMoveReadsPastAnInPlaceOp") {
  // Replacing the two relus by one at %r2 would read %x after add_ wrote it.
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %w : Tensor = aten::add_.Scalar(%x, 1, 1)\n"
      "  %r2 : Tensor = aten::relu(%r1)\n"
      "  output(%r2, %w)\n");
  const std::string before = g->str();
  PassContext ctx;
  CHECK(rewrite(*g, makeRule("double-relu", kDoubleRelu, kSingleRelu), &ctx) == 0);
  CHECK(g->str() == before);
  CHECK(test::declinedWith(ctx, "side effects"));

  SECTION("but rewrites across pure nodes") {
    auto h = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %r1 : Tensor = aten::relu(%x)\n"
        "  %n : Tensor = aten::neg(%x)\n"
        "  %r2 : Tensor = aten::relu(%r1)\n"
        "  output(%r2, %n)\n");
    CHECK(rewrite(*h, makeRule("double-relu", kDoubleRelu, kSingleRelu)) == 1);
    test::checkIR(h->str(), R"(
      # CHECK: aten::neg(%x)
      # CHECK-NEXT: %r2 : Tensor = aten::relu(%x)
    )");
  }
}

TEST_CASE("pattern matches inside nested blocks but never across them") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %o : Tensor = aten::relu(%x)\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %i1 : Tensor = aten::relu(%x)\n"
      "      %i2 : Tensor = aten::relu(%i1)\n"
      "      output(%i2)\n"
      "    block1():\n"
      "      %j : Tensor = aten::relu(%o)\n"
      "      output(%j)\n"
      "  output(%r)\n");
  CHECK(rewrite(*g, makeRule("relu-relu-to-tanh", kDoubleRelu, kTanh)) == 1);
  test::checkIR(g->str(), R"(
    # CHECK: %o : Tensor = aten::relu(%x)
    # CHECK: block0():
    # CHECK-NEXT: %i2 : Tensor = aten::tanh(%x)
    # CHECK-NEXT: output(%i2)
    # CHECK: block1():
    # CHECK-NEXT: %j : Tensor = aten::relu(%o)
  )");
}

TEST_CASE("pattern constraints can decline with a reason") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %a : Tensor = aten::add.Tensor(%x, %y, 1)\n"
      "  %b : Tensor = aten::add.Tensor(%a, %y, 2)\n"
      "  output(%b)\n");
  Constraint alphaIsOne = [](const Match& m) -> std::optional<std::string> {
    const ir::Literal* alpha = m.literal("alpha");
    if (alpha && alpha->is<int64_t>() && alpha->as<int64_t>() == 1) return std::nullopt;
    return std::string("alpha is not 1");
  };
  RewriteRule rule = makeRule("add-to-sub",
                              "graph(%x : Tensor, %y : Tensor, %alpha : Scalar):\n"
                              "  %z : Tensor = aten::add.Tensor(%x, %y, %alpha)\n"
                              "  output(%z)\n",
                              "graph(%x : Tensor, %y : Tensor, %alpha : Scalar):\n"
                              "  %z : Tensor = aten::sub.Tensor(%x, %y, %alpha)\n"
                              "  output(%z)\n",
                              {alphaIsOne});
  PassContext ctx;
  CHECK(rewrite(*g, rule, &ctx) == 1);
  test::checkIR(g->str(), R"(
    # CHECK: aten::sub.Tensor(%x, %y, 1)
    # CHECK: aten::add.Tensor(%a, %y, 2)
  )");
  REQUIRE(ctx.declines().size() == 1);
  CHECK(test::declinedWith(ctx, "rule 'add-to-sub': alpha is not 1"));
}

TEST_CASE("pattern match exposes its bindings") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %a : Tensor = aten::add.Tensor(%x, %y, 3)\n"
      "  output(%a)\n");
  auto p = Pattern::parse(
      "graph(%p : Tensor, %q : Tensor, %alpha : int):\n"
      "  %z : Tensor = aten::add.Tensor(%p, %q, %alpha)\n"
      "  output(%z)\n");
  ir::Node* add = g->findValue("a")->node();
  auto m = p->matchAt(add);
  REQUIRE(m);
  CHECK(m->anchor() == add);
  CHECK(m->value("p") == g->findValue("x"));
  CHECK(m->value("q") == g->findValue("y"));
  REQUIRE(m->literal("alpha"));
  CHECK(*m->literal("alpha") == ir::Literal(3));
  CHECK(m->outputs().at(0) == g->findValue("a"));
  CHECK_THROWS_AS(m->binding("nope"), std::out_of_range);
  CHECK_FALSE(whyNotSelfContained(*m));
}

TEST_CASE("pattern and replacement graphs are validated") {
  CHECK_THROWS_WITH(Pattern::parse("graph(%x : Tensor, %u : Tensor):\n"
                                   "  %a : Tensor = aten::relu(%x)\n"
                                   "  output(%a)\n"),
                    Catch::Contains("input %u is unused"));
  CHECK_THROWS_WITH(Pattern::parse("graph(%x : Tensor):\n"
                                   "  %a : Tensor = aten::relu(%x)\n"
                                   "  output(%x)\n"),
                    Catch::Contains("output %x is a pattern input"));
  CHECK_THROWS_WITH(Pattern::parse("graph(%x : Tensor):\n"
                                   "  %w : Tensor = get_attr[\"w\"]\n"
                                   "  %a : Tensor = aten::mul.Tensor(%x, %w)\n"
                                   "  output(%a)\n"),
                    Catch::Contains("get_attr"));
  CHECK_THROWS_WITH(Pattern::parse("graph(%x : Tensor):\n"
                                   "  %d : Tensor = aten::neg(%x)\n"
                                   "  %a : Tensor = aten::relu(%x)\n"
                                   "  output(%a)\n"),
                    Catch::Contains("does not reach an output"));
  CHECK_THROWS_WITH(makeRule("r", kDoubleRelu,
                             "graph(%x : Tensor, %y : Tensor):\n"
                             "  output(%x)\n"),
                    Catch::Contains("the replacement has 2 input(s) but the pattern has 1"));
  CHECK_THROWS_AS(Pattern::parse("graph(%x : Tensor):\n"
                                 "  %a : Tensor = aten::rleu(%x)\n"
                                 "  output(%a)\n"),
                  ir::ParseError);
}

TEST_CASE("pattern driver handles long graphs in few sweeps") {
  // 4000 relu pairs, each followed by a sigmoid: one sweep rewrites them all.
  std::string text = "graph(%x : Tensor):\n";
  std::string prev = "x";
  const int kPairs = 4000;
  for (int i = 0; i < kPairs; ++i) {
    const std::string n = std::to_string(i);
    text += "  %a" + n + " : Tensor = aten::relu(%" + prev + ")\n";
    text += "  %b" + n + " : Tensor = aten::relu(%a" + n + ")\n";
    text += "  %s" + n + " : Tensor = aten::sigmoid(%b" + n + ")\n";
    prev = "s" + n;
  }
  text += "  output(%" + prev + ")\n";
  auto g = ir::parseGraph(text);
  RewriteStats s = applyRules(*g, {makeRule("double-relu", kDoubleRelu, kSingleRelu)});
  CHECK(s.rewrites == kPairs);
  CHECK(s.sweeps == 2);
  CHECK(g->numNodes() == static_cast<size_t>(2 * kPairs + 2));
}

TEST_CASE("pattern rewrites edit through the given Rewriter, and its log rebuilds the graph before") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %r2 : Tensor = aten::relu(%r1)\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %q1 : Tensor = aten::relu(%r2)\n"
      "      %q2 : Tensor = aten::relu(%q1)\n"
      "      output(%q2)\n"
      "    block1():\n"
      "      output(%r2)\n"
      "  %t : Tensor = aten::tanh(%r)\n"
      "  output(%t)\n");
  const std::string before = g->str();
  ir::EditLog log;
  log.setKeepText(true);
  ir::Rewriter rw(*g, log, "rules");
  RewriteOptions opts;
  opts.rewriter = &rw;
  CHECK(applyRules(*g, {makeRule("double-relu", kDoubleRelu, kSingleRelu)}, opts).rewrites == 2);
  ir::lintOrThrow(*g, "after rewriting");
  CHECK(rw.changed());
  for (const ir::Edit& e : log.edits()) CHECK(e.pass == "rules");
  const std::string diff = ir::unifiedDiffOfChanges(*g, log.changesSince(0), "before", "after");
  INFO(diff);
  CHECK(ir::applyDiffInReverse(g->str(), diff) == before);
  test::checkIR(g->str(), R"(
    # CHECK: %r2 : Tensor = aten::relu(%x)
    # CHECK: %q2 : Tensor = aten::relu(%r2)
    # CHECK-NOT: aten::relu
    # CHECK: aten::tanh
  )");
}
