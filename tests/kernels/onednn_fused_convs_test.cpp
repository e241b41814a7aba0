// tuned-kernels{fused=...} (kernels/onednn_fused_convs.h): the named convs
// become mkldnn::_convolution_pointwise with the weight packed when the file
// loads and their activation fused as the post-op; numerics equal the
// original's within fp32 tolerance, for every post-op written; every edit is
// logged; the saved file reloads at two shapes and ptopt imports it back to
// conv2d + activation; named must-not-fire cases (LibTorch 1.13 has no such
// operator: declined with the reason).
#include "ir/load_time.h"
#include "ir/op_views.h"
#include "kernels/onednn_fused_convs.h"
#include "kernels/tuned_kernels.h"
#include "target/kernel_probes.h"
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>
#include <torch/script.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

using namespace ptopt;

namespace {

// Ten convs, each read only by one activation oneDNN fuses, summed.
torch::jit::Module activationsModule() {
  torch::jit::Module m("Activations");
  m.register_attribute("training", c10::BoolType::get(), false);
  for (int i = 0; i < 10; ++i) {
    m.register_parameter("w" + std::to_string(i), at::randn({8, 8, 3, 3}) * 0.3, false);
    m.register_parameter("b" + std::to_string(i), at::randn({8}), false);
  }
  m.define(R"(
def forward(self, x):
    a0 = torch.relu(torch.conv2d(x, self.w0, self.b0, [1, 1], [1, 1], [1, 1], 1))
    a1 = torch.hardtanh(torch.conv2d(x, self.w1, self.b1, [1, 1], [1, 1], [1, 1], 1), -1.0, 2.0)
    a2 = torch.silu(torch.conv2d(x, self.w2, self.b2, [1, 1], [1, 1], [1, 1], 1))
    a3 = torch.hardswish(torch.conv2d(x, self.w3, self.b3, [1, 1], [1, 1], [1, 1], 1))
    a4 = torch.hardsigmoid(torch.conv2d(x, self.w4, self.b4, [1, 1], [1, 1], [1, 1], 1))
    a5 = torch.sigmoid(torch.conv2d(x, self.w5, self.b5, [1, 1], [1, 1], [1, 1], 1))
    a6 = torch.tanh(torch.conv2d(x, self.w6, self.b6, [1, 1], [1, 1], [1, 1], 1))
    a7 = torch.gelu(torch.conv2d(x, self.w7, self.b7, [1, 1], [1, 1], [1, 1], 1))
    a8 = torch.gelu(torch.conv2d(x, self.w8, self.b8, [1, 1], [1, 1], [1, 1], 1), approximate="tanh")
    a9 = torch.leaky_relu(torch.conv2d(x, self.w9, self.b9, [1, 1], [1, 1], [1, 1], 1), 0.2)
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9
)");
  return m;
}

// Saves, reloads in stock LibTorch at two shapes (against the original) and
// imports back with ptopt; the imported graph.
Optimizer reloadChecked(Optimizer& opt, const std::vector<std::vector<int64_t>>& shapes, const char* tag) {
  Optimizer::Serialized saved = opt.serialize();
  std::istringstream bytes(saved.bytes);
  torch::jit::Module reloaded = torch::jit::load(bytes);
  reloaded.eval();
  for (const auto& shape : shapes) {
    const at::Tensor x = at::randn(shape);
    auto cmp = verify::compareOutputs(reloaded.forward({x}), opt.original().forward({x}),
                                      verify::Tolerance::elementwise(1e-4, 1e-4));
    INFO(cmp.summary());
    CHECK(cmp.withinTolerance());
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            (std::string("ptopt_fused_") + tag + std::to_string(::getpid()) + ".pt")).string();
  Optimizer::save(saved, path);
  Optimizer again = Optimizer::load(path);
  std::filesystem::remove(path);
  return again;
}

// mobilenet_v2 folded (-O1) and channels-last, as tuned-kernels' fused=
// finds it in --tune's networks; `ctx` gets its example inputs.
Optimizer channelsLastMobilenet(rewriters::PassContext& ctx) {
  const auto& f = test::fixture("mobilenet_v2_script");
  Optimizer opt = Optimizer::load(f.path);
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  opt.run("channels-last{mode=on}", &ctx);
  return opt;
}

}  // namespace

