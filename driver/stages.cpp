#include "driver/stages.h"

#include "driver/op_table.h"
#include "driver/util.h"

#include "ir/model.h"
#include "ir/pt2_int8.h"
#include "ir/recycled_memory.h"
#include "measure/reproducible_clock.h"
#include "quant/calibration.h"
#include "quant/quantize_report.h"
#include "target/capabilities.h"
#include "tune/cache.h"
#include "tune/thread_orders.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <system_error>

namespace ptopt {

using driver::Stopwatch;

std::string RunSettings::tuningCachePath() const {
  return req->tuningCache.empty() ? tune::TuningCache::defaultPath() : req->tuningCache;
}

void RunSettings::say(const std::string& s) const {
  if (hooks.say) hooks.say(s);
}
void RunSettings::note(const std::string& s) const {
  if (hooks.note) hooks.note(s);
}
void RunSettings::notice(const std::string& s) const {
  if (hooks.notice) hooks.notice(s);
}

void RunSettings::warning(const std::string& s) const {
  if (hooks.warning) hooks.warning(s);
}

ModelCounts countModel(const ir::Model& model) {
  return {model.forward().numNodes(), driver::countOps(model.forward()), driver::parameterBytes(model)};
}

void ReferenceResult::setTolerances(verify::ToleranceSet t) {
  tolerances = std::move(t);
  if (runner) runner->setTolerances(tolerances);
}

verify::ToleranceSet tolerancesFor(const RunSettings& s, const rewriters::Pipeline& pipeline,
                                   const rewriters::PassContext& ctx) {
  const c10::ScalarType precision =
      verify::lowestPrecisionIntroduced(pipeline, defaultRegistry(), ctx).value_or(c10::ScalarType::Float);
  const verify::Tolerance base = verify::Tolerance::forPrecision(precision);
  return s.req->tolerances.over(base);
}

namespace {

// The target's capabilities (target/capabilities.h): the "target" section
// of the record; said with describeTarget.
void recordTarget(const RunSettings& s, const rewriters::PassContext& ctx, driver::RunRecord& record) {
  const std::string& device = ctx.targetDevice;
  const std::optional<target::CpuIsa> assumed = target::assumedIsa(ctx.assumedIsa);
  nlohmann::json t = {{"device", device}, {"identity", target::deviceIdentity(device, assumed)}};
  if (device == "cuda") {
    const target::CudaCapabilities c = target::probeCuda();
    t["available"] = c.available;
    if (c.available)
      t.update({{"name", c.name}, {"compute_capability", std::to_string(c.major) + "." + std::to_string(c.minor)},
                {"native_fp16", c.nativeFp16}, {"native_bf16", c.nativeBf16}});
    else
      t["why"] = c.why;
  } else {
    const target::CpuCapabilities c = target::cpuCapabilities(assumed);
    t.update({{"cpu", c.brand}, {"isa", target::isaName(c.isa)}, {"onednn_isa", target::isaName(c.onednn)},
              {"aten_isa", target::isaName(c.aten)}, {"cpuid_isa", target::isaName(c.cpuid)},
              {"assumed", c.assumed}, {"native_bf16", c.nativeBf16}, {"bf16_why", c.bf16Why},
              {"native_fp16", c.nativeFp16}, {"fp16_why", c.fp16Why}});
  }
  record.sections["target"] = t;
  if (s.req->explain || s.req->describeTarget) s.say(target::describeTarget(device, assumed));
}

}  // namespace

ReferenceResult referenceStage(const RunSettings& s, const Optimizer& opt, const rewriters::Pipeline& pipeline,
                               driver::RunRecord& record) {
  ReferenceResult ref;
  ref.reference = opt.reference(pipeline, s.device);
  const ir::TrainingMode& mode = opt.trainingMode();
  record.mode = mode;
  record.evalSemantics = mode.scriptedInTraining || ref.reference.specializesTracedFlags;
  record.modeNotes = mode.notes(ref.reference.specializesTracedFlags);
  for (const std::string& note : record.modeNotes) s.note(note);
  rewriters::PassContext& ctx = ref.ctx;
  ctx.targetDevice = s.req->target != "auto" ? s.req->target : s.device.is_cuda() ? "cuda" : "cpu";
  ctx.explain = s.explain;
  ctx.preferBf16 = s.req->preferBf16;
  ctx.assumedIsa = s.req->assumeIsa;
  ctx.tensorValuesOnly = s.outputFormat == ir::ModelFormat::Pt2;
  ctx.onWarning = [&s](const std::string& w) { s.warning(w); };
  recordTarget(s, ctx, record);
  ref.tolerances = tolerancesFor(s, pipeline, ctx);
  return ref;
}

void referenceOutputs(const RunSettings& s, const Optimizer& opt, ReferenceResult& ref,
                      const verify::InputPlan& inputs, driver::RunRecord& record) {
  if (!inputs.source) return;
  if (s.req->verifying()) {
    Stopwatch sw;
    ref.runner.emplace(opt.referenceRunner(ref.reference, *inputs.source, ref.tolerances, s.device));
    record.stageMs["reference"] = sw.ms();
  } else if (!inputs.inferred) {  // given inputs are still checked against the model once
    verify::InputSource once = *inputs.source;
    once.iterations = 1;
    opt.referenceRunner(ref.reference, once, ref.tolerances, s.device);
  }
  if (!inputs.inferred) ref.ctx.exampleInputs = inputs.source->inputsFor(0);
}

void calibrationStage(const RunSettings& s, const Optimizer& opt, rewriters::PassContext& ctx,
                      const std::vector<c10::IValue>& values, const std::string& source, const std::string& what,
                      verify::InputPlan& inputs) {
  try {
    quant::CalibrationData data;
    data.source = source;
    std::optional<std::vector<c10::IValue>> expected;
    if (inputs.source && !inputs.inferred && !inputs.source->fixed) expected = inputs.source->inputsFor(0);
    data.batches = quant::splitCalibrationBatches(values, opt.model().forward().inputs().size(),
                                                  expected ? &*expected : nullptr, source);
    if (inputs.source && !inputs.source->fixed && data.batches.size() >= 2) {
      inputs.source->fixed = data.batches.back();
      inputs.inferred = false;
      s.note("verification runs on the last " + what + " batch (held out from calibration)");
    }
    ctx.inputs.set(std::move(data));
  } catch (const std::invalid_argument& e) {
    throw ir::InputError(what + ": " + e.what());
  }
}

tune::TuneResult tuneStage(const RunSettings& s, Optimizer& opt, const rewriters::Pipeline& pipeline,
                           ReferenceResult& ref, driver::RunRecord& record) {
  if (!ref.ctx.exampleInputs)
    throw std::invalid_argument("--tune times the model on its real input shapes: give them with --input-shape or "
                                "--inputs (Python: example_inputs=... or input_shapes=...)");
  tune::TuneOptions t;
  // The default budget is per --tune-threads count: each is first once (tune/thread_orders.h).
  const size_t counts = std::max<size_t>(1, s.req->tuneThreads.size());
  t.budgetSeconds = s.req->tuneBudgetSeconds > 0 ? s.req->tuneBudgetSeconds
                                                 : tune::kDefaultBudgetSeconds * static_cast<double>(counts);
  t.cachePath = s.tuningCachePath();
  t.device = s.device;
  t.progress = s.tuneProgress;
  // Decisions that depend on the candidates' names only
  // (measure/reproducible_clock.h), kept out of the tuning cache.
  measure::ReproducibleClock reproducible;
  if (s.req->reproducibleClock) {
    t.timer = &reproducible;
    t.cachePath.clear();
    s.note("--tune decides on a reproducible clock (--reproducible-clock): nothing is timed");
  }
  // At each of --tune-threads first, the others confirming; the orders' files compared.
  Stopwatch sw;
  tune::TuneResult tuned =
      tune::tuneForThreadCounts(opt.model(), pipeline, defaultRegistry(), ref.ctx, t, s.req->tuneThreads);
  record.stageMs["tune"] = sw.ms();
  record.pipeline = rewriters::printPipeline(tuned.pipeline);
  record.tuning = tuned.toJson();
  ref.setTolerances(tolerancesFor(s, tuned.pipeline, ref.ctx));
  return tuned;
}

RunResult runStage(const RunSettings& s, Optimizer& opt, const rewriters::Pipeline& pipeline, ReferenceResult& ref,
                   driver::RunRecord& record, const rewriters::Instrumentation& inst) {
  Stopwatch sw;
  rewriters::PassContext& ctx = ref.ctx;
  ctx.reports.clear();  // what passes of an earlier run reported is not this run's
  RunResult run;
  try {
    run.report = opt.run(pipeline, &ctx, inst);
  } catch (...) {
    record.stageMs["passes"] = sw.ms();
    throw;
  }
  record.stageMs["passes"] = sw.ms();
  record.passes = run.report;
  record.pipeline = rewriters::printPipeline(pipeline);
  s.say(fmt::format("pipeline: {}\n", record.pipeline.empty() ? "(empty)" : record.pipeline));
  if (!run.report.countersSummary().empty()) s.say(run.report.countersSummary());
  if (auto note = verify::precisionNote(pipeline, defaultRegistry(), ctx)) {
    s.say("precision: " + *note + "\n");
    record.sections["precision"] = *note;
  }
  if (const quant::QuantizeReport* q = ctx.reports.find<quant::QuantizeReport>(); q && q->ran) {
    record.quantize = *q;
    s.say(record.quantize->summary());
  }
  // Lower precision: a changed signature takes converted inputs.
  run.lowp = verify::lowPrecisionRun(pipeline, defaultRegistry(), ctx, run.report);
  if (run.lowp && run.lowp->signatureChanged) s.note(run.lowp->signatureNote());
  if (ref.runner && run.lowp && run.lowp->signatureChanged)
    ref.runner->inputAdapter = [lowp = *run.lowp](std::vector<c10::IValue> in) {
      return lowp.adaptInputs(std::move(in));
    };
  return run;
}

namespace {

// A program that computes in oneDNN's blocked layout (a --tune choice):
// `ep.module()` runs it, AOTInductor cannot compile it (its tracer has no
// layout for those tensors), which a user compiling OUT needs to know.
std::optional<std::string> blockedLayoutNote(const ir::Graph& g) {
  int reorders = 0;
  for (ir::Node* n : *g.block())
    if (n->is("aten::to_mkldnn") || n->is("aten::mkldnn_reorder_conv2d_weight") ||
        n->is("aten::mkldnn_reorder_conv3d_weight"))
      ++reorders;
  if (!reorders) return std::nullopt;
  return fmt::format("OUT computes in oneDNN's blocked layout ({} reorders into it): ep.module() runs it, "
                     "AOTInductor cannot compile it; for AOTInductor, write OUT without --tune (-O3 and "
                     "AOTInductor's own kernels)", reorders);
}

}  // namespace

ExportResult exportStage(const RunSettings& s, std::optional<Optimizer>& opt, const rewriters::Pipeline& pipeline,
                         const ReferenceResult& ref, const RunResult& run, driver::RunRecord& record) {
  auto bug = [](const std::exception& e) {
    return std::runtime_error("the optimized model does not serialize and load back: " + ir::torchErrorMessage(e) +
                              "\n(a ptopt bug: please report it with the model; an empty pipeline (--passes '') "
                              "shows whether a pass is the cause)");
  };
  Stopwatch sw;
  ExportedModel exported;
  exported.format = s.outputFormat;
  std::vector<std::string> specialized;  // branches a .pt2 resolved for the inputs
  try {
    if (exported.format == ir::ModelFormat::TorchScript) exported.module = opt->exportModule();
    else exported.bytes = opt->serializedBytes(exported.format, s.exampleInputs, &specialized);
  } catch (const std::invalid_argument& e) {
    throw ir::InputError(std::string("cannot write OUT as ") + ir::formatTitle(exported.format) + ": " + e.what());
  } catch (const ir::InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw bug(e);
  }
  record.stageMs["export"] = sw.ms();
  if (!specialized.empty())
    s.note(fmt::format("OUT is specialized to the inputs' shapes and types, as torch.export traces: {} ({}{})",
                       specialized.size() == 1 ? "1 change" : std::to_string(specialized.size()) + " changes",
                       specialized.front(), specialized.size() > 1 ? "; ..." : ""));
  ExportResult out;
  if (exported.format == ir::ModelFormat::Pt2) {
    if (auto note = blockedLayoutNote(opt->model().forward())) s.note(*note);
    if (ir::hasQuantizedOps(opt->model().forward())) {
      s.note("OUT holds int8 in PT2E's Q/DQ form (quantized_decomposed:: quantize/dequantize around float ops, "
             "int8 weights): import torch.ao.quantization.fx._decomposed before torch.export.load(OUT); "
             "OUT.module() runs the Q/DQ ops in float, slower than IN; int8 kernels come from compiling it with "
             "Inductor (freezing on, torchao's x86 int8 passes imported, under torch.no_grad(): torch.compile or "
             "AOTInductor)");
      out.notTimed = "OUT is an int8 program in PT2E's Q/DQ form: its speed is what Inductor compiles it to, "
                     "not OUT.module()'s; write TorchScript (OUT.pt) for int8 that runs fast as it is";
    }
  }
  out.counts = countModel(opt->model());
  record.opsAfter = out.counts.ops;
  record.parameterBytesAfter = out.counts.parameterBytes;
  sw.reset();
  try {
    s.hooks.write(exported);
  } catch (const std::system_error&) {
    throw;
  } catch (const std::exception& e) {
    throw bug(e);
  }
  exported = ExportedModel();
  if (ref.verifying(*s.req)) out.standIn = opt->cpuStandIn(pipeline, ref.ctx, run.report, s.device);
  // Letting go of the IR (its folded weights) now that nothing reads it; the
  // original too, unless a stand-in is checked or the measure stage times
  // IN (it has its own copy of every weight a pass replaced). Before the
  // load back: the model is then held twice at most, not three times. The
  // load back gets the freed weights' pages, already mapped (RecycledMemory).
  std::optional<ir::RecycledMemory> recycled;
  if (!out.standIn) {
    recycled.emplace(*opt->model().constants);
    if (whyNotMeasured(s, ref) || out.notTimed) opt.reset();
    else opt->model() = ir::Model();
  }
  try {
    out.module = s.hooks.loadBack();
    out.packedThreads = at::get_num_threads();
  } catch (const std::exception& e) {
    throw bug(e);
  }
  recycled.reset();
  record.stageMs["save"] = sw.ms();  // write and load back
  return out;
}

bool verifyStage(const RunSettings& s, ReferenceResult& ref, const ExportResult& out, driver::RunRecord& record) {
  if (!ref.verifying(*s.req)) return true;
  Stopwatch sw;
  verify::VerifyReport v;
  if (out.standIn) {
    for (const std::string& note : out.standIn->notes) ref.runner->notes.push_back(note);
    v = ref.runner->check(out.standIn->module);
  } else {
    v = ref.runner->check(out.module);
  }
  for (const auto& note : v.notes) s.note(note);
  record.stageMs["verify"] = sw.ms();
  const bool ok = v.passed && !record.blamedPass;
  record.verification = std::move(v);
  return ok;
}

std::optional<std::string> whyNotMeasured(const RunSettings& s, const ReferenceResult& ref) {
  if (!s.req->measure) return s.noMeasureName;
  const std::string here = s.device.is_cuda() ? "cuda" : "cpu";
  if (ref.ctx.targetDevice != here)
    return "the model is for " + ref.ctx.targetDevice + " and this run is on " + here + ": time it there";
  if (!ref.runner && !ref.ctx.exampleInputs) return "no inputs to time it with: give --input-shape";
  return std::nullopt;
}

}  // namespace ptopt
