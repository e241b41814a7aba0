#include "tune/tune_model.h"

#include "ir/literal.h"
#include "measure/clock.h"
#include "rewriters/pass_manager.h"
#include "target/capabilities.h"
#include "tune/cache.h"
#include "tune/measuring_device.h"
#include "tune/signature.h"
#include "tune/tunable.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <tuple>

namespace ptopt::tune {

using rewriters::Pipeline;
using rewriters::PipelineElement;

namespace {

// A whole-model A/B runs every layer per sample: it gets this many ops'
// shares of the budget.
constexpr double kWholeModelWeight = 10.0;

// The offered tunables in the order they are decided: registration order,
// each after every other registered one that settles an aspect it builds on.
std::vector<std::shared_ptr<const Tunable>> offerOrder(const std::vector<std::shared_ptr<const Tunable>>& all) {
  std::vector<std::shared_ptr<const Tunable>> pending, out;
  for (const auto& t : all)
    if (t->offered()) pending.push_back(t);
  auto settles = [](const Tunable& t, TuningAspect a) {
    return std::find(t.settles.begin(), t.settles.end(), a) != t.settles.end();
  };
  while (!pending.empty()) {
    auto ready = std::find_if(pending.begin(), pending.end(), [&](const auto& t) {
      return std::none_of(pending.begin(), pending.end(), [&](const auto& other) {
        return other != t && std::any_of(t->buildsOn.begin(), t->buildsOn.end(),
                                         [&](TuningAspect a) { return settles(*other, a); });
      });
    });
    if (ready == pending.end()) {
      std::string kinds;
      for (const auto& t : pending) kinds += (kinds.empty() ? "" : ", ") + t->kind;
      throw std::logic_error("the offered tunables " + kinds + " build on what each other settles (a cycle)");
    }
    out.push_back(*ready);
    pending.erase(ready);
  }
  return out;
}

class PipelineTuning final : public TuningSession {
 public:
  PipelineTuning(const ir::Model& model, const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
                 const TuneOptions& o)
      : registry_(registry), o_(o), input_(model), work_(model.clone()), ctx_(base.forTrial()) {
    if (!o.timer) ownTimer_ = std::make_unique<measure::DeviceClock>(o.device, measure::DeviceClock::Options{true, true});
    timer_ = o.timer ? o.timer : ownTimer_.get();
    start_ = timer_->elapsedSeconds();
    result_.budgetSeconds = o.budgetSeconds;
    result_.cachePath = o.cachePath;
    context_ = CacheContext::current(measuringDevice(o.device, target::assumedIsa(base.assumedIsa)).str());
    context_.confirmedAt = o.alsoAtThreads;
    context_.packsEachCall = ctx_.tensorValuesOnly;
    result_.context = context_.key();
    try {
      cache_ = TuningCache::open(o.cachePath);
    } catch (const CacheError& e) {
      result_.warnings.push_back(std::string(e.what()) + "; starting with an empty cache");
      say("tune: warning: " + result_.warnings.back());
      cache_ = TuningCache(o.cachePath);
    }
  }