TEST_CASE("tuned-kernels fuses mobilenet_v2's relu6 into oneDNN convs packed at load") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("mobilenet_v2_script");
  rewriters::PassContext ctx;
  Optimizer opt = channelsLastMobilenet(ctx);
  REQUIRE(test::countOps(opt.model().forward(), "aten::conv2d") == 52);
  auto report = opt.run("tuned-kernels{fused=\"*\"}", &ctx, test::checkedInstrumentation());
  CHECK(report.changed());
  // The 10 residual blocks' projection convs take their add as the binary post-op.
  CHECK(test::counter(report, "tuned-kernels", "fused") == 42);
  CHECK(test::counter(report, "tuned-kernels", "fused-add") == 10);
  CHECK(test::loggedEdits(report) > 0);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::conv2d") == 0);
  CHECK(test::countOps(g, "mkldnn::_convolution_pointwise") == 52);
  CHECK(test::countOps(g, "aten::mkldnn_reorder_conv2d_weight") == 52);
  // Each pack names the conv's input size, so oneDNN picks the blocking the
  // conv wants at the loading thread count (without it, a guess that at 2
  // threads made every call reorder the weight again).
  g.walk([&](ir::Node* n) {
    if (!n->is("mkldnn::_convolution_pointwise")) return;
    ir::Node* reorder = ir::OpView::of(n).value("W")->node();
    REQUIRE(reorder->numArgs() == 6);
    const ir::Literal* size = ir::OpView::of(reorder).literal("input_size");
    REQUIRE(size);
    CHECK(size->as<std::vector<int64_t>>() == *ir::OpView::of(n).value("X")->meta().shape);
  });
  // Every relu6 was a conv's only reader: fused as its post-op.
  CHECK(test::countOps(g, "aten::hardtanh") + test::countOps(g, "aten::hardtanh_") == 0);
  test::checkIR(g.str(), R"(
    # CHECK: mkldnn::_convolution_pointwise(
    # CHECK-SAME: "hardtanh"
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  // The file stores dense weights; the holder packs them when it loads.
  const std::string code = opt.serialize().module.get_method("forward").graph()->toString();
  CHECK(code.find("mkldnn_reorder_conv2d_weight") == std::string::npos);
  CHECK(code.find("_convolution_pointwise") != std::string::npos);
  Optimizer again = reloadChecked(opt, {{1, 3, 64, 64}, {2, 3, 96, 80}}, "mnv2");
  const ir::Graph& back = again.model().forward();
  CHECK(test::countOps(back, "mkldnn::_convolution_pointwise") == 0);
  CHECK(test::countOps(back, "aten::mkldnn_reorder_conv2d_weight") == 0);
  CHECK(test::countOps(back, "aten::conv2d") == 52);
  CHECK(test::countOps(back, "aten::hardtanh") == 35);
  CHECK(test::countOps(back, "aten::add") == 10);
  auto againV = again.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(againV.summary);
  CHECK(againV.passed);
}

TEST_CASE("tuned-kernels fuses every activation oneDNN has as a post-op, with the original's numerics") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  Optimizer opt = Optimizer::fromModule(activationsModule());
  verify::InputSpec input;
  input.shape = {1, 8, 12, 12};
  const std::vector<verify::InputSpec> shape{input};
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(shape, 0);
  opt.run("canonicalize,shape-prop,channels-last{mode=on}", &ctx);
  REQUIRE(test::countOps(opt.model().forward(), "aten::conv2d") == 10);
  auto report = opt.run("tuned-kernels{fused=*}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "fused") == 10);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "mkldnn::_convolution_pointwise") == 10);
  for (const char* gone : {"aten::relu", "aten::hardtanh", "aten::silu", "aten::hardswish", "aten::hardsigmoid",
                           "aten::sigmoid", "aten::tanh", "aten::gelu", "aten::leaky_relu"}) {
    INFO(gone);
    CHECK(test::countOps(g, gone) == 0);
  }
  const std::string text = g.str();
  for (const char* attr : {"\"relu\"", "\"hardtanh\"", "\"swish\"", "\"hardswish\"", "\"hardsigmoid\"", "\"sigmoid\"",
                           "\"tanh\"", "\"gelu\"", "\"leaky_relu\""}) {
    INFO(attr);
    CHECK(text.find(attr) != std::string::npos);
  }
  auto v = opt.verify(shape, {1e-4, 1e-4}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  Optimizer again = reloadChecked(opt, {{1, 8, 12, 12}, {3, 8, 7, 9}}, "acts");
  const ir::Graph& back = again.model().forward();
  CHECK(test::countOps(back, "aten::conv2d") == 10);
  CHECK(test::countOps(back, "aten::gelu") == 2);
  CHECK(test::countOps(back, "aten::silu") == 1);
  auto againV = again.verify(shape, {1e-4, 1e-4}, 1);
  INFO(againV.summary);
  CHECK(againV.passed);
}

TEST_CASE("TunedKernelsDoesNotFuseWithoutChannelsLastOrShapesOrWhereTheOperatorIsMissing") {
  // No shape-prop: the input is not known to be a 4-D tensor.
  auto plain = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  output(%y)\n",
      {{"w", at::randn({4, 3, 3, 3})}});
  rewriters::PassContext ctx;
  CHECK_FALSE(test::runChecked(*plain.graph, "tuned-kernels{fused=*}", &ctx).changed());
  CHECK(test::declinedWith(ctx, "not known to be a 4-D tensor"));
  // A contiguous input: a packed weight would make the result channels-last.
  auto nchw = test::parseWithConstants(
      "graph(%x : Tensor{float32, [1, 3, 8, 8], contiguous_format, cpu}):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor{float32, [1, 4, 8, 8], contiguous_format, cpu} = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  %z : Tensor{float32, [1, 4, 8, 8], contiguous_format, cpu} = aten::relu(%y)\n"
      "  output(%z)\n",
      {{"w", at::randn({4, 3, 3, 3})}});
  rewriters::PassContext nctx;
  CHECK_FALSE(test::runChecked(*nchw.graph, "tuned-kernels{fused=*}", &nctx).changed());
  CHECK(test::declinedWith(nctx, kernels::hasFusedConvs() ? "not known to be channels-last" : "no mkldnn::_convolution_pointwise"));
  CHECK(test::countOps(*nchw.graph, "aten::relu") == 1);
}

