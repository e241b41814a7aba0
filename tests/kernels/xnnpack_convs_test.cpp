// tuned-kernels{xnnpack=...} (kernels/xnnpack_convs.h): the named convs (and
// linears) run on XNNPACK with a following relu6/relu fused as the clamp, the context
// packed when the file loads; numerics equal the original's within fp32
// tolerance; every edit is logged; the saved file reloads at two shapes and
// ptopt imports it back to conv2d + hardtanh; named must-not-fire cases.
#include "ir/load_time.h"
#include "kernels/tuned_kernels.h"
#include "kernels/xnnpack_convs.h"
#include "target/kernel_probes.h"
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>
#include <torch/script.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>

using namespace ptopt;

TEST_CASE("tuned-kernels runs the named convs on XNNPACK with relu6 fused, packed at load") {
  if (!target::xnnpackConvRuns()) {
    WARN("SKIPPED: this LibTorch has no XNNPACK convs");
    return;
  }
  const auto& f = test::fixture("mobilenet_v2_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  const size_t convs = test::countOps(opt.model().forward(), "aten::conv2d");
  const size_t relu6 = test::countOps(opt.model().forward(), "aten::hardtanh") +
                       test::countOps(opt.model().forward(), "aten::hardtanh_");
  REQUIRE(convs == 52);
  REQUIRE(relu6 == 35);
  auto report = opt.run("tuned-kernels{xnnpack=\"*\"}", &ctx, test::checkedInstrumentation());
  CHECK(report.changed());
  CHECK(test::counter(report, "tuned-kernels", "xnnpack") == 52);
  CHECK(test::counter(report, "tuned-kernels", "xnnpack-linear") == 1);  // the classifier
  CHECK(test::loggedEdits(report) > 0);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::conv2d") == 0);
  CHECK(test::countOps(g, "prepacked::conv2d_clamp_run") == 52);
  CHECK(test::countOps(g, "prepacked::conv2d_clamp_prepack") == 52);
  CHECK(test::countOps(g, "aten::linear") == 0);
  CHECK(test::countOps(g, "prepacked::linear_clamp_run") == 1);
  // Every relu6 was a conv's only reader: fused into its clamp.
  CHECK(test::countOps(g, "aten::hardtanh") + test::countOps(g, "aten::hardtanh_") == 0);
  test::checkIR(g.str(), R"(
    # CHECK: prepacked::conv2d_clamp_prepack(
    # CHECK-SAME: [2, 2], [1, 1], [1, 1], 1, 0.0, 6.0)
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);

  // The file stores dense weights; the holder packs them when it loads.
  Optimizer::Serialized saved = opt.serialize();
  const std::string code = saved.module.get_method("forward").graph()->toString();
  CHECK(code.find("conv2d_clamp_prepack") == std::string::npos);
  CHECK(code.find("conv2d_clamp_run") != std::string::npos);
  std::istringstream bytes(saved.bytes);
  torch::jit::Module reloaded = torch::jit::load(bytes);
  reloaded.eval();
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, 3, 64, 64}, std::vector<int64_t>{2, 3, 96, 80}}) {
    const at::Tensor x = at::randn(shape);
    auto cmp = verify::compareOutputs(reloaded.forward({x}), opt.original().forward({x}),
                                      verify::Tolerance::elementwise(1e-4, 1e-5));
    INFO(cmp.summary());
    CHECK(cmp.withinTolerance());
  }

  // ptopt reads its own output back as convs and their activations.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ptopt_xnnpack_" + std::to_string(::getpid()) + ".pt")).string();
  Optimizer::save(saved, path);
  Optimizer again = Optimizer::load(path);
  std::filesystem::remove(path);
  const ir::Graph& back = again.model().forward();
  CHECK(test::countOps(back, "prepacked::conv2d_clamp_run") == 0);
  CHECK(test::countOps(back, "prepacked::conv2d_clamp_prepack") == 0);
  CHECK(test::countOps(back, "aten::conv2d") == 52);
  CHECK(test::countOps(back, "aten::hardtanh") == 35);
  CHECK(test::countOps(back, "prepacked::linear_clamp_run") == 0);
  CHECK(test::countOps(back, "aten::linear") == 1);
  auto again_v = again.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(again_v.summary);
  CHECK(again_v.passed);
}