  TuneResult run(const Pipeline& pipeline) {
    // What runs OUT: a TorchScript file runs on LibTorch's profiling
    // executor, which optimizes the graph after its first calls; a program
    // (.pt2) runs its ops as written (ep.module()), as the plain executor
    // runs the rendering.
    torch::jit::GraphOptimizerEnabledGuard executor(!ctx_.tensorValuesOnly);
    if (!ctx_.exampleInputs)
      throw std::invalid_argument("--tune measures with the model's real input shapes: give --input-shape or --inputs");
    if (pipeline.empty()) {
      say("tune: the pipeline is empty: nothing to tune");
      result_.pipeline = pipeline;
      return std::move(result_);
    }
    pipeline_ = &pipeline;
    const auto all = tunables(registry_);
    const auto offered = offerOrder(all);
    std::map<std::string, const Tunable*> byPass;  // element tunables
    for (const auto& t : all)
      if (t->tunesElements()) byPass[t->pass] = t.get();
    countExpected(all);
    for (const auto& t : all) result_.listing.insert(t->listing.begin(), t->listing.end());
    size_t nextOffer = 0;  // offered[0, nextOffer) are done
    // Offers every pending tunable up to and including offered[last].
    auto offerUpTo = [&](size_t last) {
      for (; nextOffer <= last && nextOffer < offered.size(); ++nextOffer)
        if (!offered[nextOffer]->applies || offered[nextOffer]->applies(*this)) offered[nextOffer]->offer(*this);
    };
    for (const PipelineElement& e : pipeline.elements) {
      for (size_t i = offered.size(); i-- > nextOffer;) {
        const auto& before = offered[i]->offeredBefore;
        if (std::find(before.begin(), before.end(), e.name) != before.end()) {
          offerUpTo(i);
          break;
        }
      }
      // The element with its pass's declared options: the tunable reads it
      // through the typed accessors (defaults from the pass, not restated).
      if (auto it = byPass.find(e.name); it != byPass.end())
        it->second->tuneElement(*this, rewriters::withOptionSpecs(e, registry_));
      else keep(e);
    }
    offerUpTo(offered.size());
    std::vector<const Tunable*> proposing;
    for (const auto& t : all)
      if (t->proposesPipelines() && (!t->applies || t->applies(*this))) proposing.push_back(t.get());
    // What is left of the budget goes to the whole-pipeline A/Bs, a share
    // each: the per-op counts above are upper bounds (a tunable that decides
    // convs counts the linears too; repeated layers share one signature),
    // and on a 200 ms model a slice of what they left gave an A/B 1-4
    // rounds.
    if (!proposing.empty()) expected_ = static_cast<size_t>(kWholeModelWeight) * proposing.size();
    for (const Tunable* t : proposing) proposeAlternatives(*t, pipeline);
    try {
      cache_.save();
    } catch (const CacheError& e) {
      result_.warnings.push_back(std::string(e.what()) + " (the decisions of this run are not kept)");
      say("tune: warning: " + result_.warnings.back());
    }
    // Canonical text: options in declaration order.
    result_.pipeline = rewriters::parsePipeline(rewriters::printPipeline(out_), registry_, "--tune");
    result_.seconds = timer_->elapsedSeconds() - start_;
    return std::move(result_);
  }

  // ---- TuningSession: what the decisions read

  ir::Model& model() override { return work_; }
  const ir::Model& input() const override { return input_; }
  const rewriters::PassContext& context() const override { return ctx_; }
  const rewriters::PassRegistry& registry() const override { return registry_; }
  c10::Device device() const override { return o_.device; }
  bool pipelineUses(const std::string& pass) const override { return rewriters::pipelineUses(*pipeline_, pass); }
  const Pipeline& tunedSoFar() const override { return out_; }
  std::string modelSignature(const std::string& extra) const override {
    return digest(work_.forward().str() + extra) + " inputs " + inputsSignature(*ctx_.exampleInputs);
  }

  // ---- running passes

  void keep(const PipelineElement& e) override {
    runOn(work_, e);
    out_.elements.push_back(e);
  }
  ir::Model variant(const PipelineElement& e) override {
    ir::Model copy = work_.clone();
    runOn(copy, e);
    return copy;
  }
  ir::Model inputAfter(const Pipeline& p) override {
    ir::Model copy = input_.clone();
    runOn(copy, p);
    return copy;
  }

  // ---- deciding

  bool decideOp(const std::string& kind, const ir::Node& n, const std::vector<std::string>& names,
                const CandidateFactory& make, const std::string& context) override {
    return chooseOp(kind, n, names, make, context) != names.front();
  }

  std::string chooseOp(const std::string& kind, const ir::Node& n, const std::vector<std::string>& names,
                       const CandidateFactory& make, const std::string& context) override {
    return decideOpRecord(kind, n, names, make, context).choice;
  }

  DecisionRecord decideOpRecord(const std::string& kind, const ir::Node& n, const std::vector<std::string>& names,
                                const CandidateFactory& make, const std::string& context) override {
    const std::string node = n.output()->name();
    std::string why;
    auto sig = opSignature(n, why);
    if (!sig) return skipped(kind, node, names.front(), why);
    if (!context.empty()) *sig += " " + context;
    if (auto hit = fromCache(kind, node, *sig, names)) return *hit;
    std::optional<std::vector<Candidate>> candidates;
    try {
      candidates = make(why);
    } catch (const std::exception& e) {
      // Building the alternatives ran a kernel this machine lacks (a bf16
      // oneDNN primitive on a CPU without AVX-512, say): they are out.
      DecisionRecord d = baselineRecord(kind, node, names);
      for (size_t i = 1; i < names.size(); ++i) d.out.emplace_back(names[i], firstLine(e.what()));
      return skip(std::move(d), "cannot run on this machine: " + firstLine(e.what()));
    }
    if (!candidates) return skipped(kind, node, names.front(), why);
    return measureDecision(kind, node, *sig, std::move(*candidates), 1.0);
  }