TEST_CASE("TunedKernelsDoesNotFuseAnActivationWithOtherReadersIntoAOneDnnConv") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  // The conv's result is read by the relu and returned: attr "none", the relu stays.
  auto p = test::parseWithConstants(
      "graph(%x : Tensor{float32, [1, 3, 8, 8], channels_last, cpu}):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor{float32, [1, 4, 8, 8], channels_last, cpu} = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  %z : Tensor{float32, [1, 4, 8, 8], channels_last, cpu} = aten::relu(%y)\n"
      "  %t : Tuple[Tensor, Tensor] = prim::TupleConstruct(%y, %z)\n"
      "  output(%t)\n",
      {{"w", at::randn({4, 3, 3, 3})}});
  rewriters::PassContext ctx;
  CHECK(test::runChecked(*p.graph, "tuned-kernels{fused=*}", &ctx).changed());
  CHECK(test::countOps(*p.graph, "mkldnn::_convolution_pointwise") == 1);
  CHECK(test::countOps(*p.graph, "aten::relu") == 1);
  test::checkIR(p.graph->str(), R"(
    # CHECK: mkldnn::_convolution_pointwise(
    # CHECK-SAME: "none"
  )");
}

// ---- linears: tuned-kernels{fused=} names them too (mkldnn::_linear_pointwise).

TEST_CASE("tuned-kernels fuses LeViT's hardswish into the linear once fold-linear-bn drops the view back") {
  if (!kernels::hasFusedLinears()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise (LibTorch 2.x has it)");
    return;
  }
  // LinearNorm: hardswish(bn(linear(x).flatten(0, 1)).reshape_as(linear(x))).
  const auto& f = test::fixture("linear_norm_trace");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  auto folded = opt.run("-O1", &ctx);
  REQUIRE(test::counter(folded, "fold-linear-bn", "view-back-dropped") == 2);
  auto report = opt.run("tuned-kernels{fused=*}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "fused-linear") == 2);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::hardswish") == 0);
  size_t withHardswish = 0;
  g.walk([&](ir::Node* n) {
    if (n->is("mkldnn::_linear_pointwise") && ir::OpView::of(n).literal("attr")->as<std::string>() == "hardswish")
      ++withHardswish;
  });
  CHECK(withHardswish == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("tuned-kernels fuses GPT-2 Conv1D's gelu, which reads a view of the linear, and the view follows") {
  if (!kernels::hasFusedLinears()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise (LibTorch 2.x has it)");
    return;
  }
  // addmm on x.view(-1, C), viewed back to [B, T, 4C], then the tanh GELU.
  const auto& f = test::fixture("conv1d_mlp_trace");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  REQUIRE(test::countOps(opt.model().forward(), "aten::gelu") == 1);     // fuse-gelu
  REQUIRE(test::countOps(opt.model().forward(), "aten::linear") == 2);   // canonicalize: addmm -> linear
  auto report = opt.run("tuned-kernels{fused=*}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "fused-linear") == 2);
  CHECK(test::counter(report, "tuned-kernels", "fused-through-view") == 1);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::gelu") == 0);
  size_t withGelu = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("mkldnn::_linear_pointwise")) return;
    const ir::OpView run = ir::OpView::of(n);
    if (run.literal("attr")->as<std::string>() != "gelu") return;
    ++withGelu;
    // Its one reader is the view back to [B, T, 4C].
    REQUIRE(n->output()->uses().size() == 1);
    CHECK(n->output()->uses()[0].user->is("aten::view"));
  });
  CHECK(withGelu == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  // Saved and loaded back: the import raises it to linear, gelu, view.
  Optimizer again = reloadChecked(opt, {{2, 8, 16}, {1, 3, 16}}, "conv1d");
  CHECK(test::countOps(again.model().forward(), "mkldnn::_linear_pointwise") == 0);
  CHECK(test::countOps(again.model().forward(), "aten::gelu") == 1);
  auto againV = again.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(againV.summary);
  CHECK(againV.passed);
}

