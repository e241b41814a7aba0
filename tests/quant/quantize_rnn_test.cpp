// quantize on LSTM and GRU: aten::lstm / aten::gru become dynamic int8
// aten::quantized_lstm / quantized_gru over CellParamsBase constants, for
// scripted and traced nn.LSTM / nn.GRU (batch_first or not, uni- and
// bidirectional, 2 layers, with and without biases, packed sequences);
// numerics by the int8 criterion after save and reload; the fallback and fp32-ops treat the RNN op
// like the other ops; named must-not-fire cases (weights written in place,
// an LSTM inside control flow, weights computed from the input). Every run
// with the edit-log check on. The fixtures (tests/fixtures/make_quant_fixtures.py)
// are trained on a synthetic sequence task at generation time.
#include "ir/op_views.h"
#include "quant/calibration.h"
#include "quant/quantize.h"
#include "quant/quantize_rnn.h"
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"
#include "tests/quant/quant_run.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <torch/script.h>

#include <filesystem>

using namespace ptopt;
using test::QuantRun;
using test::quantFixture;

namespace {

// Batches of a one-input model from a calibration fixture.
std::vector<std::vector<c10::IValue>> loadBatches(const std::string& file) {
  verify::InputSet set = verify::loadInputsFile(quantFixture(file));
  return quant::splitCalibrationBatches(set.values, 1, nullptr, file);
}

// -O1, then quantize (options) with the edit-log check, calibrated on
// `batches`. runOriginal: run the original module once first, as the CLI's
// reference run does (a model that writes its weights has changed them).
QuantRun runQuantize(const std::string& model, std::vector<std::vector<c10::IValue>> batches,
                     const std::string& options, bool runOriginal = false) {
  QuantRun r{Optimizer::load(quantFixture(model)), {}, {}};
  if (runOriginal) r.opt.original().forward(batches.front());
  r.ctx.exampleInputs = batches.front();
  r.opt.run("-O1", &r.ctx);
  quant::CalibrationData data;
  data.batches = std::move(batches);
  data.source = model + " batches";
  r.ctx.inputs.set(std::move(data));
  rewriters::PassManager pm(defaultRegistry(), rewriters::parsePipeline("quantize" + options, defaultRegistry()),
                            test::checkedInstrumentation());
  r.report = pm.run(r.opt.model(), r.ctx);
  return r;
}

// The result saved to a file and loaded back by stock LibTorch.
torch::jit::Module saveAndReload(QuantRun& r, const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / ("ptopt_quantize_rnn_" + name);
  Optimizer::save(r.opt.serialize(), path.string());
  torch::jit::Module m = torch::jit::load(path.string());
  std::filesystem::remove(path);
  return m;
}

// Worst cosine and per-step argmax agreement of `optimized` against the
// original on `batches` (outputs [.., .., 4] logits).
std::pair<double, double> agreement(const std::string& model, torch::jit::Module& optimized,
                                    const std::vector<std::vector<c10::IValue>>& batches) {
  auto original = torch::jit::load(quantFixture(model));
  original.eval();
  double worst = 1;
  int64_t agree = 0, steps = 0;
  for (const auto& batch : batches) {
    at::Tensor a = original.forward(batch).toTensor();
    at::Tensor b = optimized.forward(batch).toTensor();
    REQUIRE_FALSE(b.is_quantized());
    REQUIRE(a.sizes() == b.sizes());
    worst = std::min(worst, at::cosine_similarity(a.reshape({1, -1}), b.reshape({1, -1})).item<double>());
    agree += a.argmax(-1).eq(b.argmax(-1)).sum().item<int64_t>();
    steps += a.numel() / a.size(-1);
  }
  return {worst, static_cast<double>(agree) / static_cast<double>(steps)};
}

// The CellParamsBase constants the graph reads, by name.
std::vector<std::string> cellParams(const ir::Graph& g) {
  std::vector<std::string> names;
  g.walk([&](ir::Node* n) {
    if (n->opcode() != ir::Opcode::GetAttr) return;
    const c10::IValue& v = g.constants().at(n->target());
    if (v.isCustomClass() || v.isObject())
      if (v.type()->str().find("rnn.CellParamsBase") != std::string::npos) names.push_back(n->target());
  });
  std::sort(names.begin(), names.end());
  return names;
}

const ir::Node* findOp(const ir::Graph& g, const std::string& target) {
  const ir::Node* found = nullptr;
  g.walk([&](ir::Node* n) {
    if (n->isCall() && n->target() == target) found = n;
  });
  return found;
}

}  // namespace

