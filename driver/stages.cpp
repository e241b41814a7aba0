#include "driver/stages.h"

#include "driver/measure_cache.h"
#include "driver/op_table.h"
#include "driver/util.h"

#include "ir/model.h"
#include "ir/recycled_memory.h"
#include "measure/reproducible_clock.h"
#include "quant/calibration.h"
#include "quant/quantize_report.h"
#include "target/capabilities.h"
#include "tune/cache.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <cstdlib>
#include <stdexcept>
#include <system_error>

namespace ptopt {

using driver::Stopwatch;

std::string Stages::tuningCachePath() const {
  return req->tuningCache.empty() ? tune::TuningCache::defaultPath() : req->tuningCache;
}

void Stages::say(const std::string& s) const {
  if (hooks.say) hooks.say(s);
}
void Stages::note(const std::string& s) const {
  if (hooks.note) hooks.note(s);
}
void Stages::notice(const std::string& s) const {
  if (hooks.notice) hooks.notice(s);
}

void Stages::warning(const std::string& s) const {
  if (hooks.warning) hooks.warning(s);
}

void countBefore(Stages& r) {
  r.record.opsBefore = driver::countOps(r.opt->model().forward());
  r.record.parameterBytesBefore = driver::parameterBytes(r.opt->model());
  r.nodesBefore = r.opt->model().forward().numNodes();
}

namespace {

verify::ToleranceSet tolerancesFor(const Stages& r) {
  const c10::ScalarType precision =
      verify::lowestPrecisionIntroduced(r.pipeline, defaultRegistry(), r.ctx).value_or(c10::ScalarType::Float);
  const verify::Tolerance base = verify::Tolerance::forPrecision(precision);
  return r.req->tolerances.over(base);
}

// The target's capabilities (target/capabilities.h): the "target" section
// of the record; said with describeTarget.
void recordTarget(Stages& r) {
  const std::string& device = r.ctx.targetDevice;
  const std::optional<target::CpuIsa> assumed = target::assumedIsa(r.ctx.assumedIsa);
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
  r.record.sections["target"] = t;
  if (r.req->explain || r.req->describeTarget) r.say(target::describeTarget(device, assumed));
}

}  // namespace

Optimizer::Reference referenceStage(Stages& r) {
  const Optimizer::Reference reference = r.opt->reference(r.pipeline, r.device);
  const ir::TrainingMode& mode = r.opt->trainingMode();
  r.record.mode = mode;
  r.record.evalSemantics = mode.scriptedInTraining || reference.specializesTracedFlags;
  r.record.modeNotes = mode.notes(reference.specializesTracedFlags);
  for (const std::string& note : r.record.modeNotes) r.note(note);
  r.ctx.targetDevice = r.req->target != "auto" ? r.req->target : r.device.is_cuda() ? "cuda" : "cpu";
  r.ctx.explain = r.explain;
  r.ctx.preferBf16 = r.req->preferBf16;
  r.ctx.assumedIsa = r.req->assumeIsa;
  r.ctx.tensorValuesOnly = r.outputFormat == ir::ModelFormat::Pt2;
  r.ctx.onWarning = [&r](const std::string& w) { r.warning(w); };
  recordTarget(r);
  r.tolerances = tolerancesFor(r);
  return reference;
}

void referenceOutputs(Stages& r, const Optimizer::Reference& reference, const verify::InputPlan& inputs) {
  if (!inputs.source) return;
  if (r.req->verifying()) {
    Stopwatch sw;
    r.runner.emplace(r.opt->referenceRunner(reference, *inputs.source, r.tolerances, r.device));
    r.record.stageMs["reference"] = sw.ms();
  } else if (!inputs.inferred) {  // given inputs are still checked against the model once
    verify::InputSource once = *inputs.source;
    once.iterations = 1;
    r.opt->referenceRunner(reference, once, r.tolerances, r.device);
  }
  if (!inputs.inferred) r.ctx.exampleInputs = inputs.source->inputsFor(0);
}

void calibrationStage(Stages& r, const std::vector<c10::IValue>& values, const std::string& source,
                      const std::string& what, verify::InputPlan& inputs) {
  try {
    quant::CalibrationData data;
    data.source = source;
    std::optional<std::vector<c10::IValue>> expected;
    if (inputs.source && !inputs.inferred && !inputs.source->fixed) expected = inputs.source->inputsFor(0);
    data.batches = quant::splitCalibrationBatches(values, r.opt->model().forward().inputs().size(),
                                                  expected ? &*expected : nullptr, source);
    if (inputs.source && !inputs.source->fixed && data.batches.size() >= 2) {
      inputs.source->fixed = data.batches.back();
      inputs.inferred = false;
      r.note("verification runs on the last " + what + " batch (held out from calibration)");
    }
    r.ctx.inputs.set(std::move(data));
  } catch (const std::invalid_argument& e) {
    throw ir::InputError(what + ": " + e.what());
  }
}

void tuneStage(Stages& r) {
  if (!r.ctx.exampleInputs)
    throw std::invalid_argument("--tune times the model on its real input shapes: give them with --input-shape or "
                                "--inputs (Python: example_inputs=... or input_shapes=...)");
  tune::TuneOptions t;
  t.budgetSeconds = r.req->tuneBudgetSeconds > 0 ? r.req->tuneBudgetSeconds : tune::kDefaultBudgetSeconds;
  t.cachePath = r.tuningCachePath();
  t.device = r.device;
  t.progress = r.tuneProgress;
  // Decisions that depend on the candidates' names only
  // (measure/reproducible_clock.h), kept out of the tuning cache.
  measure::ReproducibleClock reproducible;
  if (r.req->reproducibleClock) {
    t.timer = &reproducible;
    t.cachePath.clear();
    r.note("--tune decides on a reproducible clock (--reproducible-clock): nothing is timed");
  }
  Stopwatch sw;
  r.tuned = tune::tunePipeline(r.opt->model(), r.pipeline, defaultRegistry(), r.ctx, t);
  r.record.stageMs["tune"] = sw.ms();
  r.pipeline = r.tuned->pipeline;
  r.record.pipeline = rewriters::printPipeline(r.pipeline);
  r.record.tuning = r.tuned->toJson();
  r.tolerances = tolerancesFor(r);
  if (r.runner) r.runner->setTolerances(r.tolerances);
}

void runStage(Stages& r, const rewriters::Instrumentation& inst) {
  Stopwatch sw;
  r.ctx.reports.clear();  // what passes of an earlier run reported is not this run's
  try {
    r.report = r.opt->run(r.pipeline, &r.ctx, inst);
  } catch (...) {
    r.record.stageMs["passes"] = sw.ms();
    throw;
  }
  r.record.stageMs["passes"] = sw.ms();
  r.record.passes = r.report;
  r.record.pipeline = rewriters::printPipeline(r.pipeline);
  r.say(fmt::format("pipeline: {}\n", r.record.pipeline.empty() ? "(empty)" : r.record.pipeline));
  if (!r.report.countersSummary().empty()) r.say(r.report.countersSummary());
  if (auto note = verify::precisionNote(r.pipeline, defaultRegistry(), r.ctx)) {
    r.say("precision: " + *note + "\n");
    r.record.sections["precision"] = *note;
  }
  if (const quant::QuantizeReport* q = r.ctx.reports.find<quant::QuantizeReport>(); q && q->ran) {
    r.record.quantize = *q;
    r.say(r.record.quantize->summary());
  }
  // Lower precision: a changed signature takes converted inputs.
  r.lowp = verify::lowPrecisionRun(r.pipeline, defaultRegistry(), r.ctx, r.report);
  if (r.lowp && r.lowp->signatureChanged) r.note(r.lowp->signatureNote());
  if (r.runner && r.lowp && r.lowp->signatureChanged)
    r.runner->inputAdapter = [lowp = *r.lowp](std::vector<c10::IValue> in) { return lowp.adaptInputs(std::move(in)); };
}

void exportStage(Stages& r) {
  auto bug = [](const std::exception& e) {
    return std::runtime_error("the optimized model does not serialize and load back: " + ir::torchErrorMessage(e) +
                              "\n(a ptopt bug: please report it with the model; an empty pipeline (--passes '') "
                              "shows whether a pass is the cause)");
  };
  Stopwatch sw;
  ExportedModel exported;
  exported.format = r.outputFormat;
  std::vector<std::string> specialized;  // branches a .pt2 resolved for the inputs
  try {
    if (exported.format == ir::ModelFormat::TorchScript) exported.module = r.opt->exportModule();
    else exported.bytes = r.opt->serializedBytes(exported.format, r.exampleInputs, &specialized);
  } catch (const std::invalid_argument& e) {
    throw ir::InputError(std::string("cannot write OUT as ") + ir::formatTitle(exported.format) + ": " + e.what());
  } catch (const ir::InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw bug(e);
  }
  r.record.stageMs["export"] = sw.ms();
  if (!specialized.empty())
    r.note(fmt::format("OUT is specialized to the inputs' shapes and types, as torch.export traces: {} ({}{})",
                       specialized.size() == 1 ? "1 change" : std::to_string(specialized.size()) + " changes",
                       specialized.front(), specialized.size() > 1 ? "; ..." : ""));
  r.nodesAfter = r.opt->model().forward().numNodes();
  r.record.opsAfter = driver::countOps(r.opt->model().forward());
  r.record.parameterBytesAfter = driver::parameterBytes(r.opt->model());
  sw.reset();
  try {
    r.hooks.write(exported);
  } catch (const std::system_error&) {
    throw;
  } catch (const std::exception& e) {
    throw bug(e);
  }
  exported = ExportedModel();
  if (r.verifying()) r.standIn = r.opt->cpuStandIn(r.pipeline, r.ctx, r.report, r.device);
  // Letting go of the IR (its folded weights) now that nothing reads it; the
  // original too, unless a stand-in is checked or the measure stage times
  // IN (it has its own copy of every weight a pass replaced). Before the
  // load back: the model is then held twice at most, not three times. The
  // load back gets the freed weights' pages, already mapped (RecycledMemory).
  std::optional<ir::RecycledMemory> recycled;
  if (!r.standIn) {
    recycled.emplace(*r.opt->model().constants);
    if (whyNotMeasured(r)) r.opt.reset();
    else r.opt->model() = ir::Model();
  }
  try {
    r.result = r.hooks.loadBack();
    r.resultPackedThreads = at::get_num_threads();
  } catch (const std::exception& e) {
    throw bug(e);
  }
  recycled.reset();
  r.record.stageMs["save"] = sw.ms();  // write and load back
}

bool verifyStage(Stages& r) {
  if (!r.verifying()) return true;
  Stopwatch sw;
  verify::VerifyReport v;
  if (r.standIn) {
    for (const std::string& note : r.standIn->notes) r.runner->notes.push_back(note);
    v = r.runner->check(r.standIn->module);
  } else {
    v = r.runner->check(r.result);
  }
  for (const auto& note : v.notes) r.note(note);
  r.record.stageMs["verify"] = sw.ms();
  const bool ok = v.passed && !r.record.blamedPass;
  r.record.verification = std::move(v);
  return ok;
}

// ---- measure

std::optional<std::string> whyNotMeasured(const Stages& r) {
  if (!r.req->measure) return r.noMeasureName;
  const std::string here = r.device.is_cuda() ? "cuda" : "cpu";
  if (r.ctx.targetDevice != here)
    return "the model is for " + r.ctx.targetDevice + " and this run is on " + here + ": time it there";
  if (!r.runner && !r.ctx.exampleInputs) return "no inputs to time it with: give --input-shape";
  return std::nullopt;
}

namespace {

// Verifies a fallback candidate by the fp32 criterion, on the inputs as
// they are (the runner is restored afterwards); throws when it fails.
void checkFp32(Stages& r, const torch::jit::Module& candidate) {
  const verify::ToleranceSet saved = r.runner->tolerances();
  auto adapter = std::move(r.runner->inputAdapter);
  r.runner->inputAdapter = nullptr;
  const verify::Tolerance fp32 = verify::Tolerance::forPrecision(c10::ScalarType::Float);
  r.runner->setTolerances(r.req->tolerances.over(fp32));
  const verify::VerifyReport v = r.runner->check(candidate);
  r.runner->setTolerances(saved);
  r.runner->inputAdapter = std::move(adapter);
  if (!v.passed) throw std::runtime_error("fails verification: " + v.verdict());
}

// The never-slower verdict in the tuning cache (with tune only): keyed by the
// digests of IN and of OUT's bytes, the timed inputs and the timing
// settings. nullopt without tune, or when the cache or the bytes cannot be
// read (the stage then times as usual).
struct VerdictCache {
  tune::TuningCache cache;
  VerdictKey key;
};
std::optional<VerdictCache> openVerdictCache(const Stages& r, const MeasureOptions& mo,
                                             const std::vector<c10::IValue>& inputs) {
  if (!r.req->tune || !r.hooks.inputDigest || !r.hooks.outputDigest) return std::nullopt;
  try {
    return VerdictCache{tune::TuningCache::open(r.tuningCachePath()),
                        verdictKey(r.device, target::assumedIsa(r.ctx.assumedIsa), mo, r.hooks.inputDigest(), r.hooks.outputDigest(), inputs)};
  } catch (const std::exception&) {
    return std::nullopt;  // the tune stage has warned about a damaged cache
  }
}

// The cached verdict for this run, when one applies: the fp32 structure it
// chose is rebuilt and verified (never cached) and must have the bytes it had.
std::optional<NeverSlowerResult> cachedVerdict(const VerdictCache& vc, const std::vector<Candidate>& candidates,
                                               bool force, const std::optional<BuiltCandidate>& built) {
  const std::optional<CachedVerdict> hit = lookupVerdict(vc.cache, vc.key);
  if (!hit) return std::nullopt;
  std::optional<NeverSlowerResult> picked = applyCachedVerdict(*hit, candidates, force);
  if (!picked || candidates[picked->chosen].name != "fp32 structure") return picked;
  try {
    candidates[picked->chosen].build();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!built || bytesDigest(built->result.bytes) != hit->writtenDigest) return std::nullopt;
  return picked;
}

void storeCachedVerdict(Stages& r, VerdictCache& vc, const NeverSlowerResult& picked,
                        const std::vector<Candidate>& candidates, const std::optional<BuiltCandidate>& built,
                        double seconds) {
  // A comparison that fitted too few pairs in the budget decided nothing: not kept.
  const auto& first = picked.tried.front().measurement;
  if (first && first->tooFewPairs) return;
  CachedVerdict v;
  v.picked = picked;
  for (const auto& c : candidates) v.names.push_back(c.name);
  if (built && candidates[picked.chosen].name == "fp32 structure") v.writtenDigest = bytesDigest(built->result.bytes);
  v.forced = r.req->force;
  v.seconds = seconds;
  storeVerdict(vc.cache, vc.key, v);
  try {
    vc.cache.save();
  } catch (const tune::CacheError& e) {
    r.notice(std::string("the speed verdict is not cached: ") + e.what());
  }
}

// The measurement section of the record, and its lines.
void reportVerdict(Stages& r, nlohmann::json& rec, const NeverSlowerResult& picked,
                   const std::vector<Candidate>& candidates, const std::string& cachedNote) {
  nlohmann::json tried = nlohmann::json::array();
  for (const auto& t : picked.tried) {
    nlohmann::json j = {{"candidate", t.name}};
    if (t.measurement) j.update(speedToJson(*t.measurement));
    if (!t.error.empty()) j["error"] = t.error;
    tried.push_back(j);
  }
  rec["candidates"] = tried;
  const CandidateOutcome& first = picked.tried.front();
  const std::string suffix = cachedNote.empty() ? "" : " (" + cachedNote + ")";
  if (first.measurement) {
    const SpeedMeasurement& m = *first.measurement;
    rec.update({{"speedup", 1 / m.ratio.median}, {"ratio", m.ratio.median}, {"ci95", {m.ratio.low, m.ratio.high}},
                {"verdict", verdictName(m.verdict)}});
    r.say(fmt::format("speed: OUT/IN latency {}: {}{}\n", m.line(),
                      m.tooFewPairs && m.verdict == SpeedVerdict::NoClearDifference ? "no verdict, OUT kept"
                      : m.verdict == SpeedVerdict::Faster ? "OUT is faster"
                      : m.verdict == SpeedVerdict::Slower ? "OUT is measurably slower than IN"
                                                          : "no clear difference",
                      suffix));
  } else if (!first.error.empty()) {
    r.say("speed: OUT could not be timed: " + first.error + suffix + "\n");
  }
  rec["written"] = candidates[picked.chosen].name;
  r.record.sections["measurement"] = rec;
  for (size_t i = 1; i < picked.tried.size(); ++i) {
    const CandidateOutcome& t = picked.tried[i];
    const std::string what = candidates[i].name + " (" + candidates[i].description + ")";
    if (!t.error.empty()) r.say("speed: " + what + " not usable: " + t.error + "\n");
    else if (t.measurement) r.say(fmt::format("speed: {}: {}\n", what, t.measurement->line()));
  }
}

}  // namespace

void measureStage(Stages& r, bool ok) {
  const driver::Request& req = *r.req;
  MeasureOptions mo = r.measureOptions;
  // Verification has just run IN and OUT on these inputs, several times each
  // (allocations made, oneDNN's primitives created): they are warm, and the
  // whole budget goes to timed pairs (the median of the pairs shrugs off a
  // first one slower at the measure's thread count).
  if (r.verifying() && ok) mo.warmupRuns = 0;
  nlohmann::json rec = {{"budget_s", mo.budgetSeconds}, {"threads", mo.threads},
                        {"executor", mo.optimizingExecutor ? "optimizing" : "plain"}};
  auto skip = [&](const std::string& why) {
    rec["skipped"] = why;
    r.record.sections["measurement"] = rec;
    if (why.rfind(r.noMeasureName, 0) != 0) r.say("speed: not measured (" + why + ")\n");
  };
  if (auto why = whyNotMeasured(r)) return skip(*why);
  if (!ok) return skip("verification failed");
  std::vector<c10::IValue> inputs = r.runner ? r.runner->inputs().inputsFor(0) : *r.ctx.exampleInputs;
  for (auto& v : inputs) v = verify::toDevice(v, r.device);
  std::vector<c10::IValue> outInputs = r.lowp ? r.lowp->adaptInputs(inputs) : inputs;

  Stopwatch sw;
  // IN as given (moduleSubject times a copy on a GPU: the original stays on
  // the CPU for imports).
  const measure::Subject in = moduleSubject("IN", r.opt->original(), inputs, r.device);

  // The candidates, best first; each is built only when the one before it
  // was measurably slower (force: OUT alone).
  std::vector<Candidate> candidates;
  candidates.push_back({"output", "the optimized model", [&] { return moduleSubject("output", r.result, outInputs, r.device); }});
  const std::optional<StructurePipeline> structure = fp32StructurePipeline(r.pipeline);
  std::optional<BuiltCandidate> built;
  if (structure && !req.force)
    candidates.push_back({"fp32 structure", structure->description(), [&] {
                            built = buildCandidate(*r.opt, req.importOptions, structure->pipeline, r.ctx, r.outputFormat,
                                                   r.exampleInputs);
                            if (r.runner) checkFp32(r, built->result.module);  // verified like OUT
                            return moduleSubject("fp32 structure", built->result.module, inputs, r.device);
                          }});
  if (!req.force)
    candidates.push_back({"input", "the input model itself", [] { return measure::Subject{"input", [] {}}; }});

  std::optional<VerdictCache> vc = openVerdictCache(r, mo, inputs);
  std::optional<NeverSlowerResult> fromCache;
  if (vc) fromCache = cachedVerdict(*vc, candidates, req.force, built);
  NeverSlowerResult picked;
  if (fromCache) {
    picked = *fromCache;
  } else {
    try {
      // Packs follow the count (OUT was loaded back at the work count).
      ScopedThreads threads(mo.threads, {r.opt->original(), r.result}, r.resultPackedThreads);
      torch::NoGradGuard noGrad;
      torch::jit::GraphOptimizerEnabledGuard optimizer(mo.optimizingExecutor);
      measure::DeviceClock clock(r.device);  // thread CPU time at one thread; CUDA events
      rec["clock"] = clock.method();
      picked = pickNotSlower(in, candidates, mo, clock);
      if (candidates.size() == 1) {  // force: OUT is written whatever it measures; time it anyway
        picked.tried.back().measurement = measurePair(in, candidates[0].build(), mo, clock);
        picked.tried.back().measurement->threads = at::get_num_threads();
      }
    } catch (const std::exception& e) {
      return skip(std::string("a model failed while timed: ") + ir::torchErrorMessage(e));
    }
    if (vc) storeCachedVerdict(r, *vc, picked, candidates, built, sw.ms() / 1000);
  }
  r.record.stageMs["measure"] = sw.ms();
  rec["source"] = fromCache ? "cached" : "measured";
  std::string cachedNote;
  if (fromCache) {
    cachedNote = "measured in an earlier run, cached in " + vc->cache.path();
    rec["cache"] = vc->cache.path();
    rec["note"] = cachedNote;
  }
  reportVerdict(r, rec, picked, candidates, cachedNote);

  const Candidate& chosen = candidates[picked.chosen];
  const CandidateOutcome& first = picked.tried.front();
  if (picked.chosen == 0) {
    if (req.force && first.measurement && first.measurement->verdict == SpeedVerdict::Slower)
      r.notice("OUT is measurably slower than IN; kept anyway (force)");
    return;
  }
  r.written = chosen.name == "input" ? "the input model (unchanged)" : chosen.name;
  r.notice("OUT was measurably slower than IN" + std::string(first.error.empty() ? "" : " (it cannot run here)") +
           ", so ptopt writes " + r.written + " (" + chosen.description +
           ") instead; --force (Python: force=True) keeps the slower OUT");
  if (chosen.name == "fp32 structure") {
    r.replacement = std::move(built->result);
    r.nodesAfter = built->nodes;
    r.record.opsAfter = driver::countOps(built->model->forward());
    r.record.parameterBytesAfter = driver::parameterBytes(*built->model);
  } else {
    r.replacement = r.hooks.inputAsOutput();
    r.nodesAfter = r.nodesBefore;
    r.record.opsAfter = r.record.opsBefore;
    r.record.parameterBytesAfter = r.record.parameterBytesBefore;
  }
}

}  // namespace ptopt
