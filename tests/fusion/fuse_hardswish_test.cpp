// fuse-hardswish: hardswish and hardsigmoid written out (as torch.export's
// inference IR and hand-written models spell them) become ATen's kernels:
// structure and numerics for each spelling, and the named cases where it
// must not fire. The real-model case (MobileNetV3 exported and decomposed)
// is export.pt2's test_o1_gives_the_decomposed_hardswish_and_hardsigmoid_back_their_kernels.
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace fuse_hardswish_test {

const char* kMeta = "Tensor{float32, [2, 8, 4, 4], contiguous_format, cpu}";

std::string graphWith(const std::string& body) { return std::string("graph(%x : ") + kMeta + "):\n" + body; }

struct HardswishRun {
  rewriters::RunReport report;
  rewriters::PassContext ctx;
};

// Runs the pass (edit-log checked) and checks the outputs against the graph
// before, within float rounding.
void runAndCompare(ir::Graph& g, HardswishRun& f) {
  const at::Tensor x = torch::randn({2, 8, 4, 4}) * 4;
  const c10::IValue before = test::runGraph(g, {x});
  f.report = test::runPipeline(g, "fuse-hardswish", &f.ctx);
  const c10::IValue after = test::runGraph(g, {x});
  CHECK(torch::allclose(after.toTensor(), before.toTensor(), 1e-5, 1e-6));
}

bool hasDecline(const rewriters::PassContext& ctx, const std::string& text) {
  for (const auto& d : ctx.declines())
    if (d.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace fuse_hardswish_test

using namespace fuse_hardswish_test;

TEST_CASE("fuse-hardswish turns run_decompositions()'s hardswish and hardsigmoid into one op each") {
  // hardsigmoid(hardswish(x)) as ep.run_decompositions() writes them.
  auto g = ir::parseGraph(graphWith(
      "  %a : Tensor = aten::add.Tensor(%x, 3, 1)\n"
      "  %c : Tensor = aten::clamp(%a, 0, None)\n"
      "  %c1 : Tensor = aten::clamp(%c, None, 6)\n"
      "  %m : Tensor = aten::mul.Tensor(%x, %c1)\n"
      "  %hs : Tensor{float32, [2, 8, 4, 4], contiguous_format, cpu} = aten::div.Tensor(%m, 6)\n"
      "  %a2 : Tensor = aten::add.Tensor(%hs, 3, 1)\n"
      "  %c2 : Tensor = aten::clamp(%a2, 0, None)\n"
      "  %c3 : Tensor = aten::clamp(%c2, None, 6)\n"
      "  %g : Tensor = aten::div.Tensor(%c3, 6)\n"
      "  output(%g)\n"));
  HardswishRun f;
  runAndCompare(*g, f);
  CHECK(test::counter(f.report, "fuse-hardswish", "fused-hardswish") == 1);
  CHECK(test::counter(f.report, "fuse-hardswish", "fused-hardsigmoid") == 1);
  test::checkIR(g->str(), R"(
    # CHECK: = aten::hardswish(%x)
    # CHECK-NEXT: = aten::hardsigmoid(
    # CHECK-NEXT: output(
  )");
}

TEST_CASE("fuse-hardswish reads the other spellings: one clamp, hardtanh, clamp_min/max, * (1/6), x * hardsigmoid(x)") {
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"aten::hardswish",
       "  %a : Tensor = aten::add.Tensor(%x, 3, 1)\n  %r : Tensor = aten::clamp(%a, 0, 6)\n"
       "  %m : Tensor = aten::mul.Tensor(%r, %x)\n  %y : Tensor = aten::mul.Scalar(%m, 0.16666666666666666)\n"},
      {"aten::hardswish",
       "  %a : Tensor = aten::add.Tensor(%x, 3., 1)\n  %r : Tensor = aten::hardtanh(%a, 0., 6.)\n"
       "  %s : Tensor = aten::div.Scalar(%r, 6.)\n  %y : Tensor = aten::mul.Tensor(%x, %s)\n"},
      {"aten::hardsigmoid",
       "  %a : Tensor = aten::add.Tensor(%x, 3, 1)\n  %c : Tensor = aten::clamp_min(%a, 0)\n"
       "  %r : Tensor = aten::clamp_max(%c, 6)\n  %y : Tensor = aten::div.Tensor(%r, 6)\n"},
  };
  for (const auto& [op, body] : spellings) {
    INFO(body);
    auto g = ir::parseGraph(graphWith(body + "  output(%y)\n"));
    HardswishRun f;
    runAndCompare(*g, f);
    CHECK(test::countOps(*g, op) == 1);
    CHECK(test::countOps(*g, "aten::add") == 0);
    CHECK(test::countOps(*g, "aten::mul") == 0);
  }
}

TEST_CASE("FuseHardswishDoesNotFireOnAnotherConstantASharedIntermediateOrWithoutMetadata") {
  SECTION("x + 2") {
    auto g = ir::parseGraph(graphWith(
        "  %a : Tensor = aten::add.Tensor(%x, 2, 1)\n  %r : Tensor = aten::clamp(%a, 0, 6)\n"
        "  %y : Tensor = aten::div.Tensor(%r, 6)\n  output(%y)\n"));
    HardswishRun f;
    runAndCompare(*g, f);
    CHECK_FALSE(f.report.changed());
  }
  SECTION("clamped to [0, 5]") {
    auto g = ir::parseGraph(graphWith(
        "  %a : Tensor = aten::add.Tensor(%x, 3, 1)\n  %r : Tensor = aten::clamp(%a, 0, 5)\n"
        "  %y : Tensor = aten::div.Tensor(%r, 6)\n  output(%y)\n"));
    HardswishRun f;
    runAndCompare(*g, f);
    CHECK_FALSE(f.report.changed());
  }
  SECTION("the relu6 is read twice") {
    auto g = ir::parseGraph(graphWith(
        "  %a : Tensor = aten::add.Tensor(%x, 3, 1)\n  %r : Tensor = aten::clamp(%a, 0, 6)\n"
        "  %m : Tensor = aten::mul.Tensor(%x, %r)\n  %y : Tensor = aten::div.Tensor(%m, 6)\n"
        "  %z : Tensor = aten::add.Tensor(%y, %a, 1)\n  output(%z)\n"));
    HardswishRun f;
    runAndCompare(*g, f);
    CHECK_FALSE(f.report.changed());
    CHECK(hasDecline(f.ctx, "has another user"));
  }
  SECTION("no dtype or shape for x") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n  %a : Tensor = aten::add.Tensor(%x, 3, 1)\n  %r : Tensor = aten::clamp(%a, 0, 6)\n"
        "  %y : Tensor = aten::div.Tensor(%r, 6)\n  output(%y)\n");
    HardswishRun f;
    f.report = test::runPipeline(*g, "fuse-hardswish", &f.ctx);
    CHECK_FALSE(f.report.changed());
    CHECK(hasDecline(f.ctx, "dtype of its input is unknown"));
  }
}
