// fold-conv-affine, fuse-add-relu, drop-zero-bias, bn-to-affine.
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace {

test::ParsedGraph build(const std::string& text, const std::vector<std::pair<std::string, at::Tensor>>& constants) {
  return test::parseWithConstants(text, constants);
}

at::Tensor runGraph(ir::Graph& g, const at::Tensor& x) { return test::runGraph(g, {x}).toTensor(); }

const char* kConvAffine =
    "graph(%x : Tensor):\n"
    "  %w : Tensor = get_attr[\"conv.weight\"]\n"
    "  %b : Tensor = get_attr[\"conv.bias\"]\n"
    "  %s : Tensor = get_attr[\"scale\"]\n"
    "  %y : Tensor = aten::conv2d(%x, %w, %b, [1, 1], [1, 1], [1, 1], 1)\n"
    "  %z : Tensor = aten::mul.Tensor(%y, %s)\n"
    "  %t : Tensor = aten::add.Scalar(%z, 0.5, 1)\n"
    "  %u : Tensor = aten::div.Scalar(%t, 4.0)\n"
    "  output(%u)\n";

}  // namespace

TEST_CASE("fold-conv-affine folds a mul add div chain into the conv") {
  auto b = build(kConvAffine, {{"conv.weight", torch::randn({4, 3, 3, 3})},
                               {"conv.bias", torch::randn({4})},
                               {"scale", torch::rand({4, 1, 1}) + 0.5}});
  auto x = torch::randn({1, 3, 8, 8});
  auto expected = runGraph(*b.graph, x);
  auto report = test::runPipeline(*b.graph, "fold-conv-affine");
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 3);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::conv2d
    # CHECK-NOT: aten::mul
    # CHECK-NOT: aten::add
    # CHECK-NOT: aten::div
  )");
  CHECK(torch::allclose(runGraph(*b.graph, x), expected, 1e-4, 1e-5));
}

TEST_CASE("FoldConvAffineDoesNotFoldNonChannelConstants") {
  auto b = build(kConvAffine, {{"conv.weight", torch::randn({4, 3, 3, 3})},
                               {"conv.bias", torch::randn({4})},
                               {"scale", torch::rand({1, 1, 8}) + 0.5}});  // per column, not per channel
  rewriters::PassContext ctx;
  auto report = test::runPipeline(*b.graph, "fold-conv-affine", &ctx);
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 0);
  CHECK_THAT(ctx.declines().at(0), Catch::Contains("does not broadcast per output channel"));
}

namespace {
const char* kConstantOpConv =
    "graph(%x : Tensor):\n"
    "  %w : Tensor = get_attr[\"conv.weight\"]\n"
    "  %cb : Tensor = get_attr[\"conv.bias\"]\n"
    "  %c : Tensor = get_attr[\"c\"]\n"
    "  %y : Tensor = aten::conv2d(%x, %w, %cb, [1, 1], [1, 1], [1, 1], 1)\n"
    "  %z : Tensor = OP\n"
    "  output(%z)\n";
std::string constantOpConv(const std::string& op) {
  std::string s = kConstantOpConv;
  return s.replace(s.find("OP"), 2, op);
}
}  // namespace

TEST_CASE("fold-conv-affine folds c - alpha * conv by negating the weight") {
  auto b = build(constantOpConv("aten::sub.Tensor(%c, %y, 2)"),
                 {{"conv.weight", torch::randn({4, 3, 3, 3})}, {"conv.bias", torch::randn({4})},
                  {"c", torch::randn({4, 1, 1})}});
  auto x = torch::randn({1, 3, 8, 8});
  auto expected = runGraph(*b.graph, x);
  auto report = test::runPipeline(*b.graph, "fold-conv-affine");
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 1);
  CHECK(test::countOps(*b.graph, "aten::sub") == 0);
  CHECK(torch::allclose(runGraph(*b.graph, x), expected, 1e-4, 1e-5));
}

TEST_CASE("FoldConvAffineDoesNotFoldConstantDividedByConv") {
  auto b = build(constantOpConv("aten::div.Tensor(%c, %y)"),
                 {{"conv.weight", torch::randn({4, 3, 3, 3})}, {"conv.bias", torch::randn({4})},
                  {"c", torch::randn({4, 1, 1})}});
  rewriters::PassContext ctx;
  auto report = test::runPipeline(*b.graph, "fold-conv-affine", &ctx);
  CHECK_FALSE(report.changed());
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines().front(), Catch::Contains("c / conv is not affine"));
}

TEST_CASE("fuse-add-relu fuses resnet's residual add and relu") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  auto report = opt.run("fuse-add-relu");
  CHECK(test::counter(report, "fuse-add-relu", "fused") == 8);
  CHECK(test::countOps(opt.model().forward(), "aten::_add_relu_") == 8);
  auto v = opt.verify(f.inputs, {}, 2);
  INFO(v.summary);
  CHECK(v.bitwiseEqual);
}

TEST_CASE("FuseAddReluDoesNotFuseWhenTheSumIsReused") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %s : Tensor = aten::add.Tensor(%x, %y, 1)\n"
      "  %r : Tensor = aten::relu(%s)\n"
      "  %o : Tensor = aten::mul.Tensor(%r, %s)\n"
      "  output(%o)\n");
  auto report = test::runPipeline(*g, "fuse-add-relu");
  CHECK_FALSE(report.changed());
}

TEST_CASE("drop-zero-bias drops an all-zero bias and keeps others") {
  auto b = build(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %zero : Tensor = get_attr[\"fc.bias\"]\n"
      "  %w2 : Tensor = get_attr[\"fc2.weight\"]\n"
      "  %b2 : Tensor = get_attr[\"fc2.bias\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, %zero)\n"
      "  %z : Tensor = aten::linear(%y, %w2, %b2)\n"
      "  output(%z)\n",
      {{"fc.weight", torch::randn({5, 4})}, {"fc.bias", torch::zeros({5})},
       {"fc2.weight", torch::randn({3, 5})}, {"fc2.bias", torch::randn({3})}});
  auto x = torch::randn({2, 4});
  auto expected = runGraph(*b.graph, x);
  auto report = test::runPipeline(*b.graph, "drop-zero-bias");
  CHECK(test::counter(report, "drop-zero-bias", "dropped") == 1);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::linear(%x, %w, None)
    # CHECK: aten::linear(%y, %w2, %b2)
  )");
  CHECK(torch::equal(runGraph(*b.graph, x), expected));
}

TEST_CASE("bn-to-affine declines by default and converts with force") {
  const auto& f = test::fixture("bn_after_cat");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  auto report = opt.run("bn-to-affine", &ctx);
  CHECK_FALSE(report.changed());
  CHECK_THAT(ctx.declines().at(0), Catch::Contains("batch_norm is faster"));

  rewriters::PassContext withShapes;
  withShapes.exampleInputs = verify::makeInputs(f.inputs, 0);
  auto forced = opt.run("canonicalize,shape-prop,bn-to-affine{force=true},dce", &withShapes);
  CHECK(test::counter(forced, "bn-to-affine", "converted") == 1);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
  CHECK(test::countOps(opt.model().forward(), "aten::addcmul") == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}
