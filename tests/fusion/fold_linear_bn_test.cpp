// fold-linear-bn: needs a proven 2-D input, or LeViT's flatten(0, 1) of a
// proven 3-D linear output.
#include "fusion/bn_math.h"
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace {

// A bias-free linear, flattened (`flattenDims`) and batch-normed: %y the
// linear, %f its flatten, %z the BatchNorm; `tail` reads them and outputs.
test::ParsedGraph linearNormGraph(const std::string& flattenDims, const std::string& tail,
                                  const std::string& moreInputs = "") {
  return test::parseWithConstants(
      "graph(%x : Tensor" + moreInputs + "):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %m : Tensor = get_attr[\"bn.running_mean\"]\n"
      "  %v : Tensor = get_attr[\"bn.running_var\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  %f : Tensor = aten::flatten.using_ints(%y, " + flattenDims + ")\n"
      "  %z : Tensor = aten::batch_norm(%f, None, None, %m, %v, False, 0.1, 1e-05, True)\n" + tail,
      {{"fc.weight", torch::randn({6, 12})}, {"bn.running_mean", torch::randn({6})},
       {"bn.running_var", torch::rand({6}) + 0.5}});
}

}  // namespace

TEST_CASE("fold-linear-bn folds with shape metadata from shape-prop") {
  const auto& f = test::fixture("linear_bn1d");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  auto report = opt.run("shape-prop,fold-linear-bn,dce", &ctx);
  CHECK(test::counter(report, "fold-linear-bn", "folded") == 1);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: aten::linear(%input.1, %0.weight.bnfold, %0.bias.bnfold)
    # CHECK-NOT: aten::batch_norm
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("fold-linear-bn folds after flatten without metadata") {
  auto constants = std::make_shared<ir::ConstantTable>();
  constants->set("fc.weight", torch::randn({6, 12}));
  constants->set("bn.running_mean", torch::randn({6}));
  constants->set("bn.running_var", torch::rand({6}) + 0.5);
  ir::ParseOptions opts;
  opts.constants = constants;
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %m : Tensor = get_attr[\"bn.running_mean\"]\n"
      "  %v : Tensor = get_attr[\"bn.running_var\"]\n"
      "  %f : Tensor = aten::flatten.using_ints(%x, 1, -1)\n"
      "  %y : Tensor = aten::linear(%f, %w, None)\n"
      "  %z : Tensor = aten::batch_norm(%y, None, None, %m, %v, False, 0.1, 1e-05, True)\n"
      "  output(%z)\n", opts);
  auto x = torch::randn({2, 3, 4});
  auto expected = torch::batch_norm(torch::linear(x.flatten(1), constants->tensor("fc.weight")), {}, {},
                                    constants->tensor("bn.running_mean"), constants->tensor("bn.running_var"),
                                    false, 0.1, 1e-5, true);
  auto report = test::runChecked(*g, "fold-linear-bn");
  REQUIRE(test::counter(report, "fold-linear-bn", "folded") == 1);
  auto actual = torch::linear(x.flatten(1), constants->tensor("fc.weight.bnfold"), constants->tensor("fc.bias.bnfold"));
  CHECK(torch::allclose(actual, expected, 1e-5, 1e-6));
}

TEST_CASE("DoesNotFoldLinearBnWithUnknownRank") {
  const auto& f = test::fixture("linear_bn1d");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  auto report = opt.run("fold-linear-bn", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "fold-linear-bn", "folded") == 0);
  REQUIRE_FALSE(ctx.declines().empty());
  CHECK_THAT(ctx.declines()[0], Catch::Contains("not known to be 2-D"));
}

TEST_CASE("fold-linear-bn logs every edit it makes on a real fixture") {
  const auto& f = test::fixture("linear_bn1d");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("shape-prop", &ctx);
  auto report = opt.run("fold-linear-bn", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "fold-linear-bn", "folded") == 1);
  CHECK(test::loggedEdits(report) > 0);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("FoldLinearBnDoesNotFoldWhenTheLinearOutputIsReused") {
  auto constants = std::make_shared<ir::ConstantTable>();
  constants->set("fc.weight", torch::randn({6, 12}));
  constants->set("bn.running_mean", torch::randn({6}));
  constants->set("bn.running_var", torch::rand({6}) + 0.5);
  ir::ParseOptions opts;
  opts.constants = constants;
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %m : Tensor = get_attr[\"bn.running_mean\"]\n"
      "  %v : Tensor = get_attr[\"bn.running_var\"]\n"
      "  %f : Tensor = aten::flatten.using_ints(%x, 1, -1)\n"
      "  %y : Tensor = aten::linear(%f, %w, None)\n"
      "  %z : Tensor = aten::batch_norm(%y, None, None, %m, %v, False, 0.1, 1e-05, True)\n"
      "  %s : Tensor = aten::add.Tensor(%z, %y, 1)\n"
      "  output(%s)\n", opts);
  rewriters::PassContext ctx;
  auto report = test::runChecked(*g, "fold-linear-bn", &ctx);
  CHECK_FALSE(report.changed());
  CHECK(test::countOps(*g, "aten::batch_norm") == 1);
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("the linear's output has another user"));
}

