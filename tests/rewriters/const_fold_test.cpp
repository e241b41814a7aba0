// const-fold: folds constant subgraphs with the real operators; named
// does-not-fire cases; numerics unchanged.
#include "ir/interpreter.h"
#include "ir/text.h"
#include "rewriters/const_fold.h"
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"
#include "tests/support/fixtures.h"
#include "tests/support/ir_check.h"
#include "api/api.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

struct Folded {
  PassResult result;
  PassContext ctx;
};

Folded runConstFold(ir::Graph& g, const std::map<std::string, std::string>& options = {}) {
  // Through the PassManager with the edit-log check (and the IR lint) on.
  Folded f;
  f.result = test::runPassChecked(g, "const-fold", f.ctx, options);
  return f;
}

std::unique_ptr<ir::Graph> parseWith(const std::string& text,
                                     const std::map<std::string, at::Tensor>& constants) {
  ir::ParseOptions opts;
  opts.constants = std::make_shared<ir::ConstantTable>();
  for (const auto& [name, t] : constants) opts.constants->set(name, t);
  return ir::parseGraph(text, opts);
}

}  // namespace

TEST_CASE("const-fold folds a scaled weight into a new named constant") {
  const at::Tensor w = torch::randn({8, 3, 3, 3});
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %conv1.weight : Tensor = get_attr[\"conv1.weight\"]\n"
      "  %w2 : Tensor = aten::mul.Scalar(%conv1.weight, 2.0)\n"
      "  %y : Tensor = aten::conv2d(%x, %w2, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  output(%y)\n",
      {{"conv1.weight", w.clone()}});
  auto before = ir::cloneGraph(*g);
  const at::Tensor x = torch::randn({1, 3, 8, 8});
  const at::Tensor expected = ir::Interpreter(*before).run({x}).at(0).toTensor();

  Folded f = runConstFold(*g);
  CHECK(f.result.changed);
  CHECK(f.result.counter("folded") == 1);
  test::checkIR(g->str(), R"(
    # CHECK: get_attr["conv1.weight.folded"]
    # CHECK-NOT: aten::mul
    # CHECK: aten::conv2d(%x, %conv1.weight.folded
  )");
  CHECK(g->str().find("get_attr[\"conv1.weight\"]") == std::string::npos);  // no longer used
  CHECK(torch::equal(g->constants().tensor("conv1.weight.folded"), w * 2.0));
  CHECK(torch::equal(g->constants().tensor("conv1.weight"), w));  // never mutated
  // Same numerics as before folding (the fold ran the same kernel).
  CHECK(torch::equal(ir::Interpreter(*g).run({x}).at(0).toTensor(), expected));
}

TEST_CASE("const-fold writes literal results into their users") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : int = aten::add.int(2, 3)\n"
      "  %b : int = aten::mul.int(%a, 4)\n"
      "  %l : List[int] = prim::ListConstruct(%a, %b)\n"
      "  %y : Tensor = aten::mul.Scalar(%x, %b)\n"
      "  %z : Tensor = aten::view(%y, %l)\n"
      "  output(%z)\n");
  Folded f = runConstFold(*g);
  CHECK(f.result.changed);
  CHECK(f.result.counter("folded") == 3);
  test::checkIR(g->str(), R"(
    # CHECK-NOT: aten::add.int
    # CHECK-NOT: prim::ListConstruct
    # CHECK: aten::mul.Scalar(%x, 20)
    # CHECK-NEXT: aten::view(%y, [5, 20])
  )");
}

