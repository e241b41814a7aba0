#include "quant/quantize.h"

#include "quant/cast.h"

#include "ir/interpreter.h"
#include "ir/model.h"
#include "ir/mutation.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "quant/calibration.h"
#include "quant/int8_accuracy.h"
#include "quant/int8_candidates.h"
#include "quant/int8_rewrite.h"
#include "quant/int8_engine.h"
#include "quant/observers.h"
#include "quant/quantize_rnn.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::quant {

using namespace rewriters;

namespace {

// Gives each input of an int8 cat the cat's own quantization parameters, so
// that quantized::cat copies bytes where it would requantize every input
// (channels-last, as the quantized convs write: 2-3x faster here; GhostNet's
// 32 cats were 40% of its int8 time). torch.ao's x86 quantizer shares them
// the same way. The cat's range holds each input's. Shared: an input that
// a static int8 candidate writes (conv, linear, add, mul, cat; its own
// output parameters are then the cat's, and where the fallback keeps it
// fp32 it enters the region in them). Not shared: an input that two cats
// read (they would disagree), and any other (a pass-through op's result
// keeps its input's quantization, hardsigmoid's its fixed one): the cat
// requantizes it as before. Returns how many inputs changed.
size_t shareCatQParams(const std::vector<Int8Candidate>& cands, std::map<std::string, QParams>& qparams) {
  std::map<std::string, int> catReaders;
  std::set<std::string> written;
  for (const Int8Candidate& c : cands) {
    if (c.kind == Int8Kind::Cat)
      for (ir::Value* x : addOrCatInputs(c.op)) ++catReaders[x->name()];
    if (c.kind != Int8Kind::Rnn && c.kind != Int8Kind::LinearDynamic) written.insert(c.out->name());
  }
  size_t shared = 0;
  for (const Int8Candidate& c : cands) {
    if (c.kind != Int8Kind::Cat) continue;
    auto out = qparams.find(c.out->name());
    if (out == qparams.end()) continue;
    for (ir::Value* x : addOrCatInputs(c.op)) {
      auto in = qparams.find(x->name());
      if (in == qparams.end() || catReaders[x->name()] != 1 || !written.count(x->name())) continue;
      if (in->second.scale == out->second.scale && in->second.zeroPoint == out->second.zeroPoint) continue;
      in->second = out->second;
      ++shared;
    }
  }
  return shared;
}

}  // namespace

std::vector<OptionSpec> QuantizePass::optionSpecs() const {
  return {
      {"dtype", OptionKind::Enum, "int8", "integer type (int8: qint8 weights, quint8 activations)", {"int8"}, {}, {}},
      {"mode", OptionKind::Enum, "static",
       "static: calibrated activations (LSTM/GRU dynamic); dynamic: linear_dynamic, LSTM/GRU",
       {"static", "dynamic"}, {}, {}},
      {"observer", OptionKind::Enum, "histogram", "activation range: minmax, histogram (error-minimizing clip), "
       "percentile", {"minmax", "histogram", "percentile"}, {}, {}},
      {"percentile", OptionKind::Float, "99.99", "observer=percentile: the percentile kept", {}, 90.0, 100.0},
      {"min-cosine", OptionKind::Float, "0.99", "accuracy guard: worst output cosine vs fp32 on held-out batches",
       {}, -1.0, 1.0},
      {"fallback", OptionKind::Bool, "true", "keep the most sensitive ops in fp32 until min-cosine holds", {}, {}, {}},
      {"max-fallback", OptionKind::Int, "-1", "most ops the fallback may keep in fp32 (-1: half the convs and "
       "linears); past it the pass declines", {}, -1, {}},
      {"rnn-weights", OptionKind::Enum, "auto", "LSTM/GRU weights: per-tensor (torch.ao's, the faster kernel), "
       "per-channel, or auto (per-tensor unless a row would use under 16 levels)",
       {"auto", "per-tensor", "per-channel"}, {}, {}},
      {"random-batches", OptionKind::Int, "8", "batches drawn when no calibration data is given", {}, 1, {}},
      {"fp32-ops", OptionKind::String, "", "ops to keep in fp32: output value names or operators ('%x.3;aten::linear')",
       {}, {}, {}},
  };
}

