// fuse-int8-activations: int8 conv + silu/hardswish chains become
// onednn::qconv2d_pointwise with the activation fused. Fired (counters),
// structure (which convs, uint8 passed between rewritten convs, the float
// output, the conversions left), numerics against the unfused int8 model and
// the fp32 original after save and reload, and the cases where it must not
// fire: a conv whose int8 result another int8 op reads too, a .pt2 OUT, a
// CUDA target, a conv not named in convs=, and LibTorch 1.13 (no operator:
// declined with the reason).
#include "ir/op_views.h"
#include "quant/calibration.h"
#include "quant/fuse_int8_activations.h"
#include "tests/quant/quant_run.h"
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <map>

using namespace ptopt;
using test::QuantRun;
using test::quantFixture;

namespace {

constexpr const char* kPass = "fuse-int8-activations";

std::vector<std::vector<c10::IValue>> batches(const std::string& file) {
  verify::InputSet set = verify::loadInputsFile(quantFixture(file));
  return quant::splitCalibrationBatches(set.values, 1, nullptr, file);
}

double cosine(const at::Tensor& a, const at::Tensor& b) {
  return at::cosine_similarity(a.reshape({1, -1}), b.reshape({1, -1})).item<double>();
}

// `fixture` at -O1 on example inputs of `shape`, then `quantize` (its
// options) calibrated on `calibration`.
QuantRun quantized(const std::string& fixture, std::vector<int64_t> shape, const std::string& calibration,
                   const std::string& quantize) {
  QuantRun r{Optimizer::load(quantFixture(fixture)), {}, {}};
  r.ctx.exampleInputs = std::vector<c10::IValue>{at::randn(shape)};
  r.opt.run("-O1", &r.ctx);
  quant::CalibrationData data;
  data.batches = batches(calibration);
  data.source = calibration;
  r.ctx.inputs.set(std::move(data));
  rewriters::PassManager pm(defaultRegistry(), rewriters::parsePipeline(quantize, defaultRegistry()),
                            test::checkedInstrumentation());
  pm.run(r.opt.model(), r.ctx);
  return r;
}

// quant_silu_cnn, quantized without the accuracy guard (untrained).
QuantRun quantizedSiluCnn() {
  return quantized("quant_silu_cnn.pt", {4, 3, 32, 32}, "quant_cnn_calib.pt", "quantize{fallback=false,min-cosine=-1}");
}

// The rewritten model saved and reloaded against the unfused int8 model (the
// same numbers up to the roundings oneDNN's kernels save) and the fp32
// original (within the int8 criterion), on held-out batches.
void checkReloaded(QuantRun& r, torch::jit::Module& unfused, const std::string& fixture, const std::string& heldout) {
  auto rewritten = r.opt.serialize().module;
  auto original = torch::jit::load(quantFixture(fixture));
  original.eval();
  for (const auto& batch : batches(heldout)) {
    const at::Tensor a = original.forward(batch).toTensor();
    const at::Tensor b = rewritten.forward(batch).toTensor();
    const at::Tensor c = unfused.forward(batch).toTensor();
    CHECK(cosine(b, c) >= 0.999);
    CHECK(cosine(a, b) >= 0.99);
  }
}

rewriters::RunReport fuse(QuantRun& r, const std::string& options = "") {
  rewriters::PassManager pm(defaultRegistry(), rewriters::parsePipeline(std::string(kPass) + options, defaultRegistry()),
                            test::checkedInstrumentation());
  return pm.run(r.opt.model(), r.ctx);
}

int64_t fuseCounter(const rewriters::RunReport& report, const std::string& name) {
  return test::counter(report, kPass, name);
}

}  // namespace