TEST_CASE("const-fold folds chains through non-literal intermediate results") {
  const at::Tensor a = torch::randn({2, 3});
  const at::Tensor b = torch::randn({4, 3});
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = get_attr[\"a\"]\n"
      "  %b : Tensor = get_attr[\"b\"]\n"
      "  %l : List[Tensor] = prim::ListConstruct(%a, %b)\n"
      "  %c : Tensor = aten::cat(%l, 0)\n"
      "  %n : int = aten::size.int(%c, 0)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %c, %n)\n"
      "  output(%y)\n",
      {{"a", a}, {"b", b}});
  Folded f = runConstFold(*g);
  CHECK(f.result.counter("folded") == 2);  // cat, size
  test::checkIR(g->str(), R"(
    # CHECK: get_attr["a.folded"]
    # CHECK-NOT: prim::ListConstruct
    # CHECK-NOT: aten::cat
    # CHECK: aten::add.Tensor(%x, %a.folded, 6)
  )");
  CHECK(torch::equal(g->constants().tensor("a.folded"), torch::cat({a, b}, 0)));
}

TEST_CASE("const-fold copies results that alias a constant") {
  const at::Tensor w = torch::randn({3, 4});
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %t : Tensor = aten::t(%w)\n"
      "  %y : Tensor = aten::mm(%x, %t)\n"
      "  output(%y)\n",
      {{"w", w}});
  Folded f = runConstFold(*g);
  REQUIRE(f.result.counter("folded") == 1);
  const at::Tensor folded = g->constants().tensor("w.folded");
  CHECK_FALSE(folded.is_alias_of(g->constants().tensor("w")));
  CHECK(torch::equal(folded, w.t()));
  CHECK(folded.strides() == w.t().strides());  // layout kept, so kernels see the same strides
}

TEST_CASE("const-fold copies results that alias a constant through a tuple") {
  const at::Tensor w = torch::randn({3});
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %t : Tuple[Tensor, int] = prim::TupleConstruct(%w, 1)\n"
      "  %e : Tensor = prim::TupleIndex(%t, 0)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %e, 1)\n"
      "  output(%y)\n",
      {{"w", w}});
  Folded f = runConstFold(*g);
  REQUIRE(f.result.counter("folded") == 1);
  CHECK(g->str().find("prim::TupleConstruct") == std::string::npos);  // only the fold used it
  CHECK_FALSE(g->constants().tensor("w.folded").is_alias_of(w));
  CHECK(torch::equal(g->constants().tensor("w.folded"), w));
}

TEST_CASE("const-fold names refolded constants after their source") {
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w.folded\"]\n"
      "  %n : Tensor = aten::neg(%w)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %n, 1)\n"
      "  output(%y)\n",
      {{"w.folded", torch::ones({2})}});
  Folded f = runConstFold(*g);
  CHECK(f.result.counter("folded") == 1);
  CHECK(g->constants().contains("w.folded.1"));
}

TEST_CASE("const-fold results export and reload with the same numerics") {
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %fc.weight : Tensor = get_attr[\"fc.weight\"]\n"
      "  %fc.bias : Tensor = get_attr[\"fc.bias\"]\n"
      "  %wt : Tensor = aten::t(%fc.weight)\n"
      "  %w2 : Tensor = aten::mul.Scalar(%wt, 0.5)\n"
      "  %b2 : Tensor = aten::sub.Scalar(%fc.bias, 1.0, 1)\n"
      "  %y : Tensor = aten::addmm(%b2, %x, %w2, 1, 1)\n"
      "  output(%y)\n",
      {{"fc.weight", torch::randn({5, 4})}, {"fc.bias", torch::randn({5})}});
  const at::Tensor x = torch::randn({3, 4});
  const at::Tensor expected = ir::Interpreter(*g).run({x}).at(0).toTensor();
  Folded f = runConstFold(*g);
  CHECK(f.result.counter("folded") == 3);
  test::checkIR(g->str(), R"(
    # CHECK-NOT: aten::mul
    # CHECK-NOT: aten::sub
    # CHECK: aten::addmm(%fc.bias.folded, %x, %fc.weight.folded.1, 1, 1)
  )");
  // The intermediate (the transposed weight) is not left in the table.
  CHECK_FALSE(g->constants().contains("fc.weight.folded"));
  CHECK(g->constants().contains("fc.weight"));
  ir::Model model;
  model.constants = g->sharedConstants();
  model.methods.emplace_back("forward", std::move(g));
  torch::jit::Module exported = ir::exportModel(model);
  const at::Tensor got = exported.forward({x}).toTensor();
  CHECK(torch::equal(got, expected));
}