  DecisionRecord compareModels(const std::string& kind, const std::string& signature,
                               const ModelVariants& variants) override {
    std::vector<std::string> names;
    for (const auto& v : variants) names.push_back(v.first);
    if (auto hit = fromCache(kind, "model", signature, names)) return *hit;
    std::vector<Candidate> candidates;
    try {
      candidates = wholeModelCandidates(variants, *ctx_.exampleInputs, o_.device, !ctx_.tensorValuesOnly);
    } catch (const std::exception& ex) {
      return skipped(kind, "model", names.front(), std::string("cannot export the variants: ") + ex.what());
    }
    return measureDecision(kind, "model", signature, std::move(candidates), kWholeModelWeight, &variants);
  }

  bool preferOpByOp(const std::string& kind, const std::optional<PipelineElement>& preset,
                    const std::optional<PipelineElement>& opByOp, const std::string& challenger) override {
    auto text = [](const std::optional<PipelineElement>& e) {
      return e ? rewriters::printPipeline(Pipeline{{*e}}) : std::string("(none)");
    };
    ir::Model presetModel = preset ? variant(*preset) : work_.clone();
    ir::Model tunedModel = opByOp ? variant(*opByOp) : work_.clone();
    if (presetModel.forward().str() == tunedModel.forward().str()) return true;
    const std::string sig = modelSignature("|" + text(preset) + "|" + text(opByOp));
    return compareModels(kind, sig, {{"preset", &presetModel}, {challenger, &tunedModel}}).rewrites();
  }

  size_t preferAmong(const std::string& kind, const std::optional<PipelineElement>& preset,
                     const std::vector<NamedElement>& alternatives) override {
    auto text = [](const std::optional<PipelineElement>& e) {
      return e ? rewriters::printPipeline(Pipeline{{*e}}) : std::string("(none)");
    };
    // The distinct models, the preset's first; each alternative's index
    // among them.
    std::vector<ir::Model> models;
    std::vector<std::string> names{"preset"}, graphs;
    std::vector<size_t> timedAs;
    std::string sig = "|" + text(preset);
    models.push_back(preset ? variant(*preset) : work_.clone());
    graphs.push_back(models.back().forward().str());
    for (const auto& [name, element] : alternatives) {
      ir::Model m = element ? variant(*element) : work_.clone();
      const std::string g = m.forward().str();
      const auto same = std::find(graphs.begin(), graphs.end(), g);
      if (same != graphs.end()) {
        timedAs.push_back(static_cast<size_t>(same - graphs.begin()));
        continue;
      }
      timedAs.push_back(models.size());
      models.push_back(std::move(m));
      graphs.push_back(g);
      names.push_back(name);
      sig += "|" + text(element);
    }
    size_t chosen = 0;
    if (models.size() > 1) {
      ModelVariants variants;
      for (size_t i = 0; i < models.size(); ++i) variants.emplace_back(names[i], &models[i]);
      const DecisionRecord d = compareModels(kind, modelSignature(sig), variants);
      chosen = static_cast<size_t>(std::find(names.begin(), names.end(), d.choice) - names.begin());
      if (chosen >= names.size()) chosen = 0;
    }
    // The first alternative of the chosen graph (of the preset's too: it
    // spells out what was decided).
    for (size_t i = 0; i < timedAs.size(); ++i)
      if (timedAs[i] == chosen) return i + 1;
    return 0;
  }

