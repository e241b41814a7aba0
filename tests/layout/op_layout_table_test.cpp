// The layout table of channels-last (layout/op_layout_table.h): every conv
// form anchors (recognized by ir::ConvOp), reductions read `dim` and
// `keepdim` by name, an explicit memory_format breaks, unknown ops break.
#include "layout/op_layout_table.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <map>

using namespace ptopt;

namespace {

// The class of every call node of `text`, by its output's name.
std::map<std::string, layout::OpLayout> classify(const std::string& text, int64_t rank = 4) {
  auto g = ir::parseGraph(text);
  std::map<std::string, layout::OpLayout> out;
  g->walk([&](ir::Node* n) {
    if (n->isCall() && n->numOutputs() == 1) out[n->output()->name()] = layout::classifyOp(n, rank);
  });
  return out;
}

}  // namespace

TEST_CASE("every conv form is an anchor, conv1d and _convolution included") {
  auto c = classify(
      "graph(%x : Tensor, %w : Tensor, %x1 : Tensor, %w1 : Tensor):\n"
      "  %a : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n"
      "  %b : Tensor = aten::conv_transpose2d.input(%x, %w, None, [1, 1], [0, 0], [0, 0], 1, [1, 1])\n"
      "  %c : Tensor = aten::_convolution(%x, %w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 2, False, False, "
      "True, True)\n"
      "  %d : Tensor = aten::conv1d(%x1, %w1, None, [1], [0], [1], 1)\n"
      "  %t : Tuple[Tensor, Tensor, Tensor, Tensor] = prim::TupleConstruct(%a, %b, %c, %d)\n"
      "  output(%t)\n");
  for (const char* name : {"a", "b", "c", "d"}) {
    INFO(name);
    CHECK(c.at(name).cls == layout::LayoutClass::Anchor);
  }
}

TEST_CASE("reductions read dim and keepdim by name") {
  auto c = classify(
      "graph(%x : Tensor):\n"
      "  %keep : Tensor = aten::mean.dim(%x, [2, 3], True, None)\n"
      "  %drop : Tensor = aten::mean.dim(%x, [-2, -1], False, None)\n"
      "  %chan : Tensor = aten::sum.dim_IntList(%x, [1], True, None)\n"
      "  %all : Tensor = aten::amax(%x, int[], True)\n"
      "  %t : Tuple[Tensor, Tensor, Tensor, Tensor] = prim::TupleConstruct(%keep, %drop, %chan, %all)\n"
      "  output(%t)\n");
  CHECK(c.at("keep").cls == layout::LayoutClass::Preserving);
  CHECK(c.at("keep").dataArgs == std::vector<size_t>{0});
  CHECK(c.at("drop").cls == layout::LayoutClass::Sink);
  CHECK(c.at("chan").cls == layout::LayoutClass::Breaker);
  CHECK(c.at("chan").why == "a reduction over the batch or channel dimension");
  CHECK(c.at("all").cls == layout::LayoutClass::Breaker);
  CHECK(c.at("all").why == "a reduction over every dimension includes the channels");
}

TEST_CASE("an explicit memory_format, contiguous() and unknown ops break a region") {
  auto c = classify(
      "graph(%x : Tensor):\n"
      "  %keep : Tensor = aten::clone(%x, None)\n"
      "  %fmt : Tensor = aten::clone(%x, torch.contiguous_format)\n"
      "  %c : Tensor = aten::contiguous(%x, torch.contiguous_format)\n"
      "  %u : Tensor = aten::erfinv(%x)\n"
      "  %r : Tensor = aten::relu_(%x)\n"
      "  %t : Tuple[Tensor, Tensor, Tensor, Tensor, Tensor] = prim::TupleConstruct(%keep, %fmt, %c, %u, %r)\n"
      "  output(%t)\n");
  CHECK(c.at("keep").cls == layout::LayoutClass::Preserving);
  CHECK(c.at("fmt").cls == layout::LayoutClass::Breaker);
  CHECK(c.at("fmt").why == "an explicit memory_format");
  CHECK(c.at("c").cls == layout::LayoutClass::Breaker);
  CHECK(c.at("u").cls == layout::LayoutClass::Breaker);
  CHECK(c.at("r").cls == layout::LayoutClass::Preserving);
  CHECK(c.at("r").inPlace);
}
