// cse: merges equal pure nodes with dominance scoping; never across
// mutation, sibling blocks, side effects or double-escaping results.
#include "ir/lint.h"
#include "ir/text.h"
#include "rewriters/cse.h"
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"
#include "tests/support/fixtures.h"
#include "tests/support/ir_check.h"
#include "api/api.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <sstream>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

PassResult runCse(ir::Graph& g, PassContext* ctxOut = nullptr) {
  PassContext local;
  PassContext& ctx = ctxOut ? *ctxOut : local;
  // Through the PassManager with the edit-log check (and the IR lint) on.
  PassResult r = test::runPassChecked(g, "cse", ctx);
  ir::lintOrThrow(g, "after cse");
  return r;
}

}  // namespace

TEST_CASE("cse merges equal pure nodes and their chains in one run") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %b : Tensor = aten::relu(%x)\n"
      "  %sa : Tensor = aten::sigmoid(%a)\n"
      "  %sb : Tensor = aten::sigmoid(%b)\n"
      "  %l1 : List[int] = prim::ListConstruct(1, 1)\n"
      "  %l2 : List[int] = prim::ListConstruct(1, 1)\n"
      "  %p : Tensor = aten::permute(%sa, %l1)\n"
      "  %q : Tensor = aten::permute(%sb, %l2)\n"
      "  %r : Tensor = aten::add.Tensor(%p, %q, 1)\n"
      "  output(%r)\n");
  PassResult r = runCse(*g);
  CHECK(r.changed);
  CHECK(r.counter("eliminated") == 4);  // relu, sigmoid, ListConstruct, permute
  test::checkIR(g->str(), R"(
    # CHECK: %a : Tensor = aten::relu(%x)
    # CHECK-NOT: aten::relu
    # CHECK: %sa : Tensor = aten::sigmoid(%a)
    # CHECK-NOT: aten::sigmoid
    # CHECK: %p : Tensor = aten::permute(%sa, %l1)
    # CHECK-NEXT: aten::add.Tensor(%p, %p, 1)
  )");
}

TEST_CASE("cse merges get_attr nodes naming the same constant") {
  ir::ParseOptions opts;
  opts.constants = std::make_shared<ir::ConstantTable>();
  opts.constants->set("w", torch::ones({2}));
  opts.constants->set("v", torch::ones({2}));
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %w.1 : Tensor = get_attr[\"w\"]\n"
      "  %v : Tensor = get_attr[\"v\"]\n"
      "  %a : Tensor = aten::mul.Tensor(%x, %w)\n"
      "  %b : Tensor = aten::mul.Tensor(%x, %w.1)\n"
      "  %c : Tensor = aten::mul.Tensor(%x, %v)\n"
      "  %s : Tensor = aten::add.Tensor(%a, %b, 1)\n"
      "  %t : Tensor = aten::add.Tensor(%s, %c, 1)\n"
      "  output(%t)\n",
      opts);
  PassResult r = runCse(*g);
  CHECK(r.counter("eliminated") == 2);  // the second get_attr, then the second mul
  test::checkIR(g->str(), R"(
    # CHECK: get_attr["w"]
    # CHECK-NOT: get_attr["w"]
    # CHECK: get_attr["v"]
    # CHECK: aten::add.Tensor(%a, %a, 1)
  )");
}

TEST_CASE("cse compares literals bit for bit and by kind") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::add.Scalar(%x, 0.0, 1)\n"
      "  %b : Tensor = aten::add.Scalar(%x, -0.0, 1)\n"
      "  %c : Tensor = aten::mul.Scalar(%x, 2)\n"
      "  %d : Tensor = aten::mul.Scalar(%x, 2.0)\n"
      "  %e : List[int] = prim::ListConstruct()\n"
      "  %f : List[float] = prim::ListConstruct()\n"
      "  %ab : Tensor = aten::add.Tensor(%a, %b, 1)\n"
      "  %cd : Tensor = aten::add.Tensor(%c, %d, 1)\n"
      "  %s : Tensor = aten::add.Tensor(%ab, %cd, 1)\n"
      "  output(%s)\n");
  PassResult r = runCse(*g);
  CHECK_FALSE(r.changed);
}

