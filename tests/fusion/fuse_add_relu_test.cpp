// fuse-add-relu: add then relu as aten::_add_relu(_): fires on ResNet, structure,
// bitwise-equal numerics, and the named cases where it must not fire.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

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