  std::optional<DecisionRecord> fromCache(const std::string& kind, const std::string& node, const std::string& signature,
                                          const std::vector<std::string>& names) override {
    auto hit = cache_.lookup(context_, kind + "|" + signature);
    if (!hit || std::find(names.begin(), names.end(), hit->choice) == names.end()) return std::nullopt;
    DecisionRecord d;
    d.kind = kind;
    d.node = node;
    d.signature = kind + "|" + signature;
    d.candidates = hit->candidates.empty() ? names : hit->candidates;
    d.source = DecisionRecord::Source::Cached;
    d.choice = hit->choice;
    d.ratio = hit->ratio, d.low = hit->low, d.high = hit->high, d.rounds = hit->rounds;
    d.challenger = hit->challenger.empty() ? hit->choice : hit->challenger;
    if (hit->detail.is_object() && hit->detail.contains("at_threads"))
      for (const auto& c : hit->detail["at_threads"]) d.atThreads.push_back(ThreadCheck::fromJson(c));
    ++result_.cached;
    decided();
    return record(std::move(d));
  }
  DecisionRecord skipped(const std::string& kind, const std::string& node, const std::string& baseline,
                         const std::string& why) override {
    return skip(baselineRecord(kind, node, {baseline}), why);
  }
  DecisionRecord skip(DecisionRecord d, const std::string& why) override {
    d.source = DecisionRecord::Source::Skipped;
    d.note = why;
    ++result_.skipped;
    decided();
    return record(std::move(d));
  }

  // ---- composite decisions

  std::optional<Choice> timeModels(const ModelVariants& variants, std::string& why) override {
    std::vector<Candidate> candidates;
    try {
      candidates = wholeModelCandidates(variants, *ctx_.exampleInputs, o_.device, !ctx_.tensorValuesOnly);
    } catch (const std::exception& ex) {
      why = std::string("cannot export the variants: ") + ex.what();
      return std::nullopt;
    }
    auto c = timeCandidates(candidates, kWholeModelWeight);
    if (!c) why = "the --tune-budget is spent";
    else if (c->baselineFailed) why = "the baseline failed: " + c->results[0].error;
    if (!c || c->baselineFailed) return std::nullopt;
    candidates.clear();  // their packs are for this count; the checks make their own
    confirmElsewhere(*c, variants);
    return c;
  }
  DecisionRecord recordMeasured(DecisionRecord d, bool cache) override {
    ++result_.measured;
    if (cache) store(d);
    return record(std::move(d));
  }
  bool budgetLeft() override {
    if (remaining() > 0) return true;
    result_.budgetSpent = true;
    return false;
  }
  void expectMoreDecisions(size_t n) override { expected_ += n; }

  // ---- progress

  void say(const std::string& line) const override {
    if (o_.progress) *o_.progress << line << "\n" << std::flush;
  }
  double elapsedSeconds() const override { return timer_->elapsedSeconds() - start_; }

 private:
  void runOn(ir::Model& m, const PipelineElement& e) {
    Pipeline p;
    p.elements.push_back(e);
    runOn(m, p);
  }
  void runOn(ir::Model& m, const Pipeline& p) {
    rewriters::PassContext ctx = ctx_.forTrial();  // its reports and warnings are not the run's
    ctx.edits.setKeepText(false);
    rewriters::PassManager(registry_, p).run(m, ctx);
  }

  // `t`'s whole pipelines against the tuned one (Tunable::alternatives).
  void proposeAlternatives(const Tunable& t, const Pipeline& given) {
    if (!budgetLeft()) {  // building them runs whole pipelines
      skipped(t.kind, "model", "tuned", "the --tune-budget is spent");
      return;
    }
    std::vector<std::pair<std::string, Pipeline>> pipelines;
    std::vector<ir::Model> models;
    std::string texts;
    for (auto& [name, p] : t.alternatives(*this, given)) {
      ir::Model m = input_.clone();
      try {
        runOn(m, p);
      } catch (const std::exception& ex) {
        skipped(t.kind, "model", "tuned", name + " failed: " + firstLine(ex.what()));
        continue;
      }
      // What the tuning chose already, or another alternative's graph.
      if (m.forward().str() == work_.forward().str() ||
          std::any_of(models.begin(), models.end(), [&](const ir::Model& o) { return o.forward().str() == m.forward().str(); }))
        continue;
      texts += "|" + name + "=" + rewriters::printPipeline(p);
      pipelines.emplace_back(name, std::move(p));
      models.push_back(std::move(m));
    }
    if (models.empty()) return;
    ModelVariants variants{{"tuned", &work_}};
    for (size_t i = 0; i < models.size(); ++i) variants.emplace_back(pipelines[i].first, &models[i]);
    say(fmt::format("tune        {:5.1f} s  {}: the tuned model vs {} whole pipeline{}", elapsedSeconds(), t.kind,
                    models.size(), models.size() == 1 ? "" : "s"));
    const DecisionRecord d =
        compareModels(t.kind, modelSignature(texts + "|input " + digest(input_.forward().str())), variants);
    for (size_t i = 0; d.rewrites() && i < models.size(); ++i)
      if (pipelines[i].first == d.choice) {
        work_ = std::move(models[i]);
        out_ = std::move(pipelines[i].second);
        return;
      }
  }