TEST_CASE("CseDoesNotMergeAcrossMutation") {
  SECTION("two reads of a value around an in-place update stay separate") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %y : Tensor = aten::clone(%x, None)\n"
        "  %a : Tensor = aten::relu(%y)\n"
        "  %u : Tensor = aten::add_.Scalar(%y, 1.0, 1)\n"
        "  %b : Tensor = aten::relu(%y)\n"
        "  %s : Tensor = aten::add.Tensor(%a, %b, 1)\n"
        "  output(%s)\n");
    PassContext ctx;
    PassResult r = runCse(*g, &ctx);
    CHECK_FALSE(r.changed);
    CHECK(test::declinedWith(ctx, "mutated in place"));
    test::checkIR(g->str(), R"(
      # CHECK: aten::relu(%y)
      # CHECK: aten::add_
      # CHECK: aten::relu(%y)
    )");
  }
  SECTION("two clones of which one is mutated stay separate") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %a : Tensor = aten::clone(%x, None)\n"
        "  %b : Tensor = aten::clone(%x, None)\n"
        "  %r : Tensor = aten::relu_(%b)\n"
        "  %s : Tensor = aten::add.Tensor(%a, %b, 1)\n"
        "  output(%s)\n");
    CHECK_FALSE(runCse(*g).changed);
  }
  SECTION("a mutation through a view blocks the viewed value") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %y : Tensor = aten::clone(%x, None)\n"
        "  %a : Tensor = aten::neg(%y)\n"
        "  %v : Tensor = aten::select.int(%y, 0, 0)\n"
        "  %u : Tensor = aten::mul_.Scalar(%v, 2.0)\n"
        "  %b : Tensor = aten::neg(%y)\n"
        "  %s : Tensor = aten::add.Tensor(%a, %b, 1)\n"
        "  output(%s)\n");
    CHECK_FALSE(runCse(*g).changed);
  }
  SECTION("a mutation through a list of tensors blocks its elements") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %y : Tensor = aten::clone(%x, None)\n"
        "  %a : Tensor = aten::neg(%y)\n"
        "  %l : List[Tensor] = prim::ListConstruct(%y)\n"
        "  %e : Tensor = aten::__getitem__.t(%l, 0)\n"
        "  %u : Tensor = aten::relu_(%e)\n"
        "  %b : Tensor = aten::neg(%y)\n"
        "  %s : Tensor = aten::add.Tensor(%a, %b, 1)\n"
        "  output(%s)\n");
    CHECK_FALSE(runCse(*g).changed);
  }
  SECTION("unrelated values still merge next to a mutation") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %y : Tensor = aten::clone(%x, None)\n"
        "  %u : Tensor = aten::add_.Scalar(%y, 1.0, 1)\n"
        "  %a : Tensor = aten::tanh(%x)\n"
        "  %b : Tensor = aten::tanh(%x)\n"
        "  %s : Tensor = aten::add.Tensor(%a, %b, 1)\n"
        "  %t : Tensor = aten::add.Tensor(%s, %y, 1)\n"
        "  output(%t)\n");
    CHECK(runCse(*g).counter("eliminated") == 1);
  }
}

TEST_CASE("CseDoesNotMergeSiblingBlocks") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %a : Tensor = aten::relu(%x)\n"
      "      output(%a)\n"
      "    block1():\n"
      "      %b : Tensor = aten::relu(%x)\n"
      "      output(%b)\n"
      "  %after : Tensor = aten::relu(%x)\n"
      "  %s : Tensor = aten::add.Tensor(%r, %after, 1)\n"
      "  output(%s)\n");
  PassResult r = runCse(*g);
  CHECK_FALSE(r.changed);
  test::checkIR(g->str(), R"(
    # CHECK: block0
    # CHECK: aten::relu
    # CHECK: block1
    # CHECK: aten::relu
    # CHECK: %after : Tensor = aten::relu(%x)
  )");
}

