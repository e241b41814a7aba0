// drop-zero-bias: an all-zero conv/linear bias becomes None: fires, structure,
// numerics, and the named cases where it must not fire.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

TEST_CASE("drop-zero-bias drops an all-zero bias and keeps others") {
  auto b = test::parseWithConstants(
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
  auto expected = test::runGraphOn(*b.graph, x);
  auto report = test::runChecked(*b.graph, "drop-zero-bias");
  CHECK(test::counter(report, "drop-zero-bias", "dropped") == 1);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::linear(%x, %w, None)
    # CHECK: aten::linear(%y, %w2, %b2)
  )");
  CHECK(torch::equal(test::runGraphOn(*b.graph, x), expected));
}


TEST_CASE("drop-zero-bias drops a zero bias of a grouped transposed _convolution and a conv2d") {
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"up.weight\"]\n"
      "  %zero : Tensor = get_attr[\"up.bias\"]\n"
      "  %w2 : Tensor = get_attr[\"conv.weight\"]\n"
      "  %zero2 : Tensor = get_attr[\"conv.bias\"]\n"
      "  %y : Tensor = aten::_convolution(%x, %w, %zero, [1, 1], [0, 0], [1, 1], True, [0, 0], 2, False, False, True, True)\n"
      "  %z : Tensor = aten::conv2d(%y, %w2, %zero2, [1, 1], [0, 0], [1, 1], 1)\n"
      "  output(%z)\n",
      {{"up.weight", torch::randn({4, 3, 3, 3})}, {"up.bias", torch::zeros({6})},
       {"conv.weight", torch::randn({2, 6, 1, 1})}, {"conv.bias", torch::zeros({2})}});
  auto x = torch::randn({1, 4, 5, 5});
  auto expected = test::runGraphOn(*b.graph, x);
  auto report = test::runChecked(*b.graph, "drop-zero-bias");
  CHECK(test::counter(report, "drop-zero-bias", "dropped") == 2);
  test::checkIR(b.graph->str(), R"(
    # CHECK-NOT: get_attr["up.bias"]
    # CHECK-NOT: get_attr["conv.bias"]
    # CHECK: aten::_convolution(%x, %w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 2,
    # CHECK: aten::conv2d(%y, %w2, None,
  )");
  CHECK(torch::equal(test::runGraphOn(*b.graph, x), expected));
}

TEST_CASE("DropZeroBiasDoesNotDropABiasWrittenInPlace") {
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %zero : Tensor = get_attr[\"fc.bias\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, %zero)\n"
      "  %k : Tensor = aten::mul_.Scalar(%zero, 2.0)\n"
      "  %t : Tuple[Tensor, Tensor] = prim::TupleConstruct(%y, %k)\n"
      "  output(%t)\n",
      {{"fc.weight", torch::randn({5, 4})}, {"fc.bias", torch::zeros({5})}});
  auto report = test::runChecked(*b.graph, "drop-zero-bias");
  CHECK_FALSE(report.changed());
  CHECK(test::counter(report, "drop-zero-bias", "dropped") == 0);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::linear(%x, %w, %zero)
  )");
}

TEST_CASE("DropZeroBiasDoesNotDropANonZeroBias") {
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %b : Tensor = get_attr[\"fc.bias\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, %b)\n"
      "  output(%y)\n",
      {{"fc.weight", torch::randn({5, 4})}, {"fc.bias", torch::tensor({0.f, 0.f, 1e-30f, 0.f, 0.f})}});
  auto report = test::runChecked(*b.graph, "drop-zero-bias");
  CHECK_FALSE(report.changed());
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::linear(%x, %w, %b)
  )");
}