  // About how many decisions will be timed: what the tunables expect (the
  // offered ones and those of the pipeline's passes), and the whole-model
  // A/Bs. Each decision's slice is what is left of the budget over what is
  // left of this count.
  void countExpected(const std::vector<std::shared_ptr<const Tunable>>& all) {
    expected_ = 3;
    for (const auto& t : all)
      if (t->expectedDecisions && (!t->tunesElements() || pipelineUses(t->pass)))
        expected_ += t->expectedDecisions(work_.forward());
  }
  double remaining() const { return o_.budgetSeconds - (timer_->elapsedSeconds() - start_); }

  // Times `candidates` within this decision's share of what is left of the
  // budget (`weight`: in units of one op's share); nullopt when it is spent.
  std::optional<Choice> timeCandidates(const std::vector<Candidate>& candidates, double weight) {
    const double left = remaining();
    if (left <= 0) {
      result_.budgetSpent = true;
      return std::nullopt;
    }
    TuneLimits limits = o_.limits;
    limits.maxSeconds = std::max(0.05, weight * left / static_cast<double>(std::max<size_t>(1, expected_)));
    limits.maxSeconds = std::min(limits.maxSeconds, left);
    decided();
    return Tuner(*timer_).choose(candidates, limits);
  }
  // One expected decision is made (timed, or from the cache: a transformer's
  // twelve layers time one signature each and reuse it eleven times), so
  // that the budget left goes to those still to come, the whole-model A/Bs
  // at the end among them.
  void decided() {
    if (expected_ > 1) --expected_;
  }

  // A whole-model choice that keeps a rewrite, at the other thread counts
  // (TuneOptions::alsoAtThreads): its winners, fastest first, each against
  // the baseline at every other count until one is slower nowhere; that one
  // is chosen, else the baseline. The checks are kept in `c`.
  void confirmElsewhere(Choice& c, const ModelVariants& variants) {
    if (o_.alsoAtThreads.empty() || c.index == 0) return;
    std::vector<size_t> winners;
    for (size_t i = 1; i < c.results.size(); ++i)
      if (c.results[i].verdict == CandidateResult::Verdict::Won) winners.push_back(i);
    std::stable_sort(winners.begin(), winners.end(),
                     [&](size_t a, size_t b) { return c.results[a].ratio < c.results[b].ratio; });
    for (size_t w : winners) {
      bool holds = true;
      for (int threads : o_.alsoAtThreads) {
        c.atThreads.push_back(checkAt(threads, variants.front(), variants[w]));
        if (c.atThreads.back().slower) {
          holds = false;
          break;
        }
      }
      if (holds) {
        c.index = w;
        c.name = c.results[w].name;
        return;
      }
    }
    c.index = 0;
    c.name = c.results[0].name;
  }
  // `challenger` against `baseline` at `threads` intra-op threads, both
  // exported there (load-time packs are made for the count in effect).
  ThreadCheck checkAt(int threads, const ModelVariants::value_type& baseline,
                      const ModelVariants::value_type& challenger) {
    ThreadCheck failed;
    failed.threads = threads;
    failed.challenger = challenger.first;
    failed.slower = true;
    const double left = remaining();
    if (left <= 0) {
      result_.budgetSpent = true;
      failed.error = "the --tune-budget is spent";
      return failed;
    }
    TuneLimits limits = o_.limits;
    limits.maxSeconds = std::min(left, std::max(0.05, kWholeModelWeight * left /
                                                          static_cast<double>(std::max<size_t>(1, expected_))));
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    ThreadCheck check;
    try {
      const std::vector<Candidate> pair = wholeModelCandidates({baseline, challenger}, *ctx_.exampleInputs, o_.device,
                                                          !ctx_.tensorValuesOnly);
      check = Tuner(*timer_).confirm(pair[0], pair[1], threads, limits);
    } catch (const std::exception& ex) {
      failed.error = firstLine(ex.what());
      check = failed;
    }
    at::set_num_threads(before);
    return check;
  }