TEST_CASE("TunedKernelsDoesNotRunOnXnnpackWithoutShapesOrFloat32") {
  if (!target::xnnpackConvRuns()) {
    WARN("SKIPPED: this LibTorch has no XNNPACK convs");
    return;
  }
  // No shape-prop: the input is not known to be a 4-D tensor.
  auto plain = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  output(%y)\n",
      {{"w", at::randn({4, 3, 3, 3})}});
  rewriters::PassContext ctx;
  CHECK_FALSE(test::runChecked(*plain.graph, "tuned-kernels{xnnpack=*}", &ctx).changed());
  CHECK(test::declinedWith(ctx, "not known to be a 4-D tensor"));
  // A bfloat16 conv: XNNPACK convs are float32.
  auto bf16 = test::parseWithConstants(
      "graph(%x : Tensor{bfloat16, [1, 3, 8, 8], contiguous_format, cpu}):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  output(%y)\n",
      {{"w", at::randn({4, 3, 3, 3}).to(at::kBFloat16)}});
  rewriters::PassContext bctx;
  CHECK_FALSE(test::runChecked(*bf16.graph, "tuned-kernels{xnnpack=*}", &bctx).changed());
  CHECK(test::declinedWith(bctx, "XNNPACK convs are float32"));
}

TEST_CASE("TunedKernelsDoesNotRunALinearOnXnnpackWithoutShapesOrFloat32") {
  if (!target::xnnpackConvRuns()) {
    WARN("SKIPPED: this LibTorch has no XNNPACK");
    return;
  }
  auto plain = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  output(%y)\n",
      {{"w", at::randn({4, 3})}});
  rewriters::PassContext ctx;
  CHECK_FALSE(test::runChecked(*plain.graph, "tuned-kernels{xnnpack=*}", &ctx).changed());
  CHECK(test::declinedWith(ctx, "rank 2 or more"));
  auto bf16 = test::parseWithConstants(
      "graph(%x : Tensor{bfloat16, [2, 3], contiguous_format, cpu}):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  output(%y)\n",
      {{"w", at::randn({4, 3}).to(at::kBFloat16)}});
  rewriters::PassContext bctx;
  CHECK_FALSE(test::runChecked(*bf16.graph, "tuned-kernels{xnnpack=*}", &bctx).changed());
  CHECK(test::declinedWith(bctx, "XNNPACK linears are float32"));
}

TEST_CASE("TunedKernelsDoesNotFuseAnActivationWithOtherReaders") {
  if (!target::xnnpackConvRuns()) {
    WARN("SKIPPED: this LibTorch has no XNNPACK convs");
    return;
  }
  // The conv's result is read by the relu and returned: no clamp, the relu stays.
  auto p = test::parseWithConstants(
      "graph(%x : Tensor{float32, [1, 3, 8, 8], contiguous_format, cpu}):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor{float32, [1, 4, 8, 8], contiguous_format, cpu} = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  %z : Tensor{float32, [1, 4, 8, 8], contiguous_format, cpu} = aten::relu(%y)\n"
      "  %t : Tuple[Tensor, Tensor] = prim::TupleConstruct(%y, %z)\n"
      "  output(%t)\n",
      {{"w", at::randn({4, 3, 3, 3})}});
  rewriters::PassContext ctx;
  CHECK(test::runChecked(*p.graph, "tuned-kernels{xnnpack=*}", &ctx).changed());
  CHECK(test::countOps(*p.graph, "prepacked::conv2d_clamp_run") == 1);
  CHECK(test::countOps(*p.graph, "aten::relu") == 1);
  test::checkIR(p.graph->str(), R"(
    # CHECK: prepacked::conv2d_clamp_prepack(
    # CHECK-SAME: 1, None, None)
  )");
}
