// fold-conv-affine: per-channel constant add/sub/mul/div folded into the conv
// or linear before it: fires, structure, numerics (against the graph before
// the pass), exact integer and bool constants, and the named cases where it
// must not fire. Every run checks the pass's edit log.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace {

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
  auto b = test::parseWithConstants(kConvAffine, {{"conv.weight", torch::randn({4, 3, 3, 3})},
                               {"conv.bias", torch::randn({4})},
                               {"scale", torch::rand({4, 1, 1}) + 0.5}});
  auto x = torch::randn({1, 3, 8, 8});
  auto expected = test::runGraphOn(*b.graph, x);
  auto report = test::runChecked(*b.graph, "fold-conv-affine");
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 3);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::conv2d
    # CHECK-NOT: aten::mul
    # CHECK-NOT: aten::add
    # CHECK-NOT: aten::div
  )");
  CHECK(torch::allclose(test::runGraphOn(*b.graph, x), expected, 1e-4, 1e-5));
}

TEST_CASE("FoldConvAffineDoesNotFoldNonChannelConstants") {
  auto b = test::parseWithConstants(kConvAffine, {{"conv.weight", torch::randn({4, 3, 3, 3})},
                               {"conv.bias", torch::randn({4})},
                               {"scale", torch::rand({1, 1, 8}) + 0.5}});  // per column, not per channel
  rewriters::PassContext ctx;
  auto report = test::runChecked(*b.graph, "fold-conv-affine", &ctx);
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
  auto b = test::parseWithConstants(constantOpConv("aten::sub.Tensor(%c, %y, 2)"),
                 {{"conv.weight", torch::randn({4, 3, 3, 3})}, {"conv.bias", torch::randn({4})},
                  {"c", torch::randn({4, 1, 1})}});
  auto x = torch::randn({1, 3, 8, 8});
  auto expected = test::runGraphOn(*b.graph, x);
  auto report = test::runChecked(*b.graph, "fold-conv-affine");
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 1);
  CHECK(test::countOps(*b.graph, "aten::sub") == 0);
  CHECK(torch::allclose(test::runGraphOn(*b.graph, x), expected, 1e-4, 1e-5));
}

TEST_CASE("FoldConvAffineDoesNotFoldConstantDividedByConv") {
  auto b = test::parseWithConstants(constantOpConv("aten::div.Tensor(%c, %y)"),
                 {{"conv.weight", torch::randn({4, 3, 3, 3})}, {"conv.bias", torch::randn({4})},
                  {"c", torch::randn({4, 1, 1})}});
  rewriters::PassContext ctx;
  auto report = test::runChecked(*b.graph, "fold-conv-affine", &ctx);
  CHECK_FALSE(report.changed());
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines().front(), Catch::Contains("c / conv is not affine"));
}

// ------------------------------------------------ integer and bool constants

namespace {

const char* kConvOpConst =
    "graph(%x : Tensor):\n"
    "  %w : Tensor = get_attr[\"conv.weight\"]\n"
    "  %b : Tensor = get_attr[\"conv.bias\"]\n"
    "  %c : Tensor = get_attr[\"c\"]\n"
    "  %y : Tensor = aten::conv2d(%x, %w, %b, [1, 1], [0, 0], [1, 1], 1)\n"
    "  %z : Tensor = aten::OP.Tensor(%y, %c ALPHA)\n"
    "  output(%z)\n";

std::string convOpConst(const std::string& op) {
  std::string s = kConvOpConst;
  s.replace(s.find("OP"), 2, op);
  s.replace(s.find(" ALPHA"), 6, op == "add" || op == "sub" ? ", 1" : "");
  return s;
}

struct FoldOutcome {
  int64_t folded = 0;
  std::string decline;
  bool matches = false;
};

FoldOutcome foldConstant(const std::string& op, const at::Tensor& c) {
  torch::manual_seed(4);
  auto b = test::parseWithConstants(convOpConst(op), {{"conv.weight", torch::randn({3, 2, 1, 1})},
                                                      {"conv.bias", torch::randn({3})},
                                                      {"c", c}});
  auto x = torch::randn({1, 2, 4, 4});
  auto expected = test::runGraphOn(*b.graph, x);
  rewriters::PassContext ctx;
  auto report = test::runChecked(*b.graph, "fold-conv-affine", &ctx);
  FoldOutcome out;
  out.folded = test::counter(report, "fold-conv-affine", "folded");
  if (!ctx.declines().empty()) out.decline = ctx.declines().front();
  const at::Tensor got = test::runGraphOn(*b.graph, x);
  out.matches = got.scalar_type() == expected.scalar_type() && torch::allclose(got, expected, 1e-5, 1e-5);
  return out;
}

}  // namespace