  // Times `candidates` (if the budget allows) and caches the choice; a
  // whole-model decision (`variants`: what the candidates run) is confirmed
  // at the other thread counts.
  DecisionRecord measureDecision(const std::string& kind, const std::string& node, const std::string& signature,
                                 std::vector<Candidate> candidates, double weight,
                                 const ModelVariants* variants = nullptr) {
    std::vector<std::string> names;
    for (const auto& c : candidates) names.push_back(c.name);
    DecisionRecord d = baselineRecord(kind, node, names);
    d.signature = kind + "|" + signature;
    auto timed = timeCandidates(candidates, weight);
    if (!timed) return skip(std::move(d), "the --tune-budget is spent");
    if (variants && !timed->baselineFailed) {
      candidates.clear();  // their packs are for this count; the checks make their own
      confirmElsewhere(*timed, *variants);
    }
    const Choice& c = *timed;
    d.rounds = c.rounds;
    d.seconds = c.seconds;
    if (c.baselineFailed) return skip(std::move(d), "the baseline failed: " + c.results[0].error);
    d.choice = c.name;
    // The numbers shown: the winner's, else the best alternative's (why it lost).
    size_t shown = c.index;
    for (size_t i = 1; shown == 0 && i < c.results.size(); ++i)
      if (c.results[i].verdict != CandidateResult::Verdict::Failed) shown = i;
    for (size_t i = shown + 1; c.index == 0 && shown != 0 && i < c.results.size(); ++i)
      if (c.results[i].verdict != CandidateResult::Verdict::Failed && c.results[i].ratio < c.results[shown].ratio)
        shown = i;
    d.challenger = shown == 0 ? "" : c.results[shown].name;  // shown == 0: every alternative failed
    d.ratio = c.results[shown].ratio;
    d.low = c.results[shown].low;
    d.high = c.results[shown].high;
    d.note = c.summary();
    d.atThreads = c.atThreads;
    for (size_t i = 1; i < c.results.size(); ++i)
      if (c.results[i].verdict == CandidateResult::Verdict::Failed) d.out.emplace_back(c.results[i].name, c.results[i].error);
    return recordMeasured(std::move(d), true);
  }
  // Keeps a measured decision in the tuning cache under its signature.
  void store(const DecisionRecord& d) {
    CachedDecision cd;
    cd.choice = d.choice;
    cd.candidates = d.candidates;
    cd.ratio = d.ratio, cd.low = d.low, cd.high = d.high, cd.rounds = d.rounds, cd.seconds = d.seconds;
    cd.challenger = d.challenger;
    for (const ThreadCheck& c : d.atThreads) cd.detail["at_threads"].push_back(c.toJson());
    cache_.store(context_, d.signature, cd);
  }
  static DecisionRecord baselineRecord(const std::string& kind, const std::string& node,
                                       const std::vector<std::string>& names) {
    DecisionRecord d;
    d.kind = kind;
    d.node = node;
    d.candidates = names;
    d.choice = names.front();
    return d;
  }
  DecisionRecord record(DecisionRecord d) {
    say(fmt::format("tune [{:>3}] {:5.1f} s  {}", result_.decisions.size() + 1, timer_->elapsedSeconds() - start_,
                    d.line()));
    result_.decisions.push_back(d);
    return d;
  }

  const rewriters::PassRegistry& registry_;
  const TuneOptions& o_;
  const ir::Model& input_;
  ir::Model work_;
  rewriters::PassContext ctx_;
  const Pipeline* pipeline_ = nullptr;
  std::unique_ptr<Timer> ownTimer_;
  Timer* timer_ = nullptr;
  double start_ = 0;
  size_t expected_ = 1;
  CacheContext context_;
  TuningCache cache_;
  Pipeline out_;
  TuneResult result_;
};

}  // namespace

TuneResult tunePipeline(const ir::Model& model, const rewriters::Pipeline& pipeline,
                        const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
                        const TuneOptions& options) {
  return PipelineTuning(model, registry, base, options).run(pipeline);
}

}  // namespace ptopt::tune
