// remove-dropout: every dropout becomes its input (bn-inference has its own
// file, bn_inference_test.cpp).
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

TEST_CASE("remove-dropout removes every dropout form including train=True and in-place") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::dropout(%x, 0.5, True)\n"
      "  %b : Tensor = aten::feature_dropout(%a, 0.1, False)\n"
      "  %c : Tensor = aten::alpha_dropout(%b, 0.2, True)\n"
      "  %d : Tensor = aten::feature_alpha_dropout(%c, 0.2, False)\n"
      "  %e : Tensor = aten::dropout_(%d, 0.5, True)\n"
      "  %f : Tensor = aten::relu(%e)\n"
      "  output(%f)\n");
  auto report = test::runPipeline(*g, "remove-dropout");
  CHECK(test::counter(report, "remove-dropout", "removed") == 5);
  test::checkIR(g->str(), R"(
    # CHECK-NOT: dropout
    # CHECK: aten::relu(%x)
  )");
}

TEST_CASE("remove-dropout on mobilenet_v2 keeps eval numerics bitwise") {
  const auto& f = test::fixture("mobilenet_v2_script");
  Optimizer opt = Optimizer::load(f.path);
  auto report = opt.run("remove-dropout");
  CHECK(test::counter(report, "remove-dropout", "removed") == 1);
  auto v = opt.verify(f.inputs, {}, 2);
  INFO(v.summary);
  CHECK(v.bitwiseEqual);
}

TEST_CASE("RemoveDropoutDoesNotFireWithoutDropout") {
  auto g = ir::parseGraph("graph(%x : Tensor):\n  %a : Tensor = aten::relu(%x)\n  output(%a)\n");
  auto report = test::runPipeline(*g, "remove-dropout");
  CHECK_FALSE(report.changed());
}

TEST_CASE("remove-dropout logs every edit, and the diff shows each dropout removed") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::dropout(%x, 0.5, True)\n"
      "  %e : Tensor = aten::dropout_(%a, 0.5, True)\n"
      "  %f : Tensor = aten::relu(%e)\n"
      "  output(%f)\n");
  auto report = test::runChecked(*g, "remove-dropout");  // throws if an edit went around ir::Rewriter
  CHECK(test::counter(report, "remove-dropout", "removed") == 2);
  REQUIRE(report.executions.size() == 1);
  const auto& changes = *report.executions[0].changes;
  CHECK(changes.removed.size() == 2);
  CHECK(changes.added.empty());
  test::checkIR(g->str(), R"(
    # CHECK-NOT: dropout
    # CHECK: aten::relu(%x)
  )");
}
