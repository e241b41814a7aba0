// fold-conv-bn: fires on every conv kind, structure, numerics, declines.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace {

// Imports a fixture, runs `pipeline`, checks the numerics, returns the optimizer.
Optimizer runOnFixture(const std::string& name, const std::string& pipeline, rewriters::RunReport* report = nullptr) {
  const auto& f = test::fixture(name);
  Optimizer opt = Optimizer::load(f.path);
  auto r = opt.run(pipeline);
  if (report) *report = r;
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(name << ": " << v.summary);
  CHECK(v.passed);
  return opt;
}

}  // namespace

TEST_CASE("fold-conv-bn folds conv2d bn into one conv with a bias") {
  rewriters::RunReport report;
  Optimizer opt = runOnFixture("resnet18_script", "canonicalize,fold-conv-bn,dce", &report);
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 20);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: get_attr["conv1.weight.bnfold"]
    # CHECK: get_attr["conv1.bias.bnfold"]
    # CHECK: aten::conv2d(%x.1, %conv1.weight.bnfold, %conv1.bias.bnfold
    # CHECK-NOT: aten::batch_norm
    # CHECK-NOT: aten::add(
  )");
}

TEST_CASE("fold-conv-bn handles traced models with _convolution") {
  rewriters::RunReport report;
  Optimizer opt = runOnFixture("resnet18_trace", "fold-conv-bn,dce", &report);
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 20);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
}

TEST_CASE("fold-conv-bn handles conv1d conv3d and grouped transposed convs") {
  for (const char* name : {"conv1d_bn", "conv3d_bn", "conv_transpose2d_bn", "grouped_convs", "bn_no_affine"}) {
    DYNAMIC_SECTION(name) {
      rewriters::RunReport report;
      Optimizer opt = runOnFixture(name, "canonicalize,fold-conv-bn,dce", &report);
      CHECK(test::counter(report, "fold-conv-bn", "folded") >= 1);
      CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
    }
  }
}

TEST_CASE("fold-conv-bn gives a conv without bias a bias") {
  auto opt = runOnFixture("bn_no_affine", "canonicalize,fold-conv-bn,dce");
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: get_attr["conv.bias.bnfold"]
    # CHECK: aten::conv2d(%x.1, %conv.weight.bnfold, %conv.bias.bnfold
  )");
}

TEST_CASE("fold-conv-bn folds one conv applied twice into two separate copies") {
  rewriters::RunReport report;
  Optimizer opt = runOnFixture("conv_twice_two_bns", "canonicalize,fold-conv-bn,dce", &report);
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 2);
  const auto& constants = *opt.model().constants;
  CHECK(constants.contains("conv.weight.bnfold"));
  CHECK(constants.contains("conv.weight.bnfold.1"));
}

TEST_CASE("fold-conv-bn never mutates a weight shared by two convs") {
  const auto& f = test::fixture("shared_weight_convs");
  Optimizer opt = Optimizer::load(f.path);
  const at::Tensor before = opt.model().constants->tensor("w").clone();
  auto report = opt.run("canonicalize,fold-conv-bn,dce");
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 1);
  CHECK(torch::equal(opt.model().constants->tensor("w"), before));
  // The second conv still reads the original weight.
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: aten::conv2d(%x.1, %w.bnfold, %w.bias.bnfold
    # CHECK: aten::conv2d(
    # CHECK-SAME: , %w, None,
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("DoesNotFoldWhenConvOutputReused") {
  const auto& f = test::fixture("conv_reused_output");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  auto report = opt.run("canonicalize,fold-conv-bn", &ctx);
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 0);
  CHECK(test::counter(report, "fold-conv-bn", "declined") == 1);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 1);
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("the conv's output has another user"));
}

TEST_CASE("DoesNotFoldBnAfterCat") {
  const auto& f = test::fixture("bn_after_cat");
  Optimizer opt = Optimizer::load(f.path);
  auto report = opt.run("canonicalize,fold-conv-bn");
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 0);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 1);
}

