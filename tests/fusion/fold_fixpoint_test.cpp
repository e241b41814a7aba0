// -O1's folds to a fixpoint (chains that need fold-conv-affine between two
// BatchNorm folds, or a BatchNorm fold after fold-conv-affine). The folds'
// own cases are in their files (fold_conv_affine_test.cpp, ...).
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace {

// The -O1 folding stage alone, as -O1 runs it.
const char* kFoldStage = "fixpoint{max-iter=8}(fold-conv-bn,fold-linear-bn,fold-conv-affine,drop-zero-bias)";

at::Tensor run(const ir::Graph& g, const at::Tensor& x) { return test::runGraph(g, {x}).toTensor(); }

// BatchNorm statistics far from (0, 1), so a wrong formula shows.
std::vector<std::pair<std::string, at::Tensor>> bnConstants(const std::string& prefix, int64_t c) {
  return {{prefix + ".weight", torch::rand({c}) + 0.5},
          {prefix + ".bias", torch::randn({c})},
          {prefix + ".running_mean", torch::randn({c})},
          {prefix + ".running_var", torch::rand({c}) * 3 + 0.2}};
}

std::string bnGetAttrs(const std::string& prefix, const std::string& v) {
  return "  %" + v + "w : Tensor = get_attr[\"" + prefix + ".weight\"]\n" +
         "  %" + v + "b : Tensor = get_attr[\"" + prefix + ".bias\"]\n" +
         "  %" + v + "m : Tensor = get_attr[\"" + prefix + ".running_mean\"]\n" +
         "  %" + v + "v : Tensor = get_attr[\"" + prefix + ".running_var\"]\n";
}

std::string bn(const std::string& out, const std::string& in, const std::string& v) {
  return "  %" + out + " : Tensor = aten::batch_norm(%" + in + ", %" + v + "w, %" + v + "b, %" + v + "m, %" + v +
         "v, False, 0.1, 1e-05, True)\n";
}

int roundsOf(const rewriters::RunReport& r, const std::string& passes) {
  for (const auto& f : r.fixpoints)
    if (f.passes == passes) return f.rounds;
  return 0;
}

template <typename... Extra>
std::vector<std::pair<std::string, at::Tensor>> concat(std::vector<std::pair<std::string, at::Tensor>> a,
                                                       const Extra&... more) {
  (a.insert(a.end(), more.begin(), more.end()), ...);
  return a;
}

}  // namespace

TEST_CASE("O1 folds conv -> mul -> add -> BN into one conv (fold-conv-affine before fold-conv-bn)") {
  torch::manual_seed(1);
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"conv.weight\"]\n"
      "  %cb : Tensor = get_attr[\"conv.bias\"]\n"
      "  %s : Tensor = get_attr[\"scale\"]\n"
      "  %t : Tensor = get_attr[\"shift\"]\n" +
          bnGetAttrs("bn", "n") +
          "  %y : Tensor = aten::conv2d(%x, %w, %cb, [1, 1], [1, 1], [1, 1], 1)\n"
          "  %z : Tensor = aten::mul.Tensor(%y, %s)\n"
          "  %u : Tensor = aten::add.Tensor(%z, %t, 1)\n" +
          bn("o", "u", "n") + "  output(%o)\n",
      concat({{"conv.weight", torch::randn({4, 3, 3, 3})},
              {"conv.bias", torch::randn({4})},
              {"scale", torch::rand({4, 1, 1}) + 0.5},
              {"shift", torch::randn({4, 1, 1})}},
             bnConstants("bn", 4)));
  auto x = torch::randn({2, 3, 8, 8});
  auto expected = run(*b.graph, x);

  auto report = test::runChecked(*b.graph, kFoldStage);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::conv2d
    # CHECK-NOT: aten::mul
    # CHECK-NOT: aten::add
    # CHECK-NOT: aten::batch_norm
  )");
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 2);
  CHECK(test::counter(report, "fold-conv-bn", "folded") == 1);
  // Round 1 folds mul and add, round 2 the BatchNorm, round 3 changes nothing.
  CHECK(roundsOf(report, "fold-conv-bn,fold-linear-bn,fold-conv-affine,drop-zero-bias") == 3);
  CHECK(report.countersSummary().find("rounds") != std::string::npos);
  CHECK(torch::allclose(run(*b.graph, x), expected, 1e-4, 1e-4));
}