TEST_CASE("TunedKernelsDoesNotFuseAnActivationThroughAViewWithOtherReaders") {
  if (!kernels::hasFusedLinears()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise (LibTorch 2.x has it)");
    return;
  }
  // The view is read by the gelu and returned too: the gelu stays.
  auto p = test::parseWithConstants(
      "graph(%x : Tensor{float32, [6, 4], contiguous_format, cpu}):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %b : Tensor = get_attr[\"b\"]\n"
      "  %y : Tensor{float32, [6, 8], contiguous_format, cpu} = aten::linear(%x, %w, %b)\n"
      "  %v : Tensor{float32, [2, 3, 8], contiguous_format, cpu} = aten::view(%y, [2, 3, 8])\n"
      "  %g : Tensor{float32, [2, 3, 8], contiguous_format, cpu} = aten::gelu(%v, \"none\")\n"
      "  output(%g, %v)\n",
      {{"w", at::randn({8, 4})}, {"b", at::randn({8})}});
  rewriters::PassContext ctx;
  auto report = test::runChecked(*p.graph, "tuned-kernels{fused=*}", &ctx);
  CHECK(test::counter(report, "tuned-kernels", "fused-linear") == 1);
  CHECK(test::counter(report, "tuned-kernels", "fused-through-view") == 0);
  CHECK(test::countOps(*p.graph, "aten::gelu") == 1);
}

TEST_CASE("tuned-kernels runs GPT-2's MLP as oneDNN linears packed at load, its gelu fused") {
  if (!kernels::hasFusedLinears()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("gelu_tanh_trace");  // [2, 8, 16] -> linear -> GELU (tanh) -> linear
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  REQUIRE(test::countOps(opt.model().forward(), "aten::gelu") == 1);  // fuse-gelu
  auto report = opt.run("tuned-kernels{fused=*}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "fused-linear") == 2);
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::linear") == 0);
  CHECK(test::countOps(g, "aten::gelu") == 0);  // the first linear's only reader: its post-op
  CHECK(test::countOps(g, "mkldnn::_linear_pointwise") == 2);
  size_t withGelu = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("mkldnn::_linear_pointwise")) return;
    const ir::OpView run = ir::OpView::of(n);
    // Each pack names the rows the linear saw (2 x 8).
    ir::Node* reorder = run.value("W")->node();
    REQUIRE(reorder->is("mkldnn::_reorder_linear_weight"));
    const ir::Literal* rows = ir::OpView::of(reorder).literal("batch_size");
    REQUIRE(rows);
    CHECK(rows->as<int64_t>() == 16);
    const ir::Literal* attr = run.literal("attr");
    const ir::Literal* algorithm = run.literal("algorithm");
    if (attr && attr->as<std::string>() == "gelu") {
      ++withGelu;
      CHECK((algorithm && algorithm->is<std::string>() && algorithm->as<std::string>() == "tanh"));
    }
  });
  CHECK(withGelu == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  // The file stores the dense weights; the holder packs them when it loads.
  const std::string code = opt.serialize().module.get_method("forward").graph()->toString();
  CHECK(code.find("_reorder_linear_weight") == std::string::npos);
  CHECK(code.find("_linear_pointwise") != std::string::npos);
  // Other row counts run correctly (the pack's rows are a hint).
  Optimizer again = reloadChecked(opt, {{2, 8, 16}, {5, 3, 16}}, "gelu_mlp");
  const ir::Graph& back = again.model().forward();
  CHECK(test::countOps(back, "mkldnn::_linear_pointwise") == 0);
  CHECK(test::countOps(back, "mkldnn::_reorder_linear_weight") == 0);
  CHECK(test::countOps(back, "aten::linear") == 2);
  CHECK(test::countOps(back, "aten::gelu") == 1);
  auto againV = again.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(againV.summary);
  CHECK(againV.passed);
}

