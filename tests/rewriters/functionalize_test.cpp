// functionalize: in-place ops become out-of-place only where nobody can see
// the difference; everything else is declined with a reason.
#include "ir/lint.h"
#include "ir/text.h"
#include "rewriters/functionalize.h"
#include "tests/support/checked_run.h"
#include "tests/support/fixtures.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"
#include "api/api.h"

#include <catch2/catch.hpp>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

using Run = test::PassRun;

Run functionalize(ir::Graph& g) {
  Run r;
  // Through the PassManager with the edit-log check (and the IR lint) on.
  r.result = test::runPassChecked(g, "functionalize", r.ctx);
  ir::lintOrThrow(g, "after functionalize");
  return r;
}

int countTarget(const ir::Graph& g, const std::string& target) {
  int n = 0;
  g.walk([&](ir::Node* node) { n += node->isCall() && node->target() == target; });
  return n;
}

int countInplace(const ir::Graph& g) {
  int n = 0;
  g.walk([&](ir::Node* node) {
    const std::string& t = node->target();
    n += node->isCall() && t.size() > 2 && t.back() == '_' && t[t.size() - 2] != '_';
  });
  return n;
}

}  // namespace

TEST_CASE("functionalize rewrites in-place ops on fresh values and redirects later uses") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %w : Tensor):\n"
      "  %c : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n"
      "  %r : Tensor = aten::relu_(%c)\n"
      "  %later : Tensor = aten::neg(%c)\n"
      "  %h : Tensor = aten::hardtanh_(%later, 0.0, 6.0)\n"
      "  %m : Tensor = aten::mul_.Scalar(%h, 0.5)\n"
      "  %s : Tensor = aten::add.Tensor(%m, %c, 1)\n"
      "  output(%s)\n");
  Run r = functionalize(*g);
  CHECK(r.result.changed);
  CHECK(r.result.counter("functionalized") == 3);
  test::checkIR(g->str(), R"(
    # CHECK: %r : Tensor = aten::relu(%c)
    # CHECK-NEXT: %later : Tensor = aten::neg(%r)
    # CHECK-NEXT: %h : Tensor = aten::hardtanh(%later, 0.0, 6.0)
    # CHECK-NEXT: %m : Tensor = aten::mul.Scalar(%h, 0.5)
    # CHECK-NEXT: aten::add.Tensor(%m, %r, 1)
  )");
}

TEST_CASE("functionalize handles tensor operands only with dtype metadata") {
  const std::string body =
      "  %a : Tensor = aten::clone(%x, None)\n"
      "  %r : Tensor = aten::add_.Tensor(%a, %y, 1)\n"
      "  output(%r)\n";
  SECTION("without metadata it declines") {
    auto g = ir::parseGraph("graph(%x : Tensor, %y : Tensor):\n" + body);
    Run r = functionalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("dtype metadata"));
  }
  SECTION("with different dtypes it declines") {
    auto g = ir::parseGraph("graph(%x : Tensor, %y : Tensor{float64}):\n" +
                            std::string("  %a : Tensor{float32} = aten::clone(%x, None)\n") +
                            "  %r : Tensor = aten::add_.Tensor(%a, %y, 1)\n  output(%r)\n");
    CHECK_FALSE(functionalize(*g).result.changed);
  }
  SECTION("with equal dtypes it fires") {
    auto g = ir::parseGraph("graph(%x : Tensor, %y : Tensor{float32}):\n" +
                            std::string("  %a : Tensor{float32} = aten::clone(%x, None)\n") +
                            "  %r : Tensor = aten::add_.Tensor(%a, %y, 1)\n  output(%r)\n");
    CHECK(functionalize(*g).result.counter("functionalized") == 1);
    test::checkIR(g->str(), "# CHECK: %r : Tensor = aten::add.Tensor(%a, %y, 1)");
  }
}

TEST_CASE("FunctionalizeDoesNotTouchGraphInputs") {
  ir::ParseOptions opts;
  opts.constants = std::make_shared<ir::ConstantTable>();
  opts.constants->set("buf", torch::zeros({2}));
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %n : int):\n"
      "  %buf : Tensor = get_attr[\"buf\"]\n"
      "  %r : Tensor = aten::relu_(%x)\n"
      "  %b : Tensor = aten::sigmoid_(%buf)\n"
      "  %h : Tensor = prim::Loop(%n, True, %r)\n"
      "    block0(%i : int, %hin : Tensor):\n"
      "      %t : Tensor = aten::tanh_(%hin)\n"
      "      output(True, %t)\n"
      "  %s : Tensor = aten::add.Tensor(%h, %b, 1)\n"
      "  output(%s)\n",
      opts);
  Run r = functionalize(*g);
  CHECK_FALSE(r.result.changed);
  CHECK(r.declined("is a graph input"));
  CHECK(r.declined("is a constant"));
  CHECK(r.declined("is a block parameter"));
  CHECK(countInplace(*g) == 3);
}