TEST_CASE("fold-conv-affine folds exact integer and bool constants") {
  const std::vector<std::pair<std::string, at::Tensor>> cases = {
      {"int32 [1]", torch::tensor({3}, torch::kInt32)},
      {"int64 0-dim", torch::tensor(5, torch::kInt64)},
      {"int16 per channel", torch::tensor({2, -3, 4}, torch::kInt16).reshape({3, 1, 1})},
      {"int8 per channel", torch::tensor({1, 2, 3}, torch::kInt8).reshape({3, 1, 1})},
      {"bool per channel", torch::tensor({true, false, true}).reshape({3, 1, 1})},
      {"2^24 as int64 (exact in float32)", torch::tensor({int64_t{1} << 24}, torch::kInt64)},
  };
  for (const auto& [name, c] : cases) {
    for (const std::string op : {"add", "sub", "mul"}) {
      if (op == "sub" && c.scalar_type() == at::kBool) continue;  // PyTorch has no `-` for bool
      DYNAMIC_SECTION(name << " " << op) {
        auto r = foldConstant(op, c);
        INFO(r.decline);
        CHECK(r.folded == 1);
        CHECK(r.matches);
      }
    }
  }
  SECTION("div by an int32 [1]") {
    auto r = foldConstant("div", torch::tensor({4}, torch::kInt32));
    CHECK(r.folded == 1);
    CHECK(r.matches);
  }
}

TEST_CASE("FoldConvAffineDoesNotFoldInexactOrPromotingConstants") {
  SECTION("2^24 + 1 is not a float32") {
    auto r = foldConstant("add", torch::tensor({(int64_t{1} << 24) + 1}, torch::kInt64));
    CHECK(r.folded == 0);
    CHECK_THAT(r.decline, Catch::Contains("16777217") && Catch::Contains("cannot represent exactly"));
    CHECK(r.matches);
  }
  SECTION("a float64 per-channel constant would promote the output") {
    auto r = foldConstant("mul", torch::rand({3, 1, 1}, torch::kDouble));
    CHECK(r.folded == 0);
    CHECK_THAT(r.decline, Catch::Contains("would promote"));
  }
  SECTION("a zero divisor") {
    auto r = foldConstant("div", torch::tensor({1, 0, 2}, torch::kInt32).reshape({3, 1, 1}));
    CHECK(r.folded == 0);
    CHECK_THAT(r.decline, Catch::Contains("zero"));
  }
}

TEST_CASE("fold-conv-affine folds per-feature constants into a linear") {
  torch::manual_seed(5);
  const std::string text =
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %s : Tensor = get_attr[\"s\"]\n"
      "  %t : Tensor = get_attr[\"t\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  %m : Tensor = aten::mul.Tensor(%s, %y)\n"
      "  %a : Tensor = aten::sub.Tensor(%m, %t, 2)\n"
      "  output(%a)\n";
  auto x = torch::randn({2, 7, 6});  // 3-D input: the features are the last dim
  SECTION("[C] constants fold") {
    auto b = test::parseWithConstants(text, {{"fc.weight", torch::randn({4, 6})}, {"s", torch::rand({4}) + 0.5},
                                             {"t", torch::randn({4})}});
    auto expected = test::runGraphOn(*b.graph, x);
    auto report = test::runChecked(*b.graph, "fold-conv-affine");
    CHECK(test::counter(report, "fold-conv-affine", "folded") == 2);
    CHECK(test::countOps(*b.graph, "aten::mul") + test::countOps(*b.graph, "aten::sub") == 0);
    CHECK(torch::allclose(test::runGraphOn(*b.graph, x), expected, 1e-4, 1e-5));
  }
  SECTION("FoldConvAffineDoesNotFoldALinearConstantThatMightWidenTheOutput") {
    auto b = test::parseWithConstants(text, {{"fc.weight", torch::randn({4, 6})}, {"s", torch::rand({1, 1, 4})},
                                             {"t", torch::randn({4, 1})}});
    rewriters::PassContext ctx;
    auto report = test::runChecked(*b.graph, "fold-conv-affine", &ctx);
    CHECK(test::counter(report, "fold-conv-affine", "folded") == 0);
    CHECK(test::countOps(*b.graph, "aten::mul") == 1);
    CHECK(test::countOps(*b.graph, "aten::sub") == 1);
  }
}

TEST_CASE("fold-conv-affine gives the conv new derived constants and logs each edit") {
  torch::manual_seed(6);
  auto b = test::parseWithConstants(constantOpConv("aten::mul.Tensor(%y, %c)"),
                 {{"conv.weight", torch::randn({4, 3, 3, 3})}, {"conv.bias", torch::randn({4})},
                  {"c", torch::rand({4, 1, 1}) + 0.5}});
  auto x = torch::randn({1, 3, 8, 8});
  auto expected = test::runGraphOn(*b.graph, x);
  auto report = test::runChecked(*b.graph, "fold-conv-affine");
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 1);
  CHECK(test::loggedEdits(report) > 0);
  test::checkIR(b.graph->str(), R"(
    # CHECK: get_attr["conv.weight.affine"]
    # CHECK: get_attr["conv.bias.affine"]
    # CHECK: aten::conv2d(%x, %conv.weight.affine, %conv.bias.affine
    # CHECK-NOT: aten::mul
  )");
  CHECK(torch::allclose(test::runGraphOn(*b.graph, x), expected, 1e-4, 1e-5));
}