std::string QuantizeReport::summary() const {
  std::ostringstream s;
  if (!ran) return "";
  s << fmt::format("int8 ({} mode, {} observer, engine {}): calibration {} ({} batch(es){}), held-out {} batch(es), "
                   "at {} intra-op thread(s)\n", mode, observer, engine, calibrationSource, calibrationBatches,
                   syntheticCalibration ? ", SYNTHETIC: accuracy needs real data" : "", heldOutBatches, threads);
  if (!applied) {
    s << "  not applied: " << declined << "\n";
  } else {
    s << fmt::format("  held-out vs fp32: worst cosine {:.5f} (min {:g})", cosine, minCosine);
    if (top1Agreement) s << fmt::format(", top-1 agreement {:.1f}%", 100 * *top1Agreement);
    s << "\n";
  }
  if (!ops.empty()) {
    s << "  op                                        kind             SQNR dB\n";
    for (const auto& op : ops) {
      const std::string sq = std::isfinite(op.sqnrDb) ? fmt::format("{:7.1f}", op.sqnrDb) : "      -";
      s << fmt::format("  {:<42.42} {:<16} {}{}\n", op.op, op.kind, sq, op.fp32 ? "  fp32 (" + op.why + ")" : "");
    }
  }
  return s.str();
}

PassResult QuantizePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  const bool dynamic = options().getString("mode") == "dynamic";
  QuantizeReport& rep = ctx.reports.getOrCreate<QuantizeReport>();
  rep = QuantizeReport{};
  rep.ran = true;
  rep.mode = options().getString("mode");
  rep.observer = dynamic ? "none" : options().getString("observer");
  rep.minCosine = options().getFloat("min-cosine");
  const bool reduceRange = int8NeedsReduceRange();
  const RnnWeights rnnWeights = parseRnnWeights(options().getString("rnn-weights"));
  rep.engine = int8EngineNote();
  rep.threads = at::get_num_threads();

  auto cands = findInt8Candidates(graph, dynamic, &ctx, name());
  // Adds and cats alone are not worth int8 (they only join int8 regions).
  const bool anyCompute = std::any_of(cands.begin(), cands.end(), [](const Int8Candidate& c) { return isCompute(c.kind); });
  if (!anyCompute) cands.clear();
  if (cands.empty()) {
    rep.declined = "no quantizable op";
    ctx.decline(name(), graph.block()->outputNode(),
                dynamic ? "no aten::linear, aten::lstm or aten::gru with constant weights"
                        : "no quantizable op (conv2d, linear, add, cat, lstm, gru)");
    return r;
  }
  // fp32-ops
  std::set<size_t> fp32;
  std::map<size_t, std::string> why;
  {
    std::stringstream ss(options().getString("fp32-ops"));
    std::string item;
    while (std::getline(ss, item, ';')) {
      if (item.empty()) continue;
      for (size_t i = 0; i < cands.size(); ++i) {
        const std::string nm = "%" + cands[i].op->output()->name();
        if (item == nm || item == cands[i].op->output()->name() || item == cands[i].op->target()) {
          fp32.insert(i);
          why[i] = "fp32-ops";
        }
      }
    }
  }

  // Calibration data.
  std::vector<std::vector<c10::IValue>> batches;
  if (const CalibrationData* cal = ctx.inputs.find<CalibrationData>()) {
    batches = cal->batches;
    rep.calibrationSource = cal->source;
    rep.syntheticCalibration = cal->synthetic;
  } else if (ctx.exampleInputs) {
    batches = randomCalibrationBatches(*ctx.exampleInputs, static_cast<size_t>(options().getInt("random-batches")), 0);
    rep.calibrationSource = "seeded random inputs";
    rep.syntheticCalibration = true;
    if (!dynamic)
      ctx.warn(name(), "no --calibration data; calibrating int8 on seeded RANDOM inputs of the --input-shape. "
                       "Accuracy needs real data: pass --calibration FILE (a list of input batches).");
  } else {
    rep.declined = "no calibration data and no example inputs";
    ctx.decline(name(), graph.block()->outputNode(), "no calibration data (--calibration FILE) and no --input-shape to draw inputs from");
    return r;
  }
  if (batches.empty()) throw ir::InputError("quantize: the calibration set holds no batch");
  // Held-out: the last quarter (at least one batch); a single batch serves both.
  size_t held = batches.size() >= 2 ? std::max<size_t>(1, batches.size() / 4) : 0;
  std::vector<std::vector<c10::IValue>> calib(batches.begin(), batches.end() - static_cast<std::ptrdiff_t>(held));
  std::vector<std::vector<c10::IValue>> heldOut(batches.end() - static_cast<std::ptrdiff_t>(held), batches.end());
  if (heldOut.empty()) heldOut = calib;
  rep.calibrationBatches = calib.size();
  rep.heldOutBatches = heldOut.size();

  // Observers on every top-level float tensor.
  std::map<std::string, QParams> qparams;
  if (!dynamic) {
    std::unordered_map<std::string, Observer> observers;
    const ObserverKind kind = parseObserverKind(options().getString("observer"));
    for (int pass = 0; pass < (kind == ObserverKind::MinMax ? 1 : 2); ++pass) {
      ir::InterpreterOptions o;
      o.observer = [&](const ir::Value& v, const c10::IValue& iv) {
        if (!iv.isTensor() || v.owningBlock() != graph.block()) return;
        const at::Tensor& t = iv.toTensor();
        if (t.scalar_type() != at::kFloat || t.is_quantized()) return;
        if (pass == 0) observers[v.name()].observeRange(t);
        else observers[v.name()].observeHistogram(t);
      };
      ir::Interpreter interp(graph, o);
      for (size_t b = 0; b < calib.size(); ++b) {
        try {
          interp.run(calib[b]);
        } catch (const std::exception& e) {
          throw ir::InputError(fmt::format("quantize: the model fails on calibration batch {} ({}): {}", b,
                                           rep.calibrationSource, ir::torchErrorMessage(e)));
        }
      }
    }
    for (const auto& [nm, obs] : observers) {
      if (!std::isfinite(obs.min()) || !std::isfinite(obs.max()))
        throw ir::InputError(fmt::format("quantize: value %{} holds NaN or Inf on the calibration data ({})", nm,
                                         rep.calibrationSource));
      qparams[nm] = obs.qparams(kind, options().getFloat("percentile"), reduceRange);
    }
  }

  // The accuracy guard.
  const double minCos = options().getFloat("min-cosine");
  std::map<std::string, QParams> catShared = qparams;
  const size_t nShared = dynamic ? 0 : shareCatQParams(cands, catShared);
  Evaluation ev = evaluateInt8(graph, fp32, nShared ? catShared : qparams, heldOut, dynamic, reduceRange, rnnWeights);
  if (!ev.error.empty()) throw PassError("quantize: the int8 graph fails to run: " + ev.error);
  if (nShared) {
    // Shared parameters are coarser for an input whose range is narrower
    // than the cat's: where that misses the criterion and the inputs' own
    // meet it, the cats requantize.
    Evaluation own = ev.cosine < minCos ? evaluateInt8(graph, fp32, qparams, heldOut, dynamic, reduceRange, rnnWeights)
                                        : Evaluation{};
    if (ev.cosine < minCos && own.error.empty() && own.cosine >= minCos) {
      ctx.decline(name(), graph.block()->outputNode(),
                  fmt::format("cat inputs keep their own quantization: with the cat's, held-out cosine {:.4f} < {:g}",
                              ev.cosine, minCos));
      ev = std::move(own);
    } else {
      qparams = std::move(catShared);
      r.count("cat-shared", static_cast<int64_t>(nShared));
    }
  }
  int64_t maxFallback = options().getInt("max-fallback");
  if (maxFallback < 0)
    maxFallback = std::max<int64_t>(
        1, std::count_if(cands.begin(), cands.end(), [](const Int8Candidate& c) { return isCompute(c.kind); }) / 2);
  while (ev.cosine < minCos && options().getBool("fallback") && r.counter("fallback") < maxFallback) {
    // The op that loses the most SQNR between its inputs and its output.
    std::optional<size_t> worst;
    double worstDrop = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < cands.size(); ++i) {
      if (fp32.count(i) || !ev.quantized.count(i)) continue;
      auto o = ev.sqnr.find(i);
      const double out = o == ev.sqnr.end() ? std::numeric_limits<double>::infinity() : o->second;
      double in = ev.inSqnr.count(i) ? ev.inSqnr.at(i) : std::numeric_limits<double>::infinity();
      if (!std::isfinite(in)) in = 100.0;  // exact input: the op's own error counts
      const double drop = in - out;
      if (!worst || drop > worstDrop) { worst = i; worstDrop = drop; }
    }
    if (!worst) break;
    fp32.insert(*worst);
    why[*worst] = fmt::format("fallback: cosine {:.4f} < {:g}", ev.cosine, minCos);
    r.count("fallback");
    if (std::none_of(ev.quantized.begin(), ev.quantized.end(), [&](size_t i) { return !fp32.count(i); })) break;
    ev = evaluateInt8(graph, fp32, qparams, heldOut, dynamic, reduceRange, rnnWeights);
    if (!ev.error.empty()) throw PassError("quantize: the int8 graph fails to run: " + ev.error);
    // What keeping it in fp32 bought: the cosine with it.
    why[*worst] += fmt::format(", {:.4f} with it in fp32", ev.cosine);
  }
  for (size_t i = 0; i < cands.size(); ++i) {
    QuantizeOpReport op;
    op.op = cands[i].label;
    op.kind = cands[i].kindName;
    if (auto it = ev.sqnr.find(i); it != ev.sqnr.end()) op.sqnrDb = it->second;
    op.fp32 = fp32.count(i) != 0 || !ev.quantized.count(i);
    if (fp32.count(i)) op.why = why[i];
    else if (op.fp32) op.why = "no int8 input: not worth a region of its own";
    rep.ops.push_back(op);
  }
  rep.cosine = ev.cosine;
  rep.top1Agreement = ev.top1;
  const bool computeLeft =
      std::any_of(ev.quantized.begin(), ev.quantized.end(), [&](size_t i) { return isCompute(cands[i].kind); });
  if (!computeLeft) {
    rep.declined = fmt::format("nothing worth quantizing is left: every quantizable op is kept in fp32 "
                               "(worst held-out cosine {:.4f} < min-cosine {:g})", ev.cosine, minCos);
    ctx.decline(name(), graph.block()->outputNode(), rep.declined);
    return r;
  }
  if (ev.cosine < minCos) {
    rep.declined = fmt::format("int8 misses the accuracy criterion: worst held-out cosine {:.4f} < min-cosine {:g}",
                               ev.cosine, minCos);
    ctx.decline(name(), graph.block()->outputNode(), rep.declined);
    return r;
  }
  BuildResult built = buildInt8(graph, cands, fp32, qparams, &ctx.edits, name(), reduceRange, rnnWeights);
  rep.applied = true;
  r.changed = built.quantized > 0;
  r.count(dynamic ? "dynamic" : "quantized", built.quantized);
  if (built.rnn > 0) r.count("rnn", built.rnn);
  if (built.packedShared > 0) r.count("packed-shared", built.packedShared);
  if (!dynamic) {
    r.count("entries", built.entries);
    r.count("exits", built.exits);
  }
  return r;
}

bool isRequestDtype(const std::string& dtype) {
  return dtype == "int8" || dtype == "bf16" || dtype == "fp16" || dtype == "auto";
}

void addRequestedPrecision(rewriters::Pipeline& pipeline, const std::string& dtype,
                           const rewriters::PassRegistry& registry) {
  if (!isRequestDtype(dtype))
    throw std::invalid_argument("quantize '" + dtype + "': expected " + kRequestDtypes);
  const std::string pass = dtype == "int8" ? QuantizePass().name() : CastPass().name();
  if (dtype == "int8" && rewriters::pipelineUses(pipeline, pass)) return;
  bool set = false;
  if (dtype != "int8")
    rewriters::forEachExecution(pipeline, registry, [&](rewriters::PipelineElement& e, const rewriters::PassEffects&) {
      if (e.name != pass) return;
      e.setOption("dtype", dtype);
      set = true;
    });
  if (set) return;
  rewriters::addExtraPasses(pipeline, {rewriters::parsePipeline(pass + "{dtype=" + dtype + "}", registry, "--quantize")
                                           .elements.at(0)});
}

}  // namespace ptopt::quant
