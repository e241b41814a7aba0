// bn-inference: training-mode batch_norm switched to the running statistics.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using namespace ptopt;

namespace {

const char* kTrainingBn =
    "graph(%x : Tensor):\n"
    "  %w : Tensor = get_attr[\"bn.weight\"]\n"
    "  %b : Tensor = get_attr[\"bn.bias\"]\n"
    "  %m : Tensor = get_attr[\"bn.running_mean\"]\n"
    "  %v : Tensor = get_attr[\"bn.running_var\"]\n"
    "  %y : Tensor = aten::batch_norm(%x, %w, %b, %m, %v, True, 0.1, 1e-05, True)\n"
    "  output(%y)\n";

}  // namespace

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

TEST_CASE("bn-inference normalizes with the running statistics and leaves them unchanged") {
  torch::manual_seed(0);
  const at::Tensor w = torch::rand({3}) + 0.5, b = torch::randn({3}), mean = torch::randn({3}),
                   var = torch::rand({3}) + 0.5;
  auto p = test::parseWithConstants(kTrainingBn, {{"bn.weight", w},
                                                  {"bn.bias", b},
                                                  {"bn.running_mean", mean.clone()},
                                                  {"bn.running_var", var.clone()}});
  auto report = test::runChecked(*p.graph, "bn-inference");
  // Fired, and nothing else changed: the one edit is the training flag.
  CHECK(report.changed());
  CHECK(test::counter(report, "bn-inference", "converted") == 1);
  REQUIRE(report.executions.size() == 1);
  CHECK(report.executions[0].edits == 1);
  test::checkIR(p.graph->str(), R"(
    # CHECK: aten::batch_norm(%x, %w, %b, %m, %v, False, 0.1, 1e-05, True)
    # CHECK-NOT: True, 0.1
  )");
  // Numerics: eval-mode BatchNorm, bitwise (the same kernel).
  const at::Tensor x = torch::randn({4, 3, 5, 5});
  const at::Tensor got = test::runGraph(*p.graph, {x}).toTensor();
  const at::Tensor expected = at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true);
  CHECK(torch::equal(got, expected));
  // The batch's statistics would differ: the pass really changed the op.
  CHECK_FALSE(torch::allclose(got, at::batch_norm(x, w, b, mean.clone(), var.clone(), true, 0.1, 1e-5, true)));
  // Inference never updates the running statistics.
  CHECK(torch::equal(p.graph->constants().tensor("bn.running_mean"), mean));
  CHECK(torch::equal(p.graph->constants().tensor("bn.running_var"), var));
}

TEST_CASE("BnInferenceDoesNotFireOnInferenceFormOrComputedFlag") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %m : Tensor, %v : Tensor, %t : bool):\n"
      "  %y : Tensor = aten::batch_norm(%x, None, None, %m, %v, False, 0.1, 1e-05, True)\n"
      "  %z : Tensor = aten::batch_norm(%y, None, None, %m, %v, %t, 0.1, 1e-05, True)\n"
      "  output(%z)\n");
  const std::string before = g->str();
  rewriters::PassContext ctx;
  auto report = test::runChecked(*g, "bn-inference", &ctx);
  CHECK_FALSE(report.changed());
  CHECK(g->str() == before);
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("the training flag is not a literal"));
}

TEST_CASE("bn-inference and remove-dropout give a training-mode trace the eval model's outputs") {
  const auto& f = test::fixture("train_mode_trace");
  Optimizer opt = Optimizer::load(f.path);
  auto report = test::runChecked(opt.model(), "remove-dropout,bn-inference");
  CHECK(test::counter(report, "bn-inference", "converted") == 1);
  torch::jit::Module reference = torch::jit::load(test::fixture("train_mode_eval_reference").path);
  reference.eval();
  torch::jit::Module optimized = opt.exportModule();
  auto inputs = verify::makeInputs(f.inputs, 3);
  auto cmp = verify::compareOutputs(test::runForward(optimized, inputs), test::runForward(reference, inputs),
                                    verify::Tolerance{1e-6, 1e-6});
  INFO(cmp.summary());
  CHECK(cmp.withinTolerance());
}