TEST_CASE("tuned-kernels runs bf16 linears on oneDNN within the bf16 criterion") {
  if (!kernels::hasFusedLinears()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise (LibTorch 2.x has it)");
    return;
  }
  if (!target::cpuOneDnnLinearRuns(c10::ScalarType::BFloat16)) {
    // The pass declines them, with the reason (an AVX2-only CPU's oneDNN may have no bf16 linear).
    const auto& f = test::fixture("transformer_block");
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext ctx;
    ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
    opt.run("-O1,cast{dtype=bf16}", &ctx);
    auto report = opt.run("tuned-kernels{fused=*}", &ctx);
    CHECK(test::counter(report, "tuned-kernels", "fused-linear") == 0);
    CHECK(test::declinedWith(ctx, "oneDNN has no bfloat16 linear (probed)"));
    WARN("SKIPPED: this CPU's oneDNN has no bf16 linear (probed); the decline was checked");
    return;
  }
  const auto& f = test::fixture("transformer_block");  // 6 linears, 2 matmuls, [2, 8, 32]
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1,cast{dtype=bf16}", &ctx);
  auto report = opt.run("tuned-kernels{fused=*}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "fused-linear") == 6);
  const ir::Graph& g = opt.model().forward();
  g.walk([&](ir::Node* n) {
    if (n->is("mkldnn::_linear_pointwise")) CHECK(ir::OpView::of(n).value("X")->meta().dtype == c10::ScalarType::BFloat16);
  });
  auto v = opt.verify(f.inputs, verify::Tolerance::forPrecision(c10::ScalarType::BFloat16), 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("TunedKernelsDoesNotRunALinearOnOneDnnWithoutShapesOrAConstantWeightOrWhereTheOperatorIsMissing") {
  auto plain = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  output(%y)\n",
      {{"w", at::randn({4, 3})}});
  rewriters::PassContext ctx;
  CHECK_FALSE(test::runChecked(*plain.graph, "tuned-kernels{fused=*}", &ctx).changed());
  CHECK(test::declinedWith(ctx, kernels::hasFusedLinears() ? "not known to have rank 2 or more"
                                                           : "no mkldnn::_linear_pointwise"));
  // The weight is an input: no pack can be made at load.
  auto g = ir::parseGraph(
      "graph(%x : Tensor{float32, [2, 3], contiguous_format, cpu}, %w : Tensor{float32, [4, 3], contiguous_format, cpu}):\n"
      "  %y : Tensor{float32, [2, 4], contiguous_format, cpu} = aten::linear(%x, %w, None)\n"
      "  output(%y)\n");
  rewriters::PassContext wctx;
  CHECK_FALSE(test::runChecked(*g, "tuned-kernels{fused=*}", &wctx).changed());
  if (kernels::hasFusedLinears()) CHECK(test::declinedWith(wctx, "not a constant 2-D dense CPU tensor"));
  // A float64 input: oneDNN's linear takes float32 and bfloat16.
  auto f64 = test::parseWithConstants(
      "graph(%x : Tensor{float64, [2, 3], contiguous_format, cpu}):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor{float64, [2, 4], contiguous_format, cpu} = aten::linear(%x, %w, None)\n"
      "  output(%y)\n",
      {{"w", at::randn({4, 3}, at::kDouble)}});
  rewriters::PassContext dctx;
  CHECK_FALSE(test::runChecked(*f64.graph, "tuned-kernels{fused=*}", &dctx).changed());
  if (kernels::hasFusedLinears()) CHECK(test::declinedWith(dctx, "not float32 or bfloat16"));
}

// ---- the residual add as oneDNN's binary post-op (_convolution_pointwise.binary).

TEST_CASE("tuned-kernels fuses resnet18's residual add and relu into the conv before them") {
  if (!kernels::hasFusedConvs() || !ir::findSchema("mkldnn::_convolution_pointwise", "binary")) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise.binary (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  for (const char* precision : {"", ",cast{dtype=bf16}"}) {
    DYNAMIC_SECTION("pipeline -O1,channels-last" << precision) {
      // fp32: fuse-add-relu's _add_relu_; bf16: cast splits it into add_ and relu_.
      Optimizer opt = Optimizer::load(f.path);
      rewriters::PassContext ctx;
      ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
      opt.run(std::string("-O1,channels-last{mode=on}") + precision, &ctx);
      const bool bf16 = std::string(precision).find("bf16") != std::string::npos;
      if (bf16 && !target::cpuOneDnnConvRuns(target::OneDnnConv::Fused, c10::ScalarType::BFloat16)) {
        // The pass declines every conv, with the reason (an AVX2-only CPU's
        // oneDNN has no bf16 conv), and the model is left as it was.
        auto report = opt.run("tuned-kernels{fused=*}", &ctx, test::checkedInstrumentation());
        CHECK(test::counter(report, "tuned-kernels", "fused-add") == 0);
        CHECK(test::countOps(opt.model().forward(), "mkldnn::_convolution_pointwise") == 0);
        CHECK(test::declinedWith(ctx, "oneDNN has no bfloat16 conv as mkldnn::_convolution_pointwise (probed)"));
        WARN("SKIPPED: this CPU's oneDNN has no bf16 conv (probed); the decline was checked");
        continue;
      }
      auto report = opt.run("tuned-kernels{fused=*}", &ctx, test::checkedInstrumentation());
      CHECK(test::counter(report, "tuned-kernels", "fused-add") == 8);  // one per basic block
      const ir::Graph& g = opt.model().forward();
      CHECK(test::countOps(g, "mkldnn::_convolution_pointwise") == 20);
      for (const char* gone : {"aten::add", "aten::add_", "aten::_add_relu", "aten::_add_relu_"}) {
        INFO(gone);
        CHECK(test::countOps(g, gone) == 0);
      }
      size_t binary = 0;
      g.walk([&](ir::Node* n) {
        if (!n->is("mkldnn::_convolution_pointwise") || n->overload() != "binary") return;
        ++binary;
        const ir::OpView run = ir::OpView::of(n);
        CHECK(run.literal("binary_attr")->as<std::string>() == "add");
        CHECK(run.literal("unary_attr")->as<std::string>() == "relu");
      });
      CHECK(binary == 8);
      auto v = opt.verify(f.inputs,
                          bf16 ? verify::Tolerance::forPrecision(c10::ScalarType::BFloat16) : verify::Tolerance{1e-4, 1e-5},
                          2);
      INFO(v.summary);
      CHECK(v.passed);
      if (!bf16) {
        Optimizer again = reloadChecked(opt, {{1, 3, 64, 64}, {2, 3, 40, 48}}, "r18add");
        const ir::Graph& back = again.model().forward();
        CHECK(test::countOps(back, "mkldnn::_convolution_pointwise") == 0);
        CHECK(test::countOps(back, "aten::conv2d") == 20);
        CHECK(test::countOps(back, "aten::add") == 8);
        auto againV = again.verify(f.inputs, {1e-4, 1e-5}, 1);
        INFO(againV.summary);
        CHECK(againV.passed);
      }
    }
  }
}

TEST_CASE("TunedKernelsDoesNotFuseAnAddOfAnotherShapeOrLayoutOrAReusedConvResult") {
  if (!kernels::hasFusedConvs() || !ir::findSchema("mkldnn::_convolution_pointwise", "binary")) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise.binary (LibTorch 2.x has it)");
    return;
  }
  auto graphWith = [](const std::string& otherType, const std::string& tail) {
    return test::parseWithConstants(
        "graph(%x : Tensor{float32, [1, 3, 8, 8], channels_last, cpu}, %o : " + otherType + "):\n"
        "  %w : Tensor = get_attr[\"w\"]\n"
        "  %y : Tensor{float32, [1, 4, 8, 8], channels_last, cpu} = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
        "  %s : Tensor{float32, [1, 4, 8, 8], channels_last, cpu} = aten::add.Tensor(%y, %o, 1)\n" + tail,
        {{"w", at::randn({4, 3, 3, 3})}});
  };
  SECTION("a broadcast add (a per-channel bias)") {
    auto p = graphWith("Tensor{float32, [1, 4, 1, 1], contiguous_format, cpu}", "  output(%s)\n");
    rewriters::PassContext ctx;
    CHECK(test::runChecked(*p.graph, "tuned-kernels{fused=*}", &ctx).changed());
    CHECK(test::countOps(*p.graph, "aten::add") == 1);  // the conv is fused, with attr "none"
  }
  SECTION("an NCHW other") {
    auto p = graphWith("Tensor{float32, [1, 4, 8, 8], contiguous_format, cpu}", "  output(%s)\n");
    rewriters::PassContext ctx;
    test::runChecked(*p.graph, "tuned-kernels{fused=*}", &ctx);
    CHECK(test::countOps(*p.graph, "aten::add") == 1);
  }
  SECTION("the conv's result is read again") {
    auto p = graphWith("Tensor{float32, [1, 4, 8, 8], channels_last, cpu}",
                       "  output(%s, %y)\n");
    rewriters::PassContext ctx;
    test::runChecked(*p.graph, "tuned-kernels{fused=*}", &ctx);
    CHECK(test::countOps(*p.graph, "aten::add") == 1);
  }
}

// ---- every oneDNN conv form runs only where this CPU has the dtype's kernel.

TEST_CASE("a bf16 conv goes to each oneDNN conv form only where this CPU's oneDNN runs it (probed)") {
  using target::OneDnnConv;
  // fp32 runs in every form this LibTorch has.
  CHECK(target::cpuOneDnnConvRuns(OneDnnConv::Dense, c10::ScalarType::Float));
  CHECK(target::cpuOneDnnConvRuns(OneDnnConv::Blocked, c10::ScalarType::Float));
  CHECK(target::cpuOneDnnConvRuns(OneDnnConv::Prepacked, c10::ScalarType::Float) == kernels::hasPrepackedConvs());
  CHECK(target::cpuOneDnnConvRuns(OneDnnConv::Fused, c10::ScalarType::Float) == kernels::hasFusedConvs());
  // The bf16 answer is the kernel's: a bigger conv in the same form agrees.
  const at::Tensor x = at::randn({1, 8, 12, 12}).to(at::kBFloat16), w = at::randn({16, 8, 3, 3}).to(at::kBFloat16);
  bool denseRuns = true;
  try {
    at::mkldnn_convolution(x, w, {}, {1, 1}, {1, 1}, {1, 1}, 1);
  } catch (const std::exception&) {
    denseRuns = false;
  }
  CHECK(target::cpuOneDnnConvRuns(OneDnnConv::Dense, c10::ScalarType::BFloat16) == denseRuns);

  // Each pass: a bf16 conv is rewritten, or declined with the probe's reason.
  struct Form {
    OneDnnConv form;
    const char* pipeline;
    const char* kernel;  // what the conv becomes
    const char* reason;
  };
  const Form forms[] = {
      {OneDnnConv::Dense, "tuned-kernels{mkldnn=*}", "aten::mkldnn_convolution", "as aten::mkldnn_convolution (probed)"},
      {OneDnnConv::Prepacked, "tuned-kernels{prepacked=*}", "mkldnn_prepacked::conv2d_run",
       "as mkldnn_prepacked::conv2d_run (probed)"},
      {OneDnnConv::Fused, "tuned-kernels{fused=*}", "mkldnn::_convolution_pointwise",
       "as mkldnn::_convolution_pointwise (probed)"},
      {OneDnnConv::Blocked, "onednn-blocked{min-convs=1}", "aten::mkldnn_convolution",
       "as aten::mkldnn_convolution on oneDNN tensors (probed)"},
  };
  for (const Form& f : forms) {
    if (f.form == OneDnnConv::Prepacked && !kernels::hasPrepackedConvs()) continue;
    if (f.form == OneDnnConv::Fused && !kernels::hasFusedConvs()) continue;
    DYNAMIC_SECTION(f.pipeline) {
      auto p = test::parseWithConstants(
          "graph(%x : Tensor{bfloat16, [1, 8, 12, 12], channels_last, cpu}):\n"
          "  %w : Tensor = get_attr[\"w\"]\n"
          "  %y : Tensor{bfloat16, [1, 16, 12, 12], channels_last, cpu} = aten::conv2d(%x, %w, None, [1, 1], [1, 1], [1, 1], 1)\n"
          "  output(%y)\n",
          {{"w", w.contiguous(c10::MemoryFormat::ChannelsLast)}});
      rewriters::PassContext ctx;
      const bool runs = target::cpuOneDnnConvRuns(f.form, c10::ScalarType::BFloat16);
      CHECK(test::runChecked(*p.graph, f.pipeline, &ctx).changed() == runs);
      CHECK((test::countOps(*p.graph, f.kernel) == 1) == runs);
      CHECK(test::declinedWith(ctx, std::string("this CPU's oneDNN has no bfloat16 conv ") + f.reason) == !runs);
      if (!runs) WARN("this CPU's oneDNN has no bf16 conv for " << f.pipeline << " (probed); the decline was checked");
    }
  }
}

TEST_CASE("tuned-kernels skip= leaves the named convs on aten::conv2d beside fused=*") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("mobilenet_v2_script");
  rewriters::PassContext ctx;
  Optimizer opt = channelsLastMobilenet(ctx);
  // The first two convs and the classifier's linear.
  std::vector<std::string> convs, linears;
  opt.model().forward().walk([&](ir::Node* n) {
    if (n->is("aten::conv2d")) convs.push_back(n->output()->name());
    if (n->is("aten::linear")) linears.push_back(n->output()->name());
  });
  REQUIRE(convs.size() == 52);
  REQUIRE(linears.size() == 1);
  const std::set<std::string> skipped{convs[0], convs[1], linears[0]};
  auto report = opt.run("tuned-kernels{fused=*, skip=\"" + kernels::joinNameList(skipped) + "\"}", &ctx,
                        test::checkedInstrumentation());
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::conv2d") == 2);
  CHECK(test::countOps(g, "mkldnn::_convolution_pointwise") == 50);
  CHECK(test::countOps(g, "aten::linear") == 1);
  CHECK(test::countOps(g, "mkldnn::_linear_pointwise") == 0);
  g.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") || n->is("aten::linear")) CHECK(skipped.count(n->output()->name()));
  });
  // An explicit list loses the skipped names too.
  rewriters::PassContext ctx2;
  Optimizer explicitList = channelsLastMobilenet(ctx2);
  explicitList.run("tuned-kernels{fused=\"" + convs[0] + ";" + convs[2] + "\", skip=\"" + convs[0] + "\"}", &ctx2);
  CHECK(test::countOps(explicitList.model().forward(), "mkldnn::_convolution_pointwise") == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

namespace {

// linear -> add(linear's result, %r, alpha) -> relu, typed as shape-prop
// leaves it; %r of `residual` shape.
test::ParsedGraph linearThenAdd(const std::string& residual, const std::string& alpha) {
  return test::parseWithConstants(
      "graph(%x : Tensor{float32, [2, 3, 4], contiguous_format, cpu}, %r : Tensor{float32, " + residual +
          ", contiguous_format, cpu}):\n"
          "  %w : Tensor = get_attr[\"w\"]\n"
          "  %b : Tensor = get_attr[\"b\"]\n"
          "  %y : Tensor{float32, [2, 3, 8], contiguous_format, cpu} = aten::linear(%x, %w, %b)\n"
          "  %z : Tensor{float32, [2, 3, 8], contiguous_format, cpu} = aten::add.Tensor(%y, %r, " + alpha + ")\n"
          "  %o : Tensor{float32, [2, 3, 8], contiguous_format, cpu} = aten::relu(%z)\n"
          "  output(%o)\n",
      {{"w", at::randn({8, 4})}, {"b", at::randn({8})}});
}

}  // namespace

TEST_CASE("tuned-kernels makes a transformer's residual add the oneDNN linear's binary post-op") {
  if (!kernels::hasFusedLinears() || !ir::findSchema("mkldnn::_linear_pointwise", "binary")) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise.binary (LibTorch 2.x has it)");
    return;
  }
  auto p = linearThenAdd("[2, 3, 8]", "1");
  const at::Tensor x = at::randn({2, 3, 4}), r = at::randn({2, 3, 8});
  const at::Tensor expected = test::runGraph(*p.graph, {x, r}).toTensor();
  rewriters::PassContext ctx;
  auto report = test::runChecked(*p.graph, "tuned-kernels{fused=*}", &ctx);
  CHECK(test::counter(report, "tuned-kernels", "fused-linear-add") == 1);
  CHECK(test::countOps(*p.graph, "mkldnn::_linear_pointwise") == 1);
  CHECK(test::countOps(*p.graph, "aten::add") == 0);
  CHECK(test::countOps(*p.graph, "aten::relu") == 1);  // the binary form has no unary post-op: the relu stays
  p.graph->walk([](ir::Node* n) {
    if (!n->is("mkldnn::_linear_pointwise")) return;
    CHECK(n->overload() == "binary");
    CHECK(ir::OpView::of(n).literal("attr")->as<std::string>() == "add");
  });
  CHECK(test::runGraph(*p.graph, {x, r}).toTensor().allclose(expected, 1e-5, 1e-6));
  // The import reads it back as the linear and the add.
  kernels::raiseFusedLinears(*p.graph);
  CHECK(test::countOps(*p.graph, "mkldnn::_linear_pointwise") == 0);
  CHECK(test::countOps(*p.graph, "aten::linear") == 1);
  CHECK(test::countOps(*p.graph, "aten::add") == 1);
  CHECK(test::runGraph(*p.graph, {x, r}).toTensor().allclose(expected, 1e-5, 1e-6));
}

