// remove-dropout and bn-inference: inference specialization.
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

TEST_CASE("bn-inference switches training-mode batch_norm to running statistics") {
  const auto& f = test::fixture("train_mode_trace");
  Optimizer opt = Optimizer::load(f.path);
  auto report = opt.run("bn-inference");
  CHECK(test::counter(report, "bn-inference", "converted") == 1);
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: aten::batch_norm(
    # CHECK-SAME: False, 0.1, 1e-05
  )");
}

TEST_CASE("BnInferenceDoesNotFireWithoutRunningStatistics") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %y : Tensor = aten::batch_norm(%x, None, None, None, None, True, 0.1, 1e-05, True)\n"
      "  output(%y)\n");
  rewriters::PassContext ctx;
  auto report = test::runPipeline(*g, "bn-inference", &ctx);
  CHECK_FALSE(report.changed());
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("no running statistics"));
}