TEST_CASE("quantize: scripted and traced LSTM/GRU become dynamic int8 RNN ops", "[quantize][rnn]") {
  struct Case {
    std::string model, calib, op, quantizedOp;
    bool bidirectional = true;
  };
  for (const Case& c : {Case{"quant_lstm.pt", "quant_lstm_calib.pt", "aten::lstm", "aten::quantized_lstm"},
                        Case{"quant_lstm_traced.pt", "quant_lstm_calib.pt", "aten::lstm", "aten::quantized_lstm"},
                        Case{"quant_gru.pt", "quant_gru_calib.pt", "aten::gru", "aten::quantized_gru"},
                        Case{"quant_gru_traced.pt", "quant_gru_calib.pt", "aten::gru", "aten::quantized_gru"},
                        Case{"quant_lstm_nobias.pt", "quant_gru_calib.pt", "aten::lstm", "aten::quantized_lstm", false},
                        Case{"quant_gru_bias_traced.pt", "quant_lstm_calib.pt", "aten::gru", "aten::quantized_gru",
                             false}}) {
    INFO(c.model);
    const auto batches = loadBatches(c.calib);
    QuantRun r = runQuantize(c.model, batches, "{mode=dynamic}");
    const ir::Graph& g = r.opt.model().forward();
    INFO(ir::printGraph(g));
    INFO(r.declines());
    CHECK(r.counter("dynamic") == 2);  // the RNN and the linear head
    CHECK(r.counter("rnn") == 1);
    CHECK(test::countOps(g, c.op) == 0);
    CHECK(test::countOps(g, c.quantizedOp) == 1);
    CHECK(test::countOps(g, "quantized::linear_dynamic") == 1);
    CHECK(test::countOps(g, "aten::quantize_per_tensor") == 0);
    // One CellParamsBase per layer and direction, named after the module.
    const std::vector<std::string> cells =
        c.bidirectional ? std::vector<std::string>{"rnn.cell_params_l0", "rnn.cell_params_l0_reverse",
                                                   "rnn.cell_params_l1", "rnn.cell_params_l1_reverse"}
                        : std::vector<std::string>{"rnn.cell_params_l0", "rnn.cell_params_l1"};
    CHECK(cellParams(g) == cells);
    const ir::Node* q = findOp(g, c.quantizedOp);
    REQUIRE(q);
    CHECK(q->overload() == "input");
    const ir::OpView view = ir::OpView::of(const_cast<ir::Node*>(q));
    REQUIRE(view.value("params"));
    CHECK(view.value("params")->node()->is("prim::ListConstruct"));
    CHECK(view.value("params")->node()->numArgs() == cells.size());
    CHECK(view.boolArg("has_biases") == true);  // zero biases stand in for missing ones (the GRU has none)
    if (c.op == "aten::lstm") {
      CHECK(view.dtypeArg("dtype") == c10::ScalarType::QInt8);
      CHECK(view.boolArg("use_dynamic") == true);
    }
    // No float RNN weight is left in the graph.
    g.walk([&](ir::Node* n) {
      if (n->opcode() == ir::Opcode::GetAttr) CHECK(n->target().find("weight_hh") == std::string::npos);
      if (n->opcode() == ir::Opcode::GetAttr) CHECK(n->target().find("_flat_weights") == std::string::npos);
    });
    // The sensitivity report has the RNN op with its SQNR.
    const auto& rep = r.quantReport();
    REQUIRE(rep.ops.size() == 2);
    CHECK(rep.ops[0].kind == c.op.substr(6) + "_dynamic");
    CHECK(rep.ops[0].sqnrDb > 20.0);
    CHECK_FALSE(rep.ops[0].fp32);
    // Numerics after save and reload by stock LibTorch (C++).
    torch::jit::Module reloaded = saveAndReload(r, c.model);
    auto [cosine, top1] = agreement(c.model, reloaded, batches);
    CHECK(cosine >= 0.99);
    CHECK(top1 >= 0.9);
  }
}

TEST_CASE("quantize: static mode makes the LSTM dynamic int8 and the head static int8", "[quantize][rnn]") {
  const auto batches = loadBatches("quant_lstm_calib.pt");
  QuantRun r = runQuantize("quant_lstm.pt", batches, "");
  const ir::Graph& g = r.opt.model().forward();
  INFO(ir::printGraph(g));
  CHECK(r.counter("quantized") == 2);
  CHECK(r.counter("rnn") == 1);
  CHECK(test::countOps(g, "aten::lstm") == 0);
  CHECK(test::countOps(g, "aten::quantized_lstm") == 1);
  CHECK(test::countOps(g, "quantized::linear") == 1);
  // The head's region: entered after the LSTM's float output, left at the logits.
  CHECK(test::countOps(g, "aten::quantize_per_tensor") == 1);
  CHECK(test::countOps(g, "aten::dequantize") == 1);
  torch::jit::Module reloaded = saveAndReload(r, "static_lstm.pt");
  auto [cosine, top1] = agreement("quant_lstm.pt", reloaded, batches);
  CHECK(cosine >= 0.99);
  CHECK(top1 >= 0.9);
}

TEST_CASE("quantize: rnn-weights=auto picks per-channel only for matrices with small rows", "[quantize][rnn]") {
  at::manual_seed(0);
  at::Tensor w = at::randn({128, 32});
  CHECK_FALSE(quant::rnnWeightNeedsPerChannel(w));
  w[0].mul_(0.05);  // one output channel would use ~6 of the 127 levels per-tensor
  CHECK(quant::rnnWeightNeedsPerChannel(w));
  w[0].zero_();  // an all-zero row is exact either way
  CHECK_FALSE(quant::rnnWeightNeedsPerChannel(w));
}