TEST_CASE("DoesNotFoldRandomOps") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %r : Tensor = aten::rand([2, 3], None, None, None, None)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %r, 1)\n"
      "  output(%y)\n");
  Folded f = runConstFold(*g);
  CHECK_FALSE(f.result.changed);
  CHECK(g->str().find("aten::rand") != std::string::npos);
  INFO(test::allDeclines(f.ctx));
  CHECK(test::declinedWith(f.ctx, "random"));
}

TEST_CASE("DoesNotFoldMutatedConstant") {
  const at::Tensor w = torch::ones({4});
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %w2 : Tensor = aten::mul.Scalar(%w, 2.0)\n"
      "  %a : Tensor = aten::add_.Scalar(%w, 1.0, 1)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %w2, 1)\n"
      "  output(%y)\n",
      {{"w", w.clone()}});
  Folded f = runConstFold(*g);
  CHECK_FALSE(f.result.changed);
  CHECK(g->str().find("aten::mul.Scalar(%w, 2.0)") != std::string::npos);
  CHECK(torch::equal(g->constants().tensor("w"), w));
  INFO(test::allDeclines(f.ctx));
  CHECK(test::declinedWith(f.ctx, "constant 'w' is written in place"));
}

TEST_CASE("DoesNotFoldResultWrittenInPlace") {
  const at::Tensor w = torch::ones({4});
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %w2 : Tensor = aten::mul.Scalar(%w, 2.0)\n"
      "  %a : Tensor = aten::add_.Tensor(%w2, %x, 1)\n"
      "  output(%w2)\n",
      {{"w", w}});
  Folded f = runConstFold(*g);
  CHECK_FALSE(f.result.changed);
  CHECK(test::declinedWith(f.ctx, "written in place"));
}

TEST_CASE("DoesNotFoldLargeResults") {
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %w2 : Tensor = aten::mul.Scalar(%w, 2.0)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %w2, 1)\n"
      "  output(%y)\n",
      {{"w", torch::ones({16})}});
  Folded f = runConstFold(*g, {{"max-bytes", "16"}});
  CHECK_FALSE(f.result.changed);
  CHECK(f.result.counter("skipped-large") == 1);
  CHECK(test::declinedWith(f.ctx, "over max-bytes=16"));
  CHECK(g->str().find("aten::mul.Scalar") != std::string::npos);
}

TEST_CASE("DoesNotFoldNodesWithBlocks") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %r : int = prim::If(True)\n"
      "    block0():\n"
      "      output(1)\n"
      "    block1():\n"
      "      output(2)\n"
      "  %y : Tensor = aten::mul.Scalar(%x, %r)\n"
      "  output(%y)\n");
  Folded f = runConstFold(*g);
  CHECK_FALSE(f.result.changed);
  CHECK(test::declinedWith(f.ctx, "nested blocks"));
}

