// quantize: which ops become int8 and where the boundaries are, numerics by
// the int8 criterion (held-out cosine and top-1 agreement), the fallback
// finding the one deliberately sensitive layer, dynamic mode, a must-not-fire
// model, bad calibration data; every run with the edit-log check on. The
// fixtures (tests/fixtures/make_quant_fixtures.py) are trained on a synthetic
// task at generation time, so their outputs mean something.
#include "quant/calibration.h"
#include "quant/quantize.h"
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"
#include "tests/quant/quant_run.h"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace ptopt;
using test::QuantRun;
using test::quantFixture;

namespace {

std::vector<std::vector<c10::IValue>> loadBatches(const std::string& file, size_t numInputs) {
  verify::InputSet set = verify::loadInputsFile(quantFixture(file));
  return quant::splitCalibrationBatches(set.values, numInputs, nullptr, file);
}

// -O1 first (BN folds, relu fusion), then quantize checked.
QuantRun runQuantize(const std::string& model, const std::string& calib, const std::string& options,
                     std::vector<int64_t> shape) {
  QuantRun r{Optimizer::load(quantFixture(model)), {}, {}};
  r.ctx.exampleInputs = std::vector<c10::IValue>{at::randn(shape)};
  r.opt.run("-O1", &r.ctx);
  if (!calib.empty()) {
    quant::CalibrationData data;
    data.batches = loadBatches(calib, 1);
    data.source = calib;
    r.ctx.inputs.set(std::move(data));
  }
  rewriters::PassManager pm(defaultRegistry(), rewriters::parsePipeline("quantize" + options, defaultRegistry()),
                            test::checkedInstrumentation());
  r.report = pm.run(r.opt.model(), r.ctx);
  return r;
}

// Cosine and top-1 agreement of the exported (saved and reloaded) module
// against the original on held-out batches.
std::pair<double, double> heldOutAgreement(QuantRun& r, const std::string& model, const std::string& heldOut) {
  auto original = torch::jit::load(quantFixture(model));
  original.eval();
  auto optimized = r.opt.serialize().module;
  double worst = 1;
  int64_t agree = 0, rows = 0;
  for (const auto& batch : loadBatches(heldOut, 1)) {
    at::Tensor a = original.forward(batch).toTensor();
    at::Tensor b = optimized.forward(batch).toTensor();
    REQUIRE_FALSE(b.is_quantized());
    worst = std::min(worst, at::cosine_similarity(a.reshape({1, -1}), b.reshape({1, -1})).item<double>());
    agree += a.argmax(1).eq(b.argmax(1)).sum().item<int64_t>();
    rows += a.size(0);
  }
  return {worst, static_cast<double>(agree) / static_cast<double>(rows)};
}

}  // namespace

TEST_CASE("quantize: conv/linear/add/cat become int8 with one entry and one exit", "[quantize]") {
  QuantRun r = runQuantize("quant_cnn.pt", "quant_cnn_calib.pt", "", {4, 3, 32, 32});
  const ir::Graph& g = r.opt.model().forward();
  INFO(ir::printGraph(g));
  CHECK(r.counter("quantized") > 0);
  CHECK(r.counter("fallback") == 0);
  // Every conv, the residual add + relu, the cat and the head are int8.
  CHECK(test::countOps(g, "aten::conv2d") == 0);
  CHECK(test::countOps(g, "aten::linear") == 0);
  CHECK(test::countOps(g, "quantized::conv2d_relu") == 4);  // stem, c1, c3 (relu6), branch
  CHECK(test::countOps(g, "quantized::conv2d") == 1);       // c2 (its relu follows the add)
  CHECK(test::countOps(g, "quantized::add_relu") == 1);
  CHECK(test::countOps(g, "quantized::cat") == 1);
  CHECK(r.counter("cat-shared") == 2);  // both convs write in the cat's quantization
  CHECK(test::countOps(g, "quantized::linear") == 1);
  // The region is entered once (the image) and left once (the logits).
  CHECK(test::countOps(g, "aten::quantize_per_tensor") == 1);
  CHECK(test::countOps(g, "aten::dequantize") == 1);
  CHECK(r.counter("entries") == 1);
  CHECK(r.counter("exits") == 1);
  // The output is the dequantized logits.
  const ir::Value* out = g.outputs().at(0);
  REQUIRE(out->node());
  CHECK(out->node()->target() == "aten::dequantize");
  // Packed parameters are constants of the engine's custom classes.
  int packed = 0;
  for (const auto& [name, v] : r.opt.model().constants->entries())
    if (v.isObject() || v.isCustomClass()) ++packed;
  CHECK(packed == 6);
  const auto& rep = r.quantReport();
  CHECK(rep.applied);
  CHECK(rep.ops.size() == 8);
  for (const auto& op : rep.ops) CHECK(op.sqnrDb > 10.0);
}