TEST_CASE("quantize: rnn-weights per-tensor and per-channel both meet the criterion", "[quantize][rnn]") {
  const auto batches = loadBatches("quant_lstm_calib.pt");
  for (const std::string scheme : {"per-tensor", "per-channel"}) {
    INFO(scheme);
    QuantRun r = runQuantize("quant_lstm_traced.pt", batches, "{mode=dynamic,rnn-weights=" + scheme + "}");
    CHECK(r.counter("rnn") == 1);
    auto optimized = r.opt.serialize().module;
    auto [cosine, top1] = agreement("quant_lstm_traced.pt", optimized, batches);
    CHECK(cosine >= 0.99);
    CHECK(top1 >= 0.9);
  }
}

TEST_CASE("quantize: an LSTM over a packed sequence becomes quantized_lstm.data", "[quantize][rnn]") {
  // Inputs: the padded batch and its lengths.
  std::vector<std::vector<c10::IValue>> batches;
  for (const auto& b : loadBatches("quant_lstm_calib.pt"))
    batches.push_back({b[0], at::tensor(std::vector<int64_t>{12, 7, 10, 3})});
  QuantRun r = runQuantize("quant_lstm_packed.pt", batches, "{mode=dynamic}");
  const ir::Graph& g = r.opt.model().forward();
  INFO(ir::printGraph(g));
  INFO(r.declines());
  CHECK(r.counter("rnn") == 1);
  const ir::Node* q = findOp(g, "aten::quantized_lstm");
  REQUIRE(q);
  CHECK(q->overload() == "data");
  CHECK(test::countOps(g, "aten::lstm") == 0);
  torch::jit::Module reloaded = saveAndReload(r, "packed.pt");
  auto [cosine, top1] = agreement("quant_lstm_packed.pt", reloaded, batches);
  CHECK(cosine >= 0.99);
  CHECK(top1 >= 0.9);
}

TEST_CASE("quantize: the fallback and fp32-ops treat the RNN op like the other ops", "[quantize][rnn]") {
  const auto batches = loadBatches("quant_gru_calib.pt");
  // fp32-ops by operator name keeps the GRU float; the head stays dynamic int8.
  QuantRun kept = runQuantize("quant_gru.pt", batches, "{mode=dynamic,fp32-ops=aten::gru}");
  CHECK(test::countOps(kept.opt.model().forward(), "aten::gru") == 1);
  CHECK(test::countOps(kept.opt.model().forward(), "quantized::linear_dynamic") == 1);
  CHECK(kept.counter("rnn") == 0);
  // Asking for more than all-int8 gives: the fallback keeps the op that
  // loses the most SQNR, the GRU (its input is exact, the head's is the
  // GRU's int8 output).
  QuantRun all = runQuantize("quant_gru.pt", batches, "{mode=dynamic}");
  const double allCosine = all.quantReport().cosine;
  REQUIRE(allCosine < 1.0);
  const double asked = allCosine + (1.0 - allCosine) / 2;
  QuantRun fb = runQuantize("quant_gru.pt", batches, fmt::format("{{mode=dynamic,min-cosine={:.9f}}}", asked));
  const auto& rep = fb.quantReport();
  INFO(rep.summary());
  CHECK(fb.counter("fallback") == 1);
  REQUIRE(rep.ops.size() == 2);
  CHECK(rep.ops[0].kind == "gru_dynamic");
  CHECK(rep.ops[0].fp32);
  CHECK(rep.ops[0].why.find("fallback") != std::string::npos);
  CHECK_FALSE(rep.ops[1].fp32);
}

TEST_CASE("quantize: must not fire on LSTMs whose weights are written, inside control flow, or computed",
          "[quantize][rnn]") {
  const auto batches = loadBatches("quant_lstm_calib.pt");
  for (bool runOriginal : {false, true}) {
    INFO("original run first: " << runOriginal);
    QuantRun r = runQuantize("quant_lstm_writes.pt", batches, "{mode=dynamic}", runOriginal);
    INFO(r.declines());
    CHECK(r.declined("the model writes its weights"));
    CHECK(test::countOps(r.opt.model().forward(), "aten::lstm") == 1);
    CHECK(test::countOps(r.opt.model().forward(), "aten::quantized_lstm") == 0);
    CHECK_FALSE(r.report.executions.at(0).changed);
  }
  {
    QuantRun r = runQuantize("quant_lstm_branch.pt", batches, "{mode=dynamic}");
    INFO(r.declines());
    CHECK(r.declined("inside control flow"));
    CHECK(test::countOps(r.opt.model().forward(), "aten::lstm") == 1);
    CHECK_FALSE(r.report.executions.at(0).changed);
  }
  {
    QuantRun r = runQuantize("quant_lstm_computed.pt", batches, "{mode=dynamic}");
    INFO(r.declines());
    CHECK(r.declined("weights are not constants"));
    CHECK(test::countOps(r.opt.model().forward(), "aten::lstm") == 1);
    CHECK_FALSE(r.report.executions.at(0).changed);
  }
}
