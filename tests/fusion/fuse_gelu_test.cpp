// fuse-gelu: GELU written out in elementwise ops becomes aten::gelu. Fires on
// GPT-2's traced tanh form and BERT's scripted erf form (structure and
// numerics against the original), on either association of the product, and
// the named cases where it must not fire.
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace ptopt;

namespace {

// Runs -O1's analysis and the pass on a fixture, as the preset does.
rewriters::RunReport runOnFixture(Optimizer& opt, const test::Fixture& f, rewriters::PassContext& ctx) {
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("canonicalize,shape-prop", &ctx);
  return opt.run("fuse-gelu,dce", &ctx, test::checkedInstrumentation());
}

// The GPT-2 form on %h (the 0-dim constants as get_attr values), the
// product associated as `(h * 0.5) * (1 + tanh(...))`; `extraUse` adds lines
// before the output.
std::string tanhGeluGraph(const std::string& extraUse) {
  return "graph(%h : Tensor):\n"
         "  %half : Tensor = get_attr[\"half\"]\n"
         "  %one : Tensor = get_attr[\"one\"]\n"
         "  %root : Tensor = get_attr[\"root\"]\n"
         "  %kappa : Tensor = get_attr[\"kappa\"]\n"
         "  %a : Tensor = aten::mul.Tensor(%h, %half)\n"
         "  %p : Tensor = aten::pow.Tensor_Scalar(%h, 3.)\n"
         "  %k : Tensor = aten::mul.Tensor(%p, %kappa)\n"
         "  %s : Tensor = aten::add.Tensor(%h, %k, 1)\n"
         "  %r : Tensor = aten::mul.Tensor(%s, %root)\n"
         "  %t : Tensor = aten::tanh(%r)\n"
         "  %w : Tensor = aten::add.Tensor(%t, %one, 1)\n"
         "  %y : Tensor = aten::mul.Tensor(%a, %w)\n" +
         extraUse + "  output(%y)\n";
}

test::ParsedGraph parseTanhGelu(double kappa, const std::string& extraUse = "") {
  return test::parseWithConstants(tanhGeluGraph(extraUse),
                                  {{"half", torch::tensor(0.5)},
                                   {"one", torch::tensor(1.0)},
                                   {"root", torch::tensor(std::sqrt(2.0 / M_PI))},
                                   {"kappa", torch::tensor(kappa)}});
}

// shape-prop on an input of `shape`, then fuse-gelu; the context keeps the declines.
rewriters::RunReport runWithShapes(ir::Graph& g, const at::Tensor& x, rewriters::PassContext& ctx) {
  ctx.exampleInputs = std::vector<c10::IValue>{x};
  return test::runPipeline(g, "shape-prop,fuse-gelu", &ctx);
}

// The approximate= literal of every aten::gelu, in program order.
std::vector<std::string> geluApproximations(const ir::Graph& g) {
  std::vector<std::string> out;
  g.walk([&](ir::Node* n) {
    if (n->is("aten::gelu") && n->numArgs() == 2 && n->arg(1).isLiteral() && n->arg(1).literal().is<std::string>())
      out.push_back(n->arg(1).literal().as<std::string>());
  });
  return out;
}

bool declined(const rewriters::PassContext& ctx, const std::string& text) {
  for (const auto& d : ctx.declines())
    if (d.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("fuse-gelu turns GPT-2's traced tanh GELU into gelu(approximate='tanh')") {
  const auto& f = test::fixture("gelu_tanh_trace");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  auto report = runOnFixture(opt, f, ctx);
  CHECK(test::counter(report, "fuse-gelu", "fused-tanh") == 1);
  const ir::Graph& g = opt.model().forward();
  CHECK(geluApproximations(g) == std::vector<std::string>{"tanh"});
  CHECK(test::countOps(g, "aten::linear") == 2);
  for (const char* op : {"aten::tanh", "aten::pow", "aten::mul", "aten::add"}) CHECK(test::countOps(g, op) == 0);
  auto v = opt.verify(f.inputs, {}, 3);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("fuse-gelu turns the scripted erf GELU into gelu()") {
  const auto& f = test::fixture("gelu_erf_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  auto report = runOnFixture(opt, f, ctx);
  CHECK(test::counter(report, "fuse-gelu", "fused-erf") == 1);
  const ir::Graph& g = opt.model().forward();
  CHECK(geluApproximations(g) == std::vector<std::string>{"none"});
  for (const char* op : {"aten::erf", "aten::div", "aten::mul", "aten::add"}) CHECK(test::countOps(g, op) == 0);
  auto v = opt.verify(f.inputs, {}, 3);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("fuse-gelu matches x * (0.5 * (1 + tanh(...))) with the operands in either order") {
  auto g = ir::parseGraph(
      "graph(%h : Tensor):\n"
      "  %p : Tensor = aten::pow.Tensor_Scalar(%h, 3)\n"
      "  %k : Tensor = aten::mul.Scalar(%p, 0.044715)\n"
      "  %s : Tensor = aten::add.Tensor(%k, %h, 1)\n"
      "  %r : Tensor = aten::mul.Scalar(%s, 0.7978845608028654)\n"
      "  %t : Tensor = aten::tanh(%r)\n"
      "  %w : Tensor = aten::add.Scalar(%t, 1, 1)\n"
      "  %a : Tensor = aten::mul.Scalar(%w, 0.5)\n"
      "  %y : Tensor = aten::mul.Tensor(%h, %a)\n"
      "  output(%y)\n");
  const at::Tensor x = torch::randn({4, 32}) * 3;
  const at::Tensor expected = test::runGraph(*g, {x}).toTensor();
  rewriters::PassContext ctx;
  auto report = runWithShapes(*g, x, ctx);
  CHECK(test::counter(report, "fuse-gelu", "fused-tanh") == 1);
  CHECK(geluApproximations(*g) == std::vector<std::string>{"tanh"});
  for (const char* op : {"aten::tanh", "aten::pow", "aten::mul", "aten::add"}) CHECK(test::countOps(*g, op) == 0);
  CHECK(torch::allclose(test::runGraph(*g, {x}).toTensor(), expected, 1e-5, 1e-6));
}

TEST_CASE("FuseGeluDoesNotFireWhenAnIntermediateHasAnotherUser") {
  auto p = parseTanhGelu(0.044715, "  %extra : Tensor = aten::add.Tensor(%y, %t, 1)\n");
  // The tanh feeds %extra too: replacing the product would leave it
  // computed anyway, and erasing it is wrong.
  rewriters::PassContext ctx;
  auto report = runWithShapes(*p.graph, torch::randn({2, 8}), ctx);
  CHECK(test::counter(report, "fuse-gelu", "fused-tanh") == 0);
  CHECK(test::countOps(*p.graph, "aten::tanh") == 1);
  CHECK(declined(ctx, "the tanh has another user"));
}

TEST_CASE("FuseGeluDoesNotFireOnOtherConstants") {
  // 0.044 is not GELU's cubic coefficient: a different function.
  auto p = parseTanhGelu(0.044);
  rewriters::PassContext ctx;
  auto report = runWithShapes(*p.graph, torch::randn({2, 8}), ctx);
  CHECK(test::counter(report, "fuse-gelu", "fused-tanh") == 0);
  CHECK(test::countOps(*p.graph, "aten::gelu") == 0);
}

TEST_CASE("FuseGeluDoesNotFireWithoutTheInputsDtype") {
  // Without shape-prop nothing says %h is floating point of rank 1 or more.
  auto p = parseTanhGelu(0.044715);
  rewriters::PassContext ctx;
  auto report = test::runPipeline(*p.graph, "fuse-gelu", &ctx);
  CHECK_FALSE(report.changed());
  CHECK(declined(ctx, "the dtype of its input is unknown"));
}

TEST_CASE("FuseGeluDoesNotFireOnA0DimInput") {
  // A 0-dim float32 x times a 0-dim float64 constant is float64: gelu(x)
  // would be float32.
  auto p = parseTanhGelu(0.044715);
  rewriters::PassContext ctx;
  auto report = runWithShapes(*p.graph, torch::tensor(0.3f), ctx);
  CHECK(test::countOps(*p.graph, "aten::gelu") == 0);
  CHECK(declined(ctx, "rank 1 or more"));
}