TEST_CASE("cse lets nested blocks reuse values from enclosing blocks") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool, %n : int):\n"
      "  %outer : Tensor = aten::relu(%x)\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %a : Tensor = aten::relu(%x)\n"
      "      %a2 : Tensor = aten::sigmoid(%a)\n"
      "      %a3 : Tensor = aten::sigmoid(%a)\n"
      "      %a4 : Tensor = aten::add.Tensor(%a2, %a3, 1)\n"
      "      output(%a4)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  %h : Tensor = prim::Loop(%n, True, %r)\n"
      "    block0(%i : int, %hin : Tensor):\n"
      "      %inv : Tensor = aten::relu(%x)\n"
      "      %hn : Tensor = aten::add.Tensor(%hin, %inv, 1)\n"
      "      output(True, %hn)\n"
      "  %s : Tensor = aten::add.Tensor(%h, %outer, 1)\n"
      "  output(%s)\n");
  PassResult r = runCse(*g);
  CHECK(r.counter("eliminated") == 3);  // %a, %a3, %inv
  test::checkIR(g->str(), R"(
    # CHECK: %outer : Tensor = aten::relu(%x)
    # CHECK-NOT: aten::relu
    # CHECK: aten::sigmoid(%outer)
    # CHECK-NOT: aten::sigmoid
    # CHECK: aten::add.Tensor(%a2, %a2, 1)
    # CHECK: aten::add.Tensor(%hin, %outer, 1)
  )");
}

TEST_CASE("cse keeps side effects and nodes with blocks") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %a : Tensor = aten::dropout(%x, 0.5, True)\n"
      "  %b : Tensor = aten::dropout(%x, 0.5, True)\n"
      "  %i1 : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      output(%x)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  %i2 : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      output(%x)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  %s : Tensor = aten::add.Tensor(%a, %b, 1)\n"
      "  %t : Tensor = aten::add.Tensor(%i1, %i2, 1)\n"
      "  %u : Tensor = aten::add.Tensor(%s, %t, 1)\n"
      "  output(%u)\n");
  CHECK_FALSE(runCse(*g).changed);
}

TEST_CASE("cse does not return one object twice to the caller") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %b : Tensor = aten::relu(%x)\n"
      "  %c : Tensor = aten::relu(%x)\n"
      "  %d : Tensor = aten::neg(%c)\n"
      "  %t : Tuple[Tensor, Tensor, Tensor] = prim::TupleConstruct(%a, %b, %d)\n"
      "  output(%t)\n");
  PassContext ctx;
  PassResult r = runCse(*g, &ctx);
  CHECK(r.counter("eliminated") == 1);  // %c (internal) merges into %a; %b stays
  CHECK(test::declinedWith(ctx, "reach the graph outputs"));
  test::checkIR(g->str(), R"(
    # CHECK: %a : Tensor = aten::relu(%x)
    # CHECK: %b : Tensor = aten::relu(%x)
    # CHECK: aten::neg(%a)
  )");
}

TEST_CASE("cse is linear in the number of nodes") {
  // 40k nodes: chains of equal nodes and many distinct literals.
  std::ostringstream text;
  text << "graph(%x : Tensor):\n";
  const int n = 10000;
  for (int i = 0; i < n; ++i) {
    text << "  %a" << i << " : Tensor = aten::add.Scalar(%x, " << i << ", 1)\n";
    text << "  %b" << i << " : Tensor = aten::add.Scalar(%x, " << i << ", 1)\n";
    text << "  %c" << i << " : Tensor = aten::mul.Tensor(%a" << i << ", %b" << i << ")\n";
    text << "  %d" << i << " : Tensor = aten::mul.Tensor(%a" << i << ", %a" << i << ")\n";
  }
  text << "  output(%c" << n - 1 << ", %d" << n - 2 << ")\n";
  auto g = ir::parseGraph(text.str());
  const auto start = std::chrono::steady_clock::now();
  PassContext ctx;
  PassResult r = CsePass().run(*g, ctx);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.counter("eliminated") == 2 * n);
  CHECK(seconds < 5.0);
}

TEST_CASE("cse keeps fixture outputs bitwise equal") {
  for (const char* name : {"inplace_ops", "resnet18_script", "control_flow", "mobilenet_v2_script"}) {
    DYNAMIC_SECTION(name) {
      const auto& f = test::fixture(name);
      Optimizer opt = Optimizer::load(f.path);
      auto report = opt.run("cse,dce");
      if (std::string(name) != "control_flow") CHECK(report.changed());
      auto v = opt.verify(f.inputs, {}, 2);
      INFO(v.summary);
      CHECK(v.bitwiseEqual);
    }
  }
}