TEST_CASE("fuse-int8-activations: conv + silu/hardswish run as one oneDNN int8 kernel, uint8 between them",
          "[quantize][fuse-int8-activations]") {
  QuantRun r = quantizedSiluCnn();
  const ir::Graph& g = r.opt.model().forward();
  REQUIRE(test::countOps(g, "quantized::conv2d") == 6);  // stem, expand, dw, project, shared, tap
  auto unfused = r.opt.serialize().module;
  const std::string missing = quant::fuseInt8ActivationsMissing(r.ctx);
  const rewriters::RunReport report = fuse(r);
  INFO(ir::printGraph(g));
  if (!missing.empty()) {  // LibTorch 1.13: no onednn::qconv2d_pointwise
    CHECK(missing.find("no onednn::qconv2d_pointwise") != std::string::npos);
    CHECK(r.declined(missing));
    CHECK(fuseCounter(report, "fused") == 0);
    CHECK(test::countOps(g, "quantized::conv2d") == 6);
    return;
  }
  CHECK(fuseCounter(report, "fused") == 4);         // stem, expand, dw, tap
  CHECK(fuseCounter(report, "int8-chained") == 2);  // expand reads the stem's uint8, dw the expand's
  CHECK(fuseCounter(report, "float-out") == 1);     // tap: its silu's result is pooled in float
  std::map<std::string, int> attrs;
  int floatOut = 0;
  for (ir::Node* n : *g.block()) {
    if (!n->is("onednn::qconv2d_pointwise")) continue;
    const ir::OpView v = ir::OpView::of(n);
    REQUIRE(v.literal("attr"));
    ++attrs[v.literal("attr")->as<std::string>()];
    floatOut += v.dtypeArg("output_dtype") == at::kFloat;
    // The weight is packed when the file loads: a load-time node reading constants.
    ir::Node* pack = v.value("qw")->node();
    REQUIRE(pack->is("onednn::qconv_prepack"));
  }
  CHECK(attrs["swish"] == 3);
  CHECK(attrs["hardswish"] == 1);
  CHECK(floatOut == 1);
  // Left as they were: project (no activation) and shared (must not fire).
  CHECK(test::countOps(g, "quantized::conv2d") == 2);
  CHECK(test::countOps(g, "aten::silu") + test::countOps(g, "aten::silu_") == 1);  // shared's
  CHECK(test::countOps(g, "aten::hardswish") + test::countOps(g, "aten::hardswish_") == 0);
  // uint8 views of quantized tensors: the image's and the add's, read by the stem and tap.
  CHECK(test::countOps(g, "aten::int_repr") == 2);
  // The quantized tensors other int8 ops read: the stem's (the residual add) and dw's (project).
  CHECK(test::countOps(g, "aten::_make_per_tensor_quantized_tensor") == 2);

  checkReloaded(r, unfused, "quant_silu_cnn.pt", "quant_cnn_heldout.pt");
}

TEST_CASE("fuse-int8-activations: only the convs named in convs=", "[quantize][fuse-int8-activations]") {
  QuantRun r = quantizedSiluCnn();
  if (!quant::fuseInt8ActivationsMissing(r.ctx).empty()) return;  // 1.13: the test above checks the decline
  std::string tap;
  for (ir::Node* n : *r.opt.model().forward().block())
    if (quant::int8ActivationChain(*n)) tap = n->output()->name();  // the last chain is tap's
  REQUIRE_FALSE(tap.empty());
  const rewriters::RunReport report = fuse(r, "{convs=" + tap + "}");
  CHECK(fuseCounter(report, "fused") == 1);
  CHECK(test::countOps(r.opt.model().forward(), "onednn::qconv2d_pointwise") == 1);
}

TEST_CASE("fuse-int8-activations: declined for a .pt2 OUT and a CUDA target", "[quantize][fuse-int8-activations]") {
  for (const bool pt2 : {true, false}) {
    QuantRun r = quantizedSiluCnn();
    if (pt2) r.ctx.tensorValuesOnly = true;
    else r.ctx.targetDevice = "cuda";
    const rewriters::RunReport report = fuse(r);
    CHECK(fuseCounter(report, "fused") == 0);
    CHECK(test::countOps(r.opt.model().forward(), "onednn::qconv2d_pointwise") == 0);
    CHECK(r.declined(pt2 ? "OUT is a .pt2, which holds no packed oneDNN weight"
                         : "the target is cuda: oneDNN's int8 convs are CPU kernels"));
  }
}

namespace {

// quant_gelu_mlp (traced), quantized without the accuracy guard (untrained).
QuantRun quantizedGeluMlp() {
  return quantized("quant_gelu_mlp.pt", {4, 8, 64}, "quant_gelu_mlp_calib.pt", "quantize{fallback=false,min-cosine=-1}");
}

}  // namespace