TEST_CASE("quantize: a cat's inputs are written in the cat's quantization, except one two cats read or a "
          "pass-through op's", "[quantize]") {
  QuantRun r = runQuantize("quant_two_cats.pt", "quant_cnn_calib.pt", "{fallback=false,min-cosine=-1}", {4, 3, 32, 32});
  const ir::Graph& g = r.opt.model().forward();
  INFO(ir::printGraph(g));
  CHECK(r.counter("cat-shared") == 3);  // b, c, d
  REQUIRE(test::countOps(g, "quantized::cat") == 3);
  auto params = [](ir::Node* n, const char* scale, const char* zeroPoint) {
    const ir::OpView v = ir::OpView::of(n);
    REQUIRE(v.literal(scale));
    REQUIRE(v.literal(zeroPoint));
    return std::make_pair(v.literal(scale)->as<double>(), v.literal(zeroPoint)->as<int64_t>());
  };
  int shared = 0, own = 0, pooled = 0;
  for (ir::Node* cat : *g.block()) {
    if (!cat->is("quantized::cat")) continue;
    const auto catParams = params(cat, "scale", "zero_point");
    ir::Node* list = ir::OpView::of(cat).value("qx")->node();
    REQUIRE(list->is("prim::ListConstruct"));
    for (const auto& item : list->args()) {
      ir::Node* producer = item.value()->node();
      if (producer->is("aten::max_pool2d")) { ++pooled; continue; }  // runs in b's quantization
      REQUIRE(producer->target().rfind("quantized::conv2d", 0) == 0);
      const bool same = params(producer, "output_scale", "output_zero_point") == catParams;
      // `a` is the value in two cats' lists (b is read by its pooling too).
      size_t lists = 0;
      for (const auto& u : item.value()->uses()) lists += u.user->is("prim::ListConstruct");
      if (lists == 2) { CHECK_FALSE(same); ++own; }
      else { CHECK(same); ++shared; }
    }
  }
  CHECK(shared == 3);
  CHECK(own == 2);  // a, in two lists
  CHECK(pooled == 1);
  // The head, called three times, is packed once: one attribute for a, b, c, d and the head.
  CHECK(r.counter("packed-shared") == 2);
  int packed = 0;
  for (const auto& [name, v] : r.opt.model().constants->entries())
    if (v.isObject() || v.isCustomClass()) ++packed;
  CHECK(packed == 5);
  auto [cosine, top1] = heldOutAgreement(r, "quant_two_cats.pt", "quant_cnn_heldout.pt");
  CHECK(cosine >= 0.99);
}

