// fuse-add-relu: add then relu as aten::_add_relu(_): fires on ResNet, structure,
// bitwise-equal numerics, and the named cases where it must not fire.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace {
// Whether this LibTorch's _add_relu takes `dtype` (1.13: not bf16, an internal assert).
bool addReluTakes(at::ScalarType dtype) {
  try {
    at::_add_relu(torch::ones({2}).to(dtype), torch::ones({2}).to(dtype));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace

using namespace ptopt;

TEST_CASE("fuse-add-relu fuses resnet's residual add and relu") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  auto report = opt.run("fuse-add-relu", nullptr, test::checkedInstrumentation());
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
  auto report = test::runChecked(*g, "fuse-add-relu");
  CHECK_FALSE(report.changed());
}


TEST_CASE("fuse-add-relu fuses an out-of-place add and relu into _add_relu with the same numbers") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %s : Tensor = aten::add.Tensor(%x, %y, 2)\n"
      "  %r : Tensor = aten::relu(%s)\n"
      "  output(%r)\n");
  auto x = torch::randn({2, 3, 4}), y = torch::randn({2, 3, 4});
  auto expected = test::runGraph(*g, {x, y}).toTensor();
  auto report = test::runChecked(*g, "fuse-add-relu");
  CHECK(test::counter(report, "fuse-add-relu", "fused") == 1);
  test::checkIR(g->str(), R"(
    # CHECK: aten::_add_relu.Tensor(%x, %y, 2)
    # CHECK-NOT: aten::relu
    # CHECK-NOT: aten::add
  )");
  CHECK(torch::equal(test::runGraph(*g, {x, y}).toTensor(), expected));
}

TEST_CASE("FuseAddReluDoesNotFuseAnInPlaceAddWithAnOutOfPlaceRelu") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %s : Tensor = aten::add_.Tensor(%x, %y, 1)\n"
      "  %r : Tensor = aten::relu(%s)\n"
      "  output(%r)\n");
  rewriters::PassContext ctx;
  auto report = test::runChecked(*g, "fuse-add-relu", &ctx);
  CHECK_FALSE(report.changed());
  CHECK(test::countOps(*g, "aten::add_") == 1);
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("out-of-place relu"));
}

TEST_CASE("fuse-add-relu declines bf16 operands when this LibTorch's _add_relu rejects them") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor{bfloat16, [2, 3]}, %y : Tensor{bfloat16, [2, 3]}):\n"
      "  %s : Tensor{bfloat16, [2, 3]} = aten::add.Tensor(%x, %y, 1)\n"
      "  %r : Tensor{bfloat16, [2, 3]} = aten::relu(%s)\n"
      "  output(%r)\n");
  auto x = torch::randn({2, 3}).to(at::kBFloat16), y = torch::randn({2, 3}).to(at::kBFloat16);
  const bool kernelTakesBf16 = addReluTakes(at::kBFloat16);
  auto expected = test::runGraph(*g, {x, y}).toTensor();
  rewriters::PassContext ctx;
  auto report = test::runChecked(*g, "fuse-add-relu", &ctx);
  CHECK(report.changed() == kernelTakesBf16);
  if (!kernelTakesBf16) {
    CHECK(test::countOps(*g, "aten::relu") == 1);
    REQUIRE(ctx.declines().size() == 1);
    CHECK_THAT(ctx.declines()[0], Catch::Contains("BFloat16"));
  }
  // Either way the graph still runs and gives the same numbers.
  CHECK(torch::equal(test::runGraph(*g, {x, y}).toTensor(), expected));
}

TEST_CASE("fuse-add-relu declines for a CUDA target: _add_relu has only a CPU kernel") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %s : Tensor = aten::add.Tensor(%x, %y, 1)\n"
      "  %r : Tensor = aten::relu(%s)\n"
      "  output(%r)\n");
  rewriters::PassContext ctx;
  ctx.targetDevice = "cuda";
  auto report = test::runChecked(*g, "fuse-add-relu", &ctx);
  CHECK_FALSE(report.changed());
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("no kernel there"));
}

TEST_CASE("fuse-add-relu in -O2 re-optimizing a resnet18 already cast to bf16, and the result runs and matches it") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O2,cast{dtype=bf16}", &ctx);  // explicit bf16: -O3's auto stays fp32 without native bf16
  const fs::path path = fs::temp_directory_path() / ("ptopt_fuse_add_relu_" + std::to_string(::getpid()) + ".pt");
  Optimizer::save(opt.serialize(), path.string());
  Optimizer again = Optimizer::load(path.string());
  fs::remove(path);
  rewriters::PassContext againCtx;
  againCtx.exampleInputs = ctx.exampleInputs;
  auto report = again.run("-O2", &againCtx);
  // The 8 residual adds are bf16: declined where _add_relu rejects bf16 (1.13).
  const bool takes = addReluTakes(at::kBFloat16);
  CHECK(test::counter(report, "fuse-add-relu", "fused") == (takes ? 8 : 0));
  CHECK(test::countOps(again.model().forward(), "aten::_add_relu_") == (takes ? 8 : 0));
  auto v = again.verify(f.inputs, {}, 2);  // against the bf16 model it loaded
  INFO(v.summary);
  CHECK(v.passed);
}
