// tuned-kernels: the named convs become aten::mkldnn_convolution with the
// arguments in its order (padding before stride), or prepacked oneDNN convs
// whose pack is made when the file loads; numerics equal the original's;
// every edit is logged; the saved file reloads and ptopt imports it back to
// conv2d; named must-not-fire cases.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"
#include "kernels/tuned_kernels.h"
#include "ir/load_time.h"
#include "ir/text.h"

#include <catch2/catch.hpp>
#include <torch/script.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>

using namespace ptopt;

namespace {

std::vector<std::string> convNames(const ir::Graph& g) {
  std::vector<std::string> names;
  g.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d")) names.push_back(n->output()->name());
  });
  return names;
}

}  // namespace

TEST_CASE("tuned-kernels rewrites the named convs to mkldnn_convolution") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("canonicalize,shape-prop,fold-conv-bn", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  REQUIRE(convs.size() == 20);
  // The first three (the stem is 7x7 with stride 2) and the last.
  std::set<std::string> chosen{convs[0], convs[1], convs[2], convs.back()};
  REQUIRE(chosen.size() == 4);
  const size_t before = test::countOps(opt.model().forward(), "aten::conv2d");
  auto report = opt.run("tuned-kernels{mkldnn=\"" + kernels::joinNameList(chosen) + "\"}", &ctx, test::checkedInstrumentation());
  CHECK(report.changed());
  CHECK(test::counter(report, "tuned-kernels", "mkldnn") == 4);
  CHECK(test::loggedEdits(report) > 0);
  CHECK(test::countOps(opt.model().forward(), "aten::mkldnn_convolution") == 4);
  CHECK(test::countOps(opt.model().forward(), "aten::conv2d") == before - 4);
  // The stem conv: stride 2, padding 3 -> mkldnn_convolution(x, w, b, padding, stride, dilation, groups).
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: aten::mkldnn_convolution(
    # CHECK-SAME: [3, 3], [2, 2], [1, 1], 1)
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  // It saves and loads back (the Python reload is in tests/cli/tune_test.sh).
  CHECK_NOTHROW(opt.serialize());
}

TEST_CASE("tuned-kernels keeps channels-last convs channels-last") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O2", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  REQUIRE_FALSE(convs.empty());
  std::set<std::string> all(convs.begin(), convs.end());
  auto report = opt.run("tuned-kernels{mkldnn=\"" + kernels::joinNameList(all) + "\"}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "mkldnn") == static_cast<int64_t>(convs.size()));
  CHECK(test::countOps(opt.model().forward(), "aten::conv2d") == 0);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("TunedKernelsDoesNotFireWithoutShapes") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;  // no example inputs: shape-prop records nothing
  opt.run("canonicalize,shape-prop", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  auto report = opt.run("tuned-kernels{mkldnn=" + convs.at(0) + "}", &ctx, test::checkedInstrumentation());
  CHECK_FALSE(report.changed());
  REQUIRE_FALSE(ctx.declines().empty());
  CHECK_THAT(ctx.declines().back(), Catch::Contains("not known to be a 4-D tensor"));
}

TEST_CASE("TunedKernelsDoesNotFireForACudaTargetOrUnnamedConvs") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("canonicalize,shape-prop", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  // No names: nothing to do.
  CHECK_FALSE(opt.run("tuned-kernels", &ctx, test::checkedInstrumentation()).changed());
  // A name that matches nothing (another method's) is ignored.
  CHECK_FALSE(opt.run("tuned-kernels{mkldnn=no_such_value}", &ctx, test::checkedInstrumentation()).changed());
  ctx.targetDevice = "cuda";
  CHECK_FALSE(opt.run("tuned-kernels{mkldnn=" + convs.at(0) + "}", &ctx, test::checkedInstrumentation()).changed());
  CHECK_THAT(ctx.declines().back(), Catch::Contains("CPU kernels"));
  CHECK(test::countOps(opt.model().forward(), "aten::mkldnn_convolution") == 0);
}

TEST_CASE("the conv's name list parses and prints back sorted") {
  CHECK(kernels::parseNameList("b; a;;c") == std::set<std::string>{"a", "b", "c"});
  CHECK(kernels::joinNameList({"b", "a"}) == "a;b");
  CHECK(kernels::parseNameList("").empty());
}

TEST_CASE("tuned-kernels packs the named convs' weights once, when the model loads") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O2", &ctx);  // folded, channels-last
  // One conv first made mkldnn_convolution (as --tune may leave it): both forms pack.
  opt.run("tuned-kernels{mkldnn=" + convNames(opt.model().forward()).at(1) + "}", &ctx);
  std::vector<std::string> convs;
  opt.model().forward().walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") || n->is("aten::mkldnn_convolution")) convs.push_back(n->output()->name());
  });
  REQUIRE(convs.size() == 20);
  // The stem (7x7, stride 2), the mkldnn_convolution, a 3x3 and the last.
  std::set<std::string> chosen{convs[0], convs[1], convs[2], convs.back()};
  const size_t relusBefore = test::countOps(opt.model().forward(), "aten::relu") +
                             test::countOps(opt.model().forward(), "aten::relu_");
  auto report = opt.run("tuned-kernels{prepacked=\"" + kernels::joinNameList(chosen) + "\"}", &ctx,
                        test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "prepacked") == 4);
  // The stem's and the first block's conv1 are read by a relu alone: it
  // becomes the pack's post-op. The other two feed the residual adds.
  CHECK(test::counter(report, "tuned-kernels", "prepacked-relu-fused") == 2);
  CHECK(test::loggedEdits(report) > 0);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "mkldnn_prepacked::conv2d_run") == 4);
  CHECK(test::countOps(g, "mkldnn_prepacked::conv2d_prepack") == 4);
  CHECK(test::countOps(g, "aten::conv2d") == 16);
  CHECK(test::countOps(g, "aten::mkldnn_convolution") == 0);
  CHECK(test::countOps(g, "aten::relu") + test::countOps(g, "aten::relu_") == relusBefore - 2);
  // The stem's pack: its stride 2, padding 3, the input shape shape-prop saw, its relu fused.
  test::checkIR(g.str(), R"(
    # CHECK: mkldnn_prepacked::conv2d_prepack(
    # CHECK-SAME: [2, 2], [3, 3], [1, 1], 1, [1, 3, 64, 64], "relu")
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);

  // The file stores dense weights; the holder packs them when it loads.
  Optimizer::Serialized saved = opt.serialize();
  const std::string code = saved.module.get_method("forward").graph()->toString();
  CHECK(code.find("conv2d_prepack") == std::string::npos);
  CHECK(code.find("conv2d_run") != std::string::npos);
  torch::jit::Module holder = saved.module.attr(ir::kLoadTimeModule).toModule();
  CHECK(holder.attr("v0").isObject());
  CHECK(holder.attr("s0").toTensor().layout() == c10::kStrided);
  std::istringstream bytes(saved.bytes);
  torch::jit::Module reloaded = torch::jit::load(bytes);
  reloaded.eval();
  for (uint64_t seed : {1u, 2u}) {
    auto inputs = verify::makeInputs(f.inputs, seed);
    auto cmp = verify::compareOutputs(reloaded.forward(inputs), opt.original().forward(inputs),
                                      verify::Tolerance::elementwise(1e-4, 1e-5));
    INFO(cmp.summary());
    CHECK(cmp.withinTolerance());
  }

  // ptopt reads its own output back as plain convs (and may pack them again).
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ptopt_prepacked_" + std::to_string(::getpid()) + ".pt")).string();
  Optimizer::save(saved, path);
  Optimizer again = Optimizer::load(path);
  std::filesystem::remove(path);
  CHECK(test::countOps(again.model().forward(), "mkldnn_prepacked::conv2d_run") == 0);
  CHECK(test::countOps(again.model().forward(), "mkldnn_prepacked::conv2d_prepack") == 0);
  CHECK(test::countOps(again.model().forward(), "aten::conv2d") == 20);
  CHECK(test::countOps(again.model().forward(), "aten::relu") + test::countOps(again.model().forward(), "aten::relu_") ==
        relusBefore);  // the fused relus are nodes again
  auto back = again.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(back.summary);
  CHECK(back.passed);
}

