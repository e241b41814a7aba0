// The op-policy table of the cast pass (quant/precision_policy.h): the
// issue's op groups in their classes, per-run overrides, option parsing, and
// a Follow op given a dtype literal classified as a Factory.
#include "quant/precision_policy.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

TEST_CASE("the op-policy table puts the issue's op groups in their classes") {
  auto p = quant::PrecisionPolicy::defaults();
  using quant::OpPrecision;
  for (const char* op : {"conv2d", "conv_transpose2d", "linear", "matmul", "bmm", "addmm", "baddbmm", "einsum",
                         "prelu", "lstm_cell", "scaled_dot_product_attention"})
    CHECK(p.classify(std::string("aten::") + op) == OpPrecision::LowPrecision);
  for (const char* op : {"softmax", "log_softmax", "layer_norm", "group_norm", "exp", "log1p", "pow", "rsqrt",
                         "reciprocal", "sum", "prod", "cumsum", "mean", "norm", "mse_loss", "cosine_similarity",
                         "logsumexp", "upsample_bilinear2d"})
    CHECK(p.classify(std::string("aten::") + op) == OpPrecision::Fp32);
  CHECK(p.classify("aten::relu") == OpPrecision::Follow);
  CHECK(p.classify("aten::relu_") == OpPrecision::Follow);  // in-place variants share the class
  CHECK(p.classify("aten::max_pool2d") == OpPrecision::Follow);
  CHECK(p.classify("aten::view") == OpPrecision::Follow);
  CHECK(p.classify("aten::add") == OpPrecision::Promote);
  CHECK(p.classify("aten::cat") == OpPrecision::Promote);
  CHECK(p.classify("aten::zeros") == OpPrecision::Factory);
  CHECK(p.classify("aten::size") == OpPrecision::Neutral);
  CHECK(p.classify("aten::some_unknown_op") == OpPrecision::Fp32);
  CHECK_FALSE(p.knows("aten::some_unknown_op"));

  p.set("softmax", OpPrecision::LowPrecision);
  p.set("aten::linear", OpPrecision::Fp32);
  CHECK(p.classify("aten::softmax") == OpPrecision::LowPrecision);
  CHECK(p.classify("aten::linear") == OpPrecision::Fp32);
  CHECK(quant::PrecisionPolicy::parseOpList("gelu; aten::softmax,linear") ==
        std::vector<std::string>{"gelu", "aten::softmax", "linear"});
  CHECK(quant::PrecisionPolicy::parseOpList("").empty());
  CHECK_THROWS_AS(quant::PrecisionPolicy::parseOpList("gelu;;softmax"), std::invalid_argument);
}

TEST_CASE("a Follow op given a float dtype literal is a Factory, read by the argument's name") {
  auto p = quant::PrecisionPolicy::defaults();
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::zeros_like(%x, torch.float32, None, None, None, None)\n"
      "  %b : Tensor = aten::zeros_like(%x, None, None, None, None, None)\n"
      "  output(%a, %b)\n");
  std::vector<std::string> classes;
  g->walk([&](ir::Node* n) {
    if (n->is("aten::zeros_like")) classes.push_back(quant::opPrecisionName(p.classify(*n)));
  });
  CHECK(classes == std::vector<std::string>{quant::opPrecisionName(quant::OpPrecision::Factory),
                                            quant::opPrecisionName(quant::OpPrecision::Follow)});
}