TEST_CASE("fuse-int8-activations: linear + gelu run as one oneDNN int8 kernel, uint8 between them",
          "[quantize][fuse-int8-activations]") {
  QuantRun r = quantizedGeluMlp();
  const ir::Graph& g = r.opt.model().forward();
  REQUIRE(test::countOps(g, "quantized::linear") == 5);  // up, mid, down, shared, tap
  auto unfused = r.opt.serialize().module;
  const std::string missing = quant::fuseInt8ActivationsMissing(r.ctx);
  const rewriters::RunReport report = fuse(r);
  INFO(ir::printGraph(g));
  if (!missing.empty()) {  // LibTorch 1.13: declined, nothing changed
    CHECK(r.declined(missing));
    CHECK(fuseCounter(report, "fused-linear") == 0);
    CHECK(test::countOps(g, "quantized::linear") == 5);
    return;
  }
  CHECK(fuseCounter(report, "fused-linear") == 3);  // up, mid, tap
  CHECK(fuseCounter(report, "fused") == 0);         // no conv
  CHECK(fuseCounter(report, "int8-chained") == 1);  // mid reads up's uint8
  CHECK(fuseCounter(report, "float-out") == 1);     // tap: its gelu's result is averaged in float
  std::map<std::string, int> algorithms;
  for (ir::Node* n : *g.block()) {
    if (!n->is("onednn::qlinear_pointwise")) continue;
    const ir::OpView v = ir::OpView::of(n);
    REQUIRE(v.literal("post_op_name"));
    CHECK(v.literal("post_op_name")->as<std::string>() == "gelu");
    ++algorithms[v.literal("post_op_algorithm")->as<std::string>()];
    // The weight is packed when the file loads: a load-time node reading constants.
    REQUIRE(v.value("qw")->node()->is("onednn::qlinear_prepack"));
  }
  CHECK(algorithms["none"] == 2);  // up, tap
  CHECK(algorithms["tanh"] == 1);  // mid
  // Left as they were: down (no activation) and shared (must not fire).
  CHECK(test::countOps(g, "quantized::linear") == 2);
  CHECK(test::countOps(g, "aten::gelu") == 0);
  CHECK(test::countOps(g, "aten::silu") + test::countOps(g, "aten::silu_") == 1);  // shared's
  // uint8 views of the quantized input and of the add's result, read by up and tap.
  CHECK(test::countOps(g, "aten::int_repr") == 2);
  // The quantized tensor down reads: mid's.
  CHECK(test::countOps(g, "aten::_make_per_tensor_quantized_tensor") == 1);

  checkReloaded(r, unfused, "quant_gelu_mlp.pt", "quant_gelu_mlp_heldout.pt");
}

namespace {

// quant_se_cnn (trained; a depthwise conv + relu, squeeze-excite gates),
// quantized as --quantize int8 would.
QuantRun quantizedSeCnn() {
  return quantized("quant_se_cnn.pt", {4, 3, 32, 32}, "quant_cnn_calib.pt", "quantize{fallback=false}");
}

int64_t plainConvs(const ir::Graph& g) {
  return test::countOps(g, "quantized::conv2d") + test::countOps(g, "quantized::conv2d_relu");
}

}  // namespace

TEST_CASE("fuse-int8-activations: plain= moves int8 convs without a chain to oneDNN, the depthwise ones or all",
          "[quantize][fuse-int8-activations]") {
  for (const bool all : {false, true}) {
    QuantRun r = quantizedSeCnn();
    const ir::Graph& g = r.opt.model().forward();
    const int64_t before = plainConvs(g);
    REQUIRE(before >= 3);  // stem, dw, pw, conv (and the gates' where int8)
    std::vector<std::string> depthwise;
    for (ir::Node* n : *g.block()) {
      if (quant::int8DepthwiseConv(g, *n)) depthwise.push_back(n->output()->name());
      CHECK_FALSE(quant::int8ActivationChain(*n));  // relu convs: no chain to fuse
    }
    REQUIRE(depthwise.size() == 1);  // dw: 16 channels in 16 groups
    auto unfused = r.opt.serialize().module;
    const std::string missing = quant::fuseInt8ActivationsMissing(r.ctx);
    const rewriters::RunReport report = fuse(r, std::string("{plain=") + (all ? "*" : depthwise[0]) + "}");
    INFO(ir::printGraph(g));
    if (!missing.empty()) {  // LibTorch 1.13
      CHECK(r.declined(missing));
      CHECK(plainConvs(g) == before);
      continue;
    }
    CHECK(fuseCounter(report, "onednn-conv") == (all ? before : 1));
    CHECK(plainConvs(g) == (all ? 0 : before - 1));
    CHECK(fuseCounter(report, "fused") == 0);
    int relu = 0;
    for (ir::Node* n : *g.block()) {
      if (!n->is("onednn::qconv2d_pointwise")) continue;
      const ir::OpView v = ir::OpView::of(n);
      relu += v.literal("attr")->as<std::string>() == "relu";
      CHECK_FALSE(v.dtypeArg("output_dtype"));  // uint8 out, in the conv's own quantization
      REQUIRE(v.value("qw")->node()->is("onednn::qconv_prepack"));
    }
    CHECK(relu >= 1);  // dw's relu is the post-op
    if (all) CHECK(fuseCounter(report, "int8-chained") >= 1);  // a moved conv reads the previous one's uint8

    checkReloaded(r, unfused, "quant_se_cnn.pt", "quant_cnn_heldout.pt");
  }
}