TEST_CASE("TunedKernelsDoesNotPackForACudaTargetOrWithoutShapes") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext noShapes;
  opt.run("canonicalize,shape-prop", &noShapes);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  CHECK_FALSE(opt.run("tuned-kernels{prepacked=" + convs.at(0) + "}", &noShapes, test::checkedInstrumentation()).changed());
  CHECK_THAT(noShapes.declines().back(), Catch::Contains("not known to be a 4-D tensor"));
  rewriters::PassContext cuda;
  cuda.exampleInputs = verify::makeInputs(f.inputs, 0);
  cuda.targetDevice = "cuda";
  opt.run("shape-prop", &cuda);
  CHECK_FALSE(opt.run("tuned-kernels{prepacked=" + convs.at(0) + "}", &cuda, test::checkedInstrumentation()).changed());
  CHECK_THAT(cuda.declines().back(), Catch::Contains("CPU kernels"));
  CHECK(test::countOps(opt.model().forward(), "mkldnn_prepacked::conv2d_run") == 0);
}

namespace {

std::vector<std::string> linearNames(const ir::Graph& g) {
  std::vector<std::string> names;
  g.walk([&](ir::Node* n) {
    if (n->is("aten::linear")) names.push_back(n->output()->name());
  });
  return names;
}

}  // namespace