TEST_CASE("O1 folds conv -> BN -> mul -> BN into one conv, and the preset itself does") {
  torch::manual_seed(2);
  const std::string text =
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"conv.weight\"]\n"
      "  %s : Tensor = get_attr[\"scale\"]\n" +
      bnGetAttrs("bn1", "p") + bnGetAttrs("bn2", "q") +
      "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n" + bn("a", "y", "p") +
      "  %m : Tensor = aten::mul.Tensor(%a, %s)\n" + bn("o", "m", "q") + "  output(%o)\n";
  auto constants = concat({{"conv.weight", torch::randn({6, 3, 1, 1})}, {"scale", torch::rand({6, 1, 1}) + 0.5}},
                          bnConstants("bn1", 6), bnConstants("bn2", 6));
  auto x = torch::randn({1, 3, 5, 5});

  SECTION("the folding stage") {
    auto b = test::parseWithConstants(text, constants);
    auto expected = run(*b.graph, x);
    auto report = test::runChecked(*b.graph, kFoldStage);
    CHECK(test::countOps(*b.graph, "aten::batch_norm") == 0);
    CHECK(test::countOps(*b.graph, "aten::mul") == 0);
    CHECK(test::counter(report, "fold-conv-bn", "folded") == 2);
    CHECK(torch::allclose(run(*b.graph, x), expected, 1e-4, 1e-4));
  }
  SECTION("-O1") {
    auto b = test::parseWithConstants(text, constants);
    auto expected = run(*b.graph, x);
    test::runPipeline(*b.graph, "-O1");
    CHECK(test::countOps(*b.graph, "aten::batch_norm") == 0);
    CHECK(test::countOps(*b.graph, "aten::mul") == 0);
    CHECK(test::countOps(*b.graph, "aten::conv2d") == 1);
    CHECK(torch::allclose(run(*b.graph, x), expected, 1e-4, 1e-4));
  }
}

TEST_CASE("O1 folds linear -> add -> BatchNorm1d into one linear") {
  torch::manual_seed(3);
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %fb : Tensor = get_attr[\"fc.bias\"]\n"
      "  %t : Tensor = get_attr[\"shift\"]\n" +
          bnGetAttrs("bn", "n") +
          "  %f : Tensor = aten::flatten.using_ints(%x, 1, -1)\n"
          "  %y : Tensor = aten::linear(%f, %w, %fb)\n"
          "  %u : Tensor = aten::add.Tensor(%y, %t, 1)\n" +
          bn("o", "u", "n") + "  output(%o)\n",
      concat({{"fc.weight", torch::randn({5, 12})}, {"fc.bias", torch::randn({5})}, {"shift", torch::randn({5})}},
             bnConstants("bn", 5)));
  auto x = torch::randn({3, 3, 2, 2});
  auto expected = run(*b.graph, x);
  auto report = test::runChecked(*b.graph, kFoldStage);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::linear
    # CHECK-NOT: aten::add
    # CHECK-NOT: aten::batch_norm
  )");
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 1);
  CHECK(test::counter(report, "fold-linear-bn", "folded") == 1);
  CHECK(torch::allclose(run(*b.graph, x), expected, 1e-4, 1e-4));
}

TEST_CASE("fixpoint rounds stop at max-iter and say so") {
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"conv.weight\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n"
      "  %a : Tensor = aten::mul.Scalar(%y, 2.0)\n"
      "  output(%a)\n",
      {{"conv.weight", torch::randn({2, 3, 1, 1})}});
  auto report = test::runChecked(*b.graph, "fixpoint{max-iter=1}(fold-conv-affine)");
  REQUIRE(report.fixpoints.size() == 1);
  CHECK(report.fixpoints[0].rounds == 1);
  CHECK_FALSE(report.fixpoints[0].converged);
  CHECK(report.countersSummary().find("1 rounds (stopped at max-iter=1 while still changing)") != std::string::npos);
}

TEST_CASE("A decline repeated by every fixpoint round is recorded and counted once") {
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"conv.weight\"]\n"
      "  %s : Tensor = get_attr[\"scale\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n"
      "  %a : Tensor = aten::mul.Scalar(%y, 2.0)\n"
      "  %m : Tensor = aten::mul.Tensor(%a, %s)\n"
      "  output(%m)\n",
      {{"conv.weight", torch::randn({2, 3, 1, 1})}, {"scale", torch::rand({1, 1, 4})}});
  rewriters::PassContext ctx;
  auto report = test::runChecked(*b.graph, kFoldStage, &ctx);
  CHECK(test::counter(report, "fold-conv-affine", "folded") == 1);
  CHECK(test::counter(report, "fold-conv-affine", "declined") == 1);
  CHECK(ctx.declines().size() == 1);
}