TEST_CASE("quantize: squeeze-excite gates stay int8: mean and hardsigmoid on quantized tensors, quantized::mul",
          "[quantize]") {
  QuantRun r = runQuantize("quant_se_cnn.pt", "quant_cnn_calib.pt", "", {4, 3, 32, 32});
  const ir::Graph& g = r.opt.model().forward();
  INFO(ir::printGraph(g));
  CHECK(r.counter("fallback") == 0);
  // The two hardsigmoid gates: x * hardsigmoid(s) in int8, s's pooling and
  // gate on the quantized tensors.
  CHECK(test::countOps(g, "quantized::mul") == 2);
  size_t meansOnInt8 = 0, gatesOnInt8 = 0;
  for (const ir::Node* n : *g.block()) {
    const bool quantizedIn = n->numArgs() && n->arg(0).isValue() && n->argValue(0)->node() &&
                             n->argValue(0)->node()->target().rfind("quantized::", 0) == 0;
    if (n->is("aten::mean") && n->arg(0).isValue() && !n->argValue(0)->node()->is("aten::dequantize")) ++meansOnInt8;
    if (n->is("aten::hardsigmoid") && quantizedIn) ++gatesOnInt8;
  }
  CHECK(meansOnInt8 == 3);  // the sigmoid gate's pooling too
  CHECK(gatesOnInt8 == 2);
  // Must not fire: the sigmoid gate's mul (sigmoid has no int8 form here)
  // stays float: the region is left for the sigmoid and for x, and entered
  // again with the product (on its way to the int8 head).
  CHECK(test::countOps(g, "aten::mul") == 1);
  CHECK(test::countOps(g, "aten::sigmoid") == 1);
  CHECK(r.counter("entries") == 2);  // the image, the product
  CHECK(r.counter("exits") == 3);    // the sigmoid's input, x, the logits
  auto [cosine, top1] = heldOutAgreement(r, "quant_se_cnn.pt", "quant_cnn_heldout.pt");
  CHECK(cosine >= 0.99);
  CHECK(top1 >= 0.9);
}

TEST_CASE("quantize: numerics within the int8 criterion on held-out data, after save and reload", "[quantize]") {
  for (const std::string observer : {"minmax", "histogram", "percentile"}) {
    INFO(observer);
    QuantRun r = runQuantize("quant_cnn.pt", "quant_cnn_calib.pt", "{observer=" + observer + "}", {4, 3, 32, 32});
    CHECK(r.counter("quantized") > 0);
    auto [cosine, top1] = heldOutAgreement(r, "quant_cnn.pt", "quant_cnn_heldout.pt");
    CHECK(cosine >= 0.99);
    CHECK(top1 >= 0.9);
    CHECK(r.quantReport().cosine >= 0.99);
  }
}

TEST_CASE("quantize: the fallback keeps the one sensitive layer in fp32", "[quantize]") {
  QuantRun r = runQuantize("quant_sensitive.pt", "quant_cnn_calib.pt", "", {4, 3, 32, 32});
  const auto& rep = r.quantReport();
  INFO(rep.summary());
  CHECK(rep.applied);
  CHECK(r.counter("fallback") == 1);
  std::vector<std::string> kept;
  for (const auto& op : rep.ops)
    if (op.fp32) kept.push_back(op.op);
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].find("aten::conv2d") != std::string::npos);
  // Which op, why, and what keeping it in fp32 bought: "fallback: cosine C < 0.99, C' with it in fp32".
  for (const auto& op : rep.ops)
    if (op.fp32) {
      CHECK(op.why.rfind("fallback: cosine ", 0) == 0);
      const size_t with = op.why.find(", ");
      REQUIRE(with != std::string::npos);
      CHECK(op.why.substr(with).find(" with it in fp32") != std::string::npos);
      CHECK(std::stod(op.why.substr(with + 2)) >= 0.99);
      CHECK(std::stod(op.why.substr(17)) < 0.99);
    }
  // The fp32 conv is the one that reads `sensitive.weight`.
  const ir::Graph& g = r.opt.model().forward();
  CHECK(test::countOps(g, "aten::conv2d") == 1);
  bool found = false;
  g.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") && n->argValue(1)->node()->target().find("sensitive") != std::string::npos) found = true;
  });
  CHECK(found);
  auto [cosine, top1] = heldOutAgreement(r, "quant_sensitive.pt", "quant_cnn_heldout.pt");
  CHECK(cosine >= 0.99);
  // Without the fallback the criterion is missed and nothing is applied.
  QuantRun off = runQuantize("quant_sensitive.pt", "quant_cnn_calib.pt", "{fallback=false}", {4, 3, 32, 32});
  CHECK(off.counter("quantized") == 0);
  CHECK(off.declined("misses the accuracy criterion"));
  CHECK(test::countOps(off.opt.model().forward(), "aten::conv2d") == 4);
}

TEST_CASE("quantize: fp32-ops keeps the named ops in float", "[quantize]") {
  QuantRun r = runQuantize("quant_cnn.pt", "quant_cnn_calib.pt", "{fp32-ops=aten::linear}", {4, 3, 32, 32});
  const ir::Graph& g = r.opt.model().forward();
  CHECK(test::countOps(g, "aten::linear") == 1);
  CHECK(test::countOps(g, "quantized::linear") == 0);
  CHECK(test::countOps(g, "quantized::cat") == 1);
}