TEST_CASE("FunctionalizeDoesNotTouchAliasedValues") {
  SECTION("a view taken before the mutation is read after it") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %a : Tensor = aten::clone(%x, None)\n"
        "  %v : Tensor = aten::select.int(%a, 0, 0)\n"
        "  %r : Tensor = aten::relu_(%a)\n"
        "  %s : Tensor = aten::add.Tensor(%v, %r, 1)\n"
        "  output(%s)\n");
    Run r = functionalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("is aliased or written by"));
  }
  SECTION("the mutated value is itself a view of another value") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %a : Tensor = aten::clone(%x, None)\n"
        "  %v : Tensor = aten::select.int(%a, 0, 0)\n"
        "  %r : Tensor = aten::relu_(%v)\n"
        "  %s : Tensor = aten::add.Tensor(%a, %r, 1)\n"
        "  output(%s)\n");
    Run r = functionalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("may alias another value"));
  }
  SECTION("a dropout that returns its input is an alias") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %a : Tensor = aten::clone(%x, None)\n"
        "  %d : Tensor = aten::dropout(%a, 0.5, False)\n"
        "  %r : Tensor = aten::relu_(%d)\n"
        "  %s : Tensor = aten::add.Tensor(%a, %r, 1)\n"
        "  output(%s)\n");
    CHECK_FALSE(functionalize(*g).result.changed);
  }
  SECTION("a value put in a list before the mutation") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %a : Tensor = aten::clone(%x, None)\n"
        "  %l : List[Tensor] = prim::ListConstruct(%a)\n"
        "  %r : Tensor = aten::relu_(%a)\n"
        "  %c : Tensor = aten::cat(%l, 0)\n"
        "  output(%c)\n");
    CHECK_FALSE(functionalize(*g).result.changed);
  }
  SECTION("a loop body mutating a value from outside the loop") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor, %n : int):\n"
        "  %a : Tensor = aten::clone(%x, None)\n"
        "  prim::Loop(%n, True)\n"
        "    block0(%i : int):\n"
        "      %r : Tensor = aten::add_.Scalar(%a, 1.0, 1)\n"
        "      output(True)\n"
        "  output(%a)\n");
    Run r = functionalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("defined outside this block"));
  }
  SECTION("an op outside the table") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor, %y : Tensor):\n"
        "  %a : Tensor = aten::clone(%x, None)\n"
        "  %r : Tensor = aten::copy_(%a, %y, False)\n"
        "  output(%r)\n");
    Run r = functionalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("not in the table"));
  }
}

TEST_CASE("functionalize reads before the mutation are fine") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::clone(%x, None)\n"
      "  %n : Tensor = aten::neg(%a)\n"
      "  %r : Tensor = aten::sigmoid_(%a)\n"
      "  %s : Tensor = aten::add.Tensor(%n, %r, 1)\n"
      "  output(%s)\n");
  CHECK(functionalize(*g).result.counter("functionalized") == 1);
  test::checkIR(g->str(), "# CHECK: %r : Tensor = aten::sigmoid(%a)");
}

TEST_CASE("functionalize keeps fixture outputs bitwise equal") {
  for (const char* name : {"inplace_ops", "resnet18_script", "mobilenet_v2_script", "control_flow"}) {
    DYNAMIC_SECTION(name) {
      const auto& f = test::fixture(name);
      Optimizer opt = Optimizer::load(f.path);
      PassContext ctx;
      auto report = opt.run("functionalize", &ctx);
      if (std::string(name) != "control_flow") CHECK(report.changed());
      ir::lintOrThrow(opt.model().forward());
      auto v = opt.verify(f.inputs, {}, 2);
      INFO(v.summary);
      CHECK(v.bitwiseEqual);
    }
  }
}

TEST_CASE("functionalize removes every in-place op of resnet18 once dtypes are known") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  ir::Graph& g = opt.model().forward();
  REQUIRE(countInplace(g) > 0);
  // Everything in resnet18 is float32 (what shape-prop would record).
  auto setDtype = [](ir::Value* v) {
    if (v->isTensor()) v->meta().dtype = c10::ScalarType::Float;
  };
  g.walk([&](ir::Node* n) {
    for (const auto& o : n->outputs()) setDtype(o.get());
  });
  PassContext ctx;
  PassResult r = FunctionalizePass().run(g, ctx);
  INFO(ctx.declines().size() << " declines; first: " << (ctx.declines().empty() ? "" : ctx.declines()[0]));
  CHECK(countInplace(g) == 0);
  CHECK(r.counter("functionalized") == countTarget(g, "aten::relu") + countTarget(g, "aten::add"));
  auto v = opt.verify(f.inputs, {}, 2);
  INFO(v.summary);
  CHECK(v.bitwiseEqual);
}
