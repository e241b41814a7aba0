// dce: removes dead pure nodes, keeps side effects, nested blocks.
#include "ir/text.h"
#include "rewriters/dce.h"
#include "tests/support/checked_run.h"
#include "tests/support/fixtures.h"
#include "tests/support/ir_check.h"
#include "api/api.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {
PassResult runDce(ir::Graph& g) {
  PassContext ctx;
  return DcePass().run(g, ctx);
}
}  // namespace

TEST_CASE("dce removes dead chains in one run") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %b : Tensor = aten::sigmoid(%a)\n"
      "  %l : List[int] = prim::ListConstruct(1, 2)\n"
      "  %c : Tensor = aten::tanh(%x)\n"
      "  output(%c)\n");
  PassResult r = runDce(*g);
  CHECK(r.changed);
  CHECK(r.counter("removed") == 3);
  test::checkIR(g->str(), R"(
    # CHECK-NOT: aten::relu
    # CHECK-NOT: aten::sigmoid
    # CHECK-NOT: prim::ListConstruct
    # CHECK: aten::tanh
  )");
}

TEST_CASE("dce keeps in-place ops raises and random draws") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %y : Tensor = aten::clone(%x, None)\n"
      "  %r : Tensor = aten::relu_(%y)\n"
      "  %d : Tensor = aten::dropout(%x, 0.5, True)\n"
      "  prim::If(%c)\n"
      "    block0():\n"
      "      prim::RaiseException(\"bad\", None)\n"
      "      output()\n"
      "    block1():\n"
      "      output()\n"
      "  output(%y)\n");
  PassResult r = runDce(*g);
  CHECK_FALSE(r.changed);
  test::checkIR(g->str(), R"(
    # CHECK: aten::relu_
    # CHECK: aten::dropout
    # CHECK: prim::RaiseException
  )");
}

TEST_CASE("dce cleans nested blocks and removes pure dead ifs") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %dead : Tensor = aten::neg(%x)\n"
      "      %a : Tensor = aten::relu(%x)\n"
      "      output(%a)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  %unused : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %t : Tensor = aten::tanh(%x)\n"
      "      output(%t)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  output(%r)\n");
  PassResult r = runDce(*g);
  CHECK(r.counter("removed") == 2);  // neg, and the unused If (its body goes with it)
  test::checkIR(g->str(), R"(
    # CHECK: prim::If
    # CHECK-NOT: aten::neg
    # CHECK: aten::relu
    # CHECK-NOT: prim::If
  )");
}

TEST_CASE("dce keeps every fixture's outputs identical") {
  for (const char* name : {"control_flow", "inplace_ops", "train_mode_trace"}) {
    DYNAMIC_SECTION(name) {
      const auto& f = test::fixture(name);
      Optimizer opt = Optimizer::load(f.path);
      opt.run("dce");
      auto v = opt.verify(f.inputs, {}, 2);
      INFO(v.summary);
      CHECK(v.bitwiseEqual);
    }
  }
}

TEST_CASE("DceDoesNotFireWithoutDeadCode") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %b : Tensor = aten::add_.Scalar(%a, 1, 1)\n"
      "  output(%a)\n");
  const std::string before = g->str();
  auto report = test::runChecked(*g, "dce");
  CHECK_FALSE(report.changed());
  CHECK(report.executions.at(0).edits == 0);
  CHECK(g->str() == before);
}

TEST_CASE("dce logs every erase, a dead If with its dead body in one piece") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %dead : Tensor = aten::neg(%x)\n"
      "      %a : Tensor = aten::relu(%x)\n"
      "      output(%a)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  %unused : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %d2 : Tensor = aten::sigmoid(%x)\n"
      "      %t : Tensor = aten::tanh(%x)\n"
      "      output(%t)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  %s : Tensor = aten::sin(%x)\n"
      "  output(%r)\n");
  // The check rebuilds the text before from the log's diff (the If's body
  // included) and throws when it differs.
  auto report = test::runChecked(*g, "dce");
  // neg, sin, the unused If, and its dead sigmoid (counted as the
  // node-by-node walk would).
  CHECK(test::counter(report, "dce", "removed") == 4);
  CHECK(report.executions.at(0).edits == 3);  // neg, the If (with its body), sin
  test::checkIR(g->str(), R"(
    # CHECK: prim::If
    # CHECK-NOT: aten::neg
    # CHECK: aten::relu
    # CHECK-NOT: prim::If
    # CHECK-NOT: aten::sin
  )");
  // Numerics: both branches still compute what they did.
  const at::Tensor x = torch::randn({3});
  CHECK(torch::equal(test::runGraph(*g, {x, true}).toTensor(), torch::relu(x)));
  CHECK(torch::equal(test::runGraph(*g, {x, false}).toTensor(), x));
}
