// The measure stage (driver/stages.h measureStage): never slower.
//
// It reads straight through: why it would not time at all; the inputs it
// times on; IN and the candidates to write, best first (OUT, the fp32
// structure, IN itself; measure.h); the verdict an earlier --tune run
// measured for the same bytes (measure_cache.h VerdictCache), else the
// choice timed now (measure.h pickNotSlower) and kept for the next run;
// the record's measurement section and the lines said; and what is written
// instead of OUT, when OUT was measurably slower.
#include "driver/stages.h"

#include "driver/measure_cache.h"
#include "driver/op_costs.h"
#include "driver/op_table.h"
#include "driver/util.h"

#include "ir/model.h"
#include "target/capabilities.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <stdexcept>

namespace ptopt {

using driver::Stopwatch;

namespace {

// Verifies a fallback candidate by the fp32 criterion, on the inputs as
// they are (the runner is restored afterwards); throws when it fails.
void checkFp32(const driver::Request& req, verify::ReferenceRunner& runner, const torch::jit::Module& candidate) {
  const verify::ToleranceSet saved = runner.tolerances();
  auto adapter = std::move(runner.inputAdapter);
  runner.inputAdapter = nullptr;
  const verify::Tolerance fp32 = verify::Tolerance::forPrecision(c10::ScalarType::Float);
  runner.setTolerances(req.tolerances.over(fp32));
  const verify::VerifyReport v = runner.check(candidate);
  runner.setTolerances(saved);
  runner.inputAdapter = std::move(adapter);
  if (!v.passed) throw std::runtime_error("fails verification: " + v.verdict());
}

// When an int8 OUT lost: which ops cost the time (driver/op_costs.h), IN's
// and OUT's ops timed on the same inputs, and the float ops that put
// conversions between its int8 regions; said and recorded (loss).
void explainInt8Loss(const RunSettings& s, const MeasureInputs& m, const Optimizer& opt,
                     const std::vector<c10::IValue>& inputs, const std::vector<c10::IValue>& outInputs,
                     const MeasureOptions& mo, nlohmann::json& rec) {
  const std::map<std::string, size_t> boundaries = driver::precisionBoundaries(m.out.module);
  const bool int8 = !boundaries.empty() || driver::hasQuantizedOps(*m.out.module.get_method("forward").graph());
  if (!int8 || !s.device.is_cpu()) return;
  try {
    ScopedThreads threads(mo.threads, {opt.original(), m.out.module}, m.out.packedThreads);
    torch::jit::GraphOptimizerEnabledGuard optimizer(mo.optimizingExecutor);  // as the verdict ran them
    const driver::OpKindCosts in = driver::timeOpKinds(opt.original(), inputs, 5);
    const driver::OpKindCosts out = driver::timeOpKinds(m.out.module, outInputs, 5);
    const std::vector<std::string> lines = driver::lossLines(in, out, boundaries);
    for (const std::string& line : lines) s.say("  " + line + "\n");
    rec["loss"] = lines;
    // The x86 engine's int8 kernels are not the only ones this LibTorch has
    // (2.x registers oneDNN's own; 1.13 does not).
    if (!s.req->tune && ir::findSchema("onednn::qconv2d_pointwise", ""))
      s.say("  --tune times the int8 ops on oneDNN's kernels too, on this CPU, and keeps what wins\n");
  } catch (const std::exception& e) {
    s.notice(std::string("could not time OUT's ops: ") + ir::torchErrorMessage(e));
  }
}

// The never-slower verdict in the tuning cache (with tune only): keyed by the
// digests of IN and of OUT's bytes, the timed inputs and the timing
// settings. nullopt without tune, or when the cache or the bytes cannot be
// read (the stage then times as usual).
std::optional<VerdictCache> openVerdictCache(const RunSettings& s, const rewriters::PassContext& ctx,
                                             const MeasureOptions& mo, const std::vector<c10::IValue>& inputs) {
  if (!s.req->tune || !s.hooks.inputDigest || !s.hooks.outputDigest) return std::nullopt;
  try {
    return VerdictCache::open(s.tuningCachePath(),
                              verdictKey(s.device, target::assumedIsa(ctx.assumedIsa), mo, s.hooks.inputDigest(),
                                         s.hooks.outputDigest(), inputs));
  } catch (const std::exception&) {
    return std::nullopt;  // the bytes cannot be read
  }
}

// The measurement section of the record, and its lines.
void reportVerdict(const RunSettings& s, nlohmann::json& rec, const NeverSlowerResult& picked,
                   const std::vector<Candidate>& candidates, const std::string& cachedNote) {
  rec["candidates"] = triedToJson(picked.tried);
  const CandidateOutcome& first = picked.tried.front();
  const std::string suffix = cachedNote.empty() ? "" : " (" + cachedNote + ")";
  if (first.measurement) {
    const SpeedMeasurement& m = *first.measurement;
    rec.update({{"speedup", 1 / m.ratio.median}, {"ratio", m.ratio.median}, {"ci95", {m.ratio.low, m.ratio.high}},
                {"verdict", verdictName(m.verdict)}});
    s.say(fmt::format("speed: OUT/IN latency {}: {}{}\n", m.line(),
                      m.tooFewPairs && m.verdict == SpeedVerdict::NoClearDifference ? "no verdict, OUT kept"
                      : m.verdict == SpeedVerdict::Faster ? "OUT is faster"
                      : m.verdict == SpeedVerdict::Slower ? "OUT is measurably slower than IN"
                                                          : "no clear difference",
                      suffix));
  } else if (!first.error.empty()) {
    s.say("speed: OUT could not be timed: " + first.error + suffix + "\n");
  }
  rec["written"] = candidates[picked.chosen].name;
  for (size_t i = 1; i < picked.tried.size(); ++i) {
    const CandidateOutcome& t = picked.tried[i];
    const std::string what = candidates[i].name + " (" + candidates[i].description + ")";
    if (!t.error.empty()) s.say("speed: " + what + " not usable: " + t.error + "\n");
    else if (t.measurement) s.say(fmt::format("speed: {}: {}\n", what, t.measurement->line()));
  }
}

}  // namespace

MeasureOutcome measureStage(const MeasureInputs& m, bool ok, driver::RunRecord& record) {
  const RunSettings& s = m.settings;
  const driver::Request& req = *s.req;
  ReferenceResult& ref = m.ref;
  MeasureOptions mo = s.measureOptions;
  // Verification has just run IN and OUT on these inputs, several times each
  // (allocations made, oneDNN's primitives created): they are warm, and the
  // whole budget goes to timed pairs (the median of the pairs shrugs off a
  // first one slower at the measure's thread count).
  if (ref.verifying(req) && ok) mo.warmupRuns = 0;
  nlohmann::json rec = {{"budget_s", mo.budgetSeconds}, {"threads", mo.threads},
                        {"executor", mo.optimizingExecutor ? "optimizing" : "plain"}};
  auto skip = [&](const std::string& why) {
    rec["skipped"] = why;
    record.sections["measurement"] = rec;
    if (why.rfind(s.noMeasureName, 0) != 0) s.say("speed: not measured (" + why + ")\n");
    return MeasureOutcome();
  };
  if (auto why = whyNotMeasured(s, ref)) return skip(*why);
  if (m.out.notTimed) return skip(*m.out.notTimed);
  if (!ok) return skip("verification failed");
  const Optimizer& opt = *m.in;
  std::vector<c10::IValue> inputs = ref.runner ? ref.runner->inputs().inputsFor(0) : *ref.ctx.exampleInputs;
  for (auto& v : inputs) v = verify::toDevice(v, s.device);
  std::vector<c10::IValue> outInputs = m.run.lowp ? m.run.lowp->adaptInputs(inputs) : inputs;

  Stopwatch sw;
  // IN as given (moduleSubject times a copy on a GPU: the original stays on
  // the CPU for imports).
  const measure::Subject in = moduleSubject("IN", opt.original(), inputs, s.device);

  // The candidates, best first; each is built only when the one before it
  // was measurably slower (force: OUT alone).
  std::vector<Candidate> candidates;
  candidates.push_back(
      {"output", "the optimized model", [&] { return moduleSubject("output", m.out.module, outInputs, s.device); }});
  const std::optional<StructurePipeline> structure = fp32StructurePipeline(m.pipeline);
  std::optional<BuiltCandidate> built;
  if (structure && !req.force)
    candidates.push_back({"fp32 structure", structure->description(), [&] {
                            built = buildCandidate(opt, req.importOptions, structure->pipeline, ref.ctx,
                                                   s.outputFormat, s.exampleInputs);
                            if (ref.runner) checkFp32(req, *ref.runner, built->result.module);  // verified like OUT
                            return moduleSubject("fp32 structure", built->result.module, inputs, s.device);
                          }});
  if (!req.force)
    candidates.push_back({"input", "the input model itself", [] { return measure::Subject{"input", [] {}}; }});
  auto builtDigest = [&built] { return built ? bytesDigest(built->result.bytes) : std::string(); };

  std::optional<VerdictCache> cache = openVerdictCache(s, ref.ctx, mo, inputs);
  std::optional<NeverSlowerResult> fromCache;
  if (cache) fromCache = cache->recall(candidates, req.force, builtDigest);
  NeverSlowerResult picked;
  if (fromCache) {
    picked = *fromCache;
  } else {
    try {
      // Packs follow the count (OUT was loaded back at the work count).
      ScopedThreads threads(mo.threads, {opt.original(), m.out.module}, m.out.packedThreads);
      torch::NoGradGuard noGrad;
      torch::jit::GraphOptimizerEnabledGuard optimizer(mo.optimizingExecutor);
      measure::DeviceClock clock(s.device);  // thread CPU time at one thread; CUDA events
      rec["clock"] = clock.method();
      picked = pickNotSlower(in, candidates, mo, clock);
      if (candidates.size() == 1) {  // force: OUT is written whatever it measures; time it anyway
        picked.tried.back().measurement = measurePair(in, candidates[0].build(), mo, clock);
        picked.tried.back().measurement->threads = at::get_num_threads();
      }
    } catch (const std::exception& e) {
      return skip(std::string("a model failed while timed: ") + ir::torchErrorMessage(e));
    }
    if (cache) {
      try {
        cache->remember(picked, candidates, req.force, sw.ms() / 1000, builtDigest);
      } catch (const tune::CacheError& e) {
        s.notice(std::string("the speed verdict is not cached: ") + e.what());
      }
    }
  }
  record.stageMs["measure"] = sw.ms();
  rec["source"] = fromCache ? "cached" : "measured";
  std::string cachedNote;
  if (fromCache) {
    cachedNote = "measured in an earlier run, cached in " + cache->path();
    rec["cache"] = cache->path();
    rec["note"] = cachedNote;
  }
  reportVerdict(s, rec, picked, candidates, cachedNote);
  record.sections["measurement"] = rec;

  // What is written.
  MeasureOutcome outcome;
  const Candidate& chosen = candidates[picked.chosen];
  const CandidateOutcome& first = picked.tried.front();
  if (picked.chosen == 0) {
    if (req.force && first.measurement && first.measurement->verdict == SpeedVerdict::Slower)
      s.notice("OUT is measurably slower than IN; kept anyway (force)");
    return outcome;
  }
  outcome.written = chosen.name == "input" ? "the input model (unchanged)" : chosen.name;
  s.notice("OUT was measurably slower than IN" + std::string(first.error.empty() ? "" : " (it cannot run here)") +
           ", so ptopt writes " + outcome.written + " (" + chosen.description +
           ") instead; --force (Python: force=True) keeps the slower OUT");
  if (first.error.empty()) explainInt8Loss(s, m, opt, inputs, outInputs, mo, rec);
  record.sections["measurement"] = rec;
  if (chosen.name == "fp32 structure") {
    outcome.replacement = std::move(built->result);
    outcome.counts = countModel(*built->model);
  } else {
    outcome.replacement = s.hooks.inputAsOutput();
    outcome.counts = m.before;
  }
  return outcome;
}

}  // namespace ptopt