TEST_CASE("quantize: dynamic mode turns linears into linear_dynamic", "[quantize]") {
  QuantRun r = runQuantize("quant_mlp.pt", "", "{mode=dynamic}", {16, 64});
  const ir::Graph& g = r.opt.model().forward();
  CHECK(r.counter("dynamic") == 3);
  CHECK(test::countOps(g, "aten::linear") == 0);
  CHECK(test::countOps(g, "quantized::linear_dynamic") == 3);
  CHECK(test::countOps(g, "aten::quantize_per_tensor") == 0);
  auto original = torch::jit::load(quantFixture("quant_mlp.pt"));
  auto optimized = r.opt.serialize().module;
  for (const auto& batch : loadBatches("quant_mlp_calib.pt", 1)) {
    at::Tensor a = original.forward(batch).toTensor(), b = optimized.forward(batch).toTensor();
    CHECK(at::cosine_similarity(a.reshape({1, -1}), b.reshape({1, -1})).item<double>() >= 0.99);
  }
}

TEST_CASE("quantize: must not fire on a model without a quantizable op", "[quantize]") {
  QuantRun r = runQuantize("quant_noquant.pt", "", "", {2, 8});
  CHECK_FALSE(r.report.executions.at(0).changed);
  CHECK(r.declined("no quantizable op"));
  CHECK(test::countOps(r.opt.model().forward(), "aten::quantize_per_tensor") == 0);
}

TEST_CASE("quantize: random calibration when no data is given", "[quantize]") {
  QuantRun r = runQuantize("quant_cnn.pt", "", "", {4, 3, 32, 32});
  CHECK(r.quantReport().syntheticCalibration);
  CHECK(r.quantReport().calibrationSource == "seeded random inputs");
  // The warning goes to the context's sink (the front end prints it), not to stderr.
  REQUIRE(r.ctx.warnings().size() == 1);
  CHECK(r.ctx.warnings()[0].rfind("quantize: no --calibration data; calibrating int8 on seeded RANDOM", 0) == 0);
}

TEST_CASE("quantize: each run's report and calibration are its own context's (no process-wide state)", "[quantize]") {
  // Two runs, one calibrated and one not: each context keeps its own report,
  // and a derived trial context (the tuner's) neither sees the other's report
  // nor writes into its parent.
  QuantRun real = runQuantize("quant_cnn.pt", "quant_cnn_calib.pt", "", {4, 3, 32, 32});
  QuantRun random = runQuantize("quant_cnn.pt", "", "", {4, 3, 32, 32});
  CHECK_FALSE(real.quantReport().syntheticCalibration);
  CHECK(real.quantReport().calibrationSource == "quant_cnn_calib.pt");
  CHECK(real.ctx.warnings().empty());
  CHECK(random.quantReport().syntheticCalibration);
  rewriters::PassContext trial = real.ctx.forTrial();
  CHECK(trial.reports.find<quant::QuantizeReport>() == nullptr);
  REQUIRE(trial.inputs.find<quant::CalibrationData>() != nullptr);  // the calibration data carries over
  trial.reports.getOrCreate<quant::QuantizeReport>().declined = "trial";
  CHECK(real.quantReport().declined.empty());
}

TEST_CASE("quantize: bad calibration data is refused with a clear message", "[quantize]") {
  std::vector<c10::IValue> expected{at::randn({4, 3, 32, 32})};
  auto load = [&](const std::string& f) {
    verify::InputSet set = verify::loadInputsFile(quantFixture(f));
    return quant::splitCalibrationBatches(set.values, 1, &expected, f);
  };
  CHECK_THROWS_WITH(load("bad_calib_shape.pt"), Catch::Contains("has shape [4, 3, 16, 16], expected [4, 3, 32, 32]"));
  CHECK_THROWS_WITH(load("bad_calib_nan.pt"), Catch::Contains("NaN"));
  CHECK_THROWS(load("bad_calib_empty.pt"));
  CHECK_THROWS_WITH(quant::splitCalibrationBatches({}, 1, nullptr, "x.pt"), Catch::Contains("holds no batch"));
  CHECK_THROWS_WITH(load("quant_mlp_calib.pt"), Catch::Contains("expected"));
}