namespace {
const char* kConvBn =
    "graph(%x : Tensor):\n"
    "  %w : Tensor = get_attr[\"conv.weight\"]\n"
    "  %m : Tensor = get_attr[\"bn.running_mean\"]\n"
    "  %v : Tensor = get_attr[\"bn.running_var\"]\n"
    "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n"
    "  %z : Tensor = aten::batch_norm(%y, None, None, %m, %v, TRAINING, 0.1, 1e-05, True)\n"
    "  output(%z)\n";

std::unique_ptr<ir::Graph> convBnGraph(bool training, bool constantStats = true) {
  auto constants = std::make_shared<ir::ConstantTable>();
  constants->set("conv.weight", torch::randn({4, 3, 3, 3}));
  constants->set("bn.running_mean", torch::randn({4}));
  constants->set("bn.running_var", torch::rand({4}) + 0.5);
  std::string text = kConvBn;
  text.replace(text.find("TRAINING"), 8, training ? "True" : "False");
  if (!constantStats) {
    text.replace(text.find("graph(%x : Tensor)"), 18, "graph(%x : Tensor, %mm : Tensor)");
    text.replace(text.find("%m, %v"), 6, "%mm, %v");
  }
  ir::ParseOptions opts;
  opts.constants = constants;
  return ir::parseGraph(text, opts);
}
}  // namespace

TEST_CASE("DoesNotFoldTrainingModeBatchNorm") {
  auto g = convBnGraph(true);
  rewriters::PassContext ctx;
  auto report = test::runChecked(*g, "fold-conv-bn", &ctx);
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 0);
  CHECK_THAT(ctx.declines().at(0), Catch::Contains("training mode (run bn-inference first)"));
  // bn-inference then fold-conv-bn does fold it.
  auto g2 = convBnGraph(true);
  auto report2 = test::runPipeline(*g2, "bn-inference,fold-conv-bn");
  CHECK(test::counter(report2, "fold-conv-bn", "folded") == 1);
}

TEST_CASE("DoesNotFoldNonConstantStatistics") {
  auto g = convBnGraph(false, /*constantStats=*/false);
  rewriters::PassContext ctx;
  auto report = test::runChecked(*g, "fold-conv-bn", &ctx);
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 0);
  CHECK_THAT(ctx.declines().at(0), Catch::Contains("running statistics are not constants"));
}

TEST_CASE("fold-conv-bn matches the float64 formula") {
  auto g = convBnGraph(false);
  const auto& c = g->constants();
  const at::Tensor w = c.tensor("conv.weight"), mean = c.tensor("bn.running_mean"), var = c.tensor("bn.running_var");
  test::runChecked(*g, "fold-conv-bn");
  const at::Tensor scale = (var.to(at::kDouble) + 1e-5).rsqrt();
  const at::Tensor expectedW = (w.to(at::kDouble) * scale.view({4, 1, 1, 1})).to(at::kFloat);
  const at::Tensor expectedB = (-mean.to(at::kDouble) * scale).to(at::kFloat);
  CHECK(torch::equal(c.tensor("conv.weight.bnfold"), expectedW));
  CHECK(torch::equal(c.tensor("conv.bias.bnfold"), expectedB));
}

TEST_CASE("fold-conv-bn logs every edit it makes on real fixtures") {
  // resnet18_trace keeps aten::_convolution (no canonicalize before).
  for (const char* name : {"resnet18_script", "resnet18_trace", "conv1d_bn", "conv3d_bn", "conv_transpose2d_bn",
                           "grouped_convs", "bn_no_affine", "conv_twice_two_bns", "shared_weight_convs"}) {
    DYNAMIC_SECTION(name) {
      const auto& f = test::fixture(name);
      Optimizer opt = Optimizer::load(f.path);
      if (std::string(name) != "resnet18_trace") opt.run("canonicalize");
      rewriters::PassContext ctx;
      auto report = opt.run("fold-conv-bn", &ctx, test::checkedInstrumentation());
      CHECK(test::counter(report, "fold-conv-bn", "folded") >= 1);
      CHECK(test::loggedEdits(report) > 0);
      CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
      auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
      INFO(v.summary);
      CHECK(v.passed);
    }
  }
}
