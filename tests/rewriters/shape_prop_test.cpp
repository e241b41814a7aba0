// shape-prop: metadata from running example inputs; declines without them;
// recomputed, never stale.
#include "ir/text.h"
#include "rewriters/shape_prop.h"
#include "tests/support/checked_run.h"
#include "tests/support/fixtures.h"
#include "tests/support/ir_check.h"
#include "verify/inputs.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

// Through the PassManager with the edit-log check on: every metadata change
// (of node results, block parameters and graph inputs) is a logged edit.
PassResult runShapeProp(ir::Graph& g, PassContext& ctx) { return test::runPassChecked(g, "shape-prop", ctx); }

}  // namespace

TEST_CASE("shape-prop annotates every conv output of resnet18") {
  const auto& f = test::fixture("resnet18_script");
  ir::Model model = test::importFixture(f);
  ir::Graph& g = model.forward();
  PassContext ctx;
  ctx.exampleInputs = verify::makeInputs({verify::parseInputSpec("1,3,64,64")}, 0);
  PassResult r = runShapeProp(g, ctx);
  CHECK(r.changed);
  CHECK(r.counter("annotated") > 100);
  size_t convs = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("aten::conv2d")) return;
    ++convs;
    const ir::TensorMeta& m = n->output()->meta();
    INFO(ir::printNode(*n));
    CHECK(m.dtype == c10::ScalarType::Float);
    REQUIRE(m.shape);
    CHECK(m.shape->size() == 4);
    CHECK(m.memoryFormat == c10::MemoryFormat::Contiguous);
    CHECK(m.device == c10::Device(c10::kCPU));
  });
  CHECK(convs == 20);
  // Inputs and constants are annotated too.
  CHECK(g.inputs().at(0)->meta().shape == std::vector<int64_t>{1, 3, 64, 64});
  test::checkIR(g.str(), R"(
    # CHECK: get_attr["conv1.weight"]
    # CHECK: Tensor{float32, [1, 64, 32, 32], contiguous_format, cpu} = aten::conv2d
    # CHECK: Tensor{float32, [1, 64, 16, 16], contiguous_format, cpu} = aten::conv2d
    # CHECK: Tensor{float32, [1, 1000], contiguous_format, cpu} = aten::linear
  )");
  // A second run with the same inputs changes nothing.
  PassResult again = runShapeProp(g, ctx);
  CHECK_FALSE(again.changed);
  CHECK(again.counter("annotated") == r.counter("annotated"));
}

TEST_CASE("shape-prop declines without example inputs") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %y : Tensor{float16, [9]} = aten::relu(%x)\n"
      "  output(%y)\n");
  const std::string before = g->str();
  PassContext ctx;
  PassResult r = runShapeProp(*g, ctx);
  CHECK_FALSE(r.changed);
  CHECK(g->str() == before);
  REQUIRE(ctx.declines().size() == 1);
  CHECK(ctx.declines()[0].find("no example inputs") != std::string::npos);
  CHECK(ctx.declines()[0].find("--input-shape") != std::string::npos);

  ctx.exampleInputs = std::vector<c10::IValue>{torch::ones({2}), torch::ones({2})};
  r = runShapeProp(*g, ctx);
  CHECK_FALSE(r.changed);
  CHECK(ctx.declines().back().find("takes 1 inputs but 2") != std::string::npos);
}

TEST_CASE("shape-prop replaces stale metadata and detects channels-last") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %y : Tensor{float16, [9]} = aten::contiguous(%x, torch.channels_last)\n"
      "  %z : Tensor{float16, [9]} = prim::If(%c)\n"
      "    block0():\n"
      "      %a : Tensor{float16, [9]} = aten::relu(%y)\n"
      "      output(%a)\n"
      "    block1():\n"
      "      %b : Tensor{float16, [9]} = aten::to.dtype(%y, torch.float64, False, False, None)\n"
      "      output(%b)\n"
      "  output(%z)\n");
  PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3, 4, 5}), true};
  PassResult r = runShapeProp(*g, ctx);
  CHECK(r.changed);
  test::checkIR(g->str(), R"(
    # CHECK: %y : Tensor{float32, [2, 3, 4, 5], channels_last, cpu}
    # CHECK: %z : Tensor{float32, [2, 3, 4, 5], channels_last, cpu}
    # CHECK: %a : Tensor{float32, [2, 3, 4, 5], channels_last, cpu}
    # CHECK: %b : Tensor = aten::to.dtype
  )");
  // The other branch: metadata follows this run, not the previous one.
  ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3, 4, 5}), false};
  r = runShapeProp(*g, ctx);
  CHECK(r.changed);
  test::checkIR(g->str(), R"(
    # CHECK: %z : Tensor{float64, [2, 3, 4, 5], channels_last, cpu}
    # CHECK: %a : Tensor = aten::relu
    # CHECK: %b : Tensor{float64, [2, 3, 4, 5], channels_last, cpu}
  )");
}