TEST_CASE("the fold tail scales big weights chunk by chunk, bitwise equal to the whole float64 product") {
  // Row-major float32 weights take one pass; other dtypes and layouts go
  // through a reused float64 buffer in chunks of 2 MB, sized here so that
  // several chunks (and, for the transposed conv, group boundaries inside a
  // chunk's reach) are crossed.
  SECTION("conv or linear weight: factors along dim 0") {
    const at::Tensor weight = torch::randn({700, 1024});
    const at::Tensor scale = torch::rand({700}, torch::kDouble) + 0.5;
    const at::Tensor expected = (weight.to(at::kDouble) * scale.reshape({700, 1})).to(at::kFloat);
    CHECK(fusion::foldWeight(weight, scale, /*transposed=*/false, 1).equal(expected));
  }
  SECTION("transposed conv weight [Cin, Cout/g, k, k], 4 groups: factors along dim 1, per group") {
    const int64_t groups = 4, cin = 64, coutPerGroup = 8;
    const at::Tensor weight = torch::randn({cin, coutPerGroup, 32, 32});
    const at::Tensor scale = torch::rand({groups * coutPerGroup}, torch::kDouble) + 0.5;
    const at::Tensor expected = (weight.to(at::kDouble).reshape({groups, cin / groups, coutPerGroup, 32, 32}) *
                                 scale.reshape({groups, 1, coutPerGroup, 1, 1}))
                                    .reshape(weight.sizes())
                                    .to(at::kFloat);
    CHECK(fusion::foldWeight(weight, scale, /*transposed=*/true, groups).equal(expected));
  }
  SECTION("a float64 transposed weight (the chunked path, other dtypes): chunks stop at group boundaries") {
    const at::Tensor weight = torch::randn({64, 8, 24, 24}, torch::kDouble);
    const at::Tensor scale = torch::rand({32}, torch::kDouble) + 0.5;
    const at::Tensor expected =
        (weight.reshape({4, 16, 8, 24, 24}) * scale.reshape({4, 1, 8, 1, 1})).reshape(weight.sizes());
    CHECK(fusion::foldWeight(weight, scale, /*transposed=*/true, 4).equal(expected));
  }
  SECTION("a channels-last weight keeps its memory format (the chunked path)") {
    const at::Tensor weight = torch::randn({300, 64, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor scale = torch::rand({300}, torch::kDouble) + 0.5;
    const at::Tensor folded = fusion::foldWeight(weight, scale, false, 1);
    CHECK(folded.is_contiguous(at::MemoryFormat::ChannelsLast));
    CHECK(folded.equal((weight.to(at::kDouble) * scale.reshape({300, 1, 1, 1})).to(at::kFloat)));
  }
}

TEST_CASE("fold-linear-bn folds LeViT's LinearNorm: a BatchNorm1d over the flattened [B, N, C] output") {
  const auto& f = test::fixture("linear_norm_trace");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  auto report = opt.run("shape-prop", &ctx);
  report = opt.run("fold-linear-bn,dce", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "fold-linear-bn", "folded-flattened") == 2);
  // reshape_as(flatten(y), y) is y itself: both views go, and the hardswish
  // reads the folded linear directly (tuned-kernels can then fuse it).
  CHECK(test::counter(report, "fold-linear-bn", "view-back-dropped") == 2);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::batch_norm") == 0);
  CHECK(test::countOps(g, "aten::linear") == 2);
  CHECK(test::countOps(g, "aten::reshape_as") == 0);
  CHECK(test::countOps(g, "aten::flatten") == 0);
  int activations = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("aten::hardswish")) return;
    ++activations;
    CHECK(n->argValue(0)->node()->is("aten::linear"));
  });
  CHECK(activations == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 3);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("fold-linear-bn keeps the view back of a LinearNorm where it is not the linear's own output") {
  auto graphWith = [](const std::string& tail) { return linearNormGraph("0, 1", tail, ", %other : Tensor"); };
  auto run = [](test::ParsedGraph& p) {
    rewriters::PassContext ctx;
    ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 5, 12}), torch::randn({2, 5, 6})};
    return test::runPipeline(*p.graph, "shape-prop,fold-linear-bn", &ctx);
  };
  SECTION("shaped like another tensor: a view of the folded result, not the linear's output") {
    auto p = graphWith("  %r : Tensor = aten::reshape_as(%z, %other)\n  output(%r)\n");
    auto report = run(p);
    CHECK(test::counter(report, "fold-linear-bn", "folded-flattened") == 1);
    CHECK(test::counter(report, "fold-linear-bn", "view-back-dropped") == 0);
    CHECK(test::countOps(*p.graph, "aten::reshape_as") == 1);
  }
  SECTION("written in place afterwards: the view and the linear's output would no longer be one value") {
    auto p = graphWith("  %r : Tensor = aten::reshape_as(%z, %y)\n  %s : Tensor = aten::relu_(%r)\n  output(%s)\n");
    auto report = run(p);
    CHECK(test::counter(report, "fold-linear-bn", "folded-flattened") == 1);
    CHECK(test::counter(report, "fold-linear-bn", "view-back-dropped") == 0);
    CHECK(test::countOps(*p.graph, "aten::reshape_as") == 1);
  }
}

TEST_CASE("FoldLinearBnDoesNotFoldAFlattenThatMixesFeaturesOrAnUnknownRank") {
  auto graphWith = [](const std::string& flattenDims) { return linearNormGraph(flattenDims, "  output(%z)\n"); };
  SECTION("the rank is unknown without shape-prop") {
    auto p = graphWith("0, 1");
    rewriters::PassContext ctx;
    CHECK_FALSE(test::runChecked(*p.graph, "fold-linear-bn", &ctx).changed());
    CHECK(test::declinedWith(ctx, "not known to be 3-D"));
  }
  SECTION("a 4-D output flattened (0, 1) puts N, not the features, on dimension 1") {
    auto p = graphWith("0, 1");
    rewriters::PassContext ctx;
    ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3, 6, 12})};
    auto report = test::runPipeline(*p.graph, "shape-prop,fold-linear-bn", &ctx);
    CHECK(test::countOps(*p.graph, "aten::batch_norm") == 1);
    CHECK(test::declinedWith(ctx, "does not make the linear's features its dimension 1"));
  }
}