TEST_CASE("DoesNotFoldWhenEvaluationFails") {
  auto g = parseWith(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = get_attr[\"a\"]\n"
      "  %b : Tensor = get_attr[\"b\"]\n"
      "  %c : Tensor = aten::mm(%a, %b)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %c, 1)\n"
      "  output(%y)\n",
      {{"a", torch::ones({2, 3})}, {"b", torch::ones({2, 3})}});
  Folded f = runConstFold(*g);
  CHECK_FALSE(f.result.changed);
  CHECK(test::declinedWith(f.ctx, "evaluating it failed"));
}

TEST_CASE("const-fold folds inside loop bodies") {
  auto g = parseWith(
      "graph(%x : Tensor, %n : int):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %r : Tensor = prim::Loop(%n, True, %x)\n"
      "    block0(%i : int, %h : Tensor):\n"
      "      %w2 : Tensor = aten::neg(%w)\n"
      "      %h2 : Tensor = aten::add.Tensor(%h, %w2, 1)\n"
      "      output(True, %h2)\n"
      "  output(%r)\n",
      {{"w", torch::ones({3})}});
  Folded f = runConstFold(*g);
  CHECK(f.result.counter("folded") == 1);
  test::checkIR(g->str(), R"(
    # CHECK: get_attr["w.folded"]
    # CHECK: prim::Loop
    # CHECK-NOT: aten::neg
    # CHECK: aten::add.Tensor(%h, %w.folded, 1)
  )");
  auto out = ir::Interpreter(*g).run({torch::zeros({3}), int64_t{2}});
  CHECK(torch::equal(out.at(0).toTensor(), torch::full({3}, -2.0f)));
}

TEST_CASE("const-fold keeps every fixture's outputs identical") {
  for (const char* name : {"resnet18_script", "control_flow", "inplace_ops", "embedding_int64"}) {
    DYNAMIC_SECTION(name) {
      const auto& f = test::fixture(name);
      Optimizer opt = Optimizer::load(f.path);
      auto report = opt.run("const-fold");
      // The conv parameter lists (prim::ListConstruct of ints) fold to literals.
      if (std::string(name) == "resnet18_script" || std::string(name) == "inplace_ops") {
        CHECK(report.changed());
        CHECK(report.countersSummary().find("folded=") != std::string::npos);
        CHECK(opt.model().forward().str().find("prim::ListConstruct") == std::string::npos);
      }
      auto v = opt.verify(f.inputs, {}, 2);
      INFO(v.summary);
      CHECK(v.bitwiseEqual);
    }
  }
}

TEST_CASE("const-fold names many constants of one base uniquely and keeps them in the prologue, in order") {
  // 300 tensors built from literals: every folded result is `const.folded`
  // or a numbered variant, and each goes to the end of the prologue.
  std::string text = "graph(%x : Tensor):\n  %w : Tensor = get_attr[\"w\"]\n";
  std::string prev = "%x";
  for (int i = 0; i < 300; ++i) {
    text += fmt::format("  %t{0} : Tensor = aten::full([2], {0}.0, None, None, None, None)\n"
                        "  %x{0} : Tensor = aten::add.Tensor({1}, %t{0}, 1)\n",
                        i, prev);
    prev = fmt::format("%x{}", i);
  }
  text += "  %y : Tensor = aten::add.Tensor(" + prev + ", %w, 1)\n  output(%y)\n";
  auto g = parseWith(text, {{"w", torch::ones({2})}});
  auto before = ir::cloneGraph(*g);
  Folded f = runConstFold(*g);
  CHECK(f.result.counter("folded") == 300);
  // The prologue: the placeholder, w, then the 300 new constants in creation order.
  std::vector<std::string> prologue;
  for (ir::Node* n : *g->block()) {
    if (n->opcode() == ir::Opcode::Placeholder) continue;
    if (n->opcode() != ir::Opcode::GetAttr) break;
    prologue.push_back(n->target());
  }
  REQUIRE(prologue.size() == 301);
  CHECK(prologue[0] == "w");
  CHECK(prologue[1] == "const.folded");
  CHECK(prologue[2] == "const.folded.1");
  CHECK(prologue[300] == "const.folded.299");
  CHECK(torch::equal(g->constants().tensor("const.folded.299"), torch::full({2}, 299.0)));
  const at::Tensor x = torch::randn({2});
  CHECK(torch::equal(ir::Interpreter(*g).run({x}).at(0).toTensor(),
                     ir::Interpreter(*before).run({x}).at(0).toTensor()));
}