namespace {

// A conv1d net as speech models have them (Wav2Letter, ConvTasNet), random
// weights: conv1d + relu, then a strided conv1d.
torch::jit::Module conv1dNet() {
  torch::manual_seed(0);
  torch::jit::Module m("Conv1dNet");
  m.register_attribute("training", c10::BoolType::get(), false);
  m.register_parameter("w1", torch::randn({16, 8, 5}) * 0.2, false);
  m.register_parameter("b1", torch::randn({16}) * 0.1, false);
  m.register_parameter("w2", torch::randn({12, 16, 3}) * 0.2, false);
  m.register_parameter("b2", torch::randn({12}) * 0.1, false);
  m.define(R"(
def forward(self, x):
    y = torch.relu(torch.conv1d(x, self.w1, self.b1, [1], [2]))
    return torch.conv1d(y, self.w2, self.b2, [2], [1])
)");
  return m;
}

}  // namespace

TEST_CASE("quantize: conv1d becomes quantized::conv1d / conv1d_relu, and reloads within the int8 criterion",
          "[quantize]") {
  QuantRun r{Optimizer::fromModule(conv1dNet()), {}, {}};
  r.ctx.exampleInputs = std::vector<c10::IValue>{at::randn({4, 8, 64})};
  r.opt.run("-O1", &r.ctx);
  quant::CalibrationData data;
  for (int i = 0; i < 4; ++i) data.batches.push_back({at::randn({4, 8, 64})});
  data.source = "random";
  r.ctx.inputs.set(std::move(data));
  rewriters::PassManager pm(defaultRegistry(), rewriters::parsePipeline("quantize", defaultRegistry()),
                            test::checkedInstrumentation());
  r.report = pm.run(r.opt.model(), r.ctx);
  const ir::Graph& g = r.opt.model().forward();
  INFO(ir::printGraph(g));
  CHECK(r.counter("quantized") == 2);
  CHECK(test::countOps(g, "aten::conv1d") == 0);
  CHECK(test::countOps(g, "quantized::conv1d_relu") == 1);
  CHECK(test::countOps(g, "quantized::conv1d") == 1);
  CHECK(test::countOps(g, "aten::quantize_per_tensor") == 1);
  CHECK(test::countOps(g, "aten::dequantize") == 1);
  // Saved and loaded back as stock LibTorch does, against the original.
  auto original = conv1dNet();
  original.eval();
  auto optimized = r.opt.serialize().module;
  const at::Tensor x = at::randn({2, 8, 64});
  const at::Tensor a = original.forward({x}).toTensor(), b = optimized.forward({x}).toTensor();
  REQUIRE(a.sizes() == b.sizes());
  CHECK(at::cosine_similarity(a.reshape({1, -1}), b.reshape({1, -1})).item<double>() >= 0.99);
}

TEST_CASE("QuantizeDoesNotFireOnConv3d", "[quantize]") {
  // LibTorch has no static int8 conv3d on the CPU: declined with the reason.
  torch::manual_seed(0);
  torch::jit::Module m("Conv3dNet");
  m.register_attribute("training", c10::BoolType::get(), false);
  m.register_parameter("w", torch::randn({4, 2, 3, 3, 3}), false);
  m.define(R"(
def forward(self, x):
    return torch.conv3d(x, self.w)
)");
  QuantRun r{Optimizer::fromModule(m), {}, {}};
  r.ctx.exampleInputs = std::vector<c10::IValue>{at::randn({1, 2, 6, 6, 6})};
  r.opt.run("-O1", &r.ctx);
  rewriters::PassManager pm(defaultRegistry(), rewriters::parsePipeline("quantize", defaultRegistry()),
                            test::checkedInstrumentation());
  r.report = pm.run(r.opt.model(), r.ctx);
  CHECK(test::countOps(r.opt.model().forward(), "aten::conv3d") == 1);
  CHECK(test::countOps(r.opt.model().forward(), "aten::quantize_per_tensor") == 0);
  CHECK(r.declined("not a 1-D or 2-D conv with a constant float weight"));
}