TEST_CASE("TunedKernelsDoesNotFuseABroadcastOrScaledAddIntoALinear") {
  if (!kernels::hasFusedLinears() || !ir::findSchema("mkldnn::_linear_pointwise", "binary")) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise.binary (LibTorch 2.x has it)");
    return;
  }
  for (const auto& [residual, alpha] : {std::pair<std::string, std::string>{"[1, 1, 8]", "1"}, {"[2, 3, 8]", "2"}}) {
    INFO(residual << " alpha " << alpha);
    auto p = linearThenAdd(residual, alpha);
    rewriters::PassContext ctx;
    auto report = test::runChecked(*p.graph, "tuned-kernels{fused=*}", &ctx);
    CHECK(test::counter(report, "tuned-kernels", "fused-linear-add") == 0);
    CHECK(test::counter(report, "tuned-kernels", "fused-linear") == 1);  // the linear alone
    CHECK(test::countOps(*p.graph, "aten::add") == 1);
  }
}

TEST_CASE("fusedPostOpKind says what fused= would fuse into each conv and linear, as the pass fuses it") {
  // `fixture`'s convs and linears after `pipeline`, counted by the kind
  // fusedPostOpKind gives them (what tuned-kernels{fused=*} then fuses).
  auto kinds = [](const std::string& fixture, const std::string& pipeline) {
    const auto& f = test::fixture(fixture);
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext ctx;
    ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
    opt.run(pipeline, &ctx);
    std::map<kernels::FusedPostOpKind, size_t> out;
    opt.model().forward().walk([&](ir::Node* n) {
      if (n->is("aten::conv2d") || n->is("aten::linear")) ++out[kernels::fusedPostOpKind(n)];
    });
    return out;
  };
  using K = kernels::FusedPostOpKind;
  SECTION("GPT-2's MLP: the GELU through the view") {
    // up -> view -> gelu; down is the output.
    auto k = kinds("conv1d_mlp_trace", "-O1");
    CHECK(k[K::Activation] == 1);
    CHECK(k[K::None] == 1);
    CHECK(k[K::ResidualAdd] == 0);
  }
  SECTION("resnet18 channels-last: relus, and residual adds (whose relu goes along)") {
    auto k = kinds("resnet18_script", "-O1,channels-last{mode=on}");
    // 20 convs: the stem and each block's first conv (9) have a relu; each
    // block's second conv (8) is the `out += identity` the add writes in
    // place; the 3 downsample convs are the identity it adds (an in-place
    // add's second operand: not fused, as the pass leaves it), and the
    // classifier's linear is the output.
    const bool binary = ir::findSchema("mkldnn::_convolution_pointwise", "binary") != nullptr;
    CHECK(k[K::Activation] == 9);
    CHECK(k[K::ResidualAdd] == (binary ? 8u : 0u));
    CHECK(k[K::None] == (binary ? 4u : 12u));
  }
  SECTION("a conv on a contiguous input has no residual add to fuse (the binary form wants channels-last)") {
    CHECK(kinds("resnet18_script", "-O1,channels-last{mode=off}")[K::ResidualAdd] == 0);
  }
}