TEST_CASE("shape-prop records the last loop iteration") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %n : int):\n"
      "  %r : Tensor = prim::Loop(%n, True, %x)\n"
      "    block0(%i : int, %h : Tensor):\n"
      "      %l : List[Tensor] = prim::ListConstruct(%h, %h)\n"
      "      %h2 : Tensor = aten::cat(%l, 1)\n"
      "      output(True, %h2)\n"
      "  output(%r)\n");
  PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::ones({2, 1}), int64_t{3}};
  PassResult r = runShapeProp(*g, ctx);
  CHECK(r.counter("annotated") == 4);  // x, h, h2, r
  CHECK(g->findValue("h")->meta().shape == std::vector<int64_t>{2, 4});
  CHECK(g->findValue("h2")->meta().shape == std::vector<int64_t>{2, 8});
  CHECK(g->findValue("r")->meta().shape == std::vector<int64_t>{2, 8});
  CHECK(g->findValue("x")->meta().shape == std::vector<int64_t>{2, 1});  // inputs are not modified
}

TEST_CASE("shape-prop reports run failures naming the node") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %z : Tensor = aten::mm(%x, %y)\n"
      "  output(%z)\n");
  PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::ones({2, 3}), torch::ones({2, 3})};
  CHECK_THROWS_WITH(runShapeProp(*g, ctx), Catch::Contains("aten::mm"));
}

TEST_CASE("shape-prop leaves an undefined tensor without metadata (vit_b_16's attention)") {
  // nn.MultiheadAttention in eval mode without grad takes the fast path,
  // `_native_multi_head_attention`, whose weights output is an undefined tensor
  // when need_weights=False (torchvision's ViT). Asking it for its device threw
  // "tensor does not have a device" and shape-prop failed on the whole model.
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %wqkv : Tensor, %bqkv : Tensor, %wo : Tensor, %bo : Tensor):\n"
      "  %o : Tensor, %w : Tensor = aten::_native_multi_head_attention(%x, %x, %x, 8, 2, %wqkv, %bqkv, %wo, %bo, "
      "None, False, True, None)\n"
      "  %y : Tensor = aten::add.Tensor(%o, %x, 1)\n"
      "  output(%y)\n");
  PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({1, 5, 8}), torch::randn({24, 8}), torch::randn({24}),
                                               torch::randn({8, 8}), torch::randn({8})};
  PassResult r = runShapeProp(*g, ctx);
  CHECK(r.changed);
  CHECK(g->findValue("o")->meta().shape == std::vector<int64_t>{1, 5, 8});
  CHECK(g->findValue("y")->meta().shape == std::vector<int64_t>{1, 5, 8});
  CHECK(g->findValue("w")->meta().empty());
  CHECK(r.counter("annotated") == 7);  // the five inputs, o and y
}

TEST_CASE("ShapePropDoesNotFireWhenMetadataIsCurrent") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %y : Tensor = aten::relu(%x)\n"
      "  output(%y)\n");
  PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3})};
  PassResult first = runShapeProp(*g, ctx);
  CHECK(first.changed);
  const size_t edits = ctx.edits.size();
  CHECK(edits == 2);  // the signature (%x) and %y
  const std::string annotated = g->str();
  PassResult again = runShapeProp(*g, ctx);
  CHECK_FALSE(again.changed);
  CHECK(ctx.edits.size() == edits);  // nothing logged
  CHECK(g->str() == annotated);
  // Numerics: metadata only, the graph computes what it did.
  const at::Tensor x = torch::randn({2, 3});
  CHECK(torch::equal(test::runGraph(*g, {x}).toTensor(), torch::relu(x)));
}