TEST_CASE("tuned-kernels packs the named linears as 1x1 convs on views of their input") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  // ConvNeXt blocks: the MLP's linears read [N, H, W, C]; the head reads [N, C].
  const auto& f = test::fixture("convnext_small");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O2", &ctx);
  const std::vector<std::string> linears = linearNames(opt.model().forward());
  REQUIRE(linears.size() == 9);
  // The first block's pw1 (32 -> 128 on 1x16x16x32) and the head (64 -> 10 on 1x64).
  std::set<std::string> chosen{linears.front(), linears.back()};
  auto report = opt.run("tuned-kernels{prepacked=\"" + kernels::joinNameList(chosen) + "\"}", &ctx,
                        test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "prepacked-linear") == 2);
  CHECK(test::counter(report, "tuned-kernels", "prepacked") == 0);
  CHECK(test::loggedEdits(report) > 0);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::linear") == 7);
  CHECK(test::countOps(g, "mkldnn_prepacked::conv2d_run") == 2);
  CHECK(test::countOps(g, "aten::flatten") == 1);
  // [N, H, W, C] is read as its NCHW view and the result permuted back; the
  // weight is [O, C, 1, 1]; the pack's input size is the view's.
  test::checkIR(g.str(), R"(
    # CHECK: [0, 3, 1, 2])
    # CHECK: mkldnn_prepacked::conv2d_prepack(
    # CHECK-SAME: [1, 1], [0, 0], [1, 1], 1, [1, 32, 16, 16], "none")
    # CHECK: mkldnn_prepacked::conv2d_run(
    # CHECK: [0, 2, 3, 1])
    # CHECK: aten::unsqueeze(
    # CHECK: aten::unsqueeze(
    # CHECK: mkldnn_prepacked::conv2d_prepack(
    # CHECK-SAME: [1, 64, 1, 1], "none")
    # CHECK: aten::flatten.using_ints(
  )");
  // The head's weight is stored as [10, 64, 1, 1] in place of [10, 64].
  const ir::ConstantTable& constants = g.constants();
  REQUIRE(constants.contains("head.weight_1x1"));
  CHECK(constants.tensor("head.weight_1x1").sizes() == at::IntArrayRef({10, 64, 1, 1}));
  CHECK(g.str().find("get_attr[\"head.weight\"]") == std::string::npos);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);

  // Saved, reloaded from bytes, and run on another batch and image size.
  Optimizer::Serialized saved = opt.serialize();
  std::istringstream bytes(saved.bytes);
  torch::jit::Module reloaded = torch::jit::load(bytes);
  reloaded.eval();
  torch::NoGradGuard noGrad;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, 3, 64, 64}, std::vector<int64_t>{3, 3, 32, 96}}) {
    std::vector<c10::IValue> inputs{torch::randn(shape, torch::Generator(at::detail::createCPUGenerator(7)))};
    auto cmp = verify::compareOutputs(reloaded.forward(inputs), opt.original().forward(inputs),
                                      verify::Tolerance::elementwise(1e-4, 1e-5));
    INFO(cmp.summary());
    CHECK(cmp.withinTolerance());
  }

  // ptopt reads a packed linear back as a 1x1 conv between the views.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ptopt_prepacked_linear_" + std::to_string(::getpid()) + ".pt")).string();
  Optimizer::save(saved, path);
  Optimizer again = Optimizer::load(path);
  std::filesystem::remove(path);
  CHECK(test::countOps(again.model().forward(), "mkldnn_prepacked::conv2d_run") == 0);
  CHECK(test::countOps(again.model().forward(), "aten::linear") == 7);
  CHECK(test::countOps(again.model().forward(), "aten::conv2d") == 8);
  auto back = again.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(back.summary);
  CHECK(back.passed);
}

TEST_CASE("tuned-kernels packs a transformer's linears on [B, T, C] as 1x1 convs on [B, C, 1, T] views") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  const auto& f = test::fixture("transformer_block");  // input [2, 8, 32]
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  const size_t linears = linearNames(opt.model().forward()).size();
  REQUIRE(linears == 6);
  auto report = opt.run("tuned-kernels{prepacked=*}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "prepacked-linear") == 6);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::linear") == 0);
  CHECK(test::countOps(g, "mkldnn_prepacked::conv2d_run") == 6);
  test::checkIR(g.str(), R"(
    # CHECK: [0, 2, 1])
    # CHECK: aten::unsqueeze(
    # CHECK: mkldnn_prepacked::conv2d_prepack(
    # CHECK-SAME: [1, 1], [0, 0], [1, 1], 1, [2, 32, 1, 8], "none")
    # CHECK: mkldnn_prepacked::conv2d_run(
    # CHECK: aten::squeeze.dim(
    # CHECK: [0, 2, 1])
    # CHECK: aten::contiguous(
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  std::istringstream bytes(opt.serialize().bytes);
  torch::jit::Module reloaded = torch::jit::load(bytes);
  reloaded.eval();
  torch::NoGradGuard noGrad;
  std::vector<c10::IValue> other{torch::randn({3, 5, 32}, torch::Generator(at::detail::createCPUGenerator(9)))};
  auto cmp = verify::compareOutputs(reloaded.forward(other), opt.original().forward(other),
                                    verify::Tolerance::elementwise(1e-4, 1e-5));
  INFO(cmp.summary());
  CHECK(cmp.withinTolerance());
}

TEST_CASE("TunedKernelsDoesNotPackLinearsWithoutShapesOrForACudaTarget") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  const auto& f = test::fixture("convnext_small");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext noShapes;
  opt.run("canonicalize,shape-prop", &noShapes);
  const std::string first = linearNames(opt.model().forward()).at(0);
  CHECK_FALSE(opt.run("tuned-kernels{prepacked=" + first + "}", &noShapes, test::checkedInstrumentation()).changed());
  CHECK_THAT(noShapes.declines().back(), Catch::Contains("not known to be a 2-D, 3-D or 4-D tensor"));
  rewriters::PassContext cuda;
  cuda.exampleInputs = verify::makeInputs(f.inputs, 0);
  cuda.targetDevice = "cuda";
  opt.run("shape-prop", &cuda);
  CHECK_FALSE(opt.run("tuned-kernels{prepacked=" + first + "}", &cuda, test::checkedInstrumentation()).changed());
  CHECK_THAT(cuda.declines().back(), Catch::Contains("CPU kernels"));
  CHECK(test::countOps(opt.model().forward(), "mkldnn_prepacked::conv2d_run") == 0);
}

TEST_CASE("TunedKernelsDoesNotPackAWeightWrittenInPlace") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  // The pack is made once, when the file loads: an add_ on the weight after
  // it would not reach the packed copy.
  auto constants = std::make_shared<ir::ConstantTable>();
  constants->set("fc.weight", torch::randn({6, 12}));
  ir::ParseOptions opts;
  opts.constants = constants;
  auto g = ir::parseGraph(
      "graph(%x : Tensor{float32, [2, 12], contiguous_format, cpu}):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  %w1 : Tensor = aten::add_.Scalar(%w, 1.0, 1)\n"
      "  output(%y)\n", opts);
  rewriters::PassContext ctx;
  auto report = test::runChecked(*g, "tuned-kernels{prepacked=*}", &ctx);
  CHECK_FALSE(report.changed());
  CHECK(test::countOps(*g, "aten::linear") == 1);
  REQUIRE_FALSE(ctx.declines().empty());
  CHECK_THAT(ctx.declines().back(), Catch::Contains("written in place"));
}
